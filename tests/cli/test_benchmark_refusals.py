"""The benchmark scripts meet bad input as the commands do: one line naming it and exit code 2, never a traceback
(benchmarks/_runs.run_main), and an output file in a folder that does not exist is refused when the options are read,
before any measuring (text_attn.core.errors.new_file)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from text_attn.core.errors import new_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _refused(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[-1]


def test_a_missing_model_or_data_root_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    line = _refused("domain_check.py", f"{gone}.pt", "--shapes", "2")
    assert line == f"domain_check.py: error: {gone}.pt: model file not found"
    out = str(tmp_path / "x")
    line = _refused("flickr8k.py", "--data-root", str(gone), "--out", out, "--quick", "--stages", "soft")
    assert line == f"flickr8k.py: error: {gone}: data root not found"


def test_an_output_in_a_missing_folder_is_refused_before_the_work(tmp_path):
    line = _refused("transformer_speed.py", "--json", str(tmp_path / "no" / "t.json"))
    assert f"cannot write {tmp_path / 'no' / 't.json'}: the folder {tmp_path / 'no'} does not exist" in line
    assert new_file(str(tmp_path / "t.json")) == tmp_path / "t.json"
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder"):
        new_file(str(tmp_path))


def test_a_count_below_one_is_refused_by_name(tmp_path):
    """--shapes 0 fell into the Flickr8k branch (a TypeError), -3 an empty torch.cat; --iterations -1 aligned with no
    EM at all and said nothing."""
    from captioning.model.bundled import SHAPES_MODEL
    from text_attn.core.errors import positive_int

    for count in ("0", "-3"):
        line = _refused("domain_check.py", str(SHAPES_MODEL), "--shapes", count)
        assert line == f"domain_check.py: error: argument --shapes: must be at least 1, got {int(count)}"
    (tmp_path / "s.txt").write_text("ein hund\n")
    (tmp_path / "t.txt").write_text("a dog\n")
    line = _refused("word_align.py", str(tmp_path / "s.txt"), str(tmp_path / "t.txt"), "--out", str(tmp_path / "o"),
                    "--iterations", "-1")  # fmt: skip
    assert line == "word_align.py: error: argument --iterations: must be at least 1, got -1"
    assert positive_int("3") == 3
