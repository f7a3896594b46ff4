"""The source check: whether an input line looks like the text a translation model was trained on.

A subword model translates anything without an ``<unk>``, so English given to a German -> English model comes back as
a fluent, confident and wrong "translation". The check is a character-trigram profile of the training source side
(its most frequent trigrams' log-probabilities, lowercased): a line's score is its mean trigram log-probability, and a
line scoring below what 99% of the validation source lines reach (less a margin) is flagged. On Multi30k's German
side it flags 0.1% of German val lines and 91-100% of the English, French and Czech ones (docs/text.md). Plain
JSON-able values: model files store the check (``Translator.source_check``), and neither side needs a model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import islice

# a profile of a few thousand trigrams is settled long before this; it keeps a WMT-sized corpus from costing minutes
SAMPLE_LINES = 200_000
TRIGRAMS = 2000  # the profile's size: more changed the flagged fractions by under 0.5% on Multi30k, and cost room
# nats of mean log-probability below the val lines' 1st percentile: on Multi30k it brings German val lines flagged from
# 1% to 0.1%; a greeting or a question ("Hallo", "Wo ist der Bahnhof?") is still flagged: the corpus describes pictures
MARGIN = 0.5


def trigrams(line: str) -> list[str]:
    """The character trigrams of ``line``, lowercased, whitespace runs as one space, padded by a space each side."""
    text = f" {' '.join(line.lower().split())} "
    return [text[i : i + 3] for i in range(len(text) - 2)]


def source_check(train: Iterable[str], val: Sequence[str], lang: str | None = None) -> dict | None:
    """The check from the training source lines (the first ``SAMPLE_LINES`` of them) and the validation source lines
    that set its threshold (None when either has no text). ``lang``: the source language's code, for messages."""
    counts = Counter(g for line in islice(train, SAMPLE_LINES) for g in trigrams(line))
    if not counts or not val:
        return None
    total = sum(counts.values())
    kept = counts.most_common(TRIGRAMS)
    check = {
        "logp": {g: round(math.log(n / total), 3) for g, n in kept},
        # a trigram outside the profile: a tenth of the rarest kept one's probability
        "floor": round(math.log(kept[-1][1] / total / 10), 3),
    }
    scores = sorted(line_score(check, line) for line in val)
    check["threshold"] = round(scores[len(scores) // 100] - MARGIN, 3)
    return {**check, **({"lang": lang} if lang else {})}


def valid_check(check: object) -> bool:
    """Whether ``check`` (read from a model file) is what :func:`source_check` makes."""
    number = (int, float)
    return (
        isinstance(check, dict)
        and isinstance(check.get("logp"), dict)
        and all(isinstance(g, str) and isinstance(v, number) for g, v in check["logp"].items())
        and isinstance(check.get("floor"), number)
        and isinstance(check.get("threshold"), number)
        and isinstance(check.get("lang", ""), str)
    )


def line_score(check: dict, line: str) -> float:
    """The mean trigram log-probability of ``line`` under the check's profile (higher: more like its training text)."""
    grams = trigrams(line)
    logp, floor = check["logp"], check["floor"]
    return sum(logp.get(g, floor) for g in grams) / max(len(grams), 1)


def unlike_source(check: dict, line: str) -> bool:
    """Whether ``line`` looks unlike the training source text of ``check`` (a :func:`source_check`)."""
    return line_score(check, line) < check["threshold"]
