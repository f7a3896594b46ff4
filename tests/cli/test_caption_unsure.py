"""``caption --unsure``: each caption word's probability kept by the search (caption_images(probs=True)) or read back
(Captioner.with_probs), against the search's own score, against each other and against reading the same caption
given; the words under the threshold in the records, one closing note and underlined on the page; bad thresholds in
one line."""

from __future__ import annotations

import json
import math
import random
import re
from html import unescape

import pytest
import torch
from helpers.tiny_captioner import tiny_model_file

from captioning.commands.caption import caption_main
from captioning.model.captioner import Caption, Captioner
from captioning.photos.preprocess import prepared
from captioning.training.shapes import make_scene
from captioning.views.caption_page import image_section
from text_attn.core.unsure_options import unsure_note

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def shapes():
    return Captioner.load("shapes")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random-weight model: unsure of most words (the shapes model gives nearly every word p > 0.98)."""
    return tiny_model_file(tmp_path_factory.mktemp("tiny") / "tiny.pt")


@pytest.fixture(scope="module")
def scenes(shapes, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenes")
    paths = []
    for k in range(3):
        path = folder / f"scene{k}.png"
        make_scene(random.Random(k), size=shapes.preprocess.image_size).image.save(path)
        paths.append(str(path))
    return paths


def test_a_greedy_caption_read_back_gives_back_the_search_s_log_probability(shapes, scenes):
    features = shapes.encode(torch.stack([prepared(p, shapes.preprocess) for p in scenes]))
    found = shapes.caption_features(features, beam_size=1, length_penalty=0.0)
    read = shapes.with_probs(features, found)
    for c, r in zip(found, read, strict=True):
        assert r.words == c.words and r.score == c.score and c.probs is None and not r.given
        assert len(r.probs) == len(r.words) > 0 and 0 < r.end_prob <= 1
        end = 0.0 if r.truncated else math.log(r.end_prob)
        assert sum(map(math.log, r.probs)) + end == pytest.approx(c.score, abs=1e-4)  # penalty 0: the sum
        assert r.unsure(1.0) == [(w, p) for w, p in zip(r.words, r.probs, strict=True) if p < 1.0]
    (given,) = shapes.read_features(features[:1], " ".join(read[0].words))  # the same caption, given
    assert given.given and given.probs == pytest.approx(read[0].probs, abs=1e-5)
    assert given.end_prob == pytest.approx(read[0].end_prob, abs=1e-5)
    with pytest.raises(ValueError, match="3 photos for 2"):
        shapes.with_probs(features, found[:2])


@pytest.mark.parametrize("decoding", [dict(beam_size=1, length_penalty=1.0), dict(beam_size=3, no_repeat_ngram=2)])
def test_the_search_keeps_what_reading_the_caption_back_gives(shapes, scenes, decoding):
    features = shapes.encode(torch.stack([prepared(p, shapes.preprocess) for p in scenes]))
    kept = shapes.caption_features(features, probs=True, **decoding)
    read = shapes.with_probs(features, shapes.caption_features(features, **decoding))
    for k, r in zip(kept, read, strict=True):
        assert k.words == r.words and k.score == r.score and not k.truncated
        assert k.probs == pytest.approx(r.probs, abs=1e-5) and k.end_prob == pytest.approx(r.end_prob, abs=1e-5)


def test_a_caption_cut_off_gets_its_end_read_back(tiny, scenes):
    model = Captioner.load(tiny)
    features = model.encode(torch.stack([prepared(p, model.preprocess) for p in scenes]))
    kept = model.caption_features(features, beam_size=2, max_len=2, probs=True)
    assert any(c.truncated for c in kept)  # random weights: the end is seldom the likeliest word
    read = model.with_probs(features, model.caption_features(features, beam_size=2, max_len=2))
    for k, r in zip(kept, read, strict=True):
        assert k.probs == pytest.approx(r.probs, abs=1e-5) and k.end_prob == pytest.approx(r.end_prob, abs=1e-5)


def test_the_fixed_shape_search_keeps_none_and_its_captions_are_read_back(shapes, scenes):
    from text_attn.core.fixed_search import fixed_search

    features = shapes.encode(torch.stack([prepared(p, shapes.preprocess) for p in scenes]))
    v = shapes.vocab
    found = fixed_search(shapes.model, shapes.model.init_state(features), 3, v.bos_id, v.eos_id, 30, 3, 1.0, v.pad_id)
    assert found.log_probs is None  # --cuda-graphs' search: its captured steps keep no probabilities
    fixed = shapes.caption_features(features, probs=True, capture=True)
    kept = shapes.caption_features(features, probs=True)
    for f, k in zip(fixed, kept, strict=True):
        assert f.words == k.words and f.probs == pytest.approx(k.probs, abs=1e-5)
        assert f.end_prob == pytest.approx(k.end_prob, abs=1e-5)


def test_a_caption_written_with_capitals_is_read_back_with_its_vocabulary_s_words(shapes, scenes):
    features = shapes.encode(prepared(scenes[0], shapes.preprocess)[None])
    shapes.casing = {"first": True, "words": ""}  # a model that learned to write its first word with a capital
    try:
        (kept,) = shapes.caption_features(features, probs=True)
        (read,) = shapes.with_probs(features, shapes.caption_features(features))
    finally:
        shapes.casing = None
    assert kept.words[0][0].isupper() and read.words == kept.words
    # "A" is the vocabulary's "a", not <unk> (read as unknown, its probability was near 0)
    assert read.probs == pytest.approx(kept.probs, abs=1e-5) and read.probs[0] > 0.5


def test_an_empty_caption_reads_its_end_alone(shapes, scenes):
    features = shapes.encode(prepared(scenes[0], shapes.preprocess)[None])
    (empty,) = shapes.with_probs(features, [Caption([], torch.zeros(0, features.size(1)), 0.0, False)])
    assert empty.probs == [] and 0 < empty.end_prob <= 1 and empty.unsure() == []


def test_caption_images_reads_back_when_asked(shapes, scenes):
    (plain,) = shapes.caption_images(scenes[:1])
    (read,) = shapes.caption_images(scenes[:1], probs=True)
    assert plain.probs is None and plain.unsure() == [] and read.words == plain.words
    assert len(read.probs) == len(read.words) and not read.given
    html = unescape(read._repr_html_())  # the notebook's view: each word's probability on hover
    assert "own caption)" in html and 'title="p = ' in html


def _run(capsys, *args: str, model: str = "shapes") -> tuple[int, str, str]:
    code = caption_main(["--model", model, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_records_name_the_words_under_the_threshold_and_the_note_says_them(capsys, scenes, tiny, tmp_path):
    page = tmp_path / "page.html"
    code, out, err = _run(capsys, *scenes, "--json", "--unsure", "--html", str(page), model=str(tiny))
    assert code == 0, err
    records = json.loads(out)
    read = Captioner.load(tiny).caption_images(scenes, probs=True)
    marked = 0
    for rec, c in zip(records, read, strict=True):
        assert rec["caption"] == " ".join(c.words) and rec["word_probs"] == pytest.approx(c.probs, rel=1e-5)
        assert [w for w, _ in rec["unsure"]] == [w for w, p in zip(c.words, c.probs, strict=True) if p < 0.2]
        assert rec["end_prob"] == pytest.approx(c.end_prob, rel=1e-5) and "given" not in rec
        marked += len(rec["unsure"])
    assert marked > 0  # a random model: unsure of much
    note = [line for line in err.splitlines() if "unsure" in line]
    assert len(note) == 1 and note[0].startswith("caption: note: ") and "(p < 0.2)" in note[0]
    assert note[0].startswith(f"caption: note: {sum(bool(r['unsure']) for r in records)} caption(s) hold {marked} ")
    assert len(re.findall(r'class="w unsure"', page.read_text())) == marked
    code, out, err = _run(capsys, scenes[0], "--json", model=str(tiny))  # without --unsure: not read back
    assert code == 0 and "unsure" not in json.loads(out)[0] and "word_probs" not in json.loads(out)[0]
    assert "unsure" not in err


@pytest.mark.parametrize("bad", ["0", "1.5", "x"])
def test_a_bad_threshold_is_one_line(capsys, scenes, bad):
    with pytest.raises(SystemExit) as exit_:
        _run(capsys, scenes[0], "--unsure-below", bad)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2 and len(err) == 1 and "--unsure-below" in err[0]


def test_the_note_names_one_photo_the_first_ten_or_counts_alone():
    assert unsure_note({}, 0.2, "caption(s)") is None
    one = {"unsure": 1, "unsure_words": 1, "unsure_first": [("a.jpg", [["wall", 0.11]])]}
    assert unsure_note(one, 0.2, "caption(s)") == "a.jpg: the model was unsure of wall (0.11) (p < 0.2): check it"
    # several processes (--devices) count each their own: the counts alone
    assert unsure_note({"unsure": 3, "unsure_words": 4}, 0.2, "caption(s)") == (
        "3 caption(s) hold 4 word(s) the model was unsure of (p < 0.2), check them: the records' 'unsure' names them"
    )
    near = {"unsure": 1, "unsure_words": 1, "unsure_first": [("b.jpg", [["in", 0.49976]])]}
    assert "in (0.4998) (p < 0.5)" in unsure_note(near, 0.5, "caption(s)")  # not "0.5": two digits round it up


def test_the_page_underlines_the_words_under_the_threshold_and_says_whose_caption_it_is():
    rec = {"image": "a.jpg", "words": ["a", "dog", "on", "a", "wall"], "word_probs": [0.9, 0.5, 0.8, 0.9, 0.11],
           "end_prob": 0.9, "score": -0.4, "grid": None, "caption": "a dog on a wall"}  # fmt: skip
    # no photo: the section stops at its head; with one, the words follow (drawn here by hand as the page draws them)
    from PIL import Image

    rec.update(grid=[2, 2], attention=[[0.25] * 4] * 5, size=[8, 8], crop_box=[0, 0, 8, 8], chosen=None)
    html = image_section(1, rec, Image.new("RGB", (8, 8)), 0.2)
    assert re.findall(r'class="w( unsure)?" data-t="(\d)"', html)[4] == (" unsure", "4")
    assert len(re.findall(r'class="w unsure"', html)) == 1
    assert "the model&#x27;s own caption); underlined, the model was unsure of (p &lt; 0.2): wall (0.11)" in html
    assert "unsure" not in image_section(1, rec, Image.new("RGB", (8, 8)), None).replace("unsure of", "")
    given = image_section(1, {**rec, "given": [{}]}, Image.new("RGB", (8, 8)), None)
    assert "the caption given, read by the model" in given


def test_a_resume_with_another_threshold_is_refused(capsys, scenes, tmp_path):
    """The records of a run with --unsure hold each word's probability: one resumed without it would mix records."""
    out = tmp_path / "r.jsonl"
    code, _, err = _run(capsys, scenes[0], "--jsonl", str(out), "--unsure")
    assert code == 0, err
    with pytest.raises(SystemExit) as exit_:
        _run(capsys, *scenes, "--jsonl", str(out), "--resume")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "made with --unsure (this run: no --unsure)" in err, err  # as typed
    code, _, err = _run(capsys, *scenes, "--jsonl", str(out), "--resume", "--unsure")
    assert code == 0, err
    assert all("unsure" in json.loads(line) for line in out.read_text().splitlines())
