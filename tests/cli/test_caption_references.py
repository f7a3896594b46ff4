"""``caption --references FILE [--scores OUT]``: the captions written, scored against people's captions of the same
photos (coco-caption's scores, as benchmarks/flickr8k.py computes them), each photo's scores worst first; refusals in
one line, before any photo is captioned."""

import io
import json
import random
import shutil

import pytest

from captioning.commands.caption import caption_main
from captioning.model.captioner import Captioner
from captioning.training.shapes import make_scene
from text_attn.core.metrics import coco_metrics

pytestmark = pytest.mark.usefixtures("one_thread")

OTHER = {"red": "blue", "blue": "red", "green": "yellow", "yellow": "green"}


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """Four shapes scenes as PNGs in a folder, and a references file: each scene's first two captions, the first
    colour of the first one changed in scene 3 (so the model's caption scores lower there), in Flickr8k's name#k form
    with a comment line."""
    folder = tmp_path_factory.mktemp("scenes")
    size = Captioner.load("shapes").preprocess.image_size
    lines = ["# shapes scenes"]
    for i in range(4):
        made = make_scene(random.Random(10 + i), size=size)
        made.image.save(folder / f"s{i}.png")
        for k, words in enumerate(made.captions[:2]):
            words = list(words)
            if i == 3:
                j = next(j for j, w in enumerate(words) if w in OTHER)
                words[j] = OTHER[words[j]]
            lines.append(f"s{i}.png#{k}\t{' '.join(words).capitalize()} .")
    refs = folder / "refs.tsv"
    refs.write_text("\n".join(lines) + "\n")
    return folder, refs


