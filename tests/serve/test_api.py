"""attention-serve's JSON API against a real server process on a free port (tiny random models: the plumbing is under
test): answers equal to the in-process Captioner and Translator, every bad request a JSON 4xx naming the problem with
one log line while the server keeps serving, the API key, the queue limit, and a stop that answers what is in flight.
The tests run in order on one server; the last one stops it."""

from __future__ import annotations

import base64
import io
import json
import socket
import struct
import sys
import threading
import time
import zlib
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from helpers.attacks import scan_bomb
from helpers.server import Server
from helpers.tiny_captioner import flag_every_photo, tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from helpers.waiting import until
from PIL import Image

# -m long (out of the default run; CI runs it): one real server for the file (~10 s to start), requests through it
pytestmark = pytest.mark.long

FIX = Path(__file__).parent.parent / "fixtures"
PHOTO = FIX / "images" / "coffee.png"
KEY = "test-key-123"
EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    from text_attn.translation.source_check import source_check
    from text_attn.translation.translator import Translator

    flag_every_photo(tiny_model_file(folder / "caption.pt"))  # the note's whole path runs
    text = Translator.load(tiny_word_model_file(folder / "text.pt"))
    text.source_check = source_check(["ein mann", "ein hund", "der mann"] * 5, ["ein mann", "ein hund"], "de")
    text.save(folder / "text.pt")
    return {"caption": folder / "caption.pt", "text": folder / "text.pt"}


@pytest.fixture(scope="module")
def _shared(models, tmp_path_factory):
    args = ["--caption-model", str(models["caption"]), "--text-model", str(models["text"]), "--max-upload-mb",
            "0.5", "--max-queue", "2", "--max-sentences", "4", "--max-chars", "200", "--api-key", KEY, "--grace",
            "20", "--read-timeout", "3", "--max-search", "5000", "--max-evidence", "100"]  # fmt: skip
    shared = {"start": lambda: Server(args, tmp_path_factory.mktemp("log") / "server.log", key=KEY)}
    shared["server"] = shared["start"]()
    yield shared
    shared["server"].stop()


