"""The words a model was unsure of (text_attn.core.unsure): its own translations' probabilities kept by the search
(translate(probs=True)) or read back (Translator.with_probs), each word's against the search's own score, against each
other and against reading the same text given; translate --unsure's closing note and --html marks; bad thresholds as
one line."""

from __future__ import annotations

import json
import math
import re
from html import unescape
from types import SimpleNamespace

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file, tiny_word_model_file
from helpers.translate_run import run_translate as _run

from text_attn.core.unsure import check_threshold, unsure_line, unsure_words
from text_attn.core.unsure_options import count_unsure, unsure_note
from text_attn.translation.alignment_page import sentence_section
from text_attn.translation.translator import Translation, Translator


def test_the_unsure_words_are_those_under_the_threshold_in_order():
    words, probs = ["A", "ice", "cream", "lod."], [0.9, 0.05, 0.1, 0.01]
    assert unsure_words(words, probs) == [("ice", 0.05), ("lod.", 0.01)]  # 0.1 itself is not under 0.1
    assert unsure_words(words, probs, 0.5) == [("ice", 0.05), ("cream", 0.1), ("lod.", 0.01)]
    line = "the model was unsure of (p < 0.1): ice (0.05), lod. (0.012)"
    assert unsure_line([("ice", 0.05), ("lod.", 0.0123)]) == line
    assert unsure_line([]) is None
    with pytest.raises(ValueError, match="3 words for 2"):
        unsure_words(words[:3], probs[:2])
    for bad in (0, -0.1, 1.5, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="probability in"):
            check_threshold(bad)
    assert check_threshold(1) == 1.0


@pytest.fixture(scope="module")
def subword(tmp_path_factory):
    return Translator.load(tiny_subword_model_file(tmp_path_factory.mktemp("m")))


@pytest.fixture(scope="module")
def bundled():
    return Translator.load()


@pytest.mark.parametrize("kind", ["tiny subword", "tiny word", "bundled"])
def test_a_greedy_translation_read_back_gives_back_the_search_s_log_probability(subword, bundled, tmp_path, kind):
    translator = {"tiny subword": subword, "bundled": bundled}.get(kind)
    translator = translator or Translator.load(tiny_word_model_file(tmp_path / "w.pt"))
    lines = [s.lower() for s in DE[:3]] if kind == "tiny word" else DE[:3]
    out = translator.translate(lines, beam_size=1, length_penalty=0.0, max_len=6 if "tiny" in kind else None,
                               probs=True)  # fmt: skip
    if kind == "bundled":  # the tiny models' outputs are all cut off at max_len; the bundled one's end
        assert not any(tr.truncated for tr in out)
    for tr in out:
        # penalty 0: the score is the sum of the log-probabilities of the tokens (and the end, where it ended) the
        # search chose
        assert len(tr.probs) == len(tr.tokens) > 0 and not tr.given
        end = 0.0 if tr.truncated else math.log(tr.end_prob)
        assert sum(map(math.log, tr.probs)) + end == pytest.approx(tr.score, abs=1e-4)
        # a word's probability is the product of its pieces'
        assert math.prod(tr.word_probs) == pytest.approx(math.prod(tr.probs), rel=1e-4)
        assert len(tr.words) == len(tr.word_probs) <= len(tr.tokens)
        assert tr.unsure(1.0) == [(w, p) for w, p in zip(tr.words, tr.word_probs, strict=True) if p < 1.0]


@pytest.mark.parametrize("max_len", [None, 4])  # 4: most cut off, their end read back
def test_the_search_keeps_what_reading_the_translation_back_gives(bundled, max_len):
    # the last: a line of two sentences, translated one by one, read so too (read as one sentence, the second's first
    # word came back 0.0 against the search's 0.93)
    lines = [*DE[:2], "Ein Satz.", "Ein Hund läuft über die Wiese. Eine Katze schläft auf dem Sofa."]
    kept = bundled.translate(lines, max_len=max_len, probs=True)  # its recorded beam 8
    read = bundled.with_probs(bundled._inputs(lines)[1], bundled.translate(lines, max_len=max_len))
    assert len(read[-1].pieces) == 2
    assert any(tr.truncated for tr in kept) == (max_len is not None)
    for k, r in zip(kept, read, strict=True):
        assert k.tokens == r.tokens and k.words == r.words and not k.given
        assert k.probs == pytest.approx(r.probs, abs=1e-5) and k.word_probs == pytest.approx(r.word_probs, abs=1e-5)
        assert k.end_prob == pytest.approx(r.end_prob, abs=1e-5)


