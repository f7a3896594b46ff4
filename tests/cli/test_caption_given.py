"""``caption --given CAPTION``: the captions given, read by the model (each word's probability and where it looked),
ranked best first in the plain lines, the records, the overlay and the page; refusals in one line."""

import json
import math
import random
import shutil
from pathlib import Path

import pytest
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.model.captioner import Captioner
from captioning.training.shapes import make_scene
from captioning.views.overlay import draw_word_panels, overlay_image

pytestmark = pytest.mark.usefixtures("one_thread")

OTHER = {"red": "blue", "blue": "red", "green": "yellow", "yellow": "green"}


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A shapes scene as a PNG, its true caption, and the same caption with its first colour changed."""
    made = make_scene(random.Random(3), size=Captioner.load("shapes").preprocess.image_size)
    path = tmp_path_factory.mktemp("scene") / "scene.png"
    made.image.save(path)
    words = list(made.captions[0])
    k = next(i for i, w in enumerate(words) if w in OTHER)
    wrong = [*words[:k], OTHER[words[k]], *words[k + 1 :]]
    return str(path), " ".join(words), " ".join(wrong)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = caption_main(["--model", "shapes", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_plain_lines_rank_the_true_caption_first(capsys, scene):
    path, true, wrong = scene
    code, out, err = _run(capsys, path, "--given", wrong, "--given", true.upper() + ".")
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert [cap for _, cap, _ in lines] == [true.upper(), wrong]  # as written (case kept, "." dropped), best first
    for score, cap, probs in lines:
        p = [float(x) for x in probs.split()]
        assert len(p) == len(cap.split()) + 1  # each word's, then the end's
        assert float(score) == pytest.approx(sum(math.log(x) for x in p) / len(p), abs=2e-3)
    assert float(lines[0][0]) > float(lines[1][0])
    # several images: path first on every line (the same photo under another name: one named twice is read once)
    again = str(Path(path).with_name("again.png"))
    shutil.copy(path, again)
    code, out, _ = _run(capsys, path, again, "--given", true)
    assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == [path, again]


def test_records_hold_every_reading_and_the_best_ones_attention(capsys, scene):
    path, true, wrong = scene
    code, out, err = _run(capsys, path, "--json", "--given", wrong, "--given", true)
    assert code == 0, err
    (rec,) = json.loads(out)
    assert [g["caption"] for g in rec["given"]] == [true, wrong]
    assert rec["caption"] == true and rec["words"] == true.split() and rec["truncated"] is False
    assert len(rec["attention"]) == len(rec["words"]) == len(rec["word_probs"])
    assert all(sum(row) == pytest.approx(1, abs=1e-4) for row in rec["attention"])
    best = rec["given"][0]
    assert (rec["score"], rec["log_prob"], rec["word_probs"], rec["end_prob"]) == (
        best["score"], best["log_prob"], best["word_probs"], best["end_prob"])  # fmt: skip
    logs = [math.log(p) for p in [*best["word_probs"], best["end_prob"]]]
    assert best["log_prob"] == pytest.approx(sum(logs), abs=1e-4)
    assert best["score"] == pytest.approx(sum(logs) / len(logs), abs=1e-4)
    # the same numbers from Python
    (read,) = Captioner.load("shapes").read_caption([path], true)
    assert read.probs == pytest.approx(best["word_probs"], abs=1e-6)
    assert read.score == pytest.approx(best["score"], abs=1e-6)


def test_the_model_writes_what_it_reads_best(capsys, scene):
    """Greedy search's caption is, word by word, the likeliest: read back, no given caption of the scene that differs
    from it in one word scores a word there higher."""
    path, _, _ = scene
    code, out, _ = _run(capsys, path, "--beam-size", "1")
    own = out.strip()
    code, out, _ = _run(capsys, path, "--json", "--given", own, "--given", own.replace("a ", "the ", 1))
    recs = json.loads(out)[0]["given"]
    assert recs[0]["caption"] == own and recs[0]["word_probs"][0] > recs[1]["word_probs"][0]


def test_overlay_and_page_show_each_words_probability(capsys, tmp_path, scene):
    path, true, _ = scene
    code, _, err = _run(capsys, path, "--given", true, "--overlay", str(tmp_path / "ov"), "--html",
                        str(tmp_path / "p.html"), "--json", "--per-word")  # fmt: skip
    assert code == 0, err
    page = (tmp_path / "p.html").read_text()
    assert page.count('title="p = ') == len(true.split()) and "mean log-probability" in page
    drawn = Image.open(tmp_path / "ov" / "scene-attention.png").convert("RGB")
    cap = Captioner.load("shapes")
    (read,) = cap.read_caption([path], true)
    args = (read.photo, read.words, read.alphas, cap.grid, read.crop_box)
    assert drawn.tobytes() == overlay_image(*args, probs=read.probs).tobytes()
    assert drawn.tobytes() != overlay_image(*args).tobytes()  # the labels carry the probabilities
    # each word's own PNG: its probability in the key's note
    want = draw_word_panels(*args[:4], read.crop_box, tmp_path / "want", "scene", probs=read.probs)
    plain = draw_word_panels(*args[:4], read.crop_box, tmp_path / "plain", "scene")
    for ours, theirs, without in zip(sorted((tmp_path / "ov").glob("scene-0*.png")), want, plain, strict=True):
        assert Image.open(ours).tobytes() == Image.open(theirs).tobytes() != Image.open(without).tobytes()


def test_an_unknown_word_is_named_in_one_note(capsys, scene):
    path, _, _ = scene
    code, out, err = _run(capsys, path, "--given", "a zorblax circle")
    assert code == 0 and out.split("\t")[1] == "a zorblax circle"
    notes = [line for line in err.splitlines() if "zorblax" in line]
    assert notes == ["caption: note: --given 'a zorblax circle': the model does not know 'zorblax': read as <unk>"]


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--given", " ,.! "], "no words to read"),
     # a byte that was not UTF-8 in argv (a lone surrogate): a traceback from the captioner's check, dropped before
     (["--given", "a red \udce4 circle"], "--given 'a red \\udce4 circle': not valid UTF-8 text"),
     (["--given", "a circle", "--beam-size", "3"], "--beam-size is for the captions the model writes"),
     (["--given", "a circle", "--sample"], "--sample is for the captions the model writes"),
     (["--given", "a circle", "--max-len", "5"], "--max-len is for the captions the model writes"),  # as translate
     (["--given", "a circle", "--n-best", "2", "--json"], "--n-best is for the captions the model writes"),
     # without --json too: the conflict first (it said "add --json", then, with it, "drop one")
     (["--given", "a circle", "--n-best", "2"], "--n-best is for the captions the model writes"),
     (["--given", "a circle", "--length-penalty", "1"], "--length-penalty is for")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, scene, args, why):
    with pytest.raises(SystemExit) as exc:
        caption_main([scene[0], "--model", "shapes", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_demo_shapes_is_refused_with_given_and_demo_with_a_given_file(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        caption_main(["--demo", "shapes", "--given", "a circle"])
    assert exc.value.code == 2 and "--demo shapes draws a scene" in capsys.readouterr().err
    (tmp_path / "c.tsv").write_text("camera.png\ta man\n")
    with pytest.raises(SystemExit) as exc:
        caption_main(["--demo", "--given-file", str(tmp_path / "c.tsv")])
    assert exc.value.code == 2 and "--demo captions the bundled photos" in capsys.readouterr().err


def test_a_given_file_reads_each_images_own_captions(capsys, tmp_path, scene):
    path, true, wrong = scene
    other = tmp_path / "other.png"
    Image.open(path).save(other)
    listed = tmp_path / "captions.tsv"  # Flickr8k's token-file names (name#k) and a comment line
    listed.write_text(f"# the scene's captions\nscene.png#0\t{wrong}\nscene.png#1\t{true}.\nelse.png\ta zorblax\n")
    code, out, err = _run(capsys, path, str(other), "--given-file", str(listed), "--json")
    assert code == 1  # other.png has no caption in the file: one error line, the scene still read
    scene_rec, other_rec = json.loads(out)
    assert [g["caption"] for g in scene_rec["given"]] == [true, wrong]  # its own two, best first
    (read,) = Captioner.load("shapes").read_caption([path], true)
    assert scene_rec["given"][0]["word_probs"] == pytest.approx(read.probs, rel=1e-5)
    assert other_rec["caption"] is None and "has no caption for other.png" in other_rec["error"]
    assert "hold words the model does not know" not in err  # "zorblax" is else.png's, a photo not captioned
    Image.open(path).save(tmp_path / "else.png")
    _, _, err = _run(capsys, str(tmp_path / "else.png"), "--given-file", str(listed), "--json")
    assert f"1 caption(s) of --given-file {listed} hold words the model does not know, read as <unk> (the first: " \
           "line 4, 'zorblax')" in err  # fmt: skip


@pytest.mark.parametrize(
    ("content", "args", "why"),
    [("x.png a circle\n", [], "captions.tsv: line 1: expected 'filename<TAB>caption', got 'x.png a circle'"),
     ("x.png\t...\n", [], "captions.tsv: line 1: the caption of 'x.png' has no words"),
     ("# nothing\n", [], "no name<TAB>caption line in it"),
     ("x.png\ta circle\n", ["--given", "a circle"], "not both"),
     ("x.png\ta circle\n", ["--beam-size", "2"], "--given-file reads the captions given; --beam-size")],
)  # fmt: skip
def test_given_file_refusals_in_one_line(capsys, tmp_path, scene, content, args, why):
    listed = tmp_path / "captions.tsv"
    listed.write_text(content)
    with pytest.raises(SystemExit) as exc:
        caption_main([scene[0], "--model", "shapes", "--given-file", str(listed), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_a_photo_unlike_the_training_images_puts_the_scores_in_doubt_not_the_words(capsys):
    from captioning.model.bundled import DEMO_PHOTOS

    code, out, err = _run(capsys, str(DEMO_PHOTOS[0]), "--given", "a red circle", "--json")
    (rec,) = json.loads(out)
    assert code == 0 and rec["out_of_domain"] is True, err  # a photograph, for a model of drawn shapes
    assert rec["note"] == Captioner.load("shapes").note(given=True)
    assert rec["note"].endswith("(synthetic shapes): the scores of the caption given may mean little")
    assert "the scores of the captions given may mean little" in err  # the closing note, as before
