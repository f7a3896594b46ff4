"""Captioning your own photos (data.source folder, karpathy): photos named as people's tools write them (``./p.jpg``,
``#1 beach.jpg``, a decomposed ``café.jpg``), a val split CIDEr can rank checkpoints on, the captions' capitals kept,
Karpathy "raw" sentences without their punctuation, and a test of no test photos refused."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from helpers.scene_corpus import write_flickr8k, write_karpathy
from PIL import Image
from pytorch_lightning.callbacks import ModelCheckpoint

from captioning.commands.caption import model_info
from captioning.commands.train import caption_train_cli, train_main
from captioning.model.captioner import Captioner
from captioning.training.data import CaptionDataModule, written_casing
from captioning.training.module import one_val_photo_line
from captioning.training.readers import CaptionDataError, read_folder, read_karpathy
from text_attn.core.casing import learn_casing

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
CAFE = "caf\u00e9.jpg"  # composed (NFC), as a TSV typed on Linux or Windows names it
GERMAN = ["Ein Hund läuft im Park.", "Eine Frau mit einem Hut.", "Zwei Kinder spielen am Strand."]


def _photos(folder: Path, names: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(names):
        Image.new("RGB", (16, 16), (12 * k % 256, 80, 160)).save(folder / name, format="PNG")
    return folder


def _folder(tmp_path: Path, n: int = 20) -> tuple[Path, Path]:
    """n photos, each with a German caption."""
    folder = _photos(tmp_path / "photos", [f"p{k:02d}.png" for k in range(n)])
    tsv = tmp_path / "captions.tsv"
    tsv.write_text("".join(f"p{k:02d}.png\t{GERMAN[k % 3]}\n" for k in range(n)), encoding="utf-8")
    return folder, tsv


def test_photos_named_as_tools_write_them_are_read_once_each(tmp_path, capsys):
    """``find .`` writes ``./p.jpg``: it was a second photo that could land in train and test; ``#1 beach.jpg`` was
    dropped as a comment; macOS stores ``café.jpg`` decomposed (NFD) and a TSV naming it composed called it missing."""
    folder = _photos(tmp_path / "photos", ["p.png", "#1 beach.png", unicodedata.normalize("NFD", CAFE), "q.png"])
    tsv = tmp_path / "captions.tsv"
    tsv.write_text(
        "# a comment line: no tab\np.png\ta dog\n./p.png\ta brown dog\n#1 beach.png\ta beach\n"
        f"{CAFE}\ta cafe\nq.png\ta cup\nsub/../q.png\tanother cup\n",
        encoding="utf-8",
    )
    items = read_folder(folder, tsv, strict=True)
    assert [(it.path.name, it.captions) for it in items] == [
        ("p.png", [["a", "dog"], ["a", "brown", "dog"]]),  # one photo, all its captions
        ("#1 beach.png", [["a", "beach"]]),
        (unicodedata.normalize("NFD", CAFE), [["a", "cafe"]]),  # the file as the folder holds it
        ("q.png", [["a", "cup"], ["another", "cup"]]),
    ]
    assert all(it.path.is_file() for it in items) and capsys.readouterr().err == ""


def test_a_header_line_as_pandas_writes_it_is_skipped_with_a_note(tmp_path, capsys):
    """``df.to_csv("captions.tsv", sep="\\t")`` writes "image<TAB>caption" first: it was read as a photo named
    "image", said missing. Skipped, said once; a photo named so, or a header later in the file, is read as written."""
    folder = _photos(tmp_path / "photos", ["p.png", "q.png"])
    tsv = tmp_path / "captions.tsv"
    tsv.write_text("\nImage\tCaption\np.png\ta dog\nq.png\ta cup\n", encoding="utf-8")
    items = read_folder(folder, tsv, strict=True)
    assert [(it.path.name, it.captions) for it in items] == [("p.png", [["a", "dog"]]), ("q.png", [["a", "cup"]])]
    assert capsys.readouterr().err.strip() == (f"caption data: {tsv}: line 2 read as a header ('Image\\tCaption'): "
                                               "skipped")  # fmt: skip
    Image.new("RGB", (16, 16), "white").save(folder / "image", format="PNG")  # a photo of that name: its line is one
    tsv.write_text("image\tcaption\np.png\ta dog\n", encoding="utf-8")
    assert [it.path.name for it in read_folder(folder, tsv)] == ["image", "p.png"]
    tsv.write_text("p.png\ta dog\nfile\ttext\n", encoding="utf-8")  # not first: a line naming a missing photo
    with pytest.raises(CaptionDataError, match="file"):
        read_folder(folder, tsv, strict=True)


def test_the_data_notes_are_said_by_the_first_process_of_a_run_only(tmp_path, capsys, monkeypatch):
    """Under DDP every process reads the data and said each of its notes: eight times on eight GPUs. Lightning starts
    the others with LOCAL_RANK set; they read the same, and say nothing."""
    folder = _photos(tmp_path / "photos", ["p.png", "q.png"])
    tsv = tmp_path / "captions.tsv"
    tsv.write_text("image\tcaption\np.png\ta dog\nq.png\ta cup\nr.png\ta hat\n", encoding="utf-8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    second = read_folder(folder, tsv)  # the header skipped, r.png missing: two notes
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("LOCAL_RANK", "0")
    first = read_folder(folder, tsv)
    said = capsys.readouterr().err.splitlines()
    assert [it.path.name for it in first] == [it.path.name for it in second] == ["p.png", "q.png"]
    assert len(said) == 2 and "read as a header" in said[0]
    assert "skipped 1 of 3 images whose files are missing" in said[1]


def test_a_csv_captions_file_is_read_as_csv(tmp_path, capsys):
    """A spreadsheet's or pandas' captions.csv: commas between the columns, a caption holding one in quotes, a header.
    A comma-separated file named .tsv is refused with a hint."""
    folder = _photos(tmp_path / "photos", ["p.png", "q.png"])
    csv_file = tmp_path / "captions.csv"
    csv_file.write_text('image,caption\np.png,"a dog, running"\nq.png,a cup,extra\n', encoding="utf-8")
    items = read_folder(folder, csv_file, strict=True)
    assert [(it.path.name, it.raw) for it in items] == [("p.png", ["a dog, running"]), ("q.png", ["a cup"])]
    assert "line 1 read as a header" in capsys.readouterr().err
    csv_file.write_text("p.png\ta dog, running\n", encoding="utf-8")  # a TSV named .csv, read as before
    assert [it.raw for it in read_folder(folder, csv_file)] == [["a dog, running"]]
    tsv = tmp_path / "captions.tsv"
    tsv.write_text("p.png,a dog\n", encoding="utf-8")
    with pytest.raises(CaptionDataError, match=r"line 1: expected 'filename<TAB>caption'.*a \.csv file is read as CSV"):
        read_folder(folder, tsv)


def test_a_fit_says_and_records_how_many_of_your_photos_it_read(tmp_path):
    """caption-train said nothing of the photos a folder gave (a captions file naming 10 of 12 photos trained on 6,
    silently); --model-info said only the folder's name. Said as fit starts (caption-train: photos: ...), recorded
    as the model file's ``photos``."""
    folder, tsv = _folder(tmp_path)
    tsv.write_text(tsv.read_text() + "p00.png\tEin Hund im Gras.\n", encoding="utf-8")  # a second caption for one
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv))
    dm.setup("fit")
    train = len(dm.splits["train"].images)
    captions = sum(map(len, dm.splits["train"].references))
    assert train == 16 and captions in (16, 17)
    assert dm.photos_read == f"16 train photos ({captions} captions), 2 val, 2 test"
    assert CaptionDataModule(source="shapes").photos_read is None


