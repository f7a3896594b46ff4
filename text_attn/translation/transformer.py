"""Transformer encoder-decoder (Vaswani et al. 2017) on the shared attention and decoding code.

- Attention: :class:`text_attn.core.attention.MultiHeadAttention` (scaled dot-product, on
  ``torch.nn.functional.scaled_dot_product_attention``): encoder self-attention, causal decoder self-attention, and
  decoder cross-attention over the encoder output (the "memory").
- Positions: sinusoidal (the paper) or learned, added to the embeddings scaled by √d_model.
- Sub-layers: residual + LayerNorm, after the sum (post-norm, the paper) or before the sub-layer (pre-norm, with a
  final LayerNorm on each stack); position-wise feed-forward ReLU network; dropout on embeddings and sub-layer outputs.
- Optional shared source/target embeddings (one vocabulary) and an output projection tied to the target embeddings.

``encode`` and ``decode`` are separate, so decoding lives outside the model: ``decode`` runs a whole target prefix at
once (training, and the recompute baseline), ``step`` one token with a key/value cache for the shared greedy and beam
search. The decoder state is a dict of batch-first tensors, so ``decoding.select_rows`` reorders it for beam search::

    {"mask": (B, S) bool, "cross": per layer HeadKV (B, H, S, Dh) of the memory, computed once per source,
     "self": per layer HeadKV (B, H, t, Dh), the self-attention keys/values of the t tokens fed so far}

In beam search "mask" and "cross" keep one row per sentence while "self" has one per beam (K): the cross-attention
reads K query rows per memory row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from text_attn.core.attention import HeadKV, MultiHeadAttention
from text_attn.core.decoding import GenerateMixin
from text_attn.core.vocab import vocab_sizes

POSITIONS = ("sinusoidal", "learned")


@dataclass
class TransformerConfig:
    src_vocab_size: int  # source vocabulary, specials included
    tgt_vocab_size: int  # target vocabulary, specials included
    d_model: int = 256  # width of embeddings, attention and the residual stream
    num_heads: int = 4  # attention heads per layer; d_model must be divisible by it
    enc_layers: int = 3  # encoder layers (the paper: 6)
    dec_layers: int = 3  # decoder layers (the paper: 6)
    ff_dim: int = 1024  # hidden size of the position-wise feed-forward network (the paper: 4 * d_model)
    dropout: float = 0.1  # on embeddings + positions, on every sub-layer output, and in the feed-forward hidden layer
    attn_dropout: float = 0.0  # on the attention weights (not in the paper; tensor2tensor uses it)
    positions: str = "sinusoidal"  # "sinusoidal" (fixed, any length) or "learned" (up to max_len)
    max_len: int = 1024  # longest sequence with learned positions; sinusoidal tables grow past it
    norm_first: bool = False  # False: LayerNorm(x + sublayer(x)) as in the paper; True: x + sublayer(LayerNorm(x))
    share_embeddings: bool = False  # one embedding table for source and target (needs data.shared_vocab: true)
    tie_output: bool = True  # the pre-softmax projection reuses the target embedding matrix (the paper)
    pad_id: int = 0  # padding id of both vocabularies

    def __post_init__(self):
        self.src_vocab_size, self.tgt_vocab_size = vocab_sizes(
            src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size
        )
        if self.positions not in POSITIONS:
            raise ValueError(f"unknown positions {self.positions!r}; choose one of {POSITIONS}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by num_heads {self.num_heads}")
        if self.enc_layers < 1 or self.dec_layers < 1:
            raise ValueError(
                f"need at least one layer per stack, got enc_layers={self.enc_layers}, dec_layers={self.dec_layers}"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("share_embeddings needs one vocabulary for both sides: set data.shared_vocab: true")


def sinusoid_table(n: int, d: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same): (n, d)."""
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)  # (n, 1)
    angle = pos / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)  # (n, ceil(d/2))
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


