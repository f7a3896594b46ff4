"""Command-line entry points: ``caption-train`` (LightningCLI over CaptionModule + CaptionDataModule)."""

from __future__ import annotations

from text_attn.core.lightning_cli import run_lightning_cli

TRAIN_DESCRIPTION = (
    "caption-train: train and evaluate Show-Attend-Tell captioners (soft or hard attention) with PyTorch Lightning. "
    "Shipped configs: configs/caption/*.yaml (shapes_soft / shapes_hard run on a CPU; flickr8k_* and coco_* are the "
    "paper's settings for your download). Example: `caption-train fit --config configs/caption/shapes_soft.yaml`. "
    "Subcommands: fit, validate, test, predict; `caption-train fit --help` lists every option. The end of fit "
    "writes a model file for `caption`; `caption-export` turns a checkpoint into one."
)


def caption_cli(args: list[str] | None = None):
    """Run the ``caption-train`` LightningCLI and return it (tests read ``cli.trainer`` afterwards)."""
    from captioning.data import CaptionDataError, CaptionDataModule
    from captioning.encoder import EncoderWeightsError
    from captioning.module import CaptionModule

    errors = (CaptionDataError, EncoderWeightsError, ValueError, FileNotFoundError)
    renamed = {
        "data.image_size": "data.scene_size (the shapes canvas side; the network's input side is model.image_size)"
    }
    return run_lightning_cli(
        "caption-train", CaptionModule, CaptionDataModule, args, errors, TRAIN_DESCRIPTION, renamed=renamed
    )


def train_main(args: list[str] | None = None) -> None:
    """``caption-train {fit,validate,test,predict} --config configs/caption/X.yaml``."""
    caption_cli(args)
