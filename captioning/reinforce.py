"""Training stochastic hard attention with REINFORCE (Xu et al. 2015, Sec. 4.1, eq. 12).

With s the attended locations, a the regions and y the caption, the paper maximises the lower bound
L_s = Σ_s p(s | a) log p(y | s, a) with the sampled gradient of eq. (12):

    ∂L_s/∂W ≈ 1/N Σ_n [ ∂log p(y | s̃ⁿ, a)/∂W  +  λ_r (log p(y | s̃ⁿ, a) − b) ∂log p(s̃ⁿ | a)/∂W  +  λ_e ∂H[s̃ⁿ]/∂W ]

and b ← 0.9 b + 0.1 log p(y | s̃, a) per mini-batch. We MINIMISE the surrogate loss whose gradient is minus that:

    loss = CE − λ_r Σ_caption (R − b)·Σ_t log p(s_t | a) − λ_e Σ_caption Σ_t H[α_t]      (all over N_tokens)

with R = log p(y | s̃, a) = Σ_t log p(y_t | ...) the caption's own log-likelihood (detached: it is a reward, not a
path for gradients), padded steps left out of every sum. CE is our usual mean over real tokens; the REINFORCE and
entropy sums are divided by the same token count, so the three terms keep the paper's relative weights (each is a
sum over the caption there) and λ_r, λ_e mean what they mean in the paper. Captions that took the expected context
(probability ``soft_prob``) sampled nothing: their log p(s) is 0 and they add no REINFORCE term (their attention
learns through the soft path); the entropy bonus applies to every caption.

The authors' code (kelvinxu/arctic-captions, capgen.py), for reference: it injects the gradient on α directly
(Theano ``known_grads``) as  cost/10 · s̃/α + alpha_entropy_c · (log α + 1),  i.e. λ_r = 1/10 (and not divided by
the batch size, while its cost is a batch mean), λ_e = ``alpha_entropy_c`` (default 0: no entropy term), and by
default each step's reward is that step's word NLL with no baseline; only its ``RL_sumCost`` option uses the moving
baseline, there as (b − mean_t cost), which has the opposite sign of the paper's rule (b tracks the cost, not the
log-likelihood). It also draws the sample-or-expect coin once per mini-batch, not per caption. We follow the paper,
and offer that per-word reward as ``reward="word"``: location s_t is credited with log p(y_t | ...) of the word it
was sampled for, with no baseline (the reward is at most 0, so a location that yields its word with certainty is
left alone and one that yields a wrong word is pushed down). It ignores what s_t does to later words (through h_t),
but its variance is far smaller than the whole caption's: the other T − 1 words' luck no longer moves s_t.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.decoder import DecoderOutput, caption_loss

REWARDS = ("caption", "word")  # the paper's R = log p(y | s, a) minus a baseline; the authors' code's log p(y_t)


class MovingAverageBaseline(nn.Module):
    """The reward baseline b ← decay · b + (1 − decay) · mean(R) (the paper: decay 0.9), one update per batch.

    The first update sets b to that batch's mean (b = 0 would make every early sample look terrible: R is a
    caption log-likelihood, tens of nats below 0 at the start). Buffers, so checkpoints keep it.
    """

    def __init__(self, decay: float = 0.9):
        super().__init__()
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"baseline decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.register_buffer("value", torch.zeros(()))
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))

    @property
    def ready(self) -> bool:
        """False until the first update: there is no estimate yet (use the batch mean instead)."""
        return bool(self.updates > 0)

    @torch.no_grad()
    def update(self, rewards: Tensor) -> None:
        """rewards (N,): this batch's rewards of the sampled captions; no-op when there are none."""
        if rewards.numel() == 0:
            return
        mean = rewards.detach().float().mean().to(self.value.dtype)
        self.value.copy_(mean if not self.ready else self.decay * self.value + (1.0 - self.decay) * mean)
        self.updates += 1


def word_log_likelihoods(logits: Tensor, targets: Tensor, pad_id: int) -> Tensor:
    """log p(y_t) of each target word, 0 at padding.  (B, T, V), (B, T) -> (B, T)"""
    return -F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none")


