"""The live page at / in a real browser (Playwright driving the system's Chromium), against a real attention-serve
process: upload a photo and read its caption, hover a word and see the attention canvas change, translate on the
second tab and hover the alignment, both with "also what drives each word" too, and an oversized upload's error shown
on the page. No page error, ever. All of it -m slow: its own server and browser cost ~23 s of the default run, which
drives the other pages in a browser (tests/cli/test_html_pages.py) and this server over HTTP
(tests/serve/test_api.py). But for the page as a screen reader and the keyboard alone meet it: under -m long (which CI
runs) against answers in the API's shape (no server: ~2 s), and under -m slow against the real server."""

from __future__ import annotations

import io
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from helpers.browser import MISSING, accessible, browser, find_chromium
from helpers.browser import page as browser_page
from helpers.server import Server
from helpers.tiny_captioner import flag_every_photo, tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from PIL import Image

from text_attn.translation.source_check import unseen_words_line

FIX = Path(__file__).parent.parent / "fixtures"
PHOTO = FIX / "images" / "chelsea.png"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if find_chromium() is None:  # under CI (.ci/run installs chromium) a missing browser fails, never skips
        pytest.fail(MISSING) if os.environ.get("CI") else pytest.skip(MISSING)
    folder = tmp_path_factory.mktemp("models")
    args = ["--caption-model", str(flag_every_photo(tiny_model_file(folder / "caption.pt"))), "--text-model",
            str(tiny_word_model_file(folder / "text.pt")), "--max-upload-mb", "0.5", "--host", "0.0.0.0"]  # fmt: skip
    srv = Server(args, folder / "server.log")
    # every address, no key: the server says once that anyone who can reach it can use it
    assert srv.log.read_text().count("with no authentication") == 1
    yield srv
    # Ctrl-C in a terminal reaches every process of the group: the server stops cleanly, exit code 0
    assert srv.stop(signal.SIGINT, group=True) == 0, srv.log.read_text()[-2000:]
    assert "Traceback" not in srv.log.read_text()


@pytest.fixture(scope="module")
def chromium():
    """One browser for the module's pages (each test's page has a context of its own), with the server or without."""
    if find_chromium() is None:
        pytest.fail(MISSING) if os.environ.get("CI") else pytest.skip(MISSING)
    with browser() as shared:
        yield shared


def _canvas(page) -> str:
    return page.evaluate("document.querySelector('#cap-out canvas').toDataURL()")


@pytest.mark.slow
def test_upload_a_photo_read_its_caption_and_hover_a_word(chromium, server, tmp_path):
    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out .words .w", timeout=60_000)
        words = page.locator("#cap-out .words .w")
        caption = " ".join(words.all_inner_texts())
        # the result said (the status is role=status), and the photo named by it
        assert words.count() >= 1 and page.locator("#cap-status").inner_text() == f"captioned: {caption}"
        (canvas,) = accessible(page, "#cap-out canvas")
        assert (canvas["role"], canvas["name"]) == ("image", f"photo: {caption}")
        page.wait_for_selector("#cap-out section[data-shown='-1']", state="attached")
        before = _canvas(page)  # the photo as captioned, before any word is chosen
        words.nth(0).hover()
        page.wait_for_selector("#cap-out section[data-shown='0']", state="attached")
        assert _canvas(page) != before  # the word's attention is drawn over the photo
        assert "word 1 of" in page.locator("#cap-out .info").inner_text()
        # the model's note on a photo unlike its training photos, shown beside the caption
        assert (
            "looks unlike what the model learned from (a tiny world)"
            in page.locator("#cap-out .note").first.inner_text()
        )
        page.keyboard.press("ArrowRight")  # the reports' keys step through the words
        if words.count() > 1:
            page.wait_for_selector("#cap-out section[data-shown='1']", state="attached")
        page.screenshot(path=str(tmp_path / "caption.png"))
        # the same photo picked again, a caption typed first: sent again and read (the file input kept its value,
        # so no change event fired and nothing was sent)
        page.fill("#cap-given", "a red circle")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out .read", timeout=60_000)
        assert page.locator("#cap-out .words .w").all_inner_texts() == ["a", "red", "circle"]
        assert page.errors == []


