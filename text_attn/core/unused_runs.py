"""The run folder a refused run made and left unused, removed.

Lightning makes the loggers' ``version_N`` folder (TensorBoard's first file in it) before the data module's ``setup``
runs, so a ``fit``, ``validate`` or ``test`` refused there (a data root without its files, a split missing) left an
empty ``version_N`` behind each time, and the next run's folder was ``version_N+1``. Here a folder this run made is
removed when the run ends in an error and the folder holds nothing of it: no checkpoint, no metric, TensorBoard's
file no more than its header. A folder that existed before the run (a fixed ``trainer.logger`` version) is never
touched.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

HEADER_ONLY = 128  # bytes: a TensorBoard events file holding its 88-byte header and no event (one scalar adds ~50)
# files the loggers and the config writer put in a run folder before any step; judged by their content below
SETUP_FILES = ("hparams.yaml", "config.yaml", "metrics.csv")


def log_dirs(trainer) -> list[Path]:
    """The loggers' run folders as they will be named (reading a logger's version makes no folder)."""
    folders = []
    for logger in getattr(trainer, "loggers", ()) or ():
        with contextlib.suppress(Exception):  # a logger without a local folder (a remote service's)
            if logger.log_dir:
                folders.append(Path(logger.log_dir))
    return list(dict.fromkeys(folders))


def made_by_run(trainer) -> dict[Path, list[Path]]:
    """Called before the run: its loggers' folders that do not exist yet, each -> the folders above it the run would
    make too (``lightning_logs``, a config's ``default_root_dir``), nearest first."""
    made = {}
    for folder in log_dirs(trainer):
        if not folder.exists():
            above = [p for p in folder.absolute().parents if not p.exists()]
            made[folder] = above
    return made


def missing_folders(paths: list[str | Path | None]) -> list[Path]:
    """Called before the run: the folders among ``paths`` (``trainer.default_root_dir``, model.export_path's folder)
    and above them that do not exist yet, nearest first: a run with no logger (``--trainer.logger false``) makes them
    too (the model file's folder, before training), and refused at its data it left them empty."""
    made: list[Path] = []
    for path in paths:
        if path:
            made += [p for p in (Path(path).absolute(), *Path(path).absolute().parents) if not p.exists()]
    return list(dict.fromkeys(made))


def remove_empty(folders: list[Path]) -> None:
    """Each of ``folders`` (:func:`missing_folders`', after a run that ended in an error) removed where it is empty,
    deepest first; one that holds anything is left as it is. Only folders the run would make are named (its
    default_root_dir, its model file's folder, its feature cache: :func:`run_folders`), never walked into: a folder
    this run made may hold another run's by now (the same config's, started beside it), their empty feature_cache/
    included."""
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # rmdir removes none that holds anything
            folder.rmdir()


def run_folders(trainer, datamodule, export_path: str | None) -> list[str | Path | None]:
    """The folders a run makes of its own before it trains: trainer.default_root_dir, model.export_path's folder, and
    those its data module names (``folders_made(root)``: a caption data module's feature cache)."""
    root = getattr(trainer, "default_root_dir", None)
    made = getattr(datamodule, "folders_made", None)
    return [root, Path(export_path).parent if export_path else None, *(made(root) if made else [])]


def _unused(entry: os.DirEntry) -> bool:
    if not entry.is_file(follow_symlinks=False):
        return False
    size = entry.stat(follow_symlinks=False).st_size
    if entry.name.startswith("events.out.tfevents."):
        return size <= HEADER_ONLY
    if entry.name == "metrics.csv":  # its header at most: no row logged
        with open(entry.path, "rb") as f:
            return f.read().count(b"\n") <= 1
    return entry.name in SETUP_FILES


def remove_unused(folders: dict[Path, list[Path]]) -> list[Path]:
    """Each of ``folders`` (:func:`made_by_run`'s, after a run that ended in an error) removed where it holds nothing
    of the run, and the folders above it the run made, while they are left empty; the run folders removed."""
    removed = []
    for folder, above in folders.items():
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
            if not all(_unused(e) for e in listed):
                continue
            for entry in listed:
                os.unlink(entry.path)
            folder.rmdir()
            removed.append(folder)
            with contextlib.suppress(OSError):  # one not empty (another logger's folder) ends it
                for parent in above:
                    parent.rmdir()
        except OSError:  # gone, or not ours to remove: left as it is
            continue
    return removed
