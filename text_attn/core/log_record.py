"""Where a run's logs went when its logger writes outside the run folder: ``RUN_DIR/logs.yaml``.

A ``trainer.logger`` of the config's own (a CSVLogger or TensorBoardLogger whose ``save_dir`` is another folder)
writes its version folder, the run's config.yaml and its checkpoints there, and nothing into the run's
``trainer.default_root_dir``: ``report RUN_DIR`` found nothing to draw. So each run (fit, validate, test) whose
logger's folder lies outside ``RUN_DIR/lightning_logs/`` adds that folder to RUN_DIR's record (the config saver,
``lightning_parts.SafeSaveConfig``), as a path from RUN_DIR (a run folder moved with its logs still finds them), and
``report`` reads it (``run_report.locate_logs``). A run without ``default_root_dir`` in its config has no run folder
to record into. Lightning is not imported.
"""

from __future__ import annotations

import os
from pathlib import Path

from text_attn.core.safe_files import write_text

RECORD = "logs.yaml"
_HEAD = "# where this run's logs are (report RUN_DIR reads it): its logger writes outside the run folder, newest last\n"
_KEEP = 50  # the newest folders recorded: a run folder refitted for months keeps a short file


def outside(root: str | Path, log_dirs: list[str | Path]) -> list[Path]:
    """The folders of ``log_dirs`` that do not lie in ``root/lightning_logs/`` (where report looks by itself)."""
    inside = Path(root).resolve() / "lightning_logs"
    return [Path(d) for d in log_dirs if inside not in Path(d).resolve().parents]


def record_logs(root: str | Path, log_dirs: list[str | Path]) -> Path | None:
    """Add ``log_dirs`` that lie outside ``root``'s own logs folder to ``root/logs.yaml`` (made with its folder);
    the record's path, or None where there was nothing to add. A ``logs.yaml`` that is not one of these records
    (a file of the user's by that name) is left alone."""
    folders = outside(root, log_dirs)
    if not folders:
        return None
    path = Path(root) / RECORD
    if path.exists() and not _ours(path):
        return None
    new = [_from(root, d) for d in folders]
    kept = [d for d in recorded_paths(root) if d not in new] + new  # a folder recorded again moves to the end
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, _HEAD + "".join(f"- {_quoted(d)}\n" for d in kept[-_KEEP:]))


def recorded(root: str | Path) -> list[Path]:
    """The folders ``root/logs.yaml`` records, newest first, as paths to open from here; [] without a record."""
    base = Path(root).resolve()  # what the paths were made from (a run folder that is a link: its target's)
    return [Path(os.path.normpath(base / d)) for d in reversed(recorded_paths(root))]


def recorded_paths(root: str | Path) -> list[str]:
    """The record's folders as written (from ``root``), oldest first; [] without a readable record of ours."""
    import yaml

    path = Path(root) / RECORD
    try:
        if not path.is_file() or not _ours(path):
            return []
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    return [str(e) for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def _ours(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline() == _HEAD
    except (OSError, UnicodeDecodeError):
        return False


def _from(root: str | Path, folder: Path) -> str:
    """A folder as the record holds it: relative to ``root`` (absolute on another Windows drive, where none is)."""
    try:
        return Path(os.path.relpath(folder.resolve(), Path(root).resolve())).as_posix()
    except ValueError:
        return str(folder.resolve())


def _quoted(text: str) -> str:
    import json

    return json.dumps(text)  # a YAML double-quoted scalar: any name, spaces and colons included
