"""``translate --unsure``: each translation read back, and the words the model gave a probability under a threshold
(``--unsure-below``, default 0.1) named in one closing note and underlined on the --html page
(text_attn.core.unsure)."""

from __future__ import annotations

import argparse
from typing import Any

from text_attn.core.errors import fail
from text_attn.core.unsure import UNSURE, check_threshold

NAMED = 10  # the closing note names this many inputs, then counts the rest


def add_unsure_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unsure",
        action="store_true",
        help=f"read each translation back (the best one, with --n-best) and name the words the model gave a "
        f"probability under {UNSURE:g} (--unsure-below), given the words before them: one note at the end, on "
        "stderr, and with --html those words underlined, each token's probability on hover. The bundled "
        "Transformer on Multi30k val: 85%% of its words under 0.1 (3.4%% of its words) are not in the reference, "
        "against 17%% of those of 0.5 and more (benchmarks/word_confidence.py). The reading adds about a quarter "
        "to the time (Multi30k val: 0.26x the bundled Transformer's translating at its beam 8, 0.29x the GRU's; "
        "benchmarks/unsure_cost.py). With --given / --given-file: the words of the translation given",
    )
    p.add_argument(
        "--unsure-below",
        type=float,
        metavar="P",
        help=f"--unsure's threshold, a probability (default {UNSURE:g}); implies --unsure",
    )


def check_unsure(args: argparse.Namespace) -> None:
    """--unsure-below implies --unsure; after this, ``args.unsure`` is the threshold, or None without either. A
    threshold outside (0, 1] is one line, before the model loads."""
    below = args.unsure_below
    if below is not None:
        try:
            check_threshold(below, "--unsure-below")
        except ValueError as err:
            fail("translate", str(err))
    args.unsure = (UNSURE if below is None else below) if args.unsure or below is not None else None


def count_unsure(progress: dict[str, Any], n: int, translation: Any, below: float) -> None:
    """Count input ``n`` where its translation holds words under ``below``; the first NAMED with their words."""
    found = translation.unsure(below)
    if not found:
        return
    progress["unsure"] = progress.get("unsure", 0) + 1
    progress["unsure_words"] = progress.get("unsure_words", 0) + len(found)
    first = progress.setdefault("unsure_first", [])
    if len(first) < NAMED:
        first.append((n, found))


def unsure_note(progress: dict[str, Any], below: float) -> str | None:
    """The one closing note on the translations holding words the model was unsure of, or None."""
    count = progress.get("unsure", 0)
    if not count:
        return None
    first = progress["unsure_first"]

    def named(found: list[tuple[str, float]]) -> str:
        return ", ".join(f"{w} ({p:.2g})" for w, p in found)

    if count == 1:
        n, found = first[0]
        it = "it" if len(found) == 1 else "them"
        return f"input {n}: the model was unsure of {named(found)} (p < {below:g}): check {it}"
    shown = "; ".join(f"{n}: {named(found)}" for n, found in first)
    more = f"; and {count - len(first)} more" if count > len(first) else ""
    words = progress.get("unsure_words", 0)
    return (f"{count} translations hold {words} word(s) the model was unsure of (p < {below:g}), check them: inputs "
            f"{shown}{more}")  # fmt: skip
