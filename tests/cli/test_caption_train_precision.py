"""caption-train under Lightning's other precisions: mixed precision with gradient clipping (every shipped config clips)
steps a plain Adam, where Lightning refuses a fused one; half weights (bf16-true) encode the photos for the feature
cache in the encoder's dtype and train; full precision keeps the fused Adam."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from captioning.commands.train import caption_train_cli
from captioning.training.module import fused_adam_allowed

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


@pytest.mark.parametrize(
    ("precision", "clip", "fused"),
    [("32-true", 5.0, True), ("64-true", 5.0, True), ("bf16-true", 5.0, True), ("16-true", None, True),
     ("bf16-mixed", 5.0, False), ("16-mixed", 5.0, False), ("bf16-mixed", None, True), ("16-mixed", 0.0, True)],
)  # fmt: skip
def test_fused_adam_only_where_lightning_can_clip_its_gradients(precision, clip, fused):
    # Lightning's MixedPrecision plugin unscales gradients before it clips them; a fused step unscales inside itself
    assert fused_adam_allowed(SimpleNamespace(precision=precision, gradient_clip_val=clip)) is fused
    assert fused_adam_allowed(None)  # configure_optimizers outside a Trainer


def _fit(tmp_path: Path, *args: str):
    return caption_train_cli(["fit", "--config", CONFIG, "--trainer.max_steps", "2", "--trainer.limit_val_batches",
                              "0", "--model.export_path", str(tmp_path / "m.pt"), *args])  # fmt: skip


@pytest.mark.long
@pytest.mark.parametrize("precision", ["bf16-mixed", pytest.param("16-mixed", marks=pytest.mark.slow)])
def test_mixed_precision_fits_with_gradient_clipping(tmp_path, precision):
    cli = _fit(tmp_path, "--trainer.precision", precision, "--trainer.gradient_clip_val", "5.0")
    assert cli.trainer.global_step == 2 and math.isfinite(float(cli.trainer.callback_metrics["train_loss"]))
    assert not cli.trainer.optimizers[0].defaults["fused"]


def test_half_weights_cache_features_and_fit(tmp_path):
    cli = _fit(tmp_path, "--trainer.precision", "bf16-true", "--trainer.gradient_clip_val", "5.0")
    assert cli.trainer.global_step == 2 and cli.datamodule.features["train"].shape == (32, 16, 512)
    assert cli.model.model.decoder.embedding.weight.dtype == torch.bfloat16
    assert cli.trainer.optimizers[0].defaults["fused"]  # Lightning's half-weights plugin clips a fused step
