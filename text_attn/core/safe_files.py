"""The one place outputs are opened, small inputs are read whole, caches are trusted and file text reaches a terminal
(SECURITY.md).

- **Outputs** (model files, checkpoints, JSON Lines, pages, PNGs, benchmark JSON) are written by
  :func:`atomic_output` (a fresh file made with O_EXCL in the output's folder, then a rename: never a predictable
  ``OUT.part`` name a planted link could redirect) or, when they are written as the work goes on, opened by
  :func:`open_stream` (``O_NOFOLLOW``, checked to be a regular file before a byte is written). Either refuses, in one
  line, an output that exists and is a symbolic link, a folder, a FIFO, a socket or a device (renaming over a FIFO or
  a device node would replace it with a file).
- **One writer an output**: :func:`hold_outputs`, taken by a command before its model loads and held through its run,
  refuses (one line, naming the holder's pid) an output another process is writing: an advisory ``flock`` on
  ``.OUT.attention-toolkit.lock`` beside it (two runs appending to one ``--jsonl`` interleaved their records; a second
  ``--devices`` run removed the first one's parts). The kernel releases it when its holder ends, killed or not (the
  processes it forked close their copies): a lock file left behind blocks no one. No lock where ``fcntl`` is missing
  (Windows).
- **An output is never an input**: :func:`refuse_overlap` compares files by identity (device and inode: links and
  hard links included) before anything is written.
- **Small inputs read whole** (``caption-export --info``) are read by :func:`read_regular`: a regular file of at most
  a stated size, never a FIFO (which hung the read) or a device (``/dev/zero``, read without end).
- **Caches** (compiled kernels, ONNX graphs) are loaded only from a folder that :func:`untrusted_reason` finds owned
  by this user (or root) and writable by no one else, up to the root, as ssh checks its files.
- **Text from files** (a model file's info, a file name, a caption, an input line) is made inert by :func:`inert`:
  control characters are shown as ``\\x1b``-style escapes, so no escape sequence reaches the terminal.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import re
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, AnyStr

try:  # POSIX: every system but Windows, where outputs are not locked (README "Systems")
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class OutputRefused(OSError):
    """An output that must not be written (a link, not a regular file, also an input). The message is one line; an
    OSError, so every writer's "cannot write FILE: ..." handling reports it."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def name_refused(err: OSError) -> str | None:
    """What is wrong with a path the system refuses as a name (a file name too long, a symbolic link loop), for a
    message; None for any other error."""
    return {errno.ENAMETOOLONG: "a file name too long for the file system",
            errno.ELOOP: "a symbolic link loop, not a file"}.get(err.errno)  # fmt: skip


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_output(path: str | Path) -> None:
    """Refuse (OutputRefused) an output path that exists and is a symbolic link or not a regular file, or that ends
    in a slash, a folder's name (``out/``: a file ``out`` was written, an existing file of that name replaced)."""
    _slash_refused(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:  # a folder above that cannot be read: the write itself reports it
        return
    if stat.S_ISLNK(st.st_mode):
        raise OutputRefused(f"{path} is a symbolic link: name the file itself (a link is never written through)")
    if not stat.S_ISREG(st.st_mode):
        raise OutputRefused(f"{path} exists and is {_kind(st.st_mode)}, not a regular file: give a file path")
    if (st.st_dev, st.st_ino) in _protected:
        raise OutputRefused(f"{path} is also an input ({_protected[(st.st_dev, st.st_ino)]}): it is not written")


def ends_in_slash(path: str | Path) -> bool:
    """Whether an output was typed with a slash at its end (``out/``, ``victim.pt/``), a folder's name: Path drops
    the slash, and a file ``out`` was written (a later ``mkdir out`` failed), an existing ``victim.pt`` replaced,
    exit 0 (the root, "/", aside: it is a folder)."""
    return isinstance(path, str) and path.endswith(("/", os.sep)) and bool(path.strip("/" + os.sep))


def _slash_refused(path: str | Path) -> None:
    """OutputRefused for an output typed with a slash at its end (:func:`ends_in_slash`)."""
    if ends_in_slash(path):
        raise OutputRefused(f"{path} is a folder: give a file path" if os.path.isdir(path) else
                            f"{path} ends in a slash, a folder's name: give a file path")  # fmt: skip


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _longest_name(path: Path) -> int:
    """The longest file name, in bytes, the folder of ``path`` takes."""
    try:
        return os.pathconf(path.parent if str(path.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # AttributeError: Windows has no pathconf
        return 255


def _temporary_prefix(path: Path) -> str:
    """``.NAME.``, NAME cut (in bytes, whole characters) so that the temporary name, with mkstemp's 8 random
    characters and ``.tmp``, fits the folder's longest name: a valid 250-byte output name was refused as too long,
    and an export's model file, written through a temporary file of its own, nested two such names."""
    try:
        name = _cut(path.name, max(1, _longest_name(path) - len(b"..") - 8 - len(b".tmp")))
    except UnicodeError:  # a name the file system cannot spell: the rename says so; the temporary file needs none
        name = "output"
    return f".{name}."


def _cut(name: str, room: int) -> str:
    """``name`` cut to at most ``room`` bytes, whole characters. Counted in the file system's bytes: under LC_ALL=C,
    "Mädchen" (its UTF-8 bytes as surrogates) must stay so; UnicodeError for a name it cannot spell."""
    name = name[:room]
    while len(os.fsencode(name)) > room:
        name = name[:-1]
    return name


# POSIX flags and calls Windows lacks (there a name is not followed as a link, nor a FIFO opened, by these calls)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _set_mode(fd: int, path: Path, mode: int) -> None:
    """``mode`` for the file open as ``fd`` (``path``): by descriptor where the system can (Windows before Python
    3.13 has no fchmod; there only the read-only bit exists, set by name)."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:
        os.chmod(path, mode)


def _blocking(fd: int) -> None:
    """Back to blocking writes and reads, where the open was non-blocking (O_NONBLOCK; not on Windows)."""
    if _NONBLOCK:
        os.set_blocking(fd, True)


@contextlib.contextmanager
def atomic_output(path: str | Path, mode: int | None = None) -> Iterator[Path]:
    """Yield a fresh temporary file beside ``path`` (created with O_EXCL: :func:`_make_temporary`) for the caller to
    write; on success it becomes ``path`` by a rename (its mode the usual 0666 less the umask), on an error it is
    removed and the old ``path`` stays whole. Refuses a ``path`` that is a link or not a regular file
    (:func:`check_output`). ``mode``: the file's mode instead (a cache file: 0644, so a umask of 002 does not make it
    untrusted). While it is written, SIGTERM and SIGHUP left at their default remove it as they end the process
    (:func:`_end_writing`), and leftovers of ``path``'s earlier writes that a SIGKILL left are removed once a day old
    (:func:`_remove_stale`)."""
    check_output(path)  # as given: "out/" (Path drops the slash)
    path = Path(path)
    _remove_stale(path)
    with _ending_removes_it():
        try:
            fd, tmp = _make_temporary(path)
        except OSError as err:  # named by the output, not by a temporary name the user never gave
            err.filename = str(path)
            raise
        try:
            _set_mode(fd, tmp, 0o666 & ~_umask() if mode is None else mode)
            os.close(fd)
            yield tmp
            check_output(path)  # again: something may have been put there during a long write
            os.replace(tmp, path)
            _writing.pop(tmp, None)  # written: a signal now says nothing of it
        except OSError as err:
            if err.filename == str(tmp):  # "... '/proc/.version.run.json.u1nw2dhn.tmp'": the output's name instead
                err.filename = str(path)
            raise
        finally:
            _writing.pop(tmp, None)
            # a folder made read-only meanwhile: its removal failed too, and that error replaced the write's, naming
            # the temporary file (the write's is the one to say)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


_ENDING = ("SIGTERM", "SIGHUP")  # what `kill`, a closed terminal and schedulers send; Ctrl-C is a KeyboardInterrupt
_writing: dict[Path, tuple[Path, int]] = {}  # temporary file -> (the output it becomes, the process that made it)
_ours: dict[int, Any] = {}  # signal number -> the handler _end_writing replaced (SIG_DFL), while outputs are written
_depth = 0  # the outputs the main thread is writing


@contextlib.contextmanager
def _ending_removes_it() -> Iterator[None]:
    """While outputs are written (the first one in sets it, the last one out puts the default back): SIGTERM and
    SIGHUP, left at their default (the process ends at once, no ``finally`` runs: a killed export left its temporary
    file, up to the model's size, and ``caption --html``, which writes its page through one file the whole run, one of
    MBs), end the process through :func:`_end_writing`, which removes the temporary files first. Handlers a program
    set itself (Lightning's, a server's) are left alone. Only the main thread sets handlers (only it can); another
    thread's outputs are removed with the main thread's where it has set them."""
    import signal
    import threading

    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _depth == 0:
        for name in _ENDING:
            number = getattr(signal, name, None)
            if number is not None and signal.getsignal(number) is signal.SIG_DFL:
                _ours[number] = signal.signal(number, _end_writing)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            for number, handler in _ours.items():
                if signal.getsignal(number) is _end_writing:
                    signal.signal(number, handler)
            _ours.clear()


def _make_temporary(path: Path) -> tuple[int, Path]:
    """A fresh temporary file beside ``path`` (``.NAME.XXXXXXXX.tmp``, made with O_EXCL as mkstemp makes its files,
    mode 0600), listed in ``_writing`` before it is made: a SIGTERM between mkstemp's making it and its listing ended
    the process with the file left behind (1 of 7 kills timed at its making, in an audit). Listed first, a signal at
    any point finds it (or nothing there yet: its removal is skipped)."""
    prefix, flags = _temporary_prefix(path), os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(tempfile.TMP_MAX):
        # the system's randomness, not the random module's: a seeded run's draws stay the run's
        tmp = path.parent / f"{prefix}{''.join(secrets.choice(_LETTERS) for _ in range(8))}.tmp"
        _writing[tmp] = (path, os.getpid())
        try:
            return os.open(tmp, flags | _NOFOLLOW, 0o600), tmp
        except FileExistsError:  # another's of the same name: the next one
            _writing.pop(tmp, None)
        except BaseException:
            _writing.pop(tmp, None)
            raise
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(path))


_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789_"  # mkstemp's: what _STALE finds a killed writer's files by


def _end_writing(number: int, frame: Any) -> None:
    """SIGTERM or SIGHUP while outputs are written: their temporary files removed, one line naming them, the process
    ended with 128 + the signal's number at once, as the signal's default would end it (the outputs' own endings never
    run: a page closed on its way out would be written after all, over the old one). A process forked meanwhile (a
    loader's worker) inherits this handler but not the files: there the signal ends it as its default does."""
    import signal

    mine = {tmp: out for tmp, (out, pid) in list(_writing.items()) if pid == os.getpid()}
    if not mine:
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return
    for tmp in mine:
        with contextlib.suppress(OSError):
            tmp.unlink()
    prog = os.path.basename(sys.argv[0]) or "python"
    # an output that is itself another's temporary file (a model file written into the export's, then read back) is
    # no file the user named: the one it becomes is said
    names = ", ".join(str(out) for out in dict.fromkeys(mine.values()) if out not in mine)
    for stream in (sys.stdout, sys.stderr):  # what was printed so far, as a normal end would (a closed terminal:
        with contextlib.suppress(Exception):  # SIGHUP, nothing to print to; a write this interrupted: reentrant)
            if stream is sys.stderr:
                print(f"{prog}: {signal.Signals(number).name} while writing {names}: not written (a file there "
                      "before is as it was)", file=stream)  # fmt: skip
            stream.flush()
    release_held_on_exit()  # the output locks too: their files are not left beside the outputs
    os._exit(128 + number)


_end_writing.stands_for_default = True  # type: ignore[attr-defined]  # sigterm_interrupts may set its own over it


STALE_SECONDS = 24 * 3600  # a temporary file this old beside its output was left by a killed writer (SIGKILL)
_STALE = re.compile(r"(\..*\.)[a-z0-9_]{8}\.tmp")  # mkstemp's names as atomic_output makes them: .NAME.XXXXXXXX.tmp
_stale: dict[str, dict[str, list[str]]] = {}  # folder -> prefix (.NAME.) -> the stale temporary files found there


def _remove_stale(path: Path) -> None:
    """Remove the temporary files an earlier write of ``path`` left beside it (``.NAME.XXXXXXXX.tmp``: a writer killed
    by SIGKILL or a power cut runs nothing, and an export's is the model's size) that are over a day old, so that no
    writer still at work owns them; this user's regular files only, silently. A folder is read once a process (an
    overlay folder of thousands of PNGs is not listed again for each)."""
    folder = os.path.abspath(path.parent)  # absolute: a process that changes its folder removes nothing else
    if folder not in _stale:
        found: dict[str, list[str]] = {}
        now = time.time()
        with contextlib.suppress(OSError):
            with os.scandir(folder) as entries:
                for entry in entries:
                    m = _STALE.fullmatch(entry.name)
                    if m is None:
                        continue
                    with contextlib.suppress(OSError):
                        st = entry.stat(follow_symlinks=False)
                        mine = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
                        if stat.S_ISREG(st.st_mode) and mine and now - st.st_mtime > STALE_SECONDS:
                            found.setdefault(m.group(1), []).append(entry.path)
        _stale[folder] = found
    for name in _stale[folder].pop(_temporary_prefix(path), []):
        with contextlib.suppress(OSError):
            os.unlink(name)


def probe_writable(folder: str | Path) -> None:
    """OSError where no file can be made in ``folder`` (an output's folder checked before the work, not after it): a
    fresh temporary file is made there and removed. The error names ``folder``, not the temporary file."""
    try:
        tempfile.TemporaryFile(dir=folder).close()
    except OSError as err:
        if err.filename is not None:  # the temporary file's name ("tmprod4mgal"): the folder's instead
            err.filename = str(folder)
        raise


def write_bytes(path: str | Path, data: bytes | memoryview) -> Path:
    """``data`` into ``path`` through :func:`atomic_output`."""
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) into ``path`` through :func:`atomic_output`."""
    return write_bytes(path, text.encode("utf-8"))


def open_stream(path: str | Path, append: bool = False) -> IO[str]:
    """A UTF-8 text file opened for writing as the work goes on (``append``: after what it holds, else emptied). The
    final name is never followed as a link (O_NOFOLLOW), and what was opened is checked to be a regular file before
    anything is written or emptied (O_NONBLOCK: a FIFO without a reader does not hang the open)."""
    check_output(path)
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o666)
    except OSError as err:
        if err.errno == errno.ELOOP:  # a link put there since the check
            raise OutputRefused(f"{path} is a symbolic link: name the file itself") from None
        check_output(path)  # a folder: EISDIR, said as the other kinds are
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OutputRefused(f"{path} exists and is {_kind(st.st_mode)}, not a regular file: give a file path")
        _blocking(fd)
        _lock_opened(path, fd)  # before it is emptied: another run writing it by another name refuses this one
        if not append:
            os.ftruncate(fd, 0)  # now, not by O_TRUNC: only a file known to be regular is emptied
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


# --- one writer an output ---------------------------------------------------------------------------------------------

_LOCKED: set[tuple[int, int]] = set()  # the lock files this process holds (device, inode): taken once, given back once


LOCK_SUFFIX = ".attention-toolkit.lock"  # the toolkit's own, hidden: a user's OUT.lock (pipenv's, filelock's) is theirs


def _lock_path(path: Path) -> Path | None:
    """``.OUT.attention-toolkit.lock`` beside ``path`` (hidden, and named for this toolkit: a file ``OUT.lock`` of
    the user's, pipenv's ``Pipfile.lock`` beside ``--output Pipfile``, was emptied and then removed); where that name is
    too long for the folder, OUT's name cut, with a digest of the whole name (two long names alike in their first 200
    bytes are two locks). None: no name can be made."""
    if not path.name:
        return None
    try:
        name = f".{path.name}{LOCK_SUFFIX}"
        if len(os.fsencode(name)) <= _longest_name(path):
            return path.with_name(name)
        import hashlib

        digest = hashlib.sha256(os.fsencode(path.name)).hexdigest()[:16]
        room = _longest_name(path) - len(digest) - len(f"..{LOCK_SUFFIX}".encode())
        return path.with_name(f".{_cut(path.name, room)}.{digest}{LOCK_SUFFIX}")
    except (UnicodeError, ValueError):  # a name the file system cannot spell: the write says so
        return None


def _identity_of(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _at_name(fd: int, lock: Path) -> bool:
    """Whether the file open as ``fd`` is still the one named ``lock`` (its holder, ending, removes it)."""
    try:
        st = os.lstat(lock)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == _identity_of(fd)


def _holder(fd: int) -> str:
    """`` (pid N)``: the process that holds the lock file open as ``fd``, as it wrote itself there; "" if unknown."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeError, AttributeError):  # AttributeError: no pread (never meets a held lock: no fcntl)
        return ""
    return f" (pid {text})" if text.isdigit() else ""


def _ours_to_write(fd: int) -> bool:
    """Whether the lock file open as ``fd`` holds nothing or a pid line (what a run writes there): only then is it
    written over, and removed at the end."""
    try:
        text = os.pread(fd, 64, 0)
    except (OSError, AttributeError):
        return False
    return text.strip().isdigit() or not text


def _open_lock(lock: Path) -> int | None:
    """The lock file, made if missing (mode 0666 less the umask: another user's run must see it held), opened; None
    where it cannot be (a folder that cannot be written, a link or a FIFO planted there): the output goes unlocked,
    and its write says what is wrong with it, if anything."""
    flags = _NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # CLOEXEC: processes the run starts do not hold it
    for mode in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):  # read only: another user's lock file, locked all the same
        try:
            fd = os.open(lock, flags | mode, 0o666)
        except PermissionError:
            continue
        except OSError:
            return None
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
        return None
    return None


