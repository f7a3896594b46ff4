"""Flickr8k readers (captioning.training.readers): the original layout and Kaggle's, on small copies written here
(Flickr8k's photos never enter the repository): junk lines skipped and counted in one line,
splits, bad input in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.flickr8k import IMAGES, NAMES, write_original

from captioning.training.data import CaptionDataModule
from captioning.training.readers import CaptionDataError, caption_tokens, read_flickr8k


def write_kaggle(root: Path, lines: list[str] | None = None) -> Path:
    (root / "Images").mkdir(parents=True)
    for n in NAMES:
        shutil.copy(IMAGES / n, root / "Images" / n)
    if lines is None:
        lines = ["image,caption"]
        for n in NAMES:
            lines += [f"{n},A photo of {n.split('.')[0]} .", f'{n},"The {n.split(".")[0]}, up close!"']
        lines += ["missing.jpg,a caption of nothing"]
    (root / "captions.txt").write_text("\n".join(lines) + "\n")
    return root


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
