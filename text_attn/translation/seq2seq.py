"""RNN encoder-decoder with Bahdanau or Luong attention, or none (the fixed-vector bottleneck baseline).

- Encoder: embedding + bidirectional GRU/LSTM over packed sequences -> states (B, S, 2*H_enc).
- Decoder, by ``attention``:
  - ``bahdanau`` (Bahdanau et al. 2015): the query is the previous decoder state s_{t-1};
    s_t = RNN([E y_{t-1}; c_t], s_{t-1}).
  - ``luong-dot|general|concat`` (Luong et al. 2015): s_t = RNN([E y_{t-1}; h~_{t-1}], s_{t-1}) (input feeding), the
    query is the current state s_t, h~_t = tanh(W_c [s_t; c_t]). ``luong-dot`` is the paper's eq. 8, s_tᵀ h̄_s over
    the encoder states as they are (no parameters; c_t sums them): the decoder state must be as wide as they are
    (``dec_hidden`` = 2 x ``enc_hidden``, or ``enc_hidden`` one-directional), else the config is refused. Until
    2026-12-02 it projected the states first (``dot_projection``: W h̄_s + b, which softmax makes luong-general's
    score, and c_t summed the projected states); model files and checkpoints of then load so (:func:`saved_options`).
  - ``none``: the fixed-vector bottleneck of Cho et al. 2014: the only link to the source is the final encoder state
    c, which initialises s_0 and is the (constant) context of every step: s_t = RNN([E y_{t-1}; c], s_{t-1}).
- Output step: concat(decoder state, context) -> feed-forward (tanh) -> vocabulary.

Where ``bahdanau`` departs from Bahdanau et al. 2015:
- the output layer is softmax(W_o tanh(W_c [s_i; c_i])), the new state and the context, as Luong's h~_t, where the
  paper's eq. 4 / appendix A.2.2 reads s_{i-1}, the previous word E y_{i-1} and c_i through a maxout layer
  (t_i = max-pooled pairs of U_o s_{i-1} + V_o E y_{i-1} + C_o c_i, then W_o t_i);
- s_0 = tanh(W_s [forward last; backward first] + b), both directions' final states, where the paper takes
  tanh(W_s ←h_1), the backward one alone.

The decoder implements the step protocol of :mod:`text_attn.core.decoding`, so greedy and beam search work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from text_attn.core.attention import build_attention
from text_attn.core.decoding import GenerateMixin
from text_attn.core.vocab import vocab_sizes

ATTENTIONS = ("bahdanau", "luong-dot", "luong-general", "luong-concat", "none")


@dataclass
class Seq2SeqConfig:
    src_vocab_size: int  # source vocabulary, specials included
    tgt_vocab_size: int  # target vocabulary, specials included
    attention: str = "bahdanau"  # one of ATTENTIONS
    rnn: str = "gru"  # "gru" or "lstm", for encoder and decoder
    embed_dim: int = 128  # word embedding size, both sides
    enc_hidden: int = 128  # encoder state size per direction (states are 2*enc_hidden; one-directional: enc_hidden)
    dec_hidden: int = 256  # decoder state size
    attn_dim: int = 256  # additive / concat attention's hidden size
    enc_layers: int = 1  # stacked encoder layers
    bidirectional: bool = True  # read the source both ways (Bahdanau et al.); False: left to right only
    dropout: float = 0.1  # on embeddings and before the output layer
    pad_id: int = 0  # padding id of both vocabularies
    # luong-dot only: the encoder states projected to dec_hidden (a Linear with bias, ``key_in``) before the dot score,
    # as luong-dot was built until 2026-12-02 (the same score as luong-general); only its files load with it
    dot_projection: bool = False

    def __post_init__(self):
        self.src_vocab_size, self.tgt_vocab_size = vocab_sizes(
            src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size
        )
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}; choose one of {ATTENTIONS}")
        if self.rnn not in ("gru", "lstm"):
            raise ValueError(f"unknown rnn {self.rnn!r}; choose gru or lstm")
        states = (2 if self.bidirectional else 1) * self.enc_hidden
        if self.attention == "luong-dot" and not self.dot_projection and states != self.dec_hidden:
            raise ValueError(
                f"attention luong-dot scores s_t against the encoder states as they are: dec_hidden ({self.dec_hidden})"
                f" must equal their size ({states}: {'2 x ' if self.bidirectional else ''}enc_hidden): set dec_hidden "
                f"to {states}, or use luong-general (a luong-dot checkpoint of before 2026-12-02: dot_projection: true)"
            )


def saved_options(options: dict) -> dict:
    """A network config as a model file or checkpoint saved it (``options``), ready for make_config: one of luong-dot
    that records no ``dot_projection`` was saved before 2026-12-02, when luong-dot always projected its keys (its
    ``key_in`` weights): it is built so again, and translates as it did."""
    if options.get("attention") == "luong-dot" and "dot_projection" not in options:
        return {**options, "dot_projection": True}
    return options


class Encoder(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.src_vocab_size, cfg.embed_dim, padding_idx=cfg.pad_id)
        rnn = nn.GRU if cfg.rnn == "gru" else nn.LSTM
        self.rnn = rnn(
            cfg.embed_dim,
            cfg.enc_hidden,
            num_layers=cfg.enc_layers,
            batch_first=True,
            bidirectional=cfg.bidirectional,
            dropout=cfg.dropout if cfg.enc_layers > 1 else 0.0,
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, src: Tensor, src_lens: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S), src_lens (B,) -> states (B, S, 2H), final (B, 2H) = [last forward; last backward]
        (one-directional: (B, S, H) and the last forward state (B, H))."""
        if src.size(0) == 0:  # a batch of none: empty states (pack_padded_sequence refuses empty tensors)
            width = self.rnn.hidden_size * (2 if self.rnn.bidirectional else 1)
            states = self.embed.weight.new_zeros(0, src.size(1), width)
            return states, states[:, 0]
        packed = pack_padded_sequence(
            self.drop(self.embed(src)), src_lens.cpu(), batch_first=True, enforce_sorted=False
        )
        out, hidden = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        h_n = hidden[0] if isinstance(hidden, tuple) else hidden  # (layers*directions, B, H)
        final = torch.cat([h_n[-2], h_n[-1]], dim=-1) if self.rnn.bidirectional else h_n[-1]  # the top layer's
        return states, final


