"""Flags of `caption` and `translate` that the run would not read (text_attn.core.unread_options): --model-info beside
an output or a decoding it never makes, translate --layer without an output that shows attention, caption --given
with --max-len (translate refused it already): refused in one line before the model loads. --length-penalty at beam
1 changes only the scores reported: one note. A soft-attention captioner asked to decode by argmax is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.one_line import refused
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from captioning.commands.caption import caption_main
from captioning.model.captioner import Captioner
from text_attn.translation.translate_cli import translate_main

PHOTO = str(Path(__file__).resolve().parents[1] / "fixtures" / "images" / "coffee.png")
NOTE = "--length-penalty ranks the hypotheses of a beam; {}: it changes no output, only the scores reported"


def test_model_info_refuses_the_outputs_and_decoding_it_never_makes(tmp_path, capsys):
    out, overlays = tmp_path / "out.txt", tmp_path / "overlays"
    line = refused(translate_main, capsys, "--model-info", "--beam-size", "2", "--output", out)
    assert line == "translate: error: --model-info describes the model and exits: give it without --beam-size, --output"
    line = refused(caption_main, capsys, "--model-info", "--json", "--overlay", overlays)
    assert line == "caption: error: --model-info describes the model and exits: give it without --json, --overlay"
    assert not out.exists() and not overlays.exists()  # nothing written, as nothing would have been before


def test_layer_without_an_output_that_shows_attention_and_given_with_max_len_are_refused(capsys):
    line = refused(translate_main, capsys, "--layer", "1", "ein mann")
    assert line == ("translate: error: --layer picks the attention --plot, --html, --alignments, --demo and the --json "
                    "/ --jsonl records show: give it with one of them")  # fmt: skip
    line = refused(caption_main, capsys, PHOTO, "--given", "a cup", "--max-len", "5")
    assert line == "caption: error: --given reads the captions given; --max-len is for the captions the model writes: "\
                   "drop one"  # fmt: skip


def test_layer_picks_the_attention_of_the_json_records(capsys):
    """It was refused with --json alone, though a record's 'attention' is that layer's (the penultimate unless
    given)."""
    import json

    def attention(*args: str) -> list:
        assert translate_main(["--json", *args, "Ein Mann singt."]) == 0
        return json.loads(capsys.readouterr().out)[0]["attention"]

    default, penultimate, last = attention(), attention("--layer", "-2"), attention("--layer", "-1")
    assert default == penultimate != last


def test_a_length_penalty_with_one_hypothesis_is_noted(tmp_path, capsys):
    text = tiny_word_model_file(tmp_path / "t.pt")
    assert translate_main(["--model", str(text), "--length-penalty", "1", "ein mann"]) == 0
    assert f"translate: note: {NOTE.format('beam 1 keeps one hypothesis')}" in capsys.readouterr().err.splitlines()
    assert translate_main(["--model", str(text), "--length-penalty", "1", "--beam-size", "2", "ein mann"]) == 0
    assert "--length-penalty" not in capsys.readouterr().err  # a beam it ranks
    model = str(tiny_model_file(tmp_path / "c.pt"))
    assert caption_main([PHOTO, "--model", model, "--sample", "--length-penalty", "1", "--max-len", "3"]) == 0
    assert f"caption: note: {NOTE.format('--sample draws one hypothesis')}" in capsys.readouterr().err.splitlines()


def test_argmax_decoding_is_refused_for_a_soft_attention_model(tmp_path):
    """It decoded with the expected context, as soft attention always does, and said nothing ("expect" is that)."""
    captioner = Captioner.load(tiny_model_file(tmp_path / "c.pt"))
    with pytest.raises(ValueError, match="^hard_inference 'argmax' decodes a hard-attention model with one region a "
                                         "word; this model's attention is soft"):  # fmt: skip
        captioner.caption_images([PHOTO], max_len=3, hard_inference="argmax")
    assert len(captioner.caption_images([PHOTO], max_len=3, hard_inference="expect")) == 1
