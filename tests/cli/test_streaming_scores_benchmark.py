"""benchmarks/streaming_scores.py on photos laid out as Flickr8k is downloaded (--flickr8k-root): the shipped
flickr8k_lite2_soft config as it is, readers folder and random, each run's scores and training steps a second in the
table, the difference of the two readers' means against its standard error, the JSON; a folder that is no Flickr8k
download is one line. The fits run as the real commands (subprocesses): slow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.scene_corpus import write_flickr8k

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from streaming_scores import REAL_STEPS, main, parse_args  # noqa: E402 - the benchmark's folder on the path first


def test_a_folder_that_is_no_flickr8k_download_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(["--flickr8k-root", str(tmp_path)])
    assert exc.value.code == 2 and "no Flickr8k_text/ there" in capsys.readouterr().err.splitlines()[-1]
    root = write_flickr8k(tmp_path / "f8k", 10)
    args = parse_args(["--flickr8k-root", str(root)])
    assert args.readers == ["folder", "random"] and args.max_steps == REAL_STEPS  # no chunks of real photos
    assert parse_args(["--flickr8k-root", str(root), "--max-steps", "5"]).max_steps == 5


@pytest.mark.slow
def test_real_layout_runs_both_readers_and_prints_scores_and_speed(tmp_path, capsys):
    root = write_flickr8k(tmp_path / "f8k", 30)  # 18 train photos, 90 pairs: 2 batches of 64 an epoch
    out = tmp_path / "runs"
    argv = ["--flickr8k-root", str(root), "--out", str(out), "--seeds", "0", "1", "--max-steps", "2",
            "--json", str(tmp_path / "scores.json")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Flickr8k's photos (real); 2 steps a run; val split, greedy, last validation" in printed
    assert (
        "| seed | folder + feature cache: BLEU-4 / CIDEr / steps a second | the same, sort_by_length false: " in printed
    )
    assert "CIDEr: the same, sort_by_length false - folder + feature cache = " in printed
    assert "at the sorted run's training time" in printed and printed.count("random reach step ") == 2
    found = json.loads((tmp_path / "scores.json").read_text())["results"]
    assert set(found) == {"folder", "random"} and [r["seed"] for r in found["random"]] == [0, 1]
    assert all(r["step"] >= 1 and r["steps_s"] > 0 for rows in found.values() for r in rows)
    assert not (out / "chunks").exists()  # nothing optimized for the folder's readers
    assert (
        main(argv) == 0 and capsys.readouterr().out.count("finished earlier: kept") == 4
    )  # a second call adds nothing


@pytest.mark.slow
def test_the_rehearsal_corpus_runs_the_chunks_beside_the_folder(tmp_path, capsys):
    """The benchmark's first question (do chunks train as well as the folder?) on a small rehearsal corpus: optimize,
    both readers, the difference against its standard error, the JSON (its --json crashed on the Path new_file
    gives, after the runs)."""
    argv = ["--out", str(tmp_path / "runs"), "--images", "80", "--seeds", "0", "1", "--max-steps", "6",
            "--readers", "folder", "chunks", "--json", str(tmp_path / "scores.json")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "rehearsal corpus, 80 images; 6 steps a run" in printed and "[optimize]" in printed  # an epoch: 6 steps
    assert "CIDEr: feature chunks - folder + feature cache = " in printed
    assert "sorted run's training time" not in printed
    found = json.loads((tmp_path / "scores.json").read_text())
    assert set(found["results"]) == {"folder", "chunks"} and found["args"]["json"] == str(tmp_path / "scores.json")