@pytest.mark.slow
def test_an_iphone_heic_photo_is_drawn_from_the_answers_preview(chromium, server):
    """Chromium draws no HEIC: before the answer carried a preview, the canvas stayed empty under the words."""
    spread = (
        "(() => { const c = document.querySelector('#cap-out canvas'); const d = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data; let lo = 255, hi = 0; for (let i = 0; i < d.length; i += 4) "
        "{ lo = Math.min(lo, d[i + 1]); hi = Math.max(hi, d[i + 1]); } return [c.width, c.height, hi - lo]; })()"
    )
    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.set_input_files("#pick", str(FIX / "photo_formats" / "coffee_turned.heic"))
        page.wait_for_selector("#cap-out section[data-shown='-1']", state="attached", timeout=60_000)
        page.wait_for_function(f"{spread}[2] > 100", timeout=10_000)  # the photo drawn (its onload is later)
        width, height, green = page.evaluate(spread)
        assert (width, height) == (321, 480) and green > 100, (width, height, green)  # upright, and the photo drawn
        assert "coffee_turned.heic · 171 × 256 px" in page.locator("#cap-out h2").inner_text()
        assert page.errors == []


@pytest.mark.slow
def test_translate_on_the_second_tab_and_hover_the_alignment(chromium, server):
    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.click("nav.tabs button[data-tab=translate]")
        assert page.get_attribute("#src", "lang") is None  # the server's tiny model does not say what it reads
        page.fill("#src", "ein mann\nein hund")
        page.click("#go")
        page.wait_for_selector("#tr-out table.grid", timeout=60_000)
        assert page.locator("#tr-out section").count() == 2
        said = page.locator("#tr-status").inner_text()
        assert said == "translated: " + " / ".join(page.locator("#tr-out p.translation").all_inner_texts())
        target = page.locator("#tr-out section").first.locator(".w.tgt")
        assert target.count() > 0  # a translation of words to hover (the check below was skipped without one)
        target.nth(0).hover()
        shaded = page.evaluate(
            "[...document.querySelectorAll('#tr-out section:first-child .w.src')].some(w => w.style.background)"
        )
        assert shaded  # the source words it looked at light up
        assert page.errors == []


@pytest.mark.slow
def test_an_oversized_upload_shows_its_error_on_the_page(chromium, server, tmp_path):
    big = tmp_path / "big.png"
    noise = np.random.default_rng(0).integers(0, 255, (600, 600, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, format="PNG")
    big.write_bytes(buf.getvalue())
    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.set_input_files("#pick", str(big))
        page.wait_for_selector("#cap-status.error", state="attached", timeout=60_000)
        assert "at most 0.5 MiB" in page.locator("#cap-status").inner_text()
        assert page.locator("#cap-out section").count() == 0
        # a refused upload is a message on the page, not a page error (the browser logs the 413 itself)
        assert all(e.startswith("console: Failed to load resource") for e in page.errors), page.errors


@pytest.mark.slow
def test_what_drives_each_word_beside_its_attention_on_both_tabs(chromium, server):
    def drawn(page, selector: str) -> str:
        return page.evaluate(f"document.querySelector('{selector}').toDataURL()")

    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.check("#cap-evidence")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out canvas.ev", timeout=60_000)
        page.wait_for_selector("#cap-out section[data-shown='-1']", state="attached")
        plain = drawn(page, "#cap-out canvas.ev")
        page.locator("#cap-out .words .w").nth(0).hover()
        page.wait_for_selector("#cap-out section[data-shown='0']", state="attached")
        assert drawn(page, "#cap-out canvas.ev") != plain  # the word's evidence drawn over the photo
        assert "agreement with what drives it" in page.locator("#cap-out .info").inner_text()
        page.click("nav.tabs button[data-tab=translate]")
        page.check("#tr-evidence")
        page.fill("#src", "ein mann")
        page.click("#go")
        page.wait_for_selector("#tr-out .w.drv", timeout=60_000)
        page.locator("#tr-out .w.tgt").nth(0).hover()
        assert "agreement of its attention" in page.locator("#tr-out .agree").inner_text()
        lit = page.evaluate("[...document.querySelectorAll('#tr-out .w.drv')].map(w => !!w.style.background)")
        (answer,) = server.post_json("/translate", {"text": "ein mann", "evidence": 1})[2]["translations"]
        assert lit == [v > 0 for v in answer["evidence"][0]]  # lit where masking costs the first word something
        assert page.errors == []


@pytest.mark.slow
def test_a_caption_and_a_translation_typed_are_read_with_each_words_probability(chromium, server):
    with browser_page(shared=chromium) as page:
        page.goto(server.url + "/")
        page.fill("#cap-given", "a red circle")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out .read", timeout=60_000)
        rec = server.post_file("/caption", PHOTO.read_bytes(), {"given": "a red circle"})[2]
        words = page.locator("#cap-out .words .w")
        assert words.all_inner_texts() == ["a", "red", "circle"]
        titles = [words.nth(t).get_attribute("title") for t in range(3)]  # 4 significant digits: 1e-5 is not 0
        assert all(t.startswith("p = ") for t in titles)
        assert [float(t[4:]) for t in titles] == pytest.approx(rec["word_probs"], rel=1e-3)
        assert f"mean log-probability {rec['score']:.4f}" in page.locator("#cap-out .read").inner_text()
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", "ein mann")
        page.fill("#tr-given", "a man")
        page.click("#go")
        page.wait_for_selector("#tr-out .read", timeout=60_000)
        (answer,) = server.post_json("/translate", {"text": "ein mann", "given": "a man"})[2]["translations"]
        tips = page.evaluate("[...document.querySelectorAll('#tr-out .w.tgt')].map(w => w.title)")
        assert [float(t[4:]) for t in tips] == pytest.approx(answer["token_probs"], rel=1e-3) and page.errors == []
        page.hover("#tr-out .w.src")  # a source word's weights: the read probability stays in the output's titles
        page.hover("#tr-out .w.tgt")
        after = page.evaluate("[...document.querySelectorAll('#tr-out .w.tgt')].map(w => w.title)")
        assert after == tips, (after, tips)


# --- the page to a screen reader and the keyboard alone, against answers in the API's shape (no server) -------------
ORIGIN = "http://attention-serve.test"  # never reached: the browser's requests to it are answered here
RECORD = {"model": "tiny", "caption": "a cat sleeps", "words": ["a", "cat", "sleeps"], "grid": [2, 2],
          "attention": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7], [0.25] * 4], "size": [256, 170],
          "crop_box": [0, 0, 256, 170], "chosen": None}  # fmt: skip
