"""benchmarks/jpeg_step.py: a folder's JPEG step read from its photos' tables, and recorded in a model file (its
weights untouched); a folder that is not of one step records none; a path that is not a folder is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.scripts import run_main
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.model.captioner import Captioner
from text_attn.core.modelfile import update_info

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "jpeg_step.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def _photos(folder: Path, quality: int, n: int = 3, png: bool = False) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        img = Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))
        if png and i == 0:
            img.save(folder / f"{i}.png")
        else:
            img.save(folder / f"{i}.jpg", quality=quality)
    return folder


@pytest.mark.slow
def test_the_step_is_read_and_recorded_and_the_weights_kept(tmp_path):
    model = tiny_model_file(tmp_path / "m.pt")
    update_info(model, {}, merge={"preprocess": {"source_side": 32}, "encoder": {"source_side": 32}})
    before = torch.load(model, weights_only=True)["state_dict"]
    done = _run(str(_photos(tmp_path / "jpegs", 85)), "--write", str(model))
    assert done.returncode == 0, done.stderr
    assert "| 85 | 4:2:0 | 32 x 32 | 3 |" in done.stdout and "one JPEG step: quality 85, 4:2:0" in done.stdout
    pre = Captioner.load(model).preprocess
    assert (pre.jpeg_quality, pre.jpeg_subsampling, pre.squash_filter) == (85, "4:2:0", "bicubic")
    after = torch.load(model, weights_only=True)["state_dict"]
    assert after.keys() == before.keys() and all(torch.equal(after[k], v) for k, v in before.items())
    # a folder with a PNG among its photos: no one step, and the model file records none
    done = _run(str(_photos(tmp_path / "mixed", 85, png=True)), "--write", str(model))
    assert done.returncode == 0 and "no one JPEG step" in done.stdout and "| not a JPEG" in done.stdout
    assert Captioner.load(model).preprocess.jpeg_quality is None


def test_a_path_that_is_not_a_folder_is_one_line(tmp_path, capsys):
    code, _, err = run_main(SCRIPT, capsys, tmp_path / "nowhere")
    assert code == 2 and err.strip() == f"jpeg_step: error: {tmp_path / 'nowhere'}: not a folder"
