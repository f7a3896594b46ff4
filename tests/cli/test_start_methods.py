"""Worker processes under every start method. "spawn" (macOS's default) and "forkserver" (Linux's from Python 3.14)
pickle what is sent to a worker process, where "fork" copies the process: a local function or a lambda there failed
("Can't pickle local object"), a bound method took its object along (a data module, with its trainer), and a global
set before the fork was not there. What each loader and optimize send their workers pickles and works unpickled (in
this process: no interpreter to start); the slow tests run caption and caption-train fit with workers under spawn."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch
import yaml
from helpers.scene_corpus import write_folder
from helpers.shards import plain_pngs, write_shard

from captioning.photos.collection import image_key
from captioning.photos.photo_stream import IdIn, NameIn, PhotoStream, photo_batches
from captioning.photos.preprocess import Preprocess
from captioning.training.data import CaptionDataModule
from text_attn.translation.data import TranslationDataModule

ROOT = Path(__file__).resolve().parents[2]
PRE = Preprocess(image_size=32)


def _round_trip(obj):
    return pickle.loads(pickle.dumps(obj))


def _same_batches(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, b[key]), key
        else:
            assert value == b[key], key


def _trainer_attached(dm) -> None:
    """What Lightning attaches to a data module: a trainer, holding local classes and lambdas (not picklable)."""
    dm.trainer = types.SimpleNamespace(checkpoint_io=lambda: None)


# --- caption: the photo stream ---------------------------------------------------------------------------------------
@pytest.fixture
def photos(tmp_path) -> list[str]:
    files = plain_pngs(tmp_path)
    return [files[0], str(write_shard(tmp_path / "a.tar", 0, 3)), *files[1:]]


def _ids(stream: PhotoStream) -> list[tuple[tuple[int, int], bool]]:
    return [(it["id"], bool(it.get("held"))) for batch in photo_batches(stream, 0) for it in batch]


def test_what_captions_loader_sends_its_workers_pickles_with_and_without_resume(photos):
    plain = PhotoStream(photos, PRE, 2)  # its default skip and held tests were lambdas
    resumed = PhotoStream(photos, PRE, 2, skip=NameIn({image_key(photos[0])}))  # caption --jsonl --resume
    parts = PhotoStream(photos, PRE, 2, skip=IdIn({(1, 1)}), held=NameIn({image_key(photos[2])}))  # --devices
    for stream in (plain, resumed, parts):
        loader = photo_batches(stream, 2)
        for sent in (loader.dataset, loader.collate_fn, loader.worker_init_fn):
            pickle.dumps(sent)
        assert _ids(_round_trip(stream)) == _ids(stream)
    assert [i for i, _ in _ids(plain)] == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (3, 0)]
    assert (0, 0) not in dict(_ids(resumed)) and (1, 1) not in dict(_ids(parts))
    assert dict(_ids(parts))[(2, 0)] is True  # held: passed on unread


# --- caption-train and text-train: the data modules' loaders ---------------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"photo_batches": True}, {"attention_targets": True}])
def test_caption_train_loaders_send_their_workers_the_batch_state_not_the_module(options):
    dm = CaptionDataModule(source="shapes", train_size=8, val_size=4, test_size=4, scene_size=64, max_objects=2,
                           batch_size=4, num_workers=2, **options)  # fmt: skip
    dm.setup("fit")
    dm.set_preprocess(PRE)
    dm.set_grid(4)
    _trainer_attached(dm)
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        pickle.dumps(loader.dataset)
        sent = _round_trip(loader.collate_fn)
        assert not isinstance(getattr(sent, "maker", None), CaptionDataModule)  # no module, no trainer
        index = [0, 1] if options.get("photo_batches") and loader.batch_size is None else [0, 1, 2]
        _same_batches(sent(index), loader.collate_fn(index))
    # the module's state as it is when the workers start (pickled then), not when the loader was made
    loader = dm.val_dataloader()
    dm.features["val"] = torch.ones(4, 16, 3, dtype=torch.float16)
    assert _round_trip(loader.collate_fn)([0, 1])["features"].shape == (2, 16, 3)


def test_text_train_loaders_pickle():
    dm = TranslationDataModule(task="reorder", train_size=40, val_size=8, test_size=8, batch_size=8, max_len=10)
    dm.setup("fit")
    _trainer_attached(dm)
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        pickle.dumps(loader.dataset)
        index = [0, 1, 2]
        _same_batches(_round_trip(loader.collate_fn)(index), loader.collate_fn(index))


# --- optimize: what LitData's workers are given ----------------------------------------------------------------------
class _QuadrantMeans(torch.nn.Module):
    """A frozen "encoder": (B, 3, H, W) -> (B, 4, 3) per-quadrant channel means (module level: picklable)."""

    preprocess = PRE

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, c, h, w = images.shape
        return images.reshape(b, c, 2, h // 2, 2, w // 2).mean(dim=(3, 5)).flatten(2).transpose(1, 2)


@pytest.fixture
def sent_to_optimize(monkeypatch) -> dict:
    """optimize_splits replaced: what it was given (item_fn, inputs), nothing written."""
    from captioning.training import streaming

    given: dict = {}
    monkeypatch.setattr(streaming, "frozen_encoder", lambda cfg, *start: (_QuadrantMeans().eval(), "fingerprint"))
    monkeypatch.setattr(streaming, "optimize_splits", lambda *a, **k: given.update(inputs=a[4], item_fn=a[5]) or {})
    return given


def test_caption_optimize_gives_its_workers_the_features_not_a_global(tmp_path, sent_to_optimize):
    from captioning.training.streaming import optimize_captions

    images, tsv = write_folder(tmp_path / "photos", 8)
    dm = CaptionDataModule(source="folder", image_dir=str(images), captions_tsv=str(tsv), val_size=2, test_size=2)
    optimize_captions(dm, tmp_path / "chunks", {}, features=True)
    for split in ("train", "val", "test"):  # unpickled after optimize returned, as a spawned worker has it
        item = _round_trip(sent_to_optimize["item_fn"](split))(sent_to_optimize["inputs"][split][0])
        assert "jpeg" not in item and item["features"].shape == (4, 3)


def test_shard_optimize_gives_its_workers_the_encoder_not_a_global(tmp_path, sent_to_optimize):
    from captioning.training.streaming import optimize_shards

    for split, first in (("train", 0), ("val", 10), ("test", 20)):
        write_shard(tmp_path / f"{split}.tar", first, 3)
    dm = CaptionDataModule(batch_size=4)
    patterns = {split: str(tmp_path / f"{split}.tar") for split in ("train", "val", "test")}
    optimize_shards(dm, tmp_path / "chunks", patterns, features=True)
    fn = _round_trip(sent_to_optimize["item_fn"]("train"))
    items = list(fn(sent_to_optimize["inputs"]["train"][0]))
    assert len(items) == 3 and all("jpeg" not in it and it["features"].shape == (4, 3) for it in items)


def test_the_optimize_start_method_is_one_the_platform_has(monkeypatch):
    import multiprocessing

    from text_attn.core import streaming

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["fork", "spawn", "forkserver"])
    assert streaming._optimize_start_method() == "fork"  # Linux, macOS: no fresh interpreter per worker
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])  # Windows
    assert streaming._optimize_start_method() == "spawn"


# --- attention-serve: LitServe's manager -----------------------------------------------------------------------------
MANAGER = """
import multiprocessing as mp, os, signal, sys, time
from attention_serve.worker_start import StartingFrom
if __name__ == "__main__":
    mp.set_start_method(sys.argv[1], force=True)
    manager = StartingFrom(mp.get_context("spawn")).Manager()  # as LitServe asks for it (litserve.server.mp)
    holder = os.fork()  # as LitServe forks its HTTP process after: it holds the manager's pipe from this one open
    if holder == 0:
        time.sleep(60)
        os._exit(0)
    shared = manager.dict()
    os.kill(manager._process.pid, signal.SIGTERM)  # as a SIGTERM sent to the whole process group reaches it
    time.sleep(0.5)
    shared["answers"] = True
    print("alive", shared["answers"], manager._process.is_alive(), manager._process.pid, holder, flush=True)
    os._exit(0)  # gone without shutting it down (as if killed): the manager's next SIGTERM ends it
