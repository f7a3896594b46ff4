"""A run record beside an output file (``FILE.run.json``): the model file's content and the options that shape what
the file holds, so that ``--resume`` refuses to continue FILE with another model or other options. Shared by
``caption --jsonl`` (captioning.commands.caption_run) and ``translate --output`` / ``--jsonl``
(text_attn.translation.translate_resume): each says which options it records and words its own lines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from text_attn.core.safe_files import write_text

SUFFIX = ".run.json"


def run_file(output: str | Path) -> Path:
    return Path(f"{output}{SUFFIX}")


def record_run(output: str | Path, settings: dict[str, Any]) -> None:
    """FILE.run.json written (replaced atomically) for this run."""
    write_text(run_file(output), json.dumps(settings, indent=1) + "\n")


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path``; None where there is none. ValueError (naming ``path``) for a torn or hand-edited one;
    OSError where it cannot be read."""
    if not path.is_file():
        return None
    # what to do, as the other refusals say it (the line said only what was wrong)
    fix = "remove it to --resume without comparing this run's options with that run's"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:  # UnicodeDecodeError is a ValueError too
        raise ValueError(f"{path} is not a run record ({err}): {fix}") from None
    if not (isinstance(old, dict) and isinstance(old.get("options", {}), dict)):  # edited by hand: not ours
        raise ValueError(f"{path} is not a run record: {fix}")
    return old


def differences(
    old: dict[str, Any], new: dict[str, Any], skip: Iterable[str] = (), worded: dict[str, Callable] | None = None
) -> list[str]:
    """What tells ``new`` from ``old``, a phrase each ("--beam-size 5 (this run: 3)", "another model file (...)");
    the options in ``skip`` are the caller's to word; ``worded``: per option, its value as the command line gives it
    ("--unsure", "--unsure-below 0.5": the record's --unsure holds the threshold, "--unsure 0.1" no one typed)."""
    said, skip, worded = [], set(skip), worded or {}
    if old.get("model_sha256") != new["model_sha256"]:
        said.append(f"another model file ({old.get('model', '?')}; this run: {new['model']})")
    was, now = old.get("options", {}), new["options"]
    for flag in dict.fromkeys([*was, *now]):
        # not given either way (a record of before a flag holds none of it) was "not given (this run: not given)"
        if (
            flag in skip
            or was.get(flag) == now.get(flag)
            or all(v is None or v is False for v in (was.get(flag), now.get(flag)))
        ):
            continue
        if flag in worded:
            said.append(f"{worded[flag](was.get(flag))} (this run: {worded[flag](now.get(flag))})")
        else:
            said.append(f"{flag} {shown(was.get(flag))} (this run: {shown(now.get(flag))})")
    if len(said) > 1 and said[0].startswith("another model file"):  # "--beam-size 5 (this run: 3)" no one typed:
        said[0] = said[0][:-1] + "; each decodes as its file records where no option is given)"  # their defaults
    return said


def shown(value: Any) -> str:
    return "not given" if value is None or value is False else "given" if value is True else json.dumps(value)
