"""text_attn.core.safe_files, the one place outputs are opened, caches are trusted and file text is made inert: each
rule on its own (the commands' attacks are in tests/cli/test_security.py). FIFOs and links in temporary folders only;
never a real device."""

from __future__ import annotations

import os
import re
import stat
import sys

import pytest

from text_attn.core import safe_files
from text_attn.core.safe_files import (
    OutputRefused,
    atomic_output,
    cache_path,
    inert,
    open_stream,
    protecting,
    refuse_overlap,
    untrusted_reason,
    write_text,
)


def test_atomic_output_replaces_the_file_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert out.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    write_text(out, "new")
    assert out.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # not mkstemp's private 0600


@pytest.mark.parametrize("name", ["b" * 250 + ".pt", "é" * 125 + ".pt"])  # 253 and 253 bytes: valid names
def test_a_long_output_name_and_one_written_through_a_temporary_file_of_its_own_are_written(tmp_path, name):
    """The temporary name (.NAME.XXXXXXXX.tmp) of a valid 250-byte NAME was too long, and refused; an export writes
    its model file through a temporary file of its own, nesting two such names (228 bytes were enough to fail)."""
    out = tmp_path / name
    with atomic_output(out) as tmp:
        assert len(tmp.name.encode()) <= 255
        write_text(tmp, "inner")  # the model file's own writer, into the export's temporary file
    assert out.read_text() == "inner" and [p.name for p in tmp_path.iterdir()] == [name]


SIGNALLED = """
import os, signal, sys
from text_attn.core.safe_files import atomic_output, write_text
from text_attn.core.html_page import HtmlPage
signal.signal(signal.{name}, signal.SIG_DFL)  # at its default, as a terminal leaves it (nohup ignores SIGHUP)
out = sys.argv[1]
{body}
"""


def _signalled(body: str, out, name: str = "SIGTERM"):
    """SIGNALLED with ``body`` run in a fresh Python, ``out`` its output: the finished process."""
    import subprocess

    script = SIGNALLED.format(name=name, body=body)
    return subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize(
    "body",
    [
        # a file written whole, at once (a model file's export)
        "with atomic_output(out) as tmp:\n    tmp.write_text('half')\n    os.kill(os.getpid(), signal.{name})",
        # a page written through one temporary file the whole run (caption --html, translate --html): its own ending
        # never runs, or it would be written after all, over the old page
        "page = HtmlPage(out, 'photos')\npage.add('<section>x</section>')\nos.kill(os.getpid(), signal.{name})",
        # a file written through a temporary file inside another's (an export saves the model file into its own
        # temporary file, then reads it back): the line named the export's hidden temporary file too
        "with atomic_output(out) as tmp:\n    with atomic_output(tmp) as inner:\n        inner.write_text('half')\n"
        "        os.kill(os.getpid(), signal.{name})",
    ],
    ids=["whole", "page", "nested"],
)
def test_a_termination_signal_mid_write_removes_the_temporary_file_and_keeps_the_old_one(tmp_path, name, body):
    """At their default, SIGTERM and SIGHUP end a process without running ``finally``: a killed export left its
    temporary file behind, up to the model's size, and a killed ``caption --html`` its page's, MBs. While an output is
    written they remove it as they end the process: one line, 128 + the signal's number."""
    out = tmp_path / "model.pt"
    out.write_text("old")
    proc = _signalled(body.format(name=name) + "\nprint('not reached')", out, name)
    number = getattr(__import__("signal"), name)
    assert proc.returncode == 128 + number and "not reached" not in proc.stdout, proc.stderr
    assert proc.stderr.strip().endswith(f"{name} while writing {out}: not written (a file there before is as it was)")
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["model.pt"]


def test_a_termination_signal_as_the_temporary_file_is_made_removes_it(tmp_path):
    """A SIGTERM between the temporary file's making and its listing for removal (1 of 7 kills timed at its making, in
    an audit) ended the process at the default and left the file: it is listed before it is made."""
    out = tmp_path / "model.pt"
    body = (  # the signal the moment the file is made (a thread beside: the handler runs at once, not after a mask)
        "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "made = os.open\n"
        "def made_then_killed(name, *a, **k):\n    fd = made(name, *a, **k)\n"
        "    if str(name).endswith('.tmp'):\n        os.kill(os.getpid(), signal.SIGTERM)\n    return fd\n"
        "os.open = made_then_killed\n"
        "with atomic_output(out) as tmp:\n    print('not reached')"
    )
    proc = _signalled(body, out)
    assert proc.returncode == 143 and "not reached" not in proc.stdout, proc.stderr
    assert proc.stderr.strip().endswith(f"SIGTERM while writing {out}: not written (a file there before is as it was)")
    assert list(tmp_path.iterdir()) == []


