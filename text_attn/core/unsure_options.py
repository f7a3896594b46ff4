"""``--unsure`` / ``--unsure-below`` as ``caption`` and ``translate`` share them: the options, the threshold checked,
the outputs holding words under it counted, and the one closing note naming the first of them
(text_attn.core.unsure)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from text_attn.core.errors import fail
from text_attn.core.unsure import check_threshold, named

NAMED = 10  # the closing note names this many outputs, then counts the rest


def add_unsure_options(p: argparse.ArgumentParser, help_text: str, default: float) -> None:
    p.add_argument("--unsure", action="store_true", help=help_text)
    p.add_argument(
        "--unsure-below",
        type=float,
        metavar="P",
        help=f"--unsure's threshold, a probability (default {default:g}); implies --unsure",
    )


def unsure_typed(default: float) -> Callable[[Any], str]:
    """A recorded --unsure threshold as the command line gives it: "no --unsure", "--unsure" (the default), or
    "--unsure-below P" (for a run record's refusals: text_attn.core.run_record.differences)."""

    def typed(threshold: Any) -> str:
        if threshold is None or threshold is False:
            return "no --unsure"
        return "--unsure" if threshold == default else f"--unsure-below {threshold:g}"

    return typed


def resolve_unsure(args: argparse.Namespace, command: str, default: float) -> None:
    """--unsure-below implies --unsure; after this, ``args.unsure`` is the threshold, or None without either. A
    threshold outside (0, 1] is one line, before the model loads."""
    below = getattr(args, "unsure_below", None)
    if below is not None:
        try:
            check_threshold(below, "--unsure-below")
        except ValueError as err:
            fail(command, str(err))
    asked = getattr(args, "unsure", False) or below is not None
    args.unsure = (default if below is None else below) if asked else None


def count_unsure(progress: dict[str, Any], name: str, found: Sequence) -> None:
    """Count output ``name`` ("input 3", a photo's name) where it holds words under the threshold (``found``: each
    (word, p)); the first NAMED with their words."""
    if not found:
        return
    progress["unsure"] = progress.get("unsure", 0) + 1
    progress["unsure_words"] = progress.get("unsure_words", 0) + len(found)
    first = progress.setdefault("unsure_first", [])
    if len(first) < NAMED:
        first.append((name, list(found)))


def unsure_note(progress: dict[str, Any], below: float, outputs: str) -> str | None:
    """The one closing note on the ``outputs`` ("translation(s)", "caption(s)") holding words the model was unsure
    of, or None. Without the first ones' names (several processes: each counted its own), the counts alone."""
    count = progress.get("unsure", 0)
    if not count:
        return None
    first = progress.get("unsure_first", [])
    if count == 1 and first:
        name, found = first[0]
        it = "it" if len(found) == 1 else "them"
        return f"{name}: the model was unsure of {named(found, below)} (p < {below:g}): check {it}"
    words = progress.get("unsure_words", 0)
    head = f"{count} {outputs} hold {words} word(s) the model was unsure of (p < {below:g}), check them"
    if not first:
        return f"{head}: the records' 'unsure' names them"
    shown = "; ".join(f"{name}: {named(found, below)}" for name, found in first)
    more = f"; and {count - len(first)} more" if count > len(first) else ""
    return f"{head}: {shown}{more}"
