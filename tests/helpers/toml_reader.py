"""A TOML reader for the tests that read pyproject.toml: Python 3.11's tomllib, or on 3.10 tomli (the same parser,
installed there with pytest); a skip only where neither is (the checks never ran on 3.10 otherwise)."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def toml_reader() -> ModuleType:
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    pytest.skip("reads pyproject.toml with tomllib (Python 3.11 on) or tomli: neither is installed")
