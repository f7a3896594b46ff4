"""The interactive HTML reports (``caption --html``, ``translate --html``): the page code's escaping, one section per
input, no network references, bad paths; then the real pages in a headless Chromium (driven by Playwright,
tests/helpers/browser.py): the scripts run without an error, and real mouse and key events on a word change
what is shown (the canvas pixels for captions; word highlights and the grid for translations). (Quantised attention
round-trips: tests/core/test_html_page.py.)"""

import base64
import io
import json
import os
import random
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.browser import MISSING, Browser, accessible, contrast, find_chromium
from helpers.ctrl_c import ctrl_c_at
from PIL import Image

from captioning.commands.caption import SHAPES_MODEL, caption_main
from captioning.training.shapes import make_scene
from captioning.views.caption_page import image_section, open_caption_page
from text_attn.core.html_page import HtmlPage, dequantise, escape, script_json
from text_attn.core.vocab import Vocabulary
from text_attn.translation.alignment_page import ALIGNMENT_CSS, ALIGNMENT_JS, report_attention, sentence_section
from text_attn.translation.networks import build_network, make_config
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

PHOTO = Path(__file__).parent.parent / "fixtures" / "images" / "coffee.png"
WORDS = "ma pipo deko ro gotu tuko ka bako gake kade".split()
SENTENCES = ["ma pipo deko ro gotu", "ka bako gake kade ma pipo"]
TINY = {
    "transformer": dict(d_model=16, num_heads=2, enc_layers=2, dec_layers=2, ff_dim=32),
    "rnn": dict(embed_dim=16, enc_hidden=16, dec_hidden=32, attn_dim=16),
}
CANVAS_SUM = (
    "(() => {{ const c = document.querySelector('{} canvas'), d = c.getContext('2d')"
    ".getImageData(0, 0, c.width, c.height).data; let s = 0;"
    " for (let i = 0; i < d.length; i += 4) s += d[i] + d[i + 1] + d[i + 2]; return s; }})()"
)


def sections(page: Path) -> list[str]:
    return re.findall(r"<section class=\"item.*?</section>", page.read_text(), flags=re.S)


# --- pages made through the real CLIs -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scenes(tmp_path_factory) -> list[Path]:
    out = []
    for seed in (3, 11):
        path = tmp_path_factory.mktemp("scenes") / f"scene-{seed}.png"
        make_scene(random.Random(seed), size=128).image.save(path)
        out.append(path)
    return out


@pytest.fixture(scope="module")
def caption_page(scenes, tmp_path_factory) -> Path:
    """The bundled shapes model on two shape scenes, a photo and a missing file: four sections."""
    page = tmp_path_factory.mktemp("caption") / "report.html"
    missing = page.parent / "missing.png"
    args = [*map(str, scenes), str(PHOTO), str(missing), "--html", str(page), "--beam-size", "1", "--model", "shapes"]
    code = caption_main(args)
    assert code == 1  # the missing file: reported, the others captioned
    return page


@pytest.fixture(scope="module")
def hard_page(scenes, tmp_path_factory) -> Path:
    """The bundled shapes model's weights as a hard-attention model (the same scorer, under its hard-attention name)."""
    data = torch.load(SHAPES_MODEL, weights_only=True)
    data["decoder"]["attention"] = "hard"
    old, new = "decoder.attention.", "decoder.attention.scorer."
    data["state_dict"] = {new + k[len(old) :] if k.startswith(old) else k: v for k, v in data["state_dict"].items()}
    folder = tmp_path_factory.mktemp("hard")
    torch.save(data, folder / "hard.pt")
    page = folder / "report.html"
    args = [str(scenes[0]), "--model", str(folder / "hard.pt"), "--html", str(page), "--beam-size", "1"]
    assert caption_main(args) == 0
    return page


@pytest.fixture(scope="module")
def evidence_page(scenes, tmp_path_factory) -> tuple[Path, dict]:
    """The bundled shapes model on one scene with --evidence: the page, and the record --jsonl wrote beside it."""
    folder = tmp_path_factory.mktemp("evidence")
    page, record = folder / "report.html", folder / "rec.json"
    args = [str(scenes[0]), "--model", "shapes", "--html", str(page), "--beam-size", "1", "--evidence",
            "--jsonl", str(record)]  # fmt: skip
    assert caption_main(args) == 0
    return page, json.loads(record.read_text().splitlines()[0])


def tiny_translator(arch: str, path: Path) -> Path:
    """An untrained text model that never ends early (end, pad and begin tokens made unlikely): its outputs are
    exactly --max-len words, so every sentence has attention to show."""
    vocab = Vocabulary.build([WORDS])
    torch.manual_seed(0)
    config = make_config(arch, TINY[arch], src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), pad_id=vocab.pad_id)
    net = build_network(arch, config).eval()
    for m in net.modules():
        if isinstance(m, torch.nn.Linear) and m.out_features == len(vocab):  # the output layer
            with torch.no_grad():
                m.bias[[vocab.eos_id, vocab.pad_id, vocab.bos_id]] = -1e4
    Translator(net, vocab, vocab, "word", True).save(path)
    return path


@pytest.fixture(scope="module")
def translate_evidence_page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("translate_evidence")
    model = tiny_translator("rnn", folder / "model.pt")
    page = folder / "report.html"
    assert translate_main(["--model", str(model), "--max-len", "4", "--html", str(page), "--evidence",
                           SENTENCES[0]]) == 0  # fmt: skip
    return page


