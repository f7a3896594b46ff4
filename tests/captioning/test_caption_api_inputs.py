"""The captioner's lower-level calls (``generate``, ``caption_features``, ``read_features``, ``read_texts``,
``with_probs``, ``decoding``) and ``draw_overlay`` refuse bad input in one line that names it, as ``caption_images``
does: a beam wider than the vocabulary (one of 10**6 grew to 24 GB), a negative max_len or length penalty (torch's
"stack expects a non-empty TensorList", or taken as given), one string for a list of captions (read a character at a
time, each a caption), an array or a list where a tensor or a text is due (an AttributeError from the tokenizer), an
unknown decoding option (handed back in the dict), and for ``draw_overlay`` a missing crop box, a caption given as its
text (its characters counted as words) and a file name whose suffix is no format it writes (PNG bytes, silently)."""

import re

import numpy as np
import pytest
from PIL import Image

from captioning.model.bundled import DEMO_PHOTOS
from captioning.model.captioner import Captioner
from captioning.views.overlay import draw_overlay, draw_word_panels

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def shapes():
    """The bundled shapes model (19 words) and two demo photos' region features."""
    captioner = Captioner.load("shapes")
    return captioner, captioner.encode_photos(list(DEMO_PHOTOS[:2]))[1]


def test_the_lower_levels_refuse_the_beam_caption_images_refuses(shapes):
    captioner, features = shapes
    wide = len(captioner.vocab) + 1
    with pytest.raises(ValueError) as high:
        captioner.caption_images([DEMO_PHOTOS[0]], beam_size=wide)
    for call in (captioner.caption_features, captioner.generate):
        with pytest.raises(ValueError) as low:
            call(features[:1], beam_size=wide)
        assert str(low.value) == str(high.value)  # one check, one wording
        assert f"beam_size {wide} is more than the model's {len(captioner.vocab)} words" in str(low.value)
    assert captioner.caption_features(features[:1], beam_size=len(captioner.vocab))[0].words  # the widest useful


def test_a_negative_max_len_or_length_penalty_is_refused_below_caption_images(shapes):
    captioner, features = shapes
    for call in (captioner.caption_features, captioner.generate):
        with pytest.raises(ValueError, match=r"^max_len must be at least 0, got -5$"):  # was torch.stack's error
            call(features, max_len=-5)
        with pytest.raises(ValueError, match=r"^length_penalty must be a finite number, 0 or more, got -1$"):
            call(features, length_penalty=-1)
    assert [c.words for c in captioner.caption_features(features, max_len=0)] == [[], []]  # 0: as before, no words


def test_captions_to_read_are_a_list_of_texts_and_one_caption_a_text(shapes):
    captioner, features = shapes
    with pytest.raises(TypeError, match=re.escape("read_texts takes a list of captions (strings): give ['dog']")):
        captioner.read_texts(features[:1], "dog")  # was three captions: "d", "o", "g"
    with pytest.raises(TypeError, match="^read_texts: caption 1 must be a text, got NoneType$"):
        captioner.read_texts(features[:1], ["a red circle", None])
    for bad, got in ((["a red circle"], "list: read_texts"), (None, "NoneType$")):
        with pytest.raises(TypeError, match=rf"^read_features takes one caption's text \(a str\), got {got}"):
            captioner.read_features(features, bad)  # was AttributeError: no attribute 'translate'
    assert len(captioner.read_texts(features, ["a red circle", "a blue square"])) == 2


def test_with_probs_names_features_and_captions_of_another_kind(shapes):
    captioner, features = shapes
    own = captioner.caption_features(features)
    with pytest.raises(TypeError, match=re.escape("region features: a tensor (B, L, D), got ndarray")):
        captioner.with_probs(features.numpy(), own)  # was "'int' object is not callable"
    with pytest.raises(TypeError, match=r"^with_probs: caption 0 must be a Caption \(what caption_features returns"):
        captioner.with_probs(features, [" ".join(c.words) for c in own])
    assert all(c.probs for c in captioner.with_probs(features, own))


def test_an_unknown_decoding_option_is_named_with_the_known_ones(shapes):
    captioner, _ = shapes
    with pytest.raises(TypeError, match="^decoding: unknown option\\(s\\) beam, bogus: the options are beam_size, "
                                         "length_penalty, no_repeat_ngram$"):  # fmt: skip
        captioner.decoding(bogus=1, beam=2)  # was returned in the dict
    assert captioner.decoding(beam_size=2, length_penalty=None)["beam_size"] == 2