TRANSLATED = {"model": "tiny", "translations": [{"source": "ein mann", "translation": "a man", "tokens": ["a", "man"],
              "source_tokens": ["ein", "mann", "<eos>"], "attention": [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1]]}]}  # fmt: skip


@contextmanager
def _offline(chromium, translated: dict):
    """The page as render() writes it for a German text model, served with its CSP, /caption and /translate
    answered with RECORD and ``translated``."""
    from attention_serve.page import CSP, render

    html = render({"model": "tiny"}, {"model": "tiny", "network": "RNN"}, False, "de")
    answers = {"/": (html, "text/html"), "/caption": (json.dumps(RECORD), "application/json"),
               "/translate": (json.dumps(translated), "application/json")}  # fmt: skip

    def answer(route):
        body, kind = answers[route.request.url[len(ORIGIN) :]]
        route.fulfill(status=200, body=body, content_type=kind, headers={"Content-Security-Policy": CSP})

    with browser_page(shared=chromium) as page:
        page.route(f"{ORIGIN}/**", answer)
        yield page


@pytest.fixture
def offline_page(chromium):
    with _offline(chromium, TRANSLATED) as page:
        yield page


def _notes_under(chromium, translations: list[dict]) -> list[list[str]]:
    """Each translated sentence's notes on the page, for an answer of ``translations`` (the page raising nothing)."""
    with _offline(chromium, {**TRANSLATED, "translations": translations}) as page:
        page.goto(ORIGIN + "/")
        page.click("nav.tabs button[data-tab=translate]")
        page.click("#go")
        page.wait_for_selector("#tr-out table.grid")
        sections = page.locator("#tr-out section")
        notes = [sections.nth(i).locator(".note").all_inner_texts() for i in range(sections.count())]
        assert page.errors == []
    return notes


@pytest.mark.long
def test_a_translation_missing_an_address_typed_says_so_under_it(chromium):
    """The answer's lost_addresses (a bundled model garbles a web or e-mail address) in a note under the
    translation, as `translate` notes it; none without."""
    first = TRANSLATED["translations"][0]
    lost = {**first, "source": "ein mann: www.beispiel.de", "lost_addresses": ["www.beispiel.de"]}
    assert _notes_under(chromium, [lost, first]) == [
        ["missing from the translation (the model does not copy addresses), put back by hand: www.beispiel.de"], []
    ]  # fmt: skip


@pytest.mark.long
def test_words_the_model_never_saw_are_named_under_the_translation_unless_the_sentence_is_noted_unlike(chromium):
    """The answer's unseen_words (translated from their pieces: a guess) in a note under the translation, as
    `translate --html` says it; a sentence already noted as unlike the training text gets that note alone."""
    first = TRANSLATED["translations"][0]
    unseen = {**first, "unseen_words": ["Eisfischerhütte", "Regenwald"]}
    one = {**first, "unseen_words": ["Regenwald"]}  # "its pieces", as the Python line says it
    unlike = {**unseen, "unlike_source": True, "note": "this sentence looks unlike the German text"}
    assert _notes_under(chromium, [unseen, one, unlike, first]) == [
        [unseen_words_line(unseen["unseen_words"])], [unseen_words_line(["Regenwald"])],
        ["this sentence looks unlike the German text"], []
    ]  # fmt: skip


