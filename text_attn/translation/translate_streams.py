"""translate's streams as a run goes: stdin read as it arrives (gzipped or not, as --references reads its file; a
pipe or terminal that has no more lines ready gets what it sent translated now, not once 64 lines are in), an output
that fails named for what it is (stdout, or the file), and SIGTERM ending the run as Ctrl-C does."""

from __future__ import annotations

import codecs
import contextlib
import io
import itertools
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator

from text_attn.core.errors import and_more
from text_attn.core.safe_files import UTF16_BOMS, line_break

WAIT = 0.05  # seconds a pipe or terminal may take to send more before the lines already in are translated
READ = 1 << 16  # bytes read at a time (a pipe hands over what it holds, up to this)


class StreamFailed(OSError):
    """A stream of the run could not be read or written: ``where`` names it ("stdin", "stdout", "--alignments a.txt"),
    ``err`` is the system's error."""

    def __init__(self, where: str, err: BaseException):
        super().__init__(getattr(err, "errno", None), str(err))
        self.where, self.err = where, err


@contextlib.contextmanager
def failing_as(where: str) -> Iterator[None]:
    """An OSError in the block is :class:`StreamFailed` naming ``where``: the message says which output failed."""
    try:
        yield
    except StreamFailed:
        raise
    except OSError as err:
        raise StreamFailed(where, err) from err


