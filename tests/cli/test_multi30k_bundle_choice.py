"""benchmarks/multi30k.py --bundle: the model that leads on val becomes the default file; the Bahdanau GRU, when
scored and not the leader, is kept as its own file (``translate --model bahdanau``)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import multi30k  # noqa: E402 - the benchmark script, importable from its folder

from text_attn.translation import bundled  # noqa: E402


def test_the_val_leader_is_the_default_and_the_gru_keeps_its_own_file():
    choice = multi30k.bundle_choice({"bahdanau": 0.37, "transformer": 0.40, "luong": 0.32})
    assert choice == {"transformer": multi30k.BUNDLED, "bahdanau": multi30k.BUNDLED_BY_NAME["bahdanau"]}
    # the files the benchmark writes are the ones the commands read by name
    assert multi30k.BUNDLED == bundled.model_path("transformer") == bundled.model_path(None)
    assert multi30k.BUNDLED_BY_NAME["bahdanau"] == bundled.model_path("bahdanau")


def test_a_gru_that_leads_on_val_is_the_default_alone():
    assert multi30k.bundle_choice({"bahdanau": 0.41, "transformer": 0.40}) == {"bahdanau": multi30k.BUNDLED}
    assert multi30k.bundle_choice({"none": 0.2}) == {"none": multi30k.BUNDLED}
