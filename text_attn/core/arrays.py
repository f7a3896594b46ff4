"""Attention weights for drawing: whatever holds them (a torch tensor on any device, with or without grad, a numpy
array, nested lists) as one float64 numpy array. Plots (text) and overlays (images) share it; it imports no torch.
And a probability as records and answers write it (``digits6``), a signed agreement as labels write it (``signed2``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(weights: Any) -> np.ndarray:
    if hasattr(weights, "detach"):  # torch.Tensor, without importing torch here
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=np.float64)


def evidence_shares(evidence: Any) -> np.ndarray:
    """What drives each word, for drawing beside its attention: per row (a word; units: regions or source tokens),
    what removing each unit costs it (its positive part) as a share of the row's total (a row nothing lowers: 0)."""
    e = np.clip(to_numpy(evidence), 0.0, None)
    return e / np.maximum(e.sum(-1, keepdims=True), 1e-12)


def digits6(p: float) -> float:
    """A probability to 6 significant digits, as records and the server's answers hold it: a word the model finds
    unlikely keeps its size (1.23457e-07, not 0)."""
    return float(f"{p:.6g}")


def signed2(x: float) -> str:
    """``x`` with its sign and 2 decimals, as the pictures label an agreement (Kendall's tau): a value that rounds to
    zero is "0.00" (a small negative one was "-0.00")."""
    text = f"{x:+.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text
