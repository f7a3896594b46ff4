"""benchmarks/_runs.alternating: the order the A/B benchmarks (serve_idle, serve_start, serve_threads,
transformer_speed) run their arms in: every arm once a round, the first one alternating."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _runs import alternating  # noqa: E402


def test_every_arm_once_a_round_the_first_alternating():
    assert list(alternating(["a", "b", "c"], 3)) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c")]  # fmt: skip


def test_a_record_writes_what_is_not_a_number_as_null():
    import json
    import math

    from _runs import record_json

    text = record_json({"by_length": {"31+": {"bleu": math.nan, "count": 0}}, "rows": [1.5, math.inf]})
    assert json.loads(text) == {"by_length": {"31+": {"bleu": None, "count": 0}}, "rows": [1.5, None]}