def test_reading_the_model_s_own_translation_back_equals_reading_it_given(bundled):
    lines = [*DE[:3], "Ein Satz."]
    out = bundled.translate(lines, probs=True)  # its recorded beam 8
    same = [(line, tr) for line, tr in zip(lines, out, strict=True) if bundled.target_tokens(tr.text)[0] == tr.tokens]
    assert len(same) >= 3  # retokenized as the search wrote it (else not the same reading)
    for line, tr in same:
        (given,) = bundled.read([line], tr.text)
        assert given.given and given.probs == pytest.approx(tr.probs, abs=1e-5)
        assert given.word_probs == pytest.approx(tr.word_probs, abs=1e-5) and given.words == tr.words
        assert given.end_prob == pytest.approx(tr.end_prob, abs=1e-5)
    assert bundled.translate(DE[:1])[0].unsure() == []  # not read: nothing to say


def test_an_empty_translation_reads_its_end_alone(subword):
    tr = Translation(subword.codec.encode(DE[0], "source"), [], "", None, [])
    subword.with_probs([tr.source], [tr])
    assert tr.probs == [] and tr.word_probs == [] and tr.words == [] and 0 < tr.end_prob <= 1
    with pytest.raises(ValueError, match="2 sentences for 1"):
        subword.with_probs([tr.source, tr.source], [tr])


def test_the_page_underlines_every_piece_of_a_word_under_the_threshold():
    tr = SimpleNamespace(source=["▁Ein", "▁Satz"], tokens=["▁A", "▁ice", "▁l", "od", "."], truncated=False,
                         probs=[0.9, 0.5, 0.2, 0.3, 0.5], word_probs=[0.9, 0.5, 0.03], words=["A", "ice", "lod."],
                         end_prob=0.9, score=-1.0, given=False)  # fmt: skip
    tr.unsure = lambda below: unsure_words(tr.words, tr.word_probs, below)
    html = sentence_section(1, tr, None)
    assert re.findall(r'class="w tgt unsure" data-t="(\d)"', html) == ["2", "3", "4"]
    assert "underlined, the model was unsure of (p &lt; 0.1): lod. (0.03)" in html
    assert "the model&#x27;s own translation" in html and "the translation given" not in html
    assert "unsure" not in sentence_section(1, tr, None, unsure=None).replace("unsure of", "")  # --given alone
    assert re.findall(r'class="w tgt unsure"', sentence_section(1, tr, None, unsure=0.6)).__len__() == 4


def test_the_note_names_one_input_or_the_first_ten():
    assert unsure_note({}, 0.1, "translations") is None
    one: dict = {}
    count_unsure(one, "input 2", [])  # nothing under the threshold: not counted
    count_unsure(one, "input 3", [("lod.", 0.037)])
    assert unsure_note(one, 0.1, "translations") == "input 3: the model was unsure of lod. (0.037) (p < 0.1): check it"
    many: dict = {}
    for n in range(1, 13):
        count_unsure(many, f"input {n}", [("a", 0.05), ("b", 0.01)] if n != 12 else [("c", 0.1)])
    note = unsure_note(many, 0.2, "translations")
    assert note.startswith("12 translations hold 23 word(s) the model was unsure of (p < 0.2), check them: input 1: ")
    assert note.endswith("input 10: a (0.05), b (0.01); and 2 more") and len(many["unsure_first"]) == 10


def test_translate_unsure_names_the_words_and_underlines_them_on_the_page(tmp_path, capsys, monkeypatch):
    lines = ["Ein Satz.", "Ein Mann fährt Fahrrad."]
    expected = [tr.unsure(0.5) for tr in Translator.load().translate(lines, probs=True)]
    assert expected[0]  # the bundled Transformer: "A overalls overalls.", "overalls" at p ~ 0.05
    page = tmp_path / "t.html"
    code, out, err = _run(["--unsure-below", "0.5", "--html", str(page), *lines], capsys, monkeypatch)
    assert code == 0 and out.splitlines()[0] == "A overalls overalls."
    words = [f"{w} ({p:.2g})" for found in expected for w, p in found]
    assert all(w in err for w in words) and "(p < 0.5)" in err, err
    marked = len(re.findall(r'class="w tgt unsure"', page.read_text()))
    assert marked >= sum(map(len, expected))  # every piece of each such word
    code, out, err = _run(["Ein Satz."], capsys, monkeypatch)
    assert code == 0 and "unsure" not in err  # without --unsure: not read back, nothing said


