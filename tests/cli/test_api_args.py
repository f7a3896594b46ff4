"""What a Python caller gives Captioner and Translator is checked as the commands check their options
(text_attn.core.api_args): a bare string is refused (it was read one character at a time), decoding values out of
range are refused by name (a beam wider than the vocabulary filled the memory; beam 0 searched greedily unsaid), a
folder or a device that cannot be had is named, and an image of no pixels is refused before it is captioned."""

from __future__ import annotations

import re

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
    import numpy as np  # numpy's numbers are numbers (np.int64(3) was "beam_size must be an integer, got 3")

    check_decoding(beam_size=np.int64(3), length_penalty=np.float32(1.0), max_len=np.int32(5), words=19)
    with pytest.raises(ValueError, match="beam_size must be at least 1"):
        check_decoding(beam_size=np.int64(0))


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


def test_explain_checks_its_decoding_as_caption_images_does():
    """explain passed a mistyped beam of 100000 to the search (9.5 GB in 45 s), max_len 0 to a torch error, a
    negative length penalty silently, and refused hard_inference, which caption_images takes."""
    shapes = Captioner.load("shapes")
    photo = DEMO_PHOTOS[0]
    for kwargs, says in (({"beam_size": 100000}, "beam_size 100000 is more than the model's"),
                         ({"max_len": 0}, "max_len must be at least 1"),
                         ({"length_penalty": -5.0}, "length_penalty must be a finite number, 0 or more")):  # fmt: skip
        with pytest.raises(ValueError, match=says):
            shapes.explain(photo, **kwargs)
    found = shapes.explain(photo, hard_inference="expect")  # a soft model: the expected context anyway
    assert found.evidence.shape == found.attention.shape


def test_photos_of_a_type_no_method_reads_are_named_and_a_generator_is_read_once():
    import numpy as np

    shapes = Captioner.load("shapes")
    photo = DEMO_PHOTOS[0]
    with pytest.raises(TypeError) as exc:
        shapes.caption_images([photo, np.asarray(Image.open(photo))])
    said = "caption_images: photo 1: expected a PIL image, a file path or a file's bytes, got ndarray; an H x W x 3"
    assert str(exc.value).startswith(f"{said} uint8 RGB array: PIL.Image.fromarray(array)")
    with pytest.raises(TypeError) as exc:  # not an array: no word of arrays
        shapes.caption_images([3])
    assert str(exc.value) == "caption_images: photo 0: expected a PIL image, a file path or a file's bytes, got int"
    for bad in (None, Image.open(photo)):
        with pytest.raises(TypeError, match="caption_images takes a list of photos"):
            shapes.caption_images(bad)
    with pytest.raises(TypeError, match="read_caption: the caption to read must be a text, got NoneType"):
        shapes.read_caption([photo], None)
    by_path = shapes.caption_images([photo])[0]
    (by_bytes,) = shapes.caption_images([photo.read_bytes()])  # bytes: captioned, then a crash naming the photo
    assert by_bytes.words == by_path.words and by_bytes.name is None
    assert [c.words for c in shapes.caption_images(p for p in [photo, photo])] == [by_path.words] * 2
    features = shapes.encode_photos([photo, photo])[1]
    with pytest.raises(ValueError, match=r"one photo's region features \(1, L, D\), got \(2, "):
        shapes.evidence(features, ["a"])
    with pytest.raises(ValueError, match="the caption's words as a list, got the text 'a dog'"):
        shapes.evidence(features[:1], "a dog")
    empty = shapes.evidence(features[:1], iter([]))  # an empty caption (the end chosen first): no rows, no crash
    assert empty.evidence.shape == (0, features.size(1)) and empty.agreement == []


