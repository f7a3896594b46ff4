"""A run folder a refused run made: removed only where it holds nothing of the run (text_attn.core.unused_runs)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from text_attn.core.unused_runs import made_by_run, remove_unused


def _trainer(*log_dirs: Path) -> SimpleNamespace:
    return SimpleNamespace(loggers=[SimpleNamespace(log_dir=str(d)) for d in log_dirs])


@pytest.mark.parametrize(
    ("files", "removed"),
    [
        ({"events.out.tfevents.1.host.7.0": 88, "hparams.yaml": 3, "config.yaml": 900}, True),
        ({"metrics.csv": b"epoch,step,train_loss\n"}, True),
        ({}, True),
        ({"events.out.tfevents.1.host.7.0": 139}, False),  # one scalar logged
        ({"metrics.csv": b"epoch,step,train_loss\n0,1,2.5\n"}, False),
        ({"notes.txt": 1}, False),  # not a logger's file
        ({"checkpoints/last.ckpt": 10}, False),
    ],
)
def test_a_folder_is_removed_only_when_it_holds_nothing_of_the_run(tmp_path, files, removed):
    folder = tmp_path / "root/lightning_logs/version_0"
    made = made_by_run(_trainer(folder))
    assert made == {folder: [folder.parent, folder.parent.parent]}
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(content if isinstance(content, bytes) else b"x" * content)
    assert remove_unused(made) == ([folder] if removed else [])
    assert (tmp_path / "root").exists() != removed  # the folders above it that the run made go with it


def test_a_folder_that_existed_and_one_beside_another_run_stay(tmp_path):
    old, new = tmp_path / "lightning_logs/version_0", tmp_path / "lightning_logs/version_1"
    old.mkdir(parents=True)
    made = made_by_run(_trainer(old, new))
    assert made == {new: []}  # version_0 existed: never the run's to remove
    new.mkdir()
    (new / "link").symlink_to(old)  # not a file: kept
    assert remove_unused(made) == []
    os.unlink(new / "link")
    assert remove_unused(made) == [new] and old.is_dir()


def test_folders_a_refused_run_made_go_where_they_hold_no_file(tmp_path):
    """With no logger, or its feature cache made (a refused run's empty feature_cache/): the folders the run made were
    left empty. Only the folders a run makes of its own are named, never walked into: another run's, started beside
    it in the runs/ this one made, stay (a concurrent fit's empty feature_cache/ was removed)."""
    from types import SimpleNamespace

    from text_attn.core.unused_runs import missing_folders, remove_empty, run_folders

    (tmp_path / "kept").mkdir()
    trainer = SimpleNamespace(default_root_dir=str(tmp_path / "runs/a"))
    data = SimpleNamespace(folders_made=lambda root: [Path(root, "feature_cache")])  # a caption data module's
    own = run_folders(trainer, data, str(tmp_path / "kept/b/model.pt"))
    assert own == [str(tmp_path / "runs/a"), tmp_path / "kept/b", tmp_path / "runs/a/feature_cache"]
    made = missing_folders(own)
    assert made == [tmp_path / "runs/a", tmp_path / "runs", tmp_path / "kept/b", tmp_path / "runs/a/feature_cache"]
    (tmp_path / "runs/a/feature_cache").mkdir(parents=True)
    (tmp_path / "kept/b/checkpoints").mkdir(parents=True)
    (tmp_path / "kept/b/checkpoints/last.ckpt").write_bytes(b"weights")
    remove_empty(made)
    assert not (tmp_path / "runs").exists()  # the cache, the run folder, runs/ it made: empty, all gone
    assert (tmp_path / "kept/b/checkpoints/last.ckpt").read_bytes() == b"weights" and (tmp_path / "kept").is_dir()
    made = missing_folders(run_folders(trainer, data, None))
    (tmp_path / "runs/a/feature_cache").mkdir(parents=True)
    (tmp_path / "runs/a/lightning_logs/version_1").mkdir(parents=True)  # a run of the same config, started beside
    (tmp_path / "runs/b/feature_cache").mkdir(parents=True)
    remove_empty(made)
    assert (tmp_path / "runs/a/lightning_logs/version_1").is_dir() and (tmp_path / "runs/b/feature_cache").is_dir()
    assert not (tmp_path / "runs/a/feature_cache").exists()  # (its own: the same path, made by either)
    assert run_folders(trainer, None, None) == [str(tmp_path / "runs/a"), None]  # no data module: nothing of its
