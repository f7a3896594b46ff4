"""The decoding options every generating command offers (``caption``, ``translate``): sampling, n-best lists and
n-gram blocking, as argparse flags -> keyword options of text_attn.core.decoding.search."""

from __future__ import annotations

import argparse
from typing import Any

from text_attn.core.errors import fail


def sample_seed(text: str) -> int:
    """An integer torch can seed a generator with (-2**63 to 2**64 - 1): a larger one ended the run in a traceback
    after its outputs had been opened."""
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer from -2**63 to 2**64 - 1, got {text}")
    return value


# what the same --sample-seed repeats each input's draws across, in each command's own options
SEED_REPEATS = {
    "caption": "(keyed by its photo's name) at any --batch-size, --devices, --workers and in a --resume",
    "translate": "(keyed by its number) at any --batch-size",
}
# where no seed is drawn for a run (text_attn/core/drawn_seed.py): each process would draw its own
SEED_NOT_DRAWN = {
    "caption": "; none is drawn with --num-nodes, or --devices under another launcher: give one",
    "translate": "",
}
PICTURES = {"caption": "--overlay, --html", "translate": "--plot, --html"}  # each command's pictures and pages


def add_search_options(p: argparse.ArgumentParser) -> None:
    """The decoding options of ``p.prog`` (``caption`` or ``translate``)."""
    g = p.add_argument_group("decoding")
    g.add_argument("--sample", action="store_true", help="draw each word instead of searching (one hypothesis: beam 1)")
    g.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="--sample: divide the log-probabilities by this (default: 1.0, as the model gives them)",
    )
    g.add_argument(
        "--top-k", type=int, default=0, help="--sample: draw from the k likeliest words (0: all; default: 0)"
    )
    g.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="--sample: draw from the nucleus of this probability (default: 1.0, all the words)",
    )
    g.add_argument(
        "--sample-seed",
        type=sample_seed,
        help="--sample: seed of the draws (default: one drawn for the run and said in a note, so that --sample-seed N "
        f"draws the same again; a --resume goes on with the seed its run records{SEED_NOT_DRAWN[p.prog]}); the same "
        f"seed repeats each input's draws {SEED_REPEATS[p.prog]}; another --threads may flip a rare one (float "
        "rounding)",
    )
    g.add_argument(
        "--n-best",
        type=int,
        help="also report the N best hypotheses (N <= --beam-size), best first: N lines an input (translate: "
        "number, score, translation, ended or cut; caption: score, caption, ended or cut, the path first with "
        "several images), and in the --json / --jsonl records; each says whether it ended or --max-len cut it off; "
        "a hypothesis the search could not find is left out; pictures and pages "
        f"({PICTURES[p.prog]}) draw the best (default: 1, the best alone in the usual output; --n-best 1 typed writes "
        "it in a list's form, with its score)",
    )
    g.add_argument(
        "--no-repeat-ngram",
        type=int,
        help="never repeat an n-gram of this size (0: allowed; default: the model file's choice, else 0)",
    )


def fill_decoding_defaults(args: argparse.Namespace, info: dict[str, Any], beam_size: int = 3) -> None:
    """--beam-size / --length-penalty / --no-repeat-ngram left out (None): the model file's recorded choice
    (``info["decoding"]``, chosen on validation data), else ``beam_size``, no length penalty and no n-gram blocking;
    --sample draws one hypothesis (beam 1)."""
    from text_attn.core.modelfile import decoding_defaults

    chosen = decoding_defaults(info)
    args.length_penalty_given = args.length_penalty is not None  # typed (check_search_options' note), not recorded
    # --n-best given, even 1: a list is asked for (translate's lines then carry number and score whatever N is)
    args.n_best_given = args.n_best is not None
    if args.n_best is None:
        args.n_best = 1
    # the beam the model file chose, not one typed: check_search_options says where a value it refuses came from
    args.recorded_beam = args.beam_size is None and not args.sample and "beam_size" in chosen
    if args.beam_size is None:
        args.beam_size = 1 if args.sample else chosen.get("beam_size", beam_size)
    if args.length_penalty is None:
        args.length_penalty = chosen.get("length_penalty", 0.0)
    if args.no_repeat_ngram is None:
        args.no_repeat_ngram = chosen.get("no_repeat_ngram", 0)