def _lock(label: str, path: Path) -> int | None:
    """Lock ``path`` for this process (the descriptor of its lock file; None: not locked here, or already held by
    this process). OutputRefused, in one line, when another process holds it."""
    lock = _lock_path(path) if fcntl is not None else None
    while lock is not None:
        fd = _open_lock(lock)
        if fd is None:
            return None
        try:
            if _identity_of(fd) in _LOCKED:  # this process holds it already (one file given twice, or a nested run)
                os.close(fd)
                return None
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder(fd)
            os.close(fd)
            raise OutputRefused(f"{label} is being written by another process{who}: wait for it to end, or give "
                                "another file (nothing was written)") from None  # fmt: skip
        except OSError:  # a file system without locks (ENOLCK: an NFS mount without its lock service): not locked
            os.close(fd)
            return None
        if _at_name(fd, lock):
            try:
                linked = _lock_file(label, path)
            except OutputRefused:
                os.close(fd)
                raise
            if _ours_to_write(fd):  # a file of someone else's at the name: locked as it is, never emptied
                try:  # read only, or a full disk: the pid is not said, the lock holds
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                except OSError:
                    _UNSAID.add(fd)  # emptied, or empty: removed all the same at the end (a full disk left them)
            _LOCKED.add(_identity_of(fd))
            _HELD[fd] = lock
            if linked is not None:
                _LINKED[fd] = linked
            return fd
        os.close(fd)  # its holder ended and removed it (another run may have made it anew): the one there now
    return None


