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
