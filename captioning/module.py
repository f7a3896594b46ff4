"""CaptionModule: a thin LightningModule around CaptionModel (loss, optimiser, logging, export).

The model is built in ``setup`` because its vocabulary comes from the data module. Training minimises the
cross-entropy plus λ times the doubly stochastic attention penalty (Xu et al. 2015, eq. 14); with
``attention: hard`` it minimises eq. (12) instead (captioning.reinforce: cross-entropy with sampled locations,
REINFORCE with a moving-average baseline, entropy bonus) and logs ``train_reinforce``, ``train_entropy`` (mean
attention entropy per step), ``train_reward`` and ``baseline``; it warns once if the attention stays near uniform
``collapse_warmup`` steps after sampling starts (the end of ``soft_warmup``). Validation and test
decode free-running (no teacher forcing) one caption per image and score it against all its references with the
coco-caption metrics: ``{stage}_Bleu_1..4``, ``{stage}_ROUGE_L``, ``{stage}_CIDEr`` (and ``{stage}_METEOR`` when
Java runs it), plus the teacher-forced ``{stage}_loss`` on each image's first reference. On shapes it also logs
``{stage}_grounding`` (fraction of object-naming nouns whose arg-max attention cell lies in the named object's box;
0 when no noun names an object), ``{stage}_grounding_mass`` (mean attention mass in that box) and
``{stage}_grounding_words``. Monitor ``val_Bleu_4`` or ``val_CIDEr`` (mode "max") in ModelCheckpoint.

With a frozen encoder and ``data.cache_features: true``, every image is encoded once before the first batch (in
``on_fit_start`` / ``on_validation_start`` / ``on_test_start``: after any checkpoint has been restored and the model
moved to its device, so the cached features come from the weights actually used).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_warn

from captioning.decoder import caption_loss
from captioning.feature_cache import encoder_fingerprint
from captioning.grounding import grounding
from captioning.model import CaptionModel
from captioning.reinforce import REWARDS, CollapseMonitor, MovingAverageBaseline, hard_attention_loss
from text_attn.core.metrics import coco_metrics
from text_attn.core.training import RunState, check_finite, gather_outputs

_STAGE_SPLITS = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}


class CaptionModule(RunState, pl.LightningModule):
    def __init__(
        self,
        backbone: str = "resnet101",
        grid: int = 14,
        stride: int = 32,
        weights: str | None = "imagenet",
        fine_tune: str = "none",
        image_size: int | None = None,
        crop: bool | None = None,
        multiscale: bool = False,
        attend_on: str = "all",
        embed_dim: int = 512,
        hidden_dim: int = 512,
        attn_dim: int = 512,
        dropout: float = 0.5,
        gate: str = "scalar",
        deep_output: bool = True,
        region_pos: bool = False,
        init_from_image: bool = True,
        attention: str = "soft",
        hard_inference: str = "argmax",
        soft_prob: float = 0.5,
        soft_warmup: int = 0,
        rl_lambda: float = 1.0,
        rl_reward: str = "caption",
        entropy_lambda: float = 0.01,
        baseline_decay: float = 0.9,
        collapse_warmup: int = 500,
        collapse_ratio: float = 0.95,
        ds_lambda: float = 1.0,
        label_smoothing: float = 0.0,
        lr: float = 4e-4,
        encoder_lr: float = 1e-4,
        lr_patience: int | None = None,
        lr_factor: float = 0.5,
        val_beam_size: int = 1,
        val_max_len: int = 30,
        val_meteor: bool | None = None,
        export_path: str | None = None,
        cpu_threads: int | None = None,
    ):
        """
        Args:
            backbone: CNN encoder (captioning.encoder.BACKBONES): resnet18..152, vgg16, vgg19, efficientnet_lite0.
            grid: regions per side; L = grid * grid annotation vectors (the paper: 14).
            stride: 16 or 32, the backbone's output stride (16 gives a finer map at the same input size).
            weights: ``imagenet`` (torchvision's, from the hub cache; efficientnet_lite0's ship offline),
                a state_dict file, or null for random init.
            fine_tune: ``none`` (frozen; features can be cached), ``last`` (last stage trains) or ``all``.
            image_size: network input side (default: the backbone's 224). crop: centre square crop (default true).
            multiscale: efficientnet_lite0 at stride 8 only: append the stride-16 map (upsampled) to every region.
            attend_on: ``all`` or ``fine``: with multiscale, the attention scores see only the fine (stride-8) channels
                of each region, so where to look follows what is in a cell; the context still reads all channels.
            embed_dim: word embedding size. hidden_dim: LSTM size. attn_dim: attention hidden size.
            dropout: decoder dropout. gate: ``scalar`` (the paper's β), ``vector`` or ``none``.
            deep_output: the paper's eq. (7) readout (else a linear layer on h_t).
            region_pos: add a learned code of each region's (row, col) to its features (not in the paper; spatial
                captions need it: CNN features carry little position information).
            init_from_image: the paper's h0/c0 from the mean region (true) or a fixed start (false), which leaves
                attention as the decoder's only view of the image.
            attention: ``soft`` (deterministic, eq. 13) or ``hard`` (stochastic, Sec. 4.1, trained by eq. 12).
            hard_inference: hard attention at inference: ``argmax`` (one region per word) or ``expect`` (the expected,
                soft context). soft_prob: hard training: per caption, probability of using the expected context
                instead of sampling (the paper: 0.5).
            soft_warmup: hard training: for the first this many steps every caption takes the expected context
                (soft attention), then ``soft_prob`` applies. Not in the paper: REINFORCE from a random start spends
                its budget finding the objects; after a soft start it only has to learn to use one region at a time.
            rl_lambda: λ_r, weight of the REINFORCE term (reward = the caption's log-likelihood minus the baseline).
            rl_reward: ``caption`` (the paper: every location of a caption shares its log-likelihood minus the
                baseline) or ``word`` (the authors' code: each location gets its own word's log-probability, no
                baseline; less variance, blind to what a location does to later words).
            entropy_lambda: λ_e, weight of the attention entropy bonus. baseline_decay: the moving-average baseline's
                decay (the paper: 0.9).
            collapse_warmup / collapse_ratio: warn once when, this many steps after the soft warm-up, the mean
                attention entropy is still above ratio x log L (near uniform). 0 turns the check off.
            ds_lambda: weight of the doubly stochastic penalty (the paper: 1.0; it is a soft-attention regulariser,
                0 is usual for hard attention).
            label_smoothing: cross-entropy label smoothing.
            lr: Adam learning rate of the decoder. encoder_lr: Adam rate of the trainable encoder layers.
            lr_patience: when set, multiply the learning rates by ``lr_factor`` whenever ``val_Bleu_4`` has not
                improved for this many validations (ReduceLROnPlateau); null keeps them constant. A schedule by
                plateaus, not by step count, suits runs capped by ``trainer.max_time``, whose length in steps
                depends on the machine.
            val_beam_size: beam size of the free-running decoding in validation and test (1 = greedy, fastest).
            val_max_len: longest caption decoded in validation and test.
            val_meteor: METEOR in validation / test: null = when Java is available, false = never (faster).
            export_path: where fit writes the self-contained model file (default: <log dir>/model.pt).
            cpu_threads: torch CPU threads, set in setup (null = torch's default, one per core). On a small CPU
                shared with other work, 1 is much faster: threads waiting for a busy core stall every op.
        """
        super().__init__()
        self.save_hyperparameters()
        # The baseline is a buffer of the module (saved in checkpoints); only hard attention has one, so soft
        # checkpoints keep their keys.
        if rl_reward not in REWARDS:
            raise ValueError(f"unknown rl_reward {rl_reward!r}; choose one of {REWARDS}")
        self.baseline = MovingAverageBaseline(baseline_decay) if attention == "hard" else None
        self._collapse = CollapseMonitor(collapse_warmup, collapse_ratio)
        self.model: CaptionModel | None = None
        self.vocab = None
        self._outputs: list[dict] = []

    # --- building from the data -------------------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.hparams.cpu_threads:
            torch.set_num_threads(self.hparams.cpu_threads)
        dm = self.trainer.datamodule
        dm.setup(stage)
        if self.model is None:
            hp = self.hparams
            self.vocab = dm.vocab
            self.model = CaptionModel.build(
                self.vocab,
                backbone=hp.backbone,
                grid=hp.grid,
                stride=hp.stride,
                weights=hp.weights,
                fine_tune=hp.fine_tune,
                image_size=hp.image_size,
                crop=hp.crop,
                multiscale=hp.multiscale,
                attend_on=hp.attend_on,
                embed_dim=hp.embed_dim,
                hidden_dim=hp.hidden_dim,
                attn_dim=hp.attn_dim,
                dropout=hp.dropout,
                gate=hp.gate,
                deep_output=hp.deep_output,
                region_pos=hp.region_pos,
                init_from_image=hp.init_from_image,
                attention=hp.attention,
                hard_inference=hp.hard_inference,
                soft_prob=hp.soft_prob,
            )
        dm.set_preprocess(self.model.encoder.preprocess)

    def _cache(self, stage: str) -> None:
        """Encode (or load from disk) the features of the splits ``stage`` uses, with the frozen encoder.

        Under DDP the first process of each machine encodes and writes the cache files while the others wait, then
        they read them (memory-mapped). ``fast_dev_run`` caches nothing: its few batches encode their own images.
        """
        trainer = self.trainer
        dm = trainer.datamodule
        if self.hparams.fine_tune != "none" or not dm.hparams.cache_features or trainer.fast_dev_run:
            return
        cache_dir = dm.hparams.feature_cache_dir
        if cache_dir == "auto":
            cache_dir = str(Path(trainer.default_root_dir, "feature_cache"))
        fingerprint = None
        if cache_dir:
            settings = {**self.model.encoder.config(), "preprocess": repr(self.model.encoder.preprocess)}
            fingerprint = encoder_fingerprint(self.model.encoder, settings)

        def encode(images: torch.Tensor) -> torch.Tensor:
            return self.model.encode(images.to(self.device))  # (B, L, D)

        def run(progress: bool) -> None:
            was_training = self.model.training
            self.model.eval()
            dm.cache_features(
                encode,
                self.model.encoder.preprocess,
                _STAGE_SPLITS[stage],
                progress=progress,
                cache_dir=cache_dir,
                fingerprint=fingerprint,
            )
            self.model.train(was_training)

        progress = trainer.progress_bar_callback is not None
        if trainer.world_size > 1 and cache_dir:
            if trainer.local_rank == 0:
                run(progress)
            trainer.strategy.barrier("feature_cache")
            if trainer.local_rank != 0:
                run(False)  # reads what the first process wrote (encodes only if the disk is not shared)
        else:
            run(progress and trainer.is_global_zero)

    def on_fit_start(self) -> None:
        self._cache("fit")

    def on_validation_start(self) -> None:
        self._cache("validate")  # a no-op during fit: val was cached at fit start

    def on_test_start(self) -> None:
        self._cache("test")

    def on_predict_start(self) -> None:
        self._cache("predict")

    # --- training ---------------------------------------------------------------------------------------------------
    def _features(self, batch: dict) -> torch.Tensor:
        return batch["features"] if "features" in batch else self.model.encode(batch["images"])  # (B, L, D)

    def _loss(self, batch: dict, features: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Training (hard attention): eq. (12); otherwise, and in evaluation, cross-entropy + ds penalty."""
        hp = self.hparams
        warm = self.model.decoder.training and self.global_step < hp.soft_warmup
        # logits (B, T, V), alphas (B, T, L), ...
        out = self.model.decoder(features, batch["captions_in"], soft_prob=1.0 if warm else None)
        if self.baseline is not None and self.model.decoder.training:
            return hard_attention_loss(
                out,
                batch["targets"],
                pad_id=self.vocab.pad_id,
                baseline=self.baseline.value if self.baseline.ready else None,
                rl_lambda=hp.rl_lambda,
                reward=hp.rl_reward,
                entropy_lambda=hp.entropy_lambda,
                ds_lambda=hp.ds_lambda,
                label_smoothing=hp.label_smoothing,
            )
        return caption_loss(
            out.logits,
            batch["targets"],
            out.alphas,
            pad_id=self.vocab.pad_id,
            ds_lambda=hp.ds_lambda,
            label_smoothing=hp.label_smoothing,
        )

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        features = self._features(batch)
        loss, parts = self._loss(batch, features)
        check_finite(loss, self.global_step)
        n = batch["targets"].size(0)
        self.log("train_loss", loss, prog_bar=True, batch_size=n)
        self.log("train_ce", parts["ce"], batch_size=n)
        self.log("train_ds", parts["ds"], batch_size=n)
        if "reinforce" in parts:
            self._hard_step(parts, n, features.size(1))
        return loss

    def _hard_step(self, parts: dict[str, torch.Tensor], n: int, num_regions: int) -> None:
        """Log the REINFORCE pieces, move the baseline (after the loss used its old value), watch for collapse."""
        sampled = parts["sampled"]  # (B,) captions that sampled locations (the rest took the expected context)
        self.log("train_reinforce", parts["reinforce"], batch_size=n)
        self.log("train_entropy", parts["entropy"], batch_size=n)
        if bool(sampled.any()):
            self.log("train_reward", parts["reward"][sampled].mean(), batch_size=n)
        self.baseline.update(parts["reward"][sampled])
        self.log("baseline", self.baseline.value, batch_size=n)
        # The watch starts when sampling does: during a soft warm-up the attention may well be spread (soft attention
        # averages), and the move to sampling is what should sharpen it.
        sampling_steps = self.global_step - self.hparams.soft_warmup
        if sampling_steps < 0:
            return
        message = self._collapse.update(parts["entropy"].item(), num_regions, sampling_steps)
        if message:
            rank_zero_warn(message)

    def configure_optimizers(self):
        groups = [{"params": list(self.model.decoder.parameters()), "lr": self.hparams.lr}]
        enc = [p for p in self.model.encoder.parameters() if p.requires_grad]
        if enc:
            groups.append({"params": enc, "lr": self.hparams.encoder_lr})
        optimizer = torch.optim.Adam(groups)
        if self.hparams.lr_patience is None:
            return optimizer
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode="max", factor=self.hparams.lr_factor, patience=self.hparams.lr_patience
        )
        # Lightning steps it after each validation, with the logged val_Bleu_4.
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "val_Bleu_4"}}

    # --- free-running evaluation ------------------------------------------------------------------------------------
    def _eval_step(self, batch: dict, stage: str) -> None:
        features = self._features(batch)
        loss, _ = self._loss(batch, features)
        self.log(f"{stage}_loss", loss, prog_bar=True, batch_size=features.size(0), sync_dist=True)
        captions = self.model.generate(features, beam_size=self.hparams.val_beam_size, max_len=self.hparams.val_max_len)
        for i, refs, (words, alphas) in zip(batch["image_index"].tolist(), batch["references"], captions, strict=True):
            self._outputs.append({"index": i, "refs": refs, "words": words, "alphas": alphas.cpu()})

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        outs, self._outputs = gather_outputs(self._outputs), []  # the whole split, on every rank
        if not outs:
            return
        refs = {o["index"]: [" ".join(r) for r in o["refs"]] for o in outs}
        hyps = {o["index"]: " ".join(o["words"]) for o in outs}
        scores = coco_metrics(refs, hyps, meteor=False if self.hparams.val_meteor is False else None)
        for name, value in scores.items():
            self.log(f"{stage}_{name}", value, prog_bar=name in ("Bleu_4", "CIDEr"))
        scenes = self.trainer.datamodule.scenes.get(stage)
        if scenes:
            g = self.model.encoder.grid
            result = grounding(
                [scenes[o["index"]] for o in outs], [o["words"] for o in outs], [o["alphas"] for o in outs], (g, g)
            )
            # No scored word (e.g. an untrained model naming no object) counts as 0, not nan, so "max" monitors work.
            self.log(f"{stage}_grounding", 0.0 if math.isnan(result.accuracy) else result.accuracy, prog_bar=True)
            self.log(f"{stage}_grounding_mass", 0.0 if math.isnan(result.mass) else result.mass)
            self.log(f"{stage}_grounding_words", float(result.words))

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch: dict, batch_idx: int) -> list[dict]:
        captions = self.model.generate(
            self._features(batch), beam_size=self.hparams.val_beam_size, max_len=self.hparams.val_max_len
        )
        index = batch["image_index"].tolist()
        return [{"index": i, "caption": " ".join(w)} for i, (w, _) in zip(index, captions, strict=True)]

    # --- checkpoints -----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vocab"] = self.vocab.to_dict()  # a checkpoint can be turned into a model file without the data
        self.save_run_state(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("vocab")
        if saved is not None and self.vocab is not None and saved != self.vocab.to_dict():
            raise ValueError(
                f"the checkpoint's vocabulary ({len(saved['tokens'])} words) differs from the one built from "
                f"the data ({len(self.vocab)} words): use the data settings the checkpoint was trained with"
            )
        self.load_run_state(checkpoint, network_built=self.model is not None)

    # --- export -----------------------------------------------------------------------------------------------------
    def on_fit_end(self) -> None:
        self.export_best(self.hparams.export_path, self.model.save)
