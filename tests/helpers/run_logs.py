"""A run's logged metrics as Lightning's CSVLogger writes them, for the run-report tests (tests/core/test_run_report.py
and tests/cli/test_report_command.py)."""

from __future__ import annotations

import csv
from pathlib import Path

FIELDS = ["epoch", "step", "train_loss", "val_loss", "val_Bleu_4", "val_CIDEr", "val_grounding", "val_grounding_mass"]


def write_run(
    root: Path, version: int = 0, steps: int = 60, validations: tuple[int, ...] = (19, 39, 59), first: int = 0
) -> Path:
    """A caption run's metrics.csv as Lightning's CSVLogger writes it: one row per logged step, one per validation.
    ``first``: the step it starts at (a fit resumed from a checkpoint of that step)."""
    folder = root / "lightning_logs" / f"version_{version}"
    folder.mkdir(parents=True)
    with (folder / "metrics.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=FIELDS)
        out.writeheader()
        for step in range(first + 4, steps, 5):
            out.writerow({"epoch": step // 20, "step": step, "train_loss": 4.0 - step / 20})
        for k, step in enumerate(validations):
            bleu = [0.1, 0.5, 0.4][k % 3]
            out.writerow({"epoch": k, "step": step, "val_loss": 3.0 - k, "val_Bleu_4": bleu, "val_CIDEr": 5 * bleu,
                          "val_grounding": 0.2 * (k + 1), "val_grounding_mass": 0.1 * (k + 1)})  # fmt: skip
    return folder
