"""Do the bundled translators' attention weights align words? Scored against gold links set by hand.

    python benchmarks/alignment_error.py --multi30k-root ../shared/data/multi30k --json docs/alignment_error.json

The gold: benchmarks/data/multi30k_val_alignments.txt, the first 100 German -> English pairs of Multi30k's val split
aligned by hand (sure and possible links, Och & Ney 2003). Each model reads each pair's English sentence as given
(``translate --given-file``'s forced reading) and its links are read off as ``translate --alignments`` reads them
(text_attn.translation.alignments.links): from the attention of each Transformer decoder layer (its heads averaged,
and each head alone), of the GRU, and from the leave-one-out evidence (``--align-by evidence``). Beside them: the
diagonal (word j of n linked to word round(j m / n) of m: no model at all) and a statistical word aligner trained on
Multi30k's 29,000 train pairs and these 100 (IBM Model 2 with fast_align's diagonal prior, both directions and
grow-diag-final-and; benchmarks/_word_aligner.py). Scores: AER, precision and recall over the 100 pairs
(text_attn.core.metrics.alignment_error). Two choices are checked by a bootstrap over the pairs (1,000 resamples):
how often the penultimate layer beats the last, and evidence beats attention.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import check_corpus, existing_file, text_model  # noqa: E402

from text_attn.core.errors import new_file, positive_int  # noqa: E402

GOLD = ROOT / "benchmarks" / "data" / "multi30k_val_alignments.txt"

Links = list[set[tuple[int, int]]]


def diagonal(sources: list[str], targets: list[str]) -> Links:
    """Target word j of n linked to source word round(j m / n) of m (the last where that runs past it)."""
    out = []
    for s, t in zip(sources, targets, strict=True):
        m, n = len(s.split()), len(t.split())
        out.append({(min(m - 1, round(j * m / n)), j) for j in range(n)})
    return out


def model_links(translator, sources: list[str], targets: list[str], log) -> dict[str, tuple[Links, float]]:
    """Per way of reading links off the model: the links of every pair and the seconds they took. A Transformer:
    each decoder layer's heads averaged ("layer L"), each head ("layer L head H"), and the evidence; an RNN: its
    attention and the evidence."""
    import torch

    from text_attn.translation.alignments import links, words_of
    from text_attn.translation.explain import translation_evidence

    net = translator.net
    layers = range(len(net.decoder_layers)) if hasattr(net, "set_plot_layer") else [None]
    out: dict[str, tuple[Links, float]] = {}
    for layer in layers:
        if layer is not None:
            net.set_plot_layer(layer)
        t0 = time.perf_counter()
        read = [translator.read([s], t)[0] for s, t in zip(sources, targets, strict=True)]
        seconds = time.perf_counter() - t0
        for tr, s, t in zip(read, sources, targets, strict=True):  # the gold counts space-separated words
            words = (len(words_of(translator, tr.source)[0]), len(words_of(translator, tr.tokens)[0]))
            if words != (len(s.split()), len(t.split())):
                raise SystemExit(f"alignment_error: the model's words differ from the line's: {s!r} / {t!r}")
        name = "attention" if layer is None else f"attention, layer {layer}"
        out[name] = ([set(links(translator, tr)) for tr in read], seconds)
        if layer is not None:
            for h in range(read[0].attention.size(1)):
                rows = [tr.attention[:, h] for tr in read]  # (T, S + 1) one head's
                out[f"{name} head {h}"] = ([set(links(translator, tr, r)) for tr, r in zip(read, rows, strict=True)],
                                           seconds)  # fmt: skip
        log(f"{name}: {seconds:.1f} s")
    if layers != [None]:
        net.set_plot_layer(-1)
    t0 = time.perf_counter()
    found = []
    with torch.no_grad():
        for s, t in zip(sources, targets, strict=True):
            tr = translator.read([s], t)[0]
            ev = translation_evidence(translator, list(tr.source), list(tr.tokens))
            found.append(set(links(translator, tr, ev.evidence)))
    out["evidence (leave-one-out)"] = (found, time.perf_counter() - t0)
    log(f"evidence: {out['evidence (leave-one-out)'][1]:.1f} s")
    return out


def bootstrap(a: Links, b: Links, sure: Links, possible: Links, rounds: int = 1000) -> float:
    """The share of resamples of the pairs (with replacement, seeded) in which ``a`` has the lower AER."""
    from text_attn.core.metrics import alignment_error

    rng = random.Random(0)
    n, wins, scored = len(a), 0, 0
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        s, p = [sure[i] for i in idx], [possible[i] for i in idx]
        try:
            first, second = (alignment_error([m[i] for i in idx], s, p)["aer"] for m in (a, b))
        except ValueError:  # a resample of no links to score (no sure link, nothing predicted): neither wins
            continue
        wins, scored = wins + (first < second), scored + 1
    return wins / scored if scored else 0.5


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--multi30k-root", type=Path, default=ROOT.parent / "shared" / "data" / "multi30k",
                   help="Multi30k (train and val .de/.en[.gz]; default: ../shared/data/multi30k)")  # fmt: skip
    p.add_argument("--gold", type=existing_file, default=GOLD, help="gold links, a line per val pair from the first")
    p.add_argument("--first-line", type=positive_int, default=1,
                   help="the val line the gold file's first line links (lines count from 1; default 1)")  # fmt: skip
    p.add_argument("--limit", type=positive_int, help="score the first N gold pairs only (default: all)")
    p.add_argument("--iterations", type=positive_int, default=5, help="EM iterations of the statistical aligner")
    p.add_argument("--transformer", type=text_model, default="transformer",
                   help="the Transformer's model file (default: the bundled)")  # fmt: skip
    p.add_argument("--bahdanau", type=text_model, default="bahdanau",
                   help="the GRU's model file (default: the bundled)")  # fmt: skip
    p.add_argument("--skip-baselines", action="store_true", help="the models' rows only (no aligner training)")
    p.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--json", type=new_file, help="write every row here")
    args = p.parse_args(argv)
    # the val pairs always, train's for the aligner: before the aligner trains, named by the option
    for split in ("val",) if args.skip_baselines else ("val", "train"):
        check_corpus(p, "--multi30k-root", args.multi30k_root, split, "de", "en")

    import torch
    from _multi30k import read_pair
    from _word_aligner import grow_diag_final_and, train_both

    from text_attn.core.metrics import alignment_error
    from text_attn.translation.alignments import read_gold
    from text_attn.translation.translator import Translator

    torch.set_num_threads(args.threads)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    # everything read and checked before the work: these were tracebacks after minutes of rows
    try:
        gold = read_gold(args.gold)[: args.limit]
    except (ValueError, OSError, UnicodeDecodeError) as err:
        p.error(f"--gold {args.gold}: {' '.join(str(err).split())[:300]}")
    sure, possible = [s for s, _ in gold], [p for _, p in gold]
    sources, targets = read_pair(args.multi30k_root, "val", "de", "en", args.first_line - 1 + len(gold))
    if len(sources) < args.first_line - 1 + len(gold):
        p.error(f"--first-line {args.first_line}: val has {len(sources):,} lines, and the gold file links "
                f"{len(gold):,} from there")  # fmt: skip
    sources, targets = sources[args.first_line - 1 :], targets[args.first_line - 1 :]
    translators = {}
    for model, source in (("bahdanau", args.bahdanau), ("transformer", args.transformer)):
        try:
            translators[model] = Translator.load(source)
        except (OSError, ValueError, RuntimeError) as err:  # a model file that is not one: ModelFileError
            p.error(f"--{model} {source}: {err}")
        if (model == "transformer") != hasattr(translators[model].net, "set_plot_layer"):
            want = "a Transformer" if model == "transformer" else "an RNN with attention"
            p.error(f"--{model} {source}: not {want}, as its rows need")
    rows: dict[str, dict] = {}

    def add(name: str, found: Links, seconds: float | None = None) -> None:
        rows[name] = {k: round(100 * v, 1) for k, v in alignment_error(found, sure, possible).items()}
        rows[name]["seconds"] = None if seconds is None else round(seconds, 1)
        rows[name]["links"] = found

    if not args.skip_baselines:
        add("diagonal (no model)", diagonal(sources, targets))
        train_src, train_tgt = read_pair(args.multi30k_root, "train", "de", "en")
        t0 = time.perf_counter()
        forward, backward = train_both(train_src + sources, train_tgt + targets, args.iterations)
        fit = time.perf_counter() - t0
        log(f"statistical aligner: trained on {len(train_src) + len(sources):,} pairs in {fit:.0f} s")
        fw = [forward.align(s.split(), t.split()) for s, t in zip(sources, targets, strict=True)]
        bw = [{(i, j) for j, i in backward.align(t.split(), s.split())} for s, t in zip(sources, targets, strict=True)]
        add("IBM Model 2 + diagonal prior, de -> en", fw, fit / 2)
        add("IBM Model 2 + diagonal prior, en -> de", bw, fit / 2)
        add("IBM Model 2, grow-diag-final-and", [grow_diag_final_and(f, b) for f, b in zip(fw, bw, strict=True)], fit)
    for model, translator in translators.items():
        said = lambda msg, model=model: log(f"{model}: {msg}")  # noqa: E731
        for name, (found, seconds) in model_links(translator, sources, targets, said).items():
            add(f"{model}: {name}", found, seconds)
    layer_rows = [n for n in rows if n.startswith("transformer: attention, layer") and " head " not in n]
    penultimate, last = layer_rows[-2], layer_rows[-1]  # the bundled Transformer has 3 decoder layers
    checks = {
        "transformer: penultimate layer beats the last": bootstrap(
            rows[penultimate]["links"], rows[last]["links"], sure, possible
        ),
        "transformer: evidence beats the penultimate layer": bootstrap(
            rows["transformer: evidence (leave-one-out)"]["links"], rows[penultimate]["links"], sure, possible
        ),
        "bahdanau: evidence beats attention": bootstrap(
            rows["bahdanau: evidence (leave-one-out)"]["links"], rows["bahdanau: attention"]["links"], sure, possible
        ),
    }  # fmt: skip
    n_sure, n_possible = sum(map(len, sure)), sum(map(len, possible))
    given = (("bahdanau", args.bahdanau), ("transformer", args.transformer))
    named = "".join(f"; {m}: {f}" for m, f in given if m != f)  # a model file other than the bundled one
    lines = f"lines {args.first_line}-{args.first_line + len(gold) - 1}"
    print(f"{len(gold)} Multi30k val pairs ({lines}), {n_sure:,} sure and {n_possible:,} possible links (set by "
          f"hand){named}")  # fmt: skip
    print("| links read from | AER | precision | recall | seconds |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        if " head " in name:
            continue
        sec = "–" if r["seconds"] is None else f"{r['seconds']:g}"
        print(f"| {name} | {r['aer']} | {r['precision']} | {r['recall']} | {sec} |")
    heads = {n: r for n, r in rows.items() if " head " in n}
    best = min(heads, key=lambda n: heads[n]["aer"])
    print(f"best single head: {best} (AER {heads[best]['aer']}); the worst: "
          f"{max(heads, key=lambda n: heads[n]['aer'])} (AER {max(r['aer'] for r in heads.values())})")  # fmt: skip
    for what, share in checks.items():
        print(f"bootstrap, 1,000 resamples of the pairs: {what} in {share:.1%}")
    if args.json:
        for name, r in rows.items():  # each pair's links as a Pharaoh line (a head's: its scores only)
            links = r.pop("links")
            if " head " not in name:
                r["links"] = [" ".join(f"{i}-{j}" for i, j in sorted(x)) for x in links]
        result = {"pairs": len(gold), "first_line": args.first_line, "sure": n_sure, "possible": n_possible,
                  "bahdanau": args.bahdanau, "transformer": args.transformer, "rows": rows,
                  "bootstrap": checks}  # fmt: skip
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
