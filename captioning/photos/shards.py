"""webdataset tar shards as img2dataset writes them, read in place (nothing is unpacked to disk).

A shard is a tar whose members come in groups that share a key, one group a sample, members of a group next to each
other: ``000000012.jpg`` (or ``.png``, ``.webp``, ``.jpeg``), ``000000012.txt`` (the caption the photo came with) and
``000000012.json`` (img2dataset's metadata: url, size, status, ...). The key is a member's name up to the first dot of
its base name (a folder inside the tar stays part of it), as webdataset groups them.

What can go wrong, and what the reader does (it never raises for a shard's content; an unreadable shard file is one
error sample):
- a sample with no image member, a ``.txt`` that is not UTF-8 or a ``.json`` that is not a JSON object: that sample
  carries ``error`` (one line naming ``SHARD/KEY.ext``); the samples after it are read as usual. (Image bytes that do
  not decode are found where the photo is decoded: captioning.photos.preprocess.load_photo.)
- a damaged tar header inside the shard: the reader skips to the next valid header and gives one error sample for the
  bytes it skipped (``SHARD@BYTE``).
- a truncated shard (a copy cut off, a disk filled up): the samples up to its last whole member are read, and one
  note (:class:`ShardNote` through ``notes``) says where it ends.

``expand_braces("shards/{00000..00099}.tar")`` expands a quoted pattern as a shell would (zero padding kept).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")  # the image members img2dataset writes (its --output_format webdataset)
SHARD_EXTS = (".tar",)  # what a path must end with to be read as a shard
_BLOCK = 512  # tar's block: headers and data are padded to it


@dataclass
class ShardSample:
    """One sample of a shard. ``index``: its position among the shard's samples (0-based; an error sample for a
    damaged region takes a position too), which with the shard's position in the input makes an id that orders
    samples as the input lists them."""

    shard: str  # the shard's path, as given
    index: int  # 0-based position in the shard
    key: str  # img2dataset's key ("000000012"); for a damaged region "@BYTE"
    image_member: str | None = None  # the image member's name ("000000012.jpg"); None: the sample has none
    image: bytes | None = None  # the image member's bytes (None when not read: an error, or not selected)
    text: str | None = None  # the .txt member: the caption the photo came with
    meta: dict[str, Any] | None = None  # the .json member
    error: str | None = None  # one line naming SHARD/MEMBER and what is wrong

    @property
    def name(self) -> str:
        """How a record names the photo: ``SHARD.tar/KEY.jpg`` (``SHARD.tar/KEY`` when it has no image member;
        ``SHARD.tar`` for a shard that cannot be read at all, not ``SHARD.tar/``)."""
        member = self.image_member or self.key
        return f"{self.shard}/{member}" if member else self.shard


@dataclass(frozen=True)
class ShardNote:
    """Something about a whole shard a person should read (a truncation): one line, ``str(note)``."""

    shard: str
    message: str

    def __str__(self) -> str:
        return f"{self.shard}: {self.message}"


def is_shard(path: str) -> bool:
    """A path read as a webdataset shard (by its name: ``.tar``)."""
    return path.lower().endswith(SHARD_EXTS)


def expand_braces(pattern: str) -> list[str]:
    """``a{1..3}b`` -> a1b a2b a3b; ``{00..10}`` keeps the zero padding; ``{x,y}`` lists; nested and several braces
    combine left to right. A pattern without a well-formed brace is returned as it is."""
    depth, start = 0, -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                head, body, tail = pattern[:start], pattern[start + 1 : i], pattern[i + 1 :]
                options = _brace_options(body)
                if options is None:  # "{}" or "{x}": literal, as in a shell; go on after it
                    return [head + "{" + body + "}" + t for t in expand_braces(tail)]
                return [head + o + t for opt in options for o in expand_braces(opt) for t in expand_braces(tail)]
    return [pattern]


def _brace_options(body: str) -> list[str] | None:
    m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)", body)
    if m:
        a, b = m.group(1), m.group(2)
        lo, hi = int(a), int(b)
        padded = any(len(s.lstrip("-")) > 1 and s.lstrip("-").startswith("0") for s in (a, b))
        width = max(len(a), len(b)) if padded else 0
        step = 1 if hi >= lo else -1
        return [str(n).zfill(width) for n in range(lo, hi + step, step)]
    parts, depth, cur = [], 0, ""
    for ch in body:  # split on the commas of this level only: {a,{b,c}} has two options
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += (ch == "{") - (ch == "}")
        cur += ch
    parts.append(cur)
    return parts if len(parts) > 1 else None


def _split(name: str) -> tuple[str, str]:
    """A member name -> (key, extension): the key runs to the first dot of the base name."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (ext.lower() if dot else "")


