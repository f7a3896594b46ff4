"""``--device auto`` (the default of ``caption`` and ``translate``): the GPU where there is one, else the CPU, as
``attention-serve --accelerator auto`` and Lightning's trainers choose. torch is imported only for ``auto`` (a named
device costs nothing here), so ``--help`` stays fast."""

from __future__ import annotations

import argparse

AUTO = "auto"


def add_device_options(p: argparse.ArgumentParser, command: str, auto_also: str = "") -> None:
    """``--threads`` and ``--device`` (default ``auto``), as ``caption`` and ``translate`` both take them;
    ``auto_also``: what else ``auto`` decides for ``command`` (caption: "the batch and workers then suit it")."""
    p.add_argument(
        "--threads",
        type=int,
        help=f"torch CPU threads (default: one per core that other programs leave free when {command} starts: on a "
        "core kept busy, a thread stalls the others; OMP_NUM_THREADS is obeyed)",
    )
    also = f"; {auto_also}" if auto_also else ""
    p.add_argument("--device", default=AUTO, help=f"torch device: auto (the default: cuda where torch sees a GPU, "
                   f"else cpu{also}), cpu, cuda, cuda:1, ...")  # fmt: skip


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a CUDA GPU, else ``cpu``; any other name as given (checked where used)."""
    if name != AUTO:
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