@pytest.fixture(scope="module")
def translate_page(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("translate")
    model = tiny_translator("transformer", folder / "model.pt")
    page = folder / "report.html"
    assert translate_main(["--model", str(model), "--max-len", "6", "--html", str(page), *SENTENCES]) == 0
    return page


# --- the page code ------------------------------------------------------------------------------------------------
def test_words_are_escaped_in_the_html_and_in_the_embedded_json():
    word = "</script><b>"
    assert escape(word) == "&lt;/script&gt;&lt;b&gt;"
    data = {"w": word + " & \u2028"}
    text = script_json(data)
    assert not set("<>&\u2028") & set(text) and json.loads(text) == data
    record = {"image": "a<b>.png", "words": ["a", word], "attention": np.full((2, 4), 0.25).tolist(), "grid": [2, 2],
              "size": [40, 30], "crop_box": [0, 0, 40, 30], "chosen": None, "error": None}  # fmt: skip
    html = image_section(1, record, Image.new("RGB", (40, 30), "red"))
    assert html.count("</script>") == 1 and "<b>" not in html  # only the data block's own end tag
    assert '<span class="w" data-t="1">&lt;/script&gt;&lt;b&gt;</span>' in html and "a&lt;b&gt;.png" in html


def test_the_models_notes_show_under_the_heading_escaped():
    record = {"image": "x.png", "words": ["a"], "attention": [[0.25] * 4], "grid": [2, 2], "size": [40, 30],
              "crop_box": [0, 0, 40, 30], "chosen": None, "error": None, "out_of_domain": True,
              "note": "this photo looks unlike <the> photos"}  # fmt: skip
    html = image_section(1, record, Image.new("RGB", (40, 30), "red"))
    assert '</h2><p class="note">this photo looks unlike &lt;the&gt; photos</p>' in html
    assert 'class="note"' not in image_section(1, {**record, "out_of_domain": False}, Image.new("RGB", (40, 30)))
    from text_attn.translation.alignment_page import sentence_section
    from text_attn.translation.translator import Translation

    tr = Translation(source=["ein", "hund"], tokens=["a", "dog"], text="a dog", attention=None, unknown=[])
    html = sentence_section(3, tr, None, "this sentence looks unlike <German> text")
    assert '<h2>input 3</h2><p class="note">this sentence looks unlike &lt;German&gt; text</p>' in html
    assert 'class="note"' not in sentence_section(3, tr, None)


def test_the_translate_pages_words_are_the_words_the_pieces_spell():
    """translate --html labels subword pieces as text_attn.core.token_labels does (the grid's headers are these
    spans' text): "▁Bü" "sche" is "Bü" "·sche", the pieces' indices kept; the translation's text under them."""
    import dataclasses
    import re

    from text_attn.translation.translator import Translation

    tr = Translation(source=["▁Die", "▁Bü", "sche"], tokens=["▁The", "▁bush", "es", "."], text="The bushes.",
                     attention=None, unknown=[])  # fmt: skip
    html = sentence_section(1, tr, np.full((1, 1, 4, 4), 0.25))
    spans = re.findall(r'<span class="w (src|tgt)" data-[st]="(\d+)">([^<]*)</span>', html)
    assert spans == [("src", "0", "Die"), ("src", "1", "Bü"), ("src", "2", "·sche"), ("src", "3", "&lt;eos&gt;"),
                     ("tgt", "0", "The"), ("tgt", "1", "bush"), ("tgt", "2", "·es"), ("tgt", "3", ".")]  # fmt: skip
    # and the translation as written, under its tokens (the server's page shows it so too)
    assert '</div><p class="translation">The bushes.</p>' in html
    said = sentence_section(1, dataclasses.replace(tr, text="<b>&</b>"), None)
    assert '<p class="translation">&lt;b&gt;&amp;&lt;/b&gt;</p>' in said


def test_both_reports_list_the_beams_other_outputs_with_their_scores_escaped():
    """--n-best beside --html: the beam's other captions (translations) under the best, best first, each with its
    score, one the length cap stopped said so; none listed for one output or without --n-best."""
    import re

    from text_attn.translation.translator import Translation

    record = {"image": "x.png", "words": ["a", "dog"], "attention": [[0.25] * 4] * 2, "grid": [2, 2], "size": [40, 30],
              "crop_box": [0, 0, 40, 30], "chosen": None, "error": None,
              "n_best": [{"caption": "a dog", "score": -0.1, "truncated": False},
                         {"caption": "a <dog>", "score": -0.25, "truncated": False},
                         {"caption": "a dog dog", "score": None, "truncated": True}]}  # fmt: skip
    html = image_section(1, record, Image.new("RGB", (40, 30), "red"))
    items = re.findall(r"<li dir=\"auto\">(.*?) <span class=\"hint\">\((.*?)\)</span></li>", html)
    assert items == [("a &lt;dog&gt;", "-0.2500"), ("a dog dog", "no score, cut off at --max-len")]
    assert "the beam also kept (2)" in html
    alone = {**record, "n_best": record["n_best"][:1]}
    assert "beam also kept" not in image_section(1, alone, Image.new("RGB", (40, 30), "red"))
    tr = Translation(source=["ein", "hund"], tokens=["a", "dog"], text="a dog", attention=None, unknown=[],
                     nbest=[("a dog", -0.2, False), ("one dog", -0.5, True)])  # fmt: skip
    html = sentence_section(2, tr, None)
    assert (
        re.findall(r"<li dir=\"auto\">(.*?) <span", html) == ["one dog"]
        and "(-0.5000, cut off at the length cap)" in html
    )
    assert "beam also kept" not in sentence_section(2, Translation(source=["ein"], tokens=["a"], text="a",
                                                                   attention=None, unknown=[]), None)  # fmt: skip


def test_several_texts_given_list_the_others_read_under_the_best(scenes, tmp_path):
    """Several --given: the page drew the best reading alone, as if it were the only text given; the others are
    listed under it with their scores, best first, as the command's lines rank them (both families)."""
    import re

    page = tmp_path / "c.html"
    given = ["--given", "a red circle", "--given", "a <b>blue</b> square"]
    assert caption_main([str(scenes[0]), "--model", "shapes", "--html", str(page), *given]) == 0
    found = re.findall(r"<summary>(.*?)</summary><ol><li dir=\"auto\">(.*?) <span", page.read_text())
    assert len(found) == 1 and found[0][0] == "the other captions given, read (1)"
    model = tiny_translator("rnn", tmp_path / "model.pt")
    page = tmp_path / "t.html"
    assert translate_main(["--model", str(model), "--html", str(page), SENTENCES[0], "--given", WORDS[0],
                           "--given", " ".join(WORDS[:2])]) == 0  # fmt: skip
    found = re.findall(r"<summary>(.*?)</summary><ol><li dir=\"auto\">(.*?) <span", page.read_text())
    assert len(found) == 1 and found[0][0] == "the other translations given, read (1)"
    alone = tmp_path / "one.html"
    assert translate_main(["--model", str(model), "--html", str(alone), SENTENCES[0], "--given", WORDS[0]]) == 0
    assert "translations given, read" not in alone.read_text()


def test_translate_report_notes_the_inputs_unlike_the_training_text(tmp_path):
    from helpers.multi30k import DE, EN
    from helpers.tiny_translator import tiny_subword_model_file

    model = tiny_subword_model_file(tmp_path)
    page = tmp_path / "r.html"
    assert translate_main(["--model", str(model), "--max-len", "4", "--html", str(page), DE[0], EN[1]]) == 0
    html = page.read_text(encoding="utf-8")
    note = escape(Translator.load(model).note())
    assert html.count(f'<p class="note">{note}</p>') == 1 and html.index(note) > html.index("input 2")
    # the model reads German (its file says so): each source line is tagged, for a screen reader's voice
    assert html.count('<span dir="auto" lang="de">') == 2


def test_a_panoramas_canvas_is_stretched_to_one_in_four_as_the_overlay_pngs_panels_are():
    """A 6000 x 400 photo was drawn 384 x 26 on the report (and 480 x 32 on attention-serve's page): a 9 x 9 map in
    rows of 3 pixels. Both pages now draw it at least a quarter of the longest side tall."""
    from attention_serve.page import render
    from captioning.views.caption_page import MAX_SIDE, thumbnail

    for size, canvas, sent in (((6000, 400), (384, 96), (384, 96)), ((400, 6000), (96, 384), (96, 384)),
                               ((500, 375), (384, 288), (384, 288)), ((10000, 50), (384, 96), (384, 96)),
                               ((200, 150), (384, 288), (200, 150)),
                               ((250, 166), (384, 255), (250, 166))):  # fmt: skip
        uri, drawn = thumbnail(Image.new("RGB", size))
        assert drawn == canvas
        # the picture is stretched as its canvas is: a 10000 x 50 one was sent 384 x 2, a smear; a small one is sent
        # as it is (the browser scales it up), and so is one whose canvas rounds its side up a pixel (250 x 166)
        assert Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).size == sent
    page = render({"model": "m"}, None, api_key=False).decode()
    assert '"aspect":4,' in page and "Math.ceil(CFG.side / CFG.aspect)" in page
    assert MAX_SIDE == 384