def test_a_small_folder_holds_out_two_photos_and_one_val_photo_is_said_to_rank_nothing(tmp_path):
    """20 photos held out 1 (5%): CIDEr over one photo is 0 at every epoch, so the best checkpoint was epoch 0 and
    fit said training did not beat the start. Now two each; one given explicitly gets one note when CIDEr is
    monitored."""
    folder, tsv = _folder(tmp_path)
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv))
    dm.setup("fit")
    assert [len(dm.splits[s].images) for s in ("train", "val", "test")] == [16, 2, 2]
    few, few_tsv = _folder(tmp_path / "few", 3)  # too few to hold out two and train on two: one each, as before
    three = CaptionDataModule(source="folder", image_dir=str(few), captions_tsv=str(few_tsv))
    three.setup("fit")
    assert [len(three.splits[s].images) for s in ("train", "val", "test")] == [1, 1, 1]

    one = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), val_size=1)
    one.setup("fit")
    trainer = pl.Trainer(callbacks=[ModelCheckpoint(monitor="val_CIDEr", mode="max")], logger=False)
    line = one_val_photo_line(trainer, one)
    assert line.startswith("val_CIDEr over 1 val photo is 0 whatever the captions") and "data.val_size 2" in line
    assert one_val_photo_line(trainer, dm) is None  # two val photos rank
    bleu = pl.Trainer(callbacks=[ModelCheckpoint(monitor="val_Bleu_4", mode="max")], logger=False)
    assert one_val_photo_line(bleu, one) is None  # BLEU over one photo still ranks


