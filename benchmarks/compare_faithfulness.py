"""Is one faithfulness number above another, or is it the luck of the inputs measured? Reads the JSON of
benchmarks/faithfulness.py and puts a 95% interval on each comparison its tables invite, drawing whole inputs (photos,
scenes, sentences: the words of one caption are not independent) with text_attn/core/faithfulness_bootstrap.py.

Two runs over the same inputs (two models, or one model before and after a change), each table they share:

    python benchmarks/compare_faithfulness.py docs/faithfulness_captioner_finetuned_48.json \\
        docs/faithfulness_captioner_frozen_48.json --table "ensemble of 2" --measures attention

One run, a ranking against another on the same words (attention against random by default; --against names another):

    python benchmarks/compare_faithfulness.py docs/faithfulness.json --table "Multi30k"

Each row: A's mean with its own 95% interval, B's, A - B with its interval over the draws, the share of draws with A
above, and a verdict: which is more faithful (deletion, most first: lower; least first and tau against leave-one-out:
higher; an intervention's total variation: just higher), or "within noise" where the interval of A - B holds 0. Two
runs are paired input by input in order (benchmarks/faithfulness.py takes the first N of the split): give runs of the
same --photos / --sentences / --scenes. The interval covers which inputs were drawn, not the random orders' draws (the
random ranking's mean is over --draws orders a word already) nor another training run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_attn.core.errors import new_file, positive_int  # noqa: E402


class FaithfulnessFileError(ValueError):
    """A faithfulness JSON that cannot be read or compared: one line (benchmarks/_runs.BAD_INPUT)."""


def read_tables(path: Path) -> list[dict]:
    """The tables (``families``) of a benchmarks/faithfulness.py JSON, each with its words."""
    from _runs import read_json  # benchmarks/ is on sys.path

    data = read_json(path, FaithfulnessFileError)
    tables = data.get("families") if isinstance(data, dict) else None
    if not isinstance(tables, list) or not all(isinstance(t, dict) and isinstance(t.get("words"), list)
                                               for t in tables):  # fmt: skip
        raise FaithfulnessFileError(f"{path}: not a JSON of benchmarks/faithfulness.py (no families with words)")
    return tables


def title(table: dict) -> str:
    return f"{table.get('name', '?')}: {table.get('removal', '?')}"


def chosen(tables: list[dict], text: str | None, path: Path) -> list[dict]:
    """The tables whose title holds ``text`` (all where None); refused where none does."""
    kept = [t for t in tables if text is None or text.lower() in title(t).lower()]
    if not kept:
        names = "; ".join(title(t) for t in tables)
        raise FaithfulnessFileError(f"{path}: no table's title holds {text!r} (its tables: {names})")
    return kept


def rows(pairs) -> list[str]:
    """The markdown rows of (Measure, Difference) pairs."""
    out = []
    for measure, d in pairs:
        (a_low, a_high), (b_low, b_high) = d.a_range, d.b_range
        out.append(f"| {measure.label} | {d.a:.3f} [{a_low:.3f}, {a_high:.3f}] | {d.b:.3f} [{b_low:.3f}, "
                   f"{b_high:.3f}] | {d.delta:+.3f} | [{d.low:+.3f}, {d.high:+.3f}] | {d.a_ahead:.1%} | "
                   f"{measure.verdict(d)} |")  # fmt: skip
    return out


HEADER = ["| measure | A [its 95% interval] | B [its] | A - B | its 95% interval | A above in | verdict |",
          "|---|---|---|---|---|---|---|"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )  # fmt: skip
    p.add_argument("a", type=Path, help="A: a JSON of benchmarks/faithfulness.py --json")
    p.add_argument("b", type=Path, nargs="?", help="B: another run's, over the same inputs (without it: rankings "
                   "of A's words against --against)")  # fmt: skip
    p.add_argument("--table", help="only the tables whose title holds this text (e.g. 'Multi30k', 'pixel space')")
    p.add_argument("--measures", nargs="+", metavar="NAME", help="with B: only these rankings or interventions "
                   "(e.g. attention uniform; default: every one both runs hold)")  # fmt: skip
    p.add_argument("--against", help="without B: the ranking every other is set against "
                   "(default random)")  # fmt: skip
    p.add_argument("--kind", choices=["all", "content", "function"], default="all", help="the words (default all)")
    p.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap draws (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0): the same seed, the same table")
    p.add_argument("--json", type=new_file, help="also write the rows as JSON")
    args = p.parse_args(argv)
    if args.b is not None and args.against is not None:
        p.error("--against sets one run's rankings against another: give one file, or --measures for two runs")
    if args.b is None and args.measures is not None:
        p.error("--measures picks what two runs compare: give B, or --against for one run's rankings")
    args.against = args.against or "random"
    from text_attn.core import faithfulness_bootstrap as fb

    lines, record = [], {"a": str(args.a), "b": str(args.b) if args.b else None, "kind": args.kind,
                         "resamples": args.resamples, "seed": args.seed, "tables": []}  # fmt: skip
    a_tables = chosen(read_tables(args.a), args.table, args.a)
    b_tables = {title(t): t for t in read_tables(args.b)} if args.b else None
    if args.measures:  # a name no table holds was dropped unsaid
        known = dict.fromkeys(m.source for t in a_tables for m in fb.measures_of(t["words"]))
        if unknown := [name for name in args.measures if name not in known]:
            raise FaithfulnessFileError(f"--measures {' '.join(unknown)}: not a measure of {args.a} (its measures: "
                                        f"{', '.join(known)})")  # fmt: skip
    for table in a_tables:
        try:
            if b_tables is not None:
                other = b_tables.get(title(table))
                if other is None and len(a_tables) == 1 and len(b_tables) == 1:
                    # one table each, titled by another name (a model given as a file): the runs to compare
                    other = next(iter(b_tables.values()))
                    print(f"note: comparing A's {title(table)!r} with B's {title(other)!r}", file=sys.stderr)
                if other is None:
                    print(f"note: {args.b} has no table {title(table)!r}: skipped", file=sys.stderr)
                    continue
                theirs = set(fb.measures_of(other["words"]))  # once: measures_of reads every word
                held = [m for m in fb.measures_of(table["words"]) if m in theirs]
                held = [m for m in held if args.measures is None or m.source in args.measures]
                if not held:
                    raise FaithfulnessFileError(
                        f"{title(table)}: no measure both runs hold"
                        + (f" among {' '.join(args.measures)}" if args.measures else "")
                    )
                pairs = fb.compare_runs(table["words"], other["words"], held, args.kind, args.resamples, args.seed)
                heading, against = f"A: {args.a}   B: {args.b}", None
            else:
                names = dict.fromkeys(n for w in table["words"] for n in (w.get("rankings") or {}))
                if args.against not in names:
                    raise FaithfulnessFileError(f"{title(table)}: no ranking {args.against!r} (its rankings: "
                                                f"{', '.join(names)})")  # fmt: skip
                pairs = [
                    pair
                    for name in names
                    if name != args.against
                    for pair in fb.compare_rankings(
                        table["words"], name, args.against, args.kind, args.resamples, args.seed
                    )
                ]
                heading, against = f"A: each ranking   B: {args.against}, on the same words   ({args.a})", args.against
        except fb.ItemsError as err:
            raise FaithfulnessFileError(f"{title(table)}: {err}") from None
        pairs = [(m, d) for m, d in pairs if d.a == d.a or d.b == d.b]  # a measure no word has (leave-one-out's tau)
        inputs = max(fb.word_items(table["words"]), default=-1) + 1
        lines += [
            f"\n### {title(table)} ({args.kind} words)\n",
            f"{heading}   ({inputs} inputs drawn whole, {args.resamples:,} draws)",
            "",
            *HEADER,
            *rows(pairs),
        ]
        record["tables"].append({"title": title(table), "inputs": inputs, "rows": [
            {"a": m.source, "b": against or m.source,
             "metric": m.metric, "a_mean": d.a, "b_mean": d.b, "a_minus_b": d.delta, "interval_95": [d.low, d.high],
             "a_above": d.a_ahead, "a_interval_95": list(d.a_range), "b_interval_95": list(d.b_range),
             "verdict": m.verdict(d)} for m, d in pairs]})  # fmt: skip
    if b_tables is not None and not record["tables"]:  # every table skipped: nothing compared, and exit 0
        raise FaithfulnessFileError(f"{args.a} and {args.b} have no table in common (A: "
                                    f"{'; '.join(title(t) for t in a_tables)}; B: {'; '.join(b_tables)})")  # fmt: skip
    print("\n".join(lines))
    if args.json:
        from _runs import record_json

        from text_attn.core.safe_files import write_text

        print(f"wrote {write_text(args.json, record_json(record))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
