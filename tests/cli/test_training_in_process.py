"""Both trainers run in process, as a notebook or a script runs them (issue 57's small gaps): the model file's path
printed as the user would type it, no warning about a Jupyter kernel's own argv, and torch's thread count given back
after a run with ``model.cpu_threads``."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

from captioning.commands.train import caption_train_cli
from text_attn.translation.train_cli import text_train_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = {
    "caption": (caption_train_cli, FIX / "captions" / "tiny_shapes.yaml"),
    "text": (text_train_cli, FIX / "text" / "tiny_reorder.yaml"),
}


@pytest.mark.parametrize("family", sorted(RUNS))
def test_a_fit_from_a_notebook(family, cli_run_in_tmp, monkeypatch, capsys):
    train, config = RUNS[family]
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/run/jupyter/kernel-1.json"])  # a kernel's
    set_to: list[int] = []
    real_set = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (set_to.append(n), real_set(n)))
    torch.set_num_threads(3)  # the caller's own count
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(["fit", "--config", str(config), "--trainer.logger", "true", "--model.cpu_threads", "1"])
    assert not [w for w in caught if "argv" in str(w.message)], [str(w.message) for w in caught]
    assert sys.argv[1:] == ["-f", "/run/jupyter/kernel-1.json"]  # the process's argv, as it was
    # no default_root_dir or export_path: the file lies under the working directory and is named from it
    assert "wrote model file: lightning_logs/version_0/model.pt (" in capsys.readouterr().out
    assert (cli_run_in_tmp / "lightning_logs" / "version_0" / "model.pt").is_file()
    assert set_to == [3, 1, 3] and torch.get_num_threads() == 3  # 1 during the run, then the caller's 3 again