@pytest.mark.long
def test_words_holding_tokens_the_model_does_not_know_are_named_under_the_translation(chromium):
    """An emoji's byte pieces read as <unk>: the API listed '<0xF0>', ... and the page said nothing, where translate
    notes "unknown word(s) 🐶 read as <unk>". The answer's unknown_words in a note under the translation."""
    first = TRANSLATED["translations"][0]
    dog = {**first, "unknown": ["<0xF0>", "<0x9F>"], "unknown_words": ["🐶"]}
    assert _notes_under(chromium, [dog, first]) == [["the model does not know 🐶: read as <unk>"], []]


@pytest.mark.long
def test_a_caption_typed_or_another_option_applies_to_the_photo_shown(chromium, tmp_path):
    """A caption typed after a photo was captioned (Enter), or a box ticked, did nothing until the photo was picked
    again; and a click on the drop zone asked the hidden input for its chooser twice (its own click bubbled up)."""
    photo = tmp_path / "p.png"
    from PIL import Image

    Image.new("RGB", (32, 24), (200, 30, 30)).save(photo)
    with _offline(chromium, TRANSLATED) as page:
        sent = _sent(page, "/caption")
        page.goto(ORIGIN + "/")
        page.set_input_files("#pick", str(photo))
        page.wait_for_selector("#cap-out .words .w")
        page.fill("#cap-given", "a cat sleeps")
        page.press("#cap-given", "Enter")
        page.check("#cap-evidence")
        for _ in range(200):  # polled: the CSP allows no evaluated string
            if len(sent) == 3:
                break
            page.wait_for_timeout(25)
        assert len(sent) == 3 and b'name="given"' in sent[1] and b"a cat sleeps" in sent[1], sent
        assert b'name="evidence"' in sent[2]
        picks = page.evaluate("""() => { let n = 0; const pick = document.getElementById('pick');
            pick.addEventListener('click', (e) => { n += 1; e.preventDefault(); });
            document.getElementById('drop').click(); return n; }""")
        assert picks == 1 and page.errors == []


def _sent(page, path: str) -> list:
    """The bodies the page sends to ``path``, as it sends them (filled in as requests go)."""
    bodies: list = []
    page.on("request", lambda r: bodies.append(r.post_data_buffer) if r.url.endswith(path) else None)
    return bodies


def _unsure_shown(page, out: str) -> tuple[list[bool], str]:
    """Under ``out`` (#tr-out, #cap-out): which output words are underlined, and the line under them."""
    words = ".w.tgt" if out == "#tr-out" else ".words .w"
    marked = page.evaluate(f"[...document.querySelectorAll('{out} {words}')].map(w => w.classList.contains('unsure'))")
    return marked, page.locator(f"{out} .read").inner_text()


@pytest.mark.long
def test_mark_unsure_words_asks_for_the_reading_and_underlines_those_words(chromium):
    """The "mark unsure words" box sends probs=1; the answer's unsure_tokens are underlined, each token's probability on
    hover, and the line under the translation names the words as `translate --html` does."""
    from text_attn.core.unsure import unsure_line

    first = TRANSLATED["translations"][0]
    read = {**first, "tokens": ["▁a", "▁m", "an"], "attention": [[0.8, 0.1, 0.1]] * 3, "token_probs": [0.9, 0.2, 0.3],
            "words": ["a", "man"], "word_probs": [0.9, 0.06], "end_prob": 0.8, "unsure": [["man", 0.06]],
            "unsure_tokens": [1, 2]}  # fmt: skip
    with _offline(chromium, {**TRANSLATED, "translations": [read]}) as page:
        bodies = _sent(page, "/translate")
        page.goto(ORIGIN + "/")
        page.click("nav.tabs button[data-tab=translate]")
        page.check("#tr-unsure")
        page.click("#go")
        page.wait_for_selector("#tr-out table.grid")
        assert json.loads(bodies[-1])["probs"] == 1
        tips = page.evaluate("[...document.querySelectorAll('#tr-out .w.tgt')].map(w => w.title)")
        assert tips == ["p = 0.9000", "p = 0.2000", "p = 0.3000"]
        said = f"each output token's probability on hover (the model's own translation); underlined, " \
            f"{unsure_line([('man', 0.06)])}"  # fmt: skip
        assert _unsure_shown(page, "#tr-out") == ([False, True, True], said)
        assert page.errors == []