def test_an_output_ending_in_a_slash_is_refused(tmp_path):
    """``out/`` names a folder: Path drops the slash, and a file ``out`` was written, or an existing one replaced."""
    from text_attn.core.safe_files import OutputRefused, check_output, hold_outputs

    (tmp_path / "victim.pt").write_text("kept")
    (tmp_path / "folder").mkdir()
    for out, said in ((f"{tmp_path}/new/", "ends in a slash, a folder's name: give a file path"),
                      (f"{tmp_path}/victim.pt/", "ends in a slash, a folder's name: give a file path"),
                      (f"{tmp_path}/folder/", "is a folder: give a file path")):  # fmt: skip
        for check in (check_output, lambda path: hold_outputs([("OUT", path)])):
            with pytest.raises(OutputRefused, match=f"^{re.escape(out)} {said}$"):
                check(out)
        with pytest.raises(OutputRefused):
            with atomic_output(out) as tmp:
                tmp.write_text("new")
    assert (tmp_path / "victim.pt").read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == [
        "folder", "victim.pt"]  # fmt: skip


def test_a_process_forked_while_a_file_is_written_leaves_it_alone(tmp_path):
    """A loader's worker forked while the page is written inherits the handler: a SIGTERM to it (the loader's own
    shutdown sends one) ends it as the default does, and the page's temporary file stays for the run that writes it."""
    out = tmp_path / "page.html"
    body = (
        "page = HtmlPage(out, 'photos')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os.kill(os.getpid(), signal.SIGTERM)\n    os._exit(0)\n"
        "print(os.waitpid(pid, 0)[1] == signal.SIGTERM, len(os.listdir(os.path.dirname(out))))\n"
        "page.close()"
    )
    proc = _signalled(body, out)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "True 1\n", "")  # killed by the signal; the file kept
    assert "</html>" in out.read_text() and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_killed_writers_day_old_temporary_files_are_removed_when_the_file_is_written_again(tmp_path):
    """SIGKILL runs nothing: an export killed so left .NAME.XXXXXXXX.tmp (the model's size) that nothing removed."""
    import time

    old = time.time() - 2 * 24 * 3600
    names = {".new.pt.abcd1234.tmp": old, ".new.pt.efgh5678.tmp": time.time(), ".other.pt.ijkl9012.tmp": old,
             ".new.pt.x.mnop3456.tmp": old}  # fmt: skip
    for name, when in names.items():
        (tmp_path / name).write_text("left")
        os.utime(tmp_path / name, (when, when))
    write_text(tmp_path / "new.pt", "model")
    # the day-old leftover of new.pt is gone; a fresh one (a writer at work) and other files' stay
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names, "new.pt"][1:])


def test_the_signal_handlers_are_restored_and_a_programs_own_are_left_alone(tmp_path):
    import signal

    own = lambda *a: None  # noqa: E731 - a handler a program set itself (Lightning's, a server's)
    before, term = signal.signal(signal.SIGHUP, own), signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with atomic_output(tmp_path / "a.txt") as tmp:
            tmp.write_text("a")
            assert signal.getsignal(signal.SIGHUP) is own and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
            with atomic_output(tmp_path / "b.txt") as inner:  # the first one in sets it, the last one out restores
                inner.write_text("b")
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and signal.getsignal(signal.SIGHUP) is own
    finally:
        signal.signal(signal.SIGHUP, before)
        signal.signal(signal.SIGTERM, term)


def test_a_fresh_temporary_name_each_time_never_a_planted_one(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in ("out.part", ".out.tmp", f".out.{os.getpid()}.tmp"):  # names writers used to use
        (tmp_path / name).symlink_to(victim)
    write_text(tmp_path / "out", "data")
    assert victim.read_text() == "precious" and (tmp_path / "out").read_text() == "data"


@pytest.mark.parametrize("writer", ["atomic", "stream"])
def test_links_fifos_and_folders_are_refused_as_outputs(tmp_path, writer):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "link").symlink_to(victim)
    os.mkfifo(tmp_path / "fifo")  # no reader: an open without O_NONBLOCK would hang here
    (tmp_path / "folder").mkdir()
    for name, says in (("link", "symbolic link"), ("fifo", "a FIFO"), ("folder", "a folder")):
        with pytest.raises(OutputRefused, match=says):
            if writer == "atomic":
                write_text(tmp_path / name, "x")
            else:
                open_stream(tmp_path / name).close()
    assert victim.read_text() == "precious" and stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


