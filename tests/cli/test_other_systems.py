"""What the commands do where the system is not Linux, simulated here: Windows lacks O_NOFOLLOW, O_NONBLOCK, pathconf,
fchmod (before Python 3.13), geteuid and fcntl, and cannot delete a file another process holds open or give one
drive's path relative to another's; macOS's and Windows' file systems ignore case. Each was a traceback, or an overlay
drawn over another, before (an audit's simulation: every output file failed on Windows with AttributeError)."""

from __future__ import annotations

import os
import stat

import pytest

from text_attn.core import safe_files


@pytest.fixture
def windows_os(monkeypatch):
    """``os`` without the POSIX calls Windows lacks, and safe_files' flags as they are read there (0)."""
    for name in ("pathconf", "fchmod", "geteuid"):
        monkeypatch.delattr(os, name, raising=False)
    monkeypatch.setattr(safe_files, "_NOFOLLOW", 0)
    monkeypatch.setattr(safe_files, "_NONBLOCK", 0)
    set_blocking = os.set_blocking
    calls = []
    monkeypatch.setattr(os, "set_blocking", lambda fd, b: (calls.append(fd), set_blocking(fd, b)))
    return calls


def test_outputs_are_written_without_the_posix_calls(tmp_path, windows_os):
    out = tmp_path / "out.txt"
    safe_files.write_text(out, "whole\n")  # atomic_output: a temporary file's mode set by name, then renamed
    assert out.read_text() == "whole\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~safe_files._umask()
    with safe_files.atomic_output(tmp_path / "cache.bin", mode=0o644) as tmp:
        tmp.write_bytes(b"x")
    assert stat.S_IMODE((tmp_path / "cache.bin").stat().st_mode) == 0o644
    with safe_files.open_stream(out, append=True) as f:  # a page or a --jsonl written as the run goes
        f.write("more\n")
    assert out.read_text() == "whole\nmore\n"
    assert safe_files.read_regular(out, 100) == b"whole\nmore\n"
    assert windows_os == []  # nothing opened non-blocking: nothing set back
    assert safe_files.untrusted_reason(tmp_path) is None  # no owners of that kind: trusted (its ACLs are not read)


def test_outputs_are_not_locked_without_fcntl(tmp_path, monkeypatch):
    """Windows has no fcntl: a second run writing an output is not refused there (README "Systems"), and no lock
    file is made beside it."""
    monkeypatch.setattr(safe_files, "fcntl", None)
    out = tmp_path / "out.jsonl"
    with safe_files.hold_outputs([("--jsonl", out)]) as first, safe_files.hold_outputs([("--jsonl", out)]) as second:
        assert first.held == second.held == []
        assert not list(tmp_path.iterdir())


def test_overlays_of_names_differing_in_case_are_two_files():
    """Dog.jpg's and dog.jpg's overlays were Dog-attention.png and dog-attention.png: one file where case is ignored."""
    from captioning.commands.caption_batch import OverlayNames

    names = OverlayNames(["a/Dog.jpg", "b/dog.jpg", "c/DOG.png", "d/cat.jpg"])
    assert names.files == {0: "Dog", 1: "dog-2", 2: "DOG-3", 3: "cat"}
    resumed = OverlayNames(["b/dog.jpg", "e/Cat.jpg"], taken={"Dog", "cat"})  # --resume: the folder's overlays
    assert resumed.files == {0: "dog-2", 1: "Cat-2"}


def test_the_runs_own_files_in_the_overlay_folder_are_never_an_overlays_name(tmp_path):
    """--jsonl ov/camera-attention.png: camera's overlay was written over the records (exit 0, the records gone);
    --html ov/rocket-attention.webp likewise. Their names are taken: the overlays are numbered past them."""
    import argparse

    from captioning.commands.caption_batch import OverlayNames, drawn_overlays

    ov = tmp_path / "ov"
    args = argparse.Namespace(overlay=str(ov), jsonl=str(ov / "camera-attention.png"), resume=False,
                              html=str(tmp_path / "ov" / "." / "rocket-attention.webp"))  # fmt: skip
    assert drawn_overlays(args) == {"camera", "rocket"}
    assert OverlayNames(["x/camera.png", "y/rocket.jpg"], drawn_overlays(args)).files == {0: "camera-2", 1: "rocket-2"}
    args.jsonl, args.html = str(tmp_path / "camera-attention.png"), "-"  # elsewhere, or stdout: nothing taken
    assert drawn_overlays(args) == set()


def test_a_record_on_another_drive_is_no_sign_of_another_folder(monkeypatch, tmp_path):
    """--resume's check for a run started in another folder: relpath raises ValueError for a path on another drive."""
    from captioning.commands import caption_loop

    def relpath(path, start=None):
        raise ValueError(f"path is on mount 'D:', start on mount 'C:': {path}")

    monkeypatch.setattr(os.path, "relpath", relpath)
    photo = tmp_path / "photos" / "a.jpg"
    assert caption_loop._elsewhere([str(photo)], {"photos/a.jpg"}) is None


def test_the_stdin_file_handed_to_the_other_processes_goes_at_exit_where_it_cannot_go_at_once(monkeypatch):
    """``caption - --devices N``: the paths read go to the others through a file each holds open; Windows refuses to
    delete a file that is open (PermissionError, raised in a finally: the first process died, the others waited)."""
    from captioning.commands import process_start

    made, later = [], []
    unlink = os.unlink

    def refusing(path):
        made.append(path)
        raise PermissionError(13, "The process cannot access the file because it is being used by another process")

    monkeypatch.setattr(os, "unlink", refusing)
    monkeypatch.setattr(process_start.atexit, "register", lambda fn, *a: later.append((fn, a)))
    monkeypatch.setattr(process_start, "_free_port", lambda: 29999)
    for key in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.setenv(key, os.environ.get(key, ""))  # start_others sets them: restored after the test
    process_start.start_others(1, ["x.jpg"], stdin="x.jpg\n")  # no other process: the file is made and let go
    assert len(made) == 1 and os.path.exists(made[0]) and len(later) == 1
    monkeypatch.setattr(os, "unlink", unlink)
    fn, args = later[0]
    fn(*args)
    assert not os.path.exists(made[0])
