"""Self-contained model files: ``torch.save`` of plain tensors and JSON-able metadata, read back with
``torch.load(weights_only=True)`` (no pickled code runs on load). Every model family of the project uses this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class ModelFileError(RuntimeError):
    """A model file that is missing, unreadable, or not the kind of model asked for. The message is one line."""


def save_model_file(path: str | Path, kind: str, payload: dict[str, Any], version: int = 1) -> Path:
    """Write ``payload`` (state_dict tensors + JSON-able values) tagged with ``kind`` and ``version``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format": f"attention-toolkit/{kind}", "version": version, **payload}, path)
    return path


def load_model_file(path: str | Path, kind: str, version: int = 1, map_location: str = "cpu") -> dict[str, Any]:
    """Read a file written by :func:`save_model_file`; anything else raises :class:`ModelFileError`."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: model file not found")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same one-line answer
        raise ModelFileError(f"{path}: not a model file ({type(exc).__name__})") from None
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt != f"attention-toolkit/{kind}":
        what = f"a {fmt.split('/')[-1]} file" if isinstance(fmt, str) else "not a model file of this toolkit"
        raise ModelFileError(f"{path}: expected a {kind} file, found {what}")
    if data.get("version") != version:
        raise ModelFileError(f"{path}: {kind} file version {data.get('version')} is not supported (need {version})")
    return data
