"""``--version`` of every console script: ``PROG VERSION``, the installed attention-toolkit's version. Read only when
asked (importlib.metadata, no torch): a command's start and ``--help`` pay nothing for it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

PACKAGE = "attention-toolkit"


def toolkit_version() -> str:
    """The installed package's version; run from a checkout that is not installed, its pyproject.toml's, said so;
    else "unknown" with the reason (a copy of the code without its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return f"unknown ({PACKAGE} is not installed)"
    found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)
    if f'name = "{PACKAGE}"' in text and found:
        return f"{found.group(1)} (a checkout, not installed)"
    return f"unknown ({PACKAGE} is not installed)"


def version_line(prog: str) -> str:
    return f"{prog} {toolkit_version()}"


class _Version(argparse.Action):
    """argparse's "version" action, its text read when the option is given, not when the parser is built."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):  # noqa: A002
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version_line(parser.prog))
        parser.exit()


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``PROG VERSION`` and exit 0."""
    parser.add_argument("--version", action=_Version, help="print the command's name and the toolkit's version, exit")


def answer_version_first(prog: str, argv: list[str]) -> None:
    """``PROG --version`` alone, answered before a command imports what its other work needs (the trainers:
    Lightning, ~10 s); their parsers list the option in --help."""
    if argv[:1] == ["--version"]:
        print(version_line(prog))
        raise SystemExit(0)
