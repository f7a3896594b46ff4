"""The frozen encoder's folded body run by ONNX Runtime on a CPU: the same numbers (to float rounding), faster.

``caption`` spends about three quarters of its time in the encoder (docs/speed.md). ONNX Runtime's CPU kernels run
EfficientNet-Lite2's folded body (captioning.model.inference_encoder) at 260 px about 1.4x as fast as PyTorch's
channels-last oneDNN path on 2 threads (36 against 25.5 images/s, batch 16; features equal to a relative 3e-6). So a
frozen EfficientNet-Lite encoder without gradients, on the CPU, in float32 and outside autocast runs there when
``onnxruntime`` is installed (``caption``, and a training run's feature cache and validation); everything else
(gradients, the GPU, autocast, a fine-tuned encoder, another backbone) keeps PyTorch.

- The graph is exported once per folded weights, input size, library versions and code (TorchScript exporter; one file
  per input size, the batch left free) into ``$TEXT_ATTN_CACHE/onnx`` (default
  ``~/.cache/attention-toolkit/native/onnx``), the file named by a digest of them, written to a temporary file and
  renamed: one export (about 1 s for Lite2), then every process loads the file (0.2 s) and keeps its bytes. A file
  that does not load (damaged elsewhere) is exported again. The folder and a graph in it are used only when they
  belong to this user (or root) and no one else can write them (safe_files.untrusted_reason); otherwise the graph is
  exported into a private folder for this process, with one note. Where the folder cannot be made or written (a
  read-only HOME or mount) a graph already there is read (not marked used), and a missing one is exported into such a
  private folder: ``caption`` keeps ONNX Runtime. Each model file, input size and toolkit version makes a new graph
  (13-19 MB), so after an export the folder keeps the ``KEEP`` most recently used graphs (loading one marks it used)
  and removes the rest; a graph removed by another process's tidying is exported again.
- ``CAPTION_ONNX=0`` turns it off. Where onnxruntime is missing or does not load, the export fails or a session fails
  to start or run, PyTorch runs, for good for those weights and that size, and
  ``status()`` says why (benchmarks/speed.py prints it).
- ONNX Runtime's telemetry is off (``ORT_DISABLE_TELEMETRY=1`` before it is imported: :func:`_runtime`): a captioning
  run writes nothing under ``~/.cache/Microsoft`` and gets no warning of it on stderr.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import tempfile
import warnings
from pathlib import Path

import torch
from torch import nn

from text_attn.core.safe_files import cache_path, make_private_dirs, private_dir

_why_not = ""  # why the last encoder ran in PyTorch, for status()
_ran = False  # whether ONNX Runtime ran an encoder in this process
_silenced = False  # onnxruntime's telemetry and default logger set (_runtime)
_sessions: dict[tuple, object] = {}  # (graph file, threads) -> InferenceSession, shared by encoders in one process
FATAL = 4  # ONNX Runtime's log severity: verbose 0, info 1, warning 2, error 3, fatal 4
KEEP = 8  # graphs the cache folder keeps: the bundled model at its size, a few trained ones, and room to switch back


def _runtime():
    """onnxruntime, imported without its telemetry: on import it wrote a device ID under ~/.cache/Microsoft (or
    $XDG_CACHE_HOME) and, where it could not, printed a coloured warning on stderr, whatever NO_COLOR or the session's
    log level said. ``ORT_DISABLE_TELEMETRY=1`` (onnxruntime's own switch; a value the user set is kept) stops both;
    it is read at import, so it is set first. Its default logger then says fatal errors only, as the sessions do."""
    global _silenced
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    calls = (("disable_telemetry_events", ()), ("set_default_logger_severity", (FATAL,)))
    for call, value in () if _silenced else calls:
        if hasattr(onnxruntime, call):  # imported before this (by another library): no events, no warnings from now
            getattr(onnxruntime, call)(*value)
    _silenced = True  # once a process: _session asks for it every batch
    return onnxruntime


def enabled() -> bool:
    return os.environ.get("CAPTION_ONNX", "1") != "0"


def status() -> str:
    """One line: which library ran the frozen encoder last (ONNX Runtime, or PyTorch and why)."""
    if _ran:
        return f"ONNX Runtime {_runtime().__version__}"
    return f"PyTorch ({_why_not or 'no frozen EfficientNet-Lite encoder ran yet'})"


def cache_dir() -> Path:
    from text_attn.core.native import cache_dir as native_cache

    return native_cache() / "onnx"


def _code() -> str:
    """A digest of the code that builds what is exported (the encoder, its fold, this file): a changed graph after an
    update of the toolkit gets a new file, not the old one."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in ("encoder.py", "inference_encoder.py", "onnx_encoder.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def _versions() -> str:
    """What else shapes the graph: the exporter, the runtime, the EfficientNet-Lite package whose blocks it traces."""
    from importlib.metadata import PackageNotFoundError, version

    onnxruntime = _runtime()
    found = []
    for package in ("onnx", "efficientnet-lite-pytorch"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} ?")
    return f"torch {torch.__version__} onnxruntime {onnxruntime.__version__} " + " ".join(found)


def _digest(module: nn.Module, shape: tuple[int, int], what: str) -> str:
    h = hashlib.sha256(f"{shape}|{what}".encode())
    for name, value in module.state_dict().items():
        h.update(name.encode())
        h.update(value.detach().float().contiguous().reshape(-1).numpy().tobytes())
    return h.hexdigest()[:24]


def _export(module: nn.Module, shape: tuple[int, int], path: Path) -> None:
    make_private_dirs(path.parent)
    example = torch.zeros(1, 3, *shape).contiguous(memory_format=torch.channels_last)
    fd, tmp = tempfile.mkstemp(suffix=".onnx.part", dir=path.parent)
    os.close(fd)
    # the TorchScript exporter: torch >= 2.5 defaults to the dynamo one (it needs onnxscript), torch 2.4 has no choice
    choice = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on the traced paddings and the exporter's deprecation
            torch.onnx.export(
                module, (example,), tmp, input_names=["images"], output_names=["features"],
                dynamic_axes={"images": {0: "batch"}, "features": {0: "batch"}}, opset_version=17, **choice,
            )  # fmt: skip
        os.chmod(tmp, 0o644)  # mkstemp's file is private; the cache is readable like the native kernels' folder
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load_or_export(module: nn.Module, shape: tuple[int, int], path: Path) -> tuple[Path, bytes]:
    """Where the graph is and its bytes: the cache file's, exported first when it is not there (then the folder is
    tidied); exported into this process's private folder where the cache folder cannot be written."""
    if path.exists():
        try:
            _mark_used(path)
            return path, path.read_bytes()
        except FileNotFoundError:
            pass  # removed by another process's tidying just now: exported again
    path = _export_somewhere(module, shape, path)
    graph = path.read_bytes()
    prune(path.parent, keep=KEEP)
    return path, graph


def _mark_used(path: Path) -> None:
    """Used now: the tidying keeps the most recently used graphs. A cache someone shared or a read-only mount (EACCES,
    EPERM, EROFS) is read, not marked; FileNotFoundError: the file is gone."""
    try:
        os.utime(path)
    except FileNotFoundError:
        raise
    except OSError:
        pass


def _export_somewhere(module: nn.Module, shape: tuple[int, int], path: Path) -> Path:
    """_export to ``path``, or where its folder cannot be written (a read-only cache or HOME) into this process's
    private folder, as the native kernels are built (text_attn.core.native): the graph is then exported once a
    process, and ``caption`` still runs ONNX Runtime rather than the slower PyTorch encoder."""
    try:
        _export(module, shape, path)
        return path
    except OSError:
        path = private_dir() / path.name
        _export(module, shape, path)
        return path


def prune(folder: Path, keep: int = KEEP) -> None:
    """Remove all but the ``keep`` most recently used graphs of the folder. A folder that cannot be tidied
    (read-only, a file gone meanwhile) is left as it is: the cache still works."""
    try:
        graphs = sorted(folder.glob("encoder-*.onnx"), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in graphs[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def _session(path: Path, graph: bytes, threads: int):
    ort = _runtime()

    key = (str(path), threads)
    if key not in _sessions:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # as many as PyTorch uses: the same share of the machine
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # fatal only: a failing run's error (out of memory) is also raised, and said in the toolkit's one line; at
        # errors ONNX Runtime printed it first, in red, as a timestamped log line
        options.log_severity_level = FATAL
        # no busy-waiting for the next call: PyTorch's beam search runs between two batches on the same cores
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        _sessions[key] = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    return _sessions[key]


class OnnxBody:
    """Calls an exported folded body: (B, 3, H, W) float32 CPU tensor -> (B, D, h, w), as the module would."""

    def __init__(self, module: nn.Module, shape: tuple[int, int]) -> None:
        # the tap is part of the graph, not of the weights: a multiscale body and a plain stride-16 one share them
        what = f"{_versions()} tap {getattr(module, 'tap', None)} {_code()}"
        name = f"encoder-{_digest(module, shape, what)}.onnx"
        # a graph from a folder someone else can write could compute anything (features times zero: empty captions)
        try:
            path = cache_path(cache_dir(), name, "ONNX graph")
        except OSError:  # a cache folder that cannot be made (a read-only HOME): exported into a private one
            path = private_dir() / name
        self.shape = shape
        # the bytes are kept: a session for another thread count needs no file
        self.path, self.graph = _load_or_export(module, shape, path)
        try:
            _session(self.path, self.graph, torch.get_num_threads())  # now, so that a bad file shows here, not mid-run
        except Exception:  # a damaged file (this code writes whole files only): exported again, once
            with contextlib.suppress(OSError):  # a read-only cache keeps it: the new one goes to a private folder
                self.path.unlink(missing_ok=True)
            self.path = _export_somewhere(module, shape, self.path)
            self.graph = self.path.read_bytes()
            _session(self.path, self.graph, torch.get_num_threads())

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        global _ran
        session = _session(self.path, self.graph, torch.get_num_threads())
        _ran = True
        array = images.detach().contiguous().numpy()  # NCHW, as exported
        return torch.from_numpy(session.run(None, {"images": array})[0])


def pytorch_runs(reason: str) -> None:
    """Record that PyTorch runs the frozen encoder, and why (status())."""
    global _why_not, _ran
    _why_not, _ran = reason, False


def failed(what: str, error: BaseException) -> None:
    """pytorch_runs, the reason being what failed and the error's type and first line (if it has a message)."""
    first = (str(error).splitlines() or [""])[0][:200]  # an error without a message has no first line
    return pytorch_runs(f"{what}: {type(error).__name__}" + (f": {first}" if first else ""))


def why_not() -> str:
    """The reason recorded by the last pytorch_runs."""
    return _why_not


def onnx_body(module: nn.Module, shape: tuple[int, int]) -> OnnxBody | None:
    """The module run by ONNX Runtime for inputs of this (H, W), or None (status() says why)."""
    if not enabled():
        return pytorch_runs("CAPTION_ONNX=0")
    try:
        _runtime()
    except ImportError:
        return pytorch_runs("onnxruntime is not installed")
    except Exception as error:  # a broken install (a missing shared library, ...)
        return failed("onnxruntime does not load", error)
    try:
        return OnnxBody(module, shape)
    except Exception as error:  # an exporter that cannot trace this torch's graph: PyTorch is still right
        return failed("the ONNX export failed", error)
