"""``benchmarks/domain_check.py`` run as a user runs it, on a tiny model: the Flickr8k path on a Flickr8k-shaped folder
(the fixture photos) and the shapes path; --write records the check (and what the photos show) in the model file,
whose weights stay as they were, and the JSON holds what the table printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.flickr8k import write_original
from helpers.tiny_captioner import tiny_model_file

from captioning.model.captioner import Captioner

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "domain_check.py"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_flickr8k_path_calibrates_measures_and_writes_the_check(tmp_path):
    root = write_original(tmp_path / "flickr8k")  # train: coffee, chelsea; val: rocket; test: astronaut
    model = tiny_model_file(tmp_path / "m.pt")
    before = torch.load(model, weights_only=True)["state_dict"]
    args = [
        str(model),
        "--flickr8k",
        str(root),
        "--cache",
        str(tmp_path / "f.pt"),
        "--json",
        str(tmp_path / "d.json"),
        "--min-held-out",
        "1",
    ]  # four photos: calibrated on the one val photo on purpose (training would not)
    out = _run(*args, "--about", "cups and cats", "--write", "--sweep", "1,2")
    assert "2 prototypes;" in out and "| val | 1 |" in out and "| test | 1 |" in out
    report = json.loads((tmp_path / "d.json").read_text())
    outside = report["outside"]
    assert [r["photo"] for r in outside[:5]] == [
        "bundled/astronaut.png", "bundled/camera.png", "bundled/chelsea.png", "bundled/coffee.png", "bundled/rocket.jpg"
    ]  # fmt: skip
    assert all(r["noted"] == (r["feature"] or r["pixel"]) for r in outside)
    assert [row["prototypes"] for row in report["sweep"]] == [1, 2]
    captioner = Captioner.load(model)
    check = captioner.domain_check
    assert check["prototypes"].shape[0] == 2 and check["threshold"] == report["threshold"] and check["photos"]
    assert captioner.domain_about == "cups and cats" and "(cups and cats)" in captioner.note()
    after = torch.load(model, weights_only=True)["state_dict"]
    assert all(torch.equal(after[k], v) for k, v in before.items())
    # the features come from --cache the second time: the same check
    assert "features from" in _run(*args) and Captioner.load(model).domain_check["threshold"] == check["threshold"]


@pytest.mark.slow
def test_shapes_path_flags_at_most_two_percent_of_its_val_scenes(tmp_path):
    model = tiny_model_file(tmp_path / "m.pt")
    out = _run(str(model), "--shapes", "60", "--held-out", "50", "--write", "--domain", "synthetic shapes")
    rows = {
        line.split(" | ")[0]: line for line in out.splitlines() if line.startswith("| val") or line.startswith("| test")
    }
    assert rows["| val"].startswith("| val | 50 | 0.0% |") or rows["| val"].startswith("| val | 50 | 2.0% |")
    captioner = Captioner.load(model)
    assert captioner.domain == "synthetic shapes" and "photos" not in captioner.domain_check