def test_caption_page_has_one_section_per_image_and_nothing_from_the_network(caption_page):
    html = caption_page.read_text()
    found = sections(caption_page)
    assert len(found) == 4 and "missing.png" in found[3] and 'class="error"' in found[3]
    assert "http://" not in html and "https://" not in html
    assert re.findall(r"\ssrc=", html) == [] and "@import" not in html and "url(" not in html
    assert all(len(s) < 120_000 for s in found)  # each image's share of the file is bounded (caption_page.py)
    data = json.loads(re.search(r'class="data">(.*?)</script>', found[0]).group(1))
    assert data["img"].startswith("data:image/jpeg;base64,") and data["g"] == 8 and data["chosen"] is None
    words = re.findall(r'class="w" data-t="\d+">([^<]*)<', found[0])
    assert len(dequantise(data["a"])) == len(words) * 64 and len(data["peak"]) == len(words)


def test_translate_report_has_every_layer_and_head_and_rnn_reports_one(tmp_path, translate_page):
    found = sections(translate_page)
    assert len(found) == 2 and "http://" not in translate_page.read_text()
    data = json.loads(re.search(r'class="data">(.*?)</script>', found[0]).group(1))
    assert (data["L"], data["H"], data["T"], data["S"]) == (2, 2, 6, 6)  # 2 layers, 2 heads, 6 words, 5 + <eos>
    # the teacher-forced weights of the plot layer (loaded: the penultimate, layer 0 of 2) are the ones the search
    # returned, and the page opens on that layer
    translator = Translator.load(tiny_translator("transformer", tmp_path / "t.pt"))
    assert translator.net.plot_layer == 0
    assert '<option value="0" selected>layer 1</option>' in translate_page.read_text()
    trs = translator.translate(SENTENCES, max_len=6)
    for tr, attn in zip(trs, report_attention(translator, trs), strict=True):
        assert attn.shape == (2, 2, len(tr.tokens), len(tr.source) + 1)
        np.testing.assert_allclose(attn[0], tr.attention.transpose(0, 1).numpy(), atol=1e-5)
    model, page = tiny_translator("rnn", tmp_path / "rnn.pt"), tmp_path / "rnn.html"
    assert translate_main(["--model", str(model), "--max-len", "4", "--html", str(page), SENTENCES[0]]) == 0
    (section,) = sections(page)
    data = json.loads(re.search(r'class="data">(.*?)</script>', section).group(1))
    assert (data["L"], data["H"], data["T"], data["S"]) == (1, 1, 4, 6) and 'id="layer"' not in page.read_text()


def test_an_unwritable_html_path_is_one_line_and_loses_nothing(tmp_path, capsys, translate_page):
    jsonl = tmp_path / "done.jsonl"
    jsonl.write_text('{"image": "x.png"}\n')
    with pytest.raises(SystemExit) as exc:
        caption_main([str(PHOTO), "--html", str(tmp_path), "--jsonl", str(jsonl)])  # a folder
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err == [f"caption: error: cannot write --html {tmp_path}: {tmp_path} is a directory"]
    assert jsonl.read_text() == '{"image": "x.png"}\n'  # the run stopped before touching --jsonl
    model = translate_page.parent / "model.pt"
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model), "--html", str(jsonl / "report.html"), "ma"])  # under a file
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "translate: error: cannot write --html" in err[0]


# --- in a real browser --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        # On a developer's machine the browser tests skip with the reason; under CI (.ci/run sets CI=1 and installs
        # chromium) a missing browser fails them: it must never pass there as a skip.
        if os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -e '.[dev]'")
    with Browser() as b:
        yield b


@pytest.mark.long
def test_caption_page_hover_and_keys_change_the_attention_drawn(browser, caption_page):
    b = browser
    b.open(caption_page)
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")  # built and painted: the plain image
    plain = b.eval(CANVAS_SUM.format("#i1"))
    sums = []
    for t in (0, 1):
        b.hover(f"#i1 .w[data-t='{t}']")  # a real mouse move onto the word
        b.wait_for(f"document.querySelector('#i1').dataset.shown === '{t}'")
        sums.append(b.eval(CANVAS_SUM.format("#i1")))
        assert b.eval("[...document.querySelectorAll('#i1 .w.on')].map(w => w.dataset.t)") == [str(t)]
    assert len({plain, *sums}) == 3 and max(sums) < plain  # each word its own map; attention darkens the rest
    b.key("ArrowRight")  # the section under the mouse steps to the next word
    b.wait_for("document.querySelector('#i1').dataset.shown === '2'")
    b.click("#i1 .prev")
    b.wait_for("document.querySelector('#i1').dataset.shown === '1'")
    assert b.eval(CANVAS_SUM.format("#i1")) == sums[1]
    assert "peak weight" in b.eval("document.querySelector('#i1 .info').textContent")
    b.eval("(() => { const s = document.querySelector('#i1 .opacity'); s.value = 0;"
           " s.dispatchEvent(new Event('input')); })()")  # fmt: skip
    assert b.eval(CANVAS_SUM.format("#i1")) == plain  # opacity 0: the image as it is
    b.hover("#i3 .w[data-t='0']")  # the photo, further down
    b.wait_for("document.querySelector('#i3').dataset.shown === '0'")
    assert b.errors == []


