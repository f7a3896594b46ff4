"""benchmarks/attention_sharpness.py: each word's map summed up by hand (uniform: peak 1, top-9 mass 9/L, entropy
log L; all on one region: L, 1, 0), the means over words then photos, and a run over real photos with a tiny model
whose table and JSON agree and stay within those bounds."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch
from helpers.tiny_captioner import tiny_model_file

from captioning.model.bundled import DEMO_PHOTOS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from attention_sharpness import main, word_stats  # noqa: E402 - the benchmarks' folder on the path first


def test_each_words_map_by_hand():
    uniform = word_stats(torch.full((3, 16), 1 / 16))
    assert uniform["peak"] == pytest.approx(1) and uniform["top9"] == pytest.approx(9 / 16)
    assert uniform["entropy"] == pytest.approx(math.log(16))
    one = word_stats(torch.eye(16)[:2])  # two words, each all on one region
    assert (one["peak"], one["top9"], one["entropy"]) == (pytest.approx(16), pytest.approx(1), pytest.approx(0))
    mixed = word_stats(torch.stack([torch.full((16,), 1 / 16), torch.eye(16)[0]]))  # the mean over the two words
    assert mixed["peak"] == pytest.approx(8.5) and mixed["entropy"] == pytest.approx(math.log(16) / 2)
    assert mixed["top9"] == pytest.approx((9 / 16 + 1) / 2) and mixed["words"] == 2


@pytest.mark.long  # captions three photos (~2 s)
def test_a_run_prints_and_writes_the_same_numbers(tmp_path, capsys):
    model = tiny_model_file(tmp_path / "tiny.pt")
    photos = [str(p) for p in DEMO_PHOTOS[:3]]
    given = [a for p in photos for a in ("--photo", p)]
    args = ["--model", f"tiny={model}", *given, "--json", str(tmp_path / "s.json")]
    assert main(args) == 0
    row = capsys.readouterr().out.splitlines()[2]
    got = json.loads((tmp_path / "s.json").read_text())["models"]["tiny"]
    assert got["photos"] == 3 and got["regions"] == 16
    assert 1 <= got["peak"] <= 16 and 9 / 16 <= got["top9"] <= 1 and 0 <= got["entropy"] <= math.log(16) + 1e-6
    assert row == f"| tiny | 3 | {got['peak']:.2f} | {100 * got['top9']:.1f}% | {got['entropy']:.2f} (uniform 2.77) |"
    with pytest.raises(SystemExit):
        main(["--model", "no-file-named", "--photo", photos[0]])
    assert "expected NAME=FILE" in capsys.readouterr().err
