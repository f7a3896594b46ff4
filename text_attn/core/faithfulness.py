"""Is attention an explanation? One faithfulness measure for every model family, a generated word at a time (issue 73).

Protocol. For one word it generated (its own output as the prefix), a family hands over a :class:`WordProbe` over U
"units" (a photo's regions, a sentence's source tokens); :class:`Probe` is the plain dataclass form:

- ``n_units``: U.
- ``prob(removed) -> (K,)``: ``removed`` is a bool (K, U), True where a unit is removed; the word's probability with
  those units removed. How a unit is removed is the family's to say (a region's vector replaced by the mean region, a
  patch blurred and the photo encoded again, a source token masked out of attention). A whole curve is one call.
- ``attention``: (U,) the word's attention weights.
- ``scores`` (optional): other rankings the family computed, name -> (U,), higher = more relevant ("gradient":
  gradient x input per unit, "gradcam", "rollout", ...).
- ``next_word_probs(alpha) -> (K, V)`` (optional): that step's next-word distribution with its attention weights
  replaced by each row of ``alpha`` (K, U); turns on the interventions below.
- ``own_probs`` (optional, with ``next_word_probs``): (V,) the model's own next-word distribution at that step, as it
  decodes. Where forcing one row of weights is not how the model attends (a Transformer: one row read by every head
  of every layer), the baseline row already moves the distribution: the ``own`` intervention says how far.

What :func:`measure_word` records:

- ``p_full``: the word's probability with nothing removed; ``leave_one_out[u] = p_full - p(only u removed)``, the
  reference ranking (one call, K = U + 1).
- Rankings, each an order of the units, most relevant first (ties: the lower unit index first): ``attention``,
  ``random`` (``random_draws`` seeded permutations, curves and numbers averaged), ``leave_one_out``, and every score.
- Curves, U + 1 values each, k = 0..U. ``deletion``: p after removing the top k units; a faithful ranking falls at
  once (low area). ``deletion_least``: p after removing the bottom k; a faithful ranking stays up (high area).
  ``insertion``: p with only the top k kept (all removed at k = 0); a faithful ranking rises at once (high area).
  Keeping the top k is removing the bottom U - k, so insertion is deletion_least read backwards: it costs no call,
  and a ranking costs two calls of K = U + 1.
- Area: the trapezoid rule over k / U in [0, 1], divided by ``p_full``, so a model that ignores its input scores 1
  on every curve. Nothing is clamped: removing units can raise p, and an area can pass 1. When ``p_full <=
  min_prob`` the division would only magnify noise (the word is not one the model would say), so the areas are NaN;
  the summary leaves NaNs out of its means and counts the numbers it used.
- ``tau``: Kendall's tau-b (ties counted as scipy does) of the ranking's scores against ``leave_one_out``; NaN when
  either side is constant (a model that ignores its input has no reference order).
- Interventions (Jain & Wallace 2019; Wiegreffe & Pinter 2019): the next-word distribution with the word's own alpha
  against alpha replaced by ``uniform`` (1 / U each), ``permuted`` (a seeded random non-identity permutation of it;
  equal weights stay equal) and ``other`` (another word's alpha, when given): total variation distance
  0.5 * sum |p - q| in [0, 1], and whether the arg-max word ``changed``. With ``own_probs``, ``own`` compares the
  baseline itself (the word's own alpha forced) with the model's own distribution the same way: 0 and never changed
  where forcing alpha is how the model attends (one attention: Bahdanau, a captioner's decoder).

:func:`summarize` averages many words into rows per ranking (and per intervention), split by word kind (content,
function, all: :mod:`text_attn.core.word_kinds`). Every result is JSON-able (``to_dict``; NaN is written as null).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from text_attn.core.word_kinds import word_kind

BUILT_IN = ("attention", "random", "leave_one_out")  # ranking names a family's own scores may not take
KINDS = ("all", "content", "function")


class WordProbe(Protocol):
    n_units: int
    attention: Tensor  # (U,)

    def prob(self, removed: Tensor) -> Tensor: ...  # (K, U) bool -> (K,)


@dataclass
class Probe:
    """One generated word, as a family hands it over (the module docstring says what each field means)."""

    n_units: int  # U
    prob: Callable[[Tensor], Tensor]  # removed (K, U) bool -> the word's probability (K,)
    attention: Tensor  # (U,) the word's attention weights
    scores: dict[str, Tensor] = field(default_factory=dict)  # other rankings, each (U,), higher = more relevant
    next_word_probs: Callable[[Tensor], Tensor] | None = None  # alpha (K, U) -> next-word distribution (K, V)
    own_probs: Tensor | None = None  # (V,) the model's own next-word distribution at the step (the "own" row)


@dataclass
class RankingResult:
    deletion: list[float]  # (U + 1,) p after removing the top k units
    deletion_least: list[float]  # (U + 1,) p after removing the bottom k units
    insertion: list[float]  # (U + 1,) p with only the top k units kept
    deletion_area: float  # normalised by p_full; lower = more faithful
    deletion_least_area: float  # higher = more faithful
    insertion_area: float  # higher = more faithful
    tau: float  # Kendall's tau-b against leave-one-out; NaN where undefined


@dataclass
class InterventionResult:
    tv: float  # total variation distance of the next-word distribution from the one with the word's own alpha
    changed: bool  # whether its arg-max word differs


@dataclass
class WordResult:
    word: str
    kind: str  # "content" or "function"
    n_units: int
    p_full: float  # nothing removed
    p_empty: float  # every unit removed
    leave_one_out: list[float]  # (U,) p_full - p(only unit u removed)
    rankings: dict[str, RankingResult]
    interventions: dict[str, InterventionResult] = field(default_factory=dict)
    # which input of the run (photo, scene, sentence: its number) the word is from; None where not recorded. A
    # bootstrap draws whole inputs, since the words of one caption are not independent (faithfulness_bootstrap)
    item: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return _json_floats(asdict(self), True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WordResult:
        item = d.get("item")  # null: not recorded (not a NaN number)
        d = {**_json_floats(d, False), "item": item}
        rankings = {k: RankingResult(**v) for k, v in d["rankings"].items()}
        interventions = {k: InterventionResult(**v) for k, v in d.get("interventions", {}).items()}
        return cls(**{**d, "rankings": rankings, "interventions": interventions})


def kendall_tau(x: Tensor, y: Tensor) -> float:
    """Kendall's tau-b of two (N,) score vectors: (concordant - discordant) / sqrt(pairs untied in x * untied in y).
    NaN when either is constant. O(N^2) memory, fine for hundreds of units."""
    x, y = x.detach().flatten(), y.detach().flatten()
    if x.numel() != y.numel():
        raise ValueError(f"kendall_tau: {x.numel()} scores against {y.numel()}")
    return kendall_taus(x.unsqueeze(0), y.unsqueeze(0))[0]


def span_taus(x: Tensor, y: Tensor, spans: Sequence[tuple[int, int, int]]) -> list[list[float]]:
    """:func:`kendall_taus` of each row of each of ``x``'s grids (N, T, S) (views of one grid: a Transformer's layers
    and heads) against the same row of ``y`` (T, S), each row over its own columns: ``spans``, in row order, (rows,
    first column, columns) (a line translated sentence by sentence: each sentence's rows over its own source) ->
    per grid its T taus. A translation's agreement and its page's views read one computation."""
    n, t = x.size(0), x.size(1)
    out = [[math.nan] * t for _ in range(n)]
    r = 0
    for rows, c, shown in spans:  # every grid's rows of a span at once
        block = x[:, r : r + rows, c : c + shown].reshape(-1, shown)  # (N x rows, shown)
        for k, tau in enumerate(kendall_taus(block, y[r : r + rows, c : c + shown].repeat(n, 1))):
            grid, row = divmod(k, rows)
            out[grid][r + row] = tau
        r += rows
    return out


def kendall_taus(x: Tensor, y: Tensor) -> list[float]:
    """:func:`kendall_tau` of each row pair of ``x`` and ``y`` (N, S) at once (NaN for a row where either is
    constant): a page's hundreds of taus in one pass, not one call each."""
    x, y = x.detach().double().cpu(), y.detach().double().cpu()
    if x.shape != y.shape or x.dim() != 2:
        raise ValueError(f"kendall_taus: rows of equal shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    i, j = torch.triu_indices(x.size(1), x.size(1), offset=1)  # every pair once, (2, S(S-1)/2)
    rows = max(1, 2**22 // max(1, i.numel()))  # ~32 MB of pairs at a time: a 300-token page's 8,100 rows, in chunks
    out: list[float] = []
    for k in range(0, x.size(0), rows):
        a, b = x[k : k + rows], y[k : k + rows]
        sx, sy = torch.sign(a[:, i] - a[:, j]), torch.sign(b[:, i] - b[:, j])  # (rows, pairs): +1 / -1 / 0 (tie)
        untied = (sx != 0).sum(1).double() * (sy != 0).sum(1).double()
        taus = (sx * sy).sum(1) / untied.sqrt()
        out += [float(t) if u > 0 else math.nan for t, u in zip(taus.tolist(), untied.tolist(), strict=True)]
    return out


def rounded_taus(taus: Sequence[float]) -> list[float | None]:
    """Kendall taus as records and pages hold them: 4 decimals, None where a ranking was flat (nan)."""
    return [None if tau != tau else round(float(tau), 4) for tau in taus]


def rounded_evidence(evidence: Tensor) -> list[list[float]]:
    """Evidence rows (T, U) as records and answers hold them: probability drops to 6 decimals, the same in `caption`'s
    records and attention-serve's answers (which kept 4). Six decimals are a floor too: the float32 noise of a region
    that changes nothing (1e-9) is 0, not a share of a map drawn from noise. The agreement beside them is computed from
    the unrounded values, so it need not follow from the rounded ones where drops tie."""
    return [[round(float(v), 6) for v in row] for row in evidence.detach().cpu().tolist()]


def deletion_masks(order: Tensor) -> Tensor:
    """``order`` (U,) unit indices, first removed first -> (U + 1, U) bool masks: row k removes ``order[:k]``."""
    n = order.numel()
    position = torch.empty_like(order)
    position[order] = torch.arange(n, device=order.device)  # position[u]: when unit u is removed
    return position.unsqueeze(0) < torch.arange(n + 1, device=order.device).unsqueeze(1)  # (U + 1, U)


def normalised_area(curve: Tensor, p_full: float, min_prob: float = 1e-6) -> float:
    """Trapezoid area of a (U + 1,) curve over k / U in [0, 1], divided by p_full; NaN when p_full <= min_prob."""
    if not p_full > min_prob:
        return math.nan
    return float(torch.trapezoid(curve.double(), dx=1.0 / (curve.numel() - 1))) / p_full


def _call_prob(probe: WordProbe, removed: Tensor) -> Tensor:
    """The probe's probabilities for masks (K, U), checked, as float64 on the CPU (K,)."""
    p = probe.prob(removed)
    if not isinstance(p, Tensor) or tuple(p.shape) != (removed.shape[0],):
        got = tuple(p.shape) if isinstance(p, Tensor) else type(p).__name__
        raise ValueError(f"probe.prob: {removed.shape[0]} masks need {removed.shape[0]} probabilities, got {got}")
    return p.detach().to("cpu", torch.float64)


def _rank(
    probe: WordProbe, order: Tensor, scores: Tensor, reference: Tensor, p_full: float, min_prob: float
) -> tuple[Tensor, Tensor, Tensor, list[float], float]:
    """Curves, areas and tau of one ranking; ``order`` (U,) most relevant first, ``scores`` (U,) its scores."""
    deletion = _call_prob(probe, deletion_masks(order))  # (U + 1,)
    least = _call_prob(probe, deletion_masks(order.flip(0)))  # (U + 1,)
    insertion = least.flip(0)  # keeping the top k = removing the bottom U - k
    areas = [normalised_area(c, p_full, min_prob) for c in (deletion, least, insertion)]
    return deletion, least, insertion, areas, kendall_tau(scores, reference)


def _non_identity_permutation(n: int, generator: torch.Generator) -> Tensor:
    perm = torch.randperm(n, generator=generator)
    while n > 1 and bool((perm == torch.arange(n)).all()):  # an unchanged alpha is no intervention
        perm = torch.randperm(n, generator=generator)
    return perm


def intervene(
    next_word_probs: Callable[[Tensor], Tensor],
    alpha: Tensor,
    *,
    other_alpha: Tensor | None = None,
    permutation: Tensor | None = None,
    seed: int = 0,
    own_probs: Tensor | None = None,
) -> dict[str, InterventionResult]:
    """The word's own ``alpha`` (U,) against uniform, permuted (``permutation`` (U,), else a seeded random one) and
    ``other_alpha`` (U,): one call of ``next_word_probs`` on (1 + J, U) rows. ``own_probs`` (V,): the model's own
    distribution, which the own-alpha row is compared with as ``own`` (the module doc)."""
    n = alpha.numel()
    if permutation is None:
        permutation = _non_identity_permutation(n, torch.Generator().manual_seed(seed))
    rows = {"uniform": torch.full_like(alpha, 1.0 / n), "permuted": alpha[permutation.to(alpha.device)]}
    if other_alpha is not None:
        rows["other"] = other_alpha.to(alpha)
    p = next_word_probs(torch.stack([alpha, *rows.values()]))  # (1 + J, V)
    if tuple(p.shape[:1]) != (1 + len(rows),) or p.dim() != 2:
        raise ValueError(
            f"next_word_probs: {1 + len(rows)} rows of alpha need ({1 + len(rows)}, V), got {tuple(p.shape)}"
        )
    p = p.detach().to("cpu", torch.float64)
    tv = 0.5 * (p[1:] - p[0]).abs().sum(-1)  # (J,)
    changed = p[1:].argmax(-1) != p[0].argmax(-1)  # (J,)
    out = {name: InterventionResult(float(tv[i]), bool(changed[i])) for i, name in enumerate(rows)}
    if own_probs is not None:
        q = own_probs.detach().to("cpu", torch.float64).flatten()
        if q.shape != p[0].shape:
            raise ValueError(f"own_probs: {tuple(p[0].shape)} probabilities needed, got {tuple(q.shape)}")
        out = {"own": InterventionResult(float(0.5 * (p[0] - q).abs().sum()), bool(p[0].argmax() != q.argmax())), **out}
    return out


def measure_word(
    probe: WordProbe,
    word: str = "",
    *,
    kind: str | None = None,
    random_draws: int = 8,
    seed: int = 0,
    min_prob: float = 1e-6,
    other_alpha: Tensor | None = None,
) -> WordResult:
    """Every ranking's curves, areas and tau for one word, and the attention interventions when the probe has
    ``next_word_probs``. ``kind`` defaults to :func:`word_kind` of ``word``. Give each word its own ``seed`` so the
    random draws differ between words. Calls ``probe.prob`` 1 + 2 * (2 + random_draws + len(scores)) times."""
    n = int(probe.n_units)
    attention = probe.attention.detach().flatten()
    scores = dict(getattr(probe, "scores", None) or {})
    if n < 1 or attention.numel() != n:
        raise ValueError(f"probe: attention has {attention.numel()} weights for {n} units (need U >= 1 of each)")
    for name, s in scores.items():
        if name in BUILT_IN or s.numel() != n:
            raise ValueError(f"probe.scores[{name!r}]: need a new name and {n} scores, got {s.numel()}")
    device = attention.device
    # Leave-one-out: row 0 removes nothing, row 1 + u removes unit u alone.
    removed = torch.cat([torch.zeros(1, n, dtype=torch.bool), torch.eye(n, dtype=torch.bool)]).to(device)  # (U+1, U)
    p = _call_prob(probe, removed)  # (U + 1,)
    p_full, loo = float(p[0]), p[0] - p[1:]  # loo (U,)

    def order_of(s: Tensor) -> Tensor:
        return torch.sort(s.detach().flatten().cpu(), descending=True, stable=True).indices.to(device)

    rankings: dict[str, RankingResult] = {}
    for name, s in [("attention", attention), ("leave_one_out", loo), *scores.items()]:
        d, least, ins, areas, tau = _rank(probe, order_of(s), s, loo, p_full, min_prob)
        rankings[name] = RankingResult(d.tolist(), least.tolist(), ins.tolist(), *areas, tau)
    generator = torch.Generator().manual_seed(seed)
    if random_draws > 0:
        draws = []
        for _ in range(random_draws):
            order = torch.randperm(n, generator=generator)  # (U,) most "relevant" first
            s = torch.empty(n, dtype=torch.float64)
            s[order] = torch.arange(n, 0, -1, dtype=torch.float64)  # scores that give this order
            draws.append(_rank(probe, order.to(device), s, loo, p_full, min_prob))
        curves = [torch.stack([dr[c] for dr in draws]).mean(0).tolist() for c in range(3)]  # mean curves (U + 1,)
        areas = [_nanmean([dr[3][a] for dr in draws])[0] for a in range(3)]
        rankings["random"] = RankingResult(*curves, *areas, _nanmean([dr[4] for dr in draws])[0])
    rankings = {k: rankings[k] for k in (*BUILT_IN, *scores) if k in rankings}  # a fixed order for tables
    interventions: dict[str, InterventionResult] = {}
    next_word_probs = getattr(probe, "next_word_probs", None)
    if next_word_probs is not None:
        permutation = _non_identity_permutation(n, generator)
        own = getattr(probe, "own_probs", None)
        interventions = intervene(next_word_probs, attention, other_alpha=other_alpha, permutation=permutation,
                                  own_probs=own)  # fmt: skip
    p_empty = rankings["attention"].deletion[-1]  # every unit removed, whatever the order
    return WordResult(word, kind or word_kind(word), n, p_full, p_empty, loo.tolist(), rankings, interventions)


@dataclass
class SummaryRow:
    method: str  # a ranking's name
    kind: str  # "all", "content" or "function"
    n_words: int
    deletion_area: float  # mean over words; lower = more faithful
    deletion_least_area: float  # higher = more faithful
    insertion_area: float  # higher = more faithful
    tau: float  # mean Kendall's tau-b against leave-one-out
    n_area: int  # words whose areas are defined (p_full > min_prob)
    n_tau: int  # words whose tau is defined


@dataclass
class InterventionRow:
    intervention: str  # "own" (the baseline against the model), "uniform", "permuted" or "other"
    kind: str
    n_words: int
    tv: float  # mean total variation distance
    changed: float  # fraction of words whose arg-max word changed


@dataclass
class Summary:
    rankings: list[SummaryRow]
    interventions: list[InterventionRow]

    def to_dict(self) -> dict[str, Any]:
        return _json_floats(asdict(self), True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        d = _json_floats(d, False)
        return cls([SummaryRow(**r) for r in d["rankings"]], [InterventionRow(**r) for r in d["interventions"]])

    def format(self) -> str:
        """A plain-text table, one line per ranking and word kind, then the interventions."""
        lines = [f"{'ranking':<16}{'words':<10}{'n':>5}{'deletion':>10}{'del least':>11}{'insertion':>11}{'tau':>8}"]
        lines += [f"{r.method:<16}{r.kind:<10}{r.n_words:>5}{r.deletion_area:>10.3f}{r.deletion_least_area:>11.3f}"
                  f"{r.insertion_area:>11.3f}{r.tau:>8.3f}" for r in self.rankings]  # fmt: skip
        if self.interventions:
            lines.append(f"{'alpha replaced':<16}{'words':<10}{'n':>5}{'TV':>10}{'changed':>11}")
            lines += [f"{r.intervention:<16}{r.kind:<10}{r.n_words:>5}{r.tv:>10.3f}{r.changed:>11.1%}"
                      for r in self.interventions]  # fmt: skip
        return "\n".join(lines)


def summarize(results: Sequence[WordResult]) -> Summary:
    """Mean numbers per ranking and per intervention over ``results``, for all words and each word kind (a kind with
    no words has no rows). Means skip NaN; ``n_area`` and ``n_tau`` say how many numbers each mean has."""
    rows, interventions = [], []
    groups = [(k, [r for r in results if k == "all" or r.kind == k]) for k in KINDS]
    for method in _first_seen(name for r in results for name in r.rankings):
        for kind, words in groups:
            had = [w.rankings[method] for w in words if method in w.rankings]
            if had:
                (d, n_area), (least, _), (ins, _) = (_nanmean([getattr(h, a) for h in had]) for a in _AREAS)
                tau, n_tau = _nanmean([h.tau for h in had])
                rows.append(SummaryRow(method, kind, len(had), d, least, ins, tau, n_area, n_tau))
    for name in _first_seen(name for r in results for name in r.interventions):
        for kind, words in groups:
            had = [w.interventions[name] for w in words if name in w.interventions]
            if had:
                changed = sum(h.changed for h in had) / len(had)
                interventions.append(InterventionRow(name, kind, len(had), _nanmean([h.tv for h in had])[0], changed))
    return Summary(rows, interventions)


_AREAS = ("deletion_area", "deletion_least_area", "insertion_area")


def _nanmean(values: Sequence[float]) -> tuple[float, int]:
    """Mean of the finite values and how many there were (NaN, 0 when none)."""
    finite = [v for v in values if math.isfinite(v)]
    return (sum(finite) / len(finite) if finite else math.nan), len(finite)


def _first_seen(names: Any) -> list[str]:
    return list(dict.fromkeys(names))


def _json_floats(x: Any, to_json: bool) -> Any:
    """Strict JSON has no NaN: NaN is written as null (``to_json``), and null read back as NaN."""
    if isinstance(x, dict):
        return {k: _json_floats(v, to_json) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_floats(v, to_json) for v in x]
    if to_json:
        return None if isinstance(x, float) and math.isnan(x) else x
    return math.nan if x is None else x
