"""Networks built for loading: their random init skipped, so that a model file's load draws nothing at random and
fills every tensor once (the default build's init of the bundled captioner's two decoders cost ~0.1 s a load; its
encoder was copied twice, into its tensors and then to channels-last)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

Net = TypeVar("Net", bound=nn.Module)

# What a module's reset_parameters draws with: torch.nn.init's random fills (they pass through torch function modes
# themselves) and the tensor methods they and hand-written inits call. Deterministic fills (zeros_, constant_) stay.
_RANDOM_FILLS = frozenset(
    [getattr(nn.init, n) for n in ("uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_",
                                   "xavier_uniform_", "xavier_normal_", "orthogonal_", "sparse_")]
    + [getattr(torch._C.TensorBase, n) for n in ("uniform_", "normal_", "random_", "bernoulli_", "exponential_",
                                                 "geometric_", "cauchy_", "log_normal_")]
)  # fmt: skip


class _NoRandomFills(TorchFunctionMode):
    """While active (this thread only: torch function modes are thread-local), a random fill leaves its tensor as
    allocated and draws nothing; every other torch call runs as usual."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func in _RANDOM_FILLS:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


def built_uninitialised(build: Callable[[], Net]) -> Net:
    """``build()``'s network with its random init skipped (its tensors hold whatever their memory held), for a caller
    that loads every one of them next with a strict ``load_state_dict``. What the network computes rather than draws
    (the Transformer's sinusoid table, a LayerNorm's ones) is computed as usual. Not the meta device: a random fill
    there (Embedding's normal_) imports ~900 modules, ~2 s, the first time."""
    with _NoRandomFills():
        return build()


def allocate(net: nn.Module, conv_format: torch.memory_format = torch.contiguous_format) -> None:
    """Give each meta tensor of ``net`` uninitialised CPU memory of its shape (``to_empty`` does the same through
    torch._refs, whose first use imports ~1 s of modules). A tensor shared by two modules (tied weights) stays one
    tensor. ``conv_format``: the layout of 4-D parameters (channels_last: what the image encoder computes in, so the
    load's copy is the only one)."""
    made: dict[int, torch.Tensor] = {}
    for module in net.modules():
        for name, p in module._parameters.items():
            if p is not None:
                if id(p) not in made:
                    fmt = conv_format if p.dim() == 4 else torch.contiguous_format
                    made[id(p)] = nn.Parameter(torch.empty(p.shape, dtype=p.dtype, memory_format=fmt), p.requires_grad)
                module._parameters[name] = made[id(p)]
        for name, b in module._buffers.items():
            if b is not None:
                if id(b) not in made:
                    made[id(b)] = torch.empty(b.shape, dtype=b.dtype)
                module._buffers[name] = made[id(b)]
