"""safe_files.hold_outputs: one writer an output, by an advisory flock on .OUT.attention-toolkit.lock. The other
writer here is another open file description of the lock file (flock locks conflict between those, in one process as
in two); the commands' refusals, with a real second process, are in tests/cli/test_concurrent_runs.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from text_attn.core import safe_files
from text_attn.core.safe_files import OutputRefused, hold_outputs

fcntl = pytest.importorskip("fcntl")  # Windows: no locks (tests/cli/test_other_systems.py)


def _hold(lock, pid: bytes = b"4242\n") -> int:
    """Lock ``lock`` as another run does: its own descriptor, its pid written in the file."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, pid)
    return fd


def _free(lock) -> bool:
    """Whether no one holds ``lock`` (a fresh descriptor can lock it)."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_second_writer_is_refused_in_one_line_naming_the_holder_and_takes_nothing(tmp_path):
    out, other = tmp_path / "out.jsonl", tmp_path / "page.html"
    fd = _hold(tmp_path / ".out.jsonl.attention-toolkit.lock")
    with pytest.raises(OutputRefused) as refused:
        hold_outputs([("--html", other), ("--jsonl", out)])
    assert str(refused.value) == (f"--jsonl {out} is being written by another process (pid 4242): wait for it to "
                                  "end, or give another file (nothing was written)")  # fmt: skip
    # the output locked before it was given back, its file removed
    assert not (tmp_path / ".page.html.attention-toolkit.lock").exists()
    assert not out.exists() and not other.exists()
    os.close(fd)  # the other run ended
    with hold_outputs([("--jsonl", out)]) as held:
        assert (tmp_path / ".out.jsonl.attention-toolkit.lock").read_text() == f"{os.getpid()}\n"
        assert len(held.held) == 1 and not _free(tmp_path / ".out.jsonl.attention-toolkit.lock")
    assert not (tmp_path / ".out.jsonl.attention-toolkit.lock").exists()  # removed at the end


def test_a_lock_file_left_by_a_killed_run_blocks_no_one(tmp_path):
    lock = tmp_path / ".out.jsonl.attention-toolkit.lock"
    lock.write_text("999999\n")  # its holder died (the kernel released its lock); the file stayed
    with hold_outputs([("--jsonl", tmp_path / "out.jsonl")]):
        assert lock.read_text() == f"{os.getpid()}\n"
    assert not lock.exists()


def test_a_lock_file_its_holder_removed_as_it_ended_is_not_taken(tmp_path, monkeypatch):
    """Between this run's open and its flock the holder ends (removing the file) and a third run makes it anew and
    locks it: the lock taken on the removed file is no lock; the one at the name is, and it is held."""
    lock, third = tmp_path / ".out.jsonl.attention-toolkit.lock", []

    class Racing:
        LOCK_EX, LOCK_NB = fcntl.LOCK_EX, fcntl.LOCK_NB

        @staticmethod
        def flock(fd: int, op: int) -> None:
            if not third:
                lock.unlink()
                third.append(_hold(lock, b"77\n"))
            fcntl.flock(fd, op)

    monkeypatch.setattr(safe_files, "fcntl", Racing)
    lock.write_text("")
    with pytest.raises(OutputRefused, match=r"another process \(pid 77\)"):
        hold_outputs([("--jsonl", tmp_path / "out.jsonl")])
    os.close(third[0])


def test_an_output_named_twice_or_held_again_by_this_process_is_not_refused(tmp_path):
    out = tmp_path / "out.txt"
    with hold_outputs([("--output", out), ("--alignments", out)]) as outer:
        assert len(outer.held) == 1
        with hold_outputs([("--output", out)]) as inner:  # a command run in-process by one that holds it
            assert inner.held == []
        assert not _free(tmp_path / ".out.txt.attention-toolkit.lock")  # still the outer one's
    assert not (tmp_path / ".out.txt.attention-toolkit.lock").exists()


def test_a_long_output_names_lock_fits_its_folder_and_is_its_own(tmp_path):
    a, b = tmp_path / ("a" * 250), tmp_path / ("a" * 249 + "b")  # the lock's name would be 255 + bytes: too long
    with hold_outputs([("--jsonl", a), ("--html", b)]) as held:
        names = [lock.name for _, lock in held.held]
        assert len(set(names)) == 2 and all(len(n) <= 255 and n.endswith(".lock") for n in names)
    assert not list(tmp_path.iterdir())  # both given back


def test_an_output_whose_lock_file_cannot_be_made_is_not_locked(tmp_path):
    """A folder that does not exist (or cannot be written): the command's own check or write says what is wrong."""
    with hold_outputs([("--jsonl", tmp_path / "missing" / "out.jsonl"), ("--html", None)]) as held:
        assert held.held == []


