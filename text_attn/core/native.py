"""Small C kernels for the CPU hot spots, compiled on first use with the system's C compiler and called via ctypes.

Two, for float32 CPU tensors (the score by :mod:`text_attn.core.fused`, both families; the cross-entropy by the
caption loss, :mod:`captioning.model.fast_path`), each measured at the paper's size on 2 threads:
- the additive attention score of a decoder step and its backward (``csrc/score.c``): 20 steps of (32, 196, 512),
  forward and backward, 42-50 ms where the PyTorch passes take 127-133 ms, about 9% of a Show-Attend-Tell step;
- cross-entropy with its gradient (``csrc/cross_entropy.c``): (640, 10000) logits, forward and
  backward 8-10 ms where PyTorch's take 17.5-20 ms.
Where no compiler works, everything runs as before in PyTorch (the same numbers to float rounding).

- Built once per machine into ``$TEXT_ATTN_CACHE`` (default ``~/.cache/attention-toolkit/native``), the file named by
  a hash of the source, the compiler, its flags and the CPU's features (``-march=native`` code never meets another
  CPU); written under a temporary name and renamed, so processes building at once (DDP) do not see half a file.
- ``TEXT_ATTN_NATIVE=0`` turns the kernels off (PyTorch only); ``CC`` picks the compiler (default ``cc``; a command
  line such as ``ccache gcc`` works). An unwritable cache builds into a temporary folder for this process; a cached
  file that does not load is built again. The cache is trusted only when it and the folders above it belong to this
  user (or root) and no one else can write them (safe_files.untrusted_reason); otherwise the kernels are built into
  a private folder for this process, with one note (a planted library would run its code when loaded).
- :func:`status` says which path runs and why (``benchmarks/speed.py`` prints it).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from text_attn.core.safe_files import cache_path, make_private_dirs, private_dir

SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("score.c", "cross_entropy.c"))
HEADERS = (Path(__file__).with_name("csrc") / "vector.h",)  # included by both: part of the build's identity
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
LIBS = ("-lm",)
_P, _I = ctypes.c_void_p, ctypes.c_int64


@dataclass(frozen=True)
class Kernels:
    lib: ctypes.CDLL
    path: Path

    @property
    def score_forward(self):
        return self.lib.ta_score_forward

    @property
    def score_backward(self):
        return self.lib.ta_score_backward

    @property
    def cross_entropy(self):
        return self.lib.ta_cross_entropy


_why_not = ""  # why the kernels are off, for status()


def cache_dir() -> Path:
    env = os.environ.get("TEXT_ATTN_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-toolkit" / "native"


def _cpu_features() -> str:
    """The CPU's instruction-set flags (Linux), so a cache shared between machines keeps one build per CPU kind."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor()


def _build_key(cc: list[str]) -> str:
    try:
        version = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    parts = [*(p.read_bytes() for p in SOURCES + HEADERS), " ".join(cc + list(FLAGS + LIBS)).encode(), version.encode()]
    parts.append(_cpu_features().encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def _compile(cc: list[str], out: Path) -> None:
    """Builds into a fresh temporary file beside ``out`` (OSError if that folder is not writable), then renames it:
    a process or thread building at the same time never loads a half-written file."""
    make_private_dirs(out.parent)
    fd, name = tempfile.mkstemp(dir=out.parent, prefix=f"{out.stem}.", suffix=".tmp.so")
    os.close(fd)
    tmp = Path(name)
    try:
        cmd = [*cc, *FLAGS, *map(str, SOURCES), "-o", str(tmp), *LIBS]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
        os.chmod(tmp, 0o755)  # not the umask's: a group-writable library would not be trusted next time
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def _build_and_load(cc: list[str], name: str) -> Kernels:
    try:
        # a library loaded from a folder someone else can write would run their code (its constructor runs on load)
        out = cache_path(cache_dir(), name, "compiled kernels")
        if not out.exists():
            _compile(cc, out)
    except OSError:  # an unwritable cache
        out = private_dir() / name
        _compile(cc, out)
    try:
        return _load(out)
    except OSError:  # a cached file that does not load (damaged): build it again, once
        _compile(cc, out)
        return _load(out)


def _load(path: Path) -> Kernels:
    import torch  # noqa: F401  -- loaded first, its OpenMP runtime (soname libgomp.so.1) is the one ours then uses

    lib = ctypes.CDLL(str(path))
    # p, q, v, keep (or NULL), e, N, S, A, g, threads
    lib.ta_score_forward.argtypes = [_P, _P, _P, _P, _P, _I, _I, _I, _I, ctypes.c_int]
    lib.ta_score_forward.restype = None
    # sig, de, v, dx, accumulate, dq, dv, N, S, A, threads -> 0, or 1 when out of memory
    lib.ta_score_backward.argtypes = [_P, _P, _P, _P, ctypes.c_int, _P, _P, _I, _I, _I, ctypes.c_int]
    lib.ta_score_backward.restype = ctypes.c_int
    # x, target, R, C, ignore, eps, loss_rows, grad, threads
    lib.ta_cross_entropy.argtypes = [_P, _P, _I, _I, _I, ctypes.c_float, _P, _P, ctypes.c_int]
    lib.ta_cross_entropy.restype = None
    return Kernels(lib, path)


_lock = threading.Lock()


def compiler() -> list[str]:
    """``$CC`` as a command line (``ccache gcc`` -> two words), ``cc`` by default."""
    return shlex.split(os.environ.get("CC") or "cc")


def kernels() -> Kernels | None:
    """The compiled kernels, or None (then the callers use PyTorch; :func:`status` says why)."""
    with _lock:  # one build per process, even when threads ask at once
        return _kernels()


@functools.cache
def _kernels() -> Kernels | None:
    global _why_not
    if os.environ.get("TEXT_ATTN_NATIVE", "1") == "0":
        _why_not = "off (TEXT_ATTN_NATIVE=0)"
        return None
    cc = compiler()
    if not cc or shutil.which(cc[0]) is None:
        _why_not = f"no C compiler ({' '.join(cc)!r} not found; set CC)"
        return None
    try:
        return _build_and_load(cc, f"kernels-{_build_key(cc)}.so")
    except (OSError, RuntimeError, subprocess.SubprocessError, AttributeError) as e:
        _why_not = f"not built: {e}"
        return None


def status() -> str:
    """One line: which kernels run (compiled, or PyTorch and why)."""
    k = kernels()
    return f"compiled C ({k.path})" if k is not None else f"PyTorch ({_why_not})"
