"""Which files ``caption`` reads from its IMAGE arguments: folders walked, stdin's lists read. No torch and no
Pillow: the command also uses it before its imports, to say at once that its folders hold no images."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO

# What a folder contributes: files with these extensions (any case), found recursively, in sorted order.
# .heic / .heif: iPhones' photos; .avif: the web's; .jfif: a JPEG as Windows names some downloads
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".jfif", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm",
                              ".pgm", ".heic", ".heif", ".avif"})  # fmt: skip


def image_paths(
    items: Iterable[str], stdin: IO[str] | None = None, empty: list[str] | None = None, skip: Iterable[str] = ()
) -> Iterator[str]:
    """Expand IMAGE arguments: a folder -> its image files (recursive, sorted; symlinked folders followed, each folder
    once, so a link back up ends there; hidden
    files and folders, whose names start with '.', skipped: thumbnails, macOS's ._ copies), ``-`` -> one path per
    non-empty line of stdin (a folder there expands as an argument does), anything else as given (a missing file is
    reported later). A folder without image files is appended to ``empty`` (the caller names it: it is a failed
    input). Folders in ``skip`` are not entered (``caption``'s own --overlay folder inside an input folder: its PNGs
    are outputs)."""
    skipped = {os.path.realpath(s) for s in skip}
    for item in items:
        if item == "-":
            lines = (line.rstrip("\r\n") for line in (stdin if stdin is not None else stdin_names()))  # Windows too
            # a list saved by a Windows editor or PowerShell may start with a byte-order mark: not part of the path
            lines = (line.removeprefix("\ufeff") if n == 0 else line for n, line in enumerate(lines))
            yield from image_paths((line for line in lines if line.strip() and line != "-"), None, empty, skip)
        elif os.path.isdir(item):
            found, seen = 0, {os.path.realpath(item)}
            for root, dirs, files in os.walk(item, followlinks=True):
                kept = []
                for d in sorted(dirs):
                    real = os.path.realpath(os.path.join(root, d))
                    if not d.startswith(".") and real not in skipped and real not in seen:
                        seen.add(real)
                        kept.append(d)
                dirs[:] = kept
                for name in sorted(files):
                    if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                        found += 1
                        yield os.path.join(root, name)
            if not found and empty is not None:
                empty.append(item)
        else:
            yield item


def stdin_names() -> Iterator[str]:
    """Stdin's lines decoded as the system decodes the arguments (os.fsdecode: a byte the locale cannot read kept as
    a lone surrogate, so the file opens): read as text, stdin's own encoding failed on a UTF-8 name under
    ``PYTHONIOENCODING=ascii`` or ``LC_ALL=C`` (a UnicodeDecodeError traceback)."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a stdin of text only (a test's, or the list --devices read once): as it is
        yield from sys.stdin
        return
    for line in binary:
        yield os.fsdecode(line)