class Seq2Seq(GenerateMixin, nn.Module):
    """The RNN encoder-decoder (a bidirectional GRU or LSTM encoder; a decoder with Bahdanau, Luong or no attention,
    :class:`Seq2SeqConfig`): ``forward`` scores target tokens by teacher forcing, ``generate`` (GenerateMixin)
    searches greedily or by beam."""

    # encoder memory, its projection, its mask, the no-attention context: fixed per sentence, never reordered
    source_constant_state = ("keys", "mask", "context")

    @property
    def one_row_per_source_state(self) -> tuple[str, ...]:
        """The attention's memory and mask stay one row per sentence for its K beams (both scores read K query rows
        per key row); the context of a model without attention joins each row's input, so it is expanded."""
        return () if self.kind == "none" else ("keys", "mask")

    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        enc_dim, H = (2 if cfg.bidirectional else 1) * cfg.enc_hidden, cfg.dec_hidden
        self.kind = "none" if cfg.attention == "none" else cfg.attention.split("-")[0]
        self.embed = nn.Embedding(cfg.tgt_vocab_size, cfg.embed_dim, padding_idx=cfg.pad_id)
        self.bridge = nn.Linear(enc_dim, H)  # final encoder state -> s_0
        self.lstm = cfg.rnn == "lstm"
        if self.lstm:
            self.bridge_c = nn.Linear(enc_dim, H)
        cell = nn.LSTMCell if self.lstm else nn.GRUCell
        if self.kind == "none":
            self.cell = cell(cfg.embed_dim + enc_dim, H)
            self.attn = None
            self.hidden_out = nn.Linear(H + enc_dim, H)
        else:
            kind = "bahdanau" if self.kind == "bahdanau" else cfg.attention
            # luong-dot scores the raw encoder states (enc_dim == H, checked by the config); a file of before
            # 2026-12-02 projected them to H first (dot_projection: W h_s + b; the context summed those too)
            legacy = cfg.attention == "luong-dot" and cfg.dot_projection
            self.key_in = nn.Linear(enc_dim, H) if legacy else nn.Identity()
            key_dim = H if legacy else enc_dim
            self.attn = build_attention(kind, query_dim=H, key_dim=key_dim, attn_dim=cfg.attn_dim)
            feed = H if self.kind == "luong" else enc_dim  # input feeding (Luong) or context (Bahdanau)
            self.cell = cell(cfg.embed_dim + feed, H)
            self.hidden_out = nn.Linear(H + key_dim, H)  # W_c [s_t; c_t]
        self.drop = nn.Dropout(cfg.dropout)
        self.out = nn.Linear(H, cfg.tgt_vocab_size)

    # --- step protocol -------------------------------------------------------------------------------------------
    def encode(self, src: Tensor, src_lens: Tensor) -> dict:
        """The decoder's initial state for a source batch: s_0, the attention keys (projected once), the mask."""
        states, final = self.encoder(src, src_lens)
        state = {"h": torch.tanh(self.bridge(final))}  # (B, H)
        if self.lstm:
            state["c"] = torch.tanh(self.bridge_c(final))
        if self.attn is None:
            state["context"] = final  # (B, 2H_enc): the same context at every step
        else:
            state["keys"] = self.attn.precompute(self.key_in(states))  # (B, S, K) and its projection
            state["mask"] = src != self.cfg.pad_id  # (B, S)
            if self.kind == "luong":
                state["feed"] = state["h"].new_zeros(state["h"].shape)  # h~_0
        return state

    def step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor | None, dict]:
        hidden, attn, state = self._step(tokens, state)
        return torch.log_softmax(self.out(self.drop(hidden)), dim=-1), attn, state

    def _step(self, tokens: Tensor, state: dict) -> tuple[Tensor, Tensor | None, dict]:
        """tokens (N,) -> output-layer input (N, H), attention (N, S) or None, new state."""
        emb = self.drop(self.embed(tokens))  # (N, E)
        new = dict(state)
        attn = None
        if self.kind == "none":
            self._cell(torch.cat([emb, state["context"]], -1), state, new)
            hidden = torch.tanh(self.hidden_out(torch.cat([new["h"], state["context"]], -1)))
        elif self.kind == "bahdanau":
            ctx, attn = self.attn(state["h"], state["keys"], mask=state["mask"])  # query = s_{t-1}
            self._cell(torch.cat([emb, ctx], -1), state, new)
            hidden = torch.tanh(self.hidden_out(torch.cat([new["h"], ctx], -1)))
        else:
            self._cell(torch.cat([emb, state["feed"]], -1), state, new)  # input feeding
            ctx, attn = self.attn(new["h"], state["keys"], mask=state["mask"])  # query = s_t
            hidden = torch.tanh(self.hidden_out(torch.cat([new["h"], ctx], -1)))  # h~_t
            new["feed"] = hidden
        return hidden, attn, new

    def _cell(self, x: Tensor, state: dict, new: dict) -> None:
        if self.lstm:
            new["h"], new["c"] = self.cell(x, (state["h"], state["c"]))
        else:
            new["h"] = self.cell(x, state["h"])

    # --- training ---------------------------------------------------------------------------------------------------
    def forward(self, src: Tensor, src_lens: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: tgt_in (B, T) = bos + target -> logits (B, T, V), attention (B, T, S) or None."""
        state = self.encode(src, src_lens)
        hiddens, attns = [], []
        for t in range(tgt_in.size(1)):
            hidden, attn, state = self._step(tgt_in[:, t], state)
            hiddens.append(hidden)
            if attn is not None:
                attns.append(attn)
        # One vocabulary projection for all steps: cheaper than T small ones.
        logits = self.out(self.drop(torch.stack(hiddens, 1)))  # (B, T, V)
        return logits, (torch.stack(attns, 1) if attns else None)
