"""The decoding options every generating command offers (``caption``, ``translate``): sampling, n-best lists and
n-gram blocking, as argparse flags -> keyword options of text_attn.core.decoding.search."""

from __future__ import annotations

import argparse
from typing import Any

from text_attn.core.errors import fail


def add_search_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding")
    g.add_argument("--sample", action="store_true", help="draw each word instead of searching (needs --beam-size 1)")
    g.add_argument("--temperature", type=float, default=1.0, help="--sample: divide the log-probabilities by this")
    g.add_argument("--top-k", type=int, default=0, help="--sample: draw from the k likeliest words (0: all)")
    g.add_argument("--top-p", type=float, default=1.0, help="--sample: draw from the nucleus of this probability")
    g.add_argument("--sample-seed", type=int, help="--sample: seed of the draws (default: a fresh one each run)")
    g.add_argument("--n-best", type=int, default=1, help="also report the N best hypotheses (N <= --beam-size)")
    g.add_argument("--no-repeat-ngram", type=int, default=0, help="never repeat an n-gram of this size (0: allowed)")


def check_search_options(prog: str, args: argparse.Namespace) -> None:
    """One line and exit 2 for options that cannot go together."""
    if args.sample and (args.beam_size > 1 or args.n_best > 1):
        fail(prog, "--sample draws one hypothesis: use it with --beam-size 1 and no --n-best")
    if not 1 <= args.n_best <= max(args.beam_size, 1):
        fail(prog, f"--n-best must be between 1 and --beam-size ({args.beam_size}), got {args.n_best}")
    if args.no_repeat_ngram < 0:
        fail(prog, f"--no-repeat-ngram must be 0 or more, got {args.no_repeat_ngram}")
    if args.temperature <= 0 or args.top_k < 0 or not 0 < args.top_p <= 1:
        fail(prog, "--temperature must be > 0, --top-k >= 0 and --top-p in (0, 1]")


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    from text_attn.core.decoding import Sampling

    options: dict[str, Any] = {"n_best": args.n_best, "no_repeat_ngram": args.no_repeat_ngram}
    if args.sample:
        options["sampling"] = Sampling(args.temperature, args.top_k, args.top_p, args.sample_seed)
    return options
