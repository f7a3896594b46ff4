"""Command-line entry point ``translate``: sentences in, translations (and attention grids) out, through the
Translator inference object (no Lightning)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from text_attn.core.errors import fail


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="translate",
        description="Translate sentences with a text model file written by `text-train fit` or `text-export`. "
        "Sentences come from the arguments, or one per line from stdin.",
    )
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read lines from stdin)")
    p.add_argument(
        "--model",
        required=True,
        help="model file (model.pt written at the end of `text-train fit`, or by `text-export` from a checkpoint)",
    )
    p.add_argument("--beam-size", type=int, default=1, help="beam width; 1 = greedy (default: 1)")
    p.add_argument("--length-penalty", type=float, default=0.0, help="rank beams by score / length**this (default: 0)")
    p.add_argument("--max-len", type=int, default=None, help="longest output (default: 2 x source + 10)")
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="write the attention grid (source across, output down); with several sentences, PNG gets -1, -2, ...",
    )
    p.add_argument(
        "--layer",
        type=int,
        default=-1,
        help="Transformer: decoder layer whose cross-attention heads --plot draws (0-based; default -1: last)",
    )
    return p


def _plot(path: Path, tr, layer: int) -> Path:
    from text_attn.translation.plots import plot_alignment, plot_alignment_heads

    src = [*tr.source, "<eos>"]
    attn = tr.attention
    if attn.dim() == 3:  # (T, H, S): one layer's heads
        title = "cross-attention, last decoder layer" if layer == -1 else f"cross-attention, decoder layer {layer}"
        return plot_alignment_heads(attn.transpose(0, 1), src, tr.tokens, path, title=title)
    return plot_alignment(attn, src, tr.tokens, path)


def translate_main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.beam_size < 1:
        fail("translate", f"--beam-size must be at least 1, got {args.beam_size}")
    from text_attn.core.modelfile import ModelFileError
    from text_attn.translation.translator import Translator

    try:
        translator = Translator.load(args.model)
    except ModelFileError as exc:
        fail("translate", str(exc))
    if hasattr(translator.net, "set_plot_layer"):  # the Transformer: which layer's cross-attention to return
        try:
            translator.net.set_plot_layer(args.layer)
        except ValueError as exc:
            fail("translate", str(exc))
    lines = args.sentences if args.sentences else [line.rstrip("\n") for line in sys.stdin]
    if not lines:
        fail("translate", "no input: give sentences as arguments or on stdin")
    failed = 0
    todo = []
    for n, line in enumerate(lines, 1):
        if not translator.tokenize(line):
            print(f"translate: error: input {n}: empty sentence", file=sys.stderr)
            failed += 1
        else:
            todo.append((n, line))
    results = []
    for b in range(0, len(todo), 64):
        chunk = todo[b : b + 64]
        outs = translator.translate([t for _, t in chunk], args.beam_size, args.length_penalty, args.max_len)
        results += list(zip([n for n, _ in chunk], outs, strict=True))
    for n, tr in results:
        if tr.unknown:
            print(f"translate: note: input {n}: unknown word(s) {', '.join(tr.unknown)} read as <unk>", file=sys.stderr)
        print(tr.text)
    if args.plot:
        if results and results[0][1].attention is None:
            print("translate: note: this model has no attention to plot", file=sys.stderr)
        else:
            base = Path(args.plot)
            for k, (_, tr) in enumerate(results, 1):
                path = base if len(results) == 1 else base.with_name(f"{base.stem}-{k}{base.suffix or '.png'}")
                print(f"wrote {_plot(path, tr, args.layer)}", file=sys.stderr)
    return 1 if failed else 0
