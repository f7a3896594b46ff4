"""``--version`` on every console script: ``PROG VERSION``, exit code 0, at once (no torch, no Lightning: the
training commands answer it before their parser is built); the version read from the installed package, else from
the checkout's pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from text_attn.core import version

MAINS = {  # console script -> (module, its main taking argv)
    "caption": ("captioning.commands.caption", "caption_main"),
    "caption-train": ("captioning.commands.train", "train_main"),
    "caption-export": ("captioning.commands.export", "export_main"),
    "text-train": ("text_attn.translation.train_cli", "train_main"),
    "translate": ("text_attn.translation.translate_cli", "translate_main"),
    "text-export": ("text_attn.translation.export", "export_main"),
    "attention-serve": ("attention_serve.cli", "serve_main"),
}


def test_every_command_says_its_version_without_importing_torch():
    """One interpreter runs each command's main with --version in turn (another one costs ~0.3 s each); torch is
    looked for after all seven."""
    probe = ["import importlib, sys"]
    for module, main in MAINS.values():
        probe += ["try:", f"    importlib.import_module({module!r}).{main}(['--version'])",
                  "except SystemExit as e:", "    print('exit', e.code)"]  # fmt: skip
    probe += ["print('torch' in sys.modules, 'pytorch_lightning' in sys.modules)"]
    done = subprocess.run([sys.executable, "-c", "\n".join(probe)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    expected = [line for prog in MAINS for line in (f"{prog} {version.toolkit_version()}", "exit 0")]
    assert done.stdout.splitlines() == [*expected, "False False"] and done.stderr == "", done.stderr[-2000:]


def test_a_checkout_that_is_not_installed_reads_its_pyproject(monkeypatch):
    import importlib.metadata

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    own = next(line.split('"')[1] for line in pyproject.splitlines() if line.startswith("version = "))
    assert version.toolkit_version() == f"{own} (a checkout, not installed)"
    assert version.version_line("translate") == f"translate {own} (a checkout, not installed)"


@pytest.mark.parametrize("prog", ["caption", "translate", "text-export", "attention-serve"])
def test_help_lists_version(prog, capsys):
    import importlib

    module, main = MAINS[prog]
    with pytest.raises(SystemExit):
        getattr(importlib.import_module(module), main)(["--help"])
    assert "--version" in capsys.readouterr().out
