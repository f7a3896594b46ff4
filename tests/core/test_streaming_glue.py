"""The LitData glue (text_attn.core.streaming): a loader resumed at (epoch, batches trained) yields exactly the
samples an uninterrupted run had left, in the same order, in that epoch and the next; a damaged chunk is one line
naming its file. Fast: one small chunk folder written by LitData in this process."""

from __future__ import annotations

import shutil
from itertools import islice
from pathlib import Path

import pytest

from text_attn.core.streaming import ChunkError, read_all, streaming_loader

N, BATCH = 50, 4  # 13 batches an epoch, the last one short


def sample(i: int) -> dict:
    return {"index": i, "payload": b"x" * (i % 7 + 1)}


def indices(items: list[dict]) -> list[int]:
    return [int(it["index"]) for it in items]


@pytest.fixture(scope="module")
def chunks(tmp_path_factory) -> Path:
    import litdata

    root = tmp_path_factory.mktemp("chunks")
    # several small chunks, so LitData's shuffle moves chunks as well as samples
    litdata.optimize(sample, list(range(N)), str(root / "train"), chunk_bytes="120B", num_workers=1,
                     start_method="fork", verbose=False)  # fmt: skip
    return root


def test_a_resumed_loader_continues_with_the_samples_an_uninterrupted_run_had_left(chunks):
    loader = streaming_loader(chunks, BATCH, indices, seed=7)
    epochs = [list(loader) for _ in range(4)]
    assert len(loader) == 13 and [len(e) for e in epochs] == [13] * 4
    assert sorted(i for b in epochs[0] for i in b) == list(range(N))  # every sample once an epoch
    assert epochs[0] != epochs[1]  # reshuffled every epoch
    for epoch, done in [(0, 1), (0, 6), (1, 12), (1, 13), (0, 0)]:
        resumed = streaming_loader(chunks, BATCH, indices, seed=7, resume=(epoch, done))
        if done >= 13:  # the checkpoint closed its epoch: the next one starts
            epoch, done = epoch + 1, 0
        # as Lightning takes them: as many batches as the length says, never the StopIteration after them
        assert list(islice(resumed, len(resumed) - done)) == epochs[epoch][done:], (epoch, done)
        assert list(islice(resumed, len(resumed))) == epochs[epoch + 1]  # and the next epoch is the uninterrupted one


def test_a_damaged_chunk_is_one_line_naming_its_file(chunks, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(chunks, bad)
    first = sorted((bad / "train").glob("chunk-*.bin"))[0]
    data = bytearray(first.read_bytes())
    data[:16] = b"\xff" * 16  # its table of sample offsets
    first.write_bytes(bytes(data))
    with pytest.raises(ValueError) as err:
        read_all(bad, "train")
    message = str(err.value)
    assert str(first) in message and "damaged chunk" in message and "\n" not in message
    with pytest.raises(ValueError) as err:
        list(streaming_loader(bad, BATCH, indices, seed=7))
    assert "damaged chunk" in str(err.value) and str(bad / "train") in str(err.value)
    (bad / "train" / "index.json").unlink()
    with pytest.raises(ChunkError, match="index.json: missing"):
        read_all(bad, "train")


class _Runs:
    """A sample that runs code when unpickled (it would touch ``flag``): what a crafted chunk folder can hold."""

    def __init__(self, flag: Path):
        self.flag = flag

    def __reduce__(self):
        return (Path.touch, (self.flag,))


def test_a_chunk_folder_of_pickled_samples_is_refused_before_any_is_read(tmp_path):
    """LitData reads a "pickle" sample format with pickle.loads: a chunk folder from a shared disk ran code on fit."""
    import litdata

    flag = tmp_path / "ran"
    litdata.optimize(_evil, [str(flag)] * 3, str(tmp_path / "c" / "val"), chunk_bytes="1MB", num_workers=1,
                     start_method="fork", verbose=False)  # fmt: skip
    assert not flag.exists()  # writing the folder ran nothing
    with pytest.raises(ChunkError, match=r"index.json: declares sample formats pickle, which optimize never writes"):
        read_all(tmp_path / "c", "val")
    assert not flag.exists()


def _evil(flag: str) -> dict:
    return {"index": 0, "payload": _Runs(Path(flag))}
