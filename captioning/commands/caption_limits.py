"""What stops a ``caption`` run part of the way because the machine ran short (memory, GPU memory, file descriptors,
shared memory) or a loader worker could not hand photos over: one line saying what ran out and what to do, for the
one-process loop (captioning.commands.caption_loop) and for ``--devices`` (captioning.commands.caption_scale). The
caller exits with 2 (README: stopped) after closing its outputs, so what was written stays and ``--resume`` finishes.
Any other exception is not one of these (None): it propagates as before."""

from __future__ import annotations

import errno

try:  # imported now: with no file descriptor left, an import fails
    import resource
except ImportError:  # not on Windows
    resource = None  # type: ignore[assignment]

from captioning.photos.photo_stream import HandoverError

_MEMORY = ("can't allocate memory", "std::bad_alloc", "Cannot allocate memory", "Failed to allocate memory")
_ONEDNN = "could not create a primitive"
_SHM = ("unable to allocate shared memory", "No space left on device")


def stopped_by(err: BaseException, photos: int, reading: bool) -> str | None:
    """The line for ``err``, else None. ``photos``: the batch being captioned; ``reading``: raised while the loader
    was reading (in its workers), not while a batch was captioned."""
    text = str(err)
    in_worker = reading or "in DataLoader worker process" in text  # a worker's exception, re-raised here
    fds = getattr(err, "errno", None) in (errno.EMFILE, errno.ENFILE)  # OSError's, or a HandoverError's cause's
    if fds or "Too many open files" in text:
        limit = _open_files_limit()
        return f"too many open files (ulimit -n {limit}): raise the limit (ulimit -n 4096) or use --workers 0"
    if type(err).__name__ == "OutOfMemoryError" or "CUDA out of memory" in text:  # torch.cuda.OutOfMemoryError
        return f"out of GPU memory captioning a batch of {photos} photos: try a smaller --batch-size"
    memory = isinstance(err, MemoryError) or (isinstance(err, OSError) and err.errno == errno.ENOMEM)
    # oneDNN says only this where it could not allocate (seen under ulimit -v): named, as it may have another cause
    guess = " (could not create a primitive)" if _ONEDNN in text else ""
    if memory or guess or any(m in text for m in _MEMORY):
        if in_worker:
            return f"out of memory reading photos{guess}: try a smaller --batch-size or fewer --workers"
        return f"out of memory captioning a batch of {photos} photos{guess}: try a smaller --batch-size"
    if isinstance(err, HandoverError):
        if any(m in text for m in _SHM):
            return f"shared memory (/dev/shm) is full: {text}: use --workers 0 or a smaller --batch-size"
        return f"a --workers process could not hand photos over ({text}): use --workers 0"
    if "DataLoader worker" in text and ("exited unexpectedly" in text or "killed by signal" in text):
        first = " ".join(text.split(".")[0].split())  # "DataLoader worker (pid 123) is killed by signal: Killed"
        return (f"a --workers process ended ({first}); where the system ran out of memory, try a smaller "
                "--batch-size or fewer --workers")  # fmt: skip
    return None


def _open_files_limit() -> str:
    if resource is None:
        return "?"
    return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