@pytest.mark.long
def test_your_german_captions_train_a_model_that_writes_their_capitals(tmp_path, cli_run_in_tmp, capsys):
    """Casing was learned only for Flickr8k with data.language de: German captions of your own photos trained an
    all-lowercase model. The folder's raw captions now teach it; the model file keeps it, --model-info says so."""
    folder, tsv = _folder(tmp_path)
    cli = caption_train_cli([
        "fit", "--config", CONFIG, "--data.source", "folder", "--data.image_dir", str(folder),
        "--data.captions_tsv", str(tsv), "--data.train_size", "null", "--data.val_size", "1",
        "--data.test_size", "null", "--data.batch_size", "16", "--trainer.max_steps", "1",
        "--trainer.enable_checkpointing", "true", "--trainer.callbacks+=ModelCheckpoint",
        "--trainer.callbacks.monitor", "val_CIDEr", "--trainer.callbacks.mode", "max",
        "--model.export_path", "model.pt",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("caption-train: val_CIDEr over 1 val photo is 0 whatever the captions") == 1, err
    assert err.count("caption-train: photos: 17 train photos (17 captions), 1 val, 2 test\n") == 1, err  # what it read
    casing = cli.datamodule.casing
    train_text = [GERMAN[int(p.stem[1:]) % 3] for p in cli.datamodule.splits["train"].images]
    assert casing == learn_casing(train_text) and {"Hund", "Frau", "Park"} <= set(casing["words"].split())
    model = Captioner.load("model.pt")
    assert model.casing == casing
    assert "photos:         photos: 17 train photos (17 captions), 1 val, 2 test" in model_info(model, "model.pt")
    assert "capitals:       as its training captions write them (Frau, Hund, Hut, Kinder, ...)" in model_info(
        model, "model.pt"
    )
    model.casing = learn_casing(["A dog runs.", "Two cats."])  # English: only a capital to start each caption
    assert "capitals:       as its training captions write them (a capital to start)" in model_info(model, "m.pt")
    lower = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv))
    tsv.write_text(tsv.read_text(encoding="utf-8").lower(), encoding="utf-8")
    lower.setup("fit")
    assert lower.casing is None  # captions written lowercase: nothing to learn, the words as they are


def test_german_references_get_no_meteor_and_one_note(tmp_path, cli_run_in_tmp, capsys):
    """METEOR scores English: asked for (model.val_meteor true) on German captions it logged val_METEOR 0.0111 and
    said nothing; ``caption --references`` leaves it out. Now validation does too, in one note for the run."""
    folder, tsv = _folder(tmp_path)
    cli = caption_train_cli([
        "fit", "--config", CONFIG, "--data.source", "folder", "--data.image_dir", str(folder),
        "--data.captions_tsv", str(tsv), "--data.train_size", "null", "--data.batch_size", "16",
        "--trainer.max_steps", "-1", "--trainer.max_epochs", "2", "--model.val_meteor", "true",
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("caption-train: note: no METEOR: the references are not English, and METEOR scores English") == 1
    assert "val_CIDEr" in cli.trainer.logged_metrics and "val_METEOR" not in cli.trainer.logged_metrics


def _held_out(folder: Path, tsv: Path, **sizes) -> dict[str, set[str]]:
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), **sizes)
    dm.setup("fit")
    return {s: {p.name for p in dm.splits[s].images} for s in ("train", "val", "test")}


