"""DecoderEnsemble: K Show-Attend-Tell decoders of the same settings over one frozen encoder, decoded as one model.

Each member reads the same region features (the encoder is computed once) and keeps its own LSTM state; a step's
next-word distribution is the mean of the members' probabilities, p(y) = (1/K) Σ_k p_k(y), and its α the mean of
theirs (still a distribution over the regions, so overlays and the attention records work unchanged). Members come
from separately trained runs: ``caption-export A.pt OUT --ensemble B.pt``. On Flickr8k val the bundled model's two
decoders, from different cross-entropy runs, together beat either one on every column (docs/bundled_captioner.md).

It speaks the search protocol (``init_state`` / ``step``) with a flat state, ``"k.name"`` for member k's entry
``name``, so greedy, beam and the fixed-shape search (text_attn.core.fixed_search) step it like one decoder. It is
made for captioning, not for training: it has no teacher-forced ``forward`` (its members train apart, each a decoder
of its own).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder


def mean_of_probabilities(log_probs: list[Tensor]) -> Tensor:
    """The members' log-probabilities (each (..., V)) -> the log of their mean probability, log((1/K) Σ_k exp(lp_k)),
    computed stably: an ensemble's distribution (a search step's, and word-level distillation's teacher's)."""
    return torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))


class DecoderEnsemble(nn.Module):
    def __init__(self, members: list[ShowAttendTellDecoder]):
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 decoders, got {len(members)}")
        cfg = members[0].cfg
        for m in members[1:]:
            if m.cfg != cfg:
                raise ValueError("the decoders of an ensemble must have the same settings")
            m.cfg = cfg  # one config object: hard_inference set for the ensemble is read by every member
        self.members = nn.ModuleList(members)
        # each member's projected regions: one row per image for all its beams (search protocol)
        self.one_row_per_source_state = tuple(
            f"{k}.{name}" for k in range(len(members)) for name in ShowAttendTellDecoder.one_row_per_source_state
        )

    @classmethod
    def build(cls, cfg: DecoderConfig, size: int) -> DecoderEnsemble:
        """``size`` fresh members of ``cfg`` (a model file's weights are loaded into them)."""
        return cls([ShowAttendTellDecoder(cfg) for _ in range(size)])

    @property
    def cfg(self) -> DecoderConfig:
        return self.members[0].cfg

    # --- search protocol ---------------------------------------------------------------------
    def init_state(self, features: Tensor) -> dict:
        """features (B, L, D) -> every member's state, its entries named ``"k.name"``."""
        return {f"{k}.{name}": v for k, m in enumerate(self.members) for name, v in m.init_state(features).items()}

    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor, dict]:
        """tokens (N,) -> log of the members' mean probabilities (N, V), the mean α (N, L), the new state."""
        log_probs, alphas, new = [], [], {}
        for k, m in enumerate(self.members):
            prefix = f"{k}."
            own = {name.removeprefix(prefix): v for name, v in state.items() if name.startswith(prefix)}
            lp, alpha, after = m.step(tokens, own)
            log_probs.append(lp)
            alphas.append(alpha)
            new.update({prefix + name: v for name, v in after.items()})
        return mean_of_probabilities(log_probs), torch.stack(alphas).mean(0), new

    def forward(self, *args, **kwargs):
        raise TypeError("an ensemble of decoders only decodes (init_state / step): train each member on its own")
