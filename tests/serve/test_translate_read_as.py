"""attention-serve's /translate answer says how the model read a sentence typed without capitals (``read_as``), in
process: the worker's own translate step on a tiny subword model whose file knows its training text's casing; and its
default length cap is never above the largest a client may ask for."""

from __future__ import annotations

from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

from attention_serve.apis import TranslateAPI
from attention_serve.openapi import TRANSLATE_ANSWER
from text_attn.translation.records import empty_record


def test_a_sentence_without_capitals_is_answered_with_how_it_was_read(tmp_path):
    api = TranslateAPI(tiny_subword_model_file(tmp_path), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    typed = DE[0].lower()
    records = api._translate([typed, DE[1]], {"beam_size": 1, "length_penalty": 0.0, "max_len": 3})
    assert [r["source"] for r in records] == [typed, DE[1]]  # what was sent
    assert records[0]["read_as"] == DE[0] and records[1]["read_as"] is None
    assert records[0]["source_tokens"] == [*api.translator.tokenize(DE[0]), "<eos>"]
    assert records[0]["translation"] == api.translator.translate([DE[0]], beam_size=1, max_len=3)[0].text
    answer = TRANSLATE_ANSWER["properties"]["translations"]["items"]["properties"]
    assert set(records[0]) <= set(answer) and "read_as" in answer


def test_an_address_the_translation_lacks_is_answered_as_lost(tmp_path):
    """As `translate` notes it: the tiny model, three tokens long, copies no address."""
    api = TranslateAPI(tiny_subword_model_file(tmp_path), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    typed = [f"{DE[0]} www.beispiel.de/a", DE[1]]
    records = api._translate(typed, {"beam_size": 1, "length_penalty": 0.0, "max_len": 3})
    assert [r["lost_addresses"] for r in records] == [["www.beispiel.de/a"], []]
    assert empty_record("...")["lost_addresses"] == []


def test_the_default_length_cap_is_at_most_what_a_client_may_ask_for(tmp_path, monkeypatch):
    """max_len left out: each sentence's own 2 x source + 10, but never above the 512 a client may give (a
    1,000-character line searched 2,010 steps at beam 8, minutes every other translation waited on). The ceiling
    made small here (12)."""
    from attention_serve import limits

    monkeypatch.setitem(limits.TRANSLATE_OPTIONS, "max_len", limits.Option(int, 1, 12, "test"))
    api = TranslateAPI(tiny_subword_model_file(tmp_path), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    long = " und ".join(s.rstrip(".") for s in DE[:3]) + "."  # one sentence; an untrained model never ends: caps bind
    n_long = len(api.translator.tokenize(long)) + 1  # with the source's eos
    (record,) = api._translate([long], {"beam_size": 1, "length_penalty": 0.0})
    uncapped = api.translator.translate_tokens([api.translator.tokenize(long)], 1, 0.0, None)[0]
    # translate's own default (lower than 2 x source + 10: the line is longer than any the tiny model learned from)
    assert len(uncapped.tokens) == api.translator.default_steps(n_long - 1) > 12
    assert record["tokens"] == uncapped.tokens[:12] and record["truncated"]


def test_keep_case_reads_a_request_as_typed_and_leaves_the_worker_as_it_was(tmp_path):
    """/info said "(--keep-case: as typed)", and keep_case=1 was a 422 unknown option: a client could not ask for
    the sentence as typed. It is the request's alone: the next request is read with the capitals again."""
    from attention_serve.limits import TRANSLATE_OPTIONS, parse_options

    options = parse_options({"keep_case": "1", "beam_size": 1}, TRANSLATE_OPTIONS, {"length_penalty": 0.0})
    assert options["keep_case"] == 1
    api = TranslateAPI(tiny_subword_model_file(tmp_path), "translate", 1, 4, 0.01, idle_wait=False)
    api.load("cpu")
    typed = DE[0].lower()
    (kept,) = api._translate([typed], {**options, "max_len": 3})
    assert kept["read_as"] is None and kept["source_tokens"] == [*api.translator.tokenize(typed, True), "<eos>"]
    assert kept["source_tokens"] != [*api.translator.tokenize(DE[0]), "<eos>"]
    assert kept["translation"] == api.translator.translate_tokens([kept["source_tokens"][:-1]], 1, 0.0, 3)[0].text
    (recased,) = api._translate([typed], {"beam_size": 1, "length_penalty": 0.0, "max_len": 3})
    assert recased["read_as"] == DE[0] and api.translator.keep_case is False


def test_info_names_the_option_a_client_gives_and_keys_the_scores_by_metric(tmp_path):
    """/info's casing line named the command's flag (--keep-case), and a text model's scores came back keyed
    "test_2016_flickr beam 5: sacreBLEU", the split and beam folded into the first metric's name."""
    from attention_serve.models import load_text, scores_keyed

    info = load_text(tiny_subword_model_file(tmp_path)).info
    assert "keep_case=1: as typed" in info["input_casing"] and "--keep-case" not in info["input_casing"]
    written = {
        "terms": "T",
        "test_scores": {"test_2016_flickr beam 5: sacreBLEU": 40.84, "chrF": 59.98},
        "test_scores_default_decoding": {"test_2016_flickr beam 8, length penalty 1: sacreBLEU": 41.54},
    }
    assert scores_keyed(written) == {
        "terms": "T",
        "test_scores": {"sacreBLEU": 40.84, "chrF": 59.98, "split": "test_2016_flickr", "beam": 5},
        "test_scores_default_decoding": {"sacreBLEU": 41.54, "split": "test_2016_flickr", "beam": 8,
                                         "length_penalty": 1.0},
    }  # fmt: skip
    caption_like = {"test_scores": {"Bleu_4": 23.8, "beam": 5, "length_penalty": 1.0}}
    assert scores_keyed(caption_like) == caption_like  # keyed by metric already
