"""text_attn.core.run_checkpoints.best_recorded: the best model a checkpoint records, as Lightning records it
(relative to the folder its fit ran in), found from any working folder."""

from __future__ import annotations

from pathlib import Path

import torch

from text_attn.core.run_checkpoints import best_recorded


def _run(root, recorded: str):
    """A run's checkpoints folder under ``root``: its best file and a last.ckpt recording ``recorded`` as the best."""
    folder = root / "run3" / "lightning_logs" / "version_1" / "checkpoints"
    folder.mkdir(parents=True)
    best = folder / "best-epoch=1-step=200.ckpt"
    best.write_bytes(b"weights")
    state = {"monitor": "val_bleu", "best_model_path": recorded}
    torch.save({"callbacks": {"ModelCheckpoint{'monitor': 'val_bleu'}": state}}, folder / "last.ckpt")
    return folder / "last.ckpt", best


def test_a_best_recorded_relative_to_the_fits_folder_is_found_from_another(tmp_path, monkeypatch):
    """--ckpt_path best from another working folder (an absolute default_root_dir, a cd into the run) found none,
    and fit then started again from step 0, unsaid but in a note (review)."""
    last, best = _run(tmp_path, "run3/lightning_logs/version_1/checkpoints/best-epoch=1-step=200.ckpt")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (tmp_path, elsewhere, best.parent):
        monkeypatch.chdir(cwd)
        assert best_recorded(last).resolve() == best.resolve(), cwd
    moved, moved_best = _run(tmp_path / "moved", "gone/lightning_logs/version_1/checkpoints/best-epoch=1-step=200.ckpt")
    assert best_recorded(moved) == moved_best  # by its name beside the checkpoint
    nothing, _ = _run(tmp_path / "none", "")
    assert best_recorded(nothing) is None


def test_a_resume_from_another_folder_keeps_the_best_its_checkpoint_records(tmp_path, monkeypatch):
    """carried_best read the recorded paths from the working folder: resumed from another, the best was dropped, the
    first validation after the resume became "best", and a worse epoch was exported (review)."""
    from text_attn.core.run_checkpoints import carried_best

    last, best = _run(tmp_path, "run3/lightning_logs/version_1/checkpoints/best-epoch=1-step=200.ckpt")
    recorded = "run3/lightning_logs/version_1/checkpoints/best-epoch=1-step=200.ckpt"
    state = {"monitor": "val_bleu", "dirpath": "run3/lightning_logs/version_1/checkpoints",
             "best_model_path": recorded, "best_model_score": 0.5, "best_k_models": {recorded: 0.5},
             "kth_best_model_path": recorded, "kth_value": 0.5}  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    new_dir = str(tmp_path / "run3" / "lightning_logs" / "version_2" / "checkpoints")
    carried = carried_best(state, new_dir, 200, last)
    assert Path(carried["best_model_path"]).resolve() == best.resolve() and carried["best_model_score"] == 0.5
    assert [Path(p).resolve() for p in carried["best_k_models"]] == [best.resolve()]
    assert carried["kth_best_model_path"] == carried["best_model_path"] and carried["dirpath"] == new_dir
    assert carried_best(state, new_dir, 200)["best_model_path"] == ""  # nothing to find it from: dropped, as before