@pytest.mark.long
def test_the_wrapped_text_box_sends_a_paragraph_a_text_to_be_joined(chromium):
    """Checked, the text is cut at its blank lines (a paragraph a text, its line breaks kept for the server to join:
    paragraphs=1); unchecked, at every line break, as before."""
    typed = "Ein Mann läuft über die\nStraße.\n\n  \nZwei Hunde spielen im\nSchnee.\n"
    with _offline(chromium, {**TRANSLATED, "notes": ["text 1 breaks off mid-sentence"]}) as page:
        bodies = _sent(page, "/translate")
        page.goto(ORIGIN + "/")
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", typed)
        page.click("#go")
        page.wait_for_selector("#tr-out table.grid")
        sent = json.loads(bodies[-1])
        assert sent["paragraphs"] == 0 and len(sent["sentences"]) == 4
        assert page.locator("#tr-status").inner_text() == "translated: a man (note: text 1 breaks off mid-sentence)"
        page.check("#tr-paragraphs")
        page.click("#go")
        for _ in range(200):  # the CSP allows no evaluated string: polled here (each wait lets the page run)
            if len(bodies) == 2:
                break
            page.wait_for_timeout(25)
        sent = json.loads(bodies[-1])
        assert sent["paragraphs"] == 1
        assert sent["sentences"] == ["Ein Mann läuft über die\nStraße.", "Zwei Hunde spielen im\nSchnee."]
        assert page.errors == []
    # a list's translation laid out: each item on a line of its own under the grid, as the answer's laid_out has it
    laid = {"translation": "Ingredients: - a man", "laid_out": "Ingredients:\n- a man"}
    listed = {**TRANSLATED["translations"][0], **laid}
    with _offline(chromium, {**TRANSLATED, "translations": [listed]}) as page:
        page.goto(ORIGIN + "/")
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", "Zutaten:\n- ein Mann")
        page.click("#go")
        page.wait_for_selector("#tr-out p.translation")
        assert page.locator("#tr-out p.translation").inner_text() == "Ingredients:\n- a man"
        assert page.errors == []


@pytest.mark.long
def test_mark_unsure_words_on_the_caption_tab_asks_for_the_reading_and_underlines_them(chromium):
    """The caption tab's box sends probs=1 with the photo; the answer's unsure_words are underlined and named under
    the caption, as `caption --html` names them."""
    from text_attn.core.unsure import unsure_line

    read = {**RECORD, "word_probs": [0.9, 0.15, 0.6], "end_prob": 0.9, "score": -0.5, "unsure": [["cat", 0.15]],
            "unsure_words": [1]}  # fmt: skip
    with _offline(chromium, TRANSLATED) as page:
        page.route(f"{ORIGIN}/caption", lambda route: route.fulfill(status=200, body=json.dumps(read),
                                                                   content_type="application/json"))  # fmt: skip
        bodies = _sent(page, "/caption")
        page.goto(ORIGIN + "/")
        page.check("#cap-unsure")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out .read")
        assert b'name="probs"' in bodies[-1]
        said = f"each word's probability on hover (the model's own caption); underlined, " \
            f"{unsure_line([('cat', 0.15)], 0.2)}"  # fmt: skip
        assert _unsure_shown(page, "#cap-out") == ([False, True, False], said)
        assert page.errors == []


@pytest.mark.long
def test_the_page_to_a_screen_reader_and_the_keyboard(offline_page):
    """The audit's findings on the served page: tabs that did not say which is selected, a textarea named by its
    placeholder, German text with no language, a caption arriving unannounced, its photo (a canvas) and its ◀ / ▶
    buttons without names, the grid's scroll box out of the keyboard's reach, a sticky header covering most of a
    narrow window."""
    page = offline_page
    page.goto(ORIGIN + "/")
    tabs = accessible(page, "#tab-caption", "#tab-translate", "nav.tabs")
    assert [(t["role"], t["selected"]) for t in tabs[:2]] == [("tab", True), ("tab", False)]
    assert tabs[2]["role"] == "tablist" and page.get_attribute("#tab-translate", "aria-controls") == "translate"
    page.focus("#tab-caption")
    page.keyboard.press("ArrowRight")  # the tab list's keys: the next tab chosen and focused
    assert page.evaluate("document.activeElement.id") == "tab-translate" and not page.locator("#translate").is_hidden()
    (translate, source) = accessible(page, "#tab-translate", "#src")
    named = "sentences to translate, one or more a line (wrapped text: a paragraph between blank lines)"
    assert translate["selected"] is True and source["name"] == named
    assert page.evaluate("document.getElementById('src').lang") == "de"
    page.click("#go")
    page.wait_for_selector("#tr-out table.grid")
    assert page.locator("#tr-status").inner_text() == "translated: a man"
    assert page.evaluate("document.querySelector('#tr-out .w.src').closest('[lang]').lang") == "de"
    box, info = accessible(page, "#tr-out .grid-box", "#tr-out .info")
    assert (box["role"], box["name"], box["focusable"], info["live"]) == (
        "region", "alignment grid of sentence 1", True, "polite")  # fmt: skip
    page.focus("#tr-out section")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowUp")  # up to the source word "a" looked at most
    page.wait_for_selector("#tr-out section[data-shown='s0']", state="attached")
    page.click("#tab-caption")
    page.set_input_files("#pick", str(PHOTO))
    page.wait_for_selector("#cap-out section[data-shown='-1']", state="attached")
    assert page.locator("#cap-status").inner_text() == "captioned: a cat sleeps"
    canvas, prev, nxt, info = accessible(page, "#cap-out canvas", "#cap-out .prev", "#cap-out .next", "#cap-out .info")
    assert (canvas["role"], canvas["name"]) == ("image", "photo: a cat sleeps")
    assert (prev["name"], nxt["name"], info["live"]) == ("previous word", "next word", "polite")
    page.focus("#cap-out section")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#cap-out section[data-shown='1']", state="attached")
    assert page.locator("#cap-out .info").inner_text().endswith("strongest at row 2, column 2 of 2 × 2, lower right")
    assert page.evaluate("getComputedStyle(document.querySelector('header')).position") == "sticky"
    page.set_viewport_size({"width": 320, "height": 256})
    assert page.evaluate("getComputedStyle(document.querySelector('header')).position") == "static"
    assert page.errors == []


