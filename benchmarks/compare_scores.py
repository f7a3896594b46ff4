"""Is A better than B, or is the difference the test set's luck? Two runs' ``--scores`` files (``caption
--references FILE --scores A.json``, or ``translate --references FILE --scores A.json``) on the same inputs, compared
with a paired bootstrap (text_attn/core/paired_bootstrap.py): each score of A and B with its own 95% interval (to
set beside a fixed number, a paper's), A - B with its 95% interval over the draws, the share of draws in which A is
ahead, and a verdict: "within noise" where the interval of A - B holds 0.

    caption ../shared/data/flickr8k/Flicker8k_Dataset --split test --references REFS --scores a.json  # one model
    caption ... --model b.pt --scores b.json                                                          # the other
    python benchmarks/compare_scores.py a.json b.json --json docs/compare_x.json

Captions: coco-caption's BLEU-1..4, CIDEr-D and ROUGE-L, scored as the file was (its "how": with Java, the PTB
tokenizer); no METEOR (its corpus score is not a sum of the sentences'). Translations: sacreBLEU and chrF, with the
tokenizer and case the file's signature names. Each score recomputed from the file's texts must equal the file's own:
a line says so. The interval covers which test items were drawn, not another training run (another seed).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_attn.core.errors import new_file, positive_int  # noqa: E402


class ScoresFileError(ValueError):
    """A --scores file that cannot be read or compared: one line (benchmarks/_runs.BAD_INPUT)."""


def read_scores(path: Path) -> dict:
    """A --scores file as caption or translate wrote it; its kind under "kind" ("caption" or "translate")."""
    from _runs import read_json  # benchmarks/ is on sys.path

    data = read_json(path, ScoresFileError)
    kinds = [k for k, items in (("caption", "per_photo"), ("translate", "per_sentence")) if isinstance(data, dict)
             and isinstance(data.get(items), list) and data[items]]  # fmt: skip
    if not kinds:
        raise ScoresFileError(f"{path}: not a --scores file of caption or translate (no per_photo or per_sentence)")
    data["kind"] = kinds[0]
    return data


def _items(data: dict, path: Path) -> dict:
    """id -> the item's record: a photo by its image path, a sentence by its input number."""
    key = "image" if data["kind"] == "caption" else "input"
    records = data["per_photo" if data["kind"] == "caption" else "per_sentence"]
    try:
        return {r[key]: r for r in records}
    except (KeyError, TypeError):
        raise ScoresFileError(f"{path}: an item without its {key!r}") from None


def paired_items(a: dict, b: dict, pa: Path, pb: Path) -> tuple[list, dict, dict]:
    """The ids both files score, in one order, and each file's records; refused unless the same items against the
    same references."""
    if a["kind"] != b["kind"]:
        raise ScoresFileError(f"{pa} holds {a['kind']} scores but {pb} {b['kind']} scores")
    ia, ib = _items(a, pa), _items(b, pb)
    only_a, only_b = set(ia) - set(ib), set(ib) - set(ia)
    what = "photos" if a["kind"] == "caption" else "sentences"
    if only_a or only_b:
        raise ScoresFileError(f"{pa} and {pb} score different {what}: {len(only_a)} only in the first (e.g. "
                              f"{sorted(map(str, only_a))[:1]}), {len(only_b)} only in the second "
                              f"(e.g. {sorted(map(str, only_b))[:1]}); compare runs on the same inputs")  # fmt: skip
    refs = "references" if a["kind"] == "caption" else "reference"
    for k in ia:
        if ia[k].get(refs) != ib[k].get(refs):
            raise ScoresFileError(f"{pa} and {pb} score {k} against different references")
    return sorted(ia, key=str), ia, ib


def caption_stats(data: dict, ids: list, records: dict, path: Path):
    """coco-caption's counts of a caption run's photos (score_stats.coco_item_stats), tokenized as the file was."""
    from captioning.commands.caption_scores import scored_texts
    from text_attn.core.metrics import java_available
    from text_attn.core.score_stats import coco_item_stats

    ptb = "its PTB tokenizer" in str(data.get("how", ""))  # caption_scores.scores: "... (no Java: no PTB tokenizer"
    if ptb and not java_available():
        raise ScoresFileError(f"{path} was scored with coco-caption's PTB tokenizer, which needs Java: install a "
                              "Java runtime (java on PATH), or score both runs again here without it")  # fmt: skip
    captions = {k: records[k]["caption"] for k in ids}
    refs, hyps = scored_texts(captions, {k: records[k]["references"] for k in ids}, ptb=ptb)
    order, stats = coco_item_stats(refs, hyps, ptb=ptb)
    assert order == ids  # coco_prepared keeps the references' order
    return stats


