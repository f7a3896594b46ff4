"""How well does a model translate the sentences holding words its training text never had, or had rarely? A
``translate --references FILE --scores A.json`` file split by its sentences' rarest word: how often the model's
training source text has that word (its model file's word profile, text_attn/translation/source_check.py), each
group's corpus chrF and sacreBLEU (the file's own tokenizer and case).

    translate --references val.en --scores val.json < val.de
    python benchmarks/unseen_words.py val.json                      # the bundled Transformer's profile
    python benchmarks/unseen_words.py val.json --model model.pt --json out.json

The "never" row is what ``translate``'s note and ``Translation.unseen_words`` name: a word translated from its pieces.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_attn.core.errors import new_file  # noqa: E402

# the rarest word's count in the training text: a group's bounds (inclusive)
GROUPS = (("never", 0, 0), ("1-2", 1, 2), ("3-5", 3, 5), ("6-20", 6, 20), ("more than 20", 21, math.inf))


class UnseenFileError(ValueError):
    """A scores file or model this benchmark cannot read: one line (benchmarks/_runs.BAD_INPUT)."""


def training_counts(check: dict) -> dict[str, int]:
    """Each profiled word's count in the training text, back from its add-half smoothed log-probability
    (source_check.word_profile: log((n + 0.5) / total), the floor log(0.5 / total))."""
    words = check["words"]
    total = 0.5 / math.exp(words["floor"])
    return {w: max(1, round(math.exp(lp) * total - 0.5)) for w, lp in words["logp"].items()}


def rarest(counts: dict[str, int], line: str) -> int | None:
    """The training count of the rarest word of ``line`` (0: one never seen; None: no words)."""
    from text_attn.translation.source_check import words_of

    found = words_of(line)
    return min(counts.get(w, 0) for w in found) if found else None


def grouped(items: list[dict], counts: dict[str, int], signature: str) -> list[dict]:
    """The rows: each group's sentences, share, corpus chrF and sacreBLEU (x 100) with the file's tokenizer and case."""
    from sacrebleu.metrics import BLEU, CHRF

    lowercase = "case:lc" in signature
    tok = next((part[4:] for part in signature.split("|") if part.startswith("tok:")), "13a")
    rows = []
    for name, lo, hi in GROUPS:
        group = [i for i in items if (n := rarest(counts, i["source"])) is not None and lo <= n <= hi]
        if not group:
            rows.append({"group": name, "sentences": 0, "share": 0.0, "chrf": None, "sacrebleu": None})
            continue
        hyps, refs = [i["translation"] for i in group], [[i["reference"] for i in group]]
        rows.append({"group": name, "sentences": len(group), "share": len(group) / len(items),
                     "chrf": CHRF(lowercase=lowercase).corpus_score(hyps, refs).score,
                     "sacrebleu": BLEU(tokenize=tok, lowercase=lowercase).corpus_score(hyps, refs).score})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    from _runs import markdown_table, read_json, record_json

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scores", type=Path, help="a translate --references FILE --scores OUT file")
    p.add_argument("--model", default="transformer", help="the model that wrote it (a file, or a bundled name)")
    p.add_argument("--json", type=new_file, help="write the rows here")
    args = p.parse_args(argv)
    data = read_json(args.scores, UnseenFileError)
    items = data.get("per_sentence") if isinstance(data, dict) else None
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(i, dict) and {"source", "translation", "reference"} <= set(i) for i in items)
    ):
        raise UnseenFileError(f"{args.scores}: not a translate --scores file (no per_sentence with sources)")
    from text_attn.translation.source_check import WORDS
    from text_attn.translation.translator import Translator

    check = Translator.load(args.model).source_check or {}
    if not isinstance(check.get("words"), dict):
        raise UnseenFileError(f"{args.model}: its model file has no word profile (made before 2026-12, or synthetic)")
    if len(check["words"]["logp"]) >= WORDS:
        print(f"unseen_words: note: the profile is full ({WORDS:,} words): a word missing from it may be rare, not "
              "unseen", file=sys.stderr)  # fmt: skip
    rows = grouped(items, training_counts(check), str(data.get("signature", "")))
    print(f"{args.scores.name}: {len(items):,} sentences by their rarest word's count in the training text")
    cells = [[r["group"], f"{r['sentences']:,}", f"{r['share']:.1%}",
              *([f"{r['chrf']:.2f}", f"{r['sacrebleu']:.2f}"] if r["sentences"] else ["–", "–"])]
             for r in rows]  # fmt: skip
    print(markdown_table(["rarest word seen in training", "sentences", "share", "chrF", "sacreBLEU"], cells))
    if args.json:
        args.json.write_text(record_json({"scores": str(args.scores), "model": str(args.model), "rows": rows}))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