def test_a_users_own_lock_files_are_never_emptied_or_removed(tmp_path):
    """pipenv's Pipfile.lock beside `translate --output Pipfile` was emptied, then removed: the toolkit's lock has a
    name of its own, and a file at that name that is not a pid line is locked as it is, never written or removed."""
    pipfile_lock = tmp_path / "Pipfile.lock"
    pipfile_lock.write_text('{"_meta": {}}\n')
    theirs = tmp_path / ".other.txt.attention-toolkit.lock"
    theirs.write_text("not a pid\n")
    with hold_outputs([("--output", tmp_path / "Pipfile"), ("--alignments", tmp_path / "other.txt")]):
        assert not _free(theirs)
    assert pipfile_lock.read_text() == '{"_meta": {}}\n' and theirs.read_text() == "not a pid\n"
    assert not (tmp_path / ".Pipfile.attention-toolkit.lock").exists()  # ours: removed at the end


def test_a_forked_child_does_not_keep_the_output_locked_after_its_parent_ends(tmp_path):
    """A loader's worker forked while caption held its outputs, orphaned by a SIGTERM to caption: it held the lock (a
    flock belongs to the open file, which a fork shares) and a --resume was refused naming the dead parent. Here a
    child holds the lock, forks a grandchild that lives on, and ends without letting go: the lock is free."""
    lock = tmp_path / ".out.jsonl.attention-toolkit.lock"
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # the run: holds the output, starts a worker, dies without a `finally` (as by a signal)
        try:
            hold_outputs([("--jsonl", tmp_path / "out.jsonl")])
            worker = os.fork()
            if worker == 0:
                os.close(ready_w)  # (its copy)
                import time

                time.sleep(5)
                os._exit(0)
            os.write(ready_w, f"{worker}".encode())
        finally:
            os._exit(0)
    os.close(ready_w)
    worker = int(os.read(ready_r, 32).decode())
    os.close(ready_r)
    os.waitpid(child, 0)
    try:
        os.kill(worker, 0)  # the worker lives on
        assert lock.exists() and _free(lock)
    finally:
        os.kill(worker, 9)


def test_an_end_by_signal_gives_the_locks_back_and_removes_their_files(tmp_path):
    held = hold_outputs([("--jsonl", tmp_path / "out.jsonl")])
    lock = tmp_path / ".out.jsonl.attention-toolkit.lock"
    assert lock.exists() and not _free(lock)
    safe_files.release_held_on_exit()  # what _end_writing does before os._exit
    assert not lock.exists()
    held.release()  # nothing left to give back: no error


