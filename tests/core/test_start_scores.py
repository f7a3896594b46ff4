"""text_attn.core.start_scores: the fit's-end verdict on the start's val score against the best checkpoint's."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from text_attn.core.start_scores import StartScores


def _trainer(best: float, mode: str = "max") -> SimpleNamespace:
    callback = SimpleNamespace(monitor="val_CIDEr", best_model_score=torch.tensor(best), mode=mode)  # float32, kept
    return SimpleNamespace(checkpoint_callbacks=[callback])


def test_a_start_scoring_as_the_best_checkpoint_is_no_better_than_it():
    """The start's score (a float64) and the same score as the checkpoint kept it (float32) differed in their last
    digits: the start's weights were written back as having "scored better" on a tie."""
    start = 2.598512345678901
    scores = StartScores()
    scores.scores = {"val_CIDEr": start}
    line, better = scores.verdict(_trainer(start), "runs/b/model.pt", "val photos")
    assert not better and line.endswith("training did not beat the start on these val photos")
    line, better = scores.verdict(_trainer(start - 0.01), "runs/b/model.pt", "val photos")
    assert better  # a start scoring higher than every checkpoint is kept
    line, better = scores.verdict(_trainer(start + 0.01), "runs/b/model.pt", "val photos")
    assert not better and "did not beat" not in line
