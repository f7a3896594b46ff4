"""caption on what users actually do: pipe it into `head` or a full disk (one line, not a traceback), resume with the
same folder spelled another way (nothing captioned twice), resume into a file caption did not write or with an
existing --html page (refused, the file kept), folders with hidden files, a mistyped --demo, an image over Pillow's
size guard. On a tiny random-weight model (the plumbing is under test)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.one_line import refused
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.photos.image_paths import image_paths
from captioning.photos.preprocess import ImageReadError, load_image

FAST = ["--max-len", "3"]
CAPTION = "import sys; from captioning.commands.caption import caption_main; sys.exit(caption_main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "rs"
    root.mkdir()
    for i, colour in enumerate(("red", "blue")):
        Image.new("RGB", (48, 40), colour).save(root / f"p{i}.png")
    return root


def _refused(capsys, *args) -> str:
    return refused(caption_main, capsys, *args)


@pytest.mark.slow
def test_a_closed_pipe_on_stdout_is_one_line(model_file, folder):
    cmd = [sys.executable, "-c", CAPTION, str(folder), "--model", str(model_file), *FAST, "--workers", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the first caption, as after `| head -1` it would be
    err, code = proc.stderr.read(), proc.wait(timeout=120)
    proc.stderr.close()
    assert code == 2 and err.strip() == "caption: error: cannot write stdout: [Errno 32] Broken pipe", err


def test_a_full_disk_on_stdout_is_one_line(model_file, folder, capsys, monkeypatch):
    class Full(io.StringIO):  # what stdout redirected to a full disk does on the first flush
        def flush(self):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    for output in ([], ["--json"]):
        err = _refused(capsys, folder, "--model", model_file, *FAST, *output)
        assert err == "caption: error: cannot write stdout: [Errno 28] No space left on device"


def test_resume_knows_an_image_by_its_absolute_path(model_file, folder, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rs.jsonl"
    assert caption_main(["rs", "--model", str(model_file), *FAST, "--jsonl", str(out)]) == 0
    capsys.readouterr()
    (tmp_path / "link").symlink_to(folder)  # a link to the folder: the same photos
    for spelled in ("./rs/", str(folder), "link"):
        assert caption_main([spelled, "--model", str(model_file), *FAST, "--jsonl", str(out), "--resume"]) == 0
        assert "2 image(s) already in" in capsys.readouterr().err
        assert len(out.read_text().splitlines()) == 2  # nothing captioned again, nothing appended


def test_resume_from_another_folder_than_the_first_runs_is_refused_not_repeated(
    model_file, folder, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rs.jsonl"
    assert caption_main(["rs", "--model", str(model_file), *FAST, "--jsonl", str(out)]) == 0
    before = out.read_bytes()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the records say "rs/p0.png": no such file from here
    capsys.readouterr()
    err = _refused(capsys, "../rs", "--model", model_file, *FAST, "--jsonl", out, "--resume")
    assert "--resume: " in err and "(it holds rs/p0.png); run from the folder that run ran in" in err
    assert out.read_bytes() == before  # nothing appended twice
    # other photos of other names, added to the same file from here: resumed as usual
    Image.new("RGB", (48, 40), "green").save(tmp_path / "elsewhere" / "new.png")
    assert caption_main(["new.png", "--model", str(model_file), *FAST, "--jsonl", str(out), "--resume"]) == 0
    assert len(out.read_text().splitlines()) == 3


def test_resume_refuses_a_file_caption_did_not_write_and_keeps_it(model_file, folder, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nabout these photos\n")
    record = json.dumps({"image": str(folder / "p0.png"), "caption": "a red square", "error": None})
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(f"{record}\nnot a record\n{record}\n")
    for path, line in ((notes, 1), (mixed, 2)):
        before = path.read_bytes()
        err = _refused(capsys, folder, "--model", model_file, *FAST, "--jsonl", path, "--resume")
        assert f"cannot use --jsonl {path}: line {line} is not a caption record" in err
        assert path.read_bytes() == before


def test_resume_with_another_model_or_decoding_is_refused_and_changes_nothing(model_file, folder, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert caption_main([str(folder), "--model", str(model_file), *FAST, "--jsonl", str(out)]) == 0
    capsys.readouterr()
    run = json.loads(Path(f"{out}.run.json").read_text())
    assert run["model"] == str(model_file) and run["options"]["--max-len"] == 3 and run["options"]["--beam-size"] == 3
    assert "--sample-seed" not in run["options"] and "--temperature" not in run["options"]
    before = out.read_bytes(), Path(f"{out}.run.json").read_bytes()
    other = tiny_model_file(tmp_path / "other.pt", crop=False)
    cases = [(["--model", model_file, "--max-len", "3", "--beam-size", "2"], "--beam-size 3 (this run: 2)"),
             (["--model", model_file, *FAST, "--evidence"], "--evidence not given (this run: given)"),
             (["--model", model_file, "--given", "a red square"], '--given not given (this run: ["a red'),  # no search
             (["--model", model_file, "--max-len", "4"], "--max-len 3 (this run: 4)"),
             (["--model", other, *FAST], f"another model file ({model_file}; this run: {other})")]  # fmt: skip
    for args, said in cases:
        err = _refused(capsys, folder, *args, "--jsonl", out, "--resume")
        assert err.startswith(f"caption: error: --resume: {out}'s records were made with ") and said in err, err
        assert f"remove {out}.run.json" in err and (out.read_bytes(), Path(f"{out}.run.json").read_bytes()) == before
    # the same model file under another name is the same model (its content is recorded); the run goes on
    (tmp_path / "moved.pt").write_bytes(model_file.read_bytes())
    Image.new("RGB", (48, 40), "green").save(folder / "p2.png")
    assert (
        caption_main([str(folder), "--model", str(tmp_path / "moved.pt"), *FAST, "--jsonl", str(out), "--resume"]) == 0
    )
    assert len(out.read_text().splitlines()) == 3
    capsys.readouterr()
    # a record torn or edited by hand is named; a file from before the record was kept resumes as it is
    Path(f"{out}.run.json").write_text("[1")
    err = _refused(capsys, folder, "--model", model_file, *FAST, "--jsonl", out, "--resume")
    assert err.startswith(f"caption: error: cannot use --jsonl {out}: {out}.run.json is not a run record (")
    Path(f"{out}.run.json").write_text('{"options": ["--beam-size"]}')
    err = _refused(capsys, folder, "--model", model_file, *FAST, "--jsonl", out, "--resume")
    assert err == f"caption: error: cannot use --jsonl {out}: {out}.run.json is not a run record: remove it to " \
        "--resume without comparing this run's options with that run's"  # fmt: skip
    Path(f"{out}.run.json").unlink()
    assert caption_main([str(folder), "--model", str(model_file), *FAST, "--jsonl", str(out), "--resume"]) == 0
    assert json.loads(Path(f"{out}.run.json").read_text())["options"]["--max-len"] == 3
    # FILE gone, its record left: nothing to mix, so a --resume (scripts always pass it) starts afresh
    out.unlink()
    assert caption_main([str(folder), "--model", str(other), *FAST, "--jsonl", str(out), "--resume"]) == 0
    assert json.loads(Path(f"{out}.run.json").read_text())["model"] == str(other)


def test_resume_knows_a_given_file_by_what_was_read_from_it(model_file, folder, tmp_path, capsys):
    """--given-file was hashed by opening it again: a FIFO hung, and <(...) recorded the digest of nothing, so a
    resume with other captions slipped through."""
    out, first, same, other = (tmp_path / n for n in ("out.jsonl", "a.txt", "b.txt", "c.txt"))
    for path, caption in ((first, "a red square"), (same, "a red square"), (other, "a small blue circle")):
        path.write_text("".join(f"p{i}.png\t{caption}\n" for i in range(2)))
    base = [str(folder), "--model", str(model_file), "--jsonl", str(out)]  # no --max-len: a caption given is read whole
    assert caption_main([*base, "--given-file", str(first)]) == 0
    out.write_text(out.read_text().splitlines()[0] + "\n")  # one record left to resume after
    assert caption_main([*base, "--given-file", str(same), "--resume"]) == 0  # the same captions, another file
    capsys.readouterr()
    err = _refused(capsys, *base, "--given-file", other, "--resume")
    assert "records were made with --given-file" in err


def test_resume_with_an_existing_html_page_is_refused(model_file, folder, tmp_path, capsys):
    page, out = tmp_path / "report.html", tmp_path / "out.jsonl"
    page.write_text("<html>an earlier run's page</html>")
    err = _refused(capsys, folder, "--model", model_file, *FAST, "--jsonl", out, "--resume", "--html", page)
    assert f"--html {page} exists, and --resume would replace it" in err
    assert page.read_text() == "<html>an earlier run's page</html>" and not out.exists()


def test_hidden_files_and_folders_are_skipped(folder):
    (folder / ".thumbs").mkdir()
    Image.new("RGB", (8, 8)).save(folder / ".thumbs" / "t.png")
    (folder / "._p0.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")  # what macOS leaves on other disks
    assert list(image_paths([str(folder)])) == [os.path.join(folder, "p0.png"), os.path.join(folder, "p1.png")]


def test_symlinked_folders_are_followed_once(folder, tmp_path):
    links = tmp_path / "links"
    links.mkdir()
    (links / "album").symlink_to(folder, target_is_directory=True)
    (folder / "loop").symlink_to(links, target_is_directory=True)  # a link back up: walked once, not forever
    expected = [os.path.join(links, "album", "p0.png"), os.path.join(links, "album", "p1.png")]
    assert list(image_paths([str(links)])) == expected


def test_a_folder_in_a_stdin_list_expands_as_an_argument_does(folder, tmp_path):
    import io

    one = tmp_path / "one.png"
    Image.new("RGB", (8, 8)).save(one)
    listed = list(image_paths(["-"], io.StringIO(f"{folder}\r\n\n{one}\n")))
    assert listed == [os.path.join(folder, "p0.png"), os.path.join(folder, "p1.png"), str(one)]
    # saved by a Windows editor or PowerShell: a byte-order mark first, which is not part of the first path
    assert list(image_paths(["-"], io.StringIO(f"\ufeff{one}\r\n\ufeff{one}\r\n"))) == [str(one), f"\ufeff{one}"]


def test_the_overlay_folder_inside_an_input_folder_is_not_captioned(model_file, folder, capsys):
    attn = folder / "attn"
    for _ in range(2):  # the second run finds the first run's overlays in the folder, and leaves them alone
        assert caption_main([str(folder), "--model", str(model_file), *FAST, "--overlay", str(attn)]) == 0
        out = capsys.readouterr().out
        assert [line.split("\t")[0] for line in out.splitlines()] == [str(folder / "p0.png"), str(folder / "p1.png")]
    assert sorted(p.name for p in attn.iterdir()) == ["p0-attention.png", "p1-attention.png"]


def test_a_mistyped_demo_and_the_shapes_demo_hint(capsys, tmp_path, monkeypatch):
    assert _refused(capsys, "--demo", "fish") == (
        "caption: error: --demo takes photo (the default: the bundled photos) or shapes, got 'fish'"
    )
    monkeypatch.chdir(tmp_path)
    assert caption_main(["--demo", "shapes", "--seed", "5", *FAST]) == 0
    out = capsys.readouterr().out
    assert "repeat with --demo shapes --seed 5" in out
    assert caption_main(["--demo", "shapes", "--seed", "5", *FAST]) == 0  # the hint's command runs


def test_an_image_over_pillows_size_guard_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "huge.png"
    Image.new("RGB", (100, 100)).save(path)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 10,000 pixels: over twice the guard, as a 200 MP image is
    with pytest.raises(ImageReadError, match=r"huge.png: more than 0 megapixels, which Pillow refuses to decode"):
        load_image(path)


def test_an_overlay_folder_that_cannot_be_written_is_one_line_before_any_image(
    model_file, folder, tmp_path, capsys, monkeypatch
):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)  # read-only for anyone but root; for root (CI), the write is made to fail
    real = tempfile.TemporaryFile

    def refused(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == locked:
            raise PermissionError(13, "Permission denied")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", refused)
    seen = []
    monkeypatch.setattr(
        "captioning.photos.collection.load_photo", lambda *a: seen.append(a) or (_ for _ in ()).throw(OSError)
    )
    try:
        err = _refused(capsys, folder, "--model", model_file, *FAST, "--overlay", locked, "--workers", "0")
        assert err == f"caption: error: cannot write into --overlay directory {locked}: [Errno 13] Permission denied"
        assert seen == []  # before any image is read
    finally:
        locked.chmod(0o700)


def test_a_list_of_photos_given_as_a_photo_is_told_to_come_on_stdin(folder, tmp_path, monkeypatch):
    from captioning.photos.preprocess import ImageReadError, load_photo

    monkeypatch.chdir(tmp_path)
    listed, notes = tmp_path / "photos.txt", tmp_path / "notes.txt"
    listed.write_text(f"{folder / 'p0.png'}\n{folder / 'p1.png'}\n")
    notes.write_text("not a path\n")
    with pytest.raises(ImageReadError) as err:
        load_photo(listed)
    formats = "not an image file in a photo format (JPEG, PNG, WebP, GIF, BMP, TIFF, PPM, ICO, HEIC, AVIF)"
    hint = f"(a list of photos, one a line? give it on stdin: caption - < {listed})"
    assert str(err.value) == f"{listed}: {formats} {hint}"
    with pytest.raises(ImageReadError) as err:
        load_photo(notes)
    assert str(err.value) == f"{notes}: {formats}"  # no guess where the text names no file


@pytest.mark.parametrize("processes", [[], ["--devices", "1"]])
def test_resume_names_new_overlays_apart_from_those_drawn_before(model_file, tmp_path, capsys, monkeypatch, processes):
    # a photo added since, sorting before one of the same name, took that name and drew over its overlay
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s" / "y").mkdir(parents=True)
    Image.new("RGB", (48, 40), "red").save(tmp_path / "s" / "y" / "P.png")
    run = ["s", "--model", str(model_file), *FAST, "--overlay", "ov", "--jsonl", "out.jsonl", *processes]
    assert caption_main(run) == 0
    before = (tmp_path / "ov" / "P-attention.png").read_bytes()
    (tmp_path / "s" / "x").mkdir()
    Image.new("RGB", (48, 40), "blue").save(tmp_path / "s" / "x" / "P.png")
    assert caption_main([*run, "--resume"]) == 0
    records = {r["image"]: r["overlay"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert records == {"s/y/P.png": "ov/P-attention.png", "s/x/P.png": "ov/P-2-attention.png"}
    assert (tmp_path / "ov" / "P-attention.png").read_bytes() == before  # the earlier photo's overlay kept
    # the photos done take no name: the next one is P-3 (it was P-5, past the names the two skipped ones reserved)
    (tmp_path / "s" / "z").mkdir()
    Image.new("RGB", (48, 40), "green").save(tmp_path / "s" / "z" / "P.png")
    assert caption_main([*run, "--resume"]) == 0
    records = {r["image"]: r["overlay"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert records["s/z/P.png"] == "ov/P-3-attention.png"


def test_resume_in_another_overlay_format_names_new_overlays_apart_too(model_file, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s" / "y").mkdir(parents=True)
    Image.new("RGB", (48, 40), "red").save(tmp_path / "s" / "y" / "P.png")
    run = ["s", "--model", str(model_file), *FAST, "--overlay", "ov", "--jsonl", "out.jsonl"]
    assert caption_main([*run, "--overlay-format", "webp"]) == 0
    (tmp_path / "s" / "x").mkdir()
    Image.new("RGB", (48, 40), "blue").save(tmp_path / "s" / "x" / "P.png")
    assert caption_main([*run, "--resume"]) == 0  # now PNGs: the WebP's name is taken all the same
    records = {r["image"]: r["overlay"] for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert records == {"s/y/P.png": "ov/P-attention.webp", "s/x/P.png": "ov/P-2-attention.png"}


def test_resume_draws_over_an_overlay_no_record_names(model_file, tmp_path, capsys, monkeypatch):
    """A run stopped between drawing a photo's overlay and writing its record: the resumed run captions that photo
    again under the overlay's own name (it was drawn beside it as Q-2, the orphan left); the names the records hold
    stay taken."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s").mkdir()
    for name, colour in (("P", "red"), ("Q", "blue")):
        Image.new("RGB", (48, 40), colour).save(tmp_path / "s" / f"{name}.png")
    run = ["s", "--model", str(model_file), *FAST, "--overlay", "ov", "--jsonl", "out.jsonl"]
    assert caption_main(run) == 0
    records = (tmp_path / "out.jsonl").read_text().splitlines()
    drawn = (tmp_path / "ov" / "Q-attention.png").read_bytes()
    (tmp_path / "out.jsonl").write_text(records[0] + "\n")  # Q's overlay drawn, its record not written
    (tmp_path / "ov" / "Q-attention.png").write_bytes(b"cut off")  # drawn halfway, even
    assert caption_main([*run, "--resume"]) == 0
    resumed = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["image"], r["caption"], r["overlay"]) for r in resumed] == [
        ("s/P.png", json.loads(records[0])["caption"], "ov/P-attention.png"),
        ("s/Q.png", json.loads(records[1])["caption"], "ov/Q-attention.png"),
    ]
    assert sorted(p.name for p in (tmp_path / "ov").iterdir()) == ["P-attention.png", "Q-attention.png"]
    assert (tmp_path / "ov" / "Q-attention.png").read_bytes()[:8] == drawn[:8] == b"\x89PNG\r\n\x1a\n"  # drawn again