_HELD: dict[int, Path] = {}  # the lock files this process holds: descriptor -> name
_UNSAID: set[int] = set()  # held lock files this process could not write its pid into (a full disk)


def _lock_opened(path: str | Path, fd: int) -> None:
    """An output this process holds (:func:`hold_outputs`), just opened, locked itself where the file at its name
    is not the one locked when it was held (there was none, or a --resume rewrote it through a rename since).
    OutputRefused where another process holds the file by another name."""
    if fcntl is None:
        return
    lock = _lock_path(Path(path))
    held = next((h for h, name in _HELD.items() if name == lock), None)
    if held is None:
        return
    if (before := _LINKED.get(held)) is not None:
        if _identity_of(before) == _identity_of(fd):  # the file locked when it was held
            return
        _let_go_of_file(_LINKED.pop(held))  # another file at the name since (a --resume rewrote it): the lock moves
    if (locked := _lock_file(f"{path}", Path(path), fd)) is not None:
        _LINKED[held] = locked


_LINKED: dict[int, int] = {}  # a held lock file's descriptor -> that of its output, locked itself (_lock_file)


def _let_go_of_file(fd: int) -> None:
    """An output's own lock (:func:`_lock_file`) given back: its descriptor closed."""
    with contextlib.suppress(OSError):
        _LOCKED.discard(_identity_of(fd))
        os.close(fd)


