"""A package's public names, each imported on first use (PEP 562): ``import captioning`` or ``import text_attn``
imports no torch, so a command's ``--help`` stays fast, and ``from captioning import Captioner`` still works."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(namespace: dict[str, Any], public: dict[str, str]) -> tuple[Callable, Callable]:
    """(``__getattr__``, ``__dir__``) for a package whose ``namespace`` (its globals) lists ``public``: name -> the
    module that defines it. A name is imported once, then kept in the namespace."""

    def __getattr__(name: str) -> Any:
        if name not in public:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(public[name]), name)
        namespace[name] = value  # loaded once
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *public})

    return __getattr__, __dir__
