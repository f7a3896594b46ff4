"""safe_files.hold_outputs: one writer an output, by an advisory flock on OUT.lock. The other writer here is another
open file description of the lock file (flock locks conflict between those, in one process as in two); the commands'
refusals, with a real second process, are in tests/cli/test_concurrent_runs.py."""

from __future__ import annotations

import os

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
    fd = _hold(tmp_path / "out.jsonl.lock")
    with pytest.raises(OutputRefused) as refused:
        hold_outputs([("--html", other), ("--jsonl", out)])
    assert str(refused.value) == (f"--jsonl {out} is being written by another process (pid 4242): wait for it to "
                                  "end, or give another file (nothing was written)")  # fmt: skip
    assert not (tmp_path / "page.html.lock").exists()  # the output locked before it was given back, its file removed
    assert not out.exists() and not other.exists()
    os.close(fd)  # the other run ended
    with hold_outputs([("--jsonl", out)]) as held:
        assert (tmp_path / "out.jsonl.lock").read_text() == f"{os.getpid()}\n"
        assert len(held.held) == 1 and not _free(tmp_path / "out.jsonl.lock")
    assert not (tmp_path / "out.jsonl.lock").exists()  # removed at the end


def test_a_lock_file_left_by_a_killed_run_blocks_no_one(tmp_path):
    lock = tmp_path / "out.jsonl.lock"
    lock.write_text("999999\n")  # its holder died (the kernel released its lock); the file stayed
    with hold_outputs([("--jsonl", tmp_path / "out.jsonl")]):
        assert lock.read_text() == f"{os.getpid()}\n"
    assert not lock.exists()


def test_a_lock_file_its_holder_removed_as_it_ended_is_not_taken(tmp_path, monkeypatch):
    """Between this run's open and its flock the holder ends (removing the file) and a third run makes it anew and
    locks it: the lock taken on the removed file is no lock; the one at the name is, and it is held."""
    lock, third = tmp_path / "out.jsonl.lock", []

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
        assert not _free(tmp_path / "out.txt.lock")  # still the outer one's
    assert not (tmp_path / "out.txt.lock").exists()


def test_a_long_output_names_lock_fits_its_folder_and_is_its_own(tmp_path):
    a, b = tmp_path / ("a" * 250), tmp_path / ("a" * 249 + "b")  # OUT.lock would be 255 + bytes: too long
    with hold_outputs([("--jsonl", a), ("--html", b)]) as held:
        names = [lock.name for _, lock in held.held]
        assert len(set(names)) == 2 and all(len(n) <= 255 and n.endswith(".lock") for n in names)
    assert not list(tmp_path.iterdir())  # both given back


def test_an_output_whose_lock_file_cannot_be_made_is_not_locked(tmp_path):
    """A folder that does not exist (or cannot be written): the command's own check or write says what is wrong."""
    with hold_outputs([("--jsonl", tmp_path / "missing" / "out.jsonl"), ("--html", None)]) as held:
        assert held.held == []
