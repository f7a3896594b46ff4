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
    items: Iterable[str],
    stdin: IO[str] | None = None,
    empty: list[str] | None = None,
    skip: Iterable[str] = (),
    unreadable: list[tuple[str, str]] | None = None,
) -> Iterator[str]:
    """Expand IMAGE arguments: a folder -> its image files (recursive, sorted; symlinked folders followed, each folder
    once, so a link back up ends there; hidden
    files and folders, whose names start with '.', skipped: thumbnails, macOS's ._ copies), ``-`` -> one path per
    non-empty line of stdin (a folder there expands as an argument does), anything else as given (a missing file is
    reported later). A folder without image files is appended to ``empty`` (the caller names it: it is a failed
    input). Folders in ``skip`` are not entered (``caption``'s own --overlay folder inside an input folder: its PNGs
    are outputs). A folder that cannot be listed (no permission) is appended to ``unreadable`` with the reason:
    os.walk skipped it unsaid, its photos left out of a run that then exited 0."""
    skipped = {os.path.realpath(s) for s in skip}

    def cannot_list(err: OSError) -> None:
        if unreadable is not None:
            unreadable.append((err.filename or "", err.strerror or str(err)))

    for item in items:
        if item == "-":
            lines = (line.rstrip("\r\n") for line in (stdin if stdin is not None else stdin_names()))  # Windows too
            # a list saved by a Windows editor or PowerShell may start with a byte-order mark: not part of the path
            lines = (line.removeprefix("\ufeff") if n == 0 else line for n, line in enumerate(lines))
            named = (line for line in lines if line.strip() and line != "-")
            yield from image_paths(named, None, empty, skip, unreadable)
        elif os.path.isdir(item):
            found, seen = 0, {os.path.realpath(item)}
            said = len(unreadable) if unreadable is not None else 0
            for root, dirs, files in os.walk(item, onerror=cannot_list, followlinks=True):
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
            locked = unreadable is not None and any(f == item for f, _ in unreadable[said:])  # itself: said so
            if not found and empty is not None and not locked:
                empty.append(item)
        else:
            yield item


class NotAList(ValueError):
    """Stdin given as ``-`` holds no list of paths (an image's bytes): the message says what it holds and what to do."""


# an image file's first bytes: `caption - < photo.jpg` (or `curl ... | caption -`) gave a traceback, its bytes read as
# a path with a NUL in it
IMAGE_MAGIC = ((b"\xff\xd8\xff", "a JPEG image"), (b"\x89PNG", "a PNG image"), (b"GIF8", "a GIF image"),
               (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"))  # fmt: skip


def _refuse_image(head: bytes) -> None:
    """:class:`NotAList` where ``head`` (stdin's first bytes, 12 or more) starts an image file."""
    what = next((what for magic, what in IMAGE_MAGIC if head.startswith(magic)), None)
    if what is None and head[4:8] == b"ftyp":  # an ISO media file: HEIC, AVIF (or a video)
        what = "an image (HEIC, AVIF) or a video"
    if what is None and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        what = "a WebP image"
    if what is not None:
        raise NotAList(f"stdin holds {what}, not a list of image paths (one a line): give the file's name "
                       "(caption photo.jpg), or save it to a file first")  # fmt: skip


def refuse_image_on_stdin() -> None:
    """:class:`NotAList` where stdin starts with an image file's bytes, looked at without reading them away (a buffered
    stdin's peek: a pipe's first bytes, waited for), so ``caption - < photo.jpg`` is refused before the model loads,
    while ``find ... | caption -`` goes on listing as it loads."""
    peek = getattr(getattr(sys.stdin, "buffer", None), "peek", None)
    if peek is not None:
        _refuse_image(peek(12)[:12])


def stdin_names() -> Iterator[str]:
    """Stdin's lines decoded as the system decodes the arguments (os.fsdecode: a byte the locale cannot read kept as
    a lone surrogate, so the file opens): read as text, stdin's own encoding failed on a UTF-8 name under
    ``PYTHONIOENCODING=ascii`` or ``LC_ALL=C`` (a UnicodeDecodeError traceback). Names ended by NUL bytes (``find
    -print0``: a name may hold a line break) are read so; an image's bytes are :class:`NotAList`."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a stdin of text only (a test's, or the list --devices read once): as it is
        yield from sys.stdin
        return
    data = binary.read()
    _refuse_image(data)
    if b"\x00" in data:  # find -print0, xargs -0: each name ends with a NUL (a line break may be part of one)
        yield from (os.fsdecode(name) + "\n" for name in data.split(b"\x00") if name)
        return
    *lines, last = data.split(b"\n")
    yield from (os.fsdecode(line) + "\n" for line in lines)
    if last:
        yield os.fsdecode(last)
