"""``probs=1`` on /caption and /translate: the answer read back (each word's probability) with the words under the
threshold (``unsure``) and where they are (``unsure_words`` / ``unsure_tokens``), as ``caption --unsure`` and
``translate --unsure`` name them; checked by the HTTP process like every option, refused out of range."""

from __future__ import annotations

import pytest
from helpers.in_process import ask, served_apis

from attention_serve.limits import ClientError
from attention_serve.openapi import CAPTION_ANSWER
from text_attn.core.unsure import CAPTION_UNSURE, UNSURE


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return served_apis(tmp_path_factory.mktemp("models"))


def test_a_caption_read_back_names_its_words_under_0_2(served):
    plain = ask(served, "/caption", {"beam_size": 1})
    assert not {"word_probs", "unsure", "unsure_words"} & set(plain)  # not asked: not read
    rec = ask(served, "/caption", {"beam_size": 1, "probs": 1})
    assert rec["words"] == plain["words"] and len(rec["word_probs"]) == len(rec["words"]) and 0 < rec["end_prob"] <= 1
    under = [t for t, p in enumerate(rec["word_probs"]) if p < CAPTION_UNSURE]
    assert rec["unsure_words"] == under and under  # a random model: unsure of much
    assert rec["unsure"] == [[rec["words"][t], rec["word_probs"][t]] for t in under]
    assert {"unsure", "unsure_words"} <= set(CAPTION_ANSWER["properties"])


def test_a_translation_read_back_names_its_words_under_0_1(served):
    (plain,) = ask(served, "/translate", {"beam_size": 1})["translations"]
    (tr,) = ask(served, "/translate", {"beam_size": 1, "probs": "1"})["translations"]  # a query-string form
    assert tr["tokens"] == plain["tokens"] and "token_probs" not in plain
    assert tr["words"] == tr["tokens"]  # a word model: a token a word
    under = [t for t, p in enumerate(tr["word_probs"]) if p < UNSURE]
    assert tr["unsure_tokens"] == under and tr["unsure"] == [[tr["words"][t], tr["word_probs"][t]] for t in under]


@pytest.mark.parametrize("path", ["/caption", "/translate"])
def test_probs_out_of_range_is_refused(served, path):
    with pytest.raises(ClientError, match="probs"):
        ask(served, path, {"probs": 2})
