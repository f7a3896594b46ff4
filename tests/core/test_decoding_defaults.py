"""A model file may record the decoding chosen for it on validation data (``info["decoding"]``): only valid values
are taken from it (text_attn.core.modelfile.decoding_defaults). (``update_info`` on a model file, and ``caption`` /
``translate`` using the recorded decoding unless a flag is given: tests/cli/test_recorded_decoding.py.)"""

from __future__ import annotations

from text_attn.core.modelfile import decoding_defaults


def test_decoding_defaults_keep_only_valid_values():
    assert decoding_defaults({}) == {}
    assert decoding_defaults({"decoding": "beam 3"}) == {}
    chosen = {"beam_size": 5, "length_penalty": 1, "no_repeat_ngram": 3}
    assert decoding_defaults({"decoding": chosen}) == {"beam_size": 5, "length_penalty": 1.0, "no_repeat_ngram": 3}
    bad = {"beam_size": 0, "length_penalty": -1, "no_repeat_ngram": -2, "chosen_by": "x"}
    assert decoding_defaults({"decoding": bad}) == {}
