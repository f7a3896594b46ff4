"""benchmarks/search_drops.py's watch of the beam search: on a hand-made table where the search pushes an ended
hypothesis out of its K slots and returns one its own ranking puts below it (the model-math audit's case), the watch
counts it, with the gap; where nothing ended is dropped it counts nothing. The search's results are unchanged."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from helpers.step_models import BOS, EOS, PAD, TableModel, table_state

from text_attn.core.decoding import beam_search

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

# "" ends at once with p 0.3; "3" (0.65) goes on to "3 4" / "3 5" (0.5 each), then anything at 0.25: at beam 2 the
# ended "" is pushed out at the second step by "3 4" and "3 5", whose log-probs then fall below its log(0.3)
TABLE = {(): {3: 0.65, EOS: 0.3, 4: 0.05}, (3,): {4: 0.5, 5: 0.5},
         (3, 4): {3: 0.25, 4: 0.25, 5: 0.25, EOS: 0.25}, (3, 5): {3: 0.25, 4: 0.25, 5: 0.25, EOS: 0.25}}  # fmt: skip


@pytest.fixture
def watch():
    from search_drops import Watch

    import text_attn.core.decoding as decoding

    before = decoding.choose_beams, decoding.final_hypotheses
    yield Watch()
    decoding.choose_beams, decoding.final_hypotheses = before


def _search(max_len: int, beam: int = 2):
    return beam_search(TableModel(TABLE), table_state(1), 1, BOS, EOS, max_len, beam_size=beam, pad_id=PAD)


def test_an_ended_hypothesis_pushed_out_that_outranks_the_result_is_counted(watch):
    result = _search(5)
    assert result.token_lists() == [[3, 5, 3]] and float(result.scores[0]) < math.log(0.3)  # the search as it is
    row = watch.row("table", {"beam_size": 2})
    assert (row["inputs"], row["outranked"]) == (1, 1)
    assert row["mean_gain"] == pytest.approx(math.log(0.3) - float(result.scores[0]), abs=1e-5)


def test_nothing_is_counted_where_no_ended_hypothesis_is_dropped(watch):
    _search(1)  # one step: nothing pushed out yet
    _search(5, beam=3)  # room for the ended one beside both
    row = watch.row("table", {})
    assert (row["inputs"], row["outranked"], row["mean_gain"]) == (2, 0, None)