def test_open_files_are_read_and_what_cannot_be_a_photo_is_named(tmp_path):
    import io

    import torch

    shapes = Captioner.load("shapes")
    photo = DEMO_PHOTOS[0]
    by_path = shapes.caption_images([photo])[0].words
    with open(photo, "rb") as f:  # a file opened in binary, as PIL.Image.open takes one: read, not iterated by line
        assert [c.words for c in shapes.caption_images([f, io.BytesIO(photo.read_bytes())])] == [by_path] * 2
    assert shapes.explain(io.BytesIO(photo.read_bytes())).attention.shape[0] == len(by_path)
    with open(photo, "rb") as f, pytest.raises(TypeError, match=r"takes a list of photos .*: give \[the file\]"):
        shapes.caption_images(f)  # one file for a list: its lines were taken for photos ("Truncated File Read")
    with open(photo) as f, pytest.raises(TypeError, match=r"photo 0: a file opened as text; .*open\(path, 'rb'\)"):
        shapes.caption_images([f])  # was a UnicodeDecodeError
    with pytest.raises(TypeError, match=r"photo 0: .* got Tensor; a \(3, H, W\) tensor .*to_pil_image\(tensor\)"):
        shapes.caption_images([torch.rand(3, 8, 8)])
    with pytest.raises(TypeError, match="takes a list of photos .*, got int$"):
        shapes.caption_images(5)  # was "'int' object is not iterable"
    # a list's photo that cannot be read is named by its number where it has no file name ("upload" named none)
    photos = [photo.read_bytes()] * 17 + [b"not a photo"]  # past the first batch of 16: numbered in the whole list
    with pytest.raises(ImageReadError, match=r"^photo 17 \(its bytes\): not an image file in a photo format"):
        shapes.caption_images(photos)
    with pytest.raises(ImageReadError, match=r"^photo 1 \(a PIL image\): a PIL image of 0 x 5 pixels"):
        shapes.read_caption([photo, Image.new("RGB", (0, 5))], "a red square")
    with pytest.raises(ImageReadError, match=f"^{tmp_path / 'none.jpg'}: no such file"):
        shapes.caption_images([photo, tmp_path / "none.jpg"])  # a file keeps its name


def test_translate_options_and_sentences_are_checked_before_the_search():
    from text_attn.core.decoding import Sampling

    translator = Translator.load()
    s = ["Ein Mann fährt Fahrrad."]
    for kwargs, raised, says in (({"temperature": 0.7}, TypeError, "unknown option\\(s\\) temperature"),
                                 ({"sampling": True}, TypeError, "sampling must be a text_attn.core.decoding.Sampling"),
                                 ({"n_best": 2.5}, ValueError, "n_best must be an integer, at least 1, got 2.5"),
                                 ({"n_best": True}, ValueError, "n_best must be an integer")):  # fmt: skip
        with pytest.raises(raised, match=says):
            translator.translate(s, **kwargs)
    for bad, says in ((None, "translate takes a list of sentences, got None"),
                      (5, "translate takes a list of sentences, got int"),  # was "'int' object is not iterable"
                      ([None], "translate: sentence 0 must be a text, got NoneType")):  # fmt: skip
        with pytest.raises(TypeError, match=says):
            translator.translate(bad)
    for split in (True, False):  # an empty one of many is named by its number, split into sentences or not
        with pytest.raises(ValueError, match="^empty input: sentence 1, ' '$"):
            translator.translate([s[0], " "], split=split)
    # sampling without a beam: one drawn translation (the recorded beam 8 was refused beside it), as --sample does
    assert translator.translate(s, sampling=Sampling(seed=1))[0].text
    assert [t.text for t in translator.translate(x for x in s + s)] == [translator.translate(s)[0].text] * 2