def _lock_file(label: str, path: Path, fd: int | None = None) -> int | None:
    """An output locked itself, by its inode, beside the lock file at its name (the descriptor; None where it is not
    there yet, not a regular file, or cannot be locked): the lock file guards one name only, and two runs writing one
    file under two names (a hard link) each wrote its records through the other's (a torn line, photos twice and
    others missing, and a --resume refused the file). OutputRefused where another process holds it. ``fd``: the
    output as :func:`open_stream` opened it (a file the run made: locked then, so a link made to it later is seen)."""
    opened = fd
    try:
        # an open of its own (not a dup of the stream's): the lock belongs to the open file, and a process forked
        # with the stream (a loader's worker) kept the output locked after the run
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in _LOCKED
                or opened is not None and _identity_of(opened) != (st.st_dev, st.st_ino)):  # fmt: skip
            os.close(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputRefused(f"{label} is being written by another process under another of its names (a hard link "
                            "to the same file): wait for it to end, or give another file (nothing was written)"
                            ) from None  # fmt: skip
    except OSError:
        os.close(fd)
        return None
    _LOCKED.add((st.st_dev, st.st_ino))
    return fd


def _give_back(fd: int, remove: bool = True) -> None:
    """Let go of a held lock: its file removed where it is still the one at its name and holds this pid (removed while
    still locked: whoever opens the name next makes a new one), the descriptor closed (the lock goes with the last)."""
    lock = _HELD.pop(fd, None)
    if lock is None:  # given back already (a forked child's copy, closed at the fork)
        return
    if (linked := _LINKED.pop(fd, None)) is not None:
        _let_go_of_file(linked)
    unsaid = fd in _UNSAID
    _UNSAID.discard(fd)
    with contextlib.suppress(OSError):
        held = os.pread(fd, 64, 0).strip()
        if remove and _at_name(fd, lock) and (held == str(os.getpid()).encode() or unsaid and not held):
            os.unlink(lock)
        _LOCKED.discard(_identity_of(fd))
    with contextlib.suppress(OSError):
        os.close(fd)


def _close_held_in_child() -> None:
    """In a process forked while outputs are held (a loader's workers): its copies of the lock files closed. A flock
    belongs to the open file, which a fork shares: workers orphaned by a SIGTERM to their parent held the output
    locked, and a --resume was refused naming the dead parent."""
    for fd in [*_HELD, *_LINKED.values()]:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()
    _LINKED.clear()
    _UNSAID.clear()
    _LOCKED.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_close_held_in_child)