@pytest.mark.long
def test_the_translate_tab_speaks_the_models_language(chromium):
    """A Czech model's page said "Translate German", offered a German sentence and asked for one when the box was
    empty. The tab, the box and the status now say the model's language; a German sample for German alone, and no
    language named where the model file names none."""
    from attention_serve.page import CSP, render

    pages = {f"/{code}": render(None, {"model": "tiny", "network": "RNN"}, False, code) for code in ("de", "cs", None)}

    def answer(route):
        body = pages[route.request.url[len(ORIGIN) :]]
        route.fulfill(status=200, body=body, content_type="text/html", headers={"Content-Security-Policy": CSP})

    seen = {}
    with browser_page(shared=chromium) as page:
        page.route(f"{ORIGIN}/**", answer)
        for code in ("de", "cs", None):
            page.goto(f"{ORIGIN}/{code}")
            (tab,) = accessible(page, "#tab-translate")
            page.click("#tab-translate")
            box = (page.input_value("#src"), page.get_attribute("#src", "placeholder"))
            page.fill("#src", "")
            page.click("#go")  # nothing typed: the status asks for a sentence in the model's language
            seen[code] = (tab["name"], box, page.locator("#tr-status").inner_text())
        assert page.errors == []
    assert seen == {
        "de": (
            "Translate German",
            ("Zwei Männer spielen Fußball auf einer Wiese.", "Ein Hund rennt über eine grüne Wiese."),
            "type a German sentence first",
        ),
        "cs": ("Translate Czech", ("", None), "type a Czech sentence first"),
        None: ("Translate", ("", None), "type a sentence first"),
    }


@pytest.mark.long
def test_the_page_shows_pieces_as_the_words_they_spell_as_python_labels_them(chromium):
    """The answer keeps the model's pieces; the page labels them by text_attn.core.token_labels' rules in its own
    script (Live.shown), the source and output lines and the grid's headers alike."""
    from text_attn.core.token_labels import token_labels

    sequences = [
        ["▁Die", "▁Bü", "sche", "▁sind", "▁grün", ".", "<eos>"],
        ["▁is", "n", "'", "t", "<0xC5>", "▁", "(", "▁1", "2", "▁𝒳", "ö"],
        ["Bü@@", "sche", "sind", "gr@@", "ün", "."],
        ["a", "dog", "<eos>"],
        ["1", "9", "▁", "0"],
        ["▁mit", "▁", "<0xF0>", "<0x9F>", "<0x8E>", "<0x88>", "."],  # bytes that spell a character: it
        ["▁a", "<0xC5>", "<0x41>", "<0x9F>", "<0xFF>", "<0xD9>", "<0x85>", "▁x", "<0xC2>", "<0xA0>"],
        ["▁", "<0xD9>", "<0x85>", "<0xD8>", "<0xB1>"],
        ["▁mit", "<0xF0>", "<0x9F>", "<0xAB>", "<0xA8>", "<0xE2>", "<0x80>", "<0x8B>"],  # Unicode 15's 🫨, a ZWSP
        [],
    ]
    first = TRANSLATED["translations"][0]
    pieces = {**first, "source_tokens": sequences[0], "tokens": ["▁The", "▁bush", "es", "."],
              "attention": [[1 / 7] * 7] * 4}  # fmt: skip
    with _offline(chromium, {**TRANSLATED, "translations": [pieces]}) as page:
        page.goto(ORIGIN + "/")
        assert page.evaluate(f"{json.dumps(sequences)}.map((s) => Live.shown(s))") == [
            token_labels(s) for s in sequences
        ]
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", "Die Büsche sind grün.")
        page.click("#go")
        page.wait_for_selector("#tr-out table.grid")
        shown = page.evaluate("[...document.querySelectorAll('#tr-out .w.src')].map(w => w.textContent)")
        assert shown == ["Die", "Bü", "·sche", "sind", "grün", ".", "<eos>"]
        rows = page.evaluate("[...document.querySelectorAll('#tr-out table.grid tbody th')].map(th => th.textContent)")
        assert rows == ["The", "bush", "·es", "."]
        assert page.errors == []


