"""The caption readers given what a hand-made or damaged file holds (an audit's findings, 2026-12-07): a stray quote
in a CSV joins the lines up to the next quote into one caption (said, naming the lines); a field past csv's limit, a
caption in the name's column, a JSON's number for a file name are one line naming where; wrong kinds of path say so;
a Flickr8k token file that matches nothing says why where it can."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.flickr8k import IMAGES, NAMES, write_kaggle, write_original

from captioning.training.readers import CaptionDataError, read_flickr8k, read_folder, read_karpathy


def _kaggle_lines() -> list[str]:
    lines = ["image,caption"]
    for n in NAMES:
        lines += [f"{n},a photo of {n.split('.')[0]}", f"{n},the {n.split('.')[0]} up close"]
    return lines


def test_a_stray_quote_in_kaggle_captions_is_said_naming_its_lines(tmp_path, capsys):
    lines = _kaggle_lines()
    lines[5] = lines[5].replace(",", ',"', 1)  # line 6 opens a quote no line closes: lines 6-9 are one caption
    splits = read_flickr8k(write_kaggle(tmp_path / "k", lines), seed=0)
    assert sum(len(it.captions) for v in splits.values() for it in v) == 5  # 8 captions read as 5, unsaid before
    err = capsys.readouterr().err
    assert "captions.txt: 1 row(s) run over more than one line (first: lines 6-9)" in err
    # as it was, nothing: one row of each line
    read_flickr8k(write_kaggle(tmp_path / "ok", _kaggle_lines()), seed=0)
    assert "more than one line" not in capsys.readouterr().err


def test_a_kaggle_field_past_csvs_limit_is_one_line_naming_it(tmp_path):
    lines = [*_kaggle_lines(), f'coffee.png,"{"dog " * 40000}"']  # 160,000 characters: csv's limit is 131,072
    with pytest.raises(CaptionDataError, match=r"captions.txt: line \d+: not CSV as read: field larger") as exc:
        read_flickr8k(write_kaggle(tmp_path / "k", lines), seed=0)
    assert "\n" not in str(exc.value)


def _folder(tmp_path: Path, name: str, lines: list[str]) -> tuple[Path, Path]:
    images = tmp_path / "photos"
    images.mkdir(exist_ok=True)
    for n in NAMES:
        shutil.copy(IMAGES / n, images / n)
    (tmp_path / name).write_text("\n".join(lines) + "\n")
    return images, tmp_path / name


def test_a_stray_quote_in_a_folder_csv_is_said(tmp_path, capsys):
    lines = [f"{n},a photo of {n.split('.')[0]}" for n in NAMES]
    lines[1] = lines[1].replace(",", ',"', 1)
    items = read_folder(*_folder(tmp_path, "caps.csv", lines))
    assert [it.path.name for it in items] == NAMES[:2]  # the last two photos' lines were read as chelsea's caption
    assert items[1].raw == ["a photo of chelsea rocket.jpg,a photo of rocket astronaut.png,a photo of astronaut"]
    assert "caps.csv: 1 row(s) run over more than one line (first: lines 2-4)" in capsys.readouterr().err


def test_a_caption_in_the_names_column_is_one_line_naming_the_line(tmp_path):
    lines = [f"{n}\ta photo" for n in NAMES] + ["a very " + "very " * 60 + "long caption\tcoffee.png"]
    with pytest.raises(CaptionDataError, match=r"caps.tsv: line 5: 'a very very .*' cannot name a photo") as exc:
        read_folder(*_folder(tmp_path, "caps.tsv", lines))
    assert "\n" not in str(exc.value)


def _karpathy(tmp_path: Path, entry: dict) -> Path:
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"images": [entry]}))
    return path


def test_karpathy_fields_of_the_wrong_type_are_one_line(tmp_path):
    entry = {"filename": 5, "split": "train", "sentences": [{"raw": "a dog"}]}
    with pytest.raises(CaptionDataError, match=r"images\[0\].filename is 5, not a text"):
        read_karpathy(_karpathy(tmp_path, entry), IMAGES)
    entry = {"filename": "coffee.png", "split": "train", "sentences": [{"tokens": "a dog runs"}]}  # letters as words
    with pytest.raises(CaptionDataError, match=r"images\[0\].sentences\[0\].tokens is not a list of words"):
        read_karpathy(_karpathy(tmp_path, entry), IMAGES)
    entry = {"filename": "gone.png", "split": "train", "sentences": [{"raw": "a dog"}]}
    with pytest.raises(CaptionDataError, match="check data.image_root, and each entry's 'filepath' and 'filename'"):
        read_karpathy(_karpathy(tmp_path, entry), IMAGES)


def test_a_split_files_repeated_line_is_said_as_a_repeat(tmp_path, capsys):
    root = write_original(tmp_path / "f", splits={"train": NAMES[:2] + NAMES[:1], "dev": NAMES[2:3],
                                                  "test": NAMES[3:]})  # fmt: skip
    assert [it.path.name for it in read_flickr8k(root)["train"]] == NAMES[:2]
    err = capsys.readouterr().err
    assert "trainImages.txt: skipped 1 of 3 lines that name a photo of a line before (read once)" in err
    assert "trainImages.txt: skipped 1 of 3 lines that name no captioned" not in err


def test_paths_of_the_wrong_kind_say_so(tmp_path):
    root = write_original(tmp_path / "f")
    token = root / "Flickr8k_text" / "Flickr8k.token.txt"
    token.unlink()
    token.mkdir()
    with pytest.raises(CaptionDataError, match="Flickr8k.token.txt: captions file is a folder"):
        read_flickr8k(root)
    with pytest.raises(CaptionDataError, match="data root is a file, not a folder"):
        read_flickr8k(root / "Flickr8k_text" / "Flickr_8k.devImages.txt")


@pytest.mark.parametrize(
    "lines, why",
    [([f"{n}#0    a photo" for n in NAMES], "; no line has a tab after the photo's name"),
     ([f"{n.upper()}#0\ta photo" for n in NAMES], "; the folder has coffee.png, in another case")],
    ids=["spaces for the tab", "names in another case"],
)  # fmt: skip
def test_a_token_file_that_names_nothing_says_why(tmp_path, lines, why):
    with pytest.raises(CaptionDataError, match="no caption names an image of the folder") as exc:
        read_flickr8k(write_original(tmp_path / "f", token_lines=lines))
    assert str(exc.value).endswith(why)


def _photo(path: Path, shade: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (shade, 40, 90)).save(path)


def test_the_likely_file_of_a_missing_name_is_said_where_it_is_not_the_first_missing(tmp_path, capsys):
    """ghost.jpg (no such photo) came first: casedog.jpg, which the folder has as CaseDog.jpg, was not hinted."""
    for k, name in enumerate(("a.jpg", "b.jpg", "CaseDog.jpg")):
        _photo(tmp_path / "q" / name, 60 * k)
    (tmp_path / "q.tsv").write_text("a.jpg\ta dog\nghost.jpg\ta cat\ncasedog.jpg\ta dog runs\nb.jpg\ta b\n")
    read_folder(tmp_path / "q", tmp_path / "q.tsv")
    said = next(line for line in capsys.readouterr().err.splitlines() if "files are missing" in line)
    assert said.endswith(f"(first: {tmp_path / 'q' / 'ghost.jpg'}; casedog.jpg: the folder has CaseDog.jpg, in "
                         "another case)")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "folder", "says"),
    [
        # the captions name photos by their file names alone, the photos sit in a subfolder
        (
            "img_0.jpg",
            "nest",
            "; 2023/img_0.jpg is in a subfolder: the file names photos by their paths from the folder",
        ),
        # named from the folder above data.image_dir: photos/photos/x.jpg
        ("photos/img_0.jpg", "photos", "exists: the file names its photos from the folder above (photos/ twice)"),
    ],
)
def test_photos_named_from_another_folder_say_where_they_are(tmp_path, name, folder, says):
    where = tmp_path / folder / ("2023" if folder == "nest" else "")
    for k in range(3):
        _photo(where / f"img_{k}.jpg", 50 * k)
    tsv = tmp_path / "c.tsv"
    tsv.write_text("".join(f"{name.replace('0', str(k))}\tcaption {k}\n" for k in range(3)))
    with pytest.raises(CaptionDataError) as err:
        read_folder(tmp_path / folder, tsv)
    assert says in str(err.value), err.value


def test_kaggles_captions_txt_is_read_as_csv_and_other_layouts_get_their_own_hint(tmp_path, capsys):
    """Kaggle's Flickr8k captions.txt is CSV with an image,caption header under a .txt name: it was refused with
    "commas between them? a .csv file is read as CSV"; a pipe-separated file (Flickr30k's results.csv) and a JSON got
    that hint too, and a TSV of quoted names read '"p0.jpg"' as a name."""
    for k in range(3):
        _photo(tmp_path / "k" / f"p{k}.jpg", 60 * k)
    kaggle = tmp_path / "captions.txt"
    kaggle.write_text("image,caption\n" + "".join(f'p{k}.jpg,"A dog, running {k}."\n' for k in range(3)))
    items = read_folder(tmp_path / "k", kaggle)
    assert [(i.path.name, i.raw) for i in items] == [(f"p{k}.jpg", [f"A dog, running {k}."]) for k in range(3)]
    assert "line 1 read as a header" in capsys.readouterr().err
    quoted = tmp_path / "q.tsv"
    quoted.write_text('"p0.jpg"\tA dog.\n"p1.jpg"\tA cat.\n"p2.jpg"\tA bird.\n')
    assert [i.path.name for i in read_folder(tmp_path / "k", quoted)] == ["p0.jpg", "p1.jpg", "p2.jpg"]
    for text, hint in (("image_name| comment_number| comment\np0.jpg| 0| A dog.\n", "(| between them? save it"),
                       ('{"p0.jpg": "a dog"}\n', "(JSON is not read here")):  # fmt: skip
        other = tmp_path / "other.tsv"
        other.write_text(text)
        with pytest.raises(CaptionDataError, match=r"other\.tsv: line 1: expected") as err:
            read_folder(tmp_path / "k", other)
        assert hint in str(err.value)


def test_lines_of_empty_columns_are_skipped_and_counted(tmp_path):
    """A spreadsheet's empty row ("\t") among the captions was skipped unsaid: counted in one note, as text-train's
    reader counts them."""
    from captioning.training.caption_rows import caption_rows

    notes: list[str] = []
    text = "a.jpg\ta dog runs\n\t\n\nb.jpg\ta cat sleeps\n \t \n"
    rows = list(caption_rows(tmp_path / "c.tsv", text, ValueError, notes.append))
    assert [(r.name, r.caption) for r in rows] == [("a.jpg", "a dog runs"), ("b.jpg", "a cat sleeps")]
    assert notes == [f"{tmp_path / 'c.tsv'}: 2 line(s) have only empty columns (first: line 2): skipped, as blank "
                     "lines are"]  # fmt: skip
