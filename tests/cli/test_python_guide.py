"""docs/python.md runs as written, and Python gets what the commands print: the bundled models by name or with no
argument, the recorded decoding by default, the same caption as `caption` and the same translation as `translate`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from captioning.commands.caption import caption_main
from captioning.model.bundled import BUNDLED_MODEL, DEMO_PHOTOS, SHAPES_MODEL
from captioning.model.captioner import Captioner
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


@pytest.mark.long
def test_every_example_of_the_python_guide_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(blocks) == 10
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:  # in order, in one namespace, as a reader would paste them
        exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - the guide's own code
    out = capsys.readouterr().out
    assert f"{DEMO_PHOTOS[0].name}: " in out and "'beam_size': 5" in out
    assert "most weight on region row" in out and (tmp_path / "attention.png").stat().st_size > 10_000
    assert re.search(r"^\(\d+, 81\)$", out, flags=re.M)  # a caption's attention: (words, 9 x 9 regions)
    assert len(re.findall(r"^\(\d+, 4, \d+\)$", out, flags=re.M)) == 2  # each translation's: 4 heads
    assert len(re.findall(r"^\(\d+, \d+\)$", out, flags=re.M)) == 2  # the caption's and the GRU's translation
    assert sum(1 for line in out.splitlines() if "\t" in line) == len(DEMO_PHOTOS)
    assert "\nZwei Kinder spielen im Sand. -> Two children " in out  # typed without capitals, read with them
    assert "\nA dog runs across the grassy field. A cat sleeps on the couch. 2\n" in out  # two sentences, each
    assert "\nTwo dogs are playing in the snow\n- A child is riding a bike.\n- A woman is waiting.\n" in out  # laid out
    # both maps of every word: one line a word of the photo's caption, and the GRU's (output, source + <eos>) drops
    found = namespace["found"]
    assert len(re.findall(r": agreement [+-]\d\.\d\d, removing region \d+ costs it most$", out, flags=re.M)) > 0
    assert found.source[-1] == "<eos>" and tuple(found.evidence.shape) == (len(found.tokens), len(found.source))
    assert namespace["page"].startswith("<div>") and "<iframe srcdoc=" in namespace["page"]  # the Jupyter view
    assert namespace["picture"].startswith(b"\x89PNG")
    # a caption read: one line per photo with its score and each word's probability; a translation read too
    assert len(re.findall(r"^\S+\.(?:png|jpg) -\d+\.\d{3} \['a \d\.\d\d', 'man ", out, flags=re.M)) == 2
    assert "\nA dog runs across a green field. []\n" in out  # the two bundled translators as one
    assert "['zorblax']" in out and re.search(r"^\['▁A', '▁man', '▁rides', '▁a', '▁bike', '\.'\] ", out, flags=re.M)


@pytest.mark.long
def test_python_captions_as_the_command_does(capsys):
    captioner = Captioner.load()
    assert Captioner.load("flickr8k").decoding() == captioner.decoding() == {
        "beam_size": 5, "length_penalty": 1.0, "no_repeat_ngram": 3}  # fmt: skip
    photo = DEMO_PHOTOS[0]
    (cap,) = captioner.caption_images([photo])
    assert caption_main([str(photo)]) == 0
    assert capsys.readouterr().out.strip() == " ".join(cap.words)
    assert Captioner.load("shapes").grid == Captioner.load(SHAPES_MODEL).grid and BUNDLED_MODEL.is_file()


def test_python_translates_as_the_command_does(capsys):
    translator = Translator.load()
    assert Translator.load("transformer").decoding() == translator.decoding()
    assert Translator.load("bahdanau").arch == "rnn" and translator.arch == "transformer"
    sentence = "Ein Mann fährt mit seinem Fahrrad eine Straße entlang."
    (t,) = translator.translate([sentence])
    assert translate_main([sentence]) == 0
    assert capsys.readouterr().out.strip() == t.text and t.unlike_source is False
    (odd,) = translator.translate(["The weather is nice today and I am going to the office."])
    assert odd.unlike_source is True  # English, not German: the source check's note


@pytest.mark.parametrize("name", ["nope", "flickr9k"])
def test_an_unknown_name_is_a_missing_file(name):
    from text_attn.core.modelfile import ModelFileError

    with pytest.raises(ModelFileError, match=f"{name}: model file not found"):
        Captioner.load(name)
