"""A guard against host syncs: ``with no_host_sync(): ...`` raises :class:`HostSyncError` at the first PyTorch
operation that would make the host wait for the device, or whose output size depends on the data.

Why: work captured as a CUDA graph (torch.cuda.make_graphed_callables, ``torch.compile(mode="reduce-overhead")``)
replays kernels without Python, so it may not read a value back (``.item()``, ``if tensor:``) nor produce a tensor
whose size only the data knows (``nonzero``, boolean-mask indexing); and outside a graph each such read stalls the
launch queue, the cost that keeps a small-kernel loop launch-bound on a GPU. The check runs on any device, a CPU
included: the operations are seen at the dispatcher (a ``TorchDispatchMode``), before any device runs them, so a test
without a GPU can tell what would sync on one. On the ``meta`` device (tensors without data) a model takes the
branches it takes on a GPU wherever the code asks ``device.type == "cpu"``.

What is refused (the operation's aten name and the reason are in the message):
- reading a value to the host: ``aten._local_scalar_dense``, which ``.item()``, ``bool()``, ``int()``, ``float()``,
  ``.tolist()`` and ``if tensor:`` call; ``aten.equal`` (a Python bool);
- data-dependent output sizes: ``nonzero`` (``torch.where(cond)``, ``argwhere``), ``masked_select``, every ``unique``,
  ``bincount``, ``repeat_interleave`` with tensor counts and no ``output_size``, indexing or index assignment with a
  boolean mask (``x[mask]``, ``x[mask] = v``);
- operations that check their input on the host: ``multinomial`` (PyTorch validates the probabilities with
  ``.item()``; draw with ``(p / torch.empty_like(p).exponential_()).argmax(-1)`` instead: the same samples);
- copies between the host and a device: ``.cpu()``, ``.to("cuda")`` of a host tensor, ``.tolist()``, ``.numpy()``,
  and ``torch.tensor`` / ``as_tensor`` / ``asarray`` of Python data with a device other than the CPU.

Not seen: work done outside PyTorch's dispatcher (a compiled kernel called through ``data_ptr``), and syncs hidden
inside a device kernel that this list does not name. A test under this guard is evidence, not proof; a capture on the
device is the proof.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


class HostSyncError(RuntimeError):
    """An operation under :func:`no_host_sync` would wait for the device or has a data-dependent size."""


# Operation packets refused whatever their arguments, with the reason.
_ALWAYS = {
    aten._local_scalar_dense: "reads a tensor's value to the host (.item(), bool(), int(), float(), if tensor:)",
    aten.equal: "returns a Python bool (a read to the host)",
    aten.allclose: "returns a Python bool (a read to the host)",
    aten.nonzero: "has a data-dependent output size (nonzero, torch.where(cond), argwhere)",
    aten.masked_select: "has a data-dependent output size",
    aten._unique: "has a data-dependent output size",
    aten._unique2: "has a data-dependent output size",
    aten.unique_dim: "has a data-dependent output size",
    aten.unique_consecutive: "has a data-dependent output size",
    aten.unique_dim_consecutive: "has a data-dependent output size",
    aten.bincount: "has a data-dependent output size (the largest value)",
    aten.multinomial: "checks its probabilities on the host (.item()); sample with exponential_ and argmax instead",
}
_INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
_COPIES = {aten._to_copy, aten.copy_, aten._copy_from}


def _packet(func) -> object:
    return getattr(func, "overloadpacket", func)


def _bool_index(indices) -> bool:
    return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def _host_and_device(a: torch.device, b: torch.device) -> bool:
    return (a.type == "cpu") != (b.type == "cpu")


def sync_reason(func, args: tuple, kwargs: dict) -> str | None:
    """Why the aten operation ``func`` on these arguments would sync the host, or None."""
    packet = _packet(func)
    if packet in _ALWAYS:
        return _ALWAYS[packet]
    if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
        return "takes its output size from the counts (give output_size)"
    if packet in _INDEXING and len(args) > 1 and _bool_index(args[1]):
        return "indexes with a boolean mask (a data-dependent size: nonzero)"
    if packet is aten._to_copy:
        device = kwargs.get("device")
        if device is not None and _host_and_device(args[0].device, torch.device(device)):
            return f"copies between {args[0].device} and {device}"
    elif packet in (aten.copy_, aten._copy_from) and len(args) > 1:
        dst, src = (args[0], args[1]) if packet is aten.copy_ else (args[1], args[0])
        if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor) and _host_and_device(src.device, dst.device):
            return f"copies from {src.device} to {dst.device}"
    return None


# Python-level calls that read to the host or copy host data to a device without an aten operation to show for it
_TO_HOST = {torch.Tensor.tolist: "tolist", torch.Tensor.numpy: "numpy", torch.Tensor.__array__: "__array__"}
_FROM_HOST = (torch.tensor, torch.as_tensor, torch.asarray)


class _NoHostSyncDispatch(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        why = sync_reason(func, args, kwargs)
        if why is not None:
            raise HostSyncError(f"{func} {why}")
        return func(*args, **kwargs)


class _NoHostSyncFunctions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _TO_HOST:
            raise HostSyncError(f"Tensor.{_TO_HOST[func]} reads a tensor's values to the host")
        if func in _FROM_HOST and args and not isinstance(args[0], torch.Tensor):
            device = kwargs.get("device")
            if device is not None and torch.device(device).type != "cpu":
                raise HostSyncError(f"torch.{func.__name__} copies Python data from the host to {device}")
        return func(*args, **kwargs)


@contextmanager
def no_host_sync() -> Iterator[None]:
    """Raise :class:`HostSyncError` at the first operation in the block that would sync the host with the device
    (module doc: what counts). Forward and backward alike: a ``loss.backward()`` inside the block is checked too."""
    with _NoHostSyncFunctions(), _NoHostSyncDispatch():
        yield
