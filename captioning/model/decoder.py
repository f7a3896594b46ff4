"""Show-Attend-Tell LSTM decoder (Xu et al. 2015, "Show, Attend and Tell"), soft or stochastic hard attention.

Equation numbers below are the paper's. One decoder step t, given the previous word y_{t-1}, the previous LSTM
state (h_{t-1}, c_{t-1}) and the L annotation vectors a_i (the encoder's regions, (B, L, D)):

    e_ti, α_ti = f_att(a_i, h_{t-1}), softmax over i          (4), (5)  -- additive attention, query h_{t-1}
    β_t        = σ(f_β(h_{t-1}))                              Sec. 4.2.1 -- the gating scalar ("selector")
    z_t        = β_t · Σ_i α_ti a_i                            (6), (13) -- φ for soft attention, gated
    h_t, c_t   = LSTM([E y_{t-1}; z_t], h_{t-1}, c_{t-1})     (1)-(3)
    p(y_t)     ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z z_t))       (7)  -- the "deep output"
    h_0, c_0   = tanh(f_init,h(mean_i a_i)), tanh(f_init,c(mean_i a_i))   (Sec. 3.1.2)

Hard attention (Sec. 4.1, ``attention="hard"``) replaces eq. (6) by z_t = a_{s_t}, one region s_t ~ Multinoulli(α_t)
(same scorer f_att); the gate β_t still scales it. In training, each caption takes the expected (soft) context
instead of sampling with probability ``soft_prob`` (the paper: 0.5), and ``forward`` also returns log p(s_t | a),
H[α_t] and s_t for the REINFORCE loss of eq. (12) (:func:`captioning.training.objective.hard_attention_loss`). In eval
mode it is deterministic: the arg-max region, or the expected context (``hard_inference``),
so beam search works as usual.

The region keys' attention projection (U a_i) is computed once per image in ``init_state``, not at every step.
``step`` (search) and the plain teacher-forced loop (``fast_path: false``) share the per-step code, so they compute the
same thing; the fast path (captioning.model.fast_path, the default) is tested equal to them in values and gradients.
What training minimises (eq. (14)'s penalty, eq. (12) for hard attention, SCST) is captioning.training.objective's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.model.fast_path import fused_steps
from text_attn.core.attention import AdditiveAttention, HardAttention, HardAttentionResult, ProjectedKeys
from text_attn.core.decoding import select_rows
from text_attn.core.fused import KeyGradSink, KeyGradSummer, plain_only

GATES = ("scalar", "vector", "none")
POS_FREQS = 4  # sinusoid frequencies per axis of the region position code


def region_codes(num_regions: int, device: torch.device | None = None) -> Tensor:
    """(L, 4 * POS_FREQS) sin/cos codes of each region's row and column on a square grid, row-major."""
    g = round(num_regions**0.5)
    if g * g != num_regions:
        raise ValueError(f"region positions need a square grid, got {num_regions} regions")
    pos = (torch.arange(g, device=device, dtype=torch.float32) + 0.5) / g  # cell centres in (0, 1)
    freqs = torch.pi * 2.0 ** torch.arange(POS_FREQS, device=device, dtype=torch.float32)  # (F,)
    ang = pos[:, None] * freqs  # (g, F)
    axis = torch.cat([ang.sin(), ang.cos()], dim=-1)  # (g, 2F)
    rows = axis[:, None, :].expand(g, g, -1)  # (g, g, 2F): varies down the rows
    cols = axis[None, :, :].expand(g, g, -1)  # varies across the columns
    return torch.cat([rows, cols], dim=-1).reshape(num_regions, -1)


ATTENTIONS = ("soft", "hard")
HARD_INFERENCE = ("argmax", "expect")


ATTEND_ON = ("all", "fine")


