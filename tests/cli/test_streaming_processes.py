"""Streaming from LitData chunks in real processes (issue 59): 2 CPU processes (gloo) train on disjoint shares in
equal numbers of batches and validate to the numbers of 1 process; a 2-process run resumed from a mid-epoch
last.ckpt ends with the uninterrupted 2-process run's weights; `text-train fit` killed with SIGKILL mid-epoch and
resumed ends with the uninterrupted run's weights. Slow: every run launches Python processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers.resumable import kill_at_step
from helpers.scene_corpus import write_folder

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DDP = ["--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu"]
TOOLS = {"text": "text-train", "caption": "caption-train"}
CKPT = "pytorch_lightning.callbacks.ModelCheckpoint"


def run(family: str, args: list[str], cwd: Path, probe: Path | None = None) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": f"{TESTS / 'helpers'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    extra = ["--trainer.callbacks+=ddp_probe.Probe", f"--trainer.callbacks.out={probe}"] if probe else []
    done = subprocess.run([str(BIN / TOOLS[family]), *args, *extra], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(probe.glob("rank*.json"))] if probe else []


def chunked(family: str, tmp_path: Path, every: int = 1) -> str:
    """A config with last.ckpt every `every` steps over a corpus optimized to tmp_path/chunks; returns the config."""
    if family == "text":
        cfg = yaml.safe_load((TESTS / "fixtures/text/tiny_reorder.yaml").read_text())
        cfg["data"].update(train_size=200, val_size=15)  # 200 / (2 x 16): 7 batches a rank, the last short
        cfg["model"]["network"]["dropout"] = 0.3  # the random state must survive too
    else:
        images, tsv = write_folder(tmp_path / "photos", 50)  # 34 train images x 3 captions
        cfg = yaml.safe_load((TESTS / "fixtures/captions/tiny_shapes.yaml").read_text())
        cfg["data"] = {"source": "folder", "image_dir": str(images), "captions_tsv": str(tsv), "val_size": 7,
                       "test_size": 8, "batch_size": 16, "cache_features": True}  # fmt: skip
        cfg["model"]["decoder"]["dropout"] = 0.3
    cfg["trainer"].update(limit_val_batches=None, enable_checkpointing=True)
    cfg["trainer"]["callbacks"] = [
        {"class_path": CKPT, "init_args": {"save_last": True, "save_top_k": 0, "every_n_train_steps": every}}
    ]
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run(family, ["optimize", "--config", str(path), "--out", "chunks"], tmp_path)
    return str(path)


def last(root: Path) -> dict:
    return torch.load(next(root.rglob("last.ckpt")), weights_only=True)


def same_weights(a: dict, b: dict) -> None:
    assert a["global_step"] == b["global_step"]
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, msg=k)


@pytest.mark.parametrize("family", ["text", "caption"])
def test_two_processes_stream_disjoint_shares_and_score_the_whole_split(family, tmp_path):
    cfg = chunked(family, tmp_path)
    fit = ["fit", "--config", cfg, "--data.root", "chunks", *DDP, "--trainer.max_steps", "3"]
    ranks = run(family, fit, tmp_path, tmp_path / "fit")
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert len(ranks[0]["batches"]) == len(ranks[1]["batches"]) == 3
    seen = [{i for b in r["batches"] for i in b} for r in ranks]
    assert seen[0] and seen[1] and not seen[0] & seen[1]  # each rank reads its own chunks' samples
    ckpt = str(next(tmp_path.rglob("last.ckpt")))
    val = ["validate", "--config", cfg, "--data.root", "chunks", "--ckpt_path", ckpt]
    two = run(family, [*val, *DDP], tmp_path, tmp_path / "v2")
    one = run(family, val, tmp_path, tmp_path / "v1")
    metric = "val_bleu" if family == "text" else "val_Bleu_4"
    assert metric in one[0]["metrics"] and len(two) == 2
    for rank in two:  # the evaluation splits are read by index and gathered: the 1-process numbers
        for name, value in one[0]["metrics"].items():
            if not name.endswith("_loss"):
                assert rank["metrics"][name] == pytest.approx(value, abs=1e-9), name


def test_two_processes_resumed_mid_epoch_end_with_the_uninterrupted_weights(tmp_path):
    cfg = chunked("text", tmp_path)
    fit = ["fit", "--config", cfg, "--data.root", "chunks", *DDP]
    run("text", [*fit, "--trainer.max_steps", "12", "--trainer.default_root_dir", "a"], tmp_path)
    run("text", [*fit, "--trainer.max_steps", "9", "--trainer.default_root_dir", "b"], tmp_path)
    stopped = last(tmp_path / "b")
    assert stopped["global_step"] == 9 and 9 % 7 != 0  # mid-epoch 1 of 7 batches a rank
    ckpt = str(next((tmp_path / "b").rglob("last.ckpt")))
    run("text", [*fit, "--trainer.max_steps", "12", "--trainer.default_root_dir", "c", "--ckpt_path", ckpt], tmp_path)
    same_weights(last(tmp_path / "a"), last(tmp_path / "c"))
    assert any(not torch.equal(stopped["state_dict"][k], v) for k, v in last(tmp_path / "a")["state_dict"].items())


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_streaming_run(tmp_path):
    cfg = chunked("text", tmp_path, every=3)
    steps = 40
    fit = [str(BIN / "text-train"), "fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", str(steps)]
    subprocess.run([*fit, "--trainer.default_root_dir", "full"], cwd=tmp_path, check=True, capture_output=True)
    step = kill_at_step([*fit, "--trainer.default_root_dir", "killed"], tmp_path, tmp_path / "killed", 16)
    assert step >= 16, "no checkpoint appeared in time"
    saved = last(tmp_path / "killed")
    assert 16 <= saved["global_step"] < steps and saved["global_step"] % 13 != 0, saved["global_step"]  # mid-epoch
    ckpt = str(next((tmp_path / "killed").rglob("last.ckpt")))
    resume = [*fit, "--trainer.default_root_dir", "resumed", "--ckpt_path", ckpt]
    subprocess.run(resume, cwd=tmp_path, check=True, capture_output=True)
    same_weights(last(tmp_path / "full"), last(tmp_path / "resumed"))
