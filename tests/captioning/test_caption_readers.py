"""Flickr8k readers (captioning.training.readers): the original layout and Kaggle's, on small copies written here
(Flickr8k's photos never enter the repository): junk lines skipped and counted in one line,
splits, bad input in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.flickr8k import NAMES, write_kaggle, write_original

from captioning.commands.train import caption_train_cli
from captioning.training.data import CaptionDataModule
from captioning.training.readers import (
    CaptionDataError,
    caption_tokens,
    has_standard_split,
    read_flickr8k,
    read_karpathy,
    split_clash,
)

TINY = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


def test_caption_tokens_drop_punctuation_and_lowercase():
    assert caption_tokens("A dog's toy, on a well-known 2.5 m path .") == [
        "a", "dog's", "toy", "on", "a", "well-known", "2.5", "m", "path",
    ]  # fmt: skip
    # a vowel sign is part of its word, not punctuation to drop ("लड़का" was "लड", "का": the nukta and sign gone);
    # an accent typed apart from its letter is that letter
    assert caption_tokens("एक लड़का दौड़ता है।") == ["एक", "लड़का", "दौड़ता", "है"]
    assert caption_tokens("Mal\u0079\u0301 pes .") == ["malý", "pes"]


def test_original_layout_splits_and_one_line_per_junk_file(tmp_path, capsys):
    splits = read_flickr8k(write_original(tmp_path / "f8k"))
    assert [it.path.name for it in splits["train"]] == ["coffee.png", "chelsea.png"]
    assert [it.path.name for it in splits["val"]] == ["rocket.jpg"]
    assert [it.path.name for it in splits["test"]] == ["astronaut.png"]
    assert splits["train"][0].captions == [["a", "photo", "of", "coffee"], ["the", "coffee", "up", "close"]]
    assert splits["train"][0].path.is_file()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2, err  # the token file's 3 junk lines in one line, the train split's 1 in another
    assert "Flickr8k.token.txt: skipped 3 of 11 lines" in err[0] and "chelsea.png.1#0" in err[0]
    assert "Flickr_8k.trainImages.txt: skipped 1 of 3 lines" in err[1] and "e_missing.png" in err[1]


def test_kaggle_layout_with_and_without_split_files(tmp_path, capsys):
    root = write_kaggle(tmp_path / "kaggle")
    splits = read_flickr8k(root, seed=0)
    assert sorted(len(v) for v in splits.values()) == [1, 1, 2]  # an eighth (at least 1) each for val and test
    names = sorted(it.path.name for v in splits.values() for it in v)
    assert names == sorted(NAMES)
    chelsea = next(it for v in splits.values() for it in v if it.path.name == "chelsea.png")
    assert chelsea.captions == [["a", "photo", "of", "chelsea"], ["the", "chelsea", "up", "close"]]  # quoted comma
    assert "captions.txt: skipped 1 of 9 lines" in capsys.readouterr().err
    assert read_flickr8k(root, seed=0)["val"][0].path == splits["val"][0].path  # the seed fixes the cut
    # the standard split files beside captions.txt are used when present
    for s, names in {"train": NAMES[:2], "dev": NAMES[2:3], "test": NAMES[3:]}.items():
        (root / f"Flickr_8k.{s}Images.txt").write_text("\n".join(names))
    splits = read_flickr8k(root, layout="kaggle")
    assert [it.path.name for it in splits["test"]] == ["astronaut.png"]


TEXT = "Flickr8k_text"


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda r: shutil.rmtree(r / "Flicker8k_Dataset"), "Flicker8k_Dataset: image folder not found"),
        (lambda r: (r / TEXT / "Flickr8k.token.txt").unlink(), "Flickr8k.token.txt: captions file not found"),
        (lambda r: (r / TEXT / "Flickr_8k.devImages.txt").write_text("x.jpg\n\n"), "devImages.txt: the split is empty"),
        (lambda r: (r / TEXT / "Flickr8k.token.txt").write_bytes(b"a.jpg#0\tok\n\xff\xfe bad\n"), "line 2: not UTF-8"),
        (lambda r: (r / TEXT / "Flickr8k.token.txt").write_text("gone.jpg#0\tx\n"), "no caption names an image"),
        (lambda r: [p.unlink() for p in (r / "Flicker8k_Dataset").iterdir()], "image folder has no files"),
    ],
    ids=["no image folder", "no token file", "empty split", "not utf-8", "no caption matches", "empty folder"],
)  # fmt: skip
def test_original_layout_bad_input_is_one_line(tmp_path, damage, message):
    root = write_original(tmp_path / "f8k")
    damage(root)
    with pytest.raises(CaptionDataError, match=message) as exc:
        read_flickr8k(root)
    assert "\n" not in str(exc.value)


def test_unknown_root_layout_and_kaggle_header(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaptionDataError, match="neither Flickr8k layout found"):
        read_flickr8k(tmp_path / "empty")
    with pytest.raises(CaptionDataError, match="data root not found"):
        read_flickr8k(tmp_path / "nowhere")
    with pytest.raises(CaptionDataError, match="unknown Flickr8k layout 'zip'"):
        read_flickr8k(tmp_path / "empty", layout="zip")
    root = write_kaggle(tmp_path / "k", ["filename\tcaption", "coffee.png\ta cup"])
    with pytest.raises(CaptionDataError, match="line 1: expected the header 'image,caption'"):
        read_flickr8k(root)


def test_data_module_reads_flickr8k_source(tmp_path):
    dm = CaptionDataModule(source="flickr8k", root=str(write_original(tmp_path / "f8k")), min_freq=1, batch_size=2)
    dm.setup("fit")
    assert dm.domain == "Flickr8k"
    assert len(dm.splits["train"].images) == 2 and "coffee" in dm.vocab.stoi
    batch = next(iter(dm.train_dataloader()))
    assert batch["images"].shape[0] == 2
    with pytest.raises(CaptionDataError, match="needs data.root"):
        CaptionDataModule(source="flickr8k").setup("fit")


def test_a_flickr8k_run_on_part_of_its_split_says_and_records_how_many_photos(tmp_path):
    """A model fine-tuned on 64 of Flickr8k's photos said "trained on: Flickr8k" alone (--model-info): where
    data.train_size / val_size / test_size cut the split, fit says the counts and the model file records them."""
    root = str(write_original(tmp_path / "f8k"))
    whole = CaptionDataModule(source="flickr8k", root=root, min_freq=1)
    whole.setup("fit")
    assert whole.photos_read is None  # the standard split whole: "Flickr8k" says it
    cut = CaptionDataModule(source="flickr8k", root=root, min_freq=1, train_size=1)
    cut.setup("fit")
    captions = len(cut.splits["train"].references[0])
    assert captions == 2 and cut.photos_read == "1 train photo (2 captions), 1 val, 1 test"


def test_a_kaggle_copy_without_split_files_says_its_random_split_is_not_the_standard_one(tmp_path, capsys):
    """Kaggle's Flickr8k drew a random split silently: its "test" photos were mostly standard train photos, on which
    the bundled model scored CIDEr-D 179 against 62, and stderr said only how many lines were skipped."""
    root = write_kaggle(tmp_path / "kaggle")
    read_flickr8k(root, seed=3)
    (note,) = [line for line in capsys.readouterr().err.splitlines() if "split" in line]
    assert note.startswith(f"caption data: note: {root}: no standard split files (Flickr_8k.trainImages.txt, ")
    assert "drawn at random (seed 3), not the standard split" in note and "nor the bundled model's" in note
    assert not has_standard_split(root)
    for s, names in {"train": NAMES[:2], "dev": NAMES[2:3], "test": NAMES[3:]}.items():
        (root / f"Flickr_8k.{s}Images.txt").write_text("\n".join(names))
    read_flickr8k(root)
    assert has_standard_split(root) and "split" not in capsys.readouterr().err


def test_a_photo_in_two_splits_is_refused_naming_how_many_and_the_first(tmp_path):
    """A photo listed in the train and the test split file (or in two splits of a Karpathy JSON) went into both:
    trained on, then scored."""
    root = write_original(tmp_path / "f8k", splits={"train": ["coffee.png", "chelsea.png"], "dev": ["rocket.jpg"],
                                                    "test": ["astronaut.png", "chelsea.png"]})  # fmt: skip
    with pytest.raises(CaptionDataError) as exc:
        read_flickr8k(root)
    assert str(exc.value) == (
        f"{root / 'Flickr8k_text'}: 1 photo(s) are in more than one split (first: 'chelsea.png', in "
        "Flickr_8k.trainImages.txt and Flickr_8k.testImages.txt): a photo trained on and scored inflates its scores; "
        "list each in one split"
    )
    photos = root / "Flicker8k_Dataset"
    entries = [("coffee.png", "train"), ("rocket.jpg", "restval"), ("rocket.jpg", "train"), ("coffee.png", "test")]
    images = [{"filename": n, "split": s, "sentences": [{"raw": "a cup"}]} for n, s in entries]
    (tmp_path / "k.json").write_text(json.dumps({"images": images}))
    with pytest.raises(CaptionDataError, match=r"k.json: 1 photo\(s\) are in more than one split \(first: "
                                               r"'coffee.png', in train and test\)"):  # fmt: skip
        read_karpathy(tmp_path / "k.json", photos)  # restval is train: rocket.jpg is in one split


def test_a_start_that_learned_from_another_split_of_flickr8k_is_refused(tmp_path, cli_run_in_tmp, capsys):
    """model.init_from flickr8k (trained on the standard split) on a Kaggle copy's random split: its val and test
    photos are mostly photos it trained on. A model trained on that random split may go on with it, not elsewhere."""
    root = write_kaggle(tmp_path / "kaggle")
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", TINY, "--data.source", "flickr8k", "--data.root", str(root),
                           "--model.init_from", "flickr8k", "--model.init_member", "1"])  # fmt: skip
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"caption-train: error: model.init_from flickr8k (decoder 1) learned from Flickr8k's photos in the standard "
        f"split, and data.root {root} reads them in a random split (seed 0): its val and test photos would be partly "
        "ones the start trained on, and score high for it; put the standard split files (Flickr_8k.trainImages.txt, "
        "Flickr_8k.devImages.txt, Flickr_8k.testImages.txt) in it"
    )
    # what a model trained on that random split records, read back: the same split goes on, another is refused
    drawn = CaptionDataModule(source="flickr8k", root=str(root), seed=5)
    assert drawn.facts["training_data"].endswith(", in a random split (seed 5), not the standard one")
    assert split_clash("m.pt", drawn.facts, drawn.flickr8k_split, str(root)) is None
    assert "in a random split (seed 0)" in split_clash("m.pt", drawn.facts, "a random split (seed 0)", str(root))
    started = {"started_from": f"m.pt, trained on {drawn.facts['training_data']}"}  # a folder's model made from it
    assert "put the standard split" not in split_clash("x.pt", started, "the standard split", str(root))
    assert split_clash("shapes", {"training_data": "synthetic shapes"}, "the standard split", str(root)) is None
