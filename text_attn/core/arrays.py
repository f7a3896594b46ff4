"""Attention weights for drawing: whatever holds them (a torch tensor on any device, with or without grad, a numpy
array, nested lists) as one float64 numpy array. Plots (text) and overlays (images) share it; it imports no torch."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(weights: Any) -> np.ndarray:
    if hasattr(weights, "detach"):  # torch.Tensor, without importing torch here
        weights = weights.detach().float().cpu().numpy()
    return np.asarray(weights, dtype=np.float64)
