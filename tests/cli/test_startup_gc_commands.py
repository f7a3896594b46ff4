"""Every console script that loads a model gives the garbage collector back once its model is in
(text_attn.core.startup_gc): run in-process after hold(), as its console script starts, each command ends released."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from helpers.toml_reader import toml_reader

from text_attn.core import startup_gc

FIX = Path(__file__).parent.parent / "fixtures"
PHOTO = str(FIX / "images" / "chelsea.png")


def _caption(tmp_path):
    from captioning.commands.caption import caption_main

    return caption_main([PHOTO, "--model", str(tiny_model_file(tmp_path / "c.pt")), "--max-len", "3"])


def _translate(tmp_path):
    from text_attn.translation.translate_cli import translate_main

    return translate_main(["--model", str(tiny_word_model_file(tmp_path / "t.pt")), "ein mann"])


def _caption_export(tmp_path):
    from captioning.commands.export import export_main

    return export_main([str(tiny_model_file(tmp_path / "c.pt")), str(tmp_path / "out.pt")])


def _text_export(tmp_path):
    from text_attn.translation.export import export_main

    return export_main([str(tiny_word_model_file(tmp_path / "t.pt")), str(tmp_path / "out.pt")])


def _text_optimize(tmp_path):
    from text_attn.translation.train_cli import train_main

    train_main(["optimize", "--config", str(FIX / "text" / "tiny_reorder.yaml"), "--out", str(tmp_path / "chunks")])
    return 0


def _serve(tmp_path):
    from attention_serve.cli import _parser, build_server

    args = _parser().parse_args(["--caption-model", str(tiny_model_file(tmp_path / "c.pt")),
                                 "--text-model", str(tiny_word_model_file(tmp_path / "t.pt"))])  # fmt: skip
    build_server(args)
    return 0


@pytest.mark.parametrize("command", [_caption, _translate, _caption_export, _text_export, _text_optimize, _serve],
                         ids=["caption", "translate", "caption-export", "text-export", "text-train optimize",
                              "attention-serve"])  # fmt: skip
def test_every_command_that_loads_a_model_releases_it(command, tmp_path, capsys):
    before = gc.get_threshold()
    startup_gc.hold()  # as its console script does (the test process's imports are frozen already: tests/conftest.py)
    try:
        assert command(tmp_path) == 0
        assert not startup_gc.held() and gc.get_threshold() == before
    finally:
        startup_gc.release()


def test_a_training_run_releases_it_once_its_classes_are_built(cli_run_in_tmp):
    """text-train and caption-train share the one LightningCLI (text_attn.core.lightning_cli)."""
    from text_attn.translation.train_cli import text_train_cli

    before = gc.get_threshold()
    startup_gc.hold()
    try:
        text_train_cli(["fit", "--config", str(FIX / "text" / "tiny_reorder.yaml"), "--trainer.max_steps", "1"])
        assert not startup_gc.held() and gc.get_threshold() == before
    finally:
        startup_gc.release()


def test_every_console_script_starts_held():
    """Each [project.scripts] entry is one of the two wrappers that hold the collector first (fast_exit.leaving,
    startup_gc.holding: both tested in tests/core/test_startup_gc.py), never a bare main."""
    import importlib

    tomllib = toml_reader()
    with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert len(scripts) == 7
    for name, target in scripts.items():
        module, func = target.split(":")
        entry = getattr(importlib.import_module(module), func)
        assert (entry.__doc__ or "").startswith("The console script: "), name