def release_held_on_exit() -> None:
    """Every held lock given back, its file removed: for an end by signal that skips ``finally`` (os._exit)."""
    for fd in list(_HELD):
        _give_back(fd)


class HeldOutputs:
    """The outputs :func:`hold_outputs` locked; given back (each lock file removed) by :meth:`release`, or at the end
    of a ``with`` block."""

    def __init__(self, held: list[tuple[int, Path]]):
        self.held = held

    def release(self) -> None:
        while self.held:
            fd, _ = self.held.pop()
            _give_back(fd)

    def __enter__(self) -> HeldOutputs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold_outputs(outputs: Iterable[tuple[str, str | Path | None]]) -> HeldOutputs:
    """Lock each output (``("--jsonl", path)``; None: not given; ``-``: stdout, no file) for this process until the
    returned object is released: OutputRefused, in one line naming the output and the holder's pid, where another
    process is writing it. Called by a command before its model loads and before anything is written or removed,
    held through the run.

    The lock is an advisory ``flock`` (LOCK_EX | LOCK_NB) on a lock file beside the output (:func:`_lock_path`), not
    on OUT itself: OUT is replaced by renames (:func:`atomic_output`; a ``--devices`` run's merge), the lock file
    stays. A lock file
    whose holder has ended is no lock (the kernel released it, killed or not; processes it forked close their copies
    at the fork), and the holder removes it at the end (an end by SIGTERM / SIGHUP while writing too).
    Where it cannot be made (a folder this user cannot write, a file system without locks) or ``fcntl`` is missing
    (Windows) the output is not locked. On a network file system whether another machine's run sees it depends on
    the mount (Linux's NFS client passes it to the server, unless mounted with ``local_lock``)."""
    held = HeldOutputs([])
    try:
        for label, path in outputs:
            if path:
                _slash_refused(path)  # before Path drops its slash
            if path and str(path) != "-" and (fd := _lock(f"{label} {path}", Path(path))) is not None:
                held.held.append((fd, _lock_path(Path(path))))  # type: ignore[arg-type]
    except BaseException:
        held.release()
        raise
    return held


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of a small input that must be a regular file (links followed) of at most ``limit`` bytes, such as
    ``caption-export --info``: a FIFO is opened without waiting for a writer (O_NONBLOCK; a plain read hung on one for
    ever) and refused, and so are a device (/dev/zero was read without end), a socket and a folder, judged on what was
    opened, not on a name that may change; a file larger than ``limit`` is refused before it is read. Refused:
    ValueError with the reason for a message; missing or unreadable: the OSError."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    too_large = ValueError(f"larger than {limit:,} bytes: not read")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{_kind(st.st_mode)}, not a regular file: not read")
        if st.st_size > limit:
            raise too_large
        _blocking(fd)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        data = f.read(limit + 1)  # one that grew since its size was read stops here, not read whole
    if len(data) > limit:
        raise too_large
    return data


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: by identity when both exist (links and hard links count), else by their
    resolved paths."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """The regular file ``path`` finds (its device and inode, links followed), None for none: names that differ yet
    find one file (an output that is an input; a photo named by its absolute path and by its name)."""
    try:
        st = os.stat(path)  # following links: an input is read through them
    except (OSError, ValueError):  # not there, or a name no file can have (too long, a NUL byte): said when read
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def input_identities(inputs: Iterable[str | Path], stdin: bool = False) -> dict[tuple[int, int], str]:
    """The identities (device, inode) of the input files that exist, each with its name for a message. ``stdin``:
    what stdin reads is an input too (a file redirected with ``< FILE``)."""
    have = {ident: inert(p) for p in inputs if (ident := file_identity(p)) is not None}
    if stdin:
        try:
            st = os.fstat(sys.stdin.fileno())
        except (OSError, ValueError, AttributeError):  # no stdin, or one with no file behind it (a test's)
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            have[(st.st_dev, st.st_ino)] = "stdin"
    return have


_protected: dict[tuple[int, int], str] = {}  # inputs of the running command: check_output refuses to write them


@contextlib.contextmanager
def protecting(inputs: Iterable[str | Path], stdin: bool = False) -> Iterator[None]:
    """While the block runs, every writer of this module refuses an output that is one of ``inputs`` (by
    identity): an output whose name is known only as the work goes (a per-word PNG) is checked as it is written."""
    added = {k: v for k, v in input_identities(inputs, stdin).items() if k not in _protected}
    _protected.update(added)
    try:
        yield
    finally:
        for key in added:
            _protected.pop(key, None)


def refuse_overlap(outputs: dict[str, str | Path | None], inputs: Iterable[str | Path], stdin: bool = False) -> None:
    """Refuse (OutputRefused) when an output (``{"--jsonl FILE": path}``; None: not given) is the same file as an
    input, by identity: a link or a hard link to an input counts (see :func:`input_identities`). Outputs that do not
    exist yet cannot be inputs. Called before anything is written."""
    have = input_identities(inputs, stdin)
    if not have:
        return
    for label, out in outputs.items():
        ident = file_identity(out) if out is not None else None
        if ident in have:
            raise OutputRefused(f"{label} is also an input ({have[ident]}): give another file; nothing was written")


def refuse_same_outputs(outputs: Sequence[tuple[str, str | Path | None]]) -> None:
    """Refuse (OutputRefused) two outputs (``("--html", path)``; None: not given) that name one file
    (:func:`same_file`): one would overwrite the other. Called before anything is written."""
    named = [(flag, path) for flag, path in outputs if path]
    for k, (flag, path) in enumerate(named):
        for other, second in named[k + 1 :]:
            if same_file(path, second):
                raise OutputRefused(f"{flag} and {other} name the same file; give two files")


# --- caches -----------------------------------------------------------------------------------------------------------


def untrusted_reason(path: str | Path) -> str | None:
    """Why a cache file or folder cannot be trusted as this user's own (None: it can). It and every folder above it
    must be owned by this user or root; it writable by no one else; the folders above may be writable by others only
    with the sticky bit (as /tmp is), where no one can rename or replace what another user made there. A link is
    judged by its target (~/.cache -> /data/cache), except that a file may not be a link (a planted one would be)."""
    if not hasattr(os, "geteuid"):  # Windows: no owners and modes of this kind (its ACLs are another model): trusted
        return None
    me = os.geteuid()
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except OSError as err:
        return f"{path} cannot be checked ({err.strerror})"
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid not in (me, 0):
            return f"{path} is a link made by another user (uid {st.st_uid})"
        if not path.is_dir():
            return f"{path} is a symbolic link"
    real = Path(os.path.realpath(path))
    for i, p in enumerate([real, *real.parents]):
        try:
            st = os.lstat(p)
        except OSError as err:
            return f"{p} cannot be checked ({err.strerror})"
        if st.st_uid not in (me, 0):
            return f"{p} belongs to another user (uid {st.st_uid})"
        shared = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if shared and (i == 0 or not st.st_mode & stat.S_ISVTX):
            return f"{p} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_private_dirs(folder: str | Path) -> Path:
    """Create ``folder`` and its missing parents with mode 0700 (not the umask's default: a umask of 002 would make a
    cache folder group-writable, and so untrusted)."""
    folder = Path(folder)
    missing = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for q in reversed(missing):
        try:
            q.mkdir(mode=0o700)
        except FileExistsError:  # made by another process meanwhile
            pass
    return folder


_noted: set[str] = set()


@functools.cache
def private_dir() -> Path:
    """A folder for this process only (mode 0700, made by mkdtemp), removed at exit."""
    import atexit
    import shutil

    path = Path(tempfile.mkdtemp(prefix="attention-toolkit-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def cache_path(folder: str | Path, name: str, what: str) -> Path:
    """Where to keep and load the cached file ``name``: ``folder/name`` when :func:`untrusted_reason` finds the folder
    (created private if missing) and the file there, if any, this user's alone; else ``name`` in this process's
    :func:`private_dir`, with one note on stderr (once a process per folder). OSError when ``folder`` cannot be
    created (the caller's own fallback)."""
    folder = make_private_dirs(folder)
    path = folder / name
    why = untrusted_reason(path if os.path.lexists(path) else folder)
    if why is None:
        return path
    if str(folder) not in _noted:
        _noted.add(str(folder))
        print(f"note: the {what} cache {inert(folder)} is not used ({inert(why)}); using a private folder instead",
              file=sys.stderr)  # fmt: skip
    return private_dir() / name


# --- text for a terminal ----------------------------------------------------------------------------------------------

# C0 controls, DEL, C1 controls, and the bidirectional overrides (which reorder what follows on screen)
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}
# Lone surrogates: a file name's byte that is not UTF-8 (U+DC80 + byte, as Python decodes it) shown as that byte,
# \xff; no stream or page can encode them (a traceback), and written raw a byte 0x9b is a terminal's CSI.
_SURROGATES = {c: (f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}") for c in range(0xD800, 0xE000)}
_READABLE = str.maketrans(_SURROGATES)
_ESCAPES.update(_SURROGATES)
_INERT = str.maketrans(_ESCAPES)
_INERT_LINES = str.maketrans({c: e for c, e in _ESCAPES.items() if chr(c) not in "\n\t"})
_INERT_STREAM = str.maketrans({c: e for c, e in _ESCAPES.items() if chr(c) not in "\n\t\r"})
# what json.dumps(ensure_ascii=False) leaves raw of them (DEL, C1, the overrides, lone surrogates: it escapes C0) as
# JSON's own \uXXXX: an inert stream's \x85 in a record on stdout was not JSON (json.loads: "Invalid \escape")
_JSON_INERT = str.maketrans({c: f"\\u{c:04x}" for c in _ESCAPES if c >= 0x7F})


def json_inert(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with the characters an inert stream would escape written
    as JSON's escapes: the same JSON value, printed as it is (they occur in its strings only)."""
    return text.translate(_JSON_INERT)


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")  # Windows' "Unicode" text, Excel's "Unicode Text": what UTF-16 files start with
UTF16_SAID = 'UTF-16 text (Windows\' "Unicode", Excel\'s "Unicode Text"): save it as UTF-8 (iconv -f UTF-16 -t UTF-8)'
SEMICOLONS = " (semicolons between them, as Excel writes a CSV in some languages? save it with commas, or as a TSV)"


def line_break(text: AnyStr) -> AnyStr:
    """What ``text`` (a file's str or bytes) splits into lines at: a line feed (a CR before it is the line's to drop:
    Windows files), or, in a text with carriage returns and no line feed, a carriage return (classic Mac OS's line
    ends, Excel for Mac's "CSV (Macintosh)"): read as one line, its first caption or sentence held all the rest."""
    lf, cr = ("\n", "\r") if isinstance(text, str) else (b"\n", b"\r")
    return lf if lf in text or cr not in text else cr


def text_lines(text: str) -> list[str]:
    """``text``'s lines, split at line feeds only (a CR before one dropped: Windows files): str.splitlines also splits
    at U+2028, U+0085, form feeds and \x1c-\x1e, which a caption or a sentence can hold, and then a line's number and
    its fields were another line's. Lines that end in a carriage return alone are split at them (:func:`line_break`)."""
    lines = text.split(line_break(text))
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def reads_as_csv(name: str | Path, lines: list[str]) -> bool:
    """Whether a table file's ``lines`` are read as CSV: it is named ``.csv`` (or ``.csv.gz``), as spreadsheets and
    pandas save one, and its first line with content holds no tab (a TSV named .csv is read as a TSV)."""
    head = next((line for line in lines if line.strip()), "")
    return str(name).lower().endswith((".csv", ".csv.gz")) and "\t" not in head


def table_rows(
    lines: list[str], comma: bool, error: Callable[[int, str], Exception], spans: list[tuple[int, int]] | None = None
) -> Iterator[tuple[int, list[str]]]:
    """(line number, columns) of a table file's lines: split at tabs, or with ``comma`` its CSV rows (a field in
    quotes may hold a comma, and a line break, a spreadsheet cell's, read as a space; a row's number is the line it
    ends on). A row CSV cannot read raises ``error(line, why)``, the reader's own one-line error naming its file.
    A byte-order mark starting a line (two files of Windows editors joined by ``cat``) is dropped: it was part of the
    line's first column, an invisible mark in a photo's name. A tab-separated field as Python's csv module and pandas
    write one that holds a quote (the whole field in quotes, each quote in it doubled: ``"Er sagte: ""Hallo""."``) is
    read as written (``Er sagte: "Hallo".``): its quotes were learned as words. ``spans``, where given, gets the
    (first, last) line of each CSV row that runs over more than one line (:func:`spans_note`)."""
    if not comma:
        yield from ((i, [_tsv_field(f) for f in line.removeprefix("\ufeff").split("\t")]) for i, line in
                    enumerate(lines, 1))  # fmt: skip
        return
    import csv

    # each line given its end again: a quoted field's line break is then inside the field (without it, the two lines'
    # words were glued: "a dog" / "running" read "a dogrunning")
    reader = csv.reader(line.removeprefix("\ufeff") + "\n" for line in lines)
    last = 0  # the line the row before ended on: every line is a row (a blank one, []) unless a quote holds it open
    try:
        for row in reader:
            if spans is not None and reader.line_num > last + 1:
                spans.append((last + 1, reader.line_num))
            last = reader.line_num
            yield reader.line_num, [field.replace("\n", " ") for field in row]
    except csv.Error as exc:
        raise error(reader.line_num, f"not CSV as read: {exc}") from None


def empty_rows_note(lines: list[int]) -> str:
    """What the rows of a table file whose columns are all empty (``lines``: their numbers; a spreadsheet's empty row,
    "  <TAB>  ") are, for a reader's note: skipped as blank lines are, counted (201 lines gave 200 pairs, unsaid)."""
    return f"{len(lines)} line(s) have only empty columns (first: line {lines[0]}): skipped, as blank lines are"


def spans_note(spans: list[tuple[int, int]]) -> str:
    """What the CSV rows of more than one line (``table_rows``' ``spans``) mean, for a reader's note: a spreadsheet's
    cell with a line break, or one stray quote, which joins every line up to the next quote into one field (other
    rows' file names and sentences with it: 120 captions were read as 113, unsaid)."""
    first, last = spans[0]
    return (f"{len(spans)} row(s) run over more than one line (first: lines {first}-{last}): a quote opens a field "
            "there that closes lines later, and the lines between are read as that field, a line break as a space; "
            "check the quotes if those are not a spreadsheet cell's lines")  # fmt: skip


# a tab-separated field quoted as csv writers quote one with a quote in it: quotes around it, each one inside doubled
_CSV_QUOTED = re.compile(r'\s*"((?:[^"]|"")*)"\s*')


def _tsv_field(field: str) -> str:
    """A TSV field as its writer meant it: one csv-quoted (:data:`_CSV_QUOTED` with a doubled quote inside: a csv
    writer quotes a tab-separated field only for a quote, a tab or a line break in it, so text typed in quotes, or with
    a quotation inside, is left as it is) unquoted; any other as it is."""
    if '""' not in field:  # most fields of a corpus: no regular expression run for them (millions of lines)
        return field
    found = _CSV_QUOTED.fullmatch(field)
    return found.group(1).replace('""', '"') if found and '""' in found.group(1) else field


_SURROGATE = re.compile("[\ud800-\udfff]")


def _joined(text: str) -> str:
    """Lone surrogates that together are UTF-8 (a name's bytes as a process under LC_ALL=C decodes them:
    "M\\udcc3\\udca4dchen") as the character they make ("Mädchen"); the rest as it was."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    except UnicodeError:  # a surrogate no byte gave (from a JSON text): left for the escapes
        return text


def readable(text: Any) -> str:
    """``text`` with its lone surrogates shown as escapes (a file name's byte that is not UTF-8: ``\\xff``; bytes
    that are UTF-8, as their character), so that it can be encoded, as a page's or a stream's text; nothing else
    changed (:func:`inert` does this too)."""
    return _joined(str(text)).translate(_READABLE)


def inert(text: Any, lines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``), so printing it sends the terminal no
    command. ``lines``: keep newlines and tabs (a multi-line text); else they are escaped too (a name, one field)."""
    return _joined(str(text)).translate(_INERT_LINES if lines else _INERT)


class _InertStream:
    """A text stream that writes through another, control characters escaped (newlines, tabs and the carriage
    return a progress bar redraws its line with are kept)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        shown = _joined(text).translate(_INERT_STREAM)
        try:
            self._stream.write(shown)
        except UnicodeEncodeError:  # a stream that cannot hold a character (PYTHONIOENCODING=ascii): its escape
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            self._stream.write(shown.encode(encoding, "backslashreplace").decode(encoding))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, buffer, ...
        return getattr(self._stream, name)


CURSOR_UP = "\x1b[A"  # what tqdm's nested bars (Lightning's validation bar under the training one) move up with


class _BarStream(_InertStream):
    """:class:`_InertStream` that lets a progress bar's cursor-up through, and no other escape: the training
    commands' stderr holds Lightning's bars and paths from files (a run folder's name, a config's values)."""

    def write(self, text: str) -> int:
        if CURSOR_UP not in text:
            return super().write(text)
        for k, part in enumerate(text.split(CURSOR_UP)):
            if k:
                self._stream.write(CURSOR_UP)
            super().write(part)
        return len(text)


@contextlib.contextmanager
def inert_streams(bars: bool = False) -> Iterator[None]:
    """While it lasts, what is printed on stdout and stderr is made inert (``bars``: a progress bar's cursor-up
    kept)."""
    kind = _BarStream if bars else _InertStream
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _InertStream):
        sys.stdout = kind(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, _InertStream):
        sys.stderr = kind(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def inert_output(main: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command's main: while it runs, what it prints on stdout and stderr is made inert."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        with inert_streams():
            return main(*args, **kwargs)

    return run
