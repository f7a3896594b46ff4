"""What drives a translation's words: the text family's hooks for the faithfulness measure (core.faithfulness).

For one source sentence and the model's own translation of it (each target token's prefix is what the model generated;
its eos included when it produced one), per target token t:

- Units: the source tokens the decoder attends over, positions 0..S-1 of the source ids, **the source eos included**
  (the last unit, named ``<eos>``): both architectures attend to it (their mask is True there) and the models put
  much of their weight on it, so leaving it out would hide where that weight goes.
- ``attention`` (S,): the model's own weights at the step. Bahdanau / Luong: the step's α. Transformer: the
  cross-attention of every head of every decoder layer, averaged over heads and layers: :func:`transformer_step`
  runs the decoder layers itself (the same ``DecoderLayer`` calls as ``Transformer.step``) asking each for its
  weights, instead of the one plot layer ``step`` returns.
- ``prob(removed)``: the word's probability with the source tokens marked in ``removed`` (K, S) masked out of the
  decoder's cross-attention **at the word's own step only**: the state before the step (s_{t-1}, the input feed, the
  Transformer's self-attention cache, all built from the whole sentence) is kept and only ``state["mask"]`` changes,
  through the model's own ``step``. A masked token gets weight 0 and the others are renormalised (masked_softmax).
  With every unit removed the weights are all zero and the context is the zero vector (``masked_softmax`` keeps the
  row finite and zeroes it; the Transformer's cross-attention gives 0 per head, so its output is the out projection's
  bias): a finite probability, never NaN. That is ``next_word_probs`` with alpha = 0 (the tests check both).
- ``scores["gradient"]`` (S,): gradient x input of log p(word) w.r.t. the encoder outputs the attention reads (the
  RNN's annotations, before any key projection; the Transformer's memory, after the encoder's last norm) at that step,
  summed over features. The cross-attention's keys and values are recomputed from a memory leaf; the state before
  the step is held fixed, as for removal, so this is the word's sensitivity through its own step's attention.
- ``scores["penultimate_layer"]`` (S,), a Transformer with 2 or more decoder layers: the cross-attention of its
  penultimate layer alone, averaged over heads: the layer ``translate`` shows and ``--alignments`` reads
  (alignments.alignment_layer), the one guided alignment teaches.
- ``scores["rollout"]`` (S,), Transformer only: attention rollout (Abnar & Zuidema 2020). Each encoder layer's
  self-attention averaged over heads, with the residual: 0.5 A + 0.5 I, rows renormalised; multiplied down through the
  layers, R = Â_L ... Â_1 (R[i, j]: how much top position i draws from input token j); the score is the word's
  head-and-layer-averaged cross-attention times R.
- ``next_word_probs(alpha)`` (K, V): the step's next-word distribution with its attention weights replaced by
  ``alpha`` (K, S). Bahdanau: context = alpha @ annotations, then s_t = RNN([E y_{t-1}; context], s_{t-1}) and the
  output as the model does (the weights depend on s_{t-1}, so nothing before them changes). Luong: s_t is computed
  first (input feeding), then context = alpha @ keys and h~_t = tanh(W_c [s_t; c_t]). Transformer: **every head of
  every decoder layer** reads ``alpha`` in place of its own weights (alpha (K, L, H, S) sets each head apart). Note
  for the Transformer that the measure's baseline row, the "own" alpha, is then the head-and-layer mean in every
  head, itself a change from the model's own distribution: the interventions compare two such replacements, and
  the ``own`` row (``own_probs``: :func:`own_distribution`, the model's step as it decodes) says how far that baseline
  is from the model (for Bahdanau and Luong it is the model's step itself: 0).

A model without attention (the seq2seq with attention "none") is refused with one ValueError line. Everything runs
the network in eval mode (no dropout) and puts its mode back afterwards, and in float32: a float16 or bfloat16 network
is probed through a float32 copy of its weights (text_attn.core.precision), the caller's network untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from text_attn.core.attention import HeadKV
from text_attn.core.decoding import evaluating, select_rows
from text_attn.core.faithfulness import Probe
from text_attn.core.precision import float32_network, full_precision
from text_attn.core.vocab import EOS
from text_attn.translation.alignments import alignment_layer
from text_attn.translation.seq2seq import Seq2Seq
from text_attn.translation.transformer import DecoderLayer, Transformer

# The translator is passed in, never imported: text_attn.translation.translator's Translator.explain calls this module
# (a translator: anything with .net, .src_vocab, .tgt_vocab, .tokenize and .translate_tokens, as Translator has).
Translator = Any

TextNet = Seq2Seq | Transformer


def require_attention(net: nn.Module) -> None:
    """Refuse (one ValueError line) a network whose decoder has no attention over the source to explain."""
    if isinstance(net, Seq2Seq) and net.attn is None:
        raise ValueError(
            "this model has no attention to explain: a seq2seq with attention 'none' reads its source through one "
            "fixed vector (use a bahdanau, luong or transformer model)"
        )
    if not isinstance(net, (Seq2Seq, Transformer)):
        raise ValueError(f"not a text encoder-decoder with attention: {type(net).__name__}")


@dataclass
class SentenceSteps:
    """A sentence's translation, stepped once with the model's own tokens: what every probe of its words starts from."""

    src: Tensor  # (1, S) the source ids, eos included: the units
    memory: Tensor  # (1, S, E) the encoder outputs the attention reads (RNN annotations; Transformer memory)
    tokens: list[int]  # the translation's ids, eos included when produced: the words probed
    states: list[dict]  # per word t: the decoder state before its step (built from the whole sentence)
    alphas: Tensor  # (T, S) the model's attention at each word's step (Transformer: mean over heads and layers)
    probs: Tensor  # (T,) the probability the model gave each of its words
    bos_id: int
    heads: Tensor | None = None  # Transformer: (T, L, H, S) every decoder layer's and head's cross-attention
    encoder_attention: Tensor | None = None  # Transformer: (L_enc, H, S, S) the encoder's self-attention


def _encode(net: TextNet, src: Tensor) -> tuple[dict, Tensor, Tensor | None]:
    """The model's own ``encode`` of src (1, S), and what it computes on the way, caught with forward hooks: the
    encoder outputs (1, S, E) and, for a Transformer, every encoder layer's self-attention (L_enc, H, S, S)."""
    lens = torch.tensor([src.size(1)], device=src.device)
    caught: dict[str, Tensor] = {}
    attention: list[Tensor] = []
    handles = []
    if isinstance(net, Seq2Seq):
        handles.append(net.encoder.register_forward_hook(lambda m, a, out: caught.__setitem__("memory", out[0])))
    else:
        handles.append(net.enc_norm.register_forward_hook(lambda m, a, out: caught.__setitem__("memory", out)))

        def weights(module: nn.Module, args: tuple, kwargs: dict, out: tuple) -> None:
            # module.forward, not module(...): calling the module would run this hook again
            attention.append(module.forward(*args, **kwargs, need_weights=True)[1][0])  # (H, S, S)

        for layer in net.encoder_layers:
            handles.append(layer.self_attn.register_forward_hook(weights, with_kwargs=True))
    try:
        state = net.encode(src, lens)
    finally:
        for h in handles:
            h.remove()
    return state, caught["memory"], torch.stack(attention) if attention else None


