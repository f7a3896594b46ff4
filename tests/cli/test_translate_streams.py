"""translate's streams: gzipped stdin read through (as --references reads its file), a pipe's lines translated as they
come (not once 64 are in), a stdout whose reader went away named as stdout (the --html page and --alignments finished
as after Ctrl-C), unknown words in one note, SIGTERM ending the run as Ctrl-C does (exit code 143). On a small subword
model built here (random weights: the tests check the plumbing)."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation import translate_cli
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translate_streams import _lines, stdin_lines
from text_attn.translation.translator import Translator

LINES = [DE[0], DE[1], "Ein Hund läuft.", DE[0]]
IMAGES = Path(__file__).resolve().parents[1] / "fixtures" / "images"


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("m"))


def _bytes_stdin(data: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="ascii")  # a locale that is not UTF-8: read as UTF-8 anyway


def _run(model_file, capsys, monkeypatch, data: bytes, *args) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", _bytes_stdin(data))
    try:
        code = translate_main(["--model", str(model_file), "--max-len", "4", *map(str, args)])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gzipped_stdin_is_read_through_as_plain_text_is(model_file, capsys, monkeypatch):
    plain = "\n".join(LINES).encode() + b"\n"
    want = _run(model_file, capsys, monkeypatch, plain)
    assert want[0] == 0 and len(want[1].splitlines()) == len(LINES)
    assert _run(model_file, capsys, monkeypatch, gzip.compress(plain)) == want
    # two members (cat a.gz b.gz), the second padded with zeros: read on, as gzip reads them
    half = len("\n".join(LINES[:2]).encode()) + 1
    assert _run(model_file, capsys, monkeypatch, gzip.compress(plain[:half]) + gzip.compress(plain[half:]) +
                bytes(8)) == want  # fmt: skip


def test_a_cut_off_gzipped_stdin_translates_what_it_held_and_says_so(model_file, capsys, monkeypatch):
    packed = gzip.compress(("\n".join(LINES * 40) + "\n").encode(), mtime=0)
    code, out, err = _run(model_file, capsys, monkeypatch, packed[: len(packed) - 12], "--batch-size", "64")
    assert code == 2
    assert err.splitlines()[-1].startswith("translate: error: cannot read stdin: the gzipped data is cut off before "
                                           "its end (stopped after ")  # fmt: skip
    done = int(err.splitlines()[-1].rsplit("after ", 1)[1].split()[0])
    assert len(out.splitlines()) == done and done > 64  # the lines it held, the last partial batch too


def test_a_pipe_pauses_where_its_writer_has_sent_all_it_has():
    read, write = os.pipe()
    with open(read, "rb") as r, open(write, "wb", buffering=0) as w:
        lines = stdin_lines(io.TextIOWrapper(r), wait=0.01)
        w.write(b"eins\nzw")
        assert next(lines) == "eins"
        assert next(lines) is None  # "zw" waits for its end; the caller translates "eins" now, not at 64 lines
        w.write("ei\nMädchen".encode())
        assert next(lines) == "zwei"
        w.close()
        assert list(lines) == ["Mädchen"]  # the end is ready at once: no pause


def test_a_regular_file_never_pauses(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\n")
    with open(path, encoding="utf-8") as f:
        assert list(stdin_lines(f, wait=0.01)) == ["a", "b"]


def test_lines_sent_slowly_are_translated_before_the_batch_fills(model_file, tmp_path, monkeypatch, capsys):
    """`tail -f log | translate`, or lines typed at a terminal: nothing came out until 64 lines (or the end)."""
    read, write = os.pipe()
    out = tmp_path / "out.txt"
    seen = threading.Event()

    def producer() -> None:
        with open(write, "wb", buffering=0) as w:
            w.write(f"{DE[0]}\n{DE[1]}\n".encode())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not seen.is_set():  # the writer waits for the first translations
                if out.exists() and len(out.read_text(encoding="utf-8").splitlines()) == 2:
                    seen.set()
                time.sleep(0.05)
            w.write(f"{DE[0]}\n".encode())

    thread = threading.Thread(target=producer, daemon=True)
    with open(read, "rb") as stdin:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stdin))
        thread.start()
        assert translate_main(["--model", str(model_file), "--max-len", "4", "--output", str(out)]) == 0
    thread.join()
    assert seen.is_set(), "the two lines sent were not translated before more came"
    written = out.read_text(encoding="utf-8").splitlines()
    assert len(written) == 3 and written[2] == written[0]  # in batches as they came: the same translations
    assert "Traceback" not in capsys.readouterr().err


class _ReaderGone(io.StringIO):
    """A stdout whose reader leaves after the first batch (`translate ... | head -1`)."""

    def write(self, text: str) -> int:
        if self.getvalue():
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return super().write(text)


def test_a_stdout_gone_is_named_and_the_page_and_alignments_are_finished(model_file, tmp_path, monkeypatch, capsys):
    page, links = tmp_path / "p.html", tmp_path / "a.txt"
    monkeypatch.setattr("sys.stdout", _ReaderGone())
    code, _, err = _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--batch-size", "2",
                        "--html", page, "--alignments", links)  # fmt: skip
    assert code == 2
    # not "cannot write --html p.html / --alignments a.txt": those were fine
    assert err.splitlines()[-1] == "translate: error: cannot write stdout: [Errno 32] Broken pipe (stopped after 2 " \
        "input(s))"  # fmt: skip
    assert f"wrote {page}" in err
    assert page.read_text(encoding="utf-8").count('<section class="item') == 2  # the page, closed with the two
    assert page.read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert len(links.read_text(encoding="utf-8").splitlines()) == 2
    # a --resume of a --jsonl FILE holding 4 whose stdout goes: the line counts what FILE holds (it said this run's)
    jsonl = tmp_path / "r.jsonl"
    data = ("\n".join(LINES) + "\n").encode()
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert _run(model_file, capsys, monkeypatch, data, "--jsonl", jsonl)[0] == 0
    monkeypatch.setattr("sys.stdout", _ReaderGone())
    code, _, err = _run(model_file, capsys, monkeypatch, data * 2, "--batch-size", "2", "--jsonl", jsonl, "--resume")
    assert code == 2 and len(jsonl.read_text(encoding="utf-8").splitlines()) == 6
    assert err.splitlines()[-1].endswith("(stopped after 6 input(s); --resume continues after them)"), err


class _DiskFull(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_an_output_file_that_fails_is_named_alone(model_file, tmp_path, monkeypatch, capsys):
    links = tmp_path / "a.txt"
    real = translate_cli.open_stream
    monkeypatch.setattr(translate_cli, "open_stream", lambda path, *a, **k: _DiskFull() if path == str(links) else
                        real(path, *a, **k))  # fmt: skip
    code, _, err = _run(model_file, capsys, monkeypatch, b"Ein Hund.\n", "--alignments", links, "--html",
                        tmp_path / "p.html")  # fmt: skip
    assert code == 2  # not "cannot write --html p.html / --alignments a.txt": the page was fine
    assert err.splitlines()[-1] == f"translate: error: cannot write --alignments {links}: [Errno 28] No space left " \
        "on device"  # fmt: skip


class _FullAfterOne(io.StringIO):
    """An --output file whose disk fills after the first batch."""

    def write(self, text: str) -> int:
        if self.getvalue():
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(text)


def test_an_output_that_fails_midway_leaves_a_whole_page_that_says_it_is_partial(model_file, tmp_path, monkeypatch,
                                                                                  capsys):  # fmt: skip
    """--output failing mid-run gave the --html page up unclosed: no page (the old one kept) and its temporary file
    left in the folder until the process ended. The page of the sentences written is closed, whole, with a note that
    the run stopped; the note is a page element of its own (role note), which a finished page lacks."""
    from html.parser import HTMLParser

    page, out = tmp_path / "p.html", tmp_path / "out.txt"
    page.write_text("<html>the old page</html>")
    real = translate_cli.open_stream
    monkeypatch.setattr(translate_cli, "open_stream", lambda path, *a, **k: _FullAfterOne() if path == str(out) else
                        real(path, *a, **k))  # fmt: skip

    def notes(path) -> list[tuple[dict, str]]:
        found = []

        class Notes(HTMLParser):
            def handle_starttag(self, tag, attrs):
                if ("role", "note") in attrs:
                    found.append((dict(attrs), ""))

            def handle_data(self, data):
                if found and not found[-1][1]:
                    found[-1] = (found[-1][0], data)

        Notes().feed(path.read_text(encoding="utf-8"))
        return found

    code, _, err = _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--batch-size", "2",
                        "--output", out, "--html", page)  # fmt: skip
    assert code == 2 and err.splitlines()[-1].startswith(f"translate: error: cannot write --output {out}: [Errno 28]")
    # no temporary file left (out: a StringIO); out.txt.run.json: what its lines are made with (translate_resume)
    assert f"wrote {page}" in err and sorted(tmp_path.iterdir()) == [out.with_name("out.txt.run.json"), page]
    text = page.read_text(encoding="utf-8")
    assert text.count('<section class="item') == 2 and text.rstrip().endswith("</html>")
    assert notes(page) == [({"class": "partial", "role": "note"}, "Partial page: the run stopped on an error after 2 "
                            "input(s); the inputs after them are not here")]  # fmt: skip
    monkeypatch.setattr(translate_cli, "open_stream", real)
    code, _, _ = _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--html", page)
    assert code == 0 and notes(page) == [] and page.read_text(encoding="utf-8").count('<section class="item') == 4


def test_unknown_words_are_one_note_naming_the_first_ten(model_file, capsys, monkeypatch):
    lines = ["Ein Hund in Łódź läuft."] * 12
    code, _, err = _run(model_file, capsys, monkeypatch, ("\n".join(lines) + "\n").encode(), "--batch-size", "5")
    assert code == 0
    notes = [line for line in err.splitlines() if "unknown word" in line]
    shown = ", ".join(f"{k} (Łódź)" for k in range(1, 11))
    assert notes == [f"translate: note: inputs {shown} and 2 more: unknown word(s) read as <unk>"]


@pytest.fixture
def _default_sigterm():
    """SIGTERM's default, as a command starts with it: an earlier test in this worker may have left a handler of its
    own (attention-serve's stop handler, run in-process), which translate keeps, and which the SIGTERM below then ran:
    the test worker ended ("node down"), and the run hung after it."""
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, before)


def test_sigterm_ends_as_ctrl_c_does_with_exit_code_143(model_file, tmp_path, capsys, monkeypatch, _default_sigterm):
    calls = {"n": 0}
    real = Translator.translate_tokens

    def terminated(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the second batch: `kill PID`
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                pytest.fail("SIGTERM would end translate at once, silent, its lock file left")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs here
        return real(self, *a, **k)

    monkeypatch.setattr(Translator, "translate_tokens", terminated)
    out = tmp_path / "o.txt"
    code, _, err = _run(model_file, capsys, monkeypatch, f"{DE[0]}\n{DE[1]}\n{DE[0]}\n".encode(), "--batch-size",
                        "2", "--output", out)  # fmt: skip
    assert code == 143
    assert err.splitlines()[-1] == f"translate: interrupted after 2 input(s) in {out}"
    assert len(out.read_text(encoding="utf-8").splitlines()) == 2  # the first batch, whole
    assert not list(tmp_path.glob(".*lock"))  # the lock file beside it removed
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_a_line_in_many_chunks_is_joined_once_its_end_comes():
    # the pieces of a line are kept apart until its newline (a multi-byte letter split between two chunks included),
    # not added to one bytes object per chunk and split again: that took time in the square of a long line's length
    umlaut = "ü".encode()
    chunks = [b"ab", b"c\nd", None, b"e\n\nf" + umlaut[:1], umlaut[1:] + b"g", b""]
    assert list(_lines(chunks)) == ["abc", None, "de", "", "füg"]
    assert list(_lines([b"x" * 1000] * 1000)) == ["x" * 1_000_000]


def test_a_stream_of_carriage_returns_alone_is_split_at_them_as_files_are():
    """Classic Mac OS's line ends on stdin were one input (its three sentences translated as one line), while a
    --references file of them was three: both read by safe_files.line_break now. A line feed anywhere: as before."""
    assert list(_lines([b"Ein Hund.\rEine ", b"Katze.\r\rEin Kind.", b""])) == ["Ein Hund.", "Eine Katze.", "",
                                                                             "Ein Kind."]  # fmt: skip
    assert list(_lines([b"a\rb\r"])) == ["a", "b"]  # the last line's own end
    assert list(_lines([b"a\r\nb\rc"])) == ["a\r", "b\rc"]  # a line feed came: CRs are the lines' own
    assert list(stdin_lines(io.StringIO("a\rb"))) == ["a", "b"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ((IMAGES / "rocket.jpg").read_bytes(), "a JPEG image: translate reads UTF-8 text, a sentence a line"),
        ((IMAGES / "coffee.png").read_bytes(), "a PNG image"),
        ("Ein Hund läuft.\n".encode("utf-16"), 'UTF-16 text (Windows\' "Unicode"): translate reads UTF-8 (iconv'),
        ("Ein Hund läuft.\n".encode("utf-16-le"), "binary data (it holds NUL bytes)"),  # without its mark
        (b"%PDF-1.4\n%\xe2\xe3\n1 0 obj\n", "a PDF file: translate reads UTF-8 text (pdftotext FILE -"),
        (b"PK\x03\x04" + bytes(40), "a ZIP archive (a .docx or .odt is one)"),
        # gzipped: read through first (mtime 0: the same bytes, and test id, in every xdist worker's collection)
        (gzip.compress((IMAGES / "coffee.png").read_bytes(), mtime=0), "a PNG image"),
    ],
    ids=["jpeg", "png", "utf-16", "utf-16-le", "pdf", "zip", "gzipped-png"],
)
def test_stdin_that_is_not_text_is_one_line_before_anything_is_translated(model_file, capsys, monkeypatch, data, said):
    """`translate < photo.jpg` wrote an error or a made-up translation for each of its "lines" (451 for a PNG), and
    UTF-16 text came back as garbage with exit code 0."""
    code, out, err = _run(model_file, capsys, monkeypatch, data)
    assert code == 2 and out == "" and err.startswith(f"translate: error: cannot read stdin: {said}"), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("data", "args", "said"),
    [
        (b"", [], "no input: give sentences as arguments or on stdin"),
        ((IMAGES / "coffee.png").read_bytes(), [], "cannot read stdin: a PNG image"),
        ("Ein Hund.\n".encode("utf-16-le"), [], "cannot read stdin: binary data (it holds NUL bytes)"),
        (b"\n   \n\t\n", ["--paragraphs"], "no input: give sentences as arguments or on stdin (stdin held only blank"),
        ((IMAGES / "coffee.png").read_bytes(), ["--resume"], "cannot read stdin: a PNG image"),
    ],
    ids=["empty", "png", "nul", "blank-paragraphs", "resume-png"],
)
def test_stdin_refused_leaves_the_output_file_as_it_was(model_file, capsys, monkeypatch, tmp_path, data, args, said):
    """The outputs were opened, so emptied, before stdin's first read was refused (an --output FILE of a day's
    work: 0 bytes, and "FILE: --resume continues after the inputs done" said of none); "[Errno None]" before a
    resume's."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o.txt"
    out.write_text("precious line\n")
    code, printed, err = _run(model_file, capsys, monkeypatch, data, "--output", out, *args)
    last = err.strip().splitlines()[-1]  # (a resume's note on a file with no run record before it)
    assert code == 2 and printed == "" and last.startswith(f"translate: error: {said}"), err
    assert "Errno" not in err and "--resume continues" not in err and "error" not in err.replace(last, "")
    assert out.read_text() == "precious line\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.txt"]  # nothing made, no page, no temporary file