def test_stdout_is_no_file_to_hold(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with hold_outputs([("--output", "-"), ("--jsonl", None)]) as held:
        assert held.held == [] and os.listdir(tmp_path) == []  # no lock file named after '-'


def test_one_file_under_two_names_is_held_by_its_inode(tmp_path):
    """A hard link to the output gave a second run its own lock file beside its own name: both wrote the one file
    (a torn line, photos twice and others missing, then a refused --resume). The file itself is locked too: where
    it exists when held, and where the run makes it, once opened (a link made to it later is seen)."""
    code = (
        "import sys; from text_attn.core.safe_files import OutputRefused, hold_outputs\n"
        "try:\n    hold_outputs([('--jsonl', sys.argv[1])])\nexcept OutputRefused as e:\n    print(e)"
    )

    def other_run(path) -> str:  # another process holding ``path``: what it is told
        said = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
        return said.stdout.strip()

    out = tmp_path / "c.jsonl"
    out.write_text('{"image": "a.jpg"}\n')
    with hold_outputs([("--jsonl", out)]) as held:
        assert not _free(out)  # the file itself, by its inode
        os.link(out, tmp_path / "hard.jsonl")
        assert other_run(tmp_path / "hard.jsonl") == (
            f"--jsonl {tmp_path / 'hard.jsonl'} is being written by another process under another of its names (a "
            "hard link to the same file): wait for it to end, or give another file (nothing was written)"
        )
        assert len(held.held) == 1
    assert _free(out)  # given back with the lock file
    made = tmp_path / "made.jsonl"
    with hold_outputs([("--jsonl", made)]):
        assert not made.exists()
        with safe_files.open_stream(made) as stream:  # the run makes it: locked once opened
            stream.write("x\n")
            os.link(made, tmp_path / "later.jsonl")
            assert "under another of its names" in other_run(tmp_path / "later.jsonl")
    assert _free(made)


def test_the_files_lock_follows_a_resume_that_rewrote_it_and_is_not_kept_by_a_forked_child(tmp_path):
    """A caption --resume rewrites FILE through a rename (its torn line dropped) before it appends: the lock stayed on
    the old file, and a run by a hard link to the new one was let in. And the lock was a dup of the stream's
    descriptor: a child forked with the stream kept the output locked after the run, said as "a hard link"."""
    code = (
        "import sys; from text_attn.core.safe_files import OutputRefused, hold_outputs\n"
        "try:\n    hold_outputs([('--jsonl', sys.argv[1])])\nexcept OutputRefused as e:\n    print(e)"
    )

    def refused(path) -> bool:
        said = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
        return "under another of its names" in said.stdout

    out = tmp_path / "out.jsonl"
    out.write_text("a\n")
    os.link(out, tmp_path / "old.jsonl")  # the file as it was
    with hold_outputs([("--jsonl", out)]):
        safe_files.write_text(out, "a\n")  # rewritten by a rename, as a resume drops a torn line
        with safe_files.open_stream(out, append=True):
            os.link(out, tmp_path / "new.jsonl")
            assert refused(tmp_path / "new.jsonl")  # the file written now
            assert not refused(tmp_path / "old.jsonl")  # the old one is no output any more
    made = tmp_path / "made.jsonl"
    with hold_outputs([("--jsonl", made)]):
        stream = safe_files.open_stream(made)
        child = os.fork()
        if child == 0:  # a loader's worker: it has the stream's descriptor, and lives on a moment
            import time

            time.sleep(1.5)
            os._exit(0)
        stream.close()
    os.link(made, tmp_path / "made2.jsonl")
    try:
        assert not refused(tmp_path / "made2.jsonl")  # the run ended: its output is free, whatever the child holds
    finally:
        os.waitpid(child, 0)


def test_a_lock_file_a_full_disk_left_empty_is_removed_at_the_end(tmp_path, monkeypatch):
    """On a full disk the pid could not be written into the lock file, and the end removes only a file holding its
    pid: every output left an empty .NAME.attention-toolkit.lock beside it."""
    import errno

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    lock = tmp_path / ".out.jsonl.attention-toolkit.lock"
    with monkeypatch.context() as m:
        m.setattr(safe_files.os, "write", full)
        held = hold_outputs([("--jsonl", tmp_path / "out.jsonl")])
    assert lock.exists() and lock.read_bytes() == b"" and not _free(lock)  # held all the same
    held.release()
    assert not lock.exists()
