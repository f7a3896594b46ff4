"""The words a model was unsure of: those it gave a probability under a threshold, given the words before them.

Why 0.1 by default for a translation: on Multi30k val, 89% of the bundled Transformer's words under 0.1 (2.3% of its
words) are not in the reference, against 18% of its words of 0.5 and more (``python benchmarks/word_confidence.py``;
the guided Transformer before it: 85% of 3.4%, 17%):
a mark there points at a likely error, not at every word the model weighed. A caption's is 0.2
(:data:`CAPTION_UNSURE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

UNSURE = 0.1  # the default threshold: a word under it is marked (translate --unsure, the pages, the notebooks)
# a caption's: the bundled captioner's beam seldom writes a word under 0.1 (5 of 9,230 on Flickr8k test), and 72% of
# its words of 0.1-0.2 are in none of the photo's five references, against 24% of those of 0.5 and more
# (benchmarks/caption_unsure.py)
CAPTION_UNSURE = 0.2


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


def probability_fields(result: Any, name: str) -> dict[str, Any]:
    """A result with its probabilities (a Translation or a Caption: kept by the search, or a text given and read), as
    records and answers hold them: each token's or word's (under ``name``) and the end's probability, 6 significant
    digits, and a translation's per space-separated word (``word_probs``, its pieces' product); {} for one without."""
    if getattr(result, "probs", None) is None:
        return {}
    from text_attn.core.arrays import digits6

    read = {name: [digits6(p) for p in result.probs], "end_prob": digits6(result.end_prob)}
    if getattr(result, "word_probs", None) is not None:
        read["word_probs"] = [digits6(p) for p in result.word_probs]
    return read


def unsure_pairs(result: Any, below: float) -> list[list]:
    """A caption's or translation's words under ``below`` (its ``unsure(below)``) as records and answers hold them:
    each [word, p], p to 6 significant digits."""
    from text_attn.core.arrays import digits6

    return [[w, digits6(p)] for w, p in result.unsure(below)]


def shown(p: float, below: float) -> str:
    """A probability under ``below`` as the notes and pages write it: 2 significant digits, more where those round it
    up to the threshold (0.4998 under 0.5 is not "0.5")."""
    text = f"{p:.2g}"
    return text if float(text) < below else f"{p:.4g}"


def named(found: Sequence[tuple[str, float]], below: float) -> str:
    """``word (p), word (p)``: the words under ``below`` as a note names them."""
    return ", ".join(f"{w} ({shown(p, below)})" for w, p in found)


def unsure_line(found: Sequence[tuple[str, float]], below: float = UNSURE) -> str | None:
    """One line naming the words a translation or caption was unsure of, as the pages and notes show it; None for
    none."""
    if not found:
        return None
    shown = named(found, below)
    return f"the model was unsure of (p < {below:g}): {shown}"