def _source_entries(net: TextNet, memory: Tensor) -> dict:
    """The state's entries the attention reads, made from encoder outputs ``memory`` (N, S, E)."""
    if isinstance(net, Seq2Seq):
        return {"keys": net.attn.precompute(net.key_in(memory))}
    return {"cross": tuple(layer.cross_attn.precompute(memory) for layer in net.decoder_layers)}


def _layer_with_weights(layer: DecoderLayer, y: Tensor, memory: HeadKV, cache: HeadKV, w: Tensor) -> tuple:
    """``DecoderLayer.forward`` for one cached position y (N, 1, D) with the cross-attention's weights given:
    w (N, H, S) for its heads instead of the softmax of its scores. Returns y (N, 1, D) and the extended cache."""
    h = layer.inp(y, 0)
    cache = cache.extend(layer.self_attn.precompute(h))
    a, _ = layer.self_attn(h, cache, causal=True)
    y = layer.add(y, a, 0)
    ctx = torch.matmul(w.unsqueeze(2).to(memory.v.dtype), memory.v)  # (N, H, 1, Dh)
    c = layer.cross_attn.out_proj(ctx.transpose(1, 2).reshape(y.size(0), 1, -1))  # (N, 1, D)
    y = layer.add(y, c, 1)
    return layer.add(y, layer.ff(layer.inp(y, 2)), 2), cache


