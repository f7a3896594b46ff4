"""CaptionModule: a thin LightningModule around CaptionModel (loss, optimiser, logging, export).

The model is built in ``setup`` because its vocabulary comes from the data module. Training minimises the
cross-entropy plus λ times the doubly stochastic attention penalty (Xu et al. 2015, eq. 14); with
``decoder.attention: hard`` it minimises eq. (12) instead (captioning.reinforce: cross-entropy with sampled locations,
REINFORCE with a moving-average baseline, entropy bonus) and logs ``train_reinforce``, ``train_entropy`` (mean
attention entropy per step), ``train_reward`` and ``baseline``; it warns once if the attention stays near uniform
``collapse_warmup`` steps after sampling starts (the end of ``soft_warmup``). Validation and test
decode free-running (no teacher forcing) one caption per image and score it against all its references with the
coco-caption metrics: ``{stage}_Bleu_1..4``, ``{stage}_ROUGE_L``, ``{stage}_CIDEr`` (and ``{stage}_METEOR`` when
Java runs it), plus the teacher-forced ``{stage}_loss`` on each image's first reference. On shapes it also logs
``{stage}_grounding`` (fraction of object-naming nouns whose arg-max attention cell lies in the named object's box;
0 when no noun names an object), ``{stage}_grounding_mass`` (mean attention mass in that box) and
``{stage}_grounding_words``. Monitor ``val_Bleu_4`` or ``val_CIDEr`` (mode "max") in ModelCheckpoint.

Beyond the anchors (issue 15): ``attn_sup_lambda`` adds attention supervision on the data's ground-truth attention
(``train_attn_sup``); ``scst`` replaces the cross-entropy by self-critical training on CIDEr-D (captioning.scst; logs
``train_reward``, ``train_baseline``, ``train_advantage``), usually from a first stage's weights (``init_from``).

The module never calls into the data module: it reads its vocabulary (``dm.vocab``) and, for grounding, its scenes;
the FeatureCacheCallback (captioning.feature_cache, added by ``configure_callbacks``) gives the data module the encoder
for preprocessing and the feature cache.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_warn

from captioning.captioner import Captioner
from captioning.decoder import DecoderConfig, caption_loss
from captioning.encoder import EncoderConfig
from captioning.feature_cache import FeatureCacheCallback
from captioning.grounding import grounding
from captioning.model import CaptionModel, as_config
from captioning.reinforce import REWARDS, CollapseMonitor, MovingAverageBaseline, hard_attention_loss
from captioning.scst import CaptionReward, load_initial_weights, self_critical_step
from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.fused import SCRATCH
from text_attn.core.lr_budget import LR_SCHEDULES, BudgetProgress, budget_scheduler
from text_attn.core.metrics import coco_metrics
from text_attn.core.self_critical import check_objective_options
from text_attn.core.training import RunState, check_finite, check_training_options, gather_outputs


class CaptionModule(RunState, pl.LightningModule):
    def __init__(
        self,
        encoder: EncoderConfig = EncoderConfig(),  # noqa: B008 - a frozen dataclass; stored as a dict below
        decoder: DecoderConfig = DecoderConfig(),  # noqa: B008
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
        lr_schedule: str = "plateau",
        val_beam_size: int = 1,
        val_max_len: int = 30,
        val_meteor: bool | None = None,
        export_path: str | None = None,
        cpu_threads: int | None = None,
        attn_sup_lambda: float = 0.0,
        scst: bool = False,
        scst_samples: int = 5,
        scst_baseline: str = "greedy",
        scst_max_len: int | None = None,
        init_from: str | None = None,
    ):
        """
        Args:
            encoder: the image encoder (captioning.encoder.EncoderConfig: backbone, grid, stride, weights, fine_tune,
                image_size, crop, multiscale), a dataclass or a dict of its fields.
            decoder: the Show-Attend-Tell decoder (captioning.decoder.DecoderConfig: embed_dim, hidden_dim, attn_dim,
                dropout, gate, deep_output, attention, hard_inference, soft_prob, region_pos, init_from_image,
                attend_on), a dataclass or a dict of its fields.
            soft_warmup: hard training: for the first this many steps every caption takes the expected context
                (soft attention), then ``decoder.soft_prob`` applies. Not in the paper: REINFORCE from a random start
                spends its budget finding the objects; after a soft start it only has to learn to use one region at a
                time.
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
            lr_schedule: ``plateau`` (``lr_patience`` above) or ``budget``: the rates fall linearly to zero over the
                run's budget, whichever of trainer.max_steps / max_epochs / max_time ends it first
                (text_attn.core.lr_budget); lr_patience is then unused.
            val_beam_size: beam size of the free-running decoding in validation and test (1 = greedy, fastest).
            val_max_len: longest caption decoded in validation and test.
            val_meteor: METEOR in validation / test: null = when Java is available, false = never (faster).
            export_path: where fit writes the self-contained model file (default: <log dir>/model.pt).
            cpu_threads: torch CPU threads, set in setup (null = torch's default, one per core). On a small CPU
                shared with other work, 1 is much faster: threads waiting for a busy core stall every op.
            attn_sup_lambda: attention supervision (Liu et al. 2017): add λ times the cross-entropy between α_t and
                the ground-truth attention of each word that names a region (needs ``data.attention_targets: true``;
                shapes scenes and Karpathy sentence boxes have them). For hard attention it supervises the
                distribution the location is sampled from. 0 = off.
            scst: self-critical sequence training (Rennie et al. 2017; captioning.scst) instead of cross-entropy:
                ``scst_samples`` sampled captions per image, reward CIDEr-D (document frequencies from the training
                references), baseline ``greedy`` (the model's greedy caption's CIDEr-D) or ``leave_one_out``; captions
                up to ``scst_max_len`` words (null: val_max_len). Start it from a trained model: ``init_from``.
            init_from: a model file or training checkpoint whose weights start this run (e.g. the cross-entropy
                model for an SCST stage); the config must build the same network, the data the same vocabulary. A
                resumed run (--ckpt_path) takes the checkpoint's weights instead.
        """
        super().__init__()
        encoder, decoder = as_config(EncoderConfig, encoder, "encoder"), as_config(DecoderConfig, decoder, "decoder")
        self.encoder_config, self.decoder_config = encoder, decoder
        # Checkpoints keep plain dicts (they load with weights_only=True); save_hyperparameters reads these locals.
        encoder, decoder = asdict(encoder), asdict(decoder)
        self.save_hyperparameters()
        # The baseline is a buffer of the module (saved in checkpoints); only hard attention has one, so soft
        # checkpoints keep their keys.
        if rl_reward not in REWARDS:
            raise ValueError(f"unknown rl_reward {rl_reward!r}; choose one of {REWARDS}")
        check_objective_options(attn_sup_lambda, scst_samples, scst_baseline, scst_max_len)
        inf = float("inf")
        check_training_options(
            lr, label_smoothing, val_beam_size, ds_lambda=(ds_lambda, 0, inf), encoder_lr=(encoder_lr, 0, inf)
        )
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {lr_schedule!r}; choose one of {LR_SCHEDULES}")
        self._budget: BudgetProgress | None = None  # the budget schedule's progress (configure_optimizers)
        self._budget_saved = 0.0  # its progress in the checkpoint a resumed fit starts from
        self.baseline = MovingAverageBaseline(baseline_decay) if self.decoder_config.attention == "hard" else None
        self._collapse = CollapseMonitor(collapse_warmup, collapse_ratio)
        self.model: CaptionModel | None = None
        self.vocab = None
        self._reward: CaptionReward | None = None  # SCST's CIDEr-D, document frequencies from the training references
        self._outputs: list[dict] = []

    # --- building from the data -------------------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.hparams.cpu_threads:
            torch.set_num_threads(self.hparams.cpu_threads)
        if self.model is None:
            vocab = getattr(self.trainer.datamodule, "vocab", None)
            if vocab is None:
                raise ValueError("CaptionModule needs a CaptionDataModule (its vocabulary sizes the decoder)")
            self.vocab = vocab
            self.model = CaptionModel.build(len(vocab), self.encoder_config, self.decoder_config)
            if self.hparams.init_from:  # a resumed fit then restores its checkpoint over these
                load_initial_weights(self.model, vocab, self.hparams.init_from)
        dm = getattr(self.trainer, "datamodule", None)
        if dm is None:
            return
        if self.hparams.attn_sup_lambda > 0 and not getattr(dm.hparams, "attention_targets", False):
            raise ValueError(
                "model.attn_sup_lambda > 0 needs the ground-truth attention: set data.attention_targets: true "
                "(source shapes, or karpathy with sentence boxes)"
            )
        if self.hparams.scst and stage in (None, "fit") and self._reward is None:
            self._reward = CaptionReward(dm.splits["train"].references)

    def configure_callbacks(self) -> list:
        return [FeatureCacheCallback()]  # the data module encodes each image once with this model's frozen encoder

    def captioner(self, for_export: bool = False) -> Captioner:
        """The inference object over this module's model. for_export: it also records what the data was
        (``dm.domain``) and, when the training features are cached, where they lie (``dm.domain_check``), so
        ``caption`` can tell images far from them."""
        if not for_export:
            return Captioner(self.model, self.vocab)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        return Captioner(self.model, self.vocab, getattr(dm, "domain", None), getattr(dm, "domain_check", None))

    # --- training ---------------------------------------------------------------------------------------------------
    def _features(self, batch: dict) -> torch.Tensor:
        return batch["features"] if "features" in batch else self.model.encode(batch["images"])  # (B, L, D)

    def _loss(self, batch: dict, features: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Training (hard attention): eq. (12); otherwise, and in evaluation, cross-entropy + ds penalty."""
        hp = self.hparams
        warm = self.model.decoder.training and self.global_step < hp.soft_warmup
        # logits (B, T, V), alphas (B, T, L), ...
        out = self.model.decoder(features, batch["captions_in"], soft_prob=1.0 if warm else None)
        loss, parts = self._word_loss(batch, out)
        if hp.attn_sup_lambda > 0 and "attn_targets" in batch:
            sup = attention_supervision_loss(out.alphas, batch["attn_targets"], batch["attn_targets_mask"])
            loss, parts = loss + hp.attn_sup_lambda * sup, {**parts, "attn_sup": sup}
        return loss, parts

    def _word_loss(self, batch: dict, out) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        hp = self.hparams
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
        if self.hparams.scst:
            return self._scst_step(batch, features)
        loss, parts = self._loss(batch, features)
        check_finite(loss, self.global_step)
        n = batch["targets"].size(0)
        self.log("train_loss", loss, prog_bar=True, batch_size=n)
        self.log("train_ce", parts["ce"], batch_size=n)
        self.log("train_ds", parts["ds"], batch_size=n)
        if "attn_sup" in parts:
            self.log("train_attn_sup", parts["attn_sup"], batch_size=n)
        if "reinforce" in parts:
            self._hard_step(parts, n, features.size(1))
        return loss

    def _scst_step(self, batch: dict, features: torch.Tensor) -> torch.Tensor:
        """Self-critical loss on this batch's images (+ λ attention supervision on their captions when on)."""
        hp, n = self.hparams, features.size(0)
        refs = self.trainer.datamodule.splits["train"].references
        references = [refs[i] for i in batch["image_index"].tolist()]
        max_len = hp.scst_max_len or hp.val_max_len
        loss, stats = self_critical_step(
            self.model, self.vocab, features, references, self._reward, hp.scst_samples, hp.scst_baseline, max_len
        )
        if hp.attn_sup_lambda > 0:
            _, parts = self._loss(batch, features)
            loss = loss + hp.attn_sup_lambda * parts["attn_sup"]
            self.log("train_attn_sup", parts["attn_sup"], batch_size=n)
        check_finite(loss, self.global_step)
        self.log("train_loss", loss, prog_bar=True, batch_size=n)
        for key in ("reward", "baseline", "advantage"):
            self.log(f"train_{key}", stats[key], prog_bar=key == "reward", batch_size=n)
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
        # fused: one kernel per parameter group instead of a dozen passes per tensor (the same update; about 5% of a
        # paper-size CPU step).
        optimizer = torch.optim.Adam(groups, fused=True)
        if self.hparams.lr_schedule == "budget":
            self._budget = BudgetProgress(self.trainer, saved=self._budget_saved)
            return {"optimizer": optimizer, "lr_scheduler": budget_scheduler(optimizer, self._budget)}
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
        captions = self.captioner().caption_features(features, self.hparams.val_beam_size, self.hparams.val_max_len)
        for i, refs, (words, alphas, *_) in zip(
            batch["image_index"].tolist(), batch["references"], captions, strict=True
        ):
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
        captions = self.captioner().caption_features(
            self._features(batch), self.hparams.val_beam_size, self.hparams.val_max_len
        )
        index = batch["image_index"].tolist()
        return [{"index": i, "caption": " ".join(w)} for i, (w, _) in zip(index, captions, strict=True)]

    # --- checkpoints -----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["vocab"] = self.vocab.to_dict()  # a checkpoint can be turned into a model file without the data
        exported = self.captioner(for_export=True)  # and caption-export keeps what the data was
        checkpoint["domain"], checkpoint["domain_check"] = exported.domain, exported.domain_check
        if self._budget is not None:
            checkpoint["lr_budget_progress"] = self._budget.last  # a resumed fit's max_time decays what is left
        self.save_run_state(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("vocab")
        if saved is not None and self.vocab is not None and saved != self.vocab.to_dict():
            raise ValueError(
                f"the checkpoint's vocabulary ({len(saved['tokens'])} words) differs from the one built from "
                f"the data ({len(self.vocab)} words): use the data settings the checkpoint was trained with"
            )
        self.load_run_state(checkpoint, network_built=self.model is not None)
        self._budget_saved = float(checkpoint.get("lr_budget_progress", 0.0))

    # --- export -----------------------------------------------------------------------------------------------------
    def on_fit_end(self) -> None:
        SCRATCH.clear()  # the training steps' pooled buffers (a few hundred MB at the paper's size): not needed now
        self.export_best(self.hparams.export_path, self.captioner(for_export=True).save)
