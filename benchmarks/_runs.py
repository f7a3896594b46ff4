"""What the benchmarks share: train a config through its CLI once, timed, and remember how long it took."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path


def timed_fit(cli: Callable, config: Path, out: Path, extra: list[str] = ()) -> tuple[Path, float]:
    """``cli(["fit", ...])`` with its logs and model file under ``out``; returns (model file, wall minutes)."""
    model = out / "model.pt"
    t0 = time.perf_counter()
    cli(
        [
            "fit",
            "--config",
            str(config),
            "--trainer.default_root_dir",
            str(out),
            "--trainer.enable_progress_bar",
            "false",
            "--model.export_path",
            str(model),
            *extra,
        ]
    )
    minutes = (time.perf_counter() - t0) / 60
    (out / "train_minutes.txt").write_text(f"{minutes:.2f}\n")
    return model, minutes


def recorded_minutes(out: Path) -> float:
    """The training minutes ``timed_fit`` wrote for ``out`` (NaN when the model was made otherwise)."""
    stamp = out / "train_minutes.txt"
    return float(stamp.read_text()) if stamp.exists() else math.nan