def hard_attention_loss(
    out: DecoderOutput,
    targets: Tensor,
    pad_id: int,
    baseline: Tensor | float | None,
    *,
    rl_lambda: float = 1.0,
    entropy_lambda: float = 0.01,
    ds_lambda: float = 0.0,
    label_smoothing: float = 0.0,
    ds_target: float | None = 1.0,
    reward: str = "caption",
) -> tuple[Tensor, dict[str, Tensor]]:
    """Eq. (12) as a loss to minimise (see the module doc); ``out`` from a hard decoder's training-mode forward.

    targets (B, T) = words + eos then pad. ``baseline``: b, or None to use the mean reward of this batch's sampled
    captions (before the moving average has its first value). Returns (total, parts): "ce", "ds" (as
    :func:`caption_loss`), "reinforce" and "entropy_bonus" (the terms as added to the total), "entropy" (mean H[α_t]
    per real step), "reward" (B,) R detached, "advantage" (B,) (R − b) where sampled, else 0, "sampled" (B,) bool.
    ``reward="word"``: each location's reward is its own word's log p(y_t), no baseline; "advantage" is then (B, T).
    """
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; choose one of {REWARDS}")
    per_word = reward == "word"
    if out.attn_log_probs is None or out.entropies is None or out.sampled is None:
        raise ValueError("hard_attention_loss needs a hard-attention decoder output (attention='hard')")
    total, parts = caption_loss(
        out.logits,
        targets,
        out.alphas,
        pad_id,
        ds_lambda=ds_lambda,
        label_smoothing=label_smoothing,
        ds_target=ds_target,
    )
    step_mask = (targets != pad_id).to(out.logits.dtype)  # (B, T)
    n_tokens = step_mask.sum().clamp_min(1.0)
    with torch.no_grad():
        word_logp = word_log_likelihoods(out.logits.detach().float(), targets, pad_id)  # (B, T) no label smoothing
        reward = word_logp.sum(dim=1)  # (B,) R = log p(y | s, a)
        sampled = out.sampled
        took_sample = sampled.to(reward.dtype)  # (B,) soft captions sampled nothing: no REINFORCE term
        if per_word:
            advantage = word_logp * took_sample.unsqueeze(1)  # (B, T)
        else:
            if baseline is None:
                baseline = reward[sampled].mean() if bool(sampled.any()) else reward.new_zeros(())
            advantage = (reward - baseline) * took_sample  # (B,)
    if per_word:
        log_p_s = out.attn_log_probs * step_mask  # (B, T) each step credited with its own word
    else:
        log_p_s = (out.attn_log_probs * step_mask).sum(dim=1)  # (B,) Σ_t log p(s_t | a) over real steps
    reinforce = -rl_lambda * (advantage.to(log_p_s.dtype) * log_p_s).sum() / n_tokens
    entropy = (out.entropies * step_mask).sum() / n_tokens  # mean H[α_t] per real step
    entropy_bonus = -entropy_lambda * entropy
    parts.update(reinforce=reinforce, entropy_bonus=entropy_bonus, entropy=entropy)
    parts.update(reward=reward, advantage=advantage, sampled=sampled)
    return total + reinforce + entropy_bonus, parts


class CollapseMonitor:
    """Spots hard attention that stays near uniform, the failure users of other ports report.

    Keeps a moving average (decay 0.9) of the mean attention entropy divided by its uniform value log L; after
    ``warmup`` training steps, the first time it is above ``ratio``, :meth:`update` returns a warning message
    (once per monitor). ``warmup`` 0 or less disables it.
    """

    def __init__(self, warmup: int = 500, ratio: float = 0.95, decay: float = 0.9):
        self.warmup, self.ratio, self.decay = warmup, ratio, decay
        self.level: float | None = None
        self.warned = False

    def update(self, mean_entropy: float, num_regions: int, step: int) -> str | None:
        if num_regions < 2:
            return None
        x = float(mean_entropy) / math.log(num_regions)
        self.level = x if self.level is None else self.decay * self.level + (1.0 - self.decay) * x
        if self.warned or self.warmup <= 0 or step < self.warmup or self.level <= self.ratio:
            return None
        self.warned = True
        return (
            f"hard attention is still almost uniform after {step} steps of sampling: mean entropy "
            f"{self.level:.3f} x log L "
            f"(L = {num_regions}); REINFORCE is not moving it. Try a smaller model.entropy_lambda, a larger "
            "model.rl_lambda or model.decoder.soft_prob, or a lower learning rate."
        )
