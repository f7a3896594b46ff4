"""A crash does not lose the run: `text-train fit` killed with SIGKILL mid-epoch, then resumed from its last.ckpt,
ends with the same weights as an uninterrupted run of the same seed and step count. Slow: three real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers.resumable import kill_at_step

pytestmark = pytest.mark.slow
CONFIG = Path(__file__).resolve().parent.parent / "fixtures/text/tiny_reorder.yaml"
TEXT_TRAIN = str(Path(sys.executable).parent / "text-train")
STEPS = 60


def write_config(tmp_path: Path) -> str:
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["data"].update(train_size=1600)  # 100 batches an epoch: the kill lands mid-epoch
    cfg["model"]["network"]["dropout"] = 0.3  # the random state must survive too
    cfg["trainer"].update(max_steps=STEPS, enable_checkpointing=True)
    cfg["trainer"]["callbacks"] = [
        {
            "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
            "init_args": {"save_last": True, "save_top_k": 0, "every_n_train_steps": 5},
        }
    ]
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def last_state(root: Path) -> dict:
    return torch.load(next(root.rglob("last.ckpt")), weights_only=True)


def test_sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run(tmp_path):
    cfg = write_config(tmp_path)
    fit = [TEXT_TRAIN, "fit", "--config", cfg]
    subprocess.run([*fit, "--trainer.default_root_dir", "full"], cwd=tmp_path, check=True, capture_output=True)

    step = kill_at_step([*fit, "--trainer.default_root_dir", "killed"], tmp_path, tmp_path / "killed", 10)
    assert step >= 10, "no checkpoint appeared in time"
    saved = last_state(tmp_path / "killed")  # written atomically: whole, whatever moment the kill came
    assert 0 < saved["global_step"] < STEPS and saved["global_step"] % 100 != 0  # mid-epoch

    ckpt = str(next((tmp_path / "killed").rglob("last.ckpt")))
    resume = [*fit, "--trainer.default_root_dir", "resumed", "--ckpt_path", ckpt]
    subprocess.run(resume, cwd=tmp_path, check=True, capture_output=True)
    full, resumed = last_state(tmp_path / "full"), last_state(tmp_path / "resumed")
    assert full["global_step"] == resumed["global_step"] == STEPS
    for k, v in full["state_dict"].items():
        torch.testing.assert_close(resumed["state_dict"][k], v, msg=k)
    assert any(not torch.allclose(saved["state_dict"][k], v) for k, v in full["state_dict"].items())


def test_ctrl_c_mid_fit_is_one_line_exit_code_130_and_last_resumes(tmp_path):
    """Ctrl-C (SIGINT) once last.ckpt holds a few steps: Lightning shut down and exited with code 1, saying nothing of
    where it stopped; now exit code 130 and one line naming the step and the checkpoint --ckpt_path last resumes."""
    import signal
    import time

    cfg = write_config(tmp_path)
    cfg_text = Path(cfg).read_text().replace(f"max_steps: {STEPS}", "max_steps: 100000")
    Path(cfg).write_text(cfg_text)
    root = tmp_path / "run"
    proc = subprocess.Popen([TEXT_TRAIN, "fit", "--config", cfg, "--trainer.default_root_dir", str(root),
                             "--model.export_path", str(tmp_path / "m.pt")], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while not list(root.rglob("last.ckpt")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("text-train: interrupted at step ") and "--ckpt_path last resumes from it" in last, last
    assert "Traceback" not in err and not (tmp_path / "m.pt").exists()  # no model file from an interrupted fit
