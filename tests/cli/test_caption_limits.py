"""``caption`` when the machine runs short: a full /dev/shm, a loader worker's batch that cannot be handed over, no
file descriptor left, out of (GPU) memory; and photo names too long for an overlay's name. Each either goes on, losing
nothing, or is one line naming what ran out with exit code 2, the records written kept for --resume; never a
traceback, a silent exit 0 with photos missing, or a hang (the runs with loader workers are subprocesses, timed)."""

from __future__ import annotations

import errno
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands.caption import caption_main

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--max-len", "4"]
ALLOC = ("[enforce fail at alloc_cpu.cpp:127] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate "
         "34611200 bytes. Error code 12 (Cannot allocate memory)")  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")


@pytest.fixture
def photos(tmp_path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(5):
        Image.new("RGB", (30 + 3 * i, 24), (i * 40, 90, 160)).save(folder / f"{i}.png")
    return folder


MAIN = "import sys\nfrom captioning.commands.caption import caption_main\nsys.exit(caption_main(sys.argv[1:]))"


def _child(patch: str, args: list, timeout: int = 240) -> subprocess.CompletedProcess:
    """The command in a subprocess (its loader workers forked from it carry ``patch``), given ``timeout`` seconds: a
    hang fails the test instead of stalling it."""
    code = f"{patch}\n{MAIN}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)  # fmt: skip


# torch's own failure where /dev/shm is full, raised wherever a tensor's memory is to be shared
SHM_FULL = """
import torch
def full(self, *args, **kwargs):
    raise RuntimeError("unable to allocate shared memory(shm) for file </torch_1_2_0>: No space left on device (28)")
torch.UntypedStorage._share_fd_cpu_ = full
"""


@pytest.mark.long
def test_a_full_dev_shm_loses_no_photo_and_says_so_once(model, photos):
    """The workers' batches came through the queue thread's shared memory: all lost, exit 0 (or a hang)."""
    done = _child(SHM_FULL, [photos, "--model", model, *FAST, "--batch-size", "2", "--workers", "2"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert sorted(line.split("\t")[0] for line in done.stdout.splitlines()) == sorted(map(str, photos.glob("*.png")))
    notes = [line for line in done.stderr.splitlines() if "shared memory" in line]
    assert notes == ["caption: note: shared memory (/dev/shm) is full: photos come from the --workers processes "
                     "through a pipe instead (slower); a larger /dev/shm (docker run --shm-size 1g) or --workers 0 "
                     "avoids it"]  # fmt: skip


# the second worker's queue thread cannot pass a batch's shared memory on: no file descriptor left there
NO_FD_IN_WORKER_1 = """
import errno, os, multiprocessing.reduction as reduction
from torch.utils.data import get_worker_info
real = reduction.DupFd
def dup(fd):
    info = get_worker_info()
    if info is not None and info.id == 1:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
    return real(fd)
reduction.DupFd = dup
"""


@pytest.mark.long
@pytest.mark.parametrize("devices", [[], pytest.param(["--devices", "1"], marks=pytest.mark.slow)])  # Lightning: 20 s
def test_a_batch_a_worker_cannot_hand_over_is_one_line_and_resume_finishes(model, photos, tmp_path, devices):
    """Batch 2 of 3 (worker 1's) was dropped by the queue thread: the run wrote the other two and exited 0."""
    jsonl = tmp_path / "out.jsonl"
    args = [photos, "--model", model, *FAST, "--batch-size", "2", "--workers", "2", "--jsonl", jsonl, *devices]
    done = _child(NO_FD_IN_WORKER_1, args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert len(errors) == 1 and errors[0].startswith(
        f"caption: error: too many open files (ulimit -n {limit}): raise the limit (ulimit -n 4096) or use --workers 0;"
    ), errors
    if not devices:  # the first batch's records are kept (--devices: in its part)
        assert errors[0].endswith(f"stopped after 2 image(s) in {jsonl}: --resume continues after them")
        assert len(jsonl.read_text().splitlines()) == 2
    resumed = _child("", [*args, "--resume"])
    assert resumed.returncode == 0, resumed.stderr
    images = sorted(json.loads(line)["image"] for line in jsonl.read_text().splitlines())
    assert images == sorted(map(str, photos.glob("*.png")))


def test_no_file_descriptor_to_start_the_workers_is_one_line(model, photos, monkeypatch, capfd):
    import multiprocessing.queues

    real, made = multiprocessing.queues.Queue.__init__, []

    def queue(self, *args, **kwargs):  # the loader's result queue, then none: its workers' queues fail
        made.append(1)
        if len(made) > 1:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        real(self, *args, **kwargs)

    monkeypatch.setattr(multiprocessing.queues.Queue, "__init__", queue)
    with pytest.raises(SystemExit) as exc:
        caption_main([str(photos), "--model", str(model), *FAST, "--batch-size", "2", "--workers", "2"])
    assert exc.value.code == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("caption: error: too many open files (ulimit -n")


@pytest.mark.parametrize(
    "error, line",
    [
        (RuntimeError(ALLOC), "out of memory captioning a batch of 2 photos: try a smaller --batch-size"),
        (torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
         "out of GPU memory captioning a batch of 2 photos: try a smaller --batch-size"),
    ],
)  # fmt: skip
def test_out_of_memory_is_one_line_and_resume_finishes(model, photos, tmp_path, monkeypatch, capsys, error, line):
    from captioning.model.captioner import Captioner

    real, calls = Captioner.encode, []

    def encode(self, images):  # the second batch runs out
        calls.append(1)
        if len(calls) == 2:
            raise error
        return real(self, images)

    monkeypatch.setattr(Captioner, "encode", encode)
    jsonl = tmp_path / "out.jsonl"
    args = [str(photos), "--model", str(model), *FAST, "--batch-size", "2", "--workers", "0", "--jsonl", str(jsonl)]
    with pytest.raises(SystemExit) as exc:
        caption_main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert [x for x in err.splitlines() if "error" in x] == [
        f"caption: error: {line}; stopped after 2 image(s) in {jsonl}: --resume continues after them"
    ]
    assert len(jsonl.read_text().splitlines()) == 2
    calls[:] = [1]  # its first batch to caption runs out
    with pytest.raises(SystemExit) as exc:  # --devices: the same line, its parts kept
        caption_main([*args, "--devices", "1", "--resume"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"caption: error: {line}; --resume continues after the photos {jsonl}.parts holds"
    )
    monkeypatch.setattr(Captioner, "encode", real)
    assert caption_main([*args, "--devices", "1", "--resume"]) == 0, capsys.readouterr().err
    images = sorted(json.loads(x)["image"] for x in jsonl.read_text().splitlines())
    assert images == sorted(map(str, photos.glob("*.png")))


@pytest.mark.long
def test_a_photo_name_too_long_for_its_overlays_name_gets_a_cut_one(model, tmp_path, capsys):
    """A 254-byte photo name (and 125 two-byte characters: a cut by characters would not fit) has no room for
    ``-attention.png``: each overlay is named by the start of its name and a hash, apart from one another, and the
    records name the files written."""
    folder = tmp_path / "long"
    folder.mkdir()
    names = ["b" * 250, "b" * 249 + "c", "é" * 125, "short"]
    for i, stem in enumerate(names):
        Image.new("RGB", (32, 24), (i * 50, 90, 160)).save(folder / f"{stem}.png")
    jsonl, overlays = tmp_path / "out.jsonl", tmp_path / "ov"
    code = caption_main([str(folder), "--model", str(model), *FAST, "--workers", "0", "--jsonl", str(jsonl),
                         "--overlay", str(overlays), "--per-word"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    written = [Path(r["overlay"]).name for r in records]
    assert all(r["error"] is None and Path(r["overlay"]).is_file() for r in records)
    assert len(set(written)) == 4 and "short-attention.png" in written
    for name in written:
        assert len(name.encode()) <= 255 and name.endswith("-attention.png")
    cut = [n for n in written if n != "short-attention.png"]
    assert all(n.startswith(("bbbbbbbbbb", "éééééééééé")) and "~" in n for n in cut)
    panels = [p.name for p in overlays.iterdir() if not p.name.endswith("-attention.png")]
    assert len(panels) == 4 * 4 and all(len(p.encode()) <= 255 for p in panels)  # --per-word: 4 words each


@pytest.mark.slow  # Lightning's --devices run in-process: ~12 s
def test_an_interrupted_devices_run_ends_its_progress_thread(model, photos, tmp_path, monkeypatch, capsys):
    """Ctrl-C in a --devices run: exit 130 and the parts kept, and the thread that counts every process's rows ends
    with the run (left polling, an in-process caller's stderr got a line a minute from it for ever)."""
    import threading

    from captioning import Captioner
    from captioning.commands.caption_scale import PROGRESS_THREAD

    def interrupted(self, images):
        raise KeyboardInterrupt

    monkeypatch.setattr(Captioner, "encode", interrupted)
    jsonl = tmp_path / "out.jsonl"
    args = [str(photos), "--model", str(model), *FAST, "--workers", "0", "--jsonl", str(jsonl), "--devices", "1"]
    with pytest.raises(SystemExit) as exc:
        caption_main(args)
    assert exc.value.code == 130, capsys.readouterr().err
    assert not [t for t in threading.enumerate() if t.name == PROGRESS_THREAD and t.is_alive()]
