"""The LitData glue (text_attn.core.streaming): a loader resumed at (epoch, batches trained) yields exactly the
samples an uninterrupted run had left, in the same order, in that epoch and the next; a damaged chunk is one line
naming its file. Fast: one small chunk folder written by LitData in this process."""

from __future__ import annotations

import shutil
from itertools import islice
from pathlib import Path

import pytest

from text_attn.core.streaming import ChunkError, private_litdata_cache, read_all, streaming_loader

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
    with private_litdata_cache(root):  # not $TMPDIR/chunks and $TMPDIR/data, which LitData empties
        litdata.optimize(sample, list(range(N)), str(root / "train"), chunk_bytes="120B", num_workers=1,
                         start_method="fork", verbose=False)  # fmt: skip
    return root


def _one_sample(i: int) -> dict:
    return {"index": i}


def test_optimize_leaves_the_temporary_folders_chunks_and_data_of_others_alone(tmp_path, monkeypatch):
    """LitData empties its scratch folders as it starts, by default $TMPDIR/chunks and $TMPDIR/data: `optimize`
    deleted a user's own /tmp/data, and two runs at once emptied each other's. Its scratch is now a folder of the
    output's, removed afterwards (and emptied first: one a stopped run left)."""
    import os
    import tempfile

    from text_attn.core.streaming import LITDATA_SCRATCH, optimize_splits

    tmp = tmp_path / "tmp"
    for name in ("chunks", "data"):
        (tmp / name).mkdir(parents=True)
        (tmp / name / "mine.txt").write_text("a user's own file")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    for name in LITDATA_SCRATCH:
        monkeypatch.delenv(name, raising=False)
    inputs = {"train": list(range(6)), "val": [0, 1], "test": [0]}
    (tmp_path / "out" / ".litdata-scratch" / "data").mkdir(parents=True)  # what a run stopped by Ctrl-C leaves
    optimize_splits(tmp_path / "out", "text", {}, {}, inputs, lambda split: _one_sample, log=lambda line: None)
    assert not (tmp_path / "out" / ".litdata-scratch").exists()
    assert sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*")) == [
        "chunks", "chunks/mine.txt", "data", "data/mine.txt"]  # fmt: skip
    assert not any(name in os.environ for name in LITDATA_SCRATCH)
    assert indices(read_all(tmp_path / "out", "train")) == list(range(6))


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


def test_a_missing_or_cut_chunk_is_refused_as_the_split_opens(chunks, tmp_path):
    """A chunk file lost in a copy was found when training reached its first sample, after LitData's wait, as "a
    damaged chunk (ChunkWaitTimeoutError)"; one cut short, likewise. Both are now named as the split opens."""
    from text_attn.core.streaming import split_dataset

    for case in ("missing", "cut"):
        bad = tmp_path / case
        shutil.copytree(chunks, bad)
        last = sorted((bad / "train").glob("chunk-*.bin"))[-1]
        if case == "missing":
            last.unlink()
        else:
            last.write_bytes(last.read_bytes()[:-3])
        with pytest.raises(ChunkError) as err:
            split_dataset(bad, "train")
        message = str(err.value)
        assert message.startswith(str(last)) and "\n" not in message
        assert ("missing (a chunk its index lists)" if case == "missing" else "its index says") in message
        with pytest.raises(ChunkError):  # the loader fit makes, before any batch
            streaming_loader(bad, BATCH, indices, seed=7)


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
    with private_litdata_cache(tmp_path / "c"):
        litdata.optimize(_evil, [str(flag)] * 3, str(tmp_path / "c" / "val"), chunk_bytes="1MB", num_workers=1,
                         start_method="fork", verbose=False)  # fmt: skip
    assert not flag.exists()  # writing the folder ran nothing
    with pytest.raises(ChunkError, match=r"index.json: declares sample formats pickle, which optimize never writes"):
        read_all(tmp_path / "c", "val")
    assert not flag.exists()


def _evil(flag: str) -> dict:
    return {"index": 0, "payload": _Runs(Path(flag))}


def test_the_inputs_given_to_litdata_survive_its_checkpoints_json():
    """LitData keeps a stopped optimize's inputs in JSON and continues only where they equal the new run's: tuples
    (every caption and pair entry) came back as lists, never equal, and running the command again to continue was
    refused ("Existing checkpoints are not compatible with the current configuration")."""
    import json

    from text_attn.core.streaming import _as_json

    items = [(0, "ein Hund\ta dog"), (1, 3, "p.jpg", '{"refs": []}'), "a name"]
    assert json.loads(json.dumps(items)) != items  # what went wrong
    assert (
        json.loads(json.dumps(_as_json(items)))
        == _as_json(items)
        == [[0, "ein Hund\ta dog"], [1, 3, "p.jpg", '{"refs": []}'], "a name"]
    )
