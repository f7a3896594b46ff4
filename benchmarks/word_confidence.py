"""What does a word's probability say? The words of translations read by ``translate --given-file`` (each word's
probability given the words before it), binned by that probability, with the share of each bin's words that the
reference translation does not hold (lowercased, punctuation stripped): a word the model gave a low probability is
more often one the reference did not use.

    translate < val.de > own.txt                                  # the model's own translations
    translate --given-file own.txt < val.de > read.txt            # read back: each word's probability
    python benchmarks/word_confidence.py read.txt val.en [--json out.json]

"Not in the reference" is a rough mark of a wrong word (a synonym counts as one), and the same for every bin: the
bins are compared with each other, not taken as error rates.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_attn.core.errors import new_file  # noqa: E402

BINS = ((0.0, 0.05), (0.05, 0.1), (0.1, 0.2), (0.2, 0.5), (0.5, 1.0))  # [lo, hi); the last holds 1.0 too


class ReadLinesError(ValueError):
    """A --given-file output or a reference file this benchmark cannot read: one line (benchmarks/_runs.BAD_INPUT)."""


def plain(word: str) -> str:
    """A word as compared with the reference's: lowercased, without punctuation but inner apostrophes and hyphens."""
    return re.sub(r"[^\w'-]", "", word.lower()).strip("'-")


def read_lines(path: Path) -> list[str]:
    """A text file's lines, gzipped or not."""
    try:
        data = path.read_bytes()
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    except FileNotFoundError:
        raise ReadLinesError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, EOFError) as err:
        raise ReadLinesError(f"{path}: not a text file ({err})") from None
    return text.splitlines()


def readings(path: Path) -> list[tuple[int, list[str], list[float]]]:
    """``translate --given-file``'s lines: (input number, the translation's words, each word's probability)."""
    out = []
    for k, line in enumerate(read_lines(path), 1):
        parts = line.split("\t")
        try:
            number, words, probs = int(parts[0]), parts[2].split(), [float(p) for p in parts[3].split()]
        except (IndexError, ValueError):
            raise ReadLinesError(
                f"{path}: line {k} is not a translate --given-file line (N, score, text, probabilities)"
            ) from None
        if len(probs) != len(words) + 1:  # each word's, then the end's
            raise ReadLinesError(f"{path}: line {k} has {len(probs)} probabilities for {len(words)} words and the end")
        out.append((number, words, probs[:-1]))
    return out


def binned(read: list[tuple[int, list[str], list[float]]], references: list[str]) -> list[dict]:
    """Per bin: the words in it, and how many of them the input's reference does not hold."""
    for number, _, _ in read:
        if number > len(references):
            raise ReadLinesError(f"input {number} has no reference line ({len(references)} lines)")
    return bin_words(
        (words, probs, {plain(w) for w in references[number - 1].split()}) for number, words, probs in read
    )


def bin_words(items) -> list[dict]:
    """Per bin (:data:`BINS`): the words in it, and how many of them are not held; ``items``: (words, each word's
    probability, the set of words held (``plain``)), one per output. Punctuation alone is not counted."""
    rows = [{"from": lo, "to": hi, "words": 0, "not_in_reference": 0} for lo, hi in BINS]
    for words, probs, held in items:
        for word, p in zip(words, probs, strict=True):
            if not plain(word):  # punctuation alone: nothing to compare
                continue
            row = next(r for r in rows if p < r["to"] or r["to"] == 1.0)
            row["words"] += 1
            row["not_in_reference"] += plain(word) not in held
    for r in rows:
        r["share"] = r["not_in_reference"] / r["words"] if r["words"] else None
    return rows


def main(argv: list[str] | None = None) -> int:
    from _runs import markdown_table, record_json

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("read", type=Path, help="translate --given-file's output (the model's own translations read back)")
    p.add_argument("references", type=Path, help="the reference translations, a line per input (gzipped or not)")
    p.add_argument("--json", type=new_file, help="write the rows here")
    args = p.parse_args(argv)
    read = readings(args.read)
    if not read:
        raise ReadLinesError(f"{args.read}: no lines")
    rows = binned(read, read_lines(args.references))
    total = sum(r["words"] for r in rows)
    print(f"{args.read.name}: {len(read):,} translations, {total:,} words, by the probability the model gave each")
    cells = [[f"{r['from']:g}-{r['to']:g}", f"{r['words']:,}", f"{r['words'] / max(total, 1):.1%}",
              f"{r['share']:.1%}" if r["words"] else "–"] for r in rows]  # fmt: skip
    print(markdown_table(["probability", "words", "share of the words", "not in the reference"], cells))
    if args.json:
        args.json.write_text(record_json({"read": str(args.read), "references": str(args.references), "rows": rows}))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
