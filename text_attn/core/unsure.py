"""The words a model was unsure of: those it gave a probability under a threshold, given the words before them.

Why 0.1 by default: on Multi30k val, 85% of the bundled Transformer's words under 0.1 (3.4% of its words) are not in
the reference, against 17% of its words of 0.5 and more (``python benchmarks/word_confidence.py``); a mark there
points at a likely error, not at every word the model weighed.
"""

from __future__ import annotations

from collections.abc import Sequence

UNSURE = 0.1  # the default threshold: a word under it is marked (translate --unsure, the pages, the notebooks)


def check_threshold(below: float, name: str = "--unsure") -> float:
    """``below`` as a probability threshold: a number in (0, 1]; anything else one ValueError naming ``name``."""
    if isinstance(below, bool) or not isinstance(below, (int, float)) or not 0 < below <= 1:
        raise ValueError(f"{name} must be a probability in (0, 1], got {below!r}")
    return float(below)


def unsure_words(words: Sequence[str], probs: Sequence[float], below: float = UNSURE) -> list[tuple[str, float]]:
    """The ``words`` whose probability (``probs``, one each) is under ``below``, in order, each with its
    probability."""
    if len(words) != len(probs):
        raise ValueError(f"{len(words)} words for {len(probs)} probabilities: one each")
    return [(w, float(p)) for w, p in zip(words, probs, strict=True) if p < below]


def unsure_line(found: Sequence[tuple[str, float]], below: float = UNSURE) -> str | None:
    """One line naming the words a translation or caption was unsure of, as the pages and notes show it; None for
    none."""
    if not found:
        return None
    shown = ", ".join(f"{w} ({p:.2g})" for w, p in found)
    return f"the model was unsure of (p < {below:g}): {shown}"
