"""What drives a caption's words: the captioning family's hooks for text_attn.core.faithfulness (issue 73).

For one photo and the model's own caption of it (the prefix of each word is what the model said), per word t:

- ``prob(removed)``: the word's probability when the regions marked in ``removed`` (K, L) are replaced by a fill vector
  (by default this photo's mean region, :func:`photo_fill`; any other given) **at the word's own
  step**: the attention reads the replaced regions, everything before the step (the LSTM state h_{t-1}, c_{t-1}, built
  from the whole photo) stays. This tests the attention path: does the word depend on the regions it attends to?
- ``gradient``: gradient x input of log p(word) w.r.t. each region vector at that step, summed over features (L,).
- ``gradcam``: Grad-CAM on the CNN's last stage at that step: the map's channels weighted by their mean gradient,
  summed, ReLU (L,). The regions *are* the last stage's map cells (Lite2 at 260 px: 9 x 9, no pooling).
- ``next_word_probs(alpha)``: the next-word distribution (K, V) when the step's attention weights are replaced by
  ``alpha`` (K, L): the context becomes the gated sum of the regions under ``alpha`` (one region, the arg-max, for a
  hard-attention model that decodes with one region a word). Single decoders only: an ensemble's members each have
  their own α.

Pixel space (``PhotoBlocks``): blocks of the photo's grid cells greyed out (the normalised input set to 0,
mid-grey under EfficientNet-Lite's normalisation) and the photo encoded again, the whole caption then teacher-forced
from the new features: the "this part of the photo" claim. It costs an encoder pass per mask, so its units are blocks
of cells (3 x 3 of Lite2's 9 x 9: 9 units).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from captioning.model.decoder import ShowAttendTellDecoder
from captioning.model.network import CaptionModel
from text_attn.core.attention import ProjectedKeys
from text_attn.core.decoding import select_rows
from text_attn.core.faithfulness import Probe
from text_attn.core.precision import float32_network, full_precision, widened


@dataclass
class CaptionWords:
    """A photo's caption, stepped once with the model's own words: what every probe of its words starts from."""

    features: Tensor  # (1, L, D) the photo's regions
    tokens: list[int]  # the caption's ids, eos included: the words probed
    states: list[dict]  # per word t: the search state before its step (built from the whole photo)
    alphas: Tensor  # (T, L) the model's attention at each word's step
    probs: Tensor  # (T,) the probability the model gave each of its words
    bos_id: int


@torch.no_grad()
def step_through(model: CaptionModel, features: Tensor, tokens: list[int], bos_id: int) -> CaptionWords:
    """Teacher-force ``tokens`` (the model's own caption, eos included) over ``features`` (1, L, D), keeping the state
    before every step."""
    state = model.init_state(features)
    states, alphas, probs = [], [], []
    prev = torch.tensor([bos_id], device=features.device)
    for tok in tokens:
        states.append(state)
        log_probs, alpha, state = model.step(prev, state)
        alphas.append(alpha[0])
        probs.append(log_probs[0, tok].exp())
        prev = torch.tensor([tok], device=features.device)
    if not tokens:  # an empty caption (the end chosen first): no word to probe
        return CaptionWords(features, [], [], features.new_zeros(0, features.size(1)), features.new_zeros(0), bos_id)
    return CaptionWords(features, list(tokens), states, torch.stack(alphas), torch.stack(probs), bos_id)


def _prev_token(words: CaptionWords, t: int) -> int:
    return words.bos_id if t == 0 else words.tokens[t - 1]


def _state_with_regions(model: CaptionModel, words: CaptionWords, t: int, regions: Tensor) -> dict:
    """The state before step t with its per-photo entries (the projected regions) made from ``regions`` (K, L, D)
    instead; the recurrent state is the original one, repeated K times."""
    k = regions.size(0)
    fresh = model.init_state(regions)
    before = select_rows(words.states[t], torch.zeros(k, dtype=torch.long, device=regions.device))
    per_photo = set(model.one_row_per_source_state)
    return {name: fresh[name] if name in per_photo else value for name, value in before.items()}


def _mixed(kept: object, filled: object, removed: Tensor) -> object:
    """Per-region entries of two one-photo states (tensors (1, L, ...), or tuples of them) mixed by ``removed``
    (K, L): the filled photo's where a region is removed. Exact, since each region's entries (its vector and its key
    projection) depend on that region alone."""
    if isinstance(kept, Tensor):
        mask = removed.view(*removed.shape, *([1] * (kept.dim() - 2)))  # (K, L, 1...)
        return torch.where(mask, filled, kept)
    return type(kept)(*(_mixed(a, b, removed) for a, b in zip(kept, filled, strict=True)))


class RegionRemoval:
    """``prob`` for one photo's words, in feature space: the regions' per-photo state (vectors and key projections)
    made once for the photo and once for the fill, then mixed per mask; a curve is one decoder step of K rows."""

    def __init__(self, model: CaptionModel, words: CaptionWords, fill: Tensor):
        self.model, self.words = model, words
        with torch.no_grad():
            both = model.init_state(torch.cat([words.features, fill.expand_as(words.features)]))  # (2, L, D) photos
        per_photo = model.one_row_per_source_state
        one, zero = torch.tensor([1]), torch.tensor([0])
        self.kept = {n: select_rows(both[n], zero.to(words.features.device)) for n in per_photo}
        self.filled = {n: select_rows(both[n], one.to(words.features.device)) for n in per_photo}

    @torch.no_grad()
    def prob(self, t: int, removed: Tensor) -> Tensor:
        """removed (K, L) bool -> (K,) the probability of word t with those regions replaced at its step."""
        fast = self._shared_state_prob(t, removed)
        return fast if fast is not None else self._step_prob(t, removed)

    def _shared_state_prob(self, t: int, removed: Tensor) -> Tensor | None:
        """``prob`` without building K copies of the regions (K x L x D floats: most of the time for a leave-one-out
        row of the bundled model): h_{t-1} is one row for all K masks, so each region's attention score is one of two
        numbers (its own or the fill's), and the context is two (K, L) x (L, D) products. The same arithmetic as the
        decoder's step (attend, gate, LSTM, readout), for Show-Attend-Tell decoders and their ensembles; None for any
        other decoder (then the step itself runs)."""
        dec = self.model.decoder
        members = getattr(dec, "members", [dec])
        if not all(isinstance(m, ShowAttendTellDecoder) for m in members):
            return None
        state, prev = self.words.states[t], _prev_token(self.words, t)
        prefixes = [f"{k}." for k in range(len(members))] if hasattr(dec, "members") else [""]
        log_probs = [
            _member_log_probs(
                m, {n: state[p + n] for n in ("h", "c")}, self.kept[p + "keys"], self.filled[p + "keys"], removed, prev
            )  # fmt: skip
            for m, p in zip(members, prefixes, strict=True)
        ]
        if len(log_probs) > 1:  # the ensemble's: log of the members' mean probability (DecoderEnsemble.step)
            mean = torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))
        else:
            mean = log_probs[0]
        return mean[:, self.words.tokens[t]].exp()

    def _step_prob(self, t: int, removed: Tensor) -> Tensor:
        k, words = removed.size(0), self.words
        rows = torch.zeros(k, dtype=torch.long, device=removed.device)
        # the per-photo entries are made from the masks below: copying the step's own K times first cost ~20%
        state = {n: v if n in self.kept else select_rows(v, rows) for n, v in words.states[t].items()}
        for name in self.kept:
            state[name] = _mixed(self.kept[name], self.filled[name], removed)
        prev = torch.full((k,), _prev_token(words, t), device=removed.device)
        log_probs, _, _ = self.model.step(prev, state)
        return log_probs[:, words.tokens[t]].exp()


def _member_log_probs(
    dec: ShowAttendTellDecoder, state: dict, kept: ProjectedKeys, filled: ProjectedKeys, removed: Tensor, prev: int
) -> Tensor:
    """One decoder's step log-probabilities (K, V) with the regions marked in ``removed`` (K, L) read from ``filled``
    instead of ``kept`` (one photo each: keys (1, L, D), proj (1, L, A)); ``state``'s h, c: (1, H), shared."""
    h = state["h"]
    scorer = dec.attention.scorer if dec.hard else dec.attention
    scores = torch.where(removed, scorer.score(h, filled.proj), scorer.score(h, kept.proj))  # (K, L)
    alpha = _as_decoded(dec, torch.softmax(scores, dim=-1))
    keep = alpha.masked_fill(removed, 0.0)
    context = keep @ kept.keys[0] + (alpha - keep) @ filled.keys[0]  # (K, D): each region from kept or filled
    return F.log_softmax(_logits_from_context(dec, state, context, prev), dim=-1)


def _as_decoded(dec: ShowAttendTellDecoder, alpha: Tensor) -> Tensor:
    """α (K, L) as the decoder reads it: one-hot at its arg-max for hard attention with one region a word
    (HardAttention.attend), else as it is."""
    if dec.hard and dec.cfg.hard_inference == "argmax":
        return F.one_hot(alpha.argmax(-1), alpha.size(-1)).to(alpha.dtype)
    return alpha


def _logits_from_context(dec: ShowAttendTellDecoder, state: dict, context: Tensor, prev: int) -> Tensor:
    """The rest of the decoder's step from an ungated context (K, D): the gate β_t, the LSTM from ``state``'s h, c
    ((1, H) shared, or (K, H)) with the previous word ``prev``, the readout -> logits (K, V)."""
    k, h, c = context.size(0), state["h"], state["c"]
    if dec.f_beta is not None:
        context = torch.sigmoid(dec.f_beta(h)) * context  # the gate β_t, as attend applies it
    emb = dec.embedding(torch.full((k,), prev, device=context.device))  # (K, E)
    h, c = dec.lstm(torch.cat([emb, context], dim=-1), (h.expand(k, -1), c.expand(k, -1)))
    return dec._readout(emb, h, context)


def removal_prob(model: CaptionModel, words: CaptionWords, t: int, removed: Tensor, fill: Tensor) -> Tensor:
    """removed (K, L) bool -> (K,) the probability of word t when those regions are ``fill`` (D,) at its step."""
    return RegionRemoval(model, words, fill).prob(t, removed)


def gradient_scores(model: CaptionModel, words: CaptionWords, t: int) -> dict[str, Tensor]:
    """Per region (L,): gradient x input and Grad-CAM of log p(word t) at its step (module doc)."""
    feats = words.features.detach().clone().requires_grad_(True)  # (1, L, D)
    with torch.enable_grad():
        state = _state_with_regions(model, words, t, feats)
        prev = torch.tensor([_prev_token(words, t)], device=feats.device)
        log_probs, _, _ = model.step(prev, state)
        (grad,) = torch.autograd.grad(log_probs[0, words.tokens[t]], feats)
    grad, a = grad[0], feats.detach()[0]  # (L, D)
    weights = grad.mean(dim=0)  # (D,) Grad-CAM's channel weights: the gradient averaged over the map's cells
    return {"gradient": (grad * a).sum(-1), "gradcam": F.relu((a * weights).sum(-1))}


@torch.no_grad()
def next_word_probs(model: CaptionModel, words: CaptionWords, t: int, alpha: Tensor) -> Tensor:
    """alpha (K, L) in place of word t's attention -> the next-word distributions (K, V) (module doc)."""
    dec = model.decoder
    if not hasattr(dec, "attend"):
        raise ValueError("attention interventions need one decoder: an ensemble's members each attend their own way")
    state = words.states[t]  # one row: the state before word t's step
    values = state["keys"].keys[0]  # (L, D): the regions the context sums (ProjectedKeys: keys are the values)
    context = _as_decoded(dec, alpha).to(values.dtype) @ values  # (K, D)
    return F.softmax(_logits_from_context(dec, state, context, _prev_token(words, t)), dim=-1)


def photo_fill(model: CaptionModel, features: Tensor) -> Tensor:
    """The vector a removed region becomes by default: the mean of this photo's regions (D,). Every region removed,
    the context is then the photo's mean whatever the weights (uniform attention's context): what is taken away is
    what a region holds beyond the photo's average, its gist kept (each region's features see far beyond its cell).
    ``region_probes`` takes any other fill (benchmarks/faithfulness.py ``--fill train``: other photos' mean region,
    which takes the gist away too)."""
    return features[0].mean(dim=0)


class PhotoBlocks:
    """Pixel-space removal over blocks of the photo's grid: ``block`` x ``block`` cells (regions) form one unit, so a
    9 x 9 grid with block 3 has 9 units, each a ninth of the photo. A removed unit is greyed (0 in the normalised
    input: mid-grey for EfficientNet-Lite's normalisation, 127 of 255; ImageNet's mean colour for a ResNet's), the
    photo encoded again and the caption teacher-forced
    over it (module doc). ``probs`` caches what it encoded: masks that recur across a photo's words (leave-one-out,
    random orders drawn with one seed) cost one encoder pass for all of them."""

    def __init__(self, model: CaptionModel, image: Tensor, tokens: list[int], bos_id: int, block: int = 3):
        grid = model.encoder.grid
        if grid % block:
            raise ValueError(f"block {block} does not tile the {grid} x {grid} grid")
        self.model, self.image, self.tokens, self.bos_id = model, image, list(tokens), bos_id
        self.grid, self.block, self.side = grid, block, grid // block
        self.n_units = self.side**2
        self._seen: dict[bytes, Tensor] = {}  # a mask's bytes -> every word's probability (T,)
        rows = torch.arange(grid) // block
        self._unit_of_region = (rows[:, None] * self.side + rows[None, :]).reshape(-1)  # (L,)

    def unit_of_region(self) -> Tensor:
        """(L,) the unit (block) each region lies in."""
        return self._unit_of_region

    def pool(self, per_region: Tensor) -> Tensor:
        """(..., L) region scores (attention, Grad-CAM) -> (..., U) summed over each unit's regions."""
        out = per_region.new_zeros(*per_region.shape[:-1], self.n_units)
        return out.index_add_(-1, self._unit_of_region.to(per_region.device), per_region)

    def pixel_masks(self, removed: Tensor) -> Tensor:
        """removed (K, U) -> pixel masks (K, 1, H, W), True where a removed unit lies (the grid tiles the input)."""
        _, h, w = self.image.shape
        rows = torch.arange(h, device=removed.device) * self.side // h  # each pixel's block row
        cols = torch.arange(w, device=removed.device) * self.side // w
        return removed[:, rows[:, None] * self.side + cols[None, :]].unsqueeze(1)  # (K, 1, H, W)

    @torch.no_grad()
    def probs(self, removed: Tensor, batch: int = 16) -> Tensor:
        """removed (K, U) bool -> (K, T): every word's probability with those units greyed."""
        keys = [row.cpu().numpy().tobytes() for row in removed]
        where = {key: i for i, key in reversed(list(enumerate(keys)))}  # each mask's first row
        fresh = [key for key in where if key not in self._seen]
        for start in range(0, len(fresh), batch):
            part = removed[[where[key] for key in fresh[start : start + batch]]]  # (k, U)
            images = self.image.expand(part.size(0), -1, -1, -1).masked_fill(self.pixel_masks(part), 0.0)
            got = caption_probs(self.model, self.model.encode(images), self.tokens, self.bos_id)  # (k, T)
            for key, p in zip(fresh[start : start + batch], got, strict=True):
                self._seen[key] = p
        return torch.stack([self._seen[k] for k in keys])


def caption_probs(model: CaptionModel, features: Tensor, tokens: list[int], bos_id: int) -> Tensor:
    """features (K, L, D) -> (K, T): each photo's probability of every word of ``tokens`` (eos included), the caption
    teacher-forced through the search protocol (one decoder or an ensemble alike: captioning.model.reading)."""
    from captioning.model.reading import read_ids

    return read_ids(model, features, tokens, bos_id).log_probs.exp()


def region_probes(model: CaptionModel, words: CaptionWords, fill: Tensor, gradients: bool = True) -> list[Probe]:
    """Feature space: one probe per word of the caption (text_attn.core.faithfulness), its units the L regions; with
    ``gradients`` the gradient x input and Grad-CAM rankings; the attention interventions for one decoder."""
    removal = RegionRemoval(model, words, fill)
    single = hasattr(model.decoder, "attend")
    probes = []
    for t in range(len(words.tokens)):
        probes.append(
            Probe(
                n_units=words.features.size(1),
                prob=partial(removal.prob, t),
                attention=words.alphas[t],
                scores=gradient_scores(model, words, t) if gradients else {},
                next_word_probs=partial(next_word_probs, model, words, t) if single else None,
            )
        )
    return probes


def block_probes(blocks: PhotoBlocks, words: CaptionWords, gradcam: bool = False) -> list[Probe]:
    """Pixel space: one probe per word, its units the photo's blocks (PhotoBlocks); attention summed per block."""
    probes = []
    for t in range(len(words.tokens)):
        scores = {"gradcam": blocks.pool(gradient_scores(blocks.model, words, t)["gradcam"])} if gradcam else {}
        probes.append(
            Probe(
                n_units=blocks.n_units,
                prob=lambda removed, t=t: blocks.probs(removed)[:, t],
                attention=blocks.pool(words.alphas[t]),
                scores=scores,
            )
        )
    return probes


@dataclass
class Evidence:
    """A caption's words with both maps (issue 73): where each word attended and what drives it."""

    words: list[str]
    attention: Tensor  # (T, L) each word's α
    evidence: Tensor  # (T, L) p(word) - p(word without region i) at its step: what removing the region costs it
    agreement: list[float]  # per word, Kendall's tau-b between its attention and its evidence (nan: no order)


def word_evidence(model: CaptionModel, features: Tensor, words: list[str], vocab) -> Evidence:
    """Leave-one-out in feature space for every word of ``words`` (the model's caption of the photo whose regions are
    ``features`` (1, L, D)): one decoder step of L + 1 rows a word (RegionRemoval; the fill is photo_fill's)."""
    from text_attn.core.faithfulness import kendall_tau

    tokens = [vocab.stoi.get(w, vocab.stoi.get(w.lower(), vocab.unk_id)) for w in words]  # cased words too
    # in float32 whatever the model's dtype: a half model's probabilities are rounded to 8 (bfloat16) or 11 (float16)
    # bits, and most drops came out exactly 0. A float32 copy of its weights (the caller's model untouched), and no
    # caller's autocast.
    model, features = float32_network(model), widened(features)
    with full_precision(features.device):
        steps = step_through(model, features, tokens, vocab.bos_id)
        removal = RegionRemoval(model, steps, photo_fill(model, features))
        n = features.size(1)
        masks = torch.cat([torch.zeros(1, n, dtype=torch.bool), torch.eye(n, dtype=torch.bool)]).to(features.device)
        rows = [removal.prob(t, masks) for t in range(len(tokens))]  # (L + 1,) each: nothing removed, each region
    evidence = torch.stack([r[0] - r[1:] for r in rows]) if rows else features.new_zeros(0, n)  # (T, L)
    agreement = [kendall_tau(steps.alphas[t], evidence[t]) for t in range(len(tokens))]
    return Evidence(list(words), steps.alphas, evidence, agreement)