def test_which_photos_are_held_out_follows_their_names_not_the_captions_file(tmp_path):
    """The photos were shuffled in the file's order: re-sorting it, or adding one photo, moved every held-out photo,
    and a second stage (your_photos_scst.yaml from your_photos.yaml's model) was validated and tested on photos the
    first trained on. Now re-sorting moves none, and a photo added moves at most a held-out one into train."""
    folder, tsv = _folder(tmp_path, 40)
    lines = tsv.read_text(encoding="utf-8").splitlines(keepends=True)
    before = _held_out(folder, tsv, val_size=3, test_size=3)
    tsv.write_text("".join(reversed(lines)), encoding="utf-8")
    assert _held_out(folder, tsv, val_size=3, test_size=3) == before
    for k in range(40, 46):  # one photo more each time
        _photos(folder, [f"p{k:02d}.png"])
        lines.append(f"p{k:02d}.png\t{GERMAN[0]}\n")
        tsv.write_text("".join(lines), encoding="utf-8")
        after = _held_out(folder, tsv, val_size=3, test_size=3)
        assert before["train"] <= after["train"], k  # no photo trained on is held out now
        assert after["val"] | after["test"] <= before["val"] | before["test"] | {f"p{k:02d}.png"}, k
        before = after
    assert _held_out(folder, tsv, val_size=3, test_size=3, seed=1) != before  # the seed draws another order


def test_which_photos_are_held_out_does_not_follow_the_folders_path(tmp_path, monkeypatch):
    """The order is drawn from each photo's name in the captions file, not its path: the folder moved (or copied)
    elsewhere, or named relative to another working directory, holds out the same photos (a second stage run
    on the moved folder was otherwise validated and tested on photos the first trained on)."""
    import shutil

    folder, tsv = _folder(tmp_path, 40)
    before = _held_out(folder, tsv, val_size=3, test_size=3)
    moved = shutil.copytree(folder, tmp_path / "elsewhere" / "photos_moved")
    assert _held_out(moved, tsv, val_size=3, test_size=3) == before
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert _held_out(Path("photos_moved"), tsv, val_size=3, test_size=3) == before


@pytest.mark.parametrize("source", ["karpathy", "flickr8k"])
def test_a_size_of_0_holds_no_photos_of_the_split_not_all_of_them(tmp_path, source):
    """data.test_size 0 read Karpathy's and Flickr8k's whole test split (0 was taken as "no cap"), where the docs say
    a test of no test photos is refused in one line, as the folder source does. val_size 0 is refused as such (it was
    "no val images", of a source that holds them)."""
    data = (dict(karpathy_json=str(write_karpathy(tmp_path, 10)), image_root=str(tmp_path)) if source == "karpathy"
            else dict(root=str(write_flickr8k(tmp_path, 10))))  # fmt: skip
    dm = CaptionDataModule(source=source, test_size=0, **data)
    with pytest.raises(CaptionDataError, match="^no test photos: data.test_size is 0$"):
        dm.setup("test")
    assert dm.splits["test"].images == [] and len(dm.splits["val"].images) == 2
    with pytest.raises(CaptionDataError, match="^data.val_size is 0: nothing to validate on$"):
        CaptionDataModule(source=source, val_size=0, **data).setup("fit")