@pytest.mark.long
def test_the_beams_other_captions_are_listed_and_one_clicked_is_read(chromium):
    """With a beam, the page asks for n_best (at most ALTERNATIVES + 1) and lists the beam's other captions under the
    caption; one clicked is sent back as the caption given, read against the same photo. Beam 1 asks for none."""
    from attention_serve.page import ALTERNATIVES

    kept = {**RECORD, "score": -0.5, "word_probs": [0.9, 0.5, 0.8], "end_prob": 0.9,
            "n_best": [{"caption": "a cat sleeps", "score": -0.5, "truncated": False},
                       {"caption": "a cat lies <b>", "score": -0.7, "truncated": False},
                       {"caption": "a dog", "score": None, "truncated": True}]}  # fmt: skip
    with _offline(chromium, TRANSLATED) as page:
        page.route(f"{ORIGIN}/caption", lambda route: route.fulfill(status=200, body=json.dumps(kept),
                                                                   content_type="application/json"))  # fmt: skip
        bodies = _sent(page, "/caption")
        page.goto(ORIGIN + "/")
        page.select_option("#beam", "8")
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out .alts")
        assert f'name="n_best"\r\n\r\n{ALTERNATIVES + 1}\r\n'.encode() in bodies[-1]
        alts = page.locator("#cap-out .alts button.alt")
        assert alts.all_inner_texts() == ["a cat lies <b>", "a dog"]  # text, never HTML
        assert [alts.nth(i).get_attribute("title") for i in range(2)] == [
            "score -0.7000",
            "score none, cut off at max_len",
        ]
        with page.expect_request(f"{ORIGIN}/caption") as sent:
            alts.nth(0).click()
        body = sent.value.post_data_buffer
        assert b'name="given"\r\n\r\na cat lies <b>\r\n' in body and b'name="n_best"' not in body
        page.locator("#cap-status", has_text="read:").wait_for()  # the answer shown (no eval: the page's CSP)
        assert page.input_value("#cap-given") == ""  # the box as the user left it: the next photo is captioned
        assert page.locator("#cap-out .read").inner_text().startswith("the beam's caption, read by the model")
        with page.expect_request(f"{ORIGIN}/caption") as sent:  # and back to the model's own caption
            page.click("#cap-out .alts button.alt:has-text('back to the model')")
        assert b'name="given"' not in sent.value.post_data_buffer and b'name="n_best"' in sent.value.post_data_buffer
        page.locator("#cap-out .alts button.alt", has_text="a dog").wait_for()
        page.select_option("#beam", "1")
        with page.expect_request(f"{ORIGIN}/caption") as sent:
            page.set_input_files("#pick", str(PHOTO))
        assert b'name="beam_size"\r\n\r\n1\r\n' in sent.value.post_data_buffer
        assert b'name="n_best"' not in sent.value.post_data_buffer
        assert page.errors == []


@pytest.mark.long
def test_a_translations_other_outputs_are_listed_and_one_clicked_is_read_in_its_place(chromium):
    """The translate tab asks for n_best with a beam and lists each sentence's other translations; one clicked is
    read for that sentence alone (its section replaced), and a button translates it again as the form says."""
    (one,) = TRANSLATED["translations"]
    answer = {**TRANSLATED, "translations": [{**one, "token_probs": [0.9, 0.8], "end_prob": 0.9, "score": -0.2,
              "n_best": [{"translation": "a man", "score": -0.2, "truncated": False},
                         {"translation": "one man", "score": -0.6, "truncated": False}]}]}  # fmt: skip
    with _offline(chromium, answer) as page:
        page.goto(ORIGIN + "/")
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", "ein mann\nein hund")
        page.select_option("#tr-beam", "3")
        with page.expect_request(f"{ORIGIN}/translate") as sent:
            page.click("#go")
        assert json.loads(sent.value.post_data)["n_best"] == 3
        page.wait_for_selector("#tr-out .alts button.alt")
        assert page.locator("#tr-out section").count() == 1  # the answer's one translation (routed)
        assert page.locator("#tr-out .alts button.alt").all_inner_texts() == ["one man"]
        with page.expect_request(f"{ORIGIN}/translate") as sent:
            page.click("#tr-out .alts button.alt")
        assert json.loads(sent.value.post_data) == {"sentences": ["ein mann"], "given": "one man", "evidence": 0}
        page.locator("#tr-out .read", has_text="the beam's translation, read by the model").wait_for()
        with page.expect_request(f"{ORIGIN}/translate") as sent:
            page.click("#tr-out button.alt:has-text('back to the model')")
        body = json.loads(sent.value.post_data)
        assert body["sentences"] == ["ein mann"] and body["beam_size"] == 3 and "given" not in body
        page.locator("#tr-status", has_text="translated: a man").wait_for()
        assert page.errors == []


