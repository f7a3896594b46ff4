"""captioning.photos.photo_stream: every photo once across processes and loader workers, in id order, shards whole when
there are enough of them; resume's skipped and held photos."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from helpers.shards import plain_pngs, write_shard

from captioning.photos.photo_stream import PhotoStream, owner, photo_batches
from captioning.photos.preprocess import Preprocess

PRE = Preprocess(image_size=32)


@pytest.fixture
def inputs(tmp_path) -> list[str]:
    """Two shards of 5 and 3 samples, between three files: 11 photos."""
    files = plain_pngs(tmp_path)
    a, b = write_shard(tmp_path / "a.tar", 0, 5), write_shard(tmp_path / "b.tar", 5, 3)
    return [files[0], str(a), files[1], str(b), files[2]]


def _ids(stream: PhotoStream, workers: int = 0) -> list[tuple[int, int]]:
    return [it["id"] for batch in photo_batches(stream, workers) for it in batch]


ALL = [(0, 0), *[(1, m) for m in range(5)], (2, 0), *[(3, m) for m in range(3)], (4, 0)]


def test_one_process_reads_everything_in_input_order(inputs):
    items = [it for batch in photo_batches(PhotoStream(inputs, PRE, 4), 0) for it in batch]
    assert [it["id"] for it in items] == ALL
    assert items[1]["name"] == f"{inputs[1]}/000000000.jpg" and items[1]["key"] == "000000000"
    assert items[1]["reference"] == "a photo number 0" and items[1]["tensor"].shape == (3, 32, 32)
    assert "key" not in items[0] and items[0]["name"] == inputs[0]


@pytest.mark.parametrize("world", [2, 3])
def test_processes_share_every_photo_exactly_once(inputs, world):
    shares = [_ids(PhotoStream(inputs, PRE, 2, rank=r, world=world)) for r in range(world)]
    assert sorted(i for share in shares for i in share) == ALL
    assert all(share == sorted(share) for share in shares)  # each share in id order: its part merges by id
    rank_of = owner(inputs, world)
    if world == 2:  # 2 shards, 2 processes: each shard whole on one process
        assert {rank_of((1, m)) for m in range(5)} == {0} and {rank_of((3, m)) for m in range(3)} == {1}
    else:  # fewer shards than processes: their samples are dealt out
        assert len({rank_of((1, m)) for m in range(5)}) == 3


def test_loader_workers_hand_batches_over_in_order(inputs):
    assert _ids(PhotoStream(inputs, PRE, 2), workers=2) == ALL
    assert _ids(PhotoStream(inputs, PRE, 3, rank=1, world=2), workers=2) == _ids(
        PhotoStream(inputs, PRE, 3, rank=1, world=2)
    )


def test_skipped_photos_are_not_read_and_held_ones_pass_unread(inputs):
    skipped = {(1, 1), (0, 0)}
    held = {f"{inputs[1]}/000000003.jpg", inputs[2]}
    stream = PhotoStream(inputs, PRE, 4, skip=lambda i, n: i in skipped, held=lambda i, n: n in held)
    items = [it for batch in photo_batches(stream, 2) for it in batch]
    assert [it["id"] for it in items] == [i for i in ALL if i not in skipped]
    unread = [it for it in items if it.get("held")]
    assert [(it["id"], it["name"]) for it in unread] == [((1, 3), f"{inputs[1]}/000000003.jpg"), ((2, 0), inputs[2])]
    assert all("tensor" not in it for it in unread)


def test_a_damaged_member_is_one_error_item_on_one_process(tmp_path):
    shard = write_shard(tmp_path / "s.tar", 0, 3, extra={"000000003.jpg": b"not a jpeg at all"})
    shares = [[it for b in photo_batches(PhotoStream([str(shard)], PRE, 2, rank=r, world=2), 0) for it in b]
              for r in range(2)]  # fmt: skip
    errors = [it for share in shares for it in share if it["error"]]
    assert len(errors) == 1 and errors[0]["id"] == (0, 3)
    assert errors[0]["error"].startswith(f"{shard}/000000003.jpg: ") and errors[0]["key"] == "000000003"


def test_a_truncated_shard_is_said_once(tmp_path, capfd):
    shard = write_shard(tmp_path / "s.tar", 0, 4)
    with tarfile.open(shard) as tar:
        cut = tar.getmember("000000003.jpg").offset_data + 10
    Path(shard).write_bytes(Path(shard).read_bytes()[:cut])
    assert _ids(PhotoStream([str(shard)], PRE, 1), workers=2) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    err = capfd.readouterr().err  # the photo cut off is an error item (said where the items are said), not a note
    assert "read up to its last whole member" not in err
    full = write_shard(tmp_path / "t.tar", 0, 4)
    with tarfile.open(full) as tar:  # cut inside the last photo's .txt: the photo is kept, the shard noted
        cut = tar.getmember("000000003.txt").offset_data + 1
    Path(full).write_bytes(Path(full).read_bytes()[:cut])
    assert _ids(PhotoStream([str(full)], PRE, 1), workers=2) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert capfd.readouterr().err.count("): read up to its last whole member") == 1