def test_a_test_of_no_test_photos_is_one_line(cli_run_in_tmp, capsys):
    """data.test_size 0: `test` scored nothing and exited 0, saying only that Lightning's loader was empty."""
    with pytest.raises(SystemExit) as exc:
        train_main(["test", "--config", CONFIG, "--data.test_size", "0", "--ckpt_path", "null"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "caption-train: error: no test photos: data.test_size is 0"


def test_karpathy_raw_sentences_learn_no_punctuation_and_their_boxes_follow_the_words(tmp_path):
    """A sentence with only "raw" added "." and "," to the vocabulary; its boxes' token_index counts the punctuation
    as the file has it, and must still name the same words."""
    _photos(tmp_path, ["a.png", "b.png"])
    sentences = [{"raw": "A dog, brown, runs.", "boxes": [[1, 0, 0, 8, 8], [3, 8, 8, 16, 16], [4, 0, 0, 4, 4]]}]
    data = {"images": [{"filename": "a.png", "split": "train", "sentences": sentences},
                       {"filename": "b.png", "split": "val", "sentences": [{"raw": "A Cat."}]}]}  # fmt: skip
    (tmp_path / "k.json").write_text(json.dumps(data))
    (item,) = read_karpathy(tmp_path / "k.json", tmp_path)["train"]
    assert item.captions == [["a", "dog", "brown", "runs"]] and item.raw == ["A dog, brown, runs."]
    # "dog" and "brown" (tokens 1 and 3 with the commas) are words 1 and 2; the box on the second "," is gone
    assert item.boxes == [[(1, (0.0, 0.0, 8.0, 8.0)), (2, (8.0, 8.0, 16.0, 16.0))]]
    dm = CaptionDataModule(source="karpathy", karpathy_json=str(tmp_path / "k.json"), image_root=str(tmp_path))
    dm.setup("fit")
    assert dm.vocab.itos[4:] == ["a", "brown", "dog", "runs"]


def test_french_captions_with_typographic_apostrophes_build_the_vocabulary_ascii_ones_do(tmp_path):
    """Captions written "aujourd’hui" (’: iOS's and macOS's keyboards) and "aujourd'hui" were two words: a model
    trained on one set read the other's as <unk>. Every reader reads ’ and ‘ as ', a word joined by one stays one
    word, a Karpathy sentence's boxes still name their words, and the casing is learned for the words as read."""
    names = ["a.png", "b.png", "c.png"]
    folder = _photos(tmp_path / "photos", names)
    french = ["L’homme d’O’Brien court aujourd’hui.", "Un chien qu’on aime.", "C‘est l’été !"]
    plain = [c.replace("’", "'").replace("‘", "'") for c in french]
    curly, ascii_tsv = tmp_path / "curly.tsv", tmp_path / "ascii.tsv"
    for tsv, captions in ((curly, french), (ascii_tsv, plain)):
        tsv.write_text("".join(f"{n}\t{c}\n" for n, c in zip(names, captions, strict=True)), encoding="utf-8")
    read = read_folder(folder, curly, strict=True)
    assert [it.captions for it in read] == [it.captions for it in read_folder(folder, ascii_tsv, strict=True)]
    assert read[0].captions == [["l'homme", "d'o'brien", "court", "aujourd'hui"]]
    assert read[2].captions == [["c'est", "l'été"]]  # ‘ typed for the apostrophe joins its word too
    assert written_casing(read)["words"].split() == ["d'O'Brien"]  # as the model writes the word: d'o'brien
    sentences = [{"raw": "L’homme, seul, court.", "boxes": [[2, 0, 0, 8, 8], [4, 8, 8, 16, 16]]}]
    (tmp_path / "k.json").write_text(json.dumps({"images": [{"filename": "a.png", "split": "train",
                                                             "sentences": sentences}]}))  # fmt: skip
    (item,) = read_karpathy(tmp_path / "k.json", folder)["train"]
    assert item.captions == [["l'homme", "seul", "court"]]
    assert item.boxes == [[(1, (0.0, 0.0, 8.0, 8.0)), (2, (8.0, 8.0, 16.0, 16.0))]]  # "seul" and "court", as written


def test_a_resume_after_the_folder_grew_says_its_val_and_test_changed(tmp_path, capsys):
    """Photos added since the checkpoint moved photos between the splits (an old test photo into train), and the
    resumed fit went on unsaid. What a photo that cannot be read does later (it leaves its split at the fit's start)
    changes nothing: the names are those the splits were read with."""
    from types import SimpleNamespace

    folder, tsv = _folder(tmp_path)

    def module() -> CaptionDataModule:
        dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), val_size=3, test_size=3,
                               batch_size=4)  # fmt: skip
        dm.setup("fit")
        dm.trainer = SimpleNamespace(state=SimpleNamespace(fn="fit"), ckpt_path="last.ckpt")
        return dm

    first = module()
    names = first.held_out()
    assert len(names) == 6 and sum(n.startswith("val:") for n in names) == 3
    first.features["val"] = torch.zeros(3, 1)  # as encoded (one row a photo)
    first._leave_out("val", [0])  # unreadable when encoded: the split goes on without it
    assert first.held_out() == names
    saved = {"epoch": 0, "batches_done": 1, "batch_size": 4, "held_out": first._held_out_digest()}
    capsys.readouterr()
    module().load_state_dict(saved)
    assert "not those of the run" not in capsys.readouterr().err
    for k in range(20):  # photos of their own (a copy of one would be read as that one)
        Image.new("RGB", (16, 16), (200, 10 * k, 30)).save(folder / f"q{k}.png", format="PNG")
    with tsv.open("a", encoding="utf-8") as f:
        f.write("".join(f"q{k}.png\t{GERMAN[0]}\n" for k in range(20)))
    module().load_state_dict(saved)
    assert "data: note: this run's val and test are not those of the run" in capsys.readouterr().err