def test_resume_with_new_photos_of_the_same_names_as_deleted_ones_goes_on(model_file, tmp_path, monkeypatch):
    # a camera's names repeat: day1/IMG_0001 captioned and deleted, day2/IMG_0001 added to the same file
    monkeypatch.chdir(tmp_path)
    for day, colour in (("day1", "red"), ("day2", "blue")):
        (tmp_path / day).mkdir()
        Image.new("RGB", (48, 40), colour).save(tmp_path / day / "IMG_0001.png")
    assert caption_main(["day1", "--model", str(model_file), *FAST, "--jsonl", "all.jsonl"]) == 0
    (tmp_path / "day1" / "IMG_0001.png").unlink()
    assert caption_main(["day2", "--model", str(model_file), *FAST, "--jsonl", "all.jsonl", "--resume"]) == 0
    records = [json.loads(line)["image"] for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert records == ["day1/IMG_0001.png", "day2/IMG_0001.png"]


def test_a_sampled_run_recorded_before_each_photo_drew_its_own_is_not_resumed_with_the_new_draws():
    """Until 2026-12-02 a --sample-seed drew one stream through the run; a --resume of such a file would have mixed
    two kinds of draws under one seed."""
    from captioning.commands.caption_run import DRAWS, differences

    old = {"model_sha256": "x", "options": {"--sample": True, "--sample-seed": 7}}
    new = {"model_sha256": "x", "model": "m.pt", "options": {"--sample": True, "--sample-seed": 7,
                                                             DRAWS: "each photo's own"}}  # fmt: skip
    assert differences(old, new) == ["--sample-seed's draws as one stream through the run (an older version's; this "
                                     "run: each photo's own)"]  # fmt: skip
    assert differences(new, new) == []
    other_seed = {**new, "options": {**new["options"], "--sample-seed": 8}}
    assert differences(old, other_seed) == ["--sample-seed 7 (this run: 8)"]  # the seed said, not the draws again


def test_resume_of_a_file_from_before_run_records_claims_only_the_records_it_adds(model_file, folder, tmp_path, capsys):
    """A FILE written before FILE.run.json existed: a --resume with any model was recorded as making all its records,
    and a later resume with the model that really made them was refused (an audit). The record now covers only what
    the runs after it add; while it covers nothing it is as if there were none."""
    out, run = tmp_path / "out.jsonl", Path(f"{tmp_path / 'out.jsonl'}.run.json")
    other = tiny_model_file(tmp_path / "other.pt", crop=False)

    def resume(model: Path) -> str:
        assert caption_main([str(folder), "--model", str(model), *FAST, "--jsonl", str(out), "--resume"]) == 0
        return capsys.readouterr().err

    assert caption_main([str(folder), "--model", str(model_file), *FAST, "--jsonl", str(out)]) == 0
    run.unlink()  # 2 records, as a version before run records left them
    note = (
        f"caption: note: --resume: {out} has no run record for its 2 record(s) (written before 2026-12-01): they "
        "cannot be checked against this model and options; out.jsonl.run.json covers the records from this run on"
    )
    assert note in resume(other).splitlines()  # nothing to caption: the record covers no record
    record = json.loads(run.read_text())
    assert record["model"] == str(other) and (record["records_before"], record["checked"]) == (2, False)
    Image.new("RGB", (48, 40), "green").save(folder / "p2.png")
    assert note in resume(model_file).splitlines()  # other's record covered none: not claimed, so not refused
    assert len(out.read_text().splitlines()) == 3 and json.loads(run.read_text())["model"] == str(model_file)
    Image.new("RGB", (48, 40), "white").save(folder / "p3.png")
    err = _refused(capsys, folder, "--model", other, *FAST, "--jsonl", out, "--resume")
    assert err.startswith(f"caption: error: --resume: {out}'s records after its first 2 (which no run record covers) "
                          f"were made with another model file ({model_file}; this run: {other})"), err  # fmt: skip
    assert "no run record" not in resume(model_file) and len(out.read_text().splitlines()) == 4
    assert json.loads(run.read_text())["records_before"] == 2  # carried on: the first two are still not claimed