def transformer_step(
    net: Transformer, tokens: Tensor, state: dict, alpha: Tensor | None = None
) -> tuple[Tensor, Tensor, dict]:
    """``Transformer.step`` for tokens (N,), returning every decoder layer's cross-attention (N, L, H, S) rather than
    the plot layer's. ``alpha``: weights every cross-attention head uses instead of its own: (N, S) for all heads of
    all layers, or (N, L, H, S) per layer and head."""
    t = state["self"][0].k.size(2)  # tokens fed so far = this token's position
    y = net.drop(net.tgt_embed(tokens).unsqueeze(1) * net.scale + net.tgt_pos(1, offset=t))  # (N, 1, D)
    caches, weights = [], []
    for i, layer in enumerate(net.decoder_layers):
        memory, cache = state["cross"][i], state["self"][i]
        if alpha is None:
            y, cache, w = layer(y, memory, state["mask"], cache=cache, need_weights=True)
            w = w[:, :, 0]  # (N, H, S)
        else:
            heads = layer.cross_attn.num_heads
            w = alpha[:, i] if alpha.dim() == 4 else alpha.unsqueeze(1).expand(-1, heads, -1)  # (N, H, S)
            y, cache = _layer_with_weights(layer, y, memory, cache, w)
        caches.append(cache)
        weights.append(w)
    log_probs = torch.log_softmax(net.out(net.dec_norm(y[:, 0])), dim=-1)  # (N, V)
    return log_probs, torch.stack(weights, dim=1), {**state, "self": tuple(caches)}


@torch.no_grad()
def step_through(net: TextNet, src: Tensor, tokens: list[int], bos_id: int) -> SentenceSteps:
    """Teacher-force ``tokens`` (the model's own translation, eos included) over the source ids src (1, S) (eos
    included, no padding), keeping the state before every step, its attention and each token's probability."""
    require_attention(net)
    if src.dim() != 2 or src.size(0) != 1:
        raise ValueError(f"step_through takes one sentence's source ids (1, S), got {tuple(src.shape)}")
    with evaluating(net):
        state, memory, encoder_attention = _encode(net, src)
        states, alphas, heads, probs = [], [], [], []
        prev = torch.tensor([bos_id], device=src.device)
        for tok in tokens:
            states.append(state)
            if isinstance(net, Transformer):
                log_probs, w, state = transformer_step(net, prev, state)  # w (1, L, H, S)
                heads.append(w[0])
                alpha = w[0].mean(dim=(0, 1))  # (S,) over heads and layers
            else:
                log_probs, a, state = net.step(prev, state)
                alpha = a[0]  # (S,)
            alphas.append(alpha)
            probs.append(log_probs[0, tok].exp())
            prev = torch.tensor([tok], device=src.device)
    S = src.size(1)
    return SentenceSteps(
        src,
        memory,
        list(tokens),
        states,
        torch.stack(alphas) if alphas else memory.new_zeros(0, S),
        torch.stack(probs) if probs else memory.new_zeros(0),
        bos_id,
        torch.stack(heads) if heads else None,
        encoder_attention,
    )