def translation_stats(data: dict, ids: list, records: dict):
    """sacreBLEU's and chrF's counts of a translation run's sentences, with the tokenizer and case its signature
    names (``tok:13a``, ``case:lc``)."""
    from text_attn.core.score_stats import sacre_item_stats

    signature = str(data.get("signature", ""))
    tok = re.search(r"tok:([^|;\s]+)", signature)
    return sacre_item_stats([records[k]["reference"] for k in ids], [records[k]["translation"] for k in ids],
                            tokenize=tok.group(1) if tok else "13a", lowercase="case:lc" in signature)  # fmt: skip


def recomputed_note(name: str, path: Path, data: dict, stats) -> str | None:
    """A line where a score recomputed from the file's texts is not the file's own (to its 2 decimals)."""
    given = data.get("scores") if isinstance(data.get("scores"), dict) else {}
    off = [f"{k} {v:.2f} (the file: {given[k]:.2f})" for k, v in stats.corpus().items()
           if isinstance(given.get(k), (int, float)) and abs(v - given[k]) > 0.0051]  # fmt: skip
    return f"note: {name} ({path}) scored again here differs: {', '.join(off)}" if off else None


def table(names: tuple[str, str], diffs, items: int, what: str, resamples: int) -> list[str]:
    a, b = names
    lines = [f"A: {a}   B: {b}   ({items:,} {what}, paired bootstrap: {resamples:,} draws of the {what})", "",
             "| score | A [its 95% interval] | B [its] | A - B | its 95% interval | A ahead in | verdict |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for d in diffs:
        (a_low, a_high), (b_low, b_high) = d.a_range, d.b_range
        lines.append(f"| {d.name} | {d.a:.2f} [{a_low:.2f}, {a_high:.2f}] | {d.b:.2f} [{b_low:.2f}, {b_high:.2f}] | "
                     f"{d.delta:+.2f} | [{d.low:+.2f}, {d.high:+.2f}] | {d.a_ahead:.1%} | {d.verdict} |")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
    )  # fmt: skip
    p.add_argument("a", type=Path, help="A's --scores file (caption or translate)")
    p.add_argument("b", type=Path, help="B's, from a run on the same inputs and references")
    p.add_argument("--names", nargs=2, metavar=("A", "B"), help="what to call them in the table (default: the files)")
    p.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap draws (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0): the same seed, the same table")
    p.add_argument("--json", type=new_file, help="also write the table as JSON")
    args = p.parse_args(argv)

    from text_attn.core.paired_bootstrap import paired_bootstrap

    a, b = read_scores(args.a), read_scores(args.b)
    ids, ra, rb = paired_items(a, b, args.a, args.b)
    if a["kind"] == "caption":
        sa, sb = caption_stats(a, ids, ra, args.a), caption_stats(b, ids, rb, args.b)
    else:
        sa, sb = translation_stats(a, ids, ra), translation_stats(b, ids, rb)
    names = tuple(args.names or (str(args.a), str(args.b)))
    for name, path, data, stats in ((names[0], args.a, a, sa), (names[1], args.b, b, sb)):
        if note := recomputed_note(name, path, data, stats):
            print(note, file=sys.stderr)
    diffs = paired_bootstrap(sa, sb, args.resamples, args.seed)
    what = "photos" if a["kind"] == "caption" else "sentences"
    print("\n".join(table(names, diffs, len(ids), what, args.resamples)))
    if args.json:
        from _runs import record_json

        from text_attn.core.safe_files import write_text

        record = {"a": names[0], "b": names[1], "kind": a["kind"], "items": len(ids), "resamples": args.resamples,
                  "seed": args.seed, "scores": [{"name": d.name, "a": d.a, "b": d.b, "a_minus_b": d.delta,
                                                 "interval_95": [d.low, d.high], "a_ahead": d.a_ahead,
                                                 "a_interval_95": list(d.a_range), "b_interval_95": list(d.b_range),
                                                 "verdict": d.verdict} for d in diffs]}  # fmt: skip
        print(f"wrote {write_text(args.json, record_json(record))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
