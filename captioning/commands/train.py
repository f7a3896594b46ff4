"""Command-line entry points: ``caption-train`` (LightningCLI over CaptionModule + CaptionDataModule)."""

from __future__ import annotations

import sys
from pathlib import Path

from text_attn.core.lightning_cli import StartFrom, config_names, run_lightning_cli, shipped_configs
from text_attn.core.startup_gc import holding
from text_attn.core.version import answer_version_first

# the shipped configs: in the package once installed from a wheel, at configs/caption in a checkout
CONFIGS = shipped_configs(Path(__file__).resolve().parents[1] / "configs",
                          Path(__file__).resolve().parents[2] / "configs" / "caption")  # fmt: skip
TRAIN_DESCRIPTION = (
    "caption-train: train and evaluate Show-Attend-Tell captioners (soft or hard attention) with PyTorch Lightning. "
    "Shipped configs, given by name (in a checkout also as configs/caption/NAME.yaml): {names} (shapes_* run "
    "in minutes on a CPU; flickr8k_lite2_*, flickr8k_distilled* and flickr8k_de_* are the bundled models' recipes, "
    "hours on a CPU (flickr8k_distilled* train on the captions the repository's benchmarks/caption_distil_data.py "
    "writes: each config's first lines give its commands); your_photos* teach it your photos; *_resnet101_* are the "
    "paper's settings, for a GPU). Example: "
    "`caption-train fit --config shapes_soft`. Subcommands: fit, validate, test, report, optimize (`caption` "
    "captions); `caption-train fit --help` lists every option. The end of fit writes a model file for `caption`; "
    "`caption-export` turns a checkpoint into one. Watch a run with `tensorboard --logdir runs/shapes_soft`; "
    "`caption-train report RUN_DIR` plots its loss, validation scores and grounding into RUN_DIR/report.png. "
    "`caption-train optimize --config C.yaml --out DIR` writes the corpus as LitData chunks (--features true: a frozen "
    "encoder's features); `caption-train fit --config C.yaml --data.root DIR` streams them (docs/scale.md)."
)

START = StartFrom("the synthetic shapes scenes through a ResNet-101 that needs ImageNet weights", "shapes_soft",
                  "docs/captioning.md#train-a-captioner-caption-train")  # fmt: skip


def caption_train_cli(args: list[str] | None = None):
    """Run the ``caption-train`` LightningCLI and return it (tests read ``cli.trainer`` afterwards)."""
    from captioning.model.encoder import EncoderWeightsError
    from captioning.training.data import CaptionDataError, CaptionDataModule
    from captioning.training.module import CaptionModule
    from captioning.training.unread import unread_options

    errors = (CaptionDataError, EncoderWeightsError, ValueError, FileNotFoundError)
    renamed = {
        "data.image_size": "data.scene_size (the shapes canvas side; the network's input side is "
        "model.encoder.image_size)"
    }
    return run_lightning_cli(
        "caption-train",
        CaptionModule,
        CaptionDataModule,
        args,
        errors,
        TRAIN_DESCRIPTION.format(names=", ".join(config_names(CONFIGS)) or "none found"),
        renamed=renamed,
        outdated=flat_model_options,
        configs=CONFIGS,  # --config NAME: a shipped config, called from Python too
        unread=unread_options,  # options given that the run's settings never read: refused, or noted
        start=START,  # a fit given no config and no data option: refused, naming where to start
    )


def flat_model_options(given: set[str]) -> str | None:
    """One line for a config or command line that still sets encoder / decoder / objective options directly under
    ``model`` (before they were nested), saying where each one goes now."""
    from captioning.model.network import DECODER_OPTIONS, ENCODER_OPTIONS
    from captioning.training.objective import OBJECTIVE_OPTIONS
    from text_attn.core.lightning_cli import nested_options_message

    blocks = [("encoder", ENCODER_OPTIONS), ("decoder", DECODER_OPTIONS), ("objective", OBJECTIVE_OPTIONS)]
    return nested_options_message(given, blocks, "configs/caption/shapes_soft.yaml")


def train_main(args: list[str] | None = None) -> None:
    """``caption-train {fit,validate,test,predict} --config configs/caption/X.yaml``, or ``caption-train report
    RUN_DIR``: the run's logged metrics as a PNG (text_attn.core.run_report), handled before LightningCLI parses."""
    argv = sys.argv[1:] if args is None else args
    answer_version_first("caption-train", argv)
    if args is None:  # the command line's own run: the cores' load read from here to fit's start (its note)
        from text_attn.core import cpu_load

        cpu_load.start()
    if argv[:1] == ["report"]:
        from text_attn.core.run_report import report_main

        raise SystemExit(report_main("caption-train", argv[1:], "runs/shapes_soft"))
    from text_attn.core.lightning_cli import named_configs, refuse_missing_files

    # before Lightning's import (~10 s): a mistyped path is said at once
    if argv[:1] == ["optimize"]:
        argv = named_configs("caption-train optimize", list(argv[1:]), CONFIGS)
        refuse_missing_files("caption-train optimize", argv)
        caption_optimize(argv)
        return
    argv = named_configs("caption-train", list(argv), CONFIGS)  # --config shapes_soft: the shipped file
    refuse_missing_files("caption-train", argv)
    caption_train_cli(argv)


# the console script: its start without the garbage collector's full passes (text_attn.core.startup_gc)
main = holding(train_main)


def caption_optimize(args: list[str]) -> None:
    """``caption-train optimize --config C.yaml --out DIR [--features true] [--data.X ...]``: the corpus as LitData
    chunks (captioning.training.streaming)."""
    from captioning.model.encoder import EncoderWeightsError
    from captioning.training.data import CaptionDataError, CaptionDataModule
    from captioning.training.streaming import optimize_captions, optimize_shards
    from text_attn.core.optimize_cli import optimize_main
    from text_attn.core.streaming import split_counts

    def features_option(parser) -> None:
        parser.add_argument(
            "--features",
            type=bool,
            default=False,
            help="store the frozen model.encoder's float16 features instead of the image bytes",
        )
        for split in ("train", "val", "test"):
            parser.add_argument(
                f"--shards_{split}",
                type=str | None,
                default=None,
                help=f"img2dataset webdataset shards of the {split} split, e.g. '{split}/{{00000..00099}}.tar' "
                "(quoted; several patterns separated by spaces); given for all three splits, they replace the "
                "data options' corpus",
            )

    def write(dm, config, opts) -> None:
        patterns = {s: getattr(opts, f"shards_{s}") for s in ("train", "val", "test")}
        if any(patterns.values()):
            missing = [s for s, p in patterns.items() if not p]
            if missing:
                raise CaptionDataError(f"--shards_{missing[0]}: give the shards of all three splits (train, val, test)")
            manifest = optimize_shards(
                dm, opts.out, patterns, opts.num_workers, opts.chunk_bytes, config, opts.features
            )
        else:
            manifest = optimize_captions(dm, opts.out, config, opts.features, opts.num_workers, opts.chunk_bytes)
        counts = split_counts(manifest)
        print(f"caption-train optimize: {opts.out}: {counts} samples; train on it with --data.root {opts.out}")

    errors = (CaptionDataError, EncoderWeightsError, ValueError, FileNotFoundError)
    optimize_main("caption-train", CaptionDataModule, args, errors, write, features_option)