def test_draw_overlay_names_a_missing_crop_box_a_caption_as_text_and_a_suffix_it_does_not_write(tmp_path):
    image, alphas = Image.new("RGB", (8, 6), "gray"), np.full((2, 4), 0.25)
    says = r"^crop_box must be the part of the image the model saw.*captioner\.preprocess\.crop_box\(\*image\.size\)"
    with pytest.raises(TypeError, match=says + ".*got NoneType$"):
        draw_overlay(image, ["a", "dog"], alphas, 2, None, tmp_path / "x.png")  # was "'NoneType' ... not iterable"
    with pytest.raises(TypeError, match=r"^words must be the caption's words, a list of str .*got the text 'a dog'"):
        draw_overlay(image, "a dog", alphas, 2, (0, 0, 8, 6), tmp_path / "x.png")  # was "does not match 5 words"
    for name, got in (("x.gif", "'.gif'"), ("x", "no suffix")):
        with pytest.raises(ValueError, match=rf"^draw_overlay: path must end in one of \.png, \.jpg, \.jpeg, \.webp "
                                             rf"\(the formats an overlay is written in\), got {got}$"):  # fmt: skip
            draw_overlay(image, ["a", "dog"], alphas, 2, (0, 0, 8, 6), tmp_path / name)  # was PNG bytes in x.gif
        assert not (tmp_path / name).exists()
    with pytest.raises(ValueError, match=r"^draw_word_panels: suffix must end in one of \.png.*got '\.bmp'$"):
        draw_word_panels(image, ["a", "dog"], alphas, 2, (0, 0, 8, 6), tmp_path / "words", "x", suffix=".bmp")
    written = draw_overlay(image, ["a", "dog"], alphas, 2, (0, 0, 8, 6), tmp_path / "x.JPG")
    assert written.read_bytes()[:2] == b"\xff\xd8"  # a suffix it writes, in any case: that format


def test_a_file_object_read_before_is_read_from_its_start_and_a_closed_one_named(shapes, tmp_path):
    """A BytesIO captioned a second time (or given twice in one list) was "photo 0 (its bytes): not an image file" of
    a valid photo, read from its end; a closed file was "read of closed file", no photo named."""
    import io

    captioner, _ = shapes
    photo = io.BytesIO(DEMO_PHOTOS[1].read_bytes())
    first = captioner.caption_images([photo])[0].words
    assert [c.words for c in captioner.caption_images([photo, photo])] == [first, first]
    with open(DEMO_PHOTOS[1], "rb") as f:
        assert captioner.caption_images([f])[0].words == first
    with pytest.raises(TypeError, match=r"^caption_images: photo 0: a closed file: give an open file"):
        captioner.caption_images([f])
    # a photo at an offset of its stream (a container's): read from there each time, the stream left there (review:
    # the second call read from byte 0)
    inside = io.BytesIO(b"x" * 100 + DEMO_PHOTOS[1].read_bytes())
    inside.seek(100)
    assert [c.words for c in captioner.caption_images([inside, inside])] == [first, first]
    assert captioner.caption_images([inside])[0].words == first and inside.tell() == 100


def test_encode_photos_and_encode_name_what_they_take(shapes):
    """A path given alone was read a character a photo ("/: is a directory"); none was torch.stack's "expects a
    non-empty TensorList"; a numpy array "has no attribute 'to'"."""
    import torch

    captioner, _ = shapes
    with pytest.raises(TypeError, match=r"^encode_photos takes a list of photos .*: give \["):
        captioner.encode_photos(str(DEMO_PHOTOS[0]))
    with pytest.raises(ValueError, match="^encode_photos: no photos given"):
        captioner.encode_photos([])
    for images, got in ((np.zeros((1, 3, 8, 8)), "ndarray"), (torch.zeros(3, 8, 8), "a 3-dimensional tensor")):
        with pytest.raises(TypeError, match=f"^encode takes preprocessed images as one .*, got {got}; photos"):
            captioner.encode(images)


def test_an_unknown_search_option_is_named_by_the_call_given_it(shapes):
    """It was "search() got an unexpected keyword argument 'bogus'", naming a function nobody called."""
    captioner, features = shapes
    for call in (captioner.generate, captioner.caption_features):
        with pytest.raises(
            TypeError, match=f"^{call.__name__}: unknown option\\(s\\) bogus: the options are beam_size"
        ):
            call(features[:1], bogus=1)
    assert captioner.caption_features(features[:1], no_repeat_ngram=2)[0].words  # a known one: searched as before
    (cap,) = captioner.caption_features(features[:1])  # no probabilities read: [], but a bad threshold is still one
    assert cap.unsure() == []
    with pytest.raises(ValueError, match="below must be a probability"):
        cap.unsure(below=5)