def test_hard_attention_page_outlines_the_chosen_region(browser, hard_page):
    b = browser
    b.open(hard_page)
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
    b.hover("#i1 .w[data-t='0']")
    b.wait_for("document.querySelector('#i1').dataset.shown === '0'")
    assert "(outlined)" in b.eval("document.querySelector('#i1 .info').textContent")
    assert b.errors == []


def test_hundreds_of_sections_are_built_only_when_scrolled_to(browser, tmp_path):
    page, n = tmp_path / "many.html", 150
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (30, 40, 3), dtype=np.uint8))
    alphas = np.random.default_rng(1).dirichlet(np.ones(4), size=2)
    with open_caption_page(page, "synthetic", 2) as report:
        for k in range(1, n + 1):
            record = {"image": f"img{k}.png", "words": ["a", "</script><b>"], "attention": alphas.tolist(),
                      "grid": [2, 2], "size": [40, 30], "crop_box": [0, 0, 40, 30],
                      "chosen": None, "error": None}  # fmt: skip
            report.add(image_section(k, record, image))
    assert isinstance(report, HtmlPage) and len(sections(page)) == n
    b = browser
    b.open(page)
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
    assert b.eval("document.querySelectorAll('section[data-built]').length") < 20
    canvas = "document.querySelector('#i1 canvas')"
    height = b.eval("document.querySelector('#i1').getBoundingClientRect().height")
    b.centre(f"#i{n}")  # scrolled into view: built and painted, then its words work
    b.wait_for(f"document.querySelector('#i{n}').dataset.shown === '-1'")
    b.hover(f"#i{n} .w[data-t='1']")
    b.wait_for(f"document.querySelector('#i{n}').dataset.shown === '1'")
    assert b.eval(f"document.querySelector('#i{n} .w[data-t=\"1\"]').textContent") == "</script><b>"
    assert b.eval("document.querySelectorAll('b').length") == 0 and b.errors == []
    # far from view, the first section's pixels were given back (a page read to the end held them all), its place
    # on the page kept; back in view, drawn again as it was
    b.wait_for(f"{canvas}.width === 0")
    assert b.eval("document.querySelector('#i1').getBoundingClientRect().height") == height
    b.centre("#i1")
    b.wait_for(f"{canvas}.width > 0")
    assert b.eval(f"Array.from({canvas}.getContext('2d').getImageData(0, 0, 8, 8).data).some((v) => v > 0)")
    assert b.errors == []