@dataclass
class DecoderConfig:
    """The Show-Attend-Tell decoder: the ``model.decoder`` block of a caption config and of a model file. A new
    decoder option is a field here (with its comment), read where the decoder uses it; configs, the CLI, model files
    and caption-export follow. vocab_size, feature_dim and key_dims are filled in by ``CaptionModel.build``."""

    vocab_size: int = 0  # V: output vocabulary size, specials included (pad=0, bos=1, eos=2, unk=3). From the data.
    feature_dim: int = 0  # D: dimension of the encoder's region vectors a_i. From the encoder.
    embed_dim: int = 256  # m: word embedding size (E y); also the deep output's hidden size
    hidden_dim: int = 512  # n: LSTM hidden / cell size
    attn_dim: int = 512  # size of the additive attention's hidden layer (f_att)
    dropout: float = 0.5  # dropout on h_t and on the deep output's sum, before the vocabulary projection
    # "scalar": the paper's β_t = σ(f_β(h_{t-1})), one number per step; "vector": one gate per feature dim
    # (as the popular PyTorch port does); "none": z_t = Σ α a, ungated.
    gate: str = "scalar"
    # True: the paper's eq. (7), logits = L_o(E y_{t-1} + L_h h_t + L_z z_t); False: logits = linear(h_t).
    deep_output: bool = True
    attention: str = "soft"  # "soft" (deterministic, eq. 13) or "hard" (stochastic, Sec. 4.1; REINFORCE, eq. 12)
    # Hard attention at inference (eval mode): "argmax" looks at the single most likely region; "expect" uses the
    # expected context Σ_i α_ti a_i (what the authors' sampler does by default), i.e. soft attention's φ.
    hard_inference: str = "argmax"
    # Hard attention in training: per caption, the probability of using the expected context instead of a sampled
    # location (the paper, Sec. 4.1: 0.5). 0 = pure REINFORCE; 1 = always soft (no sampling at all).
    soft_prob: float = 0.5
    # Not in the paper: add a learned projection of each region's 2-D sinusoidal (row, col) code to its features.
    # CNN features say little about *where* a region is, and captions with spatial relations ("left of") need it.
    region_pos: bool = False
    # True: the paper's h0, c0 = tanh(f_init(mean_i a_i)). False: h0 = c0 = 0, so the decoder's only view of the image
    # is its attention (the mean already tells the LSTM most of a simple scene, and it then needs not look where it
    # names things: grounding suffers). Not in the paper.
    init_from_image: bool = True
    # Not in the paper: "fine" = the attention scores (eq. 4) see only a multiscale encoder's fine (stride-8) features
    # of each region, while the context still reads all D: where to look is then decided by what is IN a cell, not
    # by what its wide receptive field sees nearby. "all": the scores see every feature.
    attend_on: str = "all"
    # How many leading features of a region the scores read (None = all D). From attend_on and the encoder.
    key_dims: int | None = None
    # The teacher-forced loop of training: true = captioning.model.fast_path (hand-written autograd: the same values and
    # gradients, fewer passes over memory; docs/speed.md; first-order gradients only: create_graph raises); false = the
    # plain loop over the paper's equations (twice differentiable: a gradient penalty).
    fast_path: bool = True

    def __post_init__(self):
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose one of {ATTENTIONS}")
        if self.hard_inference not in HARD_INFERENCE:
            raise ValueError(f"unknown hard_inference {self.hard_inference!r}; choose one of {HARD_INFERENCE}")
        if not 0.0 <= self.soft_prob <= 1.0:
            raise ValueError(f"soft_prob must be in [0, 1], got {self.soft_prob}")
        if self.gate not in GATES:
            raise ValueError(f"unknown gate {self.gate!r}; choose one of {GATES}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.attend_on not in ATTEND_ON:
            raise ValueError(f"attend_on must be one of {ATTEND_ON}, got {self.attend_on!r}")
        if self.key_dims is not None and self.feature_dim and not 1 <= self.key_dims <= self.feature_dim:
            raise ValueError(f"key_dims must be in [1, feature_dim={self.feature_dim}], got {self.key_dims}")


class DecoderOutput(NamedTuple):
    """What teacher-forced ``forward`` returns. The last four are None for soft attention."""

    logits: Tensor  # (B, T, V) next-word scores
    alphas: Tensor  # (B, T, L) α_t, the attention distribution over regions at each step
    # (B, T) log p(s_t | a) = log α_t[s_t] of the location used; 0 where the caption took the expected context
    attn_log_probs: Tensor | None = None
    entropies: Tensor | None = None  # (B, T) H[α_t] = -Σ_i α_ti log α_ti
    chosen: Tensor | None = None  # (B, T) s_t: the sampled region (training), else the arg-max of α_t
    sampled: Tensor | None = None  # (B,) bool: True where the caption used sampled locations (training only)


class _Step(NamedTuple):
    h: Tensor  # (N, H)
    c: Tensor  # (N, H)
    z: Tensor  # (N, D) the (gated) context
    alpha: Tensor  # (N, L)
    hard: HardAttentionResult | None  # hard attention's index / log-prob / entropy, else None


class ShowAttendTellDecoder(nn.Module):
    """LSTM decoder with soft or hard attention over image regions; implements the text_attn search protocol."""

    # the regions and their projection: kept once per image for all its beams (search protocol)
    one_row_per_source_state = ("keys",)

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        E, D, H = cfg.embed_dim, cfg.feature_dim, cfg.hidden_dim
        self.embedding = nn.Embedding(cfg.vocab_size, E)  # E in eqs. (1) and (7)
        # f_att, eq. (4): the same additive scorer for both; hard attention samples a location from its α.
        attention = HardAttention if cfg.attention == "hard" else AdditiveAttention
        self.attention = attention(H, cfg.key_dims or D, cfg.attn_dim)
        # f_init,h and f_init,c: one affine layer + tanh each, as in the authors' code (n_layers_init=1).
        self.init_h = nn.Linear(D, H)
        self.init_c = nn.Linear(D, H)
        if cfg.gate == "scalar":
            self.f_beta = nn.Linear(H, 1)
        elif cfg.gate == "vector":
            self.f_beta = nn.Linear(H, D)
        else:
            self.f_beta = None
        self.lstm = nn.LSTMCell(E + D, H)  # eqs. (1)-(3); input [E y_{t-1}; z_t]
        self.dropout = nn.Dropout(cfg.dropout)
        self.pos_proj = nn.Linear(4 * POS_FREQS, D) if cfg.region_pos else None
        if cfg.deep_output:
            self.L_h = nn.Linear(H, E)
            self.L_z = nn.Linear(D, E)
            self.L_o = nn.Linear(E, cfg.vocab_size)
        else:
            self.out = nn.Linear(H, cfg.vocab_size)
        self.key_grads = KeyGradSummer()  # the fast path's per-sequence sinks for the region keys' gradient

    # --- state -------------------------------------------------------------------------------
    def init_state(self, features: Tensor) -> dict:
        """features (B, L, D) -> {"h": (B, H), "c": (B, H), "keys": ProjectedKeys} (all batch-first)."""
        if self.pos_proj is not None:
            codes = region_codes(features.size(1), features.device).to(self.pos_proj.weight.dtype)  # half weights
            features = features + self.pos_proj(codes)  # (B, L, D)
        mean = features.mean(dim=1)  # (B, D) the average annotation vector
        if not self.cfg.init_from_image:
            mean = torch.zeros_like(mean)  # h0, c0 = tanh(bias): the same start for every image
        return {
            "h": torch.tanh(self.init_h(mean)),
            "c": torch.tanh(self.init_c(mean)),
            # U a_i does not depend on t: projected once here, reused at every step (and reordered by beam search).
            "keys": self._keys(features),
        }

    def _keys(self, features: Tensor) -> ProjectedKeys:
        """Regions (B, L, D) -> values (B, L, D) with their key projection (B, L, A) from the first key_dims."""
        k = self.cfg.key_dims
        if k is None or k == features.size(-1):
            return self.attention.precompute(features)
        return ProjectedKeys(features, self.attention.precompute(features[..., :k]).proj)

    # --- the shared per-step code -----------------------------------------------------------
    @property
    def hard(self) -> bool:
        return self.cfg.attention == "hard"

    def attend(
        self, h: Tensor, keys: ProjectedKeys, use_soft: Tensor | None = None, key_grad_sink: KeyGradSink | None = None
    ):
        """h (N, H) = h_{t-1} -> the gated context z_t (N, D), α_t (N, L) and, for hard attention, the chosen
        location. ``use_soft`` (N,) bool: hard rows that take the expected context (training only).
        ``key_grad_sink``: the fast path's sink for the keys' gradient (captioning.model.fast_path)."""
        hard = None
        if self.hard:
            # Training samples s_t; eval is deterministic (search needs step() to be a function of its input).
            mode = "sample" if self.training else self.cfg.hard_inference
            use_soft = use_soft if self.training else None
            hard = self.attention.attend(h, keys, mode=mode, use_soft=use_soft, key_grad_sink=key_grad_sink)
            context, alpha = hard.context, hard.weights  # (N, D): a_{s_t} (or Σ α a where soft), (N, L)
        else:
            context, alpha = self.attention(h, keys, key_grad_sink=key_grad_sink)  # (N, D), (N, L): eqs. (4)-(6)
        if self.f_beta is not None:
            context = torch.sigmoid(self.f_beta(h)) * context  # β_t (N, 1) or (N, D), Sec. 4.2.1
        return context, alpha, hard

    def _recur(self, emb: Tensor, h: Tensor, c: Tensor, keys: ProjectedKeys) -> _Step:
        """One search step: emb (N, E) = E y_{t-1}; h, c (N, H) -> h_t, c_t (N, H), z_t (N, D), α_t (N, L)."""
        context, alpha, hard = self.attend(h, keys)
        h, c = self.lstm(torch.cat([emb, context], dim=-1), (h, c))  # eqs. (1)-(3)
        return _Step(h, c, context, alpha, hard)

    def _readout(self, emb: Tensor, h: Tensor, z: Tensor) -> Tensor:
        """Logits from (..., E), (..., H), (..., D) with any leading dims -> (..., V)."""
        h = self.dropout(h)
        if not self.cfg.deep_output:
            return self.out(h)
        # Eq. (7) as printed: a plain sum, no nonlinearity. (The authors' Theano code puts a tanh on this sum;
        # we keep the paper's form.) Dropout on the sum, as in their code.
        return self.L_o(self.dropout(emb + self.L_h(h) + self.L_z(z)))

    # --- search protocol ---------------------------------------------------------------------
    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor, dict]:
        """tokens (N,) previous words -> log_probs (N, V), α (N, L), new state."""
        emb = self.embedding(tokens)  # (N, E)
        s = self._recur(emb, state["h"], state["c"], state["keys"])
        log_probs = F.log_softmax(self._readout(emb, s.h, s.z), dim=-1)
        return log_probs, s.alpha, {"h": s.h, "c": s.c, "keys": state["keys"]}

    # --- teacher forcing ---------------------------------------------------------------------
    def _plain_steps(
        self, emb: Tensor, h: Tensor, c: Tensor, keys: ProjectedKeys, use_soft: Tensor | None
    ) -> list[_Step]:
        """The recurrence over all T steps of emb (B, T, E), one step at a time, as the paper writes it: eqs. (4)-(6)
        then the LSTM of eqs. (1)-(3). The reference the fast path (captioning.model.fast_path) is tested against."""
        steps = []
        for t in range(emb.size(1)):
            context, alpha, hard = self.attend(h, keys, use_soft)
            h, c = self.lstm(torch.cat([emb[:, t], context], dim=-1), (h, c))  # eqs. (1)-(3)
            steps.append(_Step(h, c, context, alpha, hard))
        return steps

    def forward(
        self, features: Tensor, captions_in: Tensor, soft_prob: float | None = None, rows: Tensor | None = None
    ) -> DecoderOutput:
        """features (B, L, D), captions_in (B, T) = bos + words -> DecoderOutput: logits (B, T, V), alphas
        (B, T, L), and for hard attention the per-step log p(s_t), H[α_t] and s_t (B, T) and which captions sampled.

        ``soft_prob`` overrides ``cfg.soft_prob`` for this batch (hard attention in training; e.g. 1.0 in a warm-up).
        ``rows`` (N,): caption n is of image rows[n] (then captions_in is (N, T) and so is everything returned):
        several captions of one image (SCST's samples) share its key projection, computed once per image.
        """
        use_soft = self.draw_use_soft(captions_in.size(0), features.device, soft_prob)
        return self.teacher_forced(features, captions_in, use_soft, rows)

    def draw_use_soft(self, n: int, device: torch.device, soft_prob: float | None = None) -> Tensor | None:
        """(n,) bool: which of n captions take the expected context (hard attention in training: one draw per caption,
        kept for all its steps, so a caption is either sampled or soft throughout); None otherwise (nothing drawn)."""
        if not (self.hard and self.training):
            return None
        p = self.cfg.soft_prob if soft_prob is None else soft_prob
        return torch.rand(n, device=device) < p  # (n,)

    def teacher_forced(
        self,
        features: Tensor,
        captions_in: Tensor,
        use_soft: Tensor | None = None,
        rows: Tensor | None = None,
        fast_path: bool | None = None,
    ) -> DecoderOutput:
        """``forward`` with ``use_soft`` already drawn (:meth:`draw_use_soft`); ``fast_path`` overrides the config's
        (captioning.training.cuda_graphs captures the plain loop: the fast path's buffer pools live in Python; so do
        ``torch.compile``, tracing and ``torch.func``, which cannot see them: text_attn.core.fused.plain_only)."""
        state = self.init_state(features)
        if rows is not None:
            state = select_rows(state, rows)  # (N, ...): the projected keys copied, not projected again
        h, c, keys = state["h"], state["c"], state["keys"]
        emb = self.embedding(captions_in)  # (B, T, E)
        fast = self.cfg.fast_path if fast_path is None else fast_path
        if fast and not plain_only(emb):  # the same numbers, fewer passes over memory
            steps = [_Step(*s) for s in fused_steps(self, emb, h, c, keys, use_soft)]
        else:
            steps = self._plain_steps(emb, h, c, keys, use_soft)
        # The readout does not feed back into the recurrence, so it runs once over all T steps (one big matmul).
        hs = torch.stack([s.h for s in steps], dim=1)  # (B, T, H)
        zs = torch.stack([s.z for s in steps], dim=1)  # (B, T, D)
        logits = self._readout(emb, hs, zs)  # (B, T, V)
        alphas = torch.stack([s.alpha for s in steps], dim=1)  # (B, T, L)
        if not self.hard:
            return DecoderOutput(logits, alphas)
        chosen = torch.stack([s.hard.index for s in steps], dim=1)  # (B, T)
        if use_soft is None:
            sampled = torch.zeros_like(chosen[:, 0], dtype=torch.bool)
        else:
            sampled = ~use_soft
            # A soft caption sampled nothing: report its arg-max region (HardAttention leaves its unused draw there).
            chosen = torch.where(use_soft.unsqueeze(1), alphas.argmax(-1), chosen)
        return DecoderOutput(
            logits,
            alphas,
            attn_log_probs=torch.stack([s.hard.log_prob for s in steps], dim=1),  # (B, T)
            entropies=torch.stack([s.hard.entropy for s in steps], dim=1),  # (B, T)
            chosen=chosen,
            sampled=sampled,
        )