def test_a_stream_appends_or_starts_afresh(tmp_path):
    out = tmp_path / "log.jsonl"
    out.write_text("a\n")
    with open_stream(out, append=True) as f:
        f.write("b\n")
    assert out.read_text() == "a\nb\n"
    with open_stream(out) as f:
        f.write("c\n")
    assert out.read_text() == "c\n"


def test_an_output_is_never_an_input_by_identity(tmp_path):
    src = tmp_path / "in.png"
    src.write_bytes(b"img")
    os.link(src, tmp_path / "hard.png")
    (tmp_path / "soft.png").symlink_to(src)
    for out in ("hard.png", "in.png"):
        with pytest.raises(OutputRefused, match="is also an input"):
            refuse_overlap({f"--x {out}": tmp_path / out}, [str(src)])
    refuse_overlap({"--x new": tmp_path / "new.png", "--y": None}, [str(src)])  # a new file is no input
    with protecting([str(tmp_path / "soft.png")]):  # given through a link: the file it names is protected
        with pytest.raises(OutputRefused, match="is also an input"):
            write_text(tmp_path / "hard.png", "x")
    write_text(tmp_path / "hard.png", "x")  # outside the block: an ordinary output again
    assert (tmp_path / "hard.png").read_text() == "x" and src.read_text() == "img"  # a new file, not written through


def test_a_cache_is_trusted_only_when_no_one_else_can_write_it(tmp_path, monkeypatch, capsys):
    mine = tmp_path / "mine"
    assert cache_path(mine, "k.so", "test") == mine / "k.so"  # created private
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700 and untrusted_reason(mine) is None
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    assert "can be written by other users (mode 775)" in untrusted_reason(shared)
    monkeypatch.setattr(safe_files, "_noted", set())
    path = cache_path(shared, "k.so", "test")
    assert path.parent == safe_files.private_dir() and path.parent != shared
    cache_path(shared, "k.so", "test")
    assert capsys.readouterr().err.count("note: the test cache") == 1  # one note a process
    (mine / "k.so").symlink_to(tmp_path / "elsewhere")
    assert "symbolic link" in untrusted_reason(mine / "k.so")
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /tmp: others may write, but not rename what is ours
    (sticky / "ours").mkdir(mode=0o700)
    assert untrusted_reason(sticky / "ours") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user (the mode test runs always)")
def test_a_cache_file_of_another_user_is_not_trusted(tmp_path):
    (tmp_path / "k.so").write_bytes(b"x")
    os.chown(tmp_path / "k.so", 65534, 65534)
    assert "belongs to another user (uid 65534)" in untrusted_reason(tmp_path / "k.so")


def test_control_characters_are_shown_not_sent():
    text = "a\x1b]52;c;eA==\x07b\x1b[2J\x9b\u202ec\td\ne\x7f"
    assert inert(text) == "a\\x1b]52;c;eA==\\x07b\\x1b[2J\\x9b\\u202ec\\x09d\\x0ae\\x7f"
    assert inert(text, lines=True).endswith("c\td\ne\\x7f")
    assert inert("Zwei Hunde laufen über die Straße.") == "Zwei Hunde laufen über die Straße."


def test_a_file_names_bytes_that_are_not_utf8_are_shown_as_bytes():
    """A lone surrogate (a name's byte that is not UTF-8, as Python decodes it) could not be encoded by any stream
    or page, and written raw, a byte 0x9b is a terminal's CSI: shown as the byte's escape instead."""
    assert inert("n/\udcff\udc9b.jpg") == "n/\\xff\\x9b.jpg" == safe_files.readable("n/\udcff\udc9b.jpg")
    assert safe_files.readable("a\ud800b\x1b") == "a\\ud800b\x1b"  # only the surrogates
    assert "\udcff".translate(safe_files._INERT_STREAM).encode("ascii") == b"\\xff"
    # bytes that are UTF-8, as a process under LC_ALL=C decodes them: their character (a control one escaped)
    assert inert("u/M\udcc3\udca4dchen.jpg") == "u/Mädchen.jpg" and inert("\udcc2\udc9b") == "\\x9b"


def test_an_inert_stream_escapes_what_its_encoding_cannot_hold():
    import io

    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")  # PYTHONIOENCODING=ascii
    assert safe_files._InertStream(out).write("Mädchen \udcff\n") == 10
    out.flush()
    assert out.buffer.getvalue() == b"M\\xe4dchen \\xff\n"


