"""Results that draw themselves in Jupyter: ``Caption`` / ``Captions`` and ``Translation`` / ``Translations`` give a
self-contained HTML view (``_repr_html_``: the --html reports' page inside a frame, a still picture for viewers
without frames) and a PNG (``_repr_png_``). Checked as HTML (nothing fetched, text escaped, the same words and
attention the objects hold) and in a real browser (the frame builds the view and hovering a word redraws it)."""

from __future__ import annotations

import dataclasses
import html
import io
import json
import os
import re

import pytest
import torch
from helpers.browser import MISSING, find_chromium
from helpers.multi30k import DE, EN
from helpers.tiny_translator import tiny_subword_model_file
from PIL import Image

from captioning.model.bundled import DEMO_PHOTOS
from captioning.model.captioner import Caption, Captioner, Captions
from text_attn.core.html_page import dequantise
from text_attn.translation.translator import Translation, Translations, Translator


@pytest.fixture(scope="module")
def bundled() -> Captioner:
    return Captioner.load()  # ~0.5 s a load: once for the module


@pytest.fixture(scope="module")
def captions(bundled) -> Captions:
    return bundled.caption_images(DEMO_PHOTOS[:2], beam_size=1)


@pytest.fixture(scope="module")
def translations(tmp_path_factory) -> Translations:
    translator = Translator.load(tiny_subword_model_file(tmp_path_factory.mktemp("m")))
    return translator.translate([DE[0], EN[1]], beam_size=1, max_len=5)


def _page(fragment: str) -> str:
    """The report page inside the frame (its srcdoc, unescaped)."""
    return html.unescape(re.search(r'srcdoc="([^"]*)"', fragment).group(1))


def _data(page: str) -> list[dict]:
    return [json.loads(m) for m in re.findall(r'<script type="application/json" class="data">(.*?)</script>', page)]


def _alt(fragment: str) -> str:
    """The still picture's text alternative."""
    return html.unescape(re.search(r'<img id="attn-[^"]*" src="[^"]*" alt="([^"]*)"', fragment).group(1))


def _self_contained(fragment: str) -> None:
    """Nothing is fetched: no URL but data: URIs anywhere, and the page forbids every fetch."""
    page = _page(fragment)
    assert "default-src 'none'" in page
    for text in (fragment, page):
        assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?!data:)[a-z]+:", text, re.I)
        assert "http://" not in text and "https://" not in text


def test_a_caption_shows_its_photo_words_and_attention_self_contained(captions, bundled):
    cap = captions[0]
    assert isinstance(captions, Captions) and cap.photo is not None and cap.name == DEMO_PHOTOS[0].name
    fragment = cap._repr_html_()
    _self_contained(fragment)
    assert fragment.startswith("<div><img id=") and 'src="data:image/jpeg;base64,' in fragment  # the still
    # its text alternative says what it shows (it was "attention (static picture)")
    assert _alt(fragment) == f"photo: {' '.join(cap.words)} (where the model looked for each word)"
    page = _page(fragment)
    (data,) = _data(page)
    g = bundled.grid
    assert data["g"] == g and len(cap.words) == len(data["peak"])
    assert dequantise(data["a"]).size == len(cap.words) * g * g  # one map per word
    assert [round(float(a.max()), 4) for a in cap.alphas] == data["peak"]  # the caption's own attention
    assert all(f">{w}</span>" in page for w in cap.words)
    png = cap._repr_png_()
    with Image.open(io.BytesIO(png)) as im:
        assert im.format == "PNG" and im.width > im.height > 100
    # what a notebook stores as text: short, no tensor, no photo object with its memory address
    assert repr(cap) == f"Caption({' '.join(cap.words)!r}, score={cap.score:.4f}, unfamiliar={cap.unfamiliar})"
    assert "0x" not in repr(captions)
    # a collection: one page with a section per caption
    assert len(_data(_page(captions._repr_html_()))) == len(captions) == 2


def test_text_in_the_view_is_escaped_and_a_caption_without_its_photo_has_no_view(captions):
    cap = captions[0]._replace(words=["<script>alert(1)</script>", "&amp"], name="a<b>.png", note="it's <odd>",
                               unfamiliar=True, alphas=captions[0].alphas[:2])  # fmt: skip
    page = _page(cap._repr_html_())
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a&lt;b&gt;.png" in page and '<p class="note">it&#x27;s &lt;odd&gt;</p>' in page
    bare = Caption(["a"], torch.ones(1, 4) / 4, -1.0, False)  # made by caption_features: no photo
    assert bare._repr_html_() is None and bare._repr_png_() is None
    # a slice, and two lists joined, stay one page (a joined one was a plain list: no view)
    assert type(captions[:1]) is type(captions + captions) is Captions and len(captions + captions) == 4
    assert type(captions + ["a text"]) is list  # another kind of item: no page to draw