def _prev(steps: SentenceSteps, t: int, k: int) -> Tensor:
    """The token fed at step t, for k rows (K,)."""
    tok = steps.bos_id if t == 0 else steps.tokens[t - 1]
    return torch.full((k,), tok, dtype=torch.long, device=steps.src.device)


def _state_rows(steps: SentenceSteps, t: int, k: int) -> dict:
    """The state before step t, repeated for k rows."""
    return select_rows(steps.states[t], torch.zeros(k, dtype=torch.long, device=steps.src.device))


@torch.no_grad()
def removal_prob(net: TextNet, steps: SentenceSteps, t: int, removed: Tensor) -> Tensor:
    """removed (K, S) bool -> (K,) the probability of word t with those source tokens masked out of its step's
    attention (module doc); the model's own ``step`` on the state before the step."""
    k = removed.size(0)
    state = _state_rows(steps, t, k)
    state["mask"] = state["mask"] & ~removed.to(state["mask"].device)  # (K, S)
    with evaluating(net):
        log_probs, _, _ = net.step(_prev(steps, t, k), state)
    return log_probs[:, steps.tokens[t]].exp()


def gradient_scores(net: TextNet, steps: SentenceSteps, t: int) -> Tensor:
    """(S,) gradient x input of log p(word t) w.r.t. the encoder outputs at its step, summed over features."""
    memory = steps.memory.detach().clone().requires_grad_(True)  # (1, S, E)
    with torch.enable_grad(), evaluating(net):
        state = {**steps.states[t], **_source_entries(net, memory)}
        log_probs, _, _ = net.step(_prev(steps, t, 1), state)
        (grad,) = torch.autograd.grad(log_probs[0, steps.tokens[t]], memory)
    return (grad * memory.detach())[0].sum(-1)  # (S,)


def rollout(encoder_attention: Tensor) -> Tensor:
    """(L, H, S, S) encoder self-attention -> (S, S) attention rollout: each layer's head mean with the residual,
    0.5 A + 0.5 I, rows renormalised, multiplied from the first layer up (R = Â_L ... Â_1)."""
    S = encoder_attention.size(-1)
    eye = torch.eye(S, dtype=encoder_attention.dtype, device=encoder_attention.device)
    R = eye
    for A in encoder_attention.mean(dim=1):  # (S, S) per layer, first layer first
        A = 0.5 * A + 0.5 * eye
        R = (A / A.sum(-1, keepdim=True)) @ R
    return R


@torch.no_grad()
def next_word_probs(net: TextNet, steps: SentenceSteps, t: int, alpha: Tensor) -> Tensor:
    """alpha (K, S) in place of word t's attention -> the next-word distributions (K, V) (module doc). For a
    Transformer alpha may also be (K, L, H, S): one row per layer and head."""
    k = alpha.size(0)
    state = _state_rows(steps, t, k)
    prev = _prev(steps, t, k)
    with evaluating(net):
        if isinstance(net, Transformer):
            log_probs, _, _ = transformer_step(net, prev, state, alpha)
            return log_probs.exp()
        values = state["keys"].keys  # (K, S, E'): what the context sums (the attention's values are its keys)
        emb = net.drop(net.embed(prev))  # (K, E)
        new = dict(state)
        if net.kind == "bahdanau":  # the weights read s_{t-1}: the context comes first
            ctx = torch.bmm(alpha.unsqueeze(1).to(values.dtype), values).squeeze(1)  # (K, E')
            net._cell(torch.cat([emb, ctx], -1), state, new)
        else:  # Luong: s_t first (input feeding), then the weights read it
            net._cell(torch.cat([emb, state["feed"]], -1), state, new)
            ctx = torch.bmm(alpha.unsqueeze(1).to(values.dtype), values).squeeze(1)
        hidden = torch.tanh(net.hidden_out(torch.cat([new["h"], ctx], -1)))  # (K, H)
        return torch.softmax(net.out(net.drop(hidden)), dim=-1)