@pytest.fixture
def server(_shared) -> Server:
    """The file's one server; started again where a test stopped it (the stop's test is the file's last, but a run in
    another order, or of chosen tests, has later tests that need it: they failed, connection refused)."""
    if _shared["server"].proc.poll() is not None:
        _shared["server"] = _shared["start"]()
    return _shared["server"]


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _bomb(width: int, height: int) -> bytes:
    """A tiny PNG file that claims width x height pixels (a decompression bomb's header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")
    )


def _many_keys(n: int) -> bytes:
    """A JSON object of ``n`` distinct keys (40,000: 356 KB, which held the event loop for 27 s)."""
    return ("{" + ",".join(f'"{i:x}": 0' for i in range(n)) + "}").encode()


def _reference_caption(model: Path, data: bytes, options: dict) -> list[str]:
    """What the server must answer: the photo through the same decoding and preprocessing as `caption`, in process."""
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import load_photo

    cap = Captioner.load(model)
    image, _ = load_photo(data, cap.preprocess.decode_side)
    feats = cap.encode(cap.preprocess(image).unsqueeze(0))
    extra = {"no_repeat_ngram": options["no_repeat_ngram"]} if options["no_repeat_ngram"] else {}
    (result,) = cap.caption_features(feats, options["beam_size"], options["max_len"], options["length_penalty"],
                                     **extra)  # fmt: skip
    return result.words


def test_health_info_and_the_openapi_page(server):
    assert server.get("/health", key=False)[0] == 200  # health needs no key
    assert not server.announced_early  # the "serving" line came once the port was open, not ~4 s before
    status, _, info = server.get("/info")
    assert status == 200 and info["model"]["caption"]["model"] == "caption.pt"
    assert info["model"]["translate"]["decoding"]["beam_size"] == 1
    assert info["limits"] == {
        "max_upload_mb": 0.5,
        "max_pixels": 89.5,
        "max_sentences": 4,
        "max_chars": 200,
        "max_search": 5000,
        "max_evidence": 100,
        "max_queue": 2,
        "read_timeout": 3.0,
    }  # as the options set them; never the key
    assert KEY not in json.dumps(info)
    # a key on the command line is readable in the process list: said once, at the start (docs/serve.md: the variable)
    assert server.log.read_text().count("--api-key puts the key in the process list") == 1
    import litserve
    import torch

    package = version("attention-toolkit")
    want = {"attention-serve": package, "torch": torch.__version__, "litserve": litserve.__version__}
    assert info["versions"] == want
    status, _, spec = server.get("/openapi.json", key=False)
    assert status == 200 and {"/caption", "/translate"} <= set(spec["paths"])
    # the document is this server's, not FastAPI's {"title": "FastAPI", "version": "0.1.0"}; the key is declared
    assert spec["info"]["title"] == "attention-serve" and spec["info"]["version"] == package
    assert set(spec["components"]["securitySchemes"]) == {"bearer", "apiKey"}
    assert spec["components"]["securitySchemes"]["apiKey"]["name"] == "X-API-Key"
    for path, method in (("/caption", "post"), ("/translate", "post"), ("/info", "get")):
        assert spec["paths"][path][method]["security"] == [{"bearer": []}, {"apiKey": []}]
    assert "security" not in spec["paths"]["/health"]["get"]
    assert "multipart/form-data" in spec["paths"]["/caption"]["post"]["requestBody"]["content"]
    # the document says what the server does: the page is HTML, /health may say 503, options may come in the query
    paths = spec["paths"]
    assert list(paths["/"]["get"]["responses"]["200"]["content"]) == ["text/html"]
    assert {"200", "503"} <= set(paths["/health"]["get"]["responses"]) and "401" in paths["/info"]["get"]["responses"]
    for route in ("/caption", "/translate"):
        post = paths[route]["post"]
        assert {"401", "404", "408", "413", "415", "422", "503", "504"} <= set(post["responses"])
        assert {p["name"] for p in post["parameters"] if p["in"] == "query"} >= {"beam_size", "max_len", "given"}
        # strict OpenAPI 3.1 tools (validators, code generators) refuse any other field in a Media Type Object
        for media in post["requestBody"]["content"].values():
            assert set(media) <= {"schema", "example", "examples", "encoding"}, media


def test_the_openapi_document_is_valid_openapi(server):
    """The whole document against the OpenAPI 3.1 schema (the validator is a dev dependency: it was imported where
    installed, and the check passed silently where not, as in CI)."""
    validate = pytest.importorskip("openapi_spec_validator", reason="openapi-spec-validator is not installed").validate
    status, _, spec = server.get("/openapi.json", key=False)
    assert status == 200
    validate(spec)


def test_a_caption_equals_the_in_process_captioner_in_every_upload_form(server, models):
    from captioning.model.captioner import Captioner

    data = PHOTO.read_bytes()
    status, _, rec = server.post_file("/caption", data, {"beam_size": "2"})
    assert status == 200, rec
    width, height = Image.open(PHOTO).size
    assert rec["words"] == _reference_caption(models["caption"], data, rec["options"]) and rec["words"]
    assert rec["caption"] == " ".join(rec["words"]) and rec["options"]["beam_size"] == 2
    attention = np.asarray(rec["attention"])
    assert attention.shape == (len(rec["words"]), 16) and rec["grid"] == [4, 4]
    np.testing.assert_allclose(attention.sum(axis=1), 1.0, atol=1e-3)  # each word's weights sum to 1
    assert rec["size"] == [width, height] and rec["model"] == "caption.pt"
    side = min(width, height)
    assert rec["crop_box"] == [(width - side) / 2, (height - side) / 2, (width + side) / 2, (height + side) / 2]
    assert rec["out_of_domain"] is True and rec["note"] == Captioner.load(models["caption"]).note()
    assert rec["note"] == "this image looks unlike what the model learned from (a tiny world): the caption may be wrong"
    raw = server.request("POST", "/caption?beam_size=2", data, {"Content-Type": "image/png"})
    as_json = server.post_json("/caption", {"image": base64.b64encode(data).decode(), "beam_size": 2})
    # base64 as tools write it: wrapped in lines (Python's encodebytes, the base64 command), a browser's data: URL
    wrapped = server.post_json("/caption", {"image": base64.encodebytes(data).decode(), "beam_size": 2})
    crlf = base64.encodebytes(data).decode().replace("\n", "\r\n")
    wrapped_crlf = server.post_json("/caption", {"image": crlf, "beam_size": 2})
    url = server.post_json("/caption", {"image": "data:image/png;base64," + base64.b64encode(data).decode(),
                                        "beam_size": 2})  # fmt: skip
    # base64url's letters, and no "=" padding (JavaScript's, a JWT's): "not valid base64" before
    bare = server.post_json("/caption", {"image": base64.urlsafe_b64encode(data).decode().rstrip("="), "beam_size": 2})
    for status, _, other in (raw, as_json, wrapped, wrapped_crlf, url, bare):
        assert status == 200 and other["words"] == rec["words"] and other["attention"] == rec["attention"], other


def test_sentences_equal_the_in_process_translator(server, models):
    from text_attn.translation.translator import Translator

    status, _, res = server.post_json("/translate", {"sentences": ["ein mann", "ein hund"], "beam_size": 2})
    assert status == 200, res
    expected = Translator.load(models["text"]).translate(["ein mann", "ein hund"], beam_size=2)
    assert [t["translation"] for t in res["translations"]] == [e.text for e in expected]
    for t, e in zip(res["translations"], expected, strict=True):
        a = np.asarray(t["attention"])
        assert a.shape == (len(t["tokens"]), len(t["source_tokens"])) and t["source_tokens"][-1] == "<eos>"
        np.testing.assert_allclose(a, e.attention.numpy(), atol=1e-4)
    status, _, one = server.post_json("/translate", {"text": "ein mann"})
    assert status == 200 and len(one["translations"]) == 1
    # the model's note on a sentence unlike its training text (English here), as translate shows it
    assert res["translations"][0]["unlike_source"] is False and res["translations"][0]["note"] is None
    status, _, other = server.post_json("/translate", {"text": "the quick brown fox jumps over it"})
    assert status == 200 and other["translations"][0]["unlike_source"] is True
    assert other["translations"][0]["note"] == Translator.load(models["text"]).note()
    assert "the German text the model learned from" in other["translations"][0]["note"]


def test_paragraphs_1_joins_a_texts_lines_as_translate_paragraphs_does(server, models):
    """Wrapped text: its lines joined before it is read, a word a hyphen broke made whole (the model's words asked:
    "mann" is one), so it is translated as the line typed whole; a list's items each on its own, their markers put
    back, as in the process; without the option a line break ends a sentence."""
    status, _, res = server.post_json("/translate", {"sentences": ["ein\nman-\nn", "ein mann"], "paragraphs": 1})
    assert status == 200, res
    wrapped, typed = res["translations"]
    assert wrapped["source"] == "ein mann" and wrapped["translation"] == typed["translation"]
    assert res["options"]["paragraphs"] == 1
    status, _, res = server.post_json("/translate", {"text": "ein\nmann"})
    assert status == 200 and res["translations"][0]["source"] == "ein\nmann"
    assert res["translations"][0]["sentence_count"] == 2
    listed = "ein mann\n- ein hund\n- ein mann"
    status, _, res = server.post_json("/translate", {"text": listed, "paragraphs": 1})
    from text_attn.translation.translator import Translator

    (expected,) = Translator.load(models["text"]).translate([listed], paragraphs=True)
    assert status == 200 and res["translations"][0]["translation"] == expected.text
    assert expected.marks == ["", "- ", "- "]
    # laid out as the text was: each item on a line of its own (the page shows it so)
    assert res["translations"][0]["laid_out"] == expected.laid_out and expected.laid_out.count("\n") == 2
    status, _, res = server.post_json("/translate", {"text": "ein mann", "paragraphs": 2})
    assert status == 422 and "paragraphs" in res["error"]
    # a wrapped paragraph sent a line a text: said in the answer's notes, as translate says it; not with paragraphs=1
    lines = ["Ein Mann läuft über die", "Straße.", "Ein Hund"]
    status, _, res = server.post_json("/translate", {"sentences": lines})
    assert status == 200 and len(res["notes"]) == 1 and res["notes"][0].startswith("text 1 breaks off mid-sentence")
    status, _, res = server.post_json("/translate", {"sentences": lines, "paragraphs": 1})
    assert status == 200 and res["notes"] == []


def test_evidence_1_answers_what_drives_each_word_as_the_in_process_call_does(server, models):
    """The option both routes take (issue 73): the same leave-one-out maps and agreements as Python gives."""
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import load_photo
    from text_attn.core.faithfulness import rounded_taus
    from text_attn.translation.explain import translation_evidence
    from text_attn.translation.translator import Translator

    data = PHOTO.read_bytes()
    # max_len 5: each of the tiny model's 16 regions and none x 5 words, within the module server's --max-evidence 100
    status, _, rec = server.post_file("/caption", data, {"beam_size": "1", "max_len": "5", "evidence": "1"})
    assert status == 200 and rec["options"]["evidence"] == 1, rec
    cap = Captioner.load(models["caption"])
    image, _ = load_photo(data, cap.preprocess.decode_side)
    found = cap.evidence(cap.encode(cap.preprocess(image).unsqueeze(0)), rec["words"])
    np.testing.assert_allclose(rec["evidence"], found.evidence.numpy(), atol=1e-4)
    assert rec["agreement"] == rounded_taus(found.agreement)
    assert "evidence" not in server.post_file("/caption", data, {"beam_size": "1"})[2]  # off by default
    status, _, res = server.post_json("/translate", {"text": "ein mann", "evidence": 1})
    (t,) = res["translations"]
    expected = translation_evidence(Translator.load(models["text"]), t["source_tokens"][:-1], t["tokens"])
    np.testing.assert_allclose(t["evidence"], expected.evidence.numpy(), atol=1e-4)
    assert status == 200 and t["agreement"] == rounded_taus(expected.agreement)
    status, _, err = server.post_json("/translate", {"text": "ein mann", "evidence": 2})
    assert status == 422 and "evidence must be an integer from 0 to 1" in err["error"]
    status, _, err = server.post_json("/translate", {"text": "ein mann", "evidence": True})
    assert status == 422 and err["error"].endswith("got true"), err  # JSON's word for it, not Python's True


def test_given_reads_a_text_as_the_in_process_call_does(server, models):
    """The "given" option of both routes: the text read, each word's probability and attention, as caption --given
    and translate --given read it; requests with and without it answered apart."""
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import load_photo
    from text_attn.translation.translator import Translator

    data = PHOTO.read_bytes()
    status, _, rec = server.post_file("/caption", data, {"given": "A red circle."})
    assert status == 200 and rec["options"] == {"given": "A red circle."}, rec["options"]  # no search: its defaults out
    assert rec["words"] == ["A", "red", "circle"]
    cap = Captioner.load(models["caption"])
    assert rec["unknown"] == cap.unknown_words("A red circle.")  # read as <unk>: said, as caption --given notes it
    status, _, odd = server.post_file("/caption", data, {"given": "A zorblax circle."})
    assert status == 200 and "zorblax" in odd["unknown"]
    image, _ = load_photo(data, cap.preprocess.decode_side)
    (read,) = cap.read_features(cap.encode(cap.preprocess(image).unsqueeze(0)), "A red circle.")
    np.testing.assert_allclose(rec["word_probs"], read.probs, rtol=1e-4)
    np.testing.assert_allclose(rec["attention"], read.alphas.numpy(), atol=1e-4)
    assert rec["score"] == pytest.approx(read.score, abs=1e-5) and rec["end_prob"] == pytest.approx(read.end_prob)
    assert rec["out_of_domain"] is True and rec["note"] == cap.note(given=True)  # its scores in doubt, not its words
    assert "word_probs" not in server.post_file("/caption", data)[2]  # the model's own caption: no probabilities
    status, _, res = server.post_json("/translate", {"sentences": ["ein mann", "ein hund"], "given": "a man"})
    reads = Translator.load(models["text"]).read(["ein mann", "ein hund"], "a man")
    assert status == 200 and [t["tokens"] for t in res["translations"]] == [["a", "man"]] * 2
    for t, want in zip(res["translations"], reads, strict=True):
        np.testing.assert_allclose(t["token_probs"], want.probs, rtol=1e-4)
        np.testing.assert_allclose(t["word_probs"], want.word_probs, rtol=1e-4)
        assert t["score"] == pytest.approx(want.score, abs=1e-5)


def _bad_requests(server) -> list[tuple[str, tuple, int, str]]:
    png = PHOTO.read_bytes()
    ico = io.BytesIO()
    Image.open(PHOTO).convert("RGB").save(ico, format="ICO")
    ico = ico.getvalue()
    big = _png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (600, 600, 3), dtype=np.uint8)))
    form = (b'--XYZ\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png'
            b"\r\n\r\n" + png + b"\r\n--XYZ--\r\n")  # fmt: skip
    multipart = {"Content-Type": "multipart/form-data; boundary=XYZ"}
    return [
        ("a multipart body cut off", server.request("POST", "/caption", form[: len(form) // 2], multipart), 422,
         "cut off before its end"),
        ("over --max-upload-mb", server.post_file("/caption", big), 413, "0.5 MiB"),
        ("not an image", server.post_file("/caption", b"hello, not a photo"), 415, "not an image"),
        ("truncated PNG", server.post_file("/caption", png[: len(png) * 2 // 3]), 422, "damaged"),
        # its sides from its header (it said "more than 179.0 megapixels", the header knowing them)
        ("a decompression bomb", server.post_file("/caption", _bomb(30000, 30000)), 413,
         "the image has 30000 x 30000 pixels, 900 megapixels; at most 89.5"),
        ("a bomb under Pillow's own limit", server.post_file("/caption", _bomb(12000, 12000)), 413,
         "the image has 12000 x 12000 pixels, 144 megapixels; at most 89.5"),
        ("empty body", server.request("POST", "/caption", b"", {"Content-Type": "image/png"}), 422, "empty"),
        ("the photo in another field", server.post_file("/caption", png, field="photo"), 422, "'image'"),
        ("unknown option", server.post_file("/caption", png, {"colour": "red"}), 422, "colour"),
        ("beam size out of range", server.post_file("/caption", png, {"beam_size": "0"}), 422, "beam_size"),
        ("beam size not a number", server.post_file("/caption", png, {"beam_size": "x"}), 422, "beam_size"),
        ("given beside beam_size", server.post_file("/caption", png, {"given": "a dog", "beam_size": "2"}), 422,
         "beam_size is for the text the model writes"),
        ("given without a word", server.post_json("/translate", {"text": "ein", "given": " .. "}), 422,
         "given must be a text with a word"),
        ("given too long", server.post_json("/translate", {"text": "ein", "given": "a " * 150}), 413,
         "given has 299 characters"),
        ("an unknown content type", server.request("POST", "/caption", b"x", {"Content-Type": "text/csv"}), 415,
         "multipart"),
        ("JSON without an image", server.post_json("/caption", {"photo": "x"}), 422, '"image"'),
        ("image not base64", server.post_json("/caption", {"image": "@@@"}), 422, "base64"),
        ("a data: URL of another type", server.post_json("/caption", {"image": "data:text/plain;base64,aGk="}), 422,
         "not of an image in base64"),
        ("a truncated ICO", server.post_file("/caption", ico[:200]), 422, "damaged"),
        # a client's Content-Type is cut as any value of its is (a 1 MB header was a 1 MB answer and log line)
        ("a long Content-Type (caption)", server.request("POST", "/caption", b"x", {"Content-Type": "text/" +
         "x" * 5000}), 415, "..."),
        ("a long Content-Type (translate)", server.request("POST", "/translate", b"{}", {"Content-Type": "text/" +
         "x" * 5000}), 415, "..."),
        # the tiny model's 10 words: the worker refused beam 11, and LitServe answered its whole batch with a 500
        ("a beam wider than the model's words", server.post_json("/translate", {"text": "ein mann", "beam_size": 11}),
         422, "beam_size 11 is more than the model's 10 words: at most 10"),
        # a JSON integer of 400 digits: float() overflowed in the range check, a 500
        ("a number too large for a float", server.request("POST", "/translate", b'{"text": "ein", "beam_size": 1' +
         b"0" * 400 + b"}", {"Content-Type": "application/json"}), 422, "beam_size must be an integer from 1 to 20"),
        ("a search too wide", server.post_json("/translate", {"text": "ein mann " * 11, "beam_size": 10}), 413,
         "1 sentence of 22 source tokens, beam_size 10, up to 56 output tokens (the end counted): 44,414 steps"),
        # 2 source tokens, yet 20 beams for 512 steps: the output's length is the cost (it was allowed: minutes)
        ("a search that may run long", server.post_json("/translate", {"text": "ein mann", "beam_size": 20,
         "max_len": 512}), 413, "at most 5,000 (--max-search)"),
        ("caption evidence that could take too long", server.post_file("/caption", png, {"given": "a " * 90,
         "evidence": "1"}), 413, "1,530 model steps (17 rows: each region left out and none, x 90 words)"),
        ("40,000 JSON keys", server.request("POST", "/caption", _many_keys(40_000),
         {"Content-Type": "application/json"}), 413, "more than 1,024 values"),
        ("a progressive JPEG of 200 scans (a scan bomb)", server.request("POST", "/caption", scan_bomb(64, 200),
         {"Content-Type": "image/jpeg"}), 413, "more than 100 scans"),
        ("a Host header naming another site (DNS rebinding)", server.get("/health", headers={"Host":
         "attacker.example:80"}), 400, "not a name this server answers to"),
        ("a path ending in a newline (/info%0A)", server.get("/info%0A", key=False), 404, "Not Found"),
        ("evidence that could take too long", server.post_json("/translate", {"text": "ein " * 20, "evidence": 1}),
         413, "may take 1,092 model steps"),
        ("a sentence too long", server.post_json("/translate", {"text": "ein " * 100}), 413, "characters"),
        ("too many sentences", server.post_json("/translate", {"sentences": ["ein"] * 5}), 413, "at most 4"),
        ("an empty sentence", server.post_json("/translate", {"sentences": ["ein", " "]}), 422, "empty"),
        ("text and sentences", server.post_json("/translate", {"text": "a", "sentences": ["b"]}), 422, "not both"),
        ("translate option out of range", server.post_json("/translate", {"text": "ein", "max_len": 0}), 422,
         "max_len"),
        ("translate body not JSON", server.request("POST", "/translate", b"{", {"Content-Type": "application/json"}),
         422, "not valid JSON (Expecting property name enclosed in double quotes at character 2)"),
        ("translate body not JSON typed", server.request("POST", "/translate", b"ein", {"Content-Type": "text/plain"}),
         415, "JSON"),
        ("EPS (PostScript: never handed to Ghostscript)", server.request("POST", "/caption", EPS,
         {"Content-Type": "image/eps"}), 415, "not an image"),
        ("a number too long to parse", server.request("POST", "/translate", b'{"text": "ein", "beam_size": ' +
         b"9" * 5000 + b"}", {"Content-Type": "application/json"}), 422,
         "the JSON holds a number of more digits than are read (4,300)"),  # valid JSON: it said "not valid"
        # 5,000 deep: refused by the parser up to Python 3.12 (413: it said "not valid JSON (RecursionError)"); 3.13's
        # takes it, and an array is no object
        ("JSON nested too deep", server.request("POST", "/translate", b"[" * 5000 + b"]" * 5000,
         {"Content-Type": "application/json"}), 422 if sys.version_info >= (3, 13) else 413,
         "send a JSON object" if sys.version_info >= (3, 13) else "nested deeper than the parser goes"),
        ("a lone surrogate", server.request("POST", "/translate", b'{"text": "ein \\ud800 mann"}',
         {"Content-Type": "application/json"}), 422, "not valid Unicode"),
        ("a JSON key twice", server.request("POST", "/translate", b'{"text": "ein", "text": "mann"}',
         {"Content-Type": "application/json"}), 422, "given twice"),
        ("a form field twice", server.post_file("/caption", png, {"beam_size": "2", "max_len": "3"},
                                                field="beam_size"), 422, "given twice"),
        ("an option in the query and the body",
         server.post_file("/caption?beam_size=2", png, {"beam_size": "3"}), 422, "in both"),
        ("a padded number", server.post_file("/caption", png, {"beam_size": " 2 "}), 422, "beam_size"),
        ("an empty value in the query", server.post_json("/translate?beam_size=", {"text": "ein"}), 422, "beam_size"),
        ("an empty given in the query", server.post_file("/caption?given=", png), 422, "given must be a text"),
        # a %-escape of Latin-1: read as U+FFFD and captioned "caf dog" (the same bytes in a JSON body were a 422)
        ("a query string not UTF-8", server.post_file("/caption?given=caf%E9%20dog", png), 422, "not UTF-8"),
        ("a long unknown option is cut in the message", server.post_file("/caption", png, {"x" * 500: "1"}), 422,
         "..."),
        ("no such path", server.get("/nope"), 404, "Not Found"),
        ("a trailing slash (no redirect)", server.post_file("/caption/", png), 404, "Not Found"),
        ("a wrong method", server.request("PUT", "/caption", b"x", {"Content-Type": "image/png"}), 405, "Method"),
        ("the CDN-loading docs page is off", server.get("/docs", key=False), 404, "Not Found"),
        ("no API key", server.post_file("/caption", png, key=False), 401, "API key"),
        ("a wrong API key", server.request("GET", "/info", headers={"X-API-Key": "nope"}, key=False), 401, "API key"),
    ]  # fmt: skip


def test_every_bad_request_is_a_json_4xx_naming_it_and_one_log_line(server):
    before = server.log.read_text().count("attention-serve: 4")
    cases = _bad_requests(server)
    rows, bad = [], []
    for name, (status, _head, body), want, says in cases:
        rows.append(f"| {name} | {status} | {body.get('error') if isinstance(body, dict) else body!r} |")
        if status != want or not isinstance(body, dict) or says not in body.get("error", "") or body["status"] != want:
            bad.append(f"{name}: {status} {body!r} (want {want}, saying {says!r})")
    print("\n| bad request | status | error |\n|---|---|---|\n" + "\n".join(rows))
    assert not bad, "\n".join(bad)
    # the log lines are written as the answers go: waited for, not slept for
    log = until(server.log.read_text, lambda log: log.count("attention-serve: 4") - before >= len(cases), 10)
    assert log.count("attention-serve: 4") - before == len(cases) and "Traceback" not in log
    assert max(len(line) for line in log.splitlines()) < 400  # a client's long value is cut, in the log too
    assert max(len(json.dumps(body)) for _, (_, _, body), _, _ in cases) < 400  # and in the answer
    assert server.post_file("/caption", PHOTO.read_bytes())[0] == 200  # still serving


def test_a_path_the_routes_would_match_is_checked_as_the_path_it_is(server):
    """Starlette routes "/info\n" (sent as /info%0A) to /info: its route's regex ends in "$", which matches before a
    final newline. Such a request skipped the key and every check, and its bare body broke the batch it joined
    (500 for every request in it). Each variant is now refused before routing (404), or checked as the path it
    decodes to (401 without the key), and requests beside them are answered."""
    routed = ("/info", "/caption", "/translate", "/health", "/openapi.json")
    variants = [p + tail for p in routed for tail in ("%0A", "%0D%0A", "%0D", "%09", "%20", "%00", "/", "%2F", "%0A/")]
    variants += [f"/{p}" for p in routed] + ["/%0A", "//", "/info;x", "/./info", "/x/../info"]
    body = json.dumps({"sentences": ["ein mann"] * 100}).encode()  # 100 sentences: over --max-sentences 4
    for path in variants:
        for method, data in (("GET", None), ("POST", body)):
            status, _, got = server.request(method, path, data, {"Content-Type": "application/json"}, key=False)
            assert status == 404 and got == {"error": "Not Found", "status": 404}, (method, path, status, got)
    for path in ("/%69nfo", "/info?x=%0A"):  # what uvicorn decodes to /info is /info: checked as it
        assert server.get(path, key=False)[0] == 401, path
    # requests that would have joined a batch with the bare ones: each answered as alone
    answers: dict[int, tuple] = {}
    start = threading.Barrier(6)

    def ask(i: int) -> None:
        start.wait()
        if i < 2:
            answers[i] = server.post_json("/translate", {"text": "ein mann"})
        else:
            answers[i] = server.post_json("/translate%0A", {"text": "ein mann"}, key=False)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [answers[i][0] for i in range(6)] == [200, 200, 404, 404, 404, 404], answers
    assert "Traceback" not in server.log.read_text() and " 500 " not in server.log.read_text()


def test_a_host_header_is_answered_only_for_this_machines_names(server):
    """Bound to 127.0.0.1 the server answers localhost, 127.0.0.1 and [::1], with or without a port; a web page
    whose name an attacker points at 127.0.0.1 (DNS rebinding) sends its own name and is refused, on every path."""
    for host in ("localhost", "LOCALHOST:1", "127.0.0.1", f"127.0.0.1:{server.port}", "[::1]", "[::1]:8000",
                 "localhost."):  # fmt: skip
        assert server.get("/health", headers={"Host": host})[0] == 200, host
    for host in ("attacker.example", f"attacker.example:{server.port}", "127.0.0.1.attacker.example", "[::2]",
                 "localhost.attacker.example"):  # fmt: skip
        for path in ("/", "/health", "/info"):
            status, _, got = server.get(path, headers={"Host": host})
            assert status == 400 and "not a name this server answers to" in got["error"], (host, path, got)


def test_the_page_is_self_contained_behind_a_content_security_policy(server):
    status, head, page = server.get("/", key=False)
    assert status == 200 and "default-src 'none'" in head["content-security-policy"]
    assert "frame-ancestors 'none'" in head["content-security-policy"] and head["x-content-type-options"] == "nosniff"
    assert "Caption.render" in page and "Align.render" in page  # the reports' own painters
    assert "http://" not in page and "https://" not in page  # no CDN, no external font


def test_a_full_queue_answers_503_with_retry_after(server):
    """--max-queue 2: eight uploads still arriving (4 x the queue) hold every place; the next is told to retry."""
    held = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(f"POST /caption HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {KEY}\r\nContent-Type: image/png\r\n"
                  "Content-Length: 1000\r\n\r\nabc".encode())  # fmt: skip
        held.append(s)
    try:  # the uploads hold their places once the server has read their headers: moments, longer under load
        status, head, body = until(lambda: server.post_file("/caption", PHOTO.read_bytes()), lambda got: got[0] == 503,
                                   10, every=0.2)  # fmt: skip
        assert status == 503 and head.get("retry-after") == "1" and "uploads arriving" in body["error"]
    finally:
        for s in held:
            s.close()
    # the server sees the closes within moments (longer on a loaded machine)
    status = until(lambda: server.post_file("/caption", PHOTO.read_bytes())[0], lambda code: code != 503, 10, every=0.2)
    assert status == 200  # the places are free again


def test_a_stalled_upload_is_a_408_after_the_read_timeout(server):
    """--read-timeout 3: a body that stops arriving frees its place with a 408, in JSON."""
    s = socket.create_connection(("127.0.0.1", server.port))
    try:
        s.sendall(f"POST /translate HTTP/1.1\r\nHost: localhost\r\nX-API-Key: {KEY}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"te".encode())  # fmt: skip
        s.settimeout(20)
        start = time.monotonic()
        reply = s.recv(4096).decode()
        elapsed = time.monotonic() - start
        while '"status"' not in reply:  # the body may come in a later segment than the headers
            more = s.recv(4096).decode()
            if not more:
                break
            reply += more
    finally:
        s.close()
    assert reply.startswith("HTTP/1.1 408") and '"status": 408' in reply and 2.5 < elapsed < 15


def test_headers_that_stop_arriving_are_a_408_after_the_read_timeout(server):
    """A connection that sent part of its headers (or nothing) was held for ever: uvicorn has no header timeout, and
    the body's limit only starts once the headers are complete (attention_serve/header_deadline.py)."""
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        s.settimeout(20)
        start = time.monotonic()
        reply = b""
        while chunk := s.recv(4096):
            reply += chunk
        elapsed = time.monotonic() - start
    assert reply.startswith(b"HTTP/1.1 408") and b'"status": 408' in reply and 2.5 < elapsed < 15, reply
    with socket.create_connection(("127.0.0.1", server.port)) as s:  # nothing sent: closed, nothing written
        s.settimeout(20)
        assert s.recv(4096) == b""
    assert "408 from 127.0.0.1: the request's headers did not arrive within 3 s" in server.log.read_text()