@pytest.mark.long  # the command in a process of its own: ~3 s
def test_stdin_refused_leaves_no_pages_temporary_file(model_file, tmp_path):
    """An --html page was opened (its temporary file made) before stdin's first read was refused, and left (review):
    the command's own process, as a user runs it (in a test's process a finalizer removed it)."""
    run = (
        "import sys; from text_attn.translation.translate_cli import main; sys.argv[0] = 'translate'; sys.exit(main())"
    )
    done = subprocess.run([sys.executable, "-c", run, "--model", str(model_file), "--html", "p.html", "--output",
                           "o.txt"], cwd=tmp_path, input="", capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("translate: error: no input"), done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_byte_order_mark_before_stdins_text_is_no_part_of_it(model_file, capsys, monkeypatch, tmp_path):
    records = tmp_path / "r.jsonl"
    code, _, err = _run(model_file, capsys, monkeypatch, b"\xef\xbb\xbf" + f"{DE[0]}\n".encode(), "--jsonl", records)
    assert code == 0, err
    assert json.loads(records.read_text(encoding="utf-8"))["source"] == DE[0]
    assert list(stdin_lines(_bytes_stdin(b"\xef\xbb\xbfa\nb\n"))) == ["a", "b"]


def test_a_full_disk_mid_run_says_that_resume_goes_on(model_file, capsys, monkeypatch, tmp_path):
    """The disk filled while --output's run record was rewritten (a batch a time): the line said where it stopped,
    not that --resume goes on from there, as caption's says."""
    import errno

    from text_attn.translation import translate_cli

    real, calls = translate_cli.record_run, []

    def full_at_third(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(translate_cli, "record_run", full_at_third)
    out = tmp_path / "o.txt"
    code, _, err = _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--batch-size", "1",
                        "--output", out)  # fmt: skip
    assert code == 2 and err.splitlines()[-1].endswith(f"No space left on device ({out}: --resume continues after "
                                                       "the inputs done)"), err  # fmt: skip
    # as it says: room again, the resume ends the file as one run writes it
    monkeypatch.setattr(translate_cli, "record_run", real)
    code, _, _ = _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--batch-size", "1",
                      "--output", out, "--resume")  # fmt: skip
    whole = tmp_path / "whole.txt"
    _run(model_file, capsys, monkeypatch, ("\n".join(LINES) + "\n").encode(), "--batch-size", "1", "--output", whole)
    assert code == 0 and out.read_text() == whole.read_text()
