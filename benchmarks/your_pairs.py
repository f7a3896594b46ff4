"""Teaching the bundled German -> English Transformer pairs of another kind (configs/text/your_pairs.yaml): what it
buys on held-out sentences of that kind, and what it costs on Multi30k, the text the model learned from. Prints a
markdown table, a few sentences before and after, and writes its JSON; about 15 minutes on 2 CPU cores. The fit is
kept (``fit_seconds.txt`` beside its model): run again with the same ``--out`` and it is scored, not fitted again.

    python benchmarks/your_pairs.py --ding /usr/share/trans/de-en --multi30k-root ../shared/data/multi30k \\
        --out runs/your_pairs_bench --json docs/your_pairs.json

The pairs of another kind: the example sentences of Ding's German-English dictionary (Debian's ``trans-de-en``
package: ``apt-get install trans-de-en``, GPL-2+; read where it is installed, never copied into the repository):
everyday speech, idioms and questions ("Ich bin sprachlos." -> "I don't know what to say."), where Multi30k holds
descriptions of photographs. A line ``German :: English`` whose entries (``|``) are sentences gives a pair each: the
first of ``;``-separated variants, notes in ``{}``, ``[]``, ``()`` and ``/.../`` dropped; sentences with ``/``
alternatives or ``etw.`` / ``jdm.`` placeholders left out, and each German sentence once. A seeded shuffle holds out
``--test-size`` pairs to score; the rest is the TSV a user would give, of which the config holds out its val pairs
(``--data.val_size``) to choose the epoch. Both models translate with the decoding the bundled model file records
(beam 5, length penalty 1), scored with sacreBLEU and chrF (sacrebleu's defaults, the text as written).

``--mix N`` adds a row: the same pairs with N of Multi30k's training pairs among them (a seeded sample, appended to a
second TSV, fitted the same way): what keeping some of the old text in the mix saves of Multi30k, and what it costs on
the new text. The val pairs are cut out of that TSV as a user's would be, so they hold both kinds. With ``--blend``,
that fit is blended back too, at each W.

``--blend W ...`` adds a row for each W: the taught model's weights blended back towards the bundled model's, W of the
taught and 1 - W of the bundled (``text-export --average transformer --weights W 1-W``; Wortsman et al. 2022's WiSE-FT):
no training, only an export. Its training time is the taught fit's.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

from text_attn.core.errors import at_least, new_file, positive_int

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _multi30k import read_pair  # noqa: E402
from _runs import StageError, console_script, markdown_table, record_json, run_stage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "text" / "your_pairs.yaml"
# short sentences of neither corpus, each model's translation shown (the bundled model's weakness: short input)
PROBES = ["Ein Hund.", "Guten Morgen!", "Wie geht es dir?", "Ich habe keine Zeit.", "Das Wetter ist schön."]
NOTES = re.compile(r"\{[^}]*\}|\[[^\]]*\]|\([^)]*\)|/[^/]*/")


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", NOTES.sub(" ", text)).strip()


def ding_sentences(path: Path) -> list[tuple[str, str]]:
    """(German, English) sentence pairs of a Ding dictionary file, in its order (see the module's doc)."""
    seen: set[str] = set()
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or " :: " not in line:
                continue
            de, en = line.rstrip("\n").split(" :: ", 1)
            des, ens = de.split(" | "), en.split(" | ")
            if len(des) != len(ens):  # entries not paired one to one
                continue
            for d, e in zip(des, ens, strict=True):
                d, e = _clean(d.split(";")[0]), _clean(e.split(";")[0])
                if not re.search(r"[.!?]$", d) or not e or len(d.split()) < 2 or not d[0].isupper() or d in seen:
                    continue
                if "/" in d + e or re.search(r"\b(etw|jdm|jdn|jds|sth|sb)\.", d + " " + e):
                    continue
                seen.add(d)
                out.append((d, e))
    return out


def _multi30k(root: Path, split: str) -> list[tuple[str, str]]:
    """Multi30k's ``split`` (test_2016_flickr, train) as (German, English) pairs, read as training reads them."""
    sources, references = read_pair(root, split, "de", "en")
    return list(zip(sources, references, strict=True))


def _fit(tsv: Path, fitted: Path, stage: str, args: argparse.Namespace) -> float:
    """``your_pairs.yaml`` fitted on ``tsv`` into ``fitted`` (its model.pt); its seconds, kept in fit_seconds.txt: a
    fit kept from an earlier run with the same --out is not fitted again."""
    took = fitted / "fit_seconds.txt"
    if not (took.is_file() and (fitted / "model.pt").is_file()):
        cmd = [console_script("text-train"), "fit", "--config", str(CONFIG), "--data.path", str(tsv),
               "--data.val_size", str(args.val_size), "--data.test_size", "1", "--trainer.default_root_dir",
               str(fitted), "--model.export_path", str(fitted / "model.pt")]  # fmt: skip
        if args.epochs is not None:
            cmd += ["--trainer.max_epochs", str(args.epochs)]
        fitted.mkdir(parents=True, exist_ok=True)
        took.write_text(f"{run_stage(stage, cmd, fitted):.1f}\n")
    return float(took.read_text())


def _score(model: str | Path, pairs: list[tuple[str, str]]) -> dict:
    """``model`` translating ``pairs``' sources with its recorded decoding: sacreBLEU, chrF, seconds, translations."""
    from text_attn.core.metrics import text_scores
    from text_attn.translation.translator import Translator

    tr = Translator.load(model)
    t0 = time.perf_counter()
    said = []
    for start in range(0, len(pairs), 64):
        said += [t.text for t in tr.translate([s for s, _ in pairs[start : start + 64]])]
    seconds = time.perf_counter() - t0
    scores = text_scores([r for _, r in pairs], said)
    return {"sacreBLEU": scores["sacrebleu"], "chrF": scores["chrf"], "seconds": seconds, "translations": said}


def _blends(args: argparse.Namespace, fitted: Path, stem: str, what: str, seconds: float, stage: str) -> list[tuple]:
    """The rows of ``fitted`` blended back towards the bundled model at each --blend W (``text-export --average
    transformer --weights W 1-W`` into OUT/STEM_W.pt, logged as the stage "your_pairs: STAGE W"; ``what``: the fit, as
    its rows name it): exports of the fit, its training ``seconds`` theirs."""
    rows = []
    for w in args.blend:
        blended = args.out / f"{stem}_{w:g}.pt"
        cmd = [console_script("text-export"), str(fitted), str(blended), "--average", "transformer",
               "--weights", f"{w:g}", f"{1 - w:g}"]  # fmt: skip
        run_stage(f"your_pairs: {stage} {w:g}", cmd, args.out)
        rows.append((f"{what}, blended {w:g} with the bundled", blended, seconds))
    return rows


def run(args: argparse.Namespace) -> dict:
    pairs = ding_sentences(args.ding)
    if len(pairs) <= args.test_size + args.val_size:
        raise StageError(f"--ding {args.ding} gives {len(pairs)} sentence pairs: too few for --test-size "
                         f"{args.test_size} and --val-size {args.val_size}")  # fmt: skip
    random.Random(args.seed).shuffle(pairs)
    test, train = pairs[: args.test_size], pairs[args.test_size :]
    if args.train_size:  # a smaller folder of pairs (a quick run): its first ones after the shuffle
        train = train[: args.train_size + args.val_size]
    args.out.mkdir(parents=True, exist_ok=True)
    tsv = args.out / "pairs.tsv"  # what a user gives: German<TAB>English a line
    tsv.write_text("".join(f"{d}\t{e}\n" for d, e in train), encoding="utf-8")
    multi30k = _multi30k(args.multi30k_root, "test_2016_flickr") if args.multi30k_root else None
    models = [("the bundled Transformer, as it is", "transformer", 0.0)]
    taught = args.out / "fit" / "model.pt"
    seconds = _fit(tsv, taught.parent, "your_pairs: the bundled Transformer taught the pairs", args)
    models.append(("taught the pairs (your_pairs.yaml)", taught, seconds))
    models += _blends(args, taught, "blend", "taught", seconds, "blended")
    if args.mix:
        pool = _multi30k(args.multi30k_root, "train")
        if args.mix > len(pool):
            raise StageError(f"--mix {args.mix}: Multi30k's train holds {len(pool):,} pairs")
        kept = random.Random(args.seed).sample(pool, args.mix)
        mixed = args.out / "pairs_mixed.tsv"
        mixed.write_text("".join(f"{d}\t{e}\n" for d, e in train + kept), encoding="utf-8")
        name = f"taught the pairs with {args.mix:,} of Multi30k's"
        fitted = args.out / f"fit_mix{args.mix}"
        took = _fit(mixed, fitted, f"your_pairs: {name}", args)
        models.append((name, fitted / "model.pt", took))
        # the mixed fit blended back too: does what mixing kept leave a blend anything to add?
        models += _blends(args, fitted / "model.pt", f"blend_mix{args.mix}", f"taught with {args.mix:,} of Multi30k's",
                          took, "mixed, blended")  # fmt: skip
    rows = {}
    for name, path, seconds in models:
        row = {"ding": _score(path, test), "train_minutes": seconds / 60}
        if multi30k is not None:
            row["multi30k"] = _score(path, multi30k)
        row["probes"] = _score(path, [(p, p) for p in PROBES])["translations"]
        rows[name] = row
        print(f"{name}: Ding test sacreBLEU {row['ding']['sacreBLEU']:.2f}", flush=True)
    return {"pairs": len(pairs), "train_pairs": len(train) - args.val_size, "val_pairs": args.val_size,
            "test_pairs": len(test), "multi30k_test": len(multi30k) if multi30k else 0, "mix": args.mix,
            "blend": args.blend, "seed": args.seed,
            "test": [{"source": d, "reference": e} for d, e in test[: args.examples]], "rows": rows}  # fmt: skip


def table(result: dict) -> str:
    multi = bool(result["multi30k_test"])
    header = ["model", "Ding test sacreBLEU", "Ding test chrF"]
    header += ["Multi30k test sacreBLEU", "Multi30k test chrF"] if multi else []
    lines = []
    for name, r in result["rows"].items():
        cells = [name, f"{r['ding']['sacreBLEU']:.2f}", f"{r['ding']['chrF']:.2f}"]
        cells += [f"{r['multi30k']['sacreBLEU']:.2f}", f"{r['multi30k']['chrF']:.2f}"] if multi else []
        lines.append([*cells, f"{r['train_minutes']:.1f} min" if r["train_minutes"] else "none"])
    return markdown_table([*header, "training"], lines)


def examples(result: dict) -> str:
    """A few held-out sentences and the probes, each model's translation under the source."""
    names = list(result["rows"])
    out = []
    for k, pair in enumerate(result["test"]):
        out.append(f"{pair['source']}  (reference: {pair['reference']})")
        out += [f"  {name}: {result['rows'][name]['ding']['translations'][k]}" for name in names]
    for k, probe in enumerate(PROBES):
        out.append(probe)
        out += [f"  {name}: {result['rows'][name]['probes'][k]}" for name in names]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ding", type=Path, default=Path("/usr/share/trans/de-en"),
                   help="Ding's German-English dictionary (Debian: trans-de-en): %(default)s")  # fmt: skip
    p.add_argument("--multi30k-root", type=Path, help="Multi30k (its test_2016_flickr): the cost on the model's own")
    p.add_argument("--out", type=Path, default=Path("runs/your_pairs_bench"), help="the fit, the TSV and logs")
    p.add_argument("--test-size", type=positive_int, default=1000,
                   help="pairs held out to score (default: %(default)s)")  # fmt: skip
    p.add_argument("--val-size", type=int, default=500, help="pairs the fit validates on (default: %(default)s)")
    p.add_argument("--train-size", type=at_least(0), default=0, help="pairs to train on (default 0: every one left)")
    p.add_argument("--epochs", type=positive_int, help="trainer.max_epochs (default: the config's)")
    p.add_argument("--mix", type=int, default=0,
                   help="a row more: N of Multi30k's training pairs mixed in (needs --multi30k-root)")  # fmt: skip
    p.add_argument("--blend", type=float, nargs="+", default=[], metavar="W",
                   help="a row each: the taught weights blended W with the bundled's 1-W (0 < W < 1)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="the shuffle that holds out the test pairs")
    p.add_argument("--examples", type=at_least(0), default=5,
                   help="held-out sentences printed before and after (default 5; 0: none)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="write the results here")
    args = p.parse_args(argv)
    if not args.ding.is_file():
        p.error(f"--ding {args.ding}: no such file (Debian: apt-get install trans-de-en)")
    if any(not 0 < w < 1 for w in args.blend):
        p.error(f"--blend {' '.join(f'{w:g}' for w in args.blend)}: each the taught model's share, between 0 and 1")
    if args.mix < 0 or (args.mix and args.multi30k_root is None):
        p.error(f"--mix {args.mix}: a number of Multi30k's training pairs, with --multi30k-root to read them from")
    result = run(args)
    said = (f"Ding's sentences: {result['pairs']:,} pairs; {result['train_pairs']:,} to train on, "
            f"{result['val_pairs']} to validate, {result['test_pairs']} held out to score")  # fmt: skip
    if result["multi30k_test"]:
        said += f"; Multi30k test_2016_flickr: {result['multi30k_test']:,}"
    if result["mix"]:
        said += f"; {result['mix']:,} of Multi30k's training pairs mixed in for the rows that say so"
    print(f"\n{said}\n\n{table(result)}\n\n{examples(result)}")
    if args.json:  # the scores and the example sentences' translations (not all 2,000 a model)
        for row in result["rows"].values():
            for scored in (row["ding"], row.get("multi30k")):
                if scored is not None:
                    scored["translations"] = scored["translations"][: args.examples]
        args.json.write_text(record_json(result))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
