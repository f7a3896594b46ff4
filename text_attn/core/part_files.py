"""Part files of a run over many processes: each process writes its own, the first merges them after the loop.

Both families can use it: anything whose inputs have ids that sort in input order (tuples of ints) and whose outputs
are one line of text each (a JSON record). Nothing here waits on another process: a part is written by one process
only, the merge reads finished files.

A part is a text file in the run's parts folder, one row a line: ``ID<TAB>KIND<TAB>TEXT``. ``ID``: the input's id,
integers separated by spaces; ``KIND``: ``ok`` (done), ``retry`` (failed: written to the output, tried again on
resume) or ``held`` (the output file of an earlier run already holds it; ``TEXT`` is what finds it there, see
:func:`merge_parts`). Rows of one part come in id order. A part is appended a batch at a time and flushed, so a
process killed mid-run leaves every batch before the last whole (a torn last line is dropped on reading); a part that
finished is renamed from ``*.part.open`` to ``*.part``, atomically.

:func:`merge_parts` merges every part of the folder by id (a k-way merge: memory does not grow with the run) into
the output through safe_files.atomic_output, so a reader sees the old output or the whole new one, never half.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from text_attn.core.safe_files import atomic_output, check_output

Id = tuple[int, ...]
KINDS = ("ok", "retry", "held")
OPEN, DONE = ".part.open", ".part"


class PartError(ValueError):
    """A parts folder that this module did not write (a line that is not a row); one line naming file and line."""


@dataclass(frozen=True)
class Row:
    id: Id
    kind: str  # ok, retry or held
    text: str  # one line (no line break)


def format_row(row: Row) -> str:
    if row.kind not in KINDS or "\n" in row.text:
        raise ValueError(f"a row is one line of kind {KINDS}, got kind {row.kind!r}")
    return f"{' '.join(map(str, row.id))}\t{row.kind}\t{row.text}\n"


class PartWriter:
    """One process's part in ``folder``: ``rank`` and a stamp in its name (a resumed run adds new parts beside the
    old ones; parts of a run with another number of processes are read alike)."""

    def __init__(self, folder: str | Path, rank: int):
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"rank{rank:05d}-{time.time_ns()}-{os.getpid()}"
        self.path, self.done = folder / f"{stem}{OPEN}", folder / f"{stem}{DONE}"
        check_output(self.path)
        self._file: IO[str] | None = open(self.path, "x", encoding="utf-8")  # noqa: SIM115 -- closed in close()
        self.rows = 0

    def write(self, rows: Iterable[Row]) -> None:
        """Append rows (in id order) and flush: what a killed process leaves is every call before the last."""
        assert self._file is not None, "the part is closed"
        text = "".join(format_row(r) for r in rows)
        self._file.write(text)
        self._file.flush()
        self.rows += text.count("\n")

    def close(self) -> Path:
        """Sync the part to disk and rename it finished; the finished path."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
            os.replace(self.path, self.done)
        return self.done


def part_files(folder: str | Path) -> list[Path]:
    """The parts in ``folder``, finished or not, in name order (rank, then time)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.name.endswith((OPEN, DONE)) and not p.name.startswith("."))


def read_rows(path: Path) -> Iterator[Row]:
    """The rows of one part; a torn last line (a process killed mid-write) is dropped, any other bad line is a
    PartError. A part renamed while being read (it just finished) is read under its new name."""
    try:
        f = open(path, encoding="utf-8")  # noqa: SIM115
    except FileNotFoundError:
        if not path.name.endswith(OPEN):
            raise
        f = open(str(path)[: -len(OPEN)] + DONE, encoding="utf-8")  # noqa: SIM115
    with f:
        line_no = 0
        for line in f:
            line_no += 1
            if not line.endswith("\n"):  # the last line, torn
                return
            head, tab, rest = line.partition("\t")
            kind, tab2, text = rest.partition("\t")
            try:
                ident = tuple(int(x) for x in head.split())
            except ValueError:
                ident = ()
            if not (tab and tab2 and ident and kind in KINDS):
                raise PartError(f"{path}: line {line_no} is not a part row (this folder holds another program's files)")
            yield Row(ident, kind, text[:-1])


def held_ids(folder: str | Path, keep: Callable[[Id], bool] | None = None) -> set[Id]:
    """The ids whose output the parts hold (``ok`` and ``held`` rows: done; ``retry`` rows are tried again); with
    ``keep``, only those it accepts (a process holds its own share's ids, not the whole run's)."""
    done: set[Id] = set()
    for path in part_files(folder):
        done.update(r.id for r in read_rows(path) if r.kind != "retry" and (keep is None or keep(r.id)))
    return done


@dataclass
class Merged:
    rows: int  # lines written to the output
    failed: int  # of them, retry rows (failed inputs)
    parts: int  # part files read


def merge_parts(folder: str | Path, out: str | Path, held: Callable[[str], str | None] | None = None) -> Merged:
    """Every part of ``folder`` merged by id into ``out`` (written atomically). Where several parts hold one id (a
    resumed run tried a failure again) an ``ok`` or ``held`` row wins over ``retry``, else the last. ``held(text)``:
    the output line a ``held`` row stands for (from the earlier output); None drops the row. A part whose ids go
    backwards is a PartError."""
    paths = part_files(folder)

    def ordered(path: Path) -> Iterator[Row]:
        last: Id | None = None
        for row in read_rows(path):
            if last is not None and row.id < last:
                raise PartError(f"{path}: ids out of order at {row.id} (after {last})")
            last = row.id
            yield row

    merged = Merged(0, 0, len(paths))
    with atomic_output(out) as tmp, open(tmp, "w", encoding="utf-8") as f:
        best: Row | None = None
        for row in heapq.merge(*(ordered(p) for p in paths), key=lambda r: r.id):
            if best is not None and row.id == best.id:
                if best.kind == "retry":  # a later try (or the last failure) wins over a failure
                    best = row
                continue
            if best is not None:
                _emit(f, best, held, merged)
            best = row
        if best is not None:
            _emit(f, best, held, merged)
    return merged


def _emit(f: IO[str], row: Row, held: Callable[[str], str | None] | None, merged: Merged) -> None:
    text = row.text
    if row.kind == "held":
        text = held(row.text) if held is not None else None
        if text is None:
            return
    f.write(text + "\n")
    merged.rows += 1
    merged.failed += row.kind == "retry"


class LineCounter:
    """Counts the rows written to a parts folder so far, reading only what was added since the last call: one
    process's progress bar over every process's work, without asking them."""

    def __init__(self, folder: str | Path, since: Iterable[Path] = ()):
        self.folder, self.seen = Path(folder), {p.name.removesuffix(OPEN).removesuffix(DONE) for p in since}
        self.offsets: dict[str, int] = {}
        self.count = 0

    def __call__(self) -> int:
        for path in part_files(self.folder):
            stem = path.name.removesuffix(OPEN).removesuffix(DONE)
            if stem in self.seen:  # a part of an earlier run: not this run's progress
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets.get(stem, 0))
                    data = f.read()
            except FileNotFoundError:  # renamed as it finished: read next time under its new name
                continue
            self.offsets[stem] = self.offsets.get(stem, 0) + len(data)
            self.count += data.count(b"\n")
        return self.count
