"""TranslationModule: a thin LightningModule around a text network (loss, optimiser, logging, export).

The network is built in ``setup`` because its vocabulary sizes come from the data module (or, with ``init_from``,
from a model file or checkpoint whose weights it starts from). Validation reports the teacher-forced loss AND BLEU
from free-running decoding (teacher-forced scores alone mislead), plus the attention's alignment accuracy when the
task has a true alignment.

Two training objectives beyond cross-entropy (issue 15):

- attention supervision (``attn_sup_lambda`` > 0): + λ · the cross-entropy between the teacher-forced attention and
  the true alignment the batches carry (``data.attention_targets: true``, task ``reorder``),
  :mod:`text_attn.core.attention_supervision`. RNN models supervise their one attention; the Transformer the mean of
  its last decoder layer's cross-attention heads (what the alignment accuracy scores).
- self-critical training (``scst: true``, Rennie et al. 2017), usually from a trained model (``init_from``): per source
  K sampled translations, each rewarded with its sentence BLEU against the reference (:mod:`text_attn.core.rewards`)
  minus a baseline (the greedy translation's BLEU, or the other samples' mean), loss
  :func:`text_attn.core.self_critical.self_critical_loss`. The network samples and is scored in eval mode (no
  dropout), so the policy that is rewarded is the one whose log-probabilities are raised.
"""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.decoding import Sampling
from text_attn.core.metrics import (
    DEFAULT_BUCKETS,
    REAL_BUCKET_LABELS,
    REAL_BUCKETS,
    alignment_hits,
    bleu_by_length,
    bucket_label,
    corpus_bleu,
    sacre_scores,
)
from text_attn.core.modelfile import ModelFileError
from text_attn.core.rewards import bleu_rewards
from text_attn.core.self_critical import check_objective_options, self_critical_step
from text_attn.core.training import RunState, check_finite, check_training_options, gather_outputs, weight_misfit
from text_attn.core.vocab import Vocabulary
from text_attn.translation.export import read_source
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
        attn_sup_lambda: float = 0.0,
        scst: bool = False,
        scst_samples: int = 5,
        scst_baseline: str = "greedy",
        scst_max_len: int | None = None,
        init_from: str | None = None,
        cpu_threads: int | None = None,
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
            attn_sup_lambda: weight λ of the attention supervision term added to the training loss (and the
                validation loss); 0 = off. Needs the true alignment in the batches (``data.attention_targets: true``,
                task ``reorder``) and a network with attention.
            scst: self-critical training instead of cross-entropy (module doc); start it from a trained model with
                ``init_from``. ``attn_sup_lambda`` > 0 adds the supervision term on the reference translation.
            scst_samples: K translations sampled per source.
            scst_baseline: ``greedy`` (the reward of the greedy translation, the paper's choice) or
                ``leave_one_out`` (the mean reward of the source's other K − 1 samples; needs K >= 2).
            scst_max_len: longest sampled translation (null: 2 x the longest source + 10, as validation decodes).
            init_from: a text model file (``fit``'s or ``text-export``'s) or a text-train checkpoint to start from:
                the network is built from its settings (options under ``network`` override them, as long as the
                weights still fit) and loaded with its weights. Its vocabularies must equal the data's.
            cpu_threads: torch CPU threads, set in setup (null = torch's default). On 2 shared cores 1 is fastest.
        """
        super().__init__()
        check_objective_options(attn_sup_lambda, scst_samples, scst_baseline, scst_max_len)
        inf = float("inf")
        check_training_options(lr, label_smoothing, val_beam_size, warmup_steps=(warmup_steps, 0, inf))
        self.save_hyperparameters()
        self.net: torch.nn.Module | None = None
        self._outputs: list[dict] = []
        self._sampling = Sampling()  # plain sampling at temperature 1 from torch's generator (seeded, checkpointed)

    # --- building from the data ------------------------------------------------------------------------------------
    def setup(self, stage: str | None = None) -> None:
        if self.net is not None:
            return
        hp = self.hparams
        if hp.cpu_threads:
            torch.set_num_threads(hp.cpu_threads)
        dm = self.trainer.datamodule
        dm.setup(stage)
        self.src_vocab, self.tgt_vocab, self.codec = dm.src_vocab, dm.tgt_vocab, dm.codec
        start = self._read_init_from() if hp.init_from else None
        options = {**(start["config"] if start else {}), **dict(hp.network or {})}
        self.config = make_config(
            hp.arch, options, src_vocab_size=len(self.src_vocab), tgt_vocab_size=len(self.tgt_vocab)
        )
        if getattr(self.config, "share_embeddings", False) and self.src_vocab is not self.tgt_vocab:
            raise ValueError(
                "network.share_embeddings needs one vocabulary for both sides: set data.shared_vocab: true"
            )
        self.net = build_network(hp.arch, self.config)
        if start:
            self._load_start(start["state_dict"])
        if hp.attn_sup_lambda > 0:
            self._check_supervision(dm)

    def _read_init_from(self) -> dict:
        """The model file or checkpoint ``init_from`` names (metadata + state_dict), checked against the data and the
        chosen architecture; anything wrong is one ValueError line (what text-train reports without a trace)."""
        path = self.hparams.init_from
        try:
            content, _ = read_source(path)
        except ModelFileError as exc:
            raise ValueError(f"model.init_from: {exc}") from None
        if content.get("arch") != self.hparams.arch:
            raise ValueError(
                f"model.init_from {path} holds a {content.get('arch')!r} network, but model.arch is "
                f"{self.hparams.arch!r}: set model.arch: {content.get('arch')}"
            )
        for side, key, own in (("source", "src_vocab", self.src_vocab), ("target", "tgt_vocab", self.tgt_vocab)):
            theirs = Vocabulary.from_dict(content[key])
            if theirs != own:
                raise ValueError(
                    f"model.init_from {path}: its {side} vocabulary differs from the data's ({len(theirs)} vs "
                    f"{len(own)} words): use the data it was trained on (the same data options and seed)"
                )
        return content

    def _load_start(self, state: dict[str, torch.Tensor]) -> None:
        """Load ``init_from``'s weights; a weight that does not fit the network built here is one line."""
        misfit = weight_misfit(self.net.state_dict(), state)
        if misfit is not None:
            raise ValueError(
                f"model.init_from {self.hparams.init_from}: its weights do not fit the network these options build "
                f"({misfit}); leave out the network options that change a weight's shape"
            )
        self.net.load_state_dict(state)

    def _check_supervision(self, dm) -> None:
        """attn_sup_lambda > 0: one line when the batches carry no alignment or the network has no attention."""
        if not getattr(dm.hparams, "attention_targets", False):
            raise ValueError(
                f"model.attn_sup_lambda={self.hparams.attn_sup_lambda} needs the true alignment in the batches: set "
                "data.attention_targets: true (task reorder keeps one)"
            )
        if self.hparams.arch == "rnn" and self.net.attn is None:
            raise ValueError(
                "model.attn_sup_lambda > 0 needs a network with attention, but network.attention is 'none'"
            )

    def translator(self) -> Translator:
        """The inference object over this module's network: it writes the model file and the checkpoints' metadata."""
        return Translator(self.net, self.src_vocab, self.tgt_vocab, self.codec)

    # --- training ---------------------------------------------------------------------------------------------------
    def _forward(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, attention: bool):
        """Teacher forcing -> logits (B, T, V) and, when ``attention``, the supervised attention (B, T, S): the RNN's
        one attention, the mean of the Transformer's plot layer (by default its last) cross-attention heads."""
        if self.hparams.arch == "transformer":
            logits, attn = self.net(src, src_lens, tgt_in, need_weights=attention)  # attn (B, T, H, S)
            return logits, None if attn is None else attn.mean(2)
        return self.net(src, src_lens, tgt_in)

    def _supervision(self, batch: dict, attn: torch.Tensor | None) -> torch.Tensor:
        if "attn_targets" not in batch:
            raise ValueError(
                "model.attn_sup_lambda > 0 but the batch has no attn_targets: set data.attention_targets: true"
            )
        if attn is None:
            raise ValueError("model.attn_sup_lambda > 0 needs a network with attention")
        return attention_supervision_loss(attn, batch["attn_targets"], batch["attn_targets_mask"])

    def _loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(cross-entropy + λ · attention supervision, the supervision term alone or None when λ = 0)."""
        tgt = batch["tgt"]  # (B, T+2): bos ... eos pad
        lam = self.hparams.attn_sup_lambda
        logits, attn = self._forward(batch["src"], batch["src_lens"], tgt[:, :-1], lam > 0)  # (B, T+1, V)
        loss = F.cross_entropy(
            logits.transpose(1, 2),
            tgt[:, 1:],
            ignore_index=self.tgt_vocab.pad_id,
            label_smoothing=self.hparams.label_smoothing,
        )
        if lam <= 0:
            return loss, None
        sup = self._supervision(batch, attn)
        return loss + lam * sup, sup

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if self.hparams.scst:
            return self._scst_step(batch)
        loss, sup = self._loss(batch)
        check_finite(loss, self.global_step)
        n = batch["src"].size(0)
        self.log("train_loss", loss, prog_bar=True, batch_size=n)
        if sup is not None:
            self.log("train_attn_sup", sup, batch_size=n)
        return loss

    # --- self-critical training -------------------------------------------------------------------------------------
    def _max_len(self, src_lens: torch.Tensor) -> int:
        return int(src_lens.max()) * 2 + 10

    def _scst_step(self, batch: dict) -> torch.Tensor:
        """Sample K translations per source, reward each with its sentence BLEU minus the baseline, and minimise the
        self-critical loss on their log-probabilities (module doc)."""
        hp, vocab = self.hparams, self.tgt_vocab
        k, bos, eos, pad = hp.scst_samples, vocab.bos_id, vocab.eos_id, vocab.pad_id
        src, src_lens, tgt = batch["src"], batch["src_lens"], batch["tgt"]
        n = src.size(0)
        ref_lens = (tgt != pad).sum(1).tolist()  # bos + words + eos
        refs = [row[1 : m - 1] for row, m in zip(tgt.tolist(), ref_lens, strict=True)]
        max_len = hp.scst_max_len or self._max_len(src_lens)
        src_k, lens_k = src.repeat_interleave(k, 0), src_lens.repeat_interleave(k, 0)  # row b*K + j: sample j of b
        was_training = self.net.training
        self.net.eval()  # no dropout, also for the supervision term below (self_critical_step restores eval)
        try:
            loss, stats = self_critical_step(
                self.net,
                sample=lambda: self.net.generate(src_k, lens_k, bos, eos, max_len=max_len, sampling=self._sampling),
                greedy=lambda: self.net.generate(src, src_lens, bos, eos, max_len=max_len),
                reward=lambda lists, copies: torch.tensor(bleu_rewards(refs, lists, copies), device=src.device),
                score=lambda inputs: self._forward(src_k, lens_k, inputs, attention=False)[0],  # (B*K, T, V)
                samples=k,
                baseline=hp.scst_baseline,
                bos_id=bos,
                pad_id=pad,
            )
            sup = None
            if hp.attn_sup_lambda > 0:  # the supervision term on the reference translation
                _, attn = self._forward(src, src_lens, tgt[:, :-1], attention=True)
                sup = self._supervision(batch, attn)
                loss = loss + hp.attn_sup_lambda * sup
        finally:
            self.net.train(was_training)
        check_finite(loss, self.global_step)
        self.log("train_loss", loss, prog_bar=True, batch_size=n)
        self.log("train_reward", stats["reward"], prog_bar=True, batch_size=n)
        self.log("train_baseline", stats["baseline"], batch_size=n)
        self.log("train_advantage", stats["advantage"], batch_size=n)
        if sup is not None:
            self.log("train_attn_sup", sup, batch_size=n)
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
        return self.net.generate(
            batch["src"],
            batch["src_lens"],
            self.tgt_vocab.bos_id,
            self.tgt_vocab.eos_id,
            max_len=self._max_len(batch["src_lens"]),
            beam_size=self.hparams.val_beam_size,
        )

    def _eval_step(self, batch: dict, stage: str, dataset) -> None:
        loss, sup = self._loss(batch)
        self.log(f"{stage}_loss", loss, prog_bar=True, batch_size=batch["src"].size(0), sync_dist=True)
        if sup is not None:
            self.log(f"{stage}_attn_sup", sup, batch_size=batch["src"].size(0), sync_dist=True)
        res = self._decode(batch)
        for row, (i, toks) in enumerate(zip(batch["index"].tolist(), res.token_lists(), strict=True)):
            ex = dataset.examples[i]
            hyp = self.tgt_vocab.decode(toks)
            out = {"index": i, "hyp": self.codec.words(hyp), "ref": self.codec.words(ex.tgt), "src_len": len(ex.src)}
            if ex.tgt_text is not None:  # a real corpus: the detokenized text too, for sacreBLEU and chrF
                out["hyp_text"], out["ref_text"] = self.codec.decode(hyp), ex.tgt_text
                out["src_words"] = len(ex.src_text.split())
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
        self.log(f"{stage}_bleu", corpus_bleu(refs, hyps)["bleu4"], prog_bar=True)  # lowercased, tokenized
        if all("ref_text" in o for o in outs):
            sacre = sacre_scores([o["ref_text"] for o in outs], [o["hyp_text"] for o in outs])
            self.log(f"{stage}_sacrebleu", sacre["sacrebleu"], prog_bar=True)
            self.log(f"{stage}_chrf", sacre["chrf"])
            if stage == "test" and self.trainer.is_global_zero:
                print(f"sacreBLEU {sacre['sacrebleu']:.2f}, chrF {sacre['chrf']:.2f} ({sacre['signature']})")
        aligned = [o["align"] for o in outs if "align" in o]
        if aligned:
            hits, total = map(sum, zip(*aligned, strict=True))
            self.log(f"{stage}_align_acc", hits / max(total, 1))
        if stage == "test":
            if all("src_words" in o for o in outs):  # real text: by source words, in buckets that fit its lengths
                lengths, bounds, labels = [o["src_words"] for o in outs], REAL_BUCKETS, REAL_BUCKET_LABELS
            else:
                lengths, bounds = [o["src_len"] for o in outs], DEFAULT_BUCKETS
                labels = [bucket_label(lo, hi) for lo, hi in bounds]
            buckets = bleu_by_length(lengths, refs, hyps, bounds)
            for (lo, hi), label in zip(bounds, labels, strict=True):
                b = buckets[bucket_label(lo, hi)]
                if b["count"]:
                    self.log(f"test_bleu_{label}", b["bleu"])

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
