"""The bundled German -> English translator (text_attn/translation/assets/multi30k_de_en.pt): a small self-contained
float16 file that carries its data's terms and test scores, and translates German into cased English, never <unk>,
from any directory without --model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from text_attn.translation.translate_cli import BUNDLED_MODEL, DEMO_SENTENCES
from text_attn.translation.translator import Translator


def test_bundled_translator_is_small_half_and_says_its_terms():
    assert BUNDLED_MODEL.stat().st_size < 25 * 2**20
    data = torch.load(BUNDLED_MODEL, weights_only=True)  # plain tensors and JSON-able values only
    assert data["tokenizer"] == "subword" and data["subword_model"].dtype == torch.uint8
    assert all(v.dtype == torch.float16 for k, v in data["state_dict"].items() if k.endswith("weight"))
    info = Translator.load(BUNDLED_MODEL).info
    assert "non-commercial research" in info["terms"] and "Multi30k" in info["training_data"]
    assert info["test_scores"]["test_2016_flickr beam 5: sacreBLEU"] > 30
    # the beam and length penalty translate uses by default were chosen on val; their test scores are recorded too
    assert info["decoding"]["beam_size"] >= 1 and "val" in info["decoding"]["chosen_by"]
    assert max(info["test_scores_default_decoding"].values()) > 30


def test_translates_german_into_cased_english_from_any_directory(tmp_path):
    sentences = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]
    translate = Path(sys.executable).parent / "translate"
    done = subprocess.run([str(translate), *sentences, "--beam-size", "5"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line[0].isupper() and line.endswith(".") and "<unk>" not in line for line in lines)
    assert "man" in lines[0].lower() and "bike" in lines[0].lower(), lines
    assert "dogs" in lines[1].lower() and "snow" in lines[1].lower(), lines
    assert "woman" in lines[2].lower() and "book" in lines[2].lower(), lines


def test_english_given_to_the_german_model_gets_a_note_and_german_none():
    translator = Translator.load(BUNDLED_MODEL)
    assert translator.source_check["lang"] == "de"
    english = ["A man is riding a bike.", "Two dogs are playing in the snow.", "A woman reads a book."]
    german = [*DEMO_SENTENCES, "Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch."]
    assert all(translator.unlike_source(s) for s in english)
    assert not any(translator.unlike_source(s) for s in german)
