"""A mistyped path is answered at once: a missing model file (caption, translate) and IMAGE arguments none of which
exists (caption) are refused before torch is imported, in the words and with the exit code the run gives them after
loading; a run that writes records for its failed images still writes them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CAPTION = ("captioning.commands.caption", "caption_main")
TRANSLATE = ("text_attn.translation.translate_cli", "translate_main")
TWO = ["gone.jpg", "lost.png"]


def _probe(entry: tuple[str, str], argv: list[str], cwd) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, whether torch was imported) of the command's main run in a fresh interpreter."""
    module, main = entry
    probe = (f"import sys\nfrom {module} import {main}\ntry:\n    code = {main}({argv!r})\n"
             "except SystemExit as e:\n    code = e.code\nprint('EXIT', code, 'torch' in sys.modules)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=cwd)
    *out, last = done.stdout.rstrip("\n").split("\n")
    _, code, torch = last.split()
    return int(code), "\n".join(out), done.stderr, torch == "True"


@pytest.mark.parametrize(
    ("entry", "argv", "code", "lines"),
    [
        (CAPTION, ["gone.jpg"], 1, ["caption: error: gone.jpg: no such file"]),
        (CAPTION, TWO, 1, [f"caption: error: {n}: no such file" for n in TWO]),
        (CAPTION, ["--model", "nope.pt", "photo.jpg"], 2, ["caption: error: nope.pt: model file not found"]),
        (TRANSLATE, ["--model", "nope.pt", "Hallo"], 2, ["translate: error: nope.pt: model file not found"]),
    ],
)
def test_a_missing_file_is_refused_before_torch_is_imported(entry, argv, code, lines, tmp_path):
    (tmp_path / "photo.jpg").write_bytes(b"")  # there, so that only the model is missing
    got, _, err, torch = _probe(entry, argv, tmp_path)
    assert (got, err.splitlines(), torch) == (code, lines, False)


def test_the_same_refusals_come_from_a_run_that_writes_records(tmp_path):
    """--json writes a record for each failed image, so it keeps to the run (torch loaded); its words are the same."""
    got, out, err, torch = _probe(CAPTION, ["gone.jpg", "--json"], tmp_path)
    assert got == 1 and torch and err.splitlines() == ["caption: error: gone.jpg: no such file"]
    assert [r["error"] for r in json.loads(out)] == ["gone.jpg: no such file"]