def stdin_lines(stream=None, wait: float = WAIT) -> Iterator[str | None]:
    """The lines of ``stream`` (default: stdin), without their newline, decoded as UTF-8 whatever the locale (bytes
    that are not UTF-8 as lone surrogates: the caller reports that line). Gzipped data (gzip's magic bytes first) is
    read through, as it arrives. Where stdin is a pipe or a terminal, None is yielded when the lines so far are all
    there is for now (none more within ``wait`` seconds): the caller translates them instead of waiting for a full
    batch. A regular file never pauses. A damaged or cut gzip stream: None, then StreamFailed("stdin")."""
    stream = sys.stdin if stream is None else stream
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text stream with no bytes behind it (a test's io.StringIO): its lines as they are
        yield from _lines(line.encode("utf-8", "surrogateescape") for line in stream)
        return
    yield from _lines(_text_only(_gunzipped(_chunks(buffer, wait))))


def line_bytes(line: str) -> int:
    """The bytes a line :func:`stdin_lines` gave took in the input: its own (a byte that is not UTF-8, a lone
    surrogate, as the one byte it was) and its newline."""
    return len(line.encode("utf-8", "surrogateescape")) + 1


def _fd(buffer) -> int | None:
    try:
        return buffer.fileno()
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # an in-memory stream
        return None


def _pauses(fd: int | None) -> bool:
    """Whether what arrives on ``fd`` may come slowly (a pipe, a socket, a terminal), so that waiting for a full batch
    could keep lines sent long ago untranslated; select() works on those only on POSIX."""
    if fd is None or os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _chunks(buffer, wait: float) -> Iterator[bytes | None]:
    """Bytes as they arrive (b"": the end); None before a read that would wait (see stdin_lines)."""
    import select

    fd = _fd(buffer)
    pauses = _pauses(fd)
    while True:
        if pauses and not select.select([fd], [], [], wait)[0]:
            yield None  # nothing more ready: what is in is translated, then the read waits for more
        if fd is not None:  # straight from the descriptor: nothing held back in a buffer that select cannot see
            data = os.read(fd, READ)
        else:
            data = buffer.read1(READ) if hasattr(buffer, "read1") else buffer.read(READ)
        yield data
        if not data:
            return


def _gunzipped(chunks: Iterable[bytes | None]) -> Iterator[bytes | None]:
    """``chunks`` as they are, or decompressed as they arrive where the first two bytes are gzip's (\\x1f\\x8b); the
    Nones passed on."""
    chunks = iter(chunks)
    head = b""
    for data in chunks:
        if data is None:
            yield None
            continue
        head += data
        if len(head) >= 2 or not data or head != b"\x1f":  # enough to tell (a read may bring a single byte)
            break
    if head[:2] != b"\x1f\x8b":
        yield head
        yield from chunks
        return
    yield from _inflated(itertools.chain([head], chunks))


# what a file that is not UTF-8 text starts with, and what to say of it: `translate < photo.png` wrote an error or a
# made-up translation for each of its 451 "lines", and UTF-16 text (what Windows calls Unicode) came back as garbage
NOT_TEXT = (
    *(
        (bom, 'UTF-16 text (Windows\' "Unicode"): translate reads UTF-8 (iconv -f UTF-16 -t UTF-8 FILE)')
        for bom in UTF16_BOMS
    ),
    (b"%PDF-", "a PDF file: translate reads UTF-8 text (pdftotext FILE - takes a PDF's out)"),
    (b"PK\x03\x04", "a ZIP archive (a .docx or .odt is one): translate reads UTF-8 text (save it as plain text)"),
    (b"\x89PNG", "a PNG image: translate reads UTF-8 text, a sentence a line (caption captions photos)"),
    (b"\xff\xd8\xff", "a JPEG image: translate reads UTF-8 text, a sentence a line (caption captions photos)"),
    (b"GIF8", "a GIF image: translate reads UTF-8 text, a sentence a line (caption captions photos)"),
)
HEAD = 16  # bytes enough to tell them (a pipe's first read may bring fewer: what came before its pause is read)


def not_text(head: bytes) -> str | None:
    """What the first bytes of stdin say it is where it is not text (:data:`NOT_TEXT`; data with a NUL byte, which
    UTF-8 text never has), else None."""
    for magic, what in NOT_TEXT:
        if head.startswith(magic):
            return what
    nul = "binary data (it holds NUL bytes): translate reads UTF-8 text, a sentence a line"
    return nul if b"\x00" in head else None


def _text_only(chunks: Iterable[bytes | None]) -> Iterator[bytes | None]:
    """``chunks`` as they are, a UTF-8 byte-order mark at the start dropped (Windows editors write one); stdin that is
    not text (:func:`not_text`, read from its first bytes) is StreamFailed("stdin") before any line."""
    chunks = iter(chunks)
    head, paused = b"", False
    for data in chunks:
        if data is None:
            if head:  # a pipe paused: what it sent decides
                paused = True
                break
            yield None
            continue
        head += data
        if len(head) >= HEAD or not data:
            break
    head = head.removeprefix(codecs.BOM_UTF8)
    what = not_text(head)
    if what is not None:
        raise StreamFailed("stdin", OSError(what))
    if head:
        yield head
    if paused:
        yield None
    yield from chunks


def _inflated(chunks: Iterable[bytes | None]) -> Iterator[bytes | None]:
    """gzip members one after another (``cat a.gz b.gz``), as gzip reads them, zero bytes padding the end skipped; a
    damaged or cut-off stream: None (what was read is translated), then StreamFailed("stdin")."""
    member, fed = zlib.decompressobj(31), False  # 31: gzip's header and trailer
    for raw in chunks:
        if raw is None:
            yield None
            continue
        while raw:
            if not fed:
                raw = raw.lstrip(b"\x00")
                if not raw:
                    break
            fed = True
            try:
                out = member.decompress(raw)
            except zlib.error as err:
                yield None
                raise StreamFailed("stdin", OSError(f"the gzipped data is damaged ({err})")) from None
            yield out
            raw = b""
            if member.eof:  # another member may follow
                raw, member, fed = member.unused_data, zlib.decompressobj(31), False
    if fed:
        yield None
        raise StreamFailed("stdin", OSError("the gzipped data is cut off before its end"))


def _lines(chunks: Iterable[bytes | None]) -> Iterator[str | None]:
    """Lines split at b"\\n" as their bytes arrive, each decoded (UTF-8, surrogateescape); a last line without a
    newline too. None passed on where no line is left in hand (a partial line waits for its end)."""
    pending: list[bytes] = []  # the pieces of a line not yet ended: joined once its end comes (adding each chunk to
    # one bytes object and splitting it again took time in the square of a long line's length: 32 MB, 7 s)
    fed = False  # whether a line feed came: a stream of carriage returns alone is split at them as it ends
    for data in chunks:
        if data is None:
            yield None
            continue
        *whole, rest = data.split(b"\n")
        fed = fed or bool(whole)
        for line in whole:
            yield b"".join([*pending, line]).decode("utf-8", "surrogateescape")
            pending = []
        if rest:
            pending.append(rest)
    if pending:
        last = b"".join(pending)
        # classic Mac OS's line ends, as every file is read (safe_files.line_break): read as one input, they were
        # translated as one line of all the sentences
        pieces = [last] if fed else last.split(line_break(last))
        if len(pieces) > 1 and pieces[-1] == b"":  # the last line's own end
            pieces.pop()
        for line in pieces:
            yield line.decode("utf-8", "surrogateescape")


class JsonList:
    """``translate --json``'s stdout: the record lines ``--jsonl`` writes (a JSON object a line, each ending in a line
    break) written as one JSON list as they come (``[`` before the first, ``,`` and a line break between, ``]`` at
    :meth:`close`), a record a line, so that a run stopped early (Ctrl-C, SIGTERM) still ends in a whole list of the
    inputs done. ``[]`` where there was none. Closing it leaves ``stream`` open (stdout)."""

    def __init__(self, stream):
        self.stream, self.started = stream, False

    def write(self, text: str) -> None:
        for line in text.split("\n"):  # not splitlines(): a record may hold U+2028, which JSON leaves as it is
            if line:
                self.stream.write((",\n" if self.started else "[") + line)
                self.started = True

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("]\n" if self.started else "[]\n")
        self.stream.flush()


def unknown_note(progress: dict) -> str | None:
    """The one note on the inputs that held unknown words (``progress["unknown"]`` of them, the first ten with their
    words in ``progress["unknown_first"]``), or None."""
    count, first = progress.get("unknown", 0), progress.get("unknown_first", [])
    if not count:
        return None
    if count == 1:
        n, words = first[0]
        return f"input {n}: unknown word(s) {', '.join(words)} read as <unk>"
    shown = and_more([f"{n} ({', '.join(words)})" for n, words in first], count)
    return f"inputs {shown}: unknown word(s) read as <unk>"


def unseen_note(progress: dict, known: str) -> str | None:
    """The one note on the inputs that held words their model's training text never has (``progress["unseen"]`` of
    them, the first ten with their words in ``progress["unseen_first"]``; Translator.unseen_words), or None. ``known``:
    what the model learned from, in words (Translator.known)."""
    count, first = progress.get("unseen", 0), progress.get("unseen_first", [])
    if not count:
        return None
    if count == 1:
        n, words = first[0]
        one = len(words) == 1
        return (f"input {n}: {', '.join(words)} {'is' if one else 'are'} not in {known}: translated from "
                f"{'its' if one else 'their'} pieces, a guess")  # fmt: skip
    shown = and_more([f"{n} ({', '.join(words)})" for n, words in first], count)
    return f"inputs {shown}: words not in {known}, translated from their pieces: a guess"
