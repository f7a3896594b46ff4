"""captioning.photos.shards: webdataset tar shards read in place, as img2dataset writes them;
damaged and truncated shards."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

from helpers.shards import add_member, photo_bytes, write_shard
from PIL import Image

from captioning.photos.shards import ShardNote, expand_braces, is_shard, iter_shard


def _read(path: Path, **kw):
    notes: list[ShardNote] = []
    return list(iter_shard(str(path), notes=notes.append, **kw)), notes


def test_samples_group_members_by_key_in_order(tmp_path):
    shard = write_shard(tmp_path / "00000.tar", 5, 3)
    samples, notes = _read(shard)
    assert notes == []
    assert [s.key for s in samples] == ["000000005", "000000006", "000000007"]
    assert [s.index for s in samples] == [0, 1, 2]
    s = samples[1]
    assert s.image_member == "000000006.jpg" and s.name == f"{shard}/000000006.jpg"
    assert s.image == photo_bytes(6) and s.text == "a photo number 6"
    assert s.meta["key"] == "000000006" and s.error is None
    assert Image.open(io.BytesIO(s.image)).size == (40, 40)


def test_png_and_webp_members(tmp_path):
    for ext in ("png", "webp"):
        samples, _ = _read(write_shard(tmp_path / f"{ext}.tar", 0, 2, ext=ext))
        assert [s.image_member for s in samples] == [f"000000000.{ext}", f"000000001.{ext}"]
        assert Image.open(io.BytesIO(samples[0].image)).format == ext.upper()


def test_wanted_selects_samples_and_keeps_their_positions(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 7)
    samples, _ = _read(shard, wanted=lambda i: i % 3 == 1)
    assert [(s.index, s.key) for s in samples] == [(1, "000000001"), (4, "000000004")]
    assert samples[1].image == photo_bytes(4)


def test_a_caption_or_json_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    bom = b"\xef\xbb\xbf"
    extra = {"000000009.jpg": photo_bytes(9), "000000009.txt": bom + b"a red bus\r\n", "000000009.json": bom + b"{}"}
    samples, _ = _read(write_shard(tmp_path / "s.tar", 0, 0, extra=extra))
    assert [(s.text, s.meta, s.error) for s in samples] == [("a red bus", {}, None)]


def test_bad_members_are_one_error_sample_each(tmp_path):
    extra = {"000000009.json": b"{not json", "000000009.jpg": photo_bytes(9), "000000010.txt": b"no photo here"}
    samples, notes = _read(write_shard(tmp_path / "s.tar", 7, 2, extra=extra))
    assert notes == []
    assert [s.key for s in samples] == ["000000007", "000000008", "000000009", "000000010"]
    assert [s.error is None for s in samples] == [True, True, False, False]
    assert samples[2].error.startswith(f"{tmp_path}/s.tar/000000009.json: not valid JSON")
    assert samples[2].image == photo_bytes(9)  # the photo itself was whole
    assert "000000010: no image member" in samples[3].error


def test_a_damaged_header_is_skipped_to_the_next_member(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 4)
    data = bytearray(shard.read_bytes())
    with tarfile.open(shard) as tar:  # the second sample's image header: break its checksum
        info = tar.getmember("000000001.jpg")
    data[info.offset + 148 : info.offset + 156] = b"9999999\0"
    shard.write_bytes(bytes(data))
    samples, notes = _read(shard)
    assert notes == []
    assert [s.key for s in samples] == ["000000000", f"@{info.offset}", "000000001", "000000002", "000000003"]
    assert "a damaged tar header" in samples[1].error and samples[1].index == 1
    assert samples[2].image is None and "no image member" in samples[2].error  # its txt and json survived
    assert samples[3].error is None and samples[3].image == photo_bytes(2)


def test_a_truncated_shard_ends_at_its_last_whole_member_with_a_note(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 4)
    with tarfile.open(shard) as tar:
        third = tar.getmember("000000002.jpg")
    full = shard.read_bytes()
    for cut in (third.offset + 300, third.offset):  # in its header, before it: nothing of it was there to lose
        shard.write_bytes(full[:cut])
        samples, notes = _read(shard)
        assert [s.key for s in samples] == ["000000000", "000000001"], cut
        assert all(s.error is None for s in samples)
        assert len(notes) == 1 and "truncated" in str(notes[0]) and str(notes[0]).startswith(str(shard)), cut


def _cut_shard(path: Path, n: int, member: str, at: Callable[[tarfile.TarInfo], int]) -> tuple[Path, tarfile.TarInfo]:
    """A shard of ``n`` samples cut at ``at(member's header)`` bytes: (its path, the member's header)."""
    shard = write_shard(path, 0, n)
    with tarfile.open(shard) as tar:
        info = tar.getmember(member)
    shard.write_bytes(shard.read_bytes()[: at(info)])
    return shard, info


def test_a_photo_cut_off_by_the_shards_end_is_an_error_sample(tmp_path):
    # its bytes are partly there: a photo the shard named is lost, which the exit code and --resume must know
    shard, third = _cut_shard(tmp_path / "s.tar", 4, "000000002.jpg", lambda m: m.offset_data + 100)
    samples, notes = _read(shard)
    assert [s.key for s in samples] == ["000000000", "000000001", "000000002"] and notes == []
    assert samples[0].error is None and samples[1].error is None and samples[2].image is None
    assert samples[2].index == 2 and samples[2].name == f"{shard}/000000002.jpg"
    assert (
        samples[2].error
        == f"{shard}/000000002.jpg: cut off (100 of its {third.size:,} bytes): the shard ends there (truncated)"
    )
    # a process whose share it is not does not say it; a resumed run that holds it by name does not read it
    assert [s.key for s in iter_shard(str(shard), wanted=lambda i: i != 2, notes=None)] == ["000000000", "000000001"]
    held = iter_shard(str(shard), notes=None, chosen=lambda s: s.key != "000000002")
    assert [s.key for s in held] == ["000000000", "000000001"]


def test_a_shard_cut_inside_a_sample_keeps_its_whole_members(tmp_path):
    shard, _ = _cut_shard(tmp_path / "s.tar", 2, "000000001.txt", lambda m: m.offset + 10)
    samples, notes = _read(shard)
    assert [s.key for s in samples] == ["000000000", "000000001"]
    assert samples[1].image == photo_bytes(1) and samples[1].text is None
    assert len(notes) == 1


def test_not_a_tar_and_missing_file_are_one_error_sample(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"hello" * 300)
    samples, _ = _read(tmp_path / "x.tar")
    assert len(samples) == 1 and "not a tar shard" in samples[0].error
    assert samples[0].name == str(tmp_path / "x.tar")  # the record's "image": the shard, not "x.tar/"
    samples, _ = _read(tmp_path / "gone.tar")
    assert len(samples) == 1 and "cannot read the shard" in samples[0].error
    assert samples[0].name == str(tmp_path / "gone.tar")


def test_concatenated_tars_read_on(tmp_path):
    a, b = write_shard(tmp_path / "a.tar", 0, 2), write_shard(tmp_path / "b.tar", 2, 2)
    (tmp_path / "ab.tar").write_bytes(a.read_bytes() + b.read_bytes())
    samples, notes = _read(tmp_path / "ab.tar")
    assert [s.key for s in samples] == [f"{i:09d}" for i in range(4)] and notes == []


def test_members_in_a_folder_keep_it_in_their_key(tmp_path):
    path = tmp_path / "f.tar"
    with tarfile.open(path, "w") as tar:
        add_member(tar, "part1/000.jpg", photo_bytes(0))
        add_member(tar, "part1/000.txt", b"x")
        add_member(tar, "part2/000.jpg", photo_bytes(1))
    samples, _ = _read(path)
    assert [(s.key, s.image_member, s.text) for s in samples] == [
        ("part1/000", "part1/000.jpg", "x"),
        ("part2/000", "part2/000.jpg", None),
    ]


def test_brace_expansion():
    assert expand_braces("shards/{00000..00002}.tar") == ["shards/00000.tar", "shards/00001.tar", "shards/00002.tar"]
    assert expand_braces("{8..11}") == ["8", "9", "10", "11"]
    assert expand_braces("{a,b{1..2}}-{x,y}") == ["a-x", "a-y", "b1-x", "b1-y", "b2-x", "b2-y"]
    assert expand_braces("plain.tar") == ["plain.tar"] and expand_braces("{x}.tar") == ["{x}.tar"]
    assert expand_braces("a{}b") == ["a{}b"] and expand_braces("{3..1}") == ["3", "2", "1"]
    assert is_shard("a/B.TAR") and not is_shard("a.jpg")


def test_bytes_after_the_last_member_that_are_not_tar_are_one_error_sample(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 2)
    with tarfile.open(shard) as tar:
        last = tar.getmember("000000001.json")
    end = last.offset_data + -(-last.size // 512) * 512
    shard.write_bytes(shard.read_bytes()[:end] + b"\xff" * 3000)
    samples, notes = _read(shard)
    assert [s.key for s in samples] == ["000000000", "000000001", f"@{end}"] and notes == []
    assert "not tar members" in samples[2].error and samples[2].index == 2


def test_chosen_sees_the_names_before_the_bytes_are_read(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 4)
    asked = []

    def chosen(sample):
        asked.append((sample.index, sample.name, sample.image))
        return sample.key != "000000002"

    samples, _ = _read(shard, wanted=lambda i: i > 0, chosen=chosen)
    assert [s.key for s in samples] == ["000000001", "000000003"]
    assert asked == [(i, f"{shard}/{i:09d}.jpg", None) for i in (1, 2, 3)]


def test_optimize_skips_a_shard_photo_that_cannot_be_decoded(tmp_path, capsys):
    """Bytes that are not an image, and a JPEG cut off, under a photo's name: optimize stored them, and fit died at
    its first epoch ("a damaged chunk"). Now each is one skipped line naming it, and the others are kept."""
    from captioning.training.streaming import read_shard_captions

    cut = photo_bytes(9)[:200]
    extra = {"000000100.jpg": b"not a jpeg", "000000100.txt": b"a dog runs", "000000101.jpg": cut,
             "000000101.txt": b"a dog runs"}  # fmt: skip
    shard = write_shard(tmp_path / "s.tar", 0, 3, extra=extra)
    shards, skipped = read_shard_captions(str(shard))
    err = capsys.readouterr().err
    assert skipped == 2 and [i for i, _ in shards[0][1]] == [0, 1, 2], err
    assert "skipped: " in err and "000000100.jpg: cannot be decoded" in err
    assert "000000101.jpg: cannot be decoded" in err


def test_an_empty_tar_shard_is_said(tmp_path):
    """A valid tar with no member (its end marker alone) was passed over without a word, exit 0."""
    shard = tmp_path / "empty.tar"
    tarfile.open(shard, "w").close()
    samples, notes = _read(shard)
    assert samples == [] and [n.message for n in notes] == ["an empty tar shard: no sample in it"]