"""


def _this_checkout() -> dict[str, str]:
    """The environment for a child interpreter that imports this checkout's code (a test's folder is elsewhere)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_litserves_manager_outlives_a_groups_sigterm_whatever_the_start_method(method, tmp_path):
    import shutil
    import tempfile

    err = tmp_path / "stderr"
    # the killed manager's socket folder: a short one of this test's, not in /tmp itself, nor under tmp_path, whose
    # length (the CI user's name, TMPDIR, the worker's number) made the socket's path too long for AF_UNIX (107 bytes)
    sockets = tempfile.mkdtemp(prefix="m", dir="/tmp" if os.path.isdir("/tmp") else None)
    try:
        with err.open("w") as stderr:  # stdout read up to its line: the manager left behind holds the pipe open
            env = {**_this_checkout(), "TMPDIR": sockets}
            child = subprocess.Popen([sys.executable, "-c", MANAGER, method], stdout=subprocess.PIPE, stderr=stderr,
                                     text=True, env=env)  # fmt: skip
            said = child.stdout.readline().split()
            child.stdout.close()
            assert child.wait(timeout=60) == 0, err.read_text()
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    assert said[:3] == ["alive", "True", "True"]  # it answered after a SIGTERM, while that process lived
    pid, holder = int(said[3]), int(said[4])  # the manager, left behind by the process that started it
    try:
        os.kill(pid, signal.SIGTERM)  # the forked process still lives: the pipe's other end is open
        deadline = time.monotonic() + 10
        while not _ended(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _ended(pid), "the manager outlived the process that started it"
    finally:
        for left in (pid, holder):
            if not _ended(left):
                os.kill(left, signal.SIGKILL)


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"  # a zombie not reaped yet
    except FileNotFoundError:
        return True


# --- whole runs under spawn ------------------------------------------------------------------------------------------
DRIVER = """
import importlib, multiprocessing, sys
if __name__ == "__main__":
    multiprocessing.set_start_method(sys.argv[1], force=True)
    module, name = sys.argv[2].split(":")
    sys.exit(getattr(importlib.import_module(module), name)(sys.argv[3:]))
"""


def _run_under(method: str, target: str, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", DRIVER, method, target, *args], capture_output=True, text=True,
                          timeout=600, env=_this_checkout())  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_caption_with_workers_and_resume_under_spawn(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = ("astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg")
    photos = [str(ROOT / "captioning/assets/photos" / n) for n in names]
    main, options = "captioning.commands.caption:caption_main", ("--workers", "2", "--batch-size", "1")
    _run_under("spawn", main, *photos[:3], *options, "--jsonl", "r.jsonl")  # 3 batches: the workers read them
    done = _run_under("spawn", main, *photos, *options, "--jsonl", "r.jsonl", "--resume")  # 2 left: workers again
    assert "3 image(s) already in r.jsonl: skipped" in done.stderr
    assert len(Path("r.jsonl").read_text().splitlines()) == 5


@pytest.mark.slow
def test_a_caption_train_fit_with_loader_workers_under_spawn(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = yaml.safe_load((ROOT / "tests/fixtures/captions/tiny_shapes.yaml").read_text())
    # one step, then validation: the train loader's workers, then the val loader's
    cfg["trainer"].update(max_steps=1, val_check_interval=1, default_root_dir=str(tmp_path / "run"))
    cfg["data"].update(cache_features=False, num_workers=2)
    cfg["model"]["export_path"] = str(tmp_path / "model.pt")
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    _run_under("spawn", "captioning.commands.train:train_main", "fit", "--config", str(tmp_path / "cfg.yaml"))
    assert (tmp_path / "model.pt").is_file()
