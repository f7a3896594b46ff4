"""Command-line entry points: ``caption-train`` (LightningCLI over CaptionModule + CaptionDataModule)."""

from __future__ import annotations

from text_attn.cli import run_lightning_cli


def caption_cli(args: list[str] | None = None):
    """Run the ``caption-train`` LightningCLI and return it (tests read ``cli.trainer`` afterwards)."""
    from captioning.data import CaptionDataError, CaptionDataModule
    from captioning.encoder import EncoderWeightsError
    from captioning.module import CaptionModule

    errors = (CaptionDataError, EncoderWeightsError, ValueError, FileNotFoundError)
    return run_lightning_cli("caption-train", CaptionModule, CaptionDataModule, args, errors)


def train_main(args: list[str] | None = None) -> None:
    """``caption-train {fit,validate,test,predict} --config configs/caption/X.yaml``."""
    caption_cli(args)