@pytest.mark.long
def test_a_printed_page_holds_every_photo_and_long_words_wrap_in_their_cards(browser, tmp_path):
    """The report audit: a print (or Save as PDF) held the photos of the sections on screen only, the others grey
    boxes (never built, or asleep); and a reference's URL or a beam's run-on word ran the page sideways on a phone."""
    import re as regex

    page, n = tmp_path / "print.html", 40
    rng = np.random.default_rng(3)
    alphas = rng.dirichlet(np.ones(4), size=2)
    run_on = "extennion" + "ern" * 60
    with open_caption_page(page, "synthetic", 2) as report:
        for k in range(1, n + 1):
            image = Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8))  # each its own: none shared
            beam = [
                {"caption": "a dog", "score": -1.0, "truncated": False},
                {"caption": run_on, "score": -9.0, "truncated": True},
            ]
            record = {"image": f"img{k}.png", "words": ["a", "dog"], "attention": alphas.tolist(), "grid": [2, 2],
                      "size": [40, 30], "crop_box": [0, 0, 40, 30], "chosen": None, "error": None,
                      "references": ["see https://example.org/" + "a" * 140], "caption": "a dog", "score": -1.0,
                      "truncated": False, "n_best": beam}  # fmt: skip
            report.add(image_section(k, record, image))
    b = browser
    b.page.set_viewport_size({"width": 375, "height": 700})
    try:
        b.open(page)
        b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
        b.eval("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        assert b.eval("document.documentElement.scrollWidth") == 375
        assert b.eval("document.querySelectorAll('section[data-built]').length") < n
        b.wait_for(f"document.querySelector('#i{n}').photo && document.querySelector('#i{n}').photo.complete")
        pdf = b.page.pdf()
        assert len(regex.findall(rb"/Subtype\s*/Image", pdf)) == n  # every section's canvas, painted before print
        assert b.errors == []
    finally:
        b.page.set_viewport_size({"width": 1200, "height": 900})  # the module's browser, as the other tests have it


@pytest.mark.long
def test_a_read_texts_word_probability_is_in_the_line_the_keys_step_to(browser, scenes, tmp_path):
    """A word's probability (a text read) was in its hover title alone: out of a keyboard's and a phone's reach, and
    no screen reader said it. The line a step says ends with it."""
    caption, text = tmp_path / "c.html", tmp_path / "t.html"
    assert caption_main([str(scenes[0]), "--model", "shapes", "--html", str(caption), "--given", "a red circle"]) == 0
    model = tiny_translator("rnn", tmp_path / "model.pt")
    assert translate_main(["--model", str(model), "--html", str(text), SENTENCES[0], "--given", WORDS[0]]) == 0
    for page, section in ((caption, "#i1"), (text, "#s1")):
        browser.open(page)
        browser.wait_for(f"document.querySelector('{section}').dataset.built")
        browser.eval(f"document.querySelector('{section}').focus()")
        browser.key("ArrowRight")
        title = browser.eval(f"document.querySelector('{section} .w{'.tgt' if page == text else ''}').title")
        said = browser.wait_for(f"document.querySelector('{section} .info').textContent.includes('; p = ') && "
                                f"document.querySelector('{section} .info').textContent")  # fmt: skip
        assert title.startswith("p = ") and said.endswith(f"; {title}"), (said, title)
    assert browser.errors == []


def test_a_long_translate_page_takes_down_the_grids_far_from_view_and_builds_them_again(browser, tmp_path):
    page, n, t = tmp_path / "many.html", 120, 6
    attention = np.random.default_rng(2).dirichlet(np.ones(t), size=(1, 1, t))  # (layers, heads, T, S): S = 5 + eos
    with HtmlPage(page, "many", css=ALIGNMENT_CSS, js=ALIGNMENT_JS) as report:
        for k in range(1, n + 1):
            tr = SimpleNamespace(source=[f"s{i}" for i in range(t - 1)], tokens=[f"t{i}" for i in range(t)])
            report.add(sentence_section(k, tr, attention))
    b = browser
    b.open(page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    box = "document.querySelector('#s1 .grid-box').getBoundingClientRect()"
    size = b.eval(f"[{box}.width, {box}.height]")
    b.hover("#s1 .w.tgt[data-t='1']")
    b.wait_for("document.querySelector('#s1').dataset.shown === 't1'")
    b.centre(f"#s{n}")  # read to the end: only the grids near the view are up
    b.wait_for("!document.querySelector('#s1 table.grid')")
    assert b.eval("document.querySelectorAll('table.grid').length") < 20
    assert b.eval(f"[{box}.width, {box}.height]") == size  # its place on the page kept
    b.eval("document.querySelector('#s1').step(1)")  # an arrow key's step on it (the section last hovered), grid down
    b.wait_for("document.querySelector('#s1').dataset.shown === 't2'")
    b.centre("#s1")  # back in view: the grid again, painted, the word shown marked in it
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    assert b.eval("document.querySelectorAll('#s1 table.grid tbody td').length") == t * t
    shown = int(b.eval("document.querySelector('#s1').dataset.shown")[1:])  # t2, or where the mouse now rests
    marked = b.eval("[...document.querySelectorAll('#s1 .grid tbody tr')].map((r) => r.classList.contains('on'))")
    assert marked == [k == shown for k in range(t)]
    assert all(b.eval("[...document.querySelectorAll('#s1 .grid tbody td')].map((td) => td.style.background)"))
    b.hover("#s1 .grid tbody tr:nth-child(4) td:nth-of-type(2)")  # the rebuilt cells answer the mouse
    b.wait_for("document.querySelector('#s1').dataset.shown === 't3'")
    assert b.errors == []


def test_translate_page_links_words_by_attention_per_layer_and_head(browser, translate_page):
    b = browser
    b.open(translate_page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    assert b.eval("document.querySelectorAll('#s1 table.grid tbody tr').length") == 6
    assert b.eval("document.querySelectorAll('#s1 table.grid tbody td').length") == 36
    shades = "[...document.querySelectorAll('#s1 .w.src')].map(w => w.style.background)"
    seen = []
    for t in (0, 1):
        b.hover(f"#s1 .w.tgt[data-t='{t}']")
        b.wait_for(f"document.querySelector('#s1').dataset.shown === 't{t}'")
        seen.append(b.eval(shades))
        assert all(seen[-1]) and b.eval("document.querySelectorAll('#s1 .grid tbody tr.on').length") == 1
    assert seen[0] != seen[1]  # each output word lights up its own source words
    b.key("ArrowRight")
    b.wait_for("document.querySelector('#s1').dataset.shown === 't2'")
    b.hover("#s1 .w.src")  # a source word: the output words that looked at it, the strongest outlined
    b.wait_for("document.querySelector('#s1').dataset.shown === 's0'")
    assert b.eval("document.querySelectorAll('#s1 .w.tgt.best').length") == 1
    b.hover("#s1 .w.tgt")
    b.wait_for("document.querySelector('#s1').dataset.shown === 't0'")
    for layer, head in (("1", "-1"), ("1", "1")):  # another layer, then one head of it: other weights
        b.eval(f"(() => {{ for (const [id, v] of [['layer', '{layer}'], ['head', '{head}']]) {{"
               " const s = document.getElementById(id); s.value = v;"
               " s.dispatchEvent(new Event('change', {bubbles: true})); } })()")  # fmt: skip
        seen.append(b.eval(shades))
    assert seen[2] != seen[0] and seen[3] != seen[2]
    assert b.errors == []


def test_caption_page_with_evidence_draws_what_drives_each_word_beside_its_attention(browser, evidence_page):
    page, rec = evidence_page
    (data,) = [json.loads(x) for x in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>',
                                                  page.read_text(), flags=re.S)]  # fmt: skip
    g, n = rec["grid"][0], len(rec["words"])
    from captioning.views.caption_page import evidence_maps

    # the page's second map is the record's evidence, drawn as the overlay draws it (within quantisation)
    np.testing.assert_allclose(dequantise(data["e"], (n, g, g)), np.stack(evidence_maps(rec["evidence"], g)),
                               atol=1 / 510 + 1e-9)  # fmt: skip
    assert data["agree"] == rec["agreement"]
    b = browser
    b.open(page)
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
    assert b.eval("document.querySelectorAll('#i1 canvas').length") == 2
    canvas_sum = CANVAS_SUM.replace("{} canvas", "{}")  # the sum of the canvas the selector names
    plain = b.eval(canvas_sum.format("#i1 canvas.ev"))
    seen = []
    for t in range(min(n, 3)):
        b.hover(f"#i1 .w[data-t='{t}']")
        b.wait_for(f"document.querySelector('#i1').dataset.shown === '{t}'")
        seen.append((b.eval(canvas_sum.format("#i1 canvas.att")), b.eval(canvas_sum.format("#i1 canvas.ev"))))
        info = b.eval("document.querySelector('#i1 .info').textContent")
        tau = rec["agreement"][t]
        assert ("undefined" in info) if tau is None else (f"τ {tau:+.2f}" in info)
    assert all(ev < plain for _, ev in seen)  # the evidence map darkens the regions that do not drive the word
    assert len({ev for _, ev in seen}) == len(seen)  # each word its own evidence map
    # where a word's two maps differ, so do the canvases (both peaked on one region can quantise to the same map)
    differ = [t for t in range(len(seen)) if data["a"] != data["e"] and
              (dequantise(data["a"], (n, g * g))[t] != dequantise(data["e"], (n, g * g))[t]).any()]  # fmt: skip
    assert differ and all(seen[t][0] != seen[t][1] for t in differ)
    assert b.errors == []


def test_translate_page_with_evidence_lights_what_drives_the_hovered_word(browser, translate_evidence_page):
    b = browser
    b.open(translate_evidence_page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    drives = "[...document.querySelectorAll('#s1 .w.drv')].map(w => w.style.background)"
    assert b.eval("document.querySelectorAll('#s1 .w.drv').length") == len(SENTENCES[0].split()) + 1  # + <eos>
    assert not any(b.eval(drives))
    (data,) = [json.loads(x) for x in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>',
                                                  translate_evidence_page.read_text(), flags=re.S)]  # fmt: skip
    cost = dequantise(data["e"], (data["T"], data["S"]))  # each source word's cost relative to the costliest
    seen = []
    for t in (0, 1):
        b.hover(f"#s1 .w.tgt[data-t='{t}']")
        b.wait_for(f"document.querySelector('#s1').dataset.shown === 't{t}'")
        seen.append(b.eval(drives))
        # lit exactly where masking the source word costs the output word something, the costliest fully
        assert [bool(v) for v in seen[-1]] == [bool(c > 0) for c in cost[t]]
        assert f"{0.85:.3f})" in seen[-1][int(cost[t].argmax())]
        agree = b.eval("document.querySelector('#s1 .agree').textContent")
        word = b.eval(f"document.querySelectorAll('#s1 .w.tgt')[{t}].textContent")
        assert agree.startswith(f"“{word}”: agreement of its attention")
    assert seen[0] != seen[1]
    b.hover("#s1 .w.src")  # a source word: the evidence line is cleared
    b.wait_for("document.querySelector('#s1').dataset.shown === 's0'")
    assert not any(b.eval(drives)) and b.errors == []


def test_translate_page_with_evidence_gives_the_tau_of_the_layer_and_head_drawn(browser, tmp_path):
    model = tiny_translator("transformer", tmp_path / "model.pt")
    page = tmp_path / "report.html"
    assert translate_main(["--model", str(model), "--max-len", "4", "--html", str(page), "--evidence",
                           SENTENCES[0]]) == 0  # fmt: skip
    (data,) = [json.loads(x) for x in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>',
                                                  page.read_text(), flags=re.S)]  # fmt: skip
    tr = Translator.load(model)
    assert data["L"] >= 2 and len(data["agree"]) == data["L"] and len(data["agree"][0]) == 1 + data["H"]
    for layer in range(data["L"]):  # the heads' mean of each layer: what translate --plot --layer N labels
        tr.net.set_plot_layer(layer)
        (result,) = tr.translate([SENTENCES[0]], max_len=4)
        assert data["agree"][layer][0] == pytest.approx(tr.explain(result).agreement, abs=2e-4, nan_ok=True)
    b = browser
    b.open(page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    seen = {}
    for layer, head in (("0", "-1"), ("1", "-1"), ("1", "0")):
        b.eval(f"(() => {{ for (const [id, v] of [['layer', '{layer}'], ['head', '{head}']]) {{"
               " const s = document.getElementById(id); s.value = v;"
               " s.dispatchEvent(new Event('change', {bubbles: true})); } })()")  # fmt: skip
        b.hover("#s1 .w.tgt[data-t='1']")
        b.wait_for("document.querySelector('#s1').dataset.shown === 't1'")
        tau = data["agree"][int(layer)][int(head) + 1][1]
        shown = b.eval("document.querySelector('#s1 .agree').textContent")
        assert ("undefined" in shown) if tau is None else (f"τ {tau:+.2f}" in shown), (layer, head, shown)
        seen[layer, head] = tau
        b.hover("#s1 .w.src")  # away, so that the next hover is a change
    assert len(set(seen.values())) > 1 and b.errors == []


def test_a_page_with_the_heads_means_taus_only_says_so_for_one_head(browser, tmp_path):
    """attention-serve's page carries the taus of the heads' mean alone (agree [[taus]]): choosing one head threw on
    every hover ("Cannot read properties of undefined"). Now the mean's tau, saying so."""
    model = tiny_translator("transformer", tmp_path / "model.pt")
    page = tmp_path / "report.html"
    assert translate_main(["--model", str(model), "--max-len", "4", "--html", str(page), "--evidence",
                           SENTENCES[0]]) == 0  # fmt: skip
    text = page.read_text()
    (raw,) = re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', text, flags=re.S)
    data = json.loads(raw)
    mean_only = dict(data, agree=[[data["agree"][0][0]]])  # the layout the server's page builds
    page.write_text(text.replace(raw, json.dumps(mean_only)))
    b = browser
    b.open(page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    b.eval("(() => { const s = document.getElementById('head'); s.value = '1';"
           " s.dispatchEvent(new Event('change', {bubbles: true})); })()")  # fmt: skip
    b.hover("#s1 .w.tgt[data-t='1']")
    b.wait_for("document.querySelector('#s1').dataset.shown === 't1'")
    shown = b.eval("document.querySelector('#s1 .agree').textContent")
    assert "(of the heads' mean: one head's is not computed here)" in shown and b.errors == []


def test_a_translate_page_shows_failed_inputs_in_place_and_marks_cut_off_ones(browser, tmp_path, monkeypatch):
    """translate --html left a failed input out (5 lines, the page had 4 sections and said "4 input(s)") and said
    nothing of a translation cut off at --max-len; the caption page shows both."""
    import io

    model = tiny_translator("rnn", tmp_path / "model.pt")  # never ends early: every output is cut off
    page = tmp_path / "report.html"
    # a line that is not UTF-8 fails in its place; a blank line has no section (its output line is blank)
    # (a line of marks alone, written as typed, neither: the footer counts it, as it counts the blank lines)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{SENTENCES[0]}\n\udcff\n{SENTENCES[1]}\n\n---\n"))
    assert translate_main(["--model", str(model), "--max-len", "3", "--html", str(page)]) == 1
    html = page.read_text()
    assert [int(n) for n in re.findall(r'<section class="item tr[^"]*" id="s(\d+)"', html)] == [1, 2, 3]
    assert '<section class="item tr failed" id="s2"><h2>input 2</h2><p class="error">not valid UTF-8 text</p>' in html
    assert html.count("&middot; cut off at the length cap</h2>") == 2
    footer = "<footer>3 input(s), 1 failed, 1 blank line left out, 1 input of marks alone left out (written as typed "
    footer += "in the text)</footer>"
    assert footer in html
    b = browser
    b.open(page)
    b.wait_for("!!document.querySelector('#s3 table.grid')")
    b.hover("#s3 .w.tgt[data-t='1']")
    b.wait_for("document.querySelector('#s3').dataset.shown === 't1'")
    assert b.errors == []


def test_a_right_to_left_sentence_reads_right_to_left_on_the_page(browser, tmp_path):
    """The words are inline blocks, which a line orders by its direction: on the page's left-to-right lines an Arabic
    translation's words ran left to right, its last word first to a reader. Each line of words takes its text's."""
    from text_attn.core.html_page import CORE_CSS
    from text_attn.translation.alignment_page import sentence_section
    from text_attn.translation.translator import Translation

    tr = Translation(source=["a", "man", "rides"], tokens=["رجل", "يركب", "دراجة"], text="رجل يركب دراجة",
                     attention=None, unknown=[])  # fmt: skip
    page = tmp_path / "rtl.html"
    page.write_text(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><style>{CORE_CSS}</style></head><body>'
                    f"{sentence_section(1, tr, None)}</body></html>", encoding="utf-8")  # fmt: skip
    b = browser
    b.open(page)
    xs = "[...document.querySelectorAll('#s1 .w.{}')].map(e => e.getBoundingClientRect().x)"
    output, source = b.eval(xs.format("tgt")), b.eval(xs.format("src"))
    assert len(output) == 3 and output[0] > output[1] > output[2]  # رجل first, at the right
    assert len(source) == 4 and source == sorted(source)  # English (and <eos>): left to right, as before


def test_a_right_to_left_caption_reads_right_to_left_on_the_page(browser, tmp_path):
    """The caption page's words likewise: an Arabic caption's first word at the right, an English one's at the left."""
    from PIL import Image

    from captioning.views.caption_page import CAPTION_CSS, image_section
    from text_attn.core.html_page import CORE_CSS

    def section(n: int, words: list[str]) -> str:
        record = {"image": f"{n}.jpg", "grid": [2, 2], "attention": [[0.25] * 4] * len(words), "words": words,
                  "size": [64, 48], "crop_box": [0, 0, 64, 48]}  # fmt: skip
        return image_section(n, record, Image.new("RGB", (64, 48)))

    page = tmp_path / "rtl-caption.html"
    page.write_text(f'<!doctype html><html lang="en"><head><meta charset="utf-8"><style>{CORE_CSS}{CAPTION_CSS}'
                    f'</style></head><body>{section(1, ["كلب", "يجري", "هنا"])}{section(2, ["a", "dog", "runs"])}'
                    "</body></html>", encoding="utf-8")  # fmt: skip
    b = browser
    b.open(page)
    xs = "[...document.querySelectorAll('#i{} .w')].map(e => e.getBoundingClientRect().x)"
    arabic, english = b.eval(xs.format(1)), b.eval(xs.format(2))
    assert len(arabic) == 3 and arabic[0] > arabic[1] > arabic[2]
    assert len(english) == 3 and english[0] < english[1] < english[2]


# --- to a screen reader and the keyboard alone ----------------------------------------------------------------------
def test_a_caption_run_stopped_midway_keeps_a_whole_page_that_says_first_it_is_partial(
    browser, caption_page, scenes, tmp_path, monkeypatch
):
    """caption --html stopped by Ctrl-C (or an error) after its first batch: the page of what was captioned was closed
    like a finished one, nothing saying that the photos after them were missing. It still replaces the old page
    (whole: its sections are), and says first, in the header, that it is partial; a finished page says nothing."""
    from captioning.commands import caption_loop

    page = tmp_path / "report.html"
    page.write_text("<html>the old page</html>")
    monkeypatch.setattr(caption_loop, "caption_batch", ctrl_c_at(caption_loop.caption_batch, 2))
    with pytest.raises(SystemExit) as exc:
        caption_main(
            [*map(str, scenes), "--html", str(page), "--batch-size", "1", "--model", "shapes", "--workers", "0"]
        )
    assert exc.value.code == 130 and sorted(tmp_path.iterdir()) == [page]  # no temporary file left
    assert len(sections(page)) == 1 and page.read_text().rstrip().endswith("</html>")
    b = browser
    b.open(page)
    (note,) = accessible(b.page, "header .partial")  # moved into the sticky header: seen first
    assert note["role"] == "note" and not note["ignored"]
    said = b.eval("document.querySelector('header .partial').textContent")
    assert said == "Partial page: the run was interrupted after 1 image(s); the images after them are not here"
    colours = b.eval(
        "(() => { const s = getComputedStyle(document.querySelector('header .partial'));"
        " return [s.color, getComputedStyle(document.querySelector('header')).backgroundColor]; })()"
    )
    assert contrast(*colours) >= 4.5 and b.errors == []
    b.open(caption_page)  # a run that ended (a photo of it missing: an error of its own, in its place): no note
    assert b.eval("document.querySelectorAll('.partial').length") == 0 and b.errors == []


def test_caption_page_to_a_screen_reader_and_the_keyboard(browser, caption_page, tmp_path):
    """The audit's findings on the caption page: a canvas with no text alternative, ◀ / ▶ buttons, an info line no
    one is told of, no visible focus, the mouse taking the arrow keys from the focused section, and a sticky header
    covering most of a narrow window."""
    b = browser
    b.open(caption_page)
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
    caption = b.eval("[...document.querySelectorAll('#i1 .w')].map(w => w.textContent).join(' ')")
    canvas, prev, nxt, info = accessible(b.page, "#i1 canvas", "#i1 .prev", "#i1 .next", "#i1 .info")
    assert (canvas["role"], canvas["name"]) == ("image", f"photo: {caption}") and not canvas["ignored"]
    assert (prev["role"], prev["name"], nxt["name"]) == ("button", "previous word", "next word")
    assert info["live"] == "polite"
    b.page.focus("#i1")
    ring = b.eval("(() => { const s = getComputedStyle(document.querySelector('#i1'));"
                  " return [s.outlineStyle, s.outlineWidth, s.outlineColor, s.outlineOffset]; })()")  # fmt: skip
    assert ring == ["solid", "3px", "rgb(194, 65, 12)", "2px"]  # the accent, where it was outline: none
    b.hover("#i2 h2")  # the mouse comes to rest on another section: the keys still step the focused one
    b.key("ArrowRight")
    b.wait_for("document.querySelector('#i1').dataset.shown === '0'")
    assert b.eval("document.querySelector('#i2').dataset.shown") == "-1"
    header = "(() => { const h = document.querySelector('header'); return [getComputedStyle(h).position,"
    header += " h.getBoundingClientRect().height / innerHeight]; })()"
    assert b.eval(header)[0] == "sticky"
    try:
        b.page.set_viewport_size({"width": 320, "height": 256})  # 1280 x 1024 at 400%
        position, share = b.eval(header)
        assert position == "static"  # scrolls away with the page instead of covering 56-87% of it
    finally:
        b.page.set_viewport_size({"width": 1200, "height": 900})
    # where each word looked, in words: a 3 x 3 grid whose words peak upper right, in the centre, lower centre
    peaks, alphas = (2, 4, 7), np.full((3, 9), 0.05)
    alphas[range(3), peaks] = 0.6
    record = {"image": "grid.png", "words": ["one", "two", "three"], "attention": alphas.tolist(), "grid": [3, 3],
              "size": [30, 30], "crop_box": [0, 0, 30, 30], "chosen": None, "error": None}  # fmt: skip
    with open_caption_page(tmp_path / "grid.html", "synthetic", 3) as report:
        report.add(image_section(1, record, Image.new("RGB", (30, 30), "grey")))
    b.open(tmp_path / "grid.html")
    b.wait_for("document.querySelector('#i1').dataset.shown === '-1'")
    b.page.focus("#i1")
    said = []
    for t in range(3):
        b.key("ArrowRight")
        b.wait_for(f"document.querySelector('#i1').dataset.shown === '{t}'")
        said.append(b.eval("document.querySelector('#i1 .info').textContent"))
    assert [x.split("), ")[1] for x in said] == [
        "strongest at row 1, column 3 of 3 × 3, upper right",
        "strongest at row 2, column 2 of 3 × 3, centre",
        "strongest at row 3, column 2 of 3 × 3, lower centre",
    ]
    assert said[0].startswith("word 1 of 3, “one”: peak weight 60.0%") and b.errors == []


@pytest.mark.long
def test_translate_page_to_a_screen_reader_and_the_keyboard(browser, translate_page, tmp_path):
    """The audit's findings on the translate page: the head selector unnamed and the layer's named by both labels,
    the grid's row headers announced as column headers and its corner empty, its scroll box out of the keyboard's
    reach, the source words reached only by hovering, and a shaded word's text at 3.97:1."""
    b = browser
    b.open(translate_page)
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    layer, head, box, corner, row, column, info = accessible(
        b.page, "#layer", "#head", "#s1 .grid-box", "#s1 .grid thead th", "#s1 .grid tbody th",
        "#s1 .grid thead th:nth-child(2)", "#s1 .info")  # fmt: skip
    assert (layer["name"].strip(), head["name"].strip()) == ("cross-attention of", "heads")
    assert (box["role"], box["name"], box["focusable"]) == ("region", "alignment grid of input 1", True)
    assert corner["name"] and (row["role"], column["role"]) == ("rowheader", "columnheader")
    assert info["live"] == "polite"
    # the keyboard alone: step the output words, go up to the source words and along them, and down again
    shown = "document.querySelector('#s1').dataset.shown"
    shades = "[...document.querySelectorAll('#s1 .w.tgt')].map(w => w.style.background)"
    b.page.focus("#s1")
    b.key("ArrowRight")
    b.wait_for(f"{shown} === 't0'")
    b.key("ArrowUp")  # to the source word the first output word looked at most
    first = int(b.eval(shown)[1:])
    b.key("ArrowRight" if first == 0 else "ArrowLeft")
    moved = first + (1 if first == 0 else -1)
    b.wait_for(f"{shown} === 's{moved}'")
    by_key, said = b.eval(shades), b.eval("document.querySelector('#s1 .info').textContent")
    assert said.startswith(f"source token {moved + 1} of 6, ") and "looked at most by output token" in said
    b.page.mouse.move(0, 0)
    b.hover(f"#s1 .w.src[data-s='{moved}']")  # the same view as hovering that source word
    assert b.eval(shown) == f"s{moved}" and b.eval(shades) == by_key and all(by_key)
    b.page.focus("#s1")
    b.key("ArrowDown")
    assert b.eval(shown).startswith("t") and "looked most at source token" in b.eval(
        "document.querySelector('#s1 .info').textContent"
    )
    before = b.eval(shown)
    b.page.focus("#s1 .grid-box")  # its arrow keys scroll the grid, they step no word
    b.key("ArrowRight")
    assert b.eval(shown) == before
    # a shaded word's text: at least 4.5:1 at the strongest weight and a middle one
    colours = ("(v) => { const w = document.querySelector('#s1 .w.src'); w.style.background = Report.shade(v);"
               " const s = getComputedStyle(w); return [s.color, s.backgroundColor]; }")  # fmt: skip
    for v in (1.0, 0.5):
        ratio = contrast(*b.page.evaluate(colours, v))
        assert ratio >= 4.5, (v, ratio)
    # the page's language (English) for a model that does not say what it reads; its own where it does
    assert b.eval("document.querySelector('#s1 .w.src').closest('[lang]').lang") == "en"
    from text_attn.translation.alignment_page import ALIGNMENT_CSS, ALIGNMENT_JS, sentence_section
    from text_attn.translation.translator import Translation

    tr = Translation(source=["ein", "Hund"], tokens=["a", "dog"], text="a dog", attention=None, unknown=[])
    section = sentence_section(1, tr, np.full((1, 1, 2, 3), 1 / 3), lang="de")
    with HtmlPage(tmp_path / "de.html", "de", css=ALIGNMENT_CSS, js=ALIGNMENT_JS) as page:
        page.add(section)
    b.open(tmp_path / "de.html")
    b.wait_for("!!document.querySelector('#s1 table.grid')")
    langs = "[...document.querySelectorAll('#s1 {}')].map(e => e.closest('[lang]').lang)"
    assert b.eval(langs.format(".w.src")) == ["de"] * 3 and b.eval(langs.format(".w.tgt")) == ["en"] * 2
    assert b.eval(langs.format(".grid thead th span")) == ["de"] * 3 and b.errors == []


def test_a_page_that_cannot_be_finished_ends_the_run_with_exit_2(tmp_path, capsys, monkeypatch):
    """A full disk (or a folder made read-only) as the page was finished: one line, and exit code 0, so a script took
    the page as written. Exit code 2 now, for caption and translate alike."""
    import errno

    from captioning.commands import caption_loop
    from text_attn.translation import alignment_page
    from text_attn.translation.translate_cli import translate_main

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    photo = tmp_path / "scene.png"
    make_scene(random.Random(0), size=64).image.save(photo)
    monkeypatch.setattr(caption_loop, "_close_html", full)
    with pytest.raises(SystemExit) as exc:
        caption_main([str(photo), "--model", "shapes", "--html", str(tmp_path / "c.html")])
    assert exc.value.code == 2
    assert f"caption: error: cannot finish --html {tmp_path / 'c.html'}: [Errno 28] No space left on device" in (
        capsys.readouterr().err)  # fmt: skip
    real = alignment_page.open_alignment_page

    def opened(*args, **kwargs):
        page = real(*args, **kwargs)
        page.close = full
        return page

    monkeypatch.setattr(alignment_page, "open_alignment_page", opened)
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", "bahdanau", "ein hund", "--html", str(tmp_path / "t.html")])
    assert exc.value.code == 2
    assert "translate: error: cannot finish --html" in capsys.readouterr().err