def test_n_best_results_list_the_beams_others_in_their_view(bundled, translations):
    """caption_images(n_best=N) and translate(n_best=N): the notebook's view lists the beam's other outputs under the
    best, as caption --n-best --html and translate --n-best --html do."""
    (cap,) = bundled.caption_images(DEMO_PHOTOS[:1], beam_size=3, n_best=3)
    page = _page(cap._repr_html_())
    listed = [html.unescape(t) for t in re.findall(r'<li dir="auto">(.*?) <span class="hint">', page)]
    assert listed == [" ".join(w) for w, _, _ in cap.nbest[1:]] and "the beam also kept (2)" in page
    first = dataclasses.replace(
        translations[0], nbest=[(translations[0].text, -0.1, False), ("ein anderer", -0.3, True)]
    )
    page = _page(first._repr_html_())
    assert re.findall(r'<li dir="auto">(.*?) <span class="hint">', page) == ["ein anderer"]


def test_a_translation_shows_its_words_and_alignment_with_the_note(translations):
    assert isinstance(translations, Translations)
    first, english = translations
    assert first.note is None and english.unlike_source is True
    assert repr(first) == f"Translation({first.text!r}, score={first.score:.4f}, unlike_source=False)"
    assert english.note.startswith("this sentence looks unlike the German text the model learned from")
    fragment = translations._repr_html_()
    _self_contained(fragment)
    page = _page(fragment)
    sections = _data(page)
    assert len(sections) == 2 and sections[0]["T"] == len(first.tokens) and sections[0]["S"] == len(first.source) + 1
    weights = dequantise(sections[0]["a"], (sections[0]["T"], sections[0]["S"]))
    assert abs(weights - first.attention.float().numpy()).max() <= 1 / 510 + 1e-9  # its own attention, quantised
    assert page.count('<p class="note">') == 1 and html.escape(english.note) in page
    assert _alt(fragment) == f"alignment grid of the translation: {first.text}"
    with Image.open(io.BytesIO(first._repr_png_())) as im:
        assert im.format == "PNG"
    odd = _page(Translation(["<b>"], ["</script>"], "x", torch.ones(1, 2) / 2, [])._repr_html_())
    assert "&lt;b&gt;" in odd and "&lt;/script&gt;" in odd and "<b>" not in odd
    assert Translation(["a"], [], "", None, [])._repr_png_() is None
    # words the training text never has: said under the translation, as translate --html says it
    guessed = _page(Translations([dataclasses.replace(first, unseen_words=["Eisfischerhütte"])])._repr_html_())
    said = "not in the text the model learned from, translated from its pieces (a guess): Eisfischerhütte"
    assert f'<p class="note">{said}</p>' in guessed


@pytest.fixture(scope="module")
def browser_page():
    if find_chromium() is None:  # under CI (.ci/run installs chromium) a missing browser fails, never skips
        pytest.fail(MISSING) if os.environ.get("CI") else pytest.skip(MISSING)
    from helpers.browser import page

    with page() as pg:
        yield pg


@pytest.mark.long
def test_in_a_browser_the_frame_builds_the_view_and_a_hovered_word_redraws_it(browser_page, captions, translations,
                                                                             tmp_path_factory):  # fmt: skip
    out = tmp_path_factory.mktemp("nb") / "notebook.html"
    out.write_text(f"<html><body>{captions[0]._repr_html_()}{translations._repr_html_()}</body></html>", "utf-8")
    pg = browser_page
    pg.goto(out.as_uri())
    pg.wait_for_selector("img[id^=attn-]", state="detached")  # the stills gave way
    cap_frame, text_frame = (f.content_frame() for f in pg.query_selector_all("iframe"))
    cap_frame.wait_for_selector("section.item[data-shown='-1']", state="attached")
    before = cap_frame.evaluate("document.querySelector('canvas').toDataURL()")
    cap_frame.hover("section.item .w >> nth=0")
    cap_frame.wait_for_selector("section.item[data-shown='0']", state="attached")
    assert cap_frame.evaluate("document.querySelector('canvas').toDataURL()") != before
    text_frame.wait_for_selector("table.grid")
    assert text_frame.evaluate("document.querySelectorAll('table.grid').length") >= 1
    frame_height = pg.evaluate("document.querySelector('iframe').getBoundingClientRect().height")
    assert frame_height > 300  # grown to the page it holds
    assert pg.errors == []


def test_a_translations_still_is_one_jpeg_rendered_once(translations, monkeypatch):
    from matplotlib.figure import Figure

    from text_attn.translation.display import translation_png

    formats = []
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: formats.append(k.get("format")) or real(self, *a, **k))
    still, png = translation_png(translations[0], jpeg=True), translation_png(translations[0])
    assert formats == ["jpeg", "png"]  # the JPEG is drawn as a JPEG, not a PNG decoded and encoded again
    with Image.open(io.BytesIO(still)) as a, Image.open(io.BytesIO(png)) as b:
        assert a.format == "JPEG" and b.format == "PNG" and a.size == b.size
