"""Training loaders and a small /dev/shm (issue: caption-train fit with --data.num_workers hung for ever in Docker's
64 MB /dev/shm): where it cannot hold the batches the workers keep ready, they load in the main process, said once."""

from __future__ import annotations

import torch

from captioning.photos.preprocess import Preprocess
from captioning.training import feature_cache
from captioning.training.data import CaptionDataModule
from text_attn.core import shm_workers

PRE = Preprocess(image_size=32)


def _free(monkeypatch, free: int | None) -> None:
    monkeypatch.setattr(shm_workers, "shm_free", lambda path=shm_workers.SHM: free)
    monkeypatch.setattr(shm_workers, "_said", set())


def _module() -> CaptionDataModule:
    dm = CaptionDataModule(source="shapes", train_size=8, val_size=4, test_size=4, scene_size=64, max_objects=2,
                           batch_size=4, num_workers=2)  # fmt: skip
    dm.setup("fit")
    dm.set_preprocess(PRE)
    return dm


def test_a_small_shm_loads_in_the_main_process_with_one_note(monkeypatch, capsys):
    _free(monkeypatch, 1 << 20)  # 1 MB: 2 workers x 3 batches x 4 x (3, 32, 32) float32 = 288 KB would fit...
    dm = _module()
    assert dm.train_dataloader().num_workers == 2
    _free(monkeypatch, 100_000)  # ...100 kB does not
    loaders = [dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()]
    assert [loader.num_workers for loader in loaders] == [0, 0, 0]
    assert next(iter(loaders[0]))["images"].shape == (4, 3, 32, 32)  # the batches come, from this process
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and "/dev/shm" in err and "--data.num_workers 0" in err and "--shm-size" in err


def test_no_shm_folder_keeps_the_workers(monkeypatch):
    _free(monkeypatch, None)  # macOS, Windows: torch shares memory another way
    assert _module().val_dataloader().num_workers == 2


def test_encoding_the_feature_cache_with_a_small_shm_uses_no_workers(monkeypatch, capsys):
    _free(monkeypatch, 1000)
    made = []
    real = feature_cache.DataLoader

    def loader(*args, **kw):
        made.append(kw["num_workers"])
        return real(*args, **kw)

    monkeypatch.setattr(feature_cache, "DataLoader", loader)
    features: dict[str, torch.Tensor] = {}
    images = {"val": _module().splits["val"].images}
    feature_cache.fill_features(features, images, lambda x: x.mean(dim=(2, 3))[:, None], PRE, 4, 2, progress=False)
    assert made == [0] and features["val"].shape == (4, 1, 3)
    assert "shared memory (/dev/shm)" in capsys.readouterr().err


def test_the_processes_of_a_ddp_run_share_the_machines_shm(monkeypatch, capsys):
    """Each of a DDP run's processes on a machine finds room for its own workers' batches: 8 together filled it."""
    from types import SimpleNamespace

    _free(monkeypatch, 1 << 20)  # 1 MB: one process's 2 workers keep 288 KB ready; four processes' 1.15 MB do not fit
    dm = _module()
    dm.trainer = SimpleNamespace(num_devices=3)  # 864 KB: room
    assert dm.train_dataloader().num_workers == 2
    dm.trainer = SimpleNamespace(num_devices=4)
    assert dm.train_dataloader().num_workers == 0
    assert "2 loader workers of each of 4 processes" in capsys.readouterr().err
    _free(monkeypatch, 1 << 20)
    monkeypatch.setenv("LOCAL_RANK", "1")  # the machine's second process: no workers either, and the first says why
    assert dm.train_dataloader().num_workers == 0 and capsys.readouterr().err == ""
