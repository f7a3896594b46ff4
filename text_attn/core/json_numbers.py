"""Numbers as strict JSON holds them, for every record the toolkit writes (``--json``/``--jsonl`` of both commands,
attention-serve's answers, /info, the benchmarks' records): strict JSON has no NaN or -Infinity, and JavaScript's
``JSON.parse`` refuses them, so a number that is none becomes None, written ``null``."""

from __future__ import annotations

import math
from typing import Any


def json_score(score: float) -> float | None:
    """A search's score (a log-probability) as a record holds it: rounded to 6 decimals; None where it is no number
    (-inf: a hypothesis the search never found)."""
    score = float(score)
    return round(score, 6) if math.isfinite(score) else None


def json_safe(value: Any) -> Any:
    """``value`` (a model file's info, a benchmark's record) as strict JSON can hold it: a float that is not a number
    (an empty bucket's score; a file written before caption-export refused them) becomes None, written ``null`` (a
    JSON answer cannot hold a NaN: it was a plain-text 500; JavaScript's JSON.parse refused the records)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