def test_a_commands_streams_are_inert_while_it_runs(capsys):
    @safe_files.inert_output
    def main() -> int:
        print("caption: \x1b[2Jboo\r")
        print("note \x07", file=sys.stderr)
        return 3

    assert main() == 3
    out, err = capsys.readouterr()
    assert out == "caption: \\x1b[2Jboo\r\n" and err == "note \\x07\n"
    print("\x1b")  # restored afterwards
    assert capsys.readouterr().out == "\x1b\n"


def test_a_linked_folder_above_a_cache_is_judged_by_its_target(tmp_path):
    """~/.cache -> /data/cache: the link's own mode (777 on Linux) says nothing; its target's does."""
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "k.so").write_bytes(b"x")
    for path in (tmp_path / "link", tmp_path / "link" / "k.so"):
        assert untrusted_reason(path) is None
    (tmp_path / "real").chmod(0o777)
    for path in (tmp_path / "link", tmp_path / "link" / "k.so"):
        assert "can be written by other users" in untrusted_reason(path)


def test_a_small_input_is_read_from_a_regular_file_of_bounded_size_only(tmp_path):
    """caption-export --info hung on a FIFO and read /dev/zero without end: what was opened is judged (a FIFO opened
    without waiting for a writer), and a file larger than the limit is not read."""
    from text_attn.core.safe_files import read_regular

    (tmp_path / "facts.json").write_bytes(b"{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "facts.json")  # an input: a link is followed
    assert read_regular(tmp_path / "facts.json", 2) == b"{}" and read_regular(tmp_path / "link.json", 2) == b"{}"
    os.mkfifo(tmp_path / "fifo")  # no writer: an open without O_NONBLOCK would hang here
    (tmp_path / "folder").mkdir()
    for name, says in (("fifo", "a FIFO, not a regular file"), ("folder", "a folder, not a regular file")):
        with pytest.raises(ValueError, match=says):
            read_regular(tmp_path / name, 100)
    with pytest.raises(ValueError, match="larger than 1 bytes"):
        read_regular(tmp_path / "facts.json", 1)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing.json", 100)


def test_an_output_that_cannot_be_written_is_named_by_its_own_name_not_a_temporary_one(tmp_path):
    """caption --jsonl /proc/version said "No such file or directory: '/proc/.version.run.json.u1nw2dhn.tmp'"."""
    from text_attn.core.safe_files import atomic_output

    target = tmp_path / "gone" / "out.json"  # its folder missing: the temporary file cannot be made
    with pytest.raises(FileNotFoundError) as exc, atomic_output(target):
        pass
    assert exc.value.filename == str(target) and ".tmp" not in str(exc.value)

    def fail_in(tmp):
        raise PermissionError(13, "Permission denied", str(tmp))  # the body's own error on the temporary file

    with pytest.raises(PermissionError) as exc, atomic_output(tmp_path / "b.json") as tmp:
        fail_in(tmp)
    assert exc.value.filename == str(tmp_path / "b.json") and not list(tmp_path.glob("*.tmp"))
    with pytest.raises(FileNotFoundError) as exc:  # a folder checked before the work: named, not "tmprod4mgal"
        safe_files.probe_writable(tmp_path / "gone")
    assert exc.value.filename == str(tmp_path / "gone")


def test_a_training_commands_stream_lets_a_bars_cursor_up_through_and_no_other_escape():
    import io
    import sys

    captured = io.StringIO()
    real = sys.stderr
    sys.stderr = captured
    try:
        with safe_files.inert_streams(bars=True):
            sys.stderr.write("step 3\x1b[A\r\x1b[2Jx\u202e\n")
    finally:
        sys.stderr = real
    assert captured.getvalue() == "step 3\x1b[A\r\\x1b[2Jx\\u202e\n"


def test_a_write_into_a_folder_made_read_only_says_the_outputs_name(tmp_path, monkeypatch):
    """The rename failed (the folder made read-only during the run), then so did the temporary file's removal, and
    that second error replaced the first: the message named '.t.html.8dbc5cdg.tmp', not the output."""
    import errno
    from pathlib import Path

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(args[0]))

    out = tmp_path / "t.html"
    monkeypatch.setattr(safe_files.os, "replace", refused)
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: refused(str(self)))
    with pytest.raises(PermissionError) as err:
        with safe_files.atomic_output(out) as tmp:
            tmp.write_text("<html></html>")
    assert err.value.filename == str(out)
