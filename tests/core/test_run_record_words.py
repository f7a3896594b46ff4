"""A run record's refusal says each option as the command line gives it: the record's --unsure holds a threshold,
and "--unsure 0.1" (or "--unsure-below 0.2" where --unsure alone was typed) named an option no one typed."""

from text_attn.core.run_record import differences
from text_attn.core.unsure_options import unsure_typed


def _record(**options) -> dict:
    return {"model": "m.pt", "model_sha256": "ab", "options": options}


def test_an_option_is_said_as_typed_where_the_caller_words_it():
    typed = unsure_typed(0.1)
    assert [typed(None), typed(0.1), typed(0.5), typed(False)] == ["no --unsure", "--unsure", "--unsure-below 0.5",
                                                                   "no --unsure"]  # fmt: skip
    old, new = _record(**{"--unsure": 0.1, "--beam-size": 5}), _record(**{"--unsure": 0.5, "--beam-size": 3})
    assert differences(old, new, worded={"--unsure": typed}) == [
        "--unsure (this run: --unsure-below 0.5)",
        "--beam-size 5 (this run: 3)",
    ]
    assert differences(old, new) == ["--unsure 0.1 (this run: 0.5)", "--beam-size 5 (this run: 3)"]  # as stored


def test_an_option_not_given_either_way_is_no_difference():
    """A record without a flag (written before it, or an --output record beside a --jsonl file) and a run that gives
    it as False: refused for "--evidence not given (this run: not given)". 0 is a value, not an absence."""
    old = _record(**{"--beam-size": 5, "--n-best": None})
    new = _record(**{"--beam-size": 5, "--n-best": None, "--evidence": False, "--keep-case": None})
    assert differences(old, new) == []
    assert differences(_record(**{"--no-repeat-ngram": None}), _record(**{"--no-repeat-ngram": 0})) == [
        "--no-repeat-ngram not given (this run: 0)"]  # fmt: skip
    assert differences(old, _record(**{"--beam-size": 5, "--evidence": True})) == [
        "--evidence not given (this run: given)"
    ]


def test_options_beside_another_model_file_are_said_to_be_its_own_decoding_where_none_was_given():
    """``--resume --model other.pt`` listed "--beam-size 5 (this run: 3)" no one typed: the two files' defaults."""
    old = _record(**{"--beam-size": 5})
    new = {"model": "o.pt", "model_sha256": "cd", "options": {"--beam-size": 3}}
    assert differences(old, new) == [
        "another model file (m.pt; this run: o.pt; each decodes as its file records where no option is given)",
        "--beam-size 5 (this run: 3)",
    ]
    assert differences(old, {**new, "options": {"--beam-size": 5}}) == ["another model file (m.pt; this run: o.pt)"]