class PositionalEncoding(nn.Module):
    """Position vectors for positions offset .. offset+T-1: (T, D)."""

    def __init__(self, d_model: int, kind: str, max_len: int):
        super().__init__()
        self.kind, self.d_model, self.max_len = kind, d_model, max_len
        if kind == "learned":
            self.table = nn.Parameter(torch.randn(max_len, d_model) * 0.1)
        else:  # not persistent: a function of the config, nothing to save
            self.register_buffer("table", sinusoid_table(max_len, d_model), persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        end = offset + length
        if end > self.table.size(0):
            if self.kind == "learned":
                raise ValueError(f"sequence of {end} positions is longer than the learned max_len {self.max_len}")
            return sinusoid_table(end, self.d_model).to(self.table)[offset:]
        return self.table[offset:end]


def learned_positions(net: nn.Module) -> int | None:
    """The most positions a sequence of ``net`` may take, a source with its end or an output's steps: the rows of a
    Transformer's learned position table (``positions: learned``); None: any (a sinusoid table grows, an RNN has
    none). translate, the Translator and validation cap and refuse by it, not with a traceback from ``forward``."""
    cfg = getattr(net, "cfg", None)
    return cfg.max_len if isinstance(cfg, TransformerConfig) and cfg.positions == "learned" else None


class FeedForward(nn.Sequential):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied to each position alone."""

    def __init__(self, d_model: int, ff_dim: int, dropout: float):
        super().__init__(nn.Linear(d_model, ff_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_dim, d_model))


class _Residual(nn.Module):
    """Residual + LayerNorm around sub-layers: post-norm (the paper) or pre-norm."""

    def __init__(self, cfg: TransformerConfig, n_sublayers: int):
        super().__init__()
        self.norms = nn.ModuleList(nn.LayerNorm(cfg.d_model) for _ in range(n_sublayers))
        self.drop = nn.Dropout(cfg.dropout)
        self.norm_first = cfg.norm_first

    def inp(self, x: Tensor, i: int) -> Tensor:
        """The input of sub-layer i."""
        return self.norms[i](x) if self.norm_first else x

    def add(self, x: Tensor, out: Tensor, i: int) -> Tensor:
        """Sub-layer i's output added to the residual stream."""
        return x + self.drop(out) if self.norm_first else self.norms[i](x + self.drop(out))


class EncoderLayer(_Residual):
    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg, 2)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attn_dropout)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B, S, D), mask (B, S) True = real token -> (B, S, D)."""
        h = self.inp(x, 0)
        x = self.add(x, self.self_attn(h, h, mask=mask)[0], 0)
        return self.add(x, self.ff(self.inp(x, 1)), 1)


class DecoderLayer(_Residual):
    def __init__(self, cfg: TransformerConfig):
        super().__init__(cfg, 3)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attn_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.num_heads, cfg.attn_dropout)
        self.ff = FeedForward(cfg.d_model, cfg.ff_dim, cfg.dropout)

    def forward(
        self, y: Tensor, memory: HeadKV, mask: Tensor, cache: HeadKV | None = None, need_weights: bool = False
    ) -> tuple[Tensor, HeadKV | None, Tensor | None]:
        """y (B, T, D) target positions; memory: the encoder output's keys/values for the cross-attention;
        mask (B, S); cache: the self-attention keys/values of the positions before y (None: y is the whole prefix).

        Returns y (B, T, D), the cache extended by y's positions (None without a cache), and the cross-attention
        weights (B, H, T, S) when ``need_weights``.
        """
        h = self.inp(y, 0)
        if cache is None:  # the whole prefix at once: a causal mask hides later positions
            a, _ = self.self_attn(h, h, causal=True)
        else:  # positions after the cached ones: they see the cache and (causally) each other
            cache = cache.extend(self.self_attn.precompute(h))
            a, _ = self.self_attn(h, cache, causal=True)
        y = self.add(y, a, 0)
        c, weights = self.cross_attn(self.inp(y, 1), memory, mask=mask, need_weights=need_weights)
        y = self.add(y, c, 1)
        return self.add(y, self.ff(self.inp(y, 2)), 2), cache, weights


class Transformer(GenerateMixin, nn.Module):
    # the cross-attention keys / values of the memory and its mask: fixed per sentence, never reordered, and kept one
    # row per sentence for its K beams (the cross-attention reads K query rows per memory row: MultiHeadAttention)
    source_constant_state = ("cross", "mask")
    one_row_per_source_state = ("cross", "mask")

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.cfg = cfg
        D = cfg.d_model
        self.src_embed = nn.Embedding(cfg.src_vocab_size, D, padding_idx=cfg.pad_id)
        self.tgt_embed = (
            self.src_embed if cfg.share_embeddings else nn.Embedding(cfg.tgt_vocab_size, D, padding_idx=cfg.pad_id)
        )
        self.src_pos = PositionalEncoding(D, cfg.positions, cfg.max_len)
        self.tgt_pos = PositionalEncoding(D, cfg.positions, cfg.max_len)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        # Pre-norm leaves the residual stream un-normalised: each stack ends with a LayerNorm.
        self.enc_norm = nn.LayerNorm(D) if cfg.norm_first else nn.Identity()
        self.dec_norm = nn.LayerNorm(D) if cfg.norm_first else nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(D, cfg.tgt_vocab_size)
        self.scale = math.sqrt(D)
        self._init_weights()
        if cfg.tie_output:
            self.out.weight = self.tgt_embed.weight
        # decoder layer whose cross-attention `step` returns (per head), for plots; a loaded model's is the
        # penultimate (Translator.from_data: alignments.alignment_layer)
        self.plot_layer = -1
        self.step_attention = True  # False: `step` returns no attention (skips computing the weights)

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        for emb in [self.src_embed] if self.cfg.share_embeddings else [self.src_embed, self.tgt_embed]:
            # N(0, 1/D) times the √D scale: unit-variance inputs, and sensible logits when tied to the output.
            nn.init.normal_(emb.weight, std=self.cfg.d_model**-0.5)
            with torch.no_grad():
                emb.weight[self.cfg.pad_id].zero_()

    def set_plot_layer(self, layer: int) -> None:
        """Choose the decoder layer whose cross-attention `step` returns (Python indexing: -1 = last)."""
        n = len(self.decoder_layers)
        if not -n <= layer < n:
            raise ValueError(
                f"--layer {layer} is out of range: the model has {n} decoder layers (0..{n - 1}, or -{n}..-1 from the "
                "last)"
            )
        self.plot_layer = layer

    @property
    def plot_index(self) -> int:
        """The plot layer counted from 0 (``plot_layer`` may count from the end: -1 = the last)."""
        return self.plot_layer % len(self.decoder_layers)

    # --- encoder and decoder ----------------------------------------------------------------------------------------
    def encode(self, src: Tensor, src_lens: Tensor) -> dict:
        """src (B, S), src_lens (B,) -> the decoder's initial state (memory keys/values per layer, empty caches)."""
        B, S = src.shape
        mask = torch.arange(S, device=src.device).unsqueeze(0) < src_lens.to(src.device).unsqueeze(1)  # (B, S)
        x = self.drop(self.src_embed(src) * self.scale + self.src_pos(S))  # (B, S, D)
        for layer in self.encoder_layers:
            x = layer(x, mask)
        memory = self.enc_norm(x)  # (B, S, D)
        empty = memory.new_zeros(B, self.cfg.num_heads, 0, self.cfg.d_model // self.cfg.num_heads)
        return {
            "mask": mask,
            "cross": tuple(layer.cross_attn.precompute(memory) for layer in self.decoder_layers),
            "self": tuple(HeadKV(empty, empty) for _ in self.decoder_layers),
        }

    def decode(self, tgt_in: Tensor, state: dict, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """The whole target prefix at once: tgt_in (B, T) -> logits (B, T, V), and with ``need_weights`` the
        plot layer's cross-attention (B, T, H, S). Ignores the state's self-attention cache."""
        hidden, attn = self.decode_hidden(tgt_in, state, need_weights)
        return self.out(hidden), attn

    def decode_hidden(self, tgt_in: Tensor, state: dict, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``decode`` without the output projection: the decoder's top states (B, T, D) (and the attention)."""
        T = tgt_in.size(1)
        y = self.drop(self.tgt_embed(tgt_in) * self.scale + self.tgt_pos(T))  # (B, T, D)
        plot = self.plot_index
        attn = None
        for i, layer in enumerate(self.decoder_layers):
            y, _, w = layer(y, state["cross"][i], state["mask"], need_weights=need_weights and i == plot)
            attn = w if w is not None else attn
        return self.dec_norm(y), None if attn is None else attn.transpose(1, 2)

    def forward(
        self, src: Tensor, src_lens: Tensor, tgt_in: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: tgt_in (B, T) = bos + target -> logits (B, T, V), attention (B, T, H, S) or None."""
        return self.decode(tgt_in, self.encode(src, src_lens), need_weights)

    # --- step protocol ------------------------------------------------------------------------------------------------
    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor | None, dict]:
        """One token per row with the key/value cache: tokens (N,) -> log-probs (N, V), the plot layer's
        cross-attention per head (N, H, S) (None if ``step_attention`` is off), the state with the cache extended."""
        t = state["self"][0].k.size(2)  # tokens fed so far = this token's position
        y = self.drop(self.tgt_embed(tokens).unsqueeze(1) * self.scale + self.tgt_pos(1, offset=t))  # (N, 1, D)
        plot = self.plot_index if self.step_attention else -1
        caches, attn = [], None
        for i, layer in enumerate(self.decoder_layers):
            y, cache, w = layer(y, state["cross"][i], state["mask"], cache=state["self"][i], need_weights=i == plot)
            caches.append(cache)
            attn = w[:, :, 0] if w is not None else attn  # (N, H, S)
        log_probs = torch.log_softmax(self.out(self.dec_norm(y[:, 0])), dim=-1)  # (N, V)
        return log_probs, attn, {**state, "self": tuple(caches)}
