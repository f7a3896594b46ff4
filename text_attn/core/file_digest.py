"""A file's SHA-256, read in 1 MiB pieces (``hashlib.file_digest`` is Python 3.11's; the project runs on 3.10)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: str | Path) -> str:
    """The hex SHA-256 of the file's bytes (a 48 MB model: ~0.1 s). OSError where it cannot be read."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
