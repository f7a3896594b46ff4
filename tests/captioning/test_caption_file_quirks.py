"""A captions file (and a pairs file) as people's tools write them, read as they meant: two files joined by ``cat``
(a byte-order mark in the middle), joined to themselves (each line twice), gzipped, written by Python's csv module or
pandas with tabs (a caption with quotes in quotes, each doubled), numbered as Flickr30k's (``image<TAB>comment_number
<TAB>comment``: the numbers were trained as captions), and in a language written without spaces (one word each)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

from PIL import Image

from captioning.training.readers import read_folder
from text_attn.translation.corpora import read_tsv_text

CAPTIONS = {"a.png": ["a dog runs on the grass", "a brown dog"], "b.png": ["two children play", "kids at a beach"]}


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for k, name in enumerate(CAPTIONS):
        Image.new("RGB", (16, 16), (90 * k, 80, 160)).save(folder / name)
    return folder


def _lines() -> list[str]:
    return [f"{name}\t{caption}\n" for name, captions in CAPTIONS.items() for caption in captions]


def _read(folder: Path, tsv: Path) -> dict[str, list[str]]:
    return {item.key: item.raw for item in read_folder(folder, tsv)}


def test_a_file_joined_to_another_and_to_itself_reads_each_caption_once(tmp_path, capsys):
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    half = len(_lines()) // 2
    bom = "\ufeff"  # each half saved by a Windows editor, then `cat a.tsv b.tsv`; then the whole joined to itself
    text = bom + "".join(_lines()[:half]) + bom + "".join(_lines()[half:])
    tsv.write_text(text + text, encoding="utf-8")
    assert _read(folder, tsv) == CAPTIONS  # the mark was part of b.png's name: "missing", its caption lost
    assert capsys.readouterr().err.strip() == (
        f"caption data: {tsv}: 4 line(s) repeat a photo and caption of a line before (first: line 5): each read once"
    )


def test_a_gzipped_captions_file_is_read_through(tmp_path, capsys):
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv.gz"
    tsv.write_bytes(gzip.compress("".join(_lines()).encode()))
    assert _read(folder, tsv) == CAPTIONS  # "line 1: not UTF-8 text"
    csv_gz = tmp_path / "captions.csv.gz"
    csv_gz.write_bytes(gzip.compress(b'image,caption\na.png,"a dog, running"\n'))
    assert _read(folder, csv_gz) == {"a.png": ["a dog, running"]}
    assert "line 1 read as a header ('image, caption')" in capsys.readouterr().err  # as the pairs' note says it


def test_captions_numbered_in_the_second_column_are_read_from_the_third(tmp_path, capsys):
    folder, tsv = _folder(tmp_path), tmp_path / "results.tsv"
    numbered = [f"{name}\t{k}\t{c}\n" for name, cs in CAPTIONS.items() for k, c in enumerate(cs)]
    tsv.write_text("image\tcomment_number\tcomment\n" + "".join(numbered), encoding="utf-8")
    assert _read(folder, tsv) == CAPTIONS  # the digits 0 and 1 were the captions
    err = capsys.readouterr().err
    assert f"caption data: {tsv}: the second column is a number on every line" in err
    assert "line 1 read as a header" in err and "more than two columns" not in err
    tsv.write_text("a.png\t2 dogs\tby Ann\nb.png\tkids\tby Bo\n", encoding="utf-8")  # a number on one line only
    assert _read(folder, tsv) == {"a.png": ["2 dogs"], "b.png": ["kids"]}


def test_tab_separated_fields_quoted_by_a_csv_writer_are_read_as_written(tmp_path):
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    with open(tsv, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(
            [["a.png", 'a dog called "Rex"'], ["b.png", '"kids" at a beach'], ["b.png", '"quoted" already']]
        )
    tsv.write_text(tsv.read_text() + 'a.png\t"A dog," she said.\n', encoding="utf-8")  # typed so: as it is
    assert _read(folder, tsv) == {
        "a.png": ['a dog called "Rex"', '"A dog," she said.'],
        "b.png": ['"kids" at a beach', '"quoted" already'],
    }
    pairs = tmp_path / "pairs.tsv"
    with open(pairs, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows([['Er sagte: "Hallo".', 'He said: "Hello".']])
    pairs.write_text("\ufeffEin Hund.\tA dog.\n" + pairs.read_text() + "\ufeffZwei Hunde.\tTwo dogs.\n")
    assert [(s, t) for s, t, _ in read_tsv_text(pairs)] == [
        ("Ein Hund.", "A dog."),
        ('Er sagte: "Hallo".', 'He said: "Hello".'),  # was '"Er sagte: ""Hallo""."'
        ("Zwei Hunde.", "Two dogs."),  # was "\ufeffZwei Hunde."
    ]


def test_captions_written_without_spaces_get_one_note(tmp_path, capsys):
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    chinese = ["一只狗在草地上跑", "两个孩子在海滩上玩", "一个女孩在水里玩耍", "一只狗坐在长椅上"]
    tsv.write_text("".join(f"{name}\t{chinese[k % 4]}{k}\n" for k in range(24) for name in CAPTIONS), "utf-8")
    read_folder(folder, tsv)
    err = capsys.readouterr().err
    assert "its captions are 1 word(s) each (the median; 10 characters): a language written without spaces" in err
    tsv.write_text("".join(f"{name}\ta dog number {k} runs\n" for k in range(24) for name in CAPTIONS), "utf-8")
    read_folder(folder, tsv)
    assert "without spaces" not in capsys.readouterr().err


def test_byte_copies_of_a_photo_are_one_photo_with_the_captions_of_all(tmp_path, capsys):
    """``p copy.png`` beside ``p.png``: split apart, one was held out and its copy trained on (the helper's Flickr8k
    folder of 12 photos and their copies held out 4 photos whose copies were train photos)."""
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    (folder / "a copy.png").write_bytes((folder / "a.png").read_bytes())
    Image.new("RGB", (16, 16), "white").save(folder / "c.png")  # its own bytes, maybe one size with the others
    tsv.write_text("".join(_lines()) + "a copy.png\ta dog on grass\na copy.png\ta brown dog\nc.png\ta wall\n", "utf-8")
    assert _read(folder, tsv) == {
        "a.png": ["a dog runs on the grass", "a brown dog", "a dog on grass"],  # the copy's repeated caption once
        "b.png": CAPTIONS["b.png"],
        "c.png": ["a wall"],
    }
    assert capsys.readouterr().err.strip() == (
        f"caption data: {tsv}: 1 photo(s) hold the same bytes as another (first: a copy.png, a copy of a.png): each "
        "read as that photo, with its captions, so that no copy is held out from its own original"
    )


def test_a_missing_photo_names_the_file_it_likely_means(tmp_path, capsys):
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    (folder / "sub").mkdir()
    for name in ("Dog.JPG", "cat.jpeg", "bird.png", "sub/nested.png"):
        Image.new("RGB", (16, 16), (len(name) * 9, 10, 10)).save(folder / name)
    for typed, said in [
        ("dog.jpg", "; the folder has Dog.JPG, in another case"),
        ("cat.jpg", "; the folder has cat.jpeg, with another extension"),
        ("bird", "; the folder has bird.png, with an extension"),
        ("sub\\nested.png", f"; {folder / 'sub' / 'nested.png'} exists: write / between folders, not \\"),
        ("gone.png", ""),
    ]:
        tsv.write_text(f"a.png\ta dog\n{typed}\ta thing\n", encoding="utf-8")
        assert _read(folder, tsv) == {"a.png": ["a dog"]}
        assert capsys.readouterr().err.strip().splitlines()[-1] == (  # after the note on the photos not named
            f"caption data: {tsv}: skipped 1 of 2 images whose files are missing (first: {folder / typed}{said})"
        )


def test_photos_no_caption_line_names_are_counted_in_one_note(tmp_path, capsys):
    """A captions file naming 2 of a folder's 4 photos trained on 2, and nothing said so."""
    folder, tsv = _folder(tmp_path), tmp_path / "captions.tsv"
    (folder / "sub").mkdir()
    for name in ("c.png", "sub/d.jpg"):
        Image.new("RGB", (16, 16), (len(name) * 20, 10, 10)).save(folder / name)
    (folder / "notes.txt").write_text("not a photo")
    tsv.write_text("".join(_lines()), encoding="utf-8")
    assert _read(folder, tsv) == CAPTIONS
    assert capsys.readouterr().err.strip() == (
        f"caption data: {tsv}: 2 photo(s) in {folder} have no caption line (first: c.png): not trained on"
    )
    tsv.write_text("".join(_lines()) + "c.png\ta red square\nsub/d.jpg\ta square\n", encoding="utf-8")
    _read(folder, tsv)
    assert capsys.readouterr().err == ""
