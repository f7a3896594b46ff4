"""The budget learning-rate schedule in caption-train: a fit with the schedule really ends at rate zero, and an
unknown schedule is one line. (The schedule itself: tests/core/test_lr_budget.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from captioning.commands.train import caption_train_cli, train_main

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


@pytest.mark.slow
def test_caption_fit_with_the_budget_schedule_ends_at_rate_zero(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    n = torch.get_num_threads()
    cfg = yaml.safe_load(Path(CONFIG).read_text())
    cfg["trainer"].update(max_steps=6, max_epochs=None)
    cfg["model"].update(lr_schedule="budget", export_path=str(tmp_path / "m.pt"))
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    try:
        cli = caption_train_cli(
            ["fit", "--config", str(tmp_path / "cfg.yaml"), "--trainer.default_root_dir", str(tmp_path)]
        )
    finally:
        torch.set_num_threads(n)
    assert cli.trainer.global_step == 6
    assert cli.trainer.optimizers[0].param_groups[0]["lr"] == 0.0
    assert cli.trainer.lr_scheduler_configs[0].interval == "step"


def test_an_unknown_schedule_is_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", CONFIG, "--model.lr_schedule", "cosine"])
    assert exc.value.code == 2
    assert "unknown lr_schedule 'cosine'" in capsys.readouterr().err.strip().splitlines()[-1]