def test_a_lone_surrogate_is_named_where_the_text_is_given():
    """A byte that was not UTF-8, kept as a lone surrogate (os.fsdecode, argv): the translator's subword codec raised
    a pybind11 cast error 7-13 frames down, the captioner dropped the character unsaid."""
    import os

    bad = os.fsdecode(b"Ein Hund l\xe4uft.")  # 'Ein Hund l\udce4uft.'
    said = r"is not valid text: a lone surrogate '\\udce4' at character 11 \(a byte that was not UTF-8"
    translator = Translator.load()
    for call, where in ((lambda: translator.translate(["Ein Hund.", bad]), "translate: sentence 1"),
                        (lambda: translator.tokenize(bad), "tokenize: the text"),
                        (lambda: translator.read(["Ein Hund."], bad), "read: the translation"),
                        (lambda: translator.unseen_words(bad), "unseen_words: the text")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{where} {said}"):
            call()
    with pytest.raises(ValueError, match=r"\(half of a UTF-16 pair, an emoji or other character cut in two"):
        translator.translate(["Ein Hund \ud83d."])  # not a byte kept by surrogateescape: JSON's "\ud83d", cut short
    captioner = Captioner.load()
    photo = Image.new("RGB", (64, 64))
    features = None  # read_texts checks its texts before it reads the features
    for call, where in ((lambda: captioner.read_texts(features, [bad]), "read_texts: caption 0"),
                        (lambda: captioner.read_caption([photo], bad), "read_caption: the caption")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{where} {said}"):
            call()


def test_a_hard_attention_mode_given_in_two_threads_leaves_the_models_own():
    """Captioner._hard_inference set and restored the shared config without a lock: two threads' calls restored each
    other's mode, and the model decoded with "expect" for good."""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from captioning.model.decoder import ShowAttendTellDecoder
    from captioning.model.network import CaptionModel

    base = Captioner.load("shapes")
    torch.manual_seed(0)
    cfg = dataclasses.replace(base.decoders[0].cfg, attention="hard", hard_inference="argmax")
    hard = Captioner(CaptionModel(base.model.encoder, ShowAttendTellDecoder(cfg)).eval(), base.vocab)
    photos = list(DEMO_PHOTOS[:2])
    alone = [c.words for c in hard.caption_images(photos)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: hard.caption_images(photos, hard_inference="expect"), range(6)))
    assert hard.model.decoder.cfg.hard_inference == "argmax"
    assert [c.words for c in hard.caption_images(photos)] == alone


def test_a_hard_attention_call_without_a_mode_decodes_with_the_model_s_own_beside_one_with_a_mode():
    """Only the calls that took a mode held the lock: caption_features (and generate, read_features, with_probs,
    evidence) in another thread decoded with the other call's "expect" (11 of 60 in the audit of 2026-12-06)."""
    import dataclasses
    import threading

    import torch

    from captioning.model.decoder import ShowAttendTellDecoder
    from captioning.model.network import CaptionModel

    base = Captioner.load("shapes")
    torch.manual_seed(0)
    cfg = dataclasses.replace(base.decoders[0].cfg, attention="hard", hard_inference="argmax")
    hard = Captioner(CaptionModel(base.model.encoder, ShowAttendTellDecoder(cfg)).eval(), base.vocab)
    photos = list(DEMO_PHOTOS[:2])
    _, features = hard.encode_photos(photos)
    own = hard.caption_features(features)
    expect = [c.words for c in hard.caption_images(photos, hard_inference="expect")]
    own_alphas = torch.stack([c.alphas[0] for c in own])
    assert [c.words for c in own] != expect or not torch.equal(  # the two modes decode apart (else nothing is tested)
        own_alphas, torch.stack([c.alphas[0] for c in hard.caption_images(photos, hard_inference="expect")])
    )
    stop, seen = threading.Event(), []

    def other() -> None:
        while not stop.is_set():
            hard.caption_images(photos, hard_inference="expect")

    worker = threading.Thread(target=other)
    worker.start()
    try:
        for _ in range(12):
            got = hard.caption_features(features)
            seen.append([c.words for c in got] == [c.words for c in own] and torch.equal(
                torch.stack([c.alphas[0] for c in got]), own_alphas))  # fmt: skip
    finally:
        stop.set()
        worker.join()
    assert all(seen), f"{seen.count(False)} of {len(seen)} decoded with the other thread's mode"


def test_region_features_of_another_form_are_named_in_one_line():
    captioner = Captioner.load("shapes")
    _, features = captioner.encode_photos(list(DEMO_PHOTOS[:1]))
    dim = features.size(-1)
    for bad, raised, says in [
        (features.numpy(), TypeError, "region features: a tensor (B, L, D), got ndarray"),
        (features[0], ValueError, f"got {tuple(features[0].shape)}; one photo's: features[None]"),
        (features[..., :3], ValueError, f"(B, L, {dim}) for this model"),
        (features.long(), TypeError, "region features: floating point"),
    ]:
        for call in (lambda f: captioner.caption_features(f), lambda f: captioner.read_features(f, "a red circle")):
            with pytest.raises(raised, match=re.escape(says)):
                call(bad)
    assert captioner.caption_features(features.double())[0].words == captioner.caption_features(features)[0].words


def test_a_pil_image_that_cannot_be_read_is_named_by_its_number(tmp_path):
    whole = open(DEMO_PHOTOS[0], "rb").read()
    (tmp_path / "cut.png").write_bytes(whole[: len(whole) // 3])
    closed = Image.open(DEMO_PHOTOS[0])
    closed.close()
    captioner = Captioner.load("shapes")
    for image, says in [(closed, "Operation on closed image"), (Image.open(tmp_path / "cut.png"), "truncated")]:
        with pytest.raises(ImageReadError, match=r"^photo 1 \(a PIL image\): cannot be read \(.*" + says):
            captioner.caption_images([DEMO_PHOTOS[1], image])
    with pytest.raises(ImageReadError, match=r"^a PIL image: cannot be read"):
        captioner.explain(closed)
    with pytest.raises(ImageReadError, match=r"^explain: the photo \(its bytes\): not an image file"):
        captioner.explain(b"not a photo")
    view = memoryview(whole)  # a buffer's view reads as its bytes
    assert captioner.caption_images([view])[0].words == captioner.caption_images([DEMO_PHOTOS[0]])[0].words


def test_token_methods_refuse_a_string_for_a_sentence():
    """A string's characters were read as tokens and translated ("Phill squats tample.")."""
    translator = Translator.load()
    for call in (lambda t: translator.translate_tokens(t), lambda t: translator.read_each(t, ["A man."]),
                 lambda t: translator.read_texts(t, ["A man."]),
                 lambda t: translator.with_probs(t, translator.translate(["Ein Mann."]))):  # fmt: skip
        with pytest.raises(TypeError, match=r"sentence 0 is str, not a list of tokens: give translator.tokenize"):
            call(["Ein Mann."])
    with pytest.raises(TypeError, match="takes a list of tokenized sentences"):
        translator.translate_tokens("Ein Mann.")
    assert translator.translate_tokens([translator.tokenize("Ein Mann.")])[0].text
    for bad in (None, ["Ein Mann."]):
        with pytest.raises(TypeError, match="explain takes one sentence or one Translation"):
            translator.explain(bad)


def test_the_smaller_public_calls_name_what_they_cannot_read(tmp_path):
    """load_image, draw_overlay, unknown_words, an ensemble's members and a seeded sampling's keys: each a traceback
    from deep inside (pathlib's, PIL's, torch's) before; now one error naming the argument and how to give it."""
    import numpy as np

    from captioning import draw_overlay, load_image
    from text_attn.core.decoding import Sampling
    from text_attn.translation.ensemble import EnsembleTranslator

    with pytest.raises(TypeError, match=r"^load_image: expected a PIL image.*got ndarray; .*PIL.Image.fromarray"):
        load_image(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ImageReadError, match=r"^load_image: the photo \(its bytes\): not an image file"):
        load_image(b"not a photo")  # was named "upload", the server's word
    by_file = load_image(DEMO_PHOTOS[0])
    for same in (DEMO_PHOTOS[0].read_bytes(), DEMO_PHOTOS[0].open("rb")):  # its bytes, an open file: the same pixels
        assert np.array_equal(np.asarray(load_image(same)), np.asarray(by_file))
    out = tmp_path / "o.png"
    with pytest.raises(TypeError, match=r"^draw_overlay: image must be a PIL image \(load_image\(path\).*PosixPath"):
        draw_overlay(DEMO_PHOTOS[0], ["a"], np.full((1, 4), 0.25), 2, (0, 0, 1, 1), out)
    with pytest.raises(TypeError, match="^draw_overlay: path must be a file path, got NoneType"):
        draw_overlay(by_file, ["a"], np.full((1, 4), 0.25), 2, (0, 0, 1, 1), None)
    assert not out.exists()
    captioner = Captioner.load("shapes")
    with pytest.raises(TypeError, match=r"^unknown_words takes a caption's text \(a str\), got NoneType"):
        captioner.unknown_words(None)
    assert captioner.unknown_words("a red zzqx circle zzqx") == ["zzqx"]

    translator = Translator.load()
    with pytest.raises(TypeError, match=r"members are translators \(Translator.load\(name or path\) each\), got str"):
        EnsembleTranslator(["transformer", "bahdanau"])  # was "'str' object has no attribute 'codec'"
    with pytest.raises(TypeError, match="an ensemble takes a list of translators, got Translator"):
        EnsembleTranslator(translator)
    assert len(EnsembleTranslator(m for m in (translator, translator)).members) == 2  # "not subscriptable"
    s, draw = ["Ein Mann fährt Fahrrad.", "Zwei Hunde."], Sampling(seed=3, temperature=1.5)
    for keys, raised, says in ((["a", "b"], TypeError, "keys: one integer per line, got 'a'"),  # torch's "'str'"
                               ([1.5, 2], TypeError, "keys: one integer per line, got 1.5"),  # was read as 1
                               ([1], ValueError, r"keys: one integer per line \(2\), got 1"),
                               (7, TypeError, r"keys: one integer per line \(2\), got int")):  # fmt: skip
        with pytest.raises(raised, match=says):
            translator.translate(s, sampling=draw, keys=keys)
    with pytest.raises(TypeError, match="keys: one integer per sentence, got 'a'"):
        translator.translate_tokens([translator.tokenize(x) for x in s], sampling=draw, keys=["a", "b"])
    as_numbers = [t.text for t in translator.translate(s, sampling=draw, keys=np.array([11, 4]))]
    assert as_numbers == [t.text for t in translator.translate(s, sampling=draw, keys=[11, 4])]


def test_the_training_functions_take_a_list_of_strings():
    """text_train_cli / caption_train_cli from Python: one string was read a character an argument ("unknown
    subcommand 'f'"), a number in the list was "'int' object has no attribute 'startswith'"."""
    from captioning import caption_train_cli
    from text_attn import text_train_cli

    for function, name in ((text_train_cli, "text_train_cli"), (caption_train_cli, "caption_train_cli")):
        split = f"{name} takes a list of arguments, as the command line splits them:"
        for args, says in (("fit --config reorder_bahdanau", f"{split} give ['fit', '--config', 'reorder_bahdanau']"),
                           ('fit "x', f"{split} one string an argument"),
                           (5, f"{name} takes a list of arguments (strings), got int"),
                           (["fit", "--trainer.max_steps", 2], f"{name}: argument 2 must be a string, as on the "
                                                               "command line: give '2', got int 2")):  # fmt: skip
            with pytest.raises(TypeError, match=f"^{re.escape(says)}$"):
                function(args)


def test_on_off_options_and_vocabulary_sizes_are_checked():
    """probs="yes" was taken as true ("" as false, "no" as true); a network config of vocabulary size 0 was built and
    failed in torch's embedding lookup (IndexError)."""
    from text_attn.translation.seq2seq import Seq2SeqConfig
    from text_attn.translation.transformer import TransformerConfig

    translator, captioner = Translator.load(), Captioner.load()
    for call in (lambda: translator.translate(["Ein Hund."], probs="yes"),
                 lambda: translator.translate(["Ein Hund."], split=0),
                 lambda: captioner.caption_images([Image.new("RGB", (32, 32))], probs="no")):  # fmt: skip
        with pytest.raises(TypeError, match=r"^(probs|split) must be True or False, got ('yes'|0|'no')$"):
            call()
    with pytest.raises(ValueError, match=r"^src_vocab_size must be at least 4 \(the specials <pad>, <bos>, <eos>, "):
        Seq2SeqConfig(src_vocab_size=0, tgt_vocab_size=9)
    with pytest.raises(TypeError, match=r"^tgt_vocab_size must be an integer \(len\(vocabulary\)\), got 9.0$"):
        TransformerConfig(src_vocab_size=9, tgt_vocab_size=9.0)
    import numpy as np  # numpy's integers are sizes, kept as plain ints (a model file of one was refused on load)

    for config in (Seq2SeqConfig, TransformerConfig):
        sizes = config(src_vocab_size=np.int64(20), tgt_vocab_size=np.int32(12))
        assert (type(sizes.src_vocab_size), type(sizes.tgt_vocab_size)) == (int, int)


@pytest.fixture(scope="module")
def bundled_translator() -> Translator:
    return Translator.load()


def test_a_seeded_sampling_draws_in_python_what_the_command_draws(capsys, tmp_path, bundled_translator):
    """``translate --sample --sample-seed 7`` keys its inputs by their numbers from 1; Python keyed them from 0, so
    the same sentences and seed drew other translations (an audit: 27 of 30)."""
    from text_attn.core.decoding import Sampling
    from text_attn.translation.translate_cli import translate_main

    s = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch im Park."]
    source = tmp_path / "in.de"
    source.write_text("\n".join(s) + "\n", encoding="utf-8")
    args = ["--sample", "--sample-seed", "7", "--temperature", "1.5"]
    import sys

    old = sys.stdin
    try:
        sys.stdin = source.open(encoding="utf-8")
        assert translate_main(args) == 0
    finally:
        sys.stdin.close()
        sys.stdin = old
    printed = capsys.readouterr().out.splitlines()
    drawn = bundled_translator.translate(s, sampling=Sampling(seed=7, temperature=1.5))
    assert [t.text for t in drawn] == printed
    keyed_from_0 = bundled_translator.translate(s, sampling=Sampling(seed=7, temperature=1.5), keys=[0, 1, 2])
    assert [t.text for t in keyed_from_0] != printed


def test_numpy_integers_and_flags_are_taken_and_keys_without_a_seed_refused(bundled_translator):
    import numpy as np

    from text_attn.core.decoding import Sampling

    translator = bundled_translator
    s = ["Ein Mann fährt Fahrrad."]
    assert len(translator.translate(s, n_best=np.int64(2))[0].nbest) == 2  # beam_size took them: n_best refused
    with pytest.raises(ValueError, match=r"keys are a seeded sampling's keys \(sampling=Sampling\(seed=...\)\)"):
        translator.translate(s, keys=[5])  # it was ignored
    with pytest.raises(ValueError, match="keys are a seeded sampling's keys"):
        translator.translate(s, keys=[5], sampling=Sampling())
    with pytest.raises(TypeError, match="keys: one integer per line, got 'a'"):
        translator.translate(s, keys=["a"])
    with pytest.raises(TypeError, match="drop_ended must be True or False, got 'no'"):
        translator.translate(s, drop_ended="no")  # "no" was taken as true
    captioner = Captioner.load()
    (cap,) = captioner.caption_images(DEMO_PHOTOS[:1], beam_size=3, n_best=np.int64(2))
    assert len(cap.nbest) == 2
