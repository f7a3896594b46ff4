"""float32 at least where a half model's numbers reach a user or a measure.

A model may run in float16 or bfloat16 (``Captioner.to(torch.float16)``, ``translator.net.half()``, a bf16-true
checkpoint). What it hands back to people (attention maps: numpy has no bfloat16) and what the faithfulness measure
subtracts (a probability drop of 1e-3 is below bfloat16's step near 1) need float32; float32 and float64 pass through
unchanged, so a float32 model's results are bit for bit what they were.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn


def widened(t: Tensor) -> Tensor:
    """``t`` in float32 when its dtype is narrower (float16, bfloat16): a copy; else ``t`` itself."""
    return t.to(torch.promote_types(t.dtype, torch.float32)) if t.is_floating_point() else t


def float32_network(net: nn.Module) -> nn.Module:
    """``net`` itself when no floating parameter or buffer is narrower than float32; else a float32 copy of it (the
    caller's network untouched): the same weights, upcast exactly, so its answers are the half network's computed
    without half rounding."""
    tensors = [*net.parameters(), *net.buffers()]
    if all(widened(t).dtype == t.dtype for t in tensors):
        return net
    return copy.deepcopy(net).float()


def parameter_dtype(module: nn.Module) -> torch.dtype:
    """The dtype inputs must have to meet ``module``'s weights (its first floating parameter's; float32 if none)."""
    return next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)


def full_precision(device: torch.device) -> torch.autocast:
    """A block where the caller's ``torch.autocast`` is off on ``device``: float32 inputs stay float32 through it."""
    return torch.autocast(device.type, enabled=False)
