"""TranslationModule: a thin LightningModule around a text network (loss, optimiser, logging, export).

The network is built in ``setup`` because its vocabulary sizes come from the data module. Validation reports the
teacher-forced loss AND BLEU from free-running decoding (teacher-forced scores alone mislead), plus the attention's
alignment accuracy when the task has a true alignment.
"""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from text_attn.core.metrics import DEFAULT_BUCKETS, alignment_hits, bleu_by_length, bucket_label, corpus_bleu
from text_attn.core.training import RunState, check_finite, gather_outputs
from text_attn.translation.networks import build_network, make_config
from text_attn.translation.translator import Translator


class TranslationModule(RunState, pl.LightningModule):
    def __init__(
        self,
        arch: str = "rnn",
        network: dict[str, Any] | None = None,
        lr: float = 1e-3,
        label_smoothing: float = 0.0,
        warmup_steps: int = 0,
        val_beam_size: int = 1,
        export_path: str | None = None,
    ):
        """
        Args:
            arch: network family: ``rnn`` (translation.seq2seq) or ``transformer`` (translation.transformer).
            network: the family's options: for ``rnn`` the fields of Seq2SeqConfig (attention, rnn, embed_dim, ...),
                for ``transformer`` those of TransformerConfig (d_model, num_heads, enc_layers, ...).
            lr: Adam learning rate (the peak rate when warmup_steps > 0).
            label_smoothing: cross-entropy label smoothing.
            warmup_steps: 0 = constant rate; > 0 = linear warm-up then inverse square root decay (Vaswani et al.).
            val_beam_size: beam size of the free-running decoding in validation and test (1 = greedy).
            export_path: where fit writes the self-contained model file (default: <log dir>/model.pt).
        """
        super().__init__()
        self.save_hyperparameters()
        self.net: torch.nn.Module | None = None
        self._outputs: list[dict] = []

    # --- building from the data ------------------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.net is not None:
            return
        dm = self.trainer.datamodule
        dm.setup(stage)
        self.src_vocab, self.tgt_vocab, self.tokenizer = dm.src_vocab, dm.tgt_vocab, dm.tokenizer
        self.lower = bool(getattr(dm.hparams, "lower", True))
        self.config = make_config(
            self.hparams.arch,
            dict(self.hparams.network or {}),
            src_vocab_size=len(self.src_vocab),
            tgt_vocab_size=len(self.tgt_vocab),
        )
        if getattr(self.config, "share_embeddings", False) and self.src_vocab is not self.tgt_vocab:
            raise ValueError(
                "network.share_embeddings needs one vocabulary for both sides: set data.shared_vocab: true"
            )
        self.net = build_network(self.hparams.arch, self.config)

    def translator(self) -> Translator:
        """The inference object over this module's network: it writes the model file and the checkpoints' metadata."""
        return Translator(self.net, self.src_vocab, self.tgt_vocab, self.tokenizer, self.lower)

    # --- training ---------------------------------------------------------------------------------------------------
    def _loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        tgt = batch["tgt"]  # (B, T+2): bos ... eos pad
        logits, attn = self.net(batch["src"], batch["src_lens"], tgt[:, :-1])  # (B, T+1, V)
        loss = F.cross_entropy(
            logits.transpose(1, 2),
            tgt[:, 1:],
            ignore_index=self.tgt_vocab.pad_id,
            label_smoothing=self.hparams.label_smoothing,
        )
        return loss, attn

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, _ = self._loss(batch)
        check_finite(loss, self.global_step)
        self.log("train_loss", loss, prog_bar=True, batch_size=batch["src"].size(0))
        return loss

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, betas=(0.9, 0.98), eps=1e-9)
        warm = self.hparams.warmup_steps
        if warm <= 0:
            return opt
        # Peak `lr` at step `warm`, then lr * sqrt(warm / step): the paper's schedule, rescaled to a chosen peak.
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, math.sqrt(warm / (s + 1))))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --- free-running evaluation ------------------------------------------------------------------------------------
    def _decode(self, batch: dict):
        max_len = int(batch["src_lens"].max()) * 2 + 10
        return self.net.generate(
            batch["src"],
            batch["src_lens"],
            self.tgt_vocab.bos_id,
            self.tgt_vocab.eos_id,
            max_len=max_len,
            beam_size=self.hparams.val_beam_size,
        )

    def _eval_step(self, batch: dict, stage: str, dataset) -> None:
        loss, _ = self._loss(batch)
        self.log(f"{stage}_loss", loss, prog_bar=True, batch_size=batch["src"].size(0), sync_dist=True)
        res = self._decode(batch)
        for row, (i, toks) in enumerate(zip(batch["index"].tolist(), res.token_lists(), strict=True)):
            ex = dataset.examples[i]
            out = {"index": i, "hyp": self.tgt_vocab.decode(toks), "ref": ex.tgt, "src_len": len(ex.src)}
            if ex.alignment is not None and res.attention is not None:
                out["align"] = alignment_hits(res.attention[row], ex.alignment, len(toks))
            self._outputs.append(out)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "val", self.trainer.datamodule.splits["val"])

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "test", self.trainer.datamodule.splits["test"])

    def _eval_epoch_end(self, stage: str) -> None:
        outs, self._outputs = gather_outputs(self._outputs), []  # the whole split, on every rank
        if not outs:
            return
        refs = [[o["ref"]] for o in outs]
        hyps = [o["hyp"] for o in outs]
        self.log(f"{stage}_bleu", corpus_bleu(refs, hyps)["bleu4"], prog_bar=True)
        aligned = [o["align"] for o in outs if "align" in o]
        if aligned:
            hits, total = map(sum, zip(*aligned, strict=True))
            self.log(f"{stage}_align_acc", hits / max(total, 1))
        if stage == "test":
            buckets = bleu_by_length([o["src_len"] for o in outs], refs, hyps, DEFAULT_BUCKETS)
            for lo, hi in DEFAULT_BUCKETS:
                b = buckets[bucket_label(lo, hi)]
                if b["count"]:
                    self.log(f"test_bleu_{bucket_label(lo, hi)}", b["bleu"])

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    # --- checkpoints ----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["model_metadata"] = self.translator().metadata()  # text-export turns a checkpoint into a model file
        self.save_run_state(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.load_run_state(checkpoint, network_built=self.net is not None)

    # --- export -----------------------------------------------------------------------------------------------------
    def on_fit_end(self) -> None:
        self.export_best(self.hparams.export_path, self.translator().save)
