"""attention-serve --text-ensemble MODEL: /translate answers with --text-model and MODEL as one (the worker's own
translate step, in process), /info and the page say so, evidence=1 is refused before a worker is asked, and a model
that is missing or cannot share the search is one line. On small subword models built here (random weights)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_word_model_file, two_subword_model_files

from attention_serve import models
from attention_serve.apis import TranslateAPI
from attention_serve.page import render
from text_attn.core.modelfile import ModelFileError
from text_attn.translation.ensemble import EnsembleTranslator
from text_attn.translation.translator import Translator

sys.path.insert(0, str(Path(__file__).parent))  # test_front's in-process POST
from test_front import _post_translate  # noqa: E402


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return two_subword_model_files(tmp_path_factory.mktemp("m"))


def test_the_worker_translates_with_the_ensemble(pair):
    first, second = pair
    api = TranslateAPI(first, "translate", 1, 4, 0.01, idle_wait=False, ensemble=[second])
    api.load("cpu")
    records = api._translate(DE, {"beam_size": 2, "length_penalty": 0.0, "max_len": 6, "probs": True})
    both = EnsembleTranslator([Translator.load(first), Translator.load(second)])
    assert [r["translation"] for r in records] == [t.text for t in both.translate(DE, beam_size=2, max_len=6)]
    alone = TranslateAPI(first, "translate", 1, 4, 0.01, idle_wait=False)
    alone.load("cpu")
    assert records != alone._translate(DE, {"beam_size": 2, "length_penalty": 0.0, "max_len": 6, "probs": True})


def test_info_and_page_say_it_and_evidence_is_refused_in_the_front(pair):
    first, second = pair
    text = models.load_text(first, [second])
    assert text.name == "m.pt + b.pt" and text.info["ensemble"] == ["b.pt"] and text.extra["ensemble"] == [second]
    kept = text.extra["tokenize"].__self__  # what the HTTP process keeps to count tokens: no network of either
    assert kept.net is None and all(m.net is None for m in kept.members)
    page = render(None, text.info, False, text.extra["lang"]).decode()
    assert 'id="tr-evidence" disabled' in page and 'id="cap-evidence">' in page  # the captioner's stays
    status, answer, asked = _post_translate(text, {"text": DE[0], "evidence": 1})
    assert (status, asked) == (422, []) and "ensemble (--text-ensemble)" in answer["error"]
    assert _post_translate(text, {"text": DE[0]})[::2] == (200, ["/translate", "/translate"])
    assert 'id="tr-evidence" disabled' not in render(None, models.load_text(first).info, False).decode()


def test_a_model_that_cannot_join_is_one_line(pair, tmp_path):
    first, _ = pair
    with pytest.raises(ModelFileError, match=r"^--text-ensemble .*none\.pt: no such model file$"):
        models.load(None, str(first), [str(tmp_path / "none.pt")])
    with pytest.raises(ModelFileError, match=r"^--text-ensemble none: give a model file"):
        models.ensemble_files(["none"])
    word = tiny_word_model_file(tmp_path / "w.pt")
    with pytest.raises(ModelFileError, match=rf"^--text-ensemble {word} reads text as word tokens"):
        models.load(None, str(first), [str(word)])
