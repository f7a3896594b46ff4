"""Numbers as strict JSON holds them: the one rounding every record of both families uses."""

import json
import math

import numpy as np
import torch

from text_attn.core.json_numbers import json_safe, json_score


def test_a_score_is_rounded_to_six_decimals_and_a_plain_float():
    for raw in (-1.23456789, np.float32(-1.23456789), torch.tensor(-1.23456789)):
        got = json_score(raw)
        assert type(got) is float
        assert got == -1.234568
    assert json_score(-2) == -2.0


def test_a_score_that_is_no_number_is_null_and_the_record_is_strict_json():
    assert json_score(-math.inf) is None
    assert json_score(math.nan) is None
    record = {"score": json_score(-math.inf), "n_best": [{"score": json_score(float("nan"))}]}
    # allow_nan=False is strict JSON: it raises on NaN or -Infinity
    assert json.loads(json.dumps(record, allow_nan=False)) == {"score": None, "n_best": [{"score": None}]}


def test_json_safe_nulls_every_float_that_is_no_number_however_deep():
    value = {"a": [1.5, math.nan, {"b": -math.inf}], "c": (math.inf, "x"), "d": 3}
    assert json_safe(value) == {"a": [1.5, None, {"b": None}], "c": [None, "x"], "d": 3}
