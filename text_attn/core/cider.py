"""CIDEr-D with document frequencies fixed once, fast enough to be a per-batch training reward (self-critical).

The definition is exactly that of pycocoevalcap 1.2 (``pycocoevalcap.cider.cider.Cider``, which is CIDEr-D:
Vedantam et al. 2015 with the clipping and the length penalty of the coco-caption server), except for WHICH
references give the document frequencies:

- every sentence is a whitespace-free token list (or a string, split on whitespace as pycocoevalcap's ``precook``
  does). No PTB tokenisation and no lowercasing happen here: our captions are already lower-case word lists;
- g_k(s): the counts of the 1..4-grams of s, weighted by tf-idf  count · (log N − log max(1, df)), where N is the
  number of images of the corpus and df the number of images with the n-gram in at least one reference. An n-gram
  that no corpus reference has gets df 0, i.e. the full weight log N;
- per n: clipped cosine  Σ min(g_c, g_r) · g_r / (‖g_c‖ ‖g_r‖)  (left undivided when a norm is 0), times the
  Gaussian length penalty exp(−δ² / 2σ²), σ = 6. Like pycocoevalcap, δ is the difference of the two sentences'
  BIGRAM counts (max(0, len − 1)): the same as the length difference unless one side is empty;
- CIDEr-D(c, refs) = 10 · mean over n = 1..4 of the mean over the references.

pycocoevalcap computes df (and N) from the references of the images being scored, in each call. ``CiderD(corpus)``
computes them ONCE from ``corpus`` (for SCST: the training references), and ``scores`` then scores any batch
against them. With the corpus equal to the scored set the two agree to float rounding (tests/core/test_cider.py).

Speed: a reference set's tf-idf vectors (per reference, over the n-grams of that image's references) are built once
per call for all the candidates that share them (the K samples and the greedy caption of one image), and kept in an
LRU cache keyed by the references' content for later calls (later epochs over a corpus that fits the cache: shapes'
4000 images do; one image of 5 COCO-length references takes some tens of KB). A candidate is counted in Python (its
n-grams, looked up once), then all candidates of a call are scored in one numpy pass over the n-grams they share with
their references; a candidate repeated for the same references is scored once. 32 images x 6 candidates take a few
milliseconds, about 20-30 times less than pycocoevalcap on the same batch.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Sentence = str | Sequence[str]  # a token list, or a string split on whitespace
NGram = tuple[str, ...]


def words_of(sentence: Sentence) -> tuple[str, ...]:
    """A sentence's tokens: a string is split on whitespace (pycocoevalcap's ``precook``), a list is taken as is."""
    return tuple(sentence.split()) if isinstance(sentence, str) else tuple(sentence)


def ngram_counts(words: Sequence[str], n: int = 4) -> Counter[NGram]:
    """Counts of every k-gram of `words`, k = 1..n (in pycocoevalcap's order: all unigrams, then bigrams, ...)."""
    w = tuple(words)
    return Counter([w[i : i + k] for k in range(1, n + 1) for i in range(len(w) - k + 1)])


@dataclass
class _RefSet:
    """The tf-idf vectors of one image's references, over the n-grams those references contain."""

    columns: dict[NGram, int]  # n-gram -> column
    vectors: np.ndarray  # (C, R) tf-idf of each column's n-gram in each reference (column-major: gathered by row)
    norms: np.ndarray  # (R, n) per-order L2 norm of each reference's vector
    lengths: np.ndarray  # (R,) bigram count of each reference (pycocoevalcap's "length")


class CiderD:
    """CIDEr-D (pycocoevalcap's definition) with document frequencies from a fixed reference corpus.

    Args:
        corpus: the references that give the document frequencies, one entry per image (a document): a sequence of
            reference lists, or a mapping image key -> reference list (then ``scores_by_key`` can score by key).
            Each reference is a token list (or a whitespace-separated string).
        n: longest n-gram (4). sigma: the length penalty's standard deviation (6).
        cache_size: reference sets kept in the LRU cache of tf-idf vectors (0 = no cache across calls; within one
            call candidates with the same references still share them).
    """

    def __init__(
        self,
        corpus: Mapping[Hashable, Sequence[Sentence]] | Sequence[Sequence[Sentence]],
        n: int = 4,
        sigma: float = 6.0,
        cache_size: int = 10_000,
    ):
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n, self.sigma, self.cache_size = n, float(sigma), cache_size
        self.corpus: dict[Hashable, tuple[tuple[str, ...], ...]] | None = None
        documents: Iterable[Sequence[Sentence]]
        if isinstance(corpus, Mapping):
            self.corpus = {k: tuple(words_of(r) for r in refs) for k, refs in corpus.items()}
            documents = self.corpus.values()
        else:
            documents = corpus
        df: Counter[NGram] = Counter()
        count = 0
        for i, refs in enumerate(documents):
            if len(refs) == 0:
                raise ValueError(f"CIDEr-D corpus: image {i} has no reference")
            seen: set[NGram] = set()
            for ref in refs:
                seen.update(ngram_counts(words_of(ref), n))
            df.update(seen)
            count += 1
        if count == 0:
            raise ValueError("CIDEr-D corpus is empty: document frequencies need at least one image's references")
        self.num_documents = count
        self.log_n = math.log(float(count))  # pycocoevalcap's ref_len
        # idf of every corpus n-gram; an unseen one gets log N (df counted as 1).
        self.idf: dict[NGram, float] = {g: self.log_n - math.log(max(1.0, float(d))) for g, d in df.items()}
        self._cache: OrderedDict[tuple[tuple[str, ...], ...], _RefSet] = OrderedDict()

    # --- reference vectors ------------------------------------------------------------------------------------------
    def _refset(self, refs: tuple[tuple[str, ...], ...]) -> _RefSet:
        found = self._cache.get(refs)
        if found is not None:
            self._cache.move_to_end(refs)
            return found
        idf, log_n, n = self.idf, self.log_n, self.n
        columns: dict[NGram, int] = {}
        entries: list[tuple[int, int, float]] = []  # (column, reference, tf-idf)
        norms = np.zeros((len(refs), n))
        for r, ref in enumerate(refs):
            sq = [0.0] * n
            for g, c in ngram_counts(ref, n).items():
                w = c * idf.get(g, log_n)
                sq[len(g) - 1] += w * w
                entries.append((columns.setdefault(g, len(columns)), r, w))
            norms[r] = np.sqrt(sq)
        vectors = np.zeros((len(columns), len(refs)))
        if entries:
            cols, rows, vals = zip(*entries, strict=True)
            vectors[list(cols), list(rows)] = vals
        lengths = np.array([max(0, len(ref) - 1) for ref in refs], dtype=np.float64)
        out = _RefSet(columns, vectors, norms, lengths)
        if self.cache_size > 0:
            self._cache[refs] = out
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return out

    # --- scoring ----------------------------------------------------------------------------------------------------
    def scores(self, candidates: Sequence[Sentence], references: Sequence[Sequence[Sentence]]) -> np.ndarray:
        """CIDEr-D of each candidate against its own references.  # (N,) float64

        ``references[i]`` is the reference list of ``candidates[i]``; candidates with equal references (the samples
        and the greedy caption of one image: repeat the image's list) share one set of reference vectors. For a torch
        reward: ``torch.from_numpy(cider.scores(...)).to(device, torch.float32)``.
        """
        if len(candidates) != len(references):
            raise ValueError(f"CIDEr-D: {len(candidates)} candidates but {len(references)} reference lists")
        if len(candidates) == 0:
            return np.zeros(0)
        groups: dict[tuple[tuple[str, ...], ...], int] = {}  # references -> group
        by_id: dict[int, int] = {}  # the same list object repeated: convert it once
        group_of: list[int] = []  # (N,)
        for i, refs in enumerate(references):
            g = by_id.get(id(refs))
            if g is None:
                key = tuple(words_of(r) for r in refs)
                if not key:
                    raise ValueError(f"CIDEr-D: candidate {i} has no reference")
                g = by_id[id(refs)] = groups.setdefault(key, len(groups))
            group_of.append(g)
        sets = [self._refset(key) for key in groups]
        n, n_cands = self.n, len(candidates)
        r_max = max(len(s.lengths) for s in sets)
        # All reference vectors of the call stacked by column, references zero-padded to R_max: (ΣC, R_max).
        offsets = np.cumsum([0] + [len(s.columns) for s in sets]).tolist()
        stacked = np.zeros((offsets[-1], r_max))
        ref_norm = np.zeros((len(sets), r_max, n))  # (G, R_max, n)
        ref_len = np.zeros((len(sets), r_max))  # (G, R_max)
        for g, s in enumerate(sets):
            r = len(s.lengths)
            stacked[offsets[g] : offsets[g + 1], :r] = s.vectors
            ref_norm[g, :r], ref_len[g, :r] = s.norms, s.lengths
        ref_count = np.array([len(s.lengths) for s in sets], dtype=np.float64)  # (G,)
        # Candidates: their n-grams that the references share (the only ones the clipped dot product sees), their
        # norms over ALL their n-grams, their bigram counts. A candidate repeated for the same references (samples
        # of a peaked policy, a sample equal to the greedy caption) is scored once.
        idf, log_n = self.idf, self.log_n
        slots: list[int] = []  # per shared n-gram: candidate * n + order - 1,
        rows: list[int] = []  # its row of `stacked`,
        vals: list[float] = []  # its tf-idf in the candidate
        sq: list[list[float]] = []
        hyp_len: list[int] = []
        first: dict[tuple[int, tuple[str, ...]], int] = {}
        copies: list[tuple[int, int]] = []  # (candidate, the earlier equal one)
        for i, (cand, g) in enumerate(zip(candidates, group_of, strict=True)):
            words = words_of(cand)
            seen = first.setdefault((g, words), i)
            norm = [0.0] * n
            if seen != i:
                copies.append((i, seen))
            else:
                columns, offset = sets[g].columns, offsets[g]
                for gram, c in ngram_counts(words, n).items():
                    w = c * idf.get(gram, log_n)
                    k = len(gram) - 1
                    norm[k] += w * w
                    j = columns.get(gram)
                    if j is not None:
                        slots.append(i * n + k)
                        rows.append(offset + j)
                        vals.append(w)
            sq.append(norm)
            hyp_len.append(max(0, len(words) - 1))
        m = len(slots)
        slot = np.fromiter(slots, np.int64, m)
        ref = stacked[np.fromiter(rows, np.int64, m)]  # (M, R_max) the references' weights of the M shared n-grams
        clipped = np.minimum(np.fromiter(vals, np.float64, m)[:, None], ref) * ref  # (M, R_max)
        val = np.stack([np.bincount(slot, clipped[:, r], n_cands * n) for r in range(r_max)], axis=1)
        val = val.reshape(n_cands, n, r_max).transpose(0, 2, 1)  # (N, R_max, n) clipped dot products
        group = np.array(group_of)
        denom = np.sqrt(np.array(sq))[:, None, :] * ref_norm[group]  # (N, R_max, n)
        val = np.where(denom != 0, val / np.where(denom != 0, denom, 1.0), val)
        delta = np.array(hyp_len, dtype=np.float64)[:, None] - ref_len[group]  # (N, R_max)
        penalty = np.exp(-(delta**2) / (2 * self.sigma**2))
        per_order = (val * penalty[..., None]).sum(axis=1) / ref_count[group][:, None]  # (N, n) mean over refs
        out = 10.0 * per_order.mean(axis=1)
        for i, seen in copies:
            out[i] = out[seen]
        return out

    def scores_by_key(self, candidates: Sequence[Sentence], keys: Sequence[Hashable]) -> np.ndarray:
        """CIDEr-D of each candidate against the corpus references of ``keys[i]`` (a mapping corpus).  # (N,)"""
        if self.corpus is None:
            raise ValueError("scores_by_key needs the corpus as a mapping image key -> references")
        missing = [k for k in keys if k not in self.corpus]
        if missing:
            raise KeyError(f"CIDEr-D: image keys not in the corpus: {missing[:5]}")
        return self.scores(candidates, [self.corpus[k] for k in keys])


def cider_d(gts: Mapping[Hashable, Sequence[Sentence]], res: Mapping[Hashable, Sentence]) -> tuple[float, np.ndarray]:
    """pycocoevalcap's mode: df from the references being scored. gts: key -> references; res: key -> candidate.

    Returns (corpus mean, per-image scores in the order of ``gts``), like ``Cider().compute_score`` (whose ``res``
    values are one-element lists; here a value is the candidate itself).
    """
    if gts.keys() != res.keys():
        raise ValueError("cider_d: gts and res must have the same keys")
    keys = list(gts)
    per_image = CiderD([gts[k] for k in keys], cache_size=0).scores([res[k] for k in keys], [gts[k] for k in keys])
    return float(per_image.mean()), per_image
