"""benchmarks/reading.py: the ranks and rows by hand on a small score matrix; slow, on the real data (skipped with its
reason when ../shared is not there): a short run prints the three tables and writes the JSON, far above chance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))

from reading import _ranks, _rows, main  # noqa: E402 - the benchmark's folder on the path first


def test_ranks_and_rows_by_hand():
    # entry (i, j): image i read with text j; the diagonal are the pairs that belong together
    scores = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -1.0, -2.0], [-2.0, -4.0, -1.5]])
    assert _ranks(scores, queries_on_rows=True) == [2, 1, 1]  # image 0: text 2 reads better than its own
    assert _ranks(scores, queries_on_rows=False) == [1, 1, 2]  # text 2: image 0 reads it better than image 2
    rows = _rows(scores, scores * 3)
    assert rows[0] == {"direction": "text -> image", "R@1": 66.7, "R@5": 100.0, "R@10": 100.0, "median_rank": 1,
                       "queries": 3}  # fmt: skip
    # less each text's mean over the images: column means -2, -7/3, -4/3
    assert _ranks(scores - scores.mean(dim=0, keepdim=True), queries_on_rows=True) == [1, 1, 2]
    assert rows[3]["R@1"] == 66.7 and rows[3]["median_rank"] == 1


def test_each_familys_rows_are_named_in_its_words_and_chance_is_at_most_100(capsys):
    """A translator's rows were "text -> image" in the JSON (its table said "reference -> sentence"), and a run of
    one sentence printed "chance: R@5 500.0"."""
    from reading import _named, _print

    rows = _named(_rows(torch.zeros(3, 3), torch.zeros(3, 3)), "sentence", "reference")
    assert [r["direction"].split(",")[0] for r in rows][:2] == ["reference -> sentence", "sentence -> reference"]
    _print("one", rows, 1)
    assert "chance: R@1 100.0, R@5 100.0, R@10 100.0" in capsys.readouterr().out


def test_nothing_to_measure_is_said(capsys):
    """Without --flickr8k-root and --multi30k it measured nothing and exited 0."""
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2 and "nothing to measure: give --flickr8k-root" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "multi30k" / "train.de.gz").is_file(), reason=f"real data not found at {DATA}")
def test_a_short_run_on_the_real_data(tmp_path):
    out = tmp_path / "reading.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "reading.py"), "--flickr8k-root", str(DATA / "flickr8k"),
           "--multi30k", str(DATA / "multi30k"), "--text-model", "bahdanau", "--limit", "30",
           "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("| direction | R@1 |") == 2 and "chance: R@1 3.3, R@5 16.7, R@10 33.3" in done.stdout
    found = json.loads(out.read_text())
    caption, text = found["caption"]["rows"], found["translate bahdanau"]["rows"]
    assert found["caption"]["photos"] == 30 and caption[0]["median_rank"] < 8  # chance: 15.5
    assert text[0]["R@1"] > 90 and text[1]["R@5"] > 90 and text[0]["direction"] == "reference -> sentence"
    assert found["caption"]["data"].startswith("Flickr8k test photos (real)")
