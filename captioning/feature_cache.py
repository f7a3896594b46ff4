"""Image features cached on disk, so ``test``, a second ``fit`` and a resume skip encoding.

A split's features (N, L, D) float16 live in one file named by a key over everything they depend on: the encoder's
weights and settings, the preprocessing, and the split's image list (a file's path, size and modification time; an
in-memory image's pixels). Change any of them and the key changes, so a stale file is never read; old files are left
for the user to delete. Files load memory-mapped: a rank or a resumed run pays no copy.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from PIL import Image

KEY_CHARS = 20  # hex characters of the sha256 key in file names


def encoder_fingerprint(encoder: torch.nn.Module, settings: dict) -> str:
    """sha256 over the encoder's weights and buffers and its JSON-able settings (backbone, grid, preprocessing...)."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for name, value in sorted(encoder.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _image_identity(image: Path | Image.Image) -> bytes:
    if isinstance(image, Image.Image):
        return hashlib.sha256(image.tobytes() + f"{image.mode}{image.size}".encode()).digest()
    path = Path(image)
    try:
        st = os.stat(path)
        return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    except OSError:
        return f"{path}|missing".encode()


def split_key(fingerprint: str, images: Sequence[Path | Image.Image]) -> str:
    h = hashlib.sha256(fingerprint.encode())
    for image in images:
        h.update(_image_identity(image))
    return h.hexdigest()[:KEY_CHARS]


def cache_file(cache_dir: str | Path, split: str, key: str) -> Path:
    return Path(cache_dir) / f"{split}-{key}.pt"


def load_features(path: Path, n_images: int) -> torch.Tensor | None:
    """The cached (N, L, D) tensor, memory-mapped; None when absent, unreadable or of the wrong length."""
    if not path.is_file():
        return None
    try:
        feats = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - a torn or foreign file is re-encoded, not trusted
        return None
    return feats if isinstance(feats, torch.Tensor) and feats.dim() == 3 and feats.size(0) == n_images else None


def save_features(path: Path, features: torch.Tensor) -> None:
    """Write atomically (a temporary file, then rename): a crash or a second rank never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(features.contiguous(), tmp)
    os.replace(tmp, path)