@pytest.fixture
def no_java(monkeypatch):
    """Scored without Java (the PTB tokenizer and METEOR are Java): fast, and the path of a machine without it."""
    monkeypatch.setattr("text_attn.core.metrics.java_available", lambda: False)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = caption_main(["--model", "shapes", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _scores_line(err: str) -> dict[str, float]:
    line = next(x for x in err.splitlines() if x.startswith("caption: BLEU-1 "))
    parts = line.removeprefix("caption: ").split("  ")
    return {p.rsplit(" ", 1)[0]: float(p.rsplit(" ", 1)[1]) for p in parts}


def _references(refs) -> dict[str, list[str]]:
    """The file read by hand: name -> its captions lowercased, the " ." dropped."""
    out: dict[str, list[str]] = {}
    for line in refs.read_text().splitlines()[1:]:
        name, text = line.split("\t")
        out.setdefault(name.split("#")[0], []).append(text.lower().removesuffix(" ."))
    return out


def test_the_scores_are_coco_captions_of_the_captions_written(capsys, tmp_path, scenes, no_java):
    folder, refs = scenes
    code, out, err = _run(capsys, str(folder), "--references", str(refs), "--json", "--scores",
                          str(tmp_path / "s.json"))  # fmt: skip
    assert code == 0, err
    captions = {r["image"].rsplit("/", 1)[1]: r["caption"] for r in json.loads(out)}
    hand = coco_metrics(_references(refs), captions, meteor=False)  # the reference implementation, called directly
    shown = _scores_line(err)
    assert list(shown) == ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr-D"]  # no METEOR without Java
    for name, key in [("BLEU-1", "Bleu_1"), ("BLEU-4", "Bleu_4"), ("ROUGE-L", "ROUGE_L"), ("CIDEr-D", "CIDEr")]:
        assert shown[name] == pytest.approx(100 * hand[key], abs=0.006)
    assert f"scores against --references {refs}: 4 photo(s), 8 reference caption(s)" in err
    assert "no Java: no PTB tokenizer, no METEOR" in err
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["photos"] == 4 and saved["scores"]["CIDEr-D"] == shown["CIDEr-D"]
    per = saved["per_photo"]
    assert [p["CIDEr-D"] for p in per] == sorted(p["CIDEr-D"] for p in per)  # worst first
    assert per[0]["image"].endswith("s3.png")  # its references name another colour
    assert per[0]["references"] == [line.split("\t")[1] for line in refs.read_text().splitlines() if "s3.png" in line]
    assert sum(p["CIDEr-D"] for p in per) / 4 == pytest.approx(shown["CIDEr-D"], abs=0.01)  # the corpus mean
    # each photo's BLEU-4: sacreBLEU's smoothed sentence score (as translate --scores), not coco's unsmoothed one
    from sacrebleu.metrics import BLEU

    hand_refs = _references(refs)
    for photo in per:
        name = photo["image"].rsplit("/", 1)[1]
        words = captions[name].lower().replace(".", " ").split()
        expected = BLEU(tokenize="none", effective_order=True).sentence_score(" ".join(words), hand_refs[name]).score
        assert photo["sentence BLEU-4"] == pytest.approx(expected, abs=0.006)
        assert photo["sentence BLEU-4"] > 0 or not set(words) & {w for r in hand_refs[name] for w in r.split()}


def test_records_and_the_page_carry_each_photos_references(capsys, tmp_path, scenes, no_java):
    folder, refs = scenes
    page, out_file = tmp_path / "p.html", tmp_path / "o.jsonl"
    code, _, err = _run(capsys, str(folder / "s0.png"), str(folder / "s1.png"), "--references", str(refs), "--jsonl",
                        str(out_file), "--html", str(page))  # fmt: skip
    assert code == 0, err
    recs = [json.loads(line) for line in out_file.read_text().splitlines()]
    lines = refs.read_text().splitlines()
    for rec, name in zip(recs, ["s0.png", "s1.png"], strict=True):
        assert rec["references"] == [x.split("\t")[1] for x in lines if x.startswith(name)]
    html = page.read_text()
    assert html.count('<details class="refs" open><summary>the references (2)</summary>') == 2
    assert f"<li>{recs[1]['references'][1]}</li>" in html


def test_one_photo_whose_reference_is_its_caption_scores_100_without_cider(capsys, tmp_path, scenes, no_java):
    folder, _ = scenes
    code, out, _ = _run(capsys, str(folder / "s0.png"))
    own = tmp_path / "own.tsv"
    own.write_text(f"s0.png\t{out.strip()}\n")
    code, _, err = _run(capsys, str(folder / "s0.png"), "--references", str(own))
    assert code == 0, err
    assert _scores_line(err) == {"BLEU-1": 100.0, "BLEU-2": 100.0, "BLEU-3": 100.0, "BLEU-4": 100.0, "ROUGE-L": 100.0}
    assert "no CIDEr-D for one photo" in err
    code, _, err = _run(capsys, str(folder / "s0.png"), "--references", str(own), "--scores", str(tmp_path / "s.json"))
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["per_photo"][0]["sentence BLEU-4"] == 100.0
    assert written["scores"]["CIDEr-D"] is None and written["per_photo"][0]["CIDEr-D"] is None  # undefined, not 0


def test_jsonl_runs_score_what_the_file_holds_and_photos_without_references_are_counted(
    capsys, tmp_path, scenes, no_java
):
    folder, refs = scenes
    photos = tmp_path / "photos"
    shutil.copytree(folder, photos, ignore=shutil.ignore_patterns("*.tsv"))
    shutil.copy(photos / "s0.png", photos / "extra.png")  # a photo the file does not name
    out_file = tmp_path / "o.jsonl"
    code, _, err = _run(capsys, str(photos / "s0.png"), str(photos / "s1.png"), "--jsonl", str(out_file))
    assert code == 0, err
    # --resume: the two photos held are scored with the rest
    code, _, err = _run(capsys, str(photos), "--jsonl", str(out_file), "--resume", "--references", str(refs))
    assert code == 0, err
    assert f"--references {refs} has no caption for 1 of the photos captioned (extra.png): they are not scored" in err
    assert "4 photo(s), 8 reference caption(s)" in err
    resumed = _scores_line(err)
    code, _, err = _run(capsys, str(folder), "--references", str(refs))
    assert code == 0 and _scores_line(err) == resumed  # the same four photos, scored in one run


@pytest.mark.slow  # 16 s: two JVMs load METEOR's tables
@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH: the PTB tokenizer and METEOR need it")
def test_with_java_the_ptb_tokenizer_and_meteor_score_as_the_benchmark(capsys, scenes):
    folder, refs = scenes
    code, out, err = _run(capsys, str(folder), "--references", str(refs), "--json")
    assert code == 0, err
    captions = {r["image"].rsplit("/", 1)[1]: r["caption"] for r in json.loads(out)}
    hand = coco_metrics(_references(refs), captions, meteor=True, ptb=True)  # as benchmarks/flickr8k.py scores
    shown = _scores_line(err)
    assert shown["METEOR"] == pytest.approx(100 * hand["METEOR"], abs=0.006)
    assert shown["CIDEr-D"] == pytest.approx(100 * hand["CIDEr"], abs=0.006)
    assert "PTBTokenizer" not in err  # the JVM's progress lines are kept off stderr
    assert "(coco-caption, its PTB tokenizer)" in err


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--scores", "s.json"], "--scores writes each photo's scores against --references FILE: add it"),
     (["--references", "nope.tsv"], "--references nope.tsv: file not found"),
     (["--references", "bad.tsv"], "bad.tsv: line 1: expected 'filename<TAB>caption', got"),
     (["--references", "refs.tsv", "--given", "a circle"], "scores the captions the model writes; --given reads"),
     (["--references", "refs.tsv", "--scores", "no/s.json"], "cannot write --scores no/s.json: the folder no does not"),
     (["--references", "refs.tsv", "--scores", "s0.png"], "--scores s0.png is also an input"),
     (["--references", "refs.tsv", "--scores", "refs.tsv"], "--scores refs.tsv is also an input"),
     (["--references", "refs.tsv", "--jsonl", "refs.tsv"], "--jsonl refs.tsv is also an input"),
     (["--references", "refs.tsv", "--jsonl", "o.json", "--scores", "o.json"], "--jsonl and --scores name the same"),
     (["--references", "other.tsv"], "--references other.tsv names none of the 1 photo(s) given")],
)  # fmt: skip
def test_refusals_in_one_line_before_any_photo_is_captioned(capsys, monkeypatch, scenes, args, why):
    folder, _ = scenes
    monkeypatch.chdir(folder)
    (folder / "bad.tsv").write_text("s0.png a circle\n")
    (folder / "other.tsv").write_text("x.png\ta circle\n")
    with pytest.raises(SystemExit) as exc:
        caption_main(["s0.png", "--model", "shapes", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_demo_is_refused_with_references(capsys, scenes):
    with pytest.raises(SystemExit) as exc:
        caption_main(["--demo", "--references", str(scenes[1])])
    assert exc.value.code == 2 and "--demo captions its own: give the photos" in capsys.readouterr().err


def test_devices_score_the_merged_records(capsys, tmp_path, scenes, no_java):
    folder, refs = scenes
    code, _, err = _run(capsys, str(folder), "--references", str(refs))
    alone = _scores_line(err)
    code, _, err = _run(capsys, str(folder), "--references", str(refs), "--devices", "1", "--jsonl",
                        str(tmp_path / "o.jsonl"), "--workers", "0")  # fmt: skip
    assert code == 0 and _scores_line(err) == alone, err


def test_meteor_is_asked_for_english_captions_only(monkeypatch):
    """METEOR scores English: German (French, Czech) references are scored without it, and the line says why; with
    Java English ones get the PTB tokenizer and METEOR, whether or not the model writes capitals (one trained on your
    own captions written with them does)."""
    from captioning.commands import caption_scores

    asked = []
    monkeypatch.setattr("text_attn.core.metrics.java_available", lambda: True)
    monkeypatch.setattr("text_attn.core.metrics.coco_scores",
                        lambda refs, hyps, meteor, ptb: asked.append((meteor, ptb)) or
                        ({"Bleu_1": 0.5, "CIDEr": 1.0}, {k: {"Bleu_4": 0.0, "CIDEr": 1.0} for k in hyps}))  # fmt: skip
    caps, refs = {"a.jpg": "Ein Hund"}, {"a.jpg": ["Ein Hund läuft über die Wiese .", "Der Hund rennt ."]}
    german = caption_scores.scores(caps, refs)
    english = caption_scores.scores({"a.jpg": "A dog"}, {"a.jpg": ["A dog runs on the grass .", "The Dog runs ."]})
    assert asked == [(False, True), (True, True)]
    # short English captions of nouns, as 91 Flickr8k photos have, are English (a share of English words missed them)
    assert caption_scores.reads_as_english(["Two brown dogs running through water ."] * 5)
    assert not caption_scores.reads_as_english(["Un chien court sur la plage ."])
    assert not caption_scores.reads_as_english(["Muž v modrém triku stojí na ulici ."])
    assert german["how"].endswith("no METEOR (it scores English)")
    assert english["how"] == "coco-caption, its PTB tokenizer"
    assert german["scores"] == {"BLEU-1": 50.0, "CIDEr-D": None}  # one photo: no CIDEr-D (its weights are all 0)


def test_typographic_apostrophes_score_as_ascii_ones_without_java(no_java):
    """Without Java the captions' words are read as training reads them: "aujourd’hui" against a reference's
    "aujourd'hui" was a miss (BLEU-4 0.01 for a caption equal to its reference); coco-caption's PTB tokenizer reads
    both alike."""
    from captioning.commands import caption_scores

    caps = {"a.jpg": "Un chien court aujourd’hui", "b.jpg": "Deux chats dorment"}
    refs = {"a.jpg": ["Un chien court aujourd'hui ."], "b.jpg": ["Deux chats dorment ."]}
    scored = caption_scores.scores(caps, refs)
    assert scored["scores"]["BLEU-4"] == 100.0 and scored["scores"]["ROUGE-L"] == 100.0
    assert [p["sentence BLEU-4"] for p in scored["per_photo"]] == [100.0, 100.0]


@pytest.mark.long
def test_references_and_captions_given_on_stdin(capsys, monkeypatch, scenes, no_java):
    """``--references -`` and ``--given-file -`` read stdin as they read the file; with the images' names on stdin
    (``-``) or both on it, one line refuses."""
    folder, refs = scenes
    photos = [str(folder / f"s{i}.png") for i in range(4)]
    code, _, err = _run(capsys, *photos, "--references", str(refs))
    monkeypatch.setattr("sys.stdin", io.StringIO(refs.read_text()))
    code, _, dashed = _run(capsys, *photos, "--references", "-")
    assert code == 0 and _scores_line(dashed) == _scores_line(err) and "--references -: 4 photo(s)" in dashed
    code, from_file, _ = _run(capsys, photos[0], "--given-file", str(refs))
    monkeypatch.setattr("sys.stdin", io.StringIO(refs.read_text()))
    code, from_stdin, _ = _run(capsys, photos[0], "--given-file", "-")
    assert code == 0 and from_stdin == from_file and len(from_file.splitlines()) == 2  # s0's two captions, ranked
    for argv, why in ((["-", "--references", "-"], "--references -: stdin holds the images' names"),
                      ([photos[0], "--given-file", "-", "--references", "-"], "stdin is read once")):  # fmt: skip
        monkeypatch.setattr("sys.stdin", io.StringIO(photos[0] + "\n"))
        with pytest.raises(SystemExit) as exc:
            _run(capsys, *argv)
        lines = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(lines) == 1 and why in lines[0], lines


def test_repeated_lines_decomposed_names_shared_names_and_failed_photos(capsys, tmp_path, scenes, no_java):
    """A references file joined twice counted each caption again (CIDEr-D moved, unsaid); a photo named decomposed
    (NFD, as macOS stores names) was not found by the file's composed name; two photos of one file name in two
    folders were scored against the same captions, unsaid; and when every referenced photo failed, the note said none
    had a caption in the file and nothing that --scores was not written."""
    import unicodedata

    folder, refs = scenes
    code, _, err = _run(capsys, str(folder), "--references", str(refs))
    once = _scores_line(err)
    twice = tmp_path / "twice.tsv"
    twice.write_text(refs.read_text() + "\n".join(refs.read_text().splitlines()[1:3]) + "\n")
    code, _, err = _run(capsys, str(folder), "--references", str(twice))
    assert code == 0 and _scores_line(err) == once and "4 photo(s), 8 reference caption(s)" in err
    assert f"caption: note: --references {twice}: 2 line(s) repeat an earlier line, its name and caption: read " \
           "once (the first: line 10)" in err.splitlines()  # fmt: skip
    # unnumbered lines again: two people's alike captions (kept, as coco-caption counts them), said
    plain = tmp_path / "plain.tsv"
    plain.write_text("s0.png\ta red circle\ns0.png\ta red circle\ns1.png\ta blue square\n")
    code, _, err = _run(capsys, str(folder / "s0.png"), str(folder / "s1.png"), "--references", str(plain))
    assert code == 0 and "2 photo(s), 3 reference caption(s)" in err
    assert f"caption: note: --references {plain}: 1 line(s) repeat an earlier line, its name and caption: each " \
           "read, as two people's (is the file joined twice?) (the first: line 2)" in err.splitlines()  # fmt: skip
    # NFD on disk, NFC in the file
    nfd = tmp_path / "nfd"
    nfd.mkdir()
    shutil.copy(folder / "s0.png", nfd / unicodedata.normalize("NFD", "Mädchen.png"))
    (tmp_path / "nfc.tsv").write_text(unicodedata.normalize("NFC", "Mädchen.png") + "\ta red circle\n")
    code, out, err = _run(capsys, str(nfd), "--references", str(tmp_path / "nfc.tsv"), "--json")
    assert code == 0, err
    assert json.loads(out)[0]["references"] == ["a red circle"] and "1 photo(s), 1 reference caption(s)" in err
    # one name in two folders
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(folder / "s2.png", other / "s0.png")
    code, _, err = _run(capsys, str(folder / "s0.png"), str(other / "s0.png"), "--references", str(refs))
    assert code == 0 and "caption: note: 2 photo(s) share a file name with another photo of the run, and each is " \
           f"scored against --references' captions of that name (e.g. {folder / 's0.png'})" in err  # fmt: skip
    # every photo with references failed
    broken = tmp_path / "b" / "s0.png"
    broken.parent.mkdir()
    broken.write_text("not a picture\n")
    code, _, err = _run(capsys, str(broken), "--references", str(refs), "--scores", str(tmp_path / "s.json"))
    assert code == 1 and not (tmp_path / "s.json").exists()
    assert err.splitlines()[-1] == f"caption: note: no photo was captioned: nothing scored; --scores " \
                                   f"{tmp_path / 's.json'} is not written"  # fmt: skip


def test_references_in_caption_trains_forms_score_as_the_plain_file(capsys, tmp_path, scenes, no_java):
    """--references had a reader of its own, which knew fewer of the forms caption-train reads: Flickr30k's numbered
    file scored "0 a red circle" (METEOR 32.4 -> 28.4, CIDEr-D 158.9 -> 150.3), a third column was glued into the
    caption, a photo named "#1 beach.png" was a comment, a CSV and a gzipped file were refused. One reader now."""
    import gzip
    import shutil

    folder, refs = scenes
    _, _, err = _run(capsys, str(folder), "--references", str(refs))
    plain = _scores_line(err)
    rows = [line.split("\t") for line in refs.read_text().splitlines()[1:]]  # [name#k, caption]
    numbered = tmp_path / "flickr30k.tsv"
    numbered.write_text("".join(f"{n.split('#')[0]}\t{n.split('#')[1]}\t{c}\n" for n, c in rows))
    csv = tmp_path / "captions.csv"
    csv.write_text("image,caption\n" + "".join(f'{n.split("#")[0]},"{c}"\n' for n, c in rows))
    wide = tmp_path / "wide.tsv"
    wide.write_text("".join(f"{n}\t{c}\tby someone\n" for n, c in rows))
    packed = tmp_path / "refs.tsv.gz"
    packed.write_bytes(gzip.compress(refs.read_bytes()))
    for given, said in ((numbered, "the second column is a number on every line"), (csv, "read as a header"),
                        (wide, "8 line(s) have more than two columns"), (packed, None)):  # fmt: skip
        code, _, err = _run(capsys, str(folder), "--references", str(given))
        assert code == 0 and _scores_line(err) == plain, err
        assert said is None or f"caption: note: --references {given}: " in err and said in err, err
    hashed = tmp_path / "hashed"
    hashed.mkdir()
    shutil.copy(folder / "s0.png", hashed / "#1 beach.png")
    (tmp_path / "hashed.tsv").write_text("# a comment\n#1 beach.png\ta red circle\n")
    code, out, err = _run(capsys, str(hashed), "--references", str(tmp_path / "hashed.tsv"), "--json")
    assert code == 0 and json.loads(out)[0]["references"] == ["a red circle"], err


def test_a_resume_with_other_references_says_so(capsys, tmp_path, scenes, no_java):
    """--references was not recorded: a resume with another file (or the first with one) left the earlier records'
    "references" fields of the other file, unsaid."""
    folder, refs = scenes
    out_file = tmp_path / "o.jsonl"
    code, _, err = _run(capsys, str(folder / "s0.png"), "--jsonl", str(out_file), "--references", str(refs))
    assert code == 0 and "--resume" not in err, err
    again = [str(folder / "s0.png"), str(folder / "s1.png"), "--jsonl", str(out_file), "--resume"]
    code, _, err = _run(capsys, *again, "--references", str(refs))  # the same file: nothing to say
    assert code == 0 and "other --references" not in err, err
    other = tmp_path / "other.tsv"
    other.write_text(refs.read_text() + "s0.png#5\tA red square .\n")  # one caption more
    code, _, err = _run(capsys, str(folder / "s2.png"), *again, "--references", str(other))
    assert code == 0 and f"caption: note: --resume: {out_file}'s records before this run were written with other " \
           "--references: their" in err  # fmt: skip
    code, _, err = _run(capsys, str(folder / "s3.png"), *again)  # no --references now: nothing scored, nothing said
    assert code == 0 and "--references" not in err, err
    fresh = tmp_path / "fresh.jsonl"  # a first run without them, resumed with them
    _run(capsys, str(folder / "s0.png"), "--jsonl", str(fresh))
    code, _, err = _run(capsys, str(folder / "s1.png"), "--jsonl", str(fresh), "--resume", "--references", str(refs))
    assert code == 0 and "records before this run were written without --references" in err, err
