"""Command-line entry points: ``caption-train`` (LightningCLI over CaptionModule + CaptionDataModule)."""

from __future__ import annotations

import sys


def _fail(prog: str, message: str, code: int = 2) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def caption_cli(args: list[str] | None = None):
    """Run the ``caption-train`` LightningCLI and return it (tests read ``cli.trainer`` afterwards)."""
    import warnings

    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    from pytorch_lightning.cli import LightningCLI

    from captioning.data import CaptionDataError, CaptionDataModule
    from captioning.encoder import EncoderWeightsError
    from captioning.module import CaptionModule

    try:
        return LightningCLI(
            CaptionModule,
            CaptionDataModule,
            args=args,
            seed_everything_default=0,
            save_config_kwargs={"overwrite": True},
        )
    except (CaptionDataError, EncoderWeightsError, ValueError, FileNotFoundError) as exc:
        _fail("caption-train", " ".join(str(exc).split()))


def train_main(args: list[str] | None = None) -> None:
    """``caption-train {fit,validate,test,predict} --config configs/caption/X.yaml``."""
    caption_cli(args)
