"""CacheFeatures: the Lightning callback that hands the model's image encoder to the data module.

The data module owns preprocessing and the feature cache (captioning.data); the LightningModule builds the encoder
(its vocabulary comes from the data). This callback joins them at the start of each stage, after any checkpoint has
been restored and the model moved to its device, so cached features come from the weights actually used:
- image batches are preprocessed the way the encoder expects (``dm.set_preprocess``), and attention targets are
  distributions over the encoder's grid (``dm.set_grid``);
- with a frozen encoder and ``data.cache_features: true``, every image of the stage's splits is encoded once
  (``dm.cache_features``), or read from the disk cache of an earlier run (captioning.feature_cache).
Under DDP the first process of each machine encodes and writes the cache files while the others wait, then they read
them (memory-mapped). ``fast_dev_run`` caches nothing: its few batches encode their own images.
"""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch

from captioning.feature_cache import encoder_fingerprint

STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}


class CacheFeatures(pl.Callback):
    def _share(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        dm, model = trainer.datamodule, pl_module.model
        encoder = model.encoder
        dm.set_preprocess(encoder.preprocess)
        dm.set_grid(encoder.grid)  # attention targets are distributions over the encoder's grid cells
        if encoder.fine_tune != "none" or not dm.hparams.cache_features or trainer.fast_dev_run:
            return
        cache_dir = dm.hparams.feature_cache_dir
        if cache_dir == "auto":
            cache_dir = str(Path(trainer.default_root_dir, "feature_cache"))
        fingerprint = None
        if cache_dir:
            settings = {**encoder.config(), "preprocess": repr(encoder.preprocess)}
            fingerprint = encoder_fingerprint(encoder, settings)

        def encode(images: torch.Tensor) -> torch.Tensor:
            return model.encode(images.to(pl_module.device))  # (B, L, D)

        def run(progress: bool) -> None:
            was_training = model.training
            model.eval()
            dm.cache_features(
                encode,
                encoder.preprocess,
                STAGE_SPLITS[stage],
                progress=progress,
                cache_dir=cache_dir,
                fingerprint=fingerprint,
            )
            model.train(was_training)

        progress = trainer.progress_bar_callback is not None
        if trainer.world_size > 1 and cache_dir:
            if trainer.local_rank == 0:
                run(progress)
            trainer.strategy.barrier("feature_cache")
            if trainer.local_rank != 0:
                run(False)  # reads what the first process wrote (encodes only if the disk is not shared)
        else:
            run(progress and trainer.is_global_zero)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "fit")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "validate")  # a no-op during fit: val was cached at fit start

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "test")

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._share(trainer, pl_module, "predict")
