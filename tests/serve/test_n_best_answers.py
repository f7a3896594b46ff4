"""``n_best`` on /caption and /translate: the beam's n best, best first, as ``caption --n-best`` and ``translate
--n-best`` list them (the same search through Python's objects is the reference), checked by the HTTP process
against the beam it searches with, and refused beside a text given."""

from __future__ import annotations

import pytest
from helpers.in_process import PHOTO, ask, served_apis

from attention_serve.limits import ClientError
from attention_serve.openapi import CAPTION_ANSWER, TRANSLATE_ANSWER


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return served_apis(tmp_path_factory.mktemp("models"))


def test_a_caption_lists_the_beams_n_best_as_python_does(served):
    import io

    from captioning import Captioner

    rec = ask(served, "/caption", {"beam_size": 4, "n_best": 3})
    assert len(rec["n_best"]) == 3 and rec["options"]["n_best"] == 3
    first = rec["n_best"][0]
    assert (first["caption"], first["score"], first["truncated"]) == (rec["caption"], rec["score"], rec["truncated"])
    # the reference: the same model file captioning the same bytes with the same decoding in Python
    model = Captioner.load(served[2].path)
    (own,) = model.caption_images([io.BytesIO(PHOTO)], beam_size=4, n_best=3)
    assert rec["n_best"] == own.n_best_records()
    assert [h["caption"] for h in rec["n_best"]] == [" ".join(w) for w, _, _ in own.nbest]
    assert len({h["caption"] for h in rec["n_best"]}) == 3  # three hypotheses, not one thrice
    assert "n_best" not in ask(served, "/caption", {"beam_size": 4})  # not asked: no list


def test_n_best_1_lists_the_caption_itself(served):
    rec = ask(served, "/caption", {"beam_size": 2, "n_best": "1"})  # a form's or query's string
    assert rec["n_best"] == [{"caption": rec["caption"], "score": rec["score"], "truncated": rec["truncated"]}]


def test_a_translation_lists_each_sentences_n_best(served):
    from text_attn.translation.translator import Translator

    answer = ask(served, "/translate", {"beam_size": 3, "n_best": 2})
    (tr,) = answer["translations"]
    assert len(tr["n_best"]) == 2 and tr["n_best"][0]["translation"] == tr["translation"]
    assert tr["n_best"][0]["score"] == tr["score"]
    own = Translator.load(served[1].path).translate(["ein mann"], beam_size=3, n_best=2)[0]
    assert [(h["translation"], h["score"]) for h in tr["n_best"]] == [(t, round(s, 6)) for t, s, _ in own.nbest]
    (one,) = ask(served, "/translate", {"beam_size": 3, "n_best": 1})["translations"]
    assert one["n_best"] == [{"translation": one["translation"], "score": one["score"], "truncated": one["truncated"]}]


def test_a_text_of_two_sentences_lists_them_joined(served):
    answer = ask(served, "/translate", {"sentences": ["ein mann. ein hund.", "ein hund"], "beam_size": 3, "n_best": 2})
    both, alone = answer["translations"]
    assert both["sentence_count"] == 2 and both["n_best"][0]["translation"] == both["translation"]
    assert len(both["n_best"]) == 2 and len(alone["n_best"]) == 2
    # the k-th best of a text: its sentences' k-th best joined (text_attn.translation.sentences.joined)
    assert both["n_best"][1]["translation"] != both["translation"]


@pytest.mark.parametrize("path", ["/caption", "/translate"])
def test_n_best_past_the_beam_is_refused_naming_it(served, path):
    with pytest.raises(ClientError, match=r"n_best 3 is more than beam_size 2: the beam") as err:
        ask(served, path, {"beam_size": 2, "n_best": 3})
    assert err.value.status == 422
    with pytest.raises(ClientError, match="n_best must be an integer from 1 to 20"):
        ask(served, path, {"beam_size": 2, "n_best": 0})


def test_n_best_past_the_model_files_beam_says_to_send_beam_size():
    from attention_serve.limits import CAPTION_OPTIONS, parse_options

    with pytest.raises(ClientError, match=r"beam_size 3 \(the model file's; send beam_size too"):
        parse_options({"n_best": 5}, CAPTION_OPTIONS, {"beam_size": 3})
    assert parse_options({"n_best": 3}, CAPTION_OPTIONS, {"beam_size": 3})["n_best"] == 3


@pytest.mark.parametrize("path", ["/caption", "/translate"])
def test_n_best_beside_a_text_given_is_refused(served, path):
    with pytest.raises(ClientError, match="given reads the text given; n_best is for the text the model writes"):
        ask(served, path, {"given": "a man", "n_best": 1})


def test_the_openapi_answers_describe_n_best():
    assert CAPTION_ANSWER["properties"]["n_best"]["items"]["properties"].keys() == {"caption", "score", "truncated"}
    item = TRANSLATE_ANSWER["properties"]["translations"]["items"]["properties"]["n_best"]["items"]
    assert item["properties"].keys() == {"translation", "score", "truncated"}
