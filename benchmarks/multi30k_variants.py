r"""Choose Multi30k settings on VALIDATION data: train a few variants of a shipped config for the same number of epochs
(or minutes) and compare their greedy val BLEU (tok.) after each epoch (never test).

    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family transformer --epochs 16
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family bahdanau --epochs 6
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --family bahdanau --minutes 25 \
        --variants shipped,wide
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --parallel 4         # on a GPU
    python benchmarks/multi30k_variants.py --data-root ../shared/data/multi30k --epochs 1 -- --data.train_size 500

``--family transformer``: configs/text/multi30k_de_en_transformer.yaml's learning-rate schedules (peak rate,
warm-up, batch size, pre-norm); ``--family bahdanau``: configs/text/multi30k_de_en_bahdanau.yaml's RNN settings (GRU or
LSTM, sizes, dropout, label smoothing, subword vocabulary). Each variant is ``text-train fit --config CONFIG`` with
its overrides (below), for --epochs epochs (the shipped config's time cap lifted) or --minutes minutes, its run in
OUT/<name>/. Variants of one size take the same time an epoch, so equal epochs are equal CPU time; a larger network
(``wide``) is fairly compared at equal --minutes (the table also prints each variant's minutes an epoch). On a GPU,
``--parallel`` runs that many fits at once. Prints val BLEU (tok.) x 100 after the reported epochs and the best
within the budget; ``--json`` writes every curve. A variant whose run folder already holds a fit of at least
--epochs epochs (one command's runs cut short, or a table of fewer epochs from longer runs), or a finished fit of the
same --minutes, is not trained again: its logged curve up to --epochs is reused (``--retrain`` trains it again).
Minutes come from each fit's own files (its config written at the start, its metrics at the end), so reused runs
report theirs. The machinery is benchmarks/_variants.py, shared with flickr8k_variants.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _variants import Family, add_options, run

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "transformer": ROOT / "configs" / "text" / "multi30k_de_en_transformer.yaml",
    "bahdanau": ROOT / "configs" / "text" / "multi30k_de_en_bahdanau.yaml",
}
TRANSFORMER = {  # name -> (what it is, overrides of the shipped config)
    "warm1000_lr7e-4": ("peak 7e-4 after 1,000 warm-up steps, batch 128", ["--model.lr", "0.0007",
                        "--model.warmup_steps", "1000"]),
    "warm1000_lr1e-3_prenorm": ("peak 1e-3 after 1,000 steps, pre-norm layers", ["--model.lr", "0.001",
                                "--model.warmup_steps", "1000", "--model.network.norm_first", "true"]),
    "warm2000_lr5e-4_batch64": ("peak 5e-4 after 2,000 steps, batch 64", ["--model.lr", "0.0005",
                                "--model.warmup_steps", "2000", "--data.batch_size", "64"]),
    "warm500_lr1e-3": ("peak 1e-3 after 500 steps, batch 128 (shipped)", ["--model.lr", "0.001",
                       "--model.warmup_steps", "500"]),
    # The shipped schedule with nothing shared: a source embedding, a target embedding and an output layer of their
    # own (the shipped model uses one matrix for all three). The same work a step, so equal epochs are equal time.
    "untied": ("the shipped schedule, untied: separate source and target embeddings and output layer",
               ["--model.lr", "0.001", "--model.warmup_steps", "500", "--model.network.share_embeddings", "false",
                "--model.network.tie_output", "false"]),
}  # fmt: skip
BAHDANAU = {  # name -> (what it is, overrides of the shipped config)
    "shipped": ("GRU, embed 256, encoder 256 a direction, decoder 512, dropout 0.3, label smoothing 0.1, BPE 8,000",
                []),
    "lstm": ("LSTM instead of GRU", ["--model.network.rnn", "lstm"]),
    "dropout0.5": ("dropout 0.5", ["--model.network.dropout", "0.5"]),
    "no_smoothing": ("no label smoothing", ["--model.objective.label_smoothing", "0"]),
    "bpe16k": ("a BPE vocabulary of 16,000", ["--data.subword_vocab", "16000"]),
    "bpe4k": ("a BPE vocabulary of 4,000", ["--data.subword_vocab", "4000"]),
    "wide": ("embed 512, encoder 512 a direction, decoder 1024, attention 512 (compare at equal --minutes)",
             ["--model.network.embed_dim", "512", "--model.network.enc_hidden", "512", "--model.network.dec_hidden",
              "1024", "--model.network.attn_dim", "512"]),
}  # fmt: skip
VARIANTS = {"transformer": TRANSFORMER, "bahdanau": BAHDANAU}
REPORTED = (1, 2, 3, 5, 10, 13, 16)  # epochs whose val BLEU the table shows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help="Multi30k: <split>.<lang>[.gz] files")
    p.add_argument("--family", choices=sorted(VARIANTS), default="transformer", help="which config's variants")
    p.add_argument("--out", type=Path, help="one run folder a variant (default: runs/multi30k_variants/FAMILY)")
    add_options(p, "; ".join(f"{f}: {', '.join(v)}" for f, v in VARIANTS.items()))
    args = p.parse_args(argv)
    args.out = args.out or Path("runs/multi30k_variants") / args.family
    family = Family("multi30k variants", args.family, CONFIGS[args.family], "text-train", "val_bleu",
                    "val BLEU (tok.), greedy, Multi30k val", VARIANTS[args.family], REPORTED)  # fmt: skip
    return run(p, family, args)


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
