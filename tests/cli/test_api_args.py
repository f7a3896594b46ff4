"""What a Python caller gives Captioner and Translator is checked as the commands check their options
(text_attn.core.api_args): a bare string is refused (it was read one character at a time), decoding values out of
range are refused by name (a beam wider than the vocabulary filled the memory; beam 0 searched greedily unsaid), a
folder or a device that cannot be had is named, and an image of no pixels is refused before it is captioned."""

from __future__ import annotations

import pytest
from PIL import Image

from captioning.model.bundled import DEMO_PHOTOS
from captioning.model.captioner import Captioner
from captioning.photos.preprocess import ImageReadError
from text_attn.core.api_args import a_batch, check_decoding
from text_attn.core.modelfile import ModelFileError
from text_attn.translation.translator import Translator


@pytest.mark.parametrize(
    "kwargs, raised, says",
    [({"beam_size": 0}, ValueError, "beam_size must be at least 1, got 0"),
     ({"beam_size": 50, "words": 19}, ValueError, "beam_size 50 is more than the model's 19 words"),
     ({"beam_size": 2.5}, TypeError, "beam_size must be an integer"),
     ({"max_len": 0}, ValueError, "max_len must be at least 1"),
     ({"no_repeat_ngram": -1}, ValueError, "no_repeat_ngram must be at least 0"),
     ({"length_penalty": -1}, ValueError, "length_penalty must be a finite number, 0 or more"),
     ({"length_penalty": float("nan")}, ValueError, "length_penalty must be a finite number"),
     ({"length_penalty": "1"}, TypeError, "length_penalty must be a number")],
)  # fmt: skip
def test_decoding_values_out_of_range_are_named(kwargs, raised, says):
    with pytest.raises(raised, match=says):
        check_decoding(**kwargs)


def test_values_in_range_pass():
    check_decoding(beam_size=19, length_penalty=0, max_len=1, no_repeat_ngram=0, words=19)
    check_decoding()  # nothing given: nothing checked
    a_batch(["a"], "translate", "sentences")


def test_the_captioner_refuses_what_the_command_refuses():
    captioner = Captioner.load("shapes")
    photo = str(DEMO_PHOTOS[0])
    with pytest.raises(TypeError, match=r"caption_images takes a list of photos .*: give \["):
        captioner.caption_images(photo)  # was "p: no such file" (its first character)
    with pytest.raises(TypeError, match="read_caption takes a list"):
        captioner.read_caption(photo, "a red circle")
    with pytest.raises(ValueError, match=f"beam_size 100000 is more than the model's {len(captioner.vocab)} words"):
        captioner.caption_images([photo], beam_size=100_000)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        captioner.caption_images([photo], max_len=0)
    assert captioner.caption_images([photo], max_len=None)[0].words  # None: the default, 30
    with pytest.raises(ImageReadError, match="a PIL image of 0 x 0 pixels: nothing to caption"):
        captioner.caption_images([Image.new("RGB", (0, 0))])


def test_the_translator_refuses_what_the_command_refuses():
    translator = Translator.load("bahdanau")
    with pytest.raises(TypeError, match=r"translate takes a list of sentences: give \['Hallo'\]"):
        translator.translate("Hallo")  # was five translations, one a letter
    for kwargs, says in (({"beam_size": 0}, "beam_size must be at least 1"),  # was a greedy search, unsaid
                         ({"beam_size": 10**6}, "is more than the model's"), ({"max_len": 0}, "max_len must be"),
                         ({"length_penalty": -1}, "length_penalty must be")):  # fmt: skip
        with pytest.raises(ValueError, match=says):
            translator.translate(["Ein Hund."], **kwargs)
    with pytest.raises(TypeError, match="read takes one translation"):
        translator.read(["Ein Hund."], ["A dog."])


def test_a_folder_or_an_unavailable_device_is_named(tmp_path):
    with pytest.raises(ModelFileError, match="a folder, not a model file"):
        Captioner.load(tmp_path)
    with pytest.raises(ModelFileError, match="a folder, not a model file"):
        Translator.load(tmp_path)
    with pytest.raises(ValueError, match="cannot load onto 'meta-device'"):  # a device torch cannot map to
        Captioner.load("shapes", map_location="meta-device")