@torch.no_grad()
def own_distribution(net: TextNet, steps: SentenceSteps, t: int) -> Tensor:
    """(V,) the model's own next-word distribution at word t's step, every head attending as it does."""
    with evaluating(net):
        if isinstance(net, Transformer):
            log_probs, _, _ = transformer_step(net, _prev(steps, t, 1), _state_rows(steps, t, 1))
        else:
            log_probs, _, _ = net.step(_prev(steps, t, 1), _state_rows(steps, t, 1))
    return log_probs[0].exp()


def word_probe(net: TextNet, steps: SentenceSteps, t: int, rollout_matrix: Tensor | None = None) -> Probe:
    """The faithfulness probe of word t: removal, attention, gradient (and rollout for a Transformer, from
    ``rollout_matrix`` (S, S), else computed), and the attention intervention hook."""
    scores = {"gradient": gradient_scores(net, steps, t)}
    if steps.heads is not None and steps.heads.size(1) > 1:  # (T, L, H, S): the layer translate shows, alone
        scores["penultimate_layer"] = steps.heads[t][alignment_layer(net)].mean(dim=0)  # (S,)
    if steps.encoder_attention is not None:
        R = rollout(steps.encoder_attention) if rollout_matrix is None else rollout_matrix
        scores["rollout"] = steps.alphas[t] @ R  # (S,)
    return Probe(
        n_units=steps.src.size(1),
        prob=partial(removal_prob, net, steps, t),
        attention=steps.alphas[t],
        scores=scores,
        next_word_probs=partial(next_word_probs, net, steps, t),
        own_probs=own_distribution(net, steps, t),
    )


class SentenceProbes(NamedTuple):
    tokens: list[str]  # the translation's tokens as the model wrote them, "<eos>" last when it ended
    source_units: list[str]  # the source tokens as the model saw them, then "<eos>": the units
    probes: list[Probe]  # one per token


def sentence_probes(translator: Translator, sentence: str, beam_size: int | None = 1) -> SentenceProbes:
    """Translate ``sentence`` (``beam_size``: 1 = greedy, None = the model file's choice; the other decoding options
    as ``translate`` takes them) and build a probe for every token of the translation, eos included (none when the
    translation was cut off at max_len). The tokens are ``translate_tokens``' words, the ones a user is shown (never
    pad or bos: a translation's search bans them)."""
    net = translator.net
    require_attention(net)
    toks = translator.tokenize(sentence)
    if not toks:
        raise ValueError(f"empty input: {sentence!r}")
    d = translator.decoding(beam_size=beam_size)
    options = {"no_repeat_ngram": d["no_repeat_ngram"]} if d["no_repeat_ngram"] else {}
    tr = translator.translate_tokens([toks], d["beam_size"], d["length_penalty"], **options)[0]
    tgt = translator.tgt_vocab
    ids = tgt.encode(tr.tokens, eos=not tr.truncated)
    net = float32_network(net)  # the probes in float32 whatever the model's dtype (translation_evidence)
    device = next(net.parameters()).device
    src = torch.tensor([translator.src_vocab.encode(toks, eos=True)], device=device)
    with full_precision(device):  # a caller's autocast off too, as translation_evidence turns it off
        steps = step_through(net, src, ids, tgt.bos_id)
        R = None if steps.encoder_attention is None else rollout(steps.encoder_attention)
        probes = [word_probe(net, steps, t, R) for t in range(len(ids))]
    return SentenceProbes(tgt.decode(ids, strip_special=False), [*toks, EOS], probes)


