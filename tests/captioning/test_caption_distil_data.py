"""benchmarks/caption_distil_data.py: Flickr8k written again for distilling the captioner, read by caption-train's own
Flickr8k reader as the standard split: each train photo's captions the teacher's (alone or after the references), val
and test photos' references as they were; a teacher's file cut short is finished by `caption --resume`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.flickr8k import write_original

from captioning.model.bundled import MODEL_NAMES
from captioning.model.captioner import Captioner
from captioning.model.reading import caption_tokens
from captioning.training.data import CaptionDataModule
from captioning.training.readers import has_standard_split, read_flickr8k
from text_attn.core.data_note import read_data_note
from text_attn.core.file_digest import sha256_of
from text_attn.core.safe_files import OutputRefused

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from caption_distil_data import main as distil_data  # noqa: E402 - the benchmarks' folder on the path first

TAUGHT = {"coffee.png": "a cup of coffee on a table", "chelsea.png": "a cat is sitting on the floor"}


def _teacher(out: Path, captions: dict[str, str]) -> None:
    """A teacher's file as `caption --jsonl` writes one (the fields this script reads), so no model runs."""
    out.mkdir(parents=True, exist_ok=True)
    records = [{"image": f"/somewhere/{name}", "caption": cap} for name, cap in captions.items()]
    (out / "teacher.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _captions(root: Path) -> dict[str, dict[str, list[list[str]]]]:
    return {split: {item.path.name: item.captions for item in items} for split, items in read_flickr8k(root).items()}


@pytest.mark.parametrize("mix, copies", [("teacher", 1), ("both", 2)])
def test_train_photos_get_the_teachers_captions_and_val_test_keep_theirs(tmp_path, capsys, mix, copies):
    data = write_original(tmp_path / "f8k")
    out = tmp_path / "out"
    _teacher(out, TAUGHT)
    args = ["--data-root", str(data), "--out", str(out), "--train-captions", mix, "--copies", str(copies)]
    assert distil_data(args) == 0
    assert has_standard_split(out)
    before, after = _captions(data), _captions(out)
    for name, caption in TAUGHT.items():
        refs = before["train"][name] if mix == "both" else []
        assert after["train"][name] == refs + [caption_tokens(caption)] * copies
    assert after["val"] == before["val"] and after["test"] == before["test"]
    assert (out / "Flicker8k_Dataset").resolve() == (data / "Flicker8k_Dataset").resolve()  # linked, not copied
    # a student's model file says whose captions it learned: the folder's note, a fact beside Flickr8k's
    whose = {"teacher": "the train photos' captions are not the annotators' but a teacher's",
             "both": "each train photo's five captions, then a teacher's (2 copies)"}[mix]  # fmt: skip
    bundled = (
        f"flickr8k_soft.pt sha256:{sha256_of(MODEL_NAMES['flickr8k'])[:12]}"  # which weights the bundled file held
    )
    note = (f"{whose}: the bundled captioner at its recorded decoding, model file {bundled} (sequence-level "
            "distillation); val and test as")  # fmt: skip
    assert read_data_note(out) == note + " they were"
    facts = CaptionDataModule(source="flickr8k", root=str(out)).facts
    assert facts["training_data"].endswith("English captions") and facts["data_note"] == note + " they were"
    printed = capsys.readouterr().out
    said = "teacher: 0 of 2 captions (0.0%) are one of the photo's references; 7.00 words a caption against the "
    assert said + "references' 4.00" in printed


def test_a_teacher_caption_that_is_a_reference_is_counted(tmp_path, capsys):
    data = write_original(tmp_path / "f8k")
    _teacher(tmp_path / "out", {**TAUGHT, "coffee.png": "a photo of coffee"})  # the file's "A photo of coffee ."
    assert distil_data(["--data-root", str(data), "--out", str(tmp_path / "out")]) == 0
    assert "teacher: 1 of 2 captions (50.0%)" in capsys.readouterr().out


@pytest.mark.long  # the bundled captioner captions one photo (~6 s)
def test_a_cut_teacher_file_is_finished_by_caption(tmp_path):
    data = write_original(tmp_path / "f8k", copies=True)
    out = tmp_path / "out"
    _teacher(out, {"coffee.png": TAUGHT["coffee.png"]})  # cut after the first photo: only chelsea is captioned
    with (out / "teacher.jsonl").open("a") as f:
        f.write('{"image": "/somewhere/chelsea.png", "capt')  # and in the middle of its line
    assert distil_data(["--data-root", str(data), "--out", str(out), "--teacher", "--beam-size 1"]) == 0
    records = [json.loads(line) for line in (out / "teacher.jsonl").read_text().splitlines()]
    assert [Path(r["image"]).name for r in records] == ["coffee.png", "chelsea.png"]
    photo = data / "Flicker8k_Dataset" / "chelsea.png"
    (own,) = Captioner.load(MODEL_NAMES["flickr8k"]).caption_images([photo], beam_size=1)
    assert records[1]["words"] == own.words
    assert _captions(out)["train"]["chelsea.png"] == [own.words]


def test_refusals(tmp_path):
    with pytest.raises(SystemExit, match="missing/Flicker8k_Dataset: no such folder"):
        distil_data(["--data-root", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    data = write_original(tmp_path / "f8k")
    with pytest.raises(SystemExit, match="--out is --data-root"):
        distil_data(["--data-root", str(data), "--out", str(data)])
    linked = tmp_path / "linked"  # an OUT whose text folder is the dataset's: refused before anything is written
    linked.mkdir()
    (linked / "Flickr8k_text").symlink_to(data / "Flickr8k_text", target_is_directory=True)
    before = {p.name: p.read_bytes() for p in (data / "Flickr8k_text").iterdir()}
    with pytest.raises(OutputRefused, match=r"Flickr_8k\.trainImages\.txt is also an input"):
        distil_data(["--data-root", str(data), "--out", str(linked)])
    assert {p.name: p.read_bytes() for p in (data / "Flickr8k_text").iterdir()} == before
    assert sorted(p.name for p in linked.iterdir()) == ["Flickr8k_text"]
    (data / "Flickr8k_text" / "Flickr_8k.devImages.txt").unlink()
    with pytest.raises(SystemExit, match=r"Flickr_8k\.devImages\.txt: not found"):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "out")])
    data = write_original(tmp_path / "f8k2")
    _teacher(tmp_path / "taught", TAUGHT)
    assert distil_data(["--data-root", str(data), "--out", str(tmp_path / "taught")]) == 0
    assert "a teacher's: the bundled captioner at its" in read_data_note(tmp_path / "taught")
    with pytest.raises(
        SystemExit, match="captions are another teacher's \\(the bundled captioner, flickr8k_soft.pt sha256:"
    ):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "taught"), "--teacher", "--model x.pt"])
    # the same options, but the bundled file is no longer the one that captioned (it was replaced): refused too
    said = tmp_path / "taught" / "teacher-options.txt"
    said.write_text("\nflickr8k_soft.pt sha256:000000000000\n")
    with pytest.raises(
        SystemExit, match="another teacher's \\(the bundled captioner, flickr8k_soft.pt sha256:000000000000\\)"
    ):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "taught")])
    said.write_text("\n")  # written before the files were recorded: the options alone are compared, as then, and
    assert distil_data(["--data-root", str(data), "--out", str(tmp_path / "taught")]) == 0
    assert said.read_text() == "\n\n"  # neither the record nor the note names files it cannot vouch for
    assert "the bundled captioner at its recorded decoding (sequence-level" in read_data_note(tmp_path / "taught")
    for flag in ("--copies", "--limit"):
        with pytest.raises(SystemExit):
            distil_data(["--data-root", str(data), "--out", str(tmp_path / "out"), flag, "0"])