def check_search_options(prog: str, args: argparse.Namespace, words: int | None = None, model: str = "") -> str | None:
    """One line and exit 2 for options that cannot go together (after :func:`fill_decoding_defaults`). ``words``: the
    model's output vocabulary; more beams than words is refused (a mistyped 100000 filled the memory instead). A beam
    the model file recorded (no --beam-size given) is refused as the file's, not as a flag the user never typed;
    ``model``: that file's name for the line. Returns the note for the caller to print (once a run) on an option
    given that changes no output (text_attn.core.unread_options), else None."""
    recorded = getattr(args, "recorded_beam", False)
    if args.beam_size < 1:
        fail(prog, f"--beam-size must be at least 1, got {args.beam_size}")
    if words is not None and args.beam_size > words:
        if recorded:  # a model file's info written by hand (caption-export refuses such a decoding)
            whose = f"{model}: its recorded decoding's" if model else "the model file's recorded"
            fail(prog, f"{whose} beam size {args.beam_size} is more than the model's {words} words: give --beam-size "
                 f"(at most {words})")  # fmt: skip
        fail(prog, f"--beam-size {args.beam_size} is more than the model's {words} words: at most {words}")
    if args.length_penalty < 0:
        fail(prog, f"--length-penalty must be 0 or more, got {args.length_penalty}")
    if args.sample and (args.beam_size > 1 or args.n_best > 1):
        fail(prog, "--sample draws one hypothesis: use it with --beam-size 1 and --n-best 1 (or no --n-best)")
    if not 1 <= args.n_best <= max(args.beam_size, 1):
        if recorded and args.n_best > 1:
            fail(prog, f"--n-best {args.n_best} is more than the beam size the model file records ({args.beam_size}): "
                 f"give --beam-size too, at least {args.n_best}")  # fmt: skip
        fail(prog, f"--n-best must be between 1 and --beam-size ({args.beam_size}), got {args.n_best}")
    if args.no_repeat_ngram < 0:
        fail(prog, f"--no-repeat-ngram must be 0 or more, got {args.no_repeat_ngram}")
    if args.temperature <= 0:  # each named with its value: one line that listed all three left the reader to find it
        fail(prog, f"--temperature must be more than 0, got {args.temperature:g}")
    if args.top_k < 0:
        fail(prog, f"--top-k must be 0 or more, got {args.top_k}")
    if not 0 < args.top_p <= 1:
        fail(prog, f"--top-p must be more than 0 and at most 1, got {args.top_p:g}")
    given = [flag for flag, value, default in (("--temperature", args.temperature, 1.0), ("--top-k", args.top_k, 0),
             ("--top-p", args.top_p, 1.0), ("--sample-seed", args.sample_seed, None)) if value != default]  # fmt: skip
    if given and not args.sample:  # a setting of the sampler without the sampler: the search would ignore it
        verb = "applies" if len(given) == 1 else "apply"
        fail(prog, f"{', '.join(given)} only {verb} with --sample (draw each word instead of searching)")
    if getattr(args, "length_penalty_given", False) and args.beam_size == 1:  # a note: the scores still change
        return length_penalty_note("--length-penalty", "--sample draws" if args.sample else "beam 1 keeps")
    return None


def n_best_ending(truncated: bool) -> str:
    """An --n-best line's last column (caption's and translate's): whether the hypothesis ended, or --max-len (the
    length cap) cut it off."""
    return "cut" if truncated else "ended"


def length_penalty_note(option: str, one: str) -> str:
    """What a length penalty given beside a search of one hypothesis does, in one wording for the commands and
    attention-serve (``option``: the penalty's name there, ``--length-penalty`` or ``length_penalty``; ``one``: what
    keeps one hypothesis, "beam 1 keeps" or "beam_size 1 keeps")."""
    what = "it changes no output, only the scores reported"
    return f"{option} ranks the hypotheses of a beam; {one} one hypothesis: {what}"


def search_flags_given(args: argparse.Namespace) -> list[str]:
    """The options of the search given on the command line (before ``fill_decoding_defaults``): what a command that
    reads a text someone wrote instead of searching (``--given``) refuses beside it."""
    given = {
        "--beam-size": getattr(args, "beam_size", None) is not None,
        "--length-penalty": getattr(args, "length_penalty", None) is not None,
        "--no-repeat-ngram": args.no_repeat_ngram is not None,
        "--sample": args.sample,
        "--n-best": args.n_best is not None,
    }
    return [flag for flag, on in given.items() if on]


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    from text_attn.core.decoding import Sampling

    options: dict[str, Any] = {"n_best": args.n_best, "no_repeat_ngram": args.no_repeat_ngram}
    if args.sample:
        options["sampling"] = Sampling(args.temperature, args.top_k, args.top_p, args.sample_seed)
    if getattr(args, "cuda_graphs", False):  # caption's: the search at fixed shapes, captured (fixed_search)
        options["capture"] = True
    return options