def _padded(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


def _stderr_note(note: ShardNote) -> None:
    print(f"caption: note: {note}", file=sys.stderr)


def iter_shard(
    path: str,
    wanted: Callable[[int], bool] | None = None,
    notes: Callable[[ShardNote], None] | None = _stderr_note,
    chosen: Callable[[ShardSample], bool] | None = None,
) -> Iterator[ShardSample]:
    """The samples of the tar shard ``path`` in the order it stores them, read member by member.

    ``wanted(index)``: read only those samples (the others are skipped without reading their bytes, and not
    yielded); how ranks and loader workers share a shard. ``chosen(sample)``: the same, asked once the sample's
    member names are known (``key``, ``image_member``, ``name``) and before its bytes are read (skipping photos
    already captioned by name). ``notes``: called with a :class:`ShardNote` when the shard is truncated (default: one
    ``caption: note:`` line on stderr; None: silent). A shard that cannot be read at all is one error sample at
    index 0."""
    wanted = wanted or (lambda i: True)
    try:
        f = open(path, "rb")  # noqa: SIM115 -- closed in the finally below, after the generator is done
    except OSError as err:
        if wanted(0):
            yield ShardSample(path, 0, "", error=f"{path}: cannot read the shard ({err.strerror or err})")
        return
    try:
        yield from _samples(path, f, wanted, chosen or (lambda s: True), notes)
    finally:
        f.close()


def _samples(path: str, f, wanted, chosen, notes) -> Iterator[ShardSample]:
    size = os.fstat(f.fileno()).st_size
    try:
        # ignore_zeros: a damaged header is skipped block by block up to the next valid one (see the gap check below)
        tar = tarfile.open(fileobj=f, mode="r:", ignore_zeros=True)
    except tarfile.TarError as err:
        if wanted(0):
            yield ShardSample(path, 0, "", error=f"{path}: not a tar shard ({err})")
        return
    index, key, members = 0, None, []  # the sample being gathered: its key and whole members (TarInfo)
    end, whole, truncated = 0, 0, ""  # end: the byte after the last whole member; whole: members read whole

    def flush() -> Iterator[ShardSample]:  # the gathered sample, read if wanted and chosen
        sample = ShardSample(path, index, key)
        images = [m for m in members if _split(m.name)[1] in IMAGE_EXTS]
        sample.image_member = images[0].name if images else None
        if wanted(index) and chosen(sample):
            for info in members:
                _add_member(sample, info, _split(info.name)[1], tar)
            yield _finished(sample)

    while True:
        try:
            info = tar.next()
        except (tarfile.TarError, OSError) as err:  # a header cut off
            truncated = f"cut off inside a header ({err})"
            break
        if info is None:
            break
        tar.members.clear()  # tarfile keeps every header it read: memory would grow with the shard
        if info.offset > end and _not_zeros(f, end, info.offset):  # bytes skipped over: a damaged header
            if key is not None:
                yield from flush()
                index, key, members = index + 1, None, []
            if wanted(index):
                yield ShardSample(path, index, f"@{end}", error=f"{path}@{end}: a damaged tar header: bytes {end} "
                                  f"to {info.offset} skipped (a sample there is lost)")  # fmt: skip
            index += 1
        end = info.offset_data + _padded(info.size)
        if not info.isfile():
            continue
        if end > size:  # the member's data (or its padding) is cut off
            if info.offset_data + info.size > size:  # its bytes are not all there: the shard ends before it
                name_key = _split(info.name)[0]
                if key is not None and name_key != key:
                    yield from flush()
                    index, key, members = index + 1, None, []
                if not any(_split(m.name)[1] in IMAGE_EXTS for m in members):  # its sample's photo is lost with it:
                    # an error (exit code 1, tried again by --resume), not only a note; a cut .txt / .json after a
                    # whole image keeps the photo (below)
                    lost = ShardSample(path, index, name_key)
                    lost.image_member = info.name if _split(info.name)[1] in IMAGE_EXTS else None
                    if wanted(index) and chosen(lost):
                        lost.error = (f"{path}/{info.name}: cut off ({size - info.offset_data:,} of its "
                                      f"{info.size:,} bytes): the shard ends there (truncated)")  # fmt: skip
                        yield lost
                    return
                truncated = f"cut off in {info.name}"
                break
            truncated = f"cut off after {info.name}"  # only its padding is missing: it is whole
        name_key = _split(info.name)[0]
        if key is not None and name_key != key:
            yield from flush()
            index, members = index + 1, []
        key = name_key
        members.append(info)
        whole += 1
        if truncated:
            break
    if key is not None:
        yield from flush()
        index += 1
    if not truncated and not whole and _not_zeros(f, 0, size):
        if wanted(0):
            yield ShardSample(path, 0, "", error=f"{path}: not a tar shard (no tar member found)")
        return
    if not truncated and not whole:  # a tar with no member at all (its end marker alone): said, not silent
        if notes is not None:
            notes(ShardNote(path, "an empty tar shard: no sample in it"))
        return
    if not truncated and whole and size - end < 2 * _BLOCK:  # no end-of-archive marker (two zero blocks)
        truncated = "no end-of-archive marker"
    elif not truncated and _not_zeros(f, end, size):  # bytes after the last member that are not tar's end marker
        if wanted(index):
            yield ShardSample(path, index, f"@{end}", error=f"{path}@{end}: bytes {end} to {size} after the last "
                              "member are not tar members (damaged): skipped")  # fmt: skip
    if truncated and notes is not None:
        notes(ShardNote(path, f"truncated ({truncated}): read up to its last whole member ({whole} member(s))"))


def _finished(sample: ShardSample) -> ShardSample:
    """A sample whose members are all read: one without an image member is an error."""
    if sample.error is None and sample.image_member is None:
        sample.error = f"{sample.shard}/{sample.key}: no image member ({', '.join('.' + e for e in IMAGE_EXTS)})"
    return sample


def _not_zeros(f, start: int, stop: int) -> bool:
    """Whether bytes [start, stop) hold anything but zeros (zeros: the end marker between concatenated tars)."""
    here = f.tell()
    try:
        f.seek(start)
        while start < stop:
            data = f.read(min(stop - start, 1 << 20))
            if not data:
                return False
            if data.count(0) != len(data):
                return True
            start += len(data)
        return False
    finally:
        f.seek(here)


def _add_member(sample: ShardSample, info: tarfile.TarInfo, ext: str, tar: tarfile.TarFile) -> None:
    """Read one member into its sample (an error there names SHARD/MEMBER; the first error is kept)."""
    where = f"{sample.shard}/{info.name}"
    if ext in IMAGE_EXTS and info.name != sample.image_member or ext not in (*IMAGE_EXTS, "txt", "json"):
        return  # a second image of the sample, or a member caption has no use for
    member = tar.extractfile(info)
    data = member.read() if member is not None else b""
    if len(data) != info.size:
        raise tarfile.ReadError("unexpected end of data")
    if ext in IMAGE_EXTS:
        sample.image = data
    elif ext == "txt":
        try:
            sample.text = data.decode("utf-8-sig").strip()  # a byte-order mark (Windows editors) is not a word
        except UnicodeDecodeError:
            sample.error = sample.error or f"{where}: the caption is not UTF-8 text"
    else:
        try:
            meta = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            sample.error = sample.error or f"{where}: not valid JSON ({err})"
            return
        if not isinstance(meta, dict):
            sample.error = sample.error or f"{where}: not a JSON object"
        else:
            sample.meta = meta