@pytest.mark.parametrize("bad", ["0", "1.5", "x"])
def test_a_bad_threshold_is_one_line(bad, capsys, monkeypatch):
    code, _, err = _run(["--unsure-below", bad, "Ein Satz."], capsys, monkeypatch)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--unsure-below" in err


def test_attention_serve_reads_back_when_asked_and_names_the_unsure_words(tmp_path):
    from attention_serve.apis import TranslateAPI
    from attention_serve.limits import TRANSLATE_OPTIONS
    from attention_serve.openapi import TRANSLATE_ANSWER

    api = TranslateAPI(str(tiny_subword_model_file(tmp_path)), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    options = {"beam_size": 1, "length_penalty": 0.0, "max_len": 4}
    plain = api._translate(DE[:2], options)
    assert not {"token_probs", "words", "unsure", "unsure_tokens"} & set(plain[0])  # not asked: not read
    records = api._translate(DE[:2], {**options, "probs": 1})
    own = api.translator.translate(DE[:2], beam_size=1, length_penalty=0.0, max_len=4, probs=True)
    for rec, tr in zip(records, own, strict=True):
        assert rec["translation"] == plain[0 if rec is records[0] else 1]["translation"] == tr.text
        assert rec["words"] == tr.words and rec["word_probs"] == pytest.approx(tr.word_probs, rel=1e-5)
        assert [w for w, _ in rec["unsure"]] == [w for w, _ in tr.unsure()]
        # every piece of a word under 0.1: a piece starting with "▁" starts a word
        word_of = [sum(t.startswith("▁") for t in tr.tokens[1 : i + 1]) for i in range(len(tr.tokens))]
        assert rec["unsure_tokens"] == [i for i, w in enumerate(word_of) if tr.word_probs[w] < 0.1]
    assert any(rec["unsure"] for rec in records)  # an untrained model is unsure of much
    assert TRANSLATE_OPTIONS["probs"].parse("probs", "1") == 1
    answer = TRANSLATE_ANSWER["properties"]["translations"]["items"]["properties"]
    assert answer["unsure_tokens"]["items"] == {"type": "integer"} and "words" in answer


def test_a_notebook_s_view_underlines_the_words_it_was_unsure_of(bundled):
    (tr,) = bundled.translate(["Ein Satz."], probs=True)  # "A overalls overalls.": "overalls" at ~0.05
    (word, _), *_ = tr.unsure()
    html = unescape(tr._repr_html_())  # the page is the frame's srcdoc, escaped
    assert word == "overalls" and 'class="w tgt unsure"' in html and "own translation" in html
    (plain,) = bundled.translate(["Ein Satz."])
    assert 'class="w tgt unsure"' not in unescape(plain._repr_html_())


def test_scores_hold_each_sentence_s_unsure_words(tmp_path, capsys, monkeypatch):
    refs, out = tmp_path / "refs.txt", tmp_path / "scores.json"
    refs.write_text("A sentence.\nA man rides a bike.\n")
    lines = ["Ein Satz.", "Ein Mann fährt Fahrrad."]
    code, _, err = _run(["--unsure", "--references", str(refs), "--scores", str(out), *lines], capsys, monkeypatch)
    assert code == 0, err
    expected = {n: tr.unsure() for n, tr in enumerate(Translator.load().translate(lines, probs=True), 1)}
    for sentence in json.loads(out.read_text())["per_sentence"]:
        assert [w for w, _ in sentence["unsure"]] == [w for w, _ in expected[sentence["input"]]]
        assert [p for _, p in sentence["unsure"]] == pytest.approx(
            [p for _, p in expected[sentence["input"]]], abs=1e-6
        )
    code, _, err = _run(["--references", str(refs), "--scores", str(out), *lines], capsys, monkeypatch)
    assert code == 0 and all("unsure" not in s for s in json.loads(out.read_text())["per_sentence"])
