"""``text-train optimize --out`` / ``caption-train optimize --out`` that cannot take the chunks: one line, before the
corpus is read (text_attn.core.optimize_cli.out_problem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from text_attn.translation.train_cli import train_main as text_main

FIX = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    pass


def test_an_out_folder_that_cannot_take_the_chunks_is_one_line_before_any_work(tmp_path, capsys):
    """A file for --out was said after every photo was encoded; a split folder holding another LitData dataset ended
    in a traceback, after the splits before it were written beside the user's files."""
    cfg = str(FIX / "text/tiny_reorder.yaml")
    Path("afile").write_text("mine")
    Path("theirs/val").mkdir(parents=True)
    Path("theirs/val/index.json").write_text("{}")
    for out, said in [("afile", "afile is a file, not a folder"), ("afile/sub", "afile is a file, not a folder"),
                      ("theirs", "theirs/val holds a LitData dataset this command did not write")]:  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            text_main(["optimize", "--config", cfg, "--out", out])
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and err.startswith(f"text-train optimize: error: --out {out}: {said}"), err
    assert sorted(p.name for p in Path("theirs").rglob("*")) == ["index.json", "val"]  # nothing written beside them
