"""Command-line entry point ``text-train``: LightningCLI over TranslationModule + TranslationDataModule."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from text_attn.core.lightning_cli import StartFrom, config_names, run_lightning_cli, shipped_configs
from text_attn.core.startup_gc import holding
from text_attn.core.version import answer_version_first

# the shipped configs: in the package once installed from a wheel, at configs/text in a checkout
CONFIGS = shipped_configs(Path(__file__).resolve().parent / "configs",
                          Path(__file__).resolve().parents[2] / "configs" / "text")  # fmt: skip
TRAIN_DESCRIPTION = (
    "text-train: train and evaluate the text attention models (RNN encoder-decoder with Bahdanau / Luong / no "
    "attention, Transformer) with PyTorch Lightning. Shipped configs, given by name (in a checkout also as "
    "configs/text/NAME.yaml): {names} (*_aligned and *_distilled train on word links and translations that the "
    "repository's benchmarks/word_align.py and distil_data.py write: each config's first lines give its commands). "
    "Example: `text-train fit --config reorder_bahdanau`. Subcommands: fit, "
    "validate, test, report, optimize (`translate` translates); `text-train fit --help` lists every option. The end "
    "of fit writes a model file for `translate`; `text-export` turns a checkpoint into one. Watch a run with "
    "`tensorboard --logdir runs/reorder_bahdanau`; `text-train report RUN_DIR` plots its loss and validation scores "
    "into RUN_DIR/report.png. `text-train optimize --config C.yaml --out DIR` writes the corpus as LitData chunks; "
    "`text-train fit --config C.yaml --data.root DIR` streams them (docs/scale.md)."
)

START = StartFrom("the synthetic reorder task", "reorder_bahdanau", "docs/text.md#train-a-text-model-text-train")


def text_train_cli(args: list[str] | None = None):
    """Run the ``text-train`` LightningCLI and return it (tests read ``cli.trainer`` afterwards)."""
    from text_attn.translation.data import TranslationDataModule
    from text_attn.translation.module import TranslationModule
    from text_attn.translation.networks import network_options
    from text_attn.translation.pairs import TaskError
    from text_attn.translation.unread import unread_options

    return run_lightning_cli(
        "text-train",
        TranslationModule,
        TranslationDataModule,
        args,
        (TaskError, ValueError, FileNotFoundError),
        TRAIN_DESCRIPTION.format(names=", ".join(config_names(CONFIGS)) or "none found"),
        outdated=flat_objective_options,
        configs=CONFIGS,  # --config NAME: a shipped config, called from Python too
        # options given that the run's settings never read: refused, or noted
        unread=functools.partial(unread_options, networks=network_options()),
        start=START,  # a fit given no config and no data option: refused, naming where to start
    )


def flat_objective_options(given: set[str]) -> str | None:
    """One line for a config or command line that still sets objective options (label_smoothing, SCST, ...) directly
    under ``model``, saying that they go under ``model.objective`` now."""
    from text_attn.core.lightning_cli import nested_options_message
    from text_attn.translation.objective import OBJECTIVE_OPTIONS

    return nested_options_message(given, [("objective", OBJECTIVE_OPTIONS)], "configs/text/reorder_bahdanau_scst.yaml")


def train_main(args: list[str] | None = None) -> None:
    """``text-train {fit,validate,test,predict} --config configs/text/X.yaml``, or ``text-train report RUN_DIR``: the
    run's logged metrics as a PNG (text_attn.core.run_report), handled before LightningCLI parses anything."""
    argv = sys.argv[1:] if args is None else args
    answer_version_first("text-train", argv)
    if args is None:  # the command line's own run: the cores' load read from here to fit's start (its note)
        from text_attn.core import cpu_load

        cpu_load.start()
    if argv[:1] == ["report"]:
        from text_attn.core.run_report import report_main

        raise SystemExit(report_main("text-train", argv[1:], "runs/reorder_bahdanau"))
    from text_attn.core.lightning_cli import named_configs, refuse_missing_files

    # before Lightning's import (~10 s): a mistyped path is said at once
    if argv[:1] == ["optimize"]:
        argv = named_configs("text-train optimize", list(argv[1:]), CONFIGS)
        refuse_missing_files("text-train optimize", argv)
        text_optimize(argv)
        return
    argv = named_configs("text-train", list(argv), CONFIGS)  # --config reorder_bahdanau: the shipped file
    refuse_missing_files("text-train", argv)
    text_train_cli(argv)


# the console script: its start without the garbage collector's full passes (text_attn.core.startup_gc)
main = holding(train_main)


def text_optimize(args: list[str]) -> None:
    """``text-train optimize --config C.yaml --out DIR [--data.X ...]``: the corpus as LitData chunks."""
    from text_attn.core.optimize_cli import optimize_main
    from text_attn.core.streaming import split_counts
    from text_attn.translation.data import TranslationDataModule
    from text_attn.translation.pairs import TaskError
    from text_attn.translation.streaming import optimize_text

    def write(dm, config, opts) -> None:
        model = config.get("model") or {}
        if model.get("init_from"):  # fit will start from a model: the chunks hold its token ids, as fit reads them
            from text_attn.translation.module import start_vocabulary
            from text_attn.translation.translator import Translator

            start = Translator.read_start(model["init_from"], model.get("arch", "rnn"))
            dm.start_from(start_vocabulary(start, model["init_from"], model.get("init_vocab", "extend")))
        manifest = optimize_text(dm, opts.out, opts.num_workers, opts.chunk_bytes)
        counts = split_counts(manifest)
        print(f"text-train optimize: {opts.out}: {counts} pairs; train on it with --data.root {opts.out}")

    optimize_main("text-train", TranslationDataModule, args, (TaskError, ValueError, FileNotFoundError), write)
