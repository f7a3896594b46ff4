"""Names of the files drawn for a photo (overlays, per-word panels), cut to fit a file name's limit: a legal photo name
of 242 bytes or more made ``NAME-attention.png`` too long to write. The cut is in UTF-8 bytes, whole characters, as
text_attn.core.safe_files cuts its temporary names; a hash of the whole name keeps two cut names apart."""

from __future__ import annotations

import hashlib

NAME_MAX = 255  # bytes: Linux's file systems and macOS's; fixed, so every process and check names a photo alike


def fitted(stem: str, suffix: str, limit: int = NAME_MAX) -> str:
    """``stem``, or where ``stem + suffix`` is over ``limit`` bytes, the start of ``stem`` that fits with ``~`` and 8
    hex digits of a hash of the whole of it: ``aaaa...aaa~1f3a9c0e`` (recognisable, and apart from names that differ
    only past the cut)."""
    whole = stem.encode("utf-8", "surrogateescape")
    tail = len(suffix.encode("utf-8", "surrogateescape"))
    if len(whole) + tail <= limit:
        return stem
    tag = "~" + hashlib.sha256(whole).hexdigest()[:8]
    return whole[: max(0, limit - tail - len(tag))].decode("utf-8", "ignore") + tag