@dataclass
class Evidence:
    """A translation's tokens with both maps (issue 73): where each attended and what drives it."""

    tokens: list[str]  # the translation's tokens (eos not included)
    source: list[str]  # the source tokens, <eos> last: the units
    attention: Tensor  # (T, S) each token's attention (a Transformer's: its --layer's heads averaged, as drawn)
    evidence: Tensor  # (T, S) p(token) - p(token with source token j masked) at its step
    agreement: list[float]  # per token, Kendall's tau-b between its attention and its evidence (nan: no order)


def evidence_of(translator: Translator, translation: Any) -> Evidence:
    """A Translation's :class:`Evidence`; a line translated sentence by sentence (``translation.pieces``): each
    sentence's, joined as its attention is (text_attn.translation.sentences.join_grids), since each was searched
    with its own sentence alone as the source."""
    from text_attn.translation.sentences import join_grids

    pieces = getattr(translation, "pieces", None) or [translation]
    found = [translation_evidence(translator, list(p.source), list(p.tokens)) for p in pieces]
    if len(found) == 1:
        return found[0]
    from text_attn.core.faithfulness import span_taus

    lengths = [len(p.source) for p in pieces]
    attention = join_grids([e.attention for e in found], lengths)
    evidence = join_grids([e.evidence for e in found], lengths, fold_end=False)  # an end's drop: no stop's to add to
    # each token's agreement over the units its row shows, its own sentence's (it was its sentence's with its own
    # end, unlike the row drawn: 0.6 beside a shown row whose tau is 1.0)
    (agreement,) = span_taus(attention[None], evidence, row_spans(translation))
    return Evidence([t for e in found for t in e.tokens], [t for p in pieces for t in p.source] + [EOS], attention,
                    evidence, agreement)  # fmt: skip


def row_spans(translation: Any) -> list[tuple[int, int, int]]:
    """Per sentence of a line translated sentence by sentence (``translation.pieces``; one: the whole line): (its
    output rows, its first source column, the columns its rows show: its source tokens, and the end for the last
    sentence alone). A token's agreement is over these (:func:`evidence_of`, the --html page's views)."""
    pieces = getattr(translation, "pieces", None) or [translation]
    spans, c = [], 0
    for i, p in enumerate(pieces):
        s = len(p.source)
        spans.append((len(p.tokens), c, s + 1 if i == len(pieces) - 1 else s))
        c += s
    return spans


def translation_evidence(translator: Translator, source: list[str], tokens: list[str]) -> Evidence:
    """Leave-one-out over the source tokens for every token of ``tokens`` (the model's translation of ``source``, a
    token list as ``translate`` shows them, eos left out): one step of S + 1 rows a token."""
    from text_attn.core.faithfulness import kendall_tau

    net = translator.net
    require_attention(net)
    # a half network's probabilities are rounded to 8 (bfloat16) or 11 (float16) bits: most drops came out exactly 0.
    # A float32 copy (the caller's network untouched), and no caller's autocast.
    net = float32_network(net)
    device = next(net.parameters()).device
    src = torch.tensor([translator.src_vocab.encode(source, eos=True)], device=device)  # (1, S)
    ids = translator.tgt_vocab.encode(tokens, eos=False)
    n = src.size(1)
    masks = torch.cat([torch.zeros(1, n, dtype=torch.bool), torch.eye(n, dtype=torch.bool)]).to(device)  # (S + 1, S)
    with full_precision(device):
        steps = step_through(net, src, ids, translator.tgt_vocab.bos_id)
        rows = [removal_prob(net, steps, t, masks) for t in range(len(ids))]
    evidence = torch.stack([r[0] - r[1:] for r in rows]) if rows else torch.zeros(0, n)  # (T, S)
    attention = steps.alphas  # (T, S)
    if steps.heads is not None:  # a Transformer: the layer its views draw (net.plot_index: --layer), heads averaged
        attention = steps.heads[:, net.plot_index].mean(dim=1)  # (T, L, H, S) -> (T, S)
    agreement = [kendall_tau(attention[t], evidence[t]) for t in range(len(ids))]
    return Evidence(list(tokens), [*source, EOS], attention, evidence, agreement)