@pytest.mark.long
def test_the_pages_second_audit_long_outputs_typed_text_failed_uploads_double_clicks_and_keys(chromium, tmp_path):
    """The second audit of the page (375 px wide): a beam's run-on word ran the page sideways; a translation typed
    was said "translated:"; a failed upload's error did not name the file and sat over the earlier photo's card as if
    it were this one's; a double click sent the request twice; Space on the drop zone also scrolled the page; the
    fields of a text to read had no visible label."""
    from attention_serve.page import CSP, render

    html = render({"model": "tiny"}, {"model": "tiny", "network": "RNN"}, False, "de")
    refused = {"error": "the upload is not an image in a photo format (JPEG, PNG, WebP, ...)"}
    captions = [(200, RECORD), (415, refused)]
    held: list = []  # the /translate requests, answered when the test says

    def answer(route):
        path = route.request.url[len(ORIGIN) :]
        if path == "/":
            route.fulfill(status=200, body=html, content_type="text/html", headers={"Content-Security-Policy": CSP})
        elif path == "/caption":
            status, body = captions.pop(0)
            route.fulfill(status=status, body=json.dumps(body), content_type="application/json")
        else:
            held.append(route)

    def reply(body: dict) -> None:
        while not held:
            page.wait_for_timeout(20)
        held.pop(0).fulfill(status=200, body=json.dumps(body), content_type="application/json")

    not_a_photo = tmp_path / "notimage.jpg"
    not_a_photo.write_bytes(b"plain text, named .jpg")
    with browser_page(shared=chromium) as page:
        page.set_viewport_size({"width": 375, "height": 700})
        page.route(f"{ORIGIN}/**", answer)
        page.goto(ORIGIN + "/")
        labels = page.evaluate("[...document.querySelectorAll('label.given')].map(l => l.textContent.trim())")
        assert labels == ["or read a caption:", "or read a translation:"]
        page.set_input_files("#pick", str(PHOTO))
        page.wait_for_selector("#cap-out section[data-shown='-1']", state="attached")
        page.evaluate("window.scrollTo(0, 0)")
        page.evaluate("document.getElementById('pick').addEventListener('click', () => { window.picked = true; })")
        page.focus("#drop")
        page.keyboard.press(" ")
        page.wait_for_timeout(300)  # a scroll is smooth, not at once
        assert page.evaluate("[window.picked, window.scrollY]") == [True, 0]
        page.set_input_files("#pick", str(not_a_photo))
        page.wait_for_selector("#cap-status.error", state="attached")
        said = page.locator("#cap-status").inner_text()
        assert said == f"notimage.jpg: {refused['error']} (shown below: the one before)"
        page.click("nav.tabs button[data-tab=translate]")
        page.fill("#src", "ein mann")
        page.fill("#tr-given", "a man")
        page.click("#go")
        assert page.evaluate("document.getElementById('go').disabled")  # while it is asked: one request
        page.click("#go", force=True)
        reply(TRANSLATED)
        page.locator("#tr-status", has_text="read: a man").wait_for()
        assert not page.evaluate("document.getElementById('go').disabled")
        page.wait_for_timeout(200)
        assert held == []  # the second click sent nothing
        page.fill("#tr-given", "")
        page.select_option("#tr-beam", "3")
        page.click("#go")
        run_on = "a morning" + "ning" * 30
        (one,) = TRANSLATED["translations"]
        reply({**TRANSLATED, "translations": [{**one, "n_best": [
            {"translation": "a man", "score": -0.2, "truncated": False},
            {"translation": run_on, "score": -3.0, "truncated": True}]}]})  # fmt: skip
        page.wait_for_selector("#tr-out .alts button.alt")
        assert page.locator("#tr-status").inner_text() == "translated: a man"
        inside = page.evaluate("""() => {
            const b = document.querySelector('#tr-out .alts button.alt').getBoundingClientRect();
            const s = document.querySelector('#tr-out section').getBoundingClientRect();
            return [b.right <= s.right, document.documentElement.scrollWidth]; }""")
        assert inside == [True, 375]
        # the refused upload is a message on the page; the browser logs the 415 itself
        assert page.errors == ["console: Failed to load resource: the server responded with a status of 415 "
                               "(Unsupported Media Type)"]  # fmt: skip
