"""``--device auto`` (the default of ``caption`` and ``translate``): the GPU where there is one, else the CPU, as
``attention-serve --accelerator auto`` and Lightning's trainers choose. torch is imported only for ``auto`` (a named
device costs nothing here), so ``--help`` stays fast."""

from __future__ import annotations

AUTO = "auto"


def resolve_device(name: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a CUDA GPU, else ``cpu``; any other name as given (checked where used)."""
    if name != AUTO:
        return name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