def _raw(server: Server, request: str) -> str:
    """One request as written (headers a client library would merge or refuse), the whole answer read."""
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(request.encode())
        s.settimeout(20)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply.decode("utf-8", "replace")


def test_head_info_and_a_key_header_sent_twice(server):
    """HEAD /info answers as HEAD /health does (it was LitServe's 405); a key header sent twice with two values is a
    400 (the last one counted: a client's header overrode a proxy's), the same value twice is one key."""
    head = "HEAD /info HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    reply = _raw(server, head + f"X-API-Key: {KEY}\r\n\r\n")
    status, _, body = reply.partition("\r\n")[0], None, reply.partition("\r\n\r\n")[2]
    length = int(next(line.split(":")[1] for line in reply.splitlines() if line.lower().startswith("content-length")))
    assert status == "HTTP/1.1 200 OK" and body == "" and length == len(json.dumps(server.get("/info")[2]).encode())
    assert _raw(server, head + "\r\n").startswith("HTTP/1.1 401")  # the key, as for GET
    get = "GET /info HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
    reply = _raw(server, get + f"X-API-Key: nope\r\nX-API-Key: {KEY}\r\n\r\n")
    assert reply.startswith("HTTP/1.1 400") and "the X-API-Key header is sent more than once" in reply
    reply = _raw(server, get + f"Authorization: Bearer {KEY}\r\nAuthorization: Bearer nope\r\n\r\n")
    assert reply.startswith("HTTP/1.1 400") and "the Authorization header is sent more than once" in reply
    assert _raw(server, get + f"X-API-Key: {KEY}\r\nX-API-Key: {KEY}\r\n\r\n").startswith("HTTP/1.1 200")
    # --max-chars 200 counts the sentence read: the spaces around it are not (a 200-character one was a 413)
    status, _, body = server.post_json("/translate", {"text": f"   {'x' * 199}\n  "})
    assert status == 200, body
    # a wrong method's 405 lists HEAD where it is answered ("Allow: GET" alone, while HEAD /health answered 200)
    for path in ("/health", "/info"):
        reply = _raw(server, f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-API-Key: {KEY}\r\n"
                     "Content-Length: 0\r\n\r\n")  # fmt: skip
        allow = [line for line in reply.splitlines() if line.lower().startswith("allow:")]
        assert reply.startswith("HTTP/1.1 405") and allow == ["allow: GET, HEAD"], reply


def test_every_answer_carries_the_security_headers(server):
    status, head, _ = server.post_file("/caption", PHOTO.read_bytes())
    assert status == 200 and head["x-content-type-options"] == "nosniff" and head["cache-control"] == "no-store"
    status, head, _ = server.post_file("/caption", PHOTO.read_bytes(), key=False)
    assert status == 401 and head["www-authenticate"] == "Bearer"


def test_a_stop_answers_the_requests_in_flight_and_exits_0(server):
    """SIGTERM while requests are being captioned: each gets its caption, then the server exits 0 (the file's last
    test, as it stops the file's server: one that runs later starts it again)."""
    answers: list = []

    def ask():
        answers.append(server.post_file("/caption", PHOTO.read_bytes(), {"beam_size": "20", "max_len": "100"}))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    code = server.stop()
    for t in threads:
        t.join(60)
    assert code == 0, server.log.read_text()[-2000:]
    assert [a[0] for a in answers] == [200, 200], answers
    assert "stopped" in server.log.read_text() and "Traceback" not in server.log.read_text()
