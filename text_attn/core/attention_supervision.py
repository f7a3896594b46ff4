"""Attention supervision: cross-entropy between the attention and a ground-truth distribution where one is known.

Liu et al. 2017 ("Attention Correctness in Neural Image Captioning") for image regions; supervised alignment
(Mi et al. 2016, Liu et al. 2016) for source words. Where the data knows what an output word refers to (the regions
of the object a caption word names, the source word a target word translates), the loss at that decoder step is

    CE_t = −Σ_s target[t, s] · log(α[t, s] + eps)

and the loss is the mean of CE_t over the supervised steps only; a training objective adds λ times it. For hard
attention the same loss applies to α, the distribution the location is sampled from. Batches carry the targets as
``attn_targets`` (B, T, S) and ``attn_targets_mask`` (B, T) (captioning.training.data, text_attn.translation.data),
aligned with the decoder's output steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from text_attn.core.precision import widened


def attention_supervision_loss(weights: Tensor, target: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """Mean cross-entropy −Σ_s target · log(weights + eps) over the supervised decoder steps.

    Args:
        weights: (B, T, S) attention distributions (rows sum to 1; for several heads, average them first).
        target: (B, T, S) ground-truth distributions (rows sum to 1) on supervised steps; anything elsewhere.
        mask: (B, T) bool, True on the steps that have a target.
        eps: added inside the log, so a target cell with zero attention costs log(1 / eps), not infinity (at least
            2 / the dtype's largest number: 3.1e-5 for float16 weights, whose gradient must stay finite).

    Returns:
        A scalar: the mean over supervised steps; 0 when no step is supervised, still connected to ``weights`` (so
        ``backward`` works and gives zero gradients). Unsupervised steps never reach the loss or its gradient, even
        when their weights or targets hold nan.
    """
    ce, mask = _step_losses(weights, target, mask, eps)
    return ce.sum() / mask.sum().clamp(min=1).to(ce.dtype)


def attention_supervision_rows(
    weights: Tensor, target: Tensor, mask: Tensor, eps: float = 1e-8
) -> tuple[Tensor, Tensor]:
    """:func:`attention_supervision_loss` per sequence, for an evaluation that pools a whole split: (the summed
    cross-entropy of each row's supervised steps (B,), how many there are (B,)). The split's loss is the sum of the
    first over the sum of the second, the same whatever the batches (a mean of batch means weighs each batch alike)."""
    ce, mask = _step_losses(weights, target, mask, eps)
    return ce.sum(dim=-1), mask.sum(dim=-1)


def _step_losses(weights: Tensor, target: Tensor, mask: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(the cross-entropy of every decoder step (B, T), 0 on unsupervised steps; the mask (B, T) as bool)."""
    if weights.dim() != 3 or target.shape != weights.shape:
        raise ValueError(
            f"weights and target must both be (B, T, S), got {tuple(weights.shape)} and {tuple(target.shape)}"
        )
    if mask.shape != weights.shape[:2]:
        raise ValueError(f"mask must be (B, T) = {tuple(weights.shape[:2])}, got {tuple(mask.shape)}")
    keep = mask.bool().unsqueeze(-1)  # (B, T, 1)
    # the gradient a cell's weight gets is -target / (weight + eps), at most 1 / eps: float16 weights (16-true
    # training) need eps >= 1 / 65504 or a zero-attention cell's gradient is -inf, and the weights nan a step later
    eps = max(eps, 2.0 / torch.finfo(weights.dtype).max) if weights.is_floating_point() else eps
    weights = widened(weights)  # float16's eps of 1e-8 is 0: a cell of zero attention was log 0, and 0 * -inf nan
    # where (not multiply) so nan/inf on unsupervised steps cannot leak into the value or the gradient.
    w = torch.where(keep, weights, torch.ones_like(weights))
    t = torch.where(keep, target.to(weights.dtype), torch.zeros_like(weights))
    ce = -(t * torch.log(w + eps)).sum(dim=-1)  # (B, T), 0 on unsupervised steps
    return ce, keep.squeeze(-1)


def dense_targets(
    items: Sequence[Sequence[tuple[int, Sequence[int]]]], steps: int, positions: int
) -> tuple[Tensor, Tensor]:
    """Sparse targets of a batch -> the dense (target, mask) pair that ``attention_supervision_loss`` takes.

    ``items[b]`` lists (step t, the positions step t refers to) for batch row b; the target of a listed step is
    uniform over its positions (one position: one-hot). Steps at or beyond ``steps`` and empty position lists are
    dropped; listing a step twice is an error.

    Returns:
        target (B, steps, positions) float32 (rows of supervised steps sum to 1, others are 0) and mask (B, steps) bool.
    """
    # Gathered first, written with one index_put: a tensor write per step cost ~0.2 s for 64 sixty-word sentences.
    rows, cols, where_all, weights = [], [], [], []
    seen: set[tuple[int, int]] = set()
    for b, item in enumerate(items):
        for t, where in item:
            if not 0 <= t < steps or len(where) == 0:
                continue
            if (b, t) in seen:
                raise ValueError(f"row {b} lists step {t} twice; give each step all its positions at once")
            seen.add((b, t))
            unique = {int(p) for p in where}
            if min(unique) < 0 or max(unique) >= positions:
                raise ValueError(f"row {b}, step {t}: positions {list(where)} outside 0..{positions - 1}")
            rows += [b] * len(unique)
            cols += [t] * len(unique)
            where_all += unique
            weights += [1.0 / len(unique)] * len(unique)
    target = torch.zeros(len(items), steps, positions)
    mask = torch.zeros(len(items), steps, dtype=torch.bool)
    if rows:
        index = (torch.tensor(rows), torch.tensor(cols))
        target[(*index, torch.tensor(where_all))] = torch.tensor(weights)
        mask[index] = True
    return target, mask
