"""The tiny test configs (tests/fixtures) with the shipped configs' checkpointing, for tests that resume a fit."""

from __future__ import annotations

from pathlib import Path

import yaml

FIX = Path(__file__).parent.parent / "fixtures"
CKPT = "pytorch_lightning.callbacks.ModelCheckpoint"


def resumable_config(tmp_path: Path, family: str, every: int = 4) -> Path:
    """The tiny test config with the shipped configs' checkpointing: last.ckpt every `every` steps, best by metric."""
    src = FIX / ("text/tiny_reorder.yaml" if family == "text" else "captions/tiny_shapes.yaml")
    cfg = yaml.safe_load(src.read_text())
    monitor = "val_bleu" if family == "text" else "val_Bleu_4"
    cfg["trainer"].update(
        enable_checkpointing=True,
        callbacks=[
            {"class_path": CKPT, "init_args": {"monitor": monitor, "mode": "max"}},
            {
                "class_path": CKPT,
                "init_args": {"save_last": True, "save_top_k": 0, "every_n_train_steps": every},
            },
        ],
    )
    if family == "text":
        cfg["model"]["network"]["dropout"] = 0.3  # random state must be restored for the weights to match
    else:
        cfg["model"]["decoder"]["dropout"] = 0.3
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def kill_at_step(cmd: list[str], cwd: Path, root: Path, step: int, timeout: float = 240) -> int:
    """Start ``cmd`` (a fit writing under ``root``) in its own process group and SIGKILL the whole group once its
    last.ckpt holds ``step`` or more steps (what a crash mid-run leaves); the step it reached."""
    import os
    import signal
    import subprocess
    import time

    import torch

    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, reached = time.monotonic() + timeout, 0
    while reached < step and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        found = list(root.rglob("last.ckpt"))
        if found:
            try:
                reached = torch.load(found[0], weights_only=True)["global_step"]
            except Exception:  # noqa: BLE001 - being replaced as we read: try again
                continue
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return reached
