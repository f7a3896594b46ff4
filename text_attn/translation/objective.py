"""What a text model's training minimises: the whole objective of ``text-train``, in one place.

Configured by the ``model.objective`` block of a text config (:class:`ObjectiveConfig`); computed by
:class:`TranslationObjective`, which needs no Lightning: given the network and a batch, it returns the loss and what
to log.

- **Cross-entropy** of the reference tokens under teacher forcing (label smoothing optional). Validation and test
  report it without the smoothing (``val_loss``: the plain cross-entropy per token, exp(val_loss) the perplexity),
  plus λ · supervision as below.
- **Attention supervision** (``attn_sup_lambda`` > 0): + λ · the cross-entropy between the teacher-forced attention and
  the true alignment the batches carry (``data.attention_targets: true``, task ``reorder``),
  :mod:`text_attn.core.attention_supervision`; or the word links of a corpus's train pairs (``data.alignments``:
  guided alignment, Garg et al. 2019). RNN models supervise their one attention; the Transformer the mean of one
  decoder layer's cross-attention heads: ``attn_sup_layer`` (default null: the penultimate, the layer that aligns
  best unsupervised, alignments.alignment_layer; -1: the last).
- **Self-critical training** (``scst: true``, Rennie et al. 2017) instead of the cross-entropy, usually from a trained
  model (``model.init_from``): per source K sampled translations, each rewarded with its sentence BLEU against the
  reference (:mod:`text_attn.core.rewards`) minus a baseline (the greedy translation's BLEU, or the other samples'
  mean), loss :func:`text_attn.core.self_critical.self_critical_step`. The network samples and is scored in eval mode
  (no dropout), so the policy that is rewarded is the one whose log-probabilities are raised; with supervision on, its
  term is computed on the reference translation, also without dropout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from text_attn.core.attention_supervision import attention_supervision_loss, attention_supervision_rows
from text_attn.core.decoding import Sampling
from text_attn.core.precision import widened
from text_attn.core.rewards import bleu_rewards
from text_attn.core.self_critical import OBJECTIVE_PREFIX as PREFIX
from text_attn.core.self_critical import SequenceObjectiveConfig, self_critical_step
from text_attn.translation.source_check import output_cap


@dataclass(frozen=True)
class ObjectiveConfig(SequenceObjectiveConfig):
    """The ``model.objective`` block of a text config: label smoothing, attention supervision and SCST (fields and
    checks in core/self_critical.py's SequenceObjectiveConfig). Attention supervision needs the true alignment in the
    batches (``data.attention_targets: true``, task ``reorder``) and a network with attention; with ``scst`` it adds
    the supervision term on the reference translation. ``scst_max_len``: tokens, the end not counted (as translate
    --max-len); null: each source's own cap, as validation decodes it (:func:`sample_caps`).
    ``attn_sup_layer``: the Transformer decoder layer whose heads' mean is supervised (null: the penultimate, the one
    ``translate --alignments`` reads; -1: the last).
    """

    attn_sup_layer: int | None = None


OBJECTIVE_OPTIONS = tuple(ObjectiveConfig.__dataclass_fields__)


class ObjectiveResult(NamedTuple):
    loss: Tensor  # () what the step minimises
    logs: dict[str, Tensor]  # what to log, by name (train_loss, train_attn_sup, train_reward, ...)


def decode_caps(src_lens: Tensor, lengths: dict[str, int] | None = None) -> Tensor:
    """Each source's longest output in validation and test (B,): the cap translate gives that sentence
    (source_check.output_cap: 2 x its length (its end token counted) + 10, lower for a source longer than every
    training one, ``lengths`` the training pairs' record), whatever shares its batch (2 x the batch's longest let a
    sentence of a batch of long ones run on: the scores moved with data.batch_size)."""
    caps = [output_cap(int(n) - 1, lengths) for n in src_lens.tolist()]  # src_lens count the end token
    return torch.tensor(caps, dtype=src_lens.dtype, device=src_lens.device)


def sample_caps(net: nn.Module, src_lens: Tensor, scst_max_len: int | None) -> tuple[int, Tensor | None]:
    """How far SCST samples (and its greedy baseline decodes) these sources: (the search's max_len, each source's cap
    (B,) or None). ``scst_max_len`` given: that many tokens and then the end, as translate --max-len counts (no caps:
    the search takes its end_step). Null: each source's own cap, its end counted, as validation decodes it
    (:func:`decode_caps`; a training source is within the training lengths, so no record of them is needed), not
    its batch's longest. A network with learned positions: no step past its table."""
    from text_attn.translation.transformer import learned_positions

    most = learned_positions(net)
    if scst_max_len:
        return (scst_max_len if most is None else min(scst_max_len, most - 1)), None  # the end's step: one more
    caps = decode_caps(src_lens)
    if most is not None:
        caps = caps.clamp(max=most)
    return int(caps.max()), caps


def teacher_forcing(
    net: nn.Module, src: Tensor, src_lens: Tensor, tgt_in: Tensor, attention: bool, layer: int | None = None
):
    """Teacher forcing -> logits (B, T, V) and, when ``attention``, the supervised attention (B, T, S): the RNN's one
    attention, the mean of the Transformer's cross-attention heads of decoder ``layer`` (None: the penultimate)."""
    from text_attn.translation.alignments import alignment_layer
    from text_attn.translation.transformer import Transformer

    if isinstance(net, Transformer):
        kept = net.plot_layer  # what translate draws: put back after the step
        net.set_plot_layer(alignment_layer(net) if layer is None else layer)
        try:
            logits, attn = net(src, src_lens, tgt_in, need_weights=attention)  # attn (B, T, H, S)
        finally:
            net.plot_layer = kept
        return logits, None if attn is None else attn.mean(2)
    return net(src, src_lens, tgt_in)


class TranslationObjective:
    """:class:`ObjectiveConfig` applied to a text network's batches (module doc); ``pad_id`` etc. of the target
    vocabulary. Sampling draws from torch's generator (seeded, checkpointed with the run)."""

    def __init__(self, cfg: ObjectiveConfig, banned: tuple[int, ...] = ()):
        self.cfg = cfg
        self._sampling = Sampling()  # plain sampling at temperature 1
        self.banned = banned  # the target ids translate never writes (translator.never_written): SCST bans them too

    def check(self, net: nn.Module, attention_targets: bool) -> None:
        """One ValueError line for an attn_sup_layer the network lacks (or an RNN's, which has one attention), and,
        when attn_sup_lambda > 0, batches without an alignment or a network without attention."""
        layer, layers = self.cfg.attn_sup_layer, getattr(net, "decoder_layers", None)
        if layer is not None and layers is None:
            raise ValueError(f"{PREFIX}.attn_sup_layer picks a Transformer decoder layer; this network has one "
                             "attention: leave it null")  # fmt: skip
        if layer is not None and not -len(layers) <= layer < len(layers):
            raise ValueError(f"{PREFIX}.attn_sup_layer {layer} is out of range: the network has {len(layers)} "
                             f"decoder layers (0..{len(layers) - 1}, or -1 for the last)")  # fmt: skip
        if self.cfg.attn_sup_lambda <= 0:
            return
        if not attention_targets:
            raise ValueError(
                f"{PREFIX}.attn_sup_lambda={self.cfg.attn_sup_lambda} needs the true alignment in the batches: set "
                "data.attention_targets: true (task reorder keeps one; a corpus: its word links, data.alignments)"
            )
        if getattr(net, "attn", True) is None:  # an RNN network without attention (a Transformer has no .attn)
            raise ValueError(
                f"{PREFIX}.attn_sup_lambda > 0 needs a network with attention, but network.attention is 'none'"
            )

    def supervision(self, batch: dict, attn: Tensor | None) -> Tensor:
        if "attn_targets" not in batch:
            raise ValueError(
                f"{PREFIX}.attn_sup_lambda > 0 but the batch has no attn_targets: set data.attention_targets: true"
            )
        if attn is None:
            raise ValueError(f"{PREFIX}.attn_sup_lambda > 0 needs a network with attention")
        return attention_supervision_loss(attn, batch["attn_targets"], batch["attn_targets_mask"])

    def _forced(self, net: nn.Module, batch: dict) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing on the batch's reference: logits (B, T+1, V) and, under supervision, its attention."""
        inputs = batch["tgt"][:, :-1]  # bos ... (the tgt (B, T+2): bos ... eos pad)
        lam = self.cfg.attn_sup_lambda
        return teacher_forcing(net, batch["src"], batch["src_lens"], inputs, lam > 0, self.cfg.attn_sup_layer)

    def _cross_entropy(
        self, logits: Tensor, batch: dict, pad_id: int, reduction: str = "mean", smoothing: float | None = None
    ) -> Tensor:
        """``smoothing``: the label smoothing (None: the config's, what training minimises)."""
        smoothing = self.cfg.label_smoothing if smoothing is None else smoothing
        # in float32 at least: float16's smoothing term (the sum of every word's log-probability) overflows to inf
        return F.cross_entropy(widened(logits).transpose(1, 2), batch["tgt"][:, 1:], ignore_index=pad_id,
                               label_smoothing=smoothing, reduction=reduction)  # fmt: skip

    def teacher_forced(self, net: nn.Module, batch: dict, pad_id: int) -> tuple[Tensor, Tensor | None]:
        """(cross-entropy + λ · attention supervision, the supervision term alone or None when λ = 0)."""
        logits, attn = self._forced(net, batch)
        loss, lam = self._cross_entropy(logits, batch, pad_id), self.cfg.attn_sup_lambda
        if lam <= 0:
            return loss, None
        sup = self.supervision(batch, attn)
        return loss + lam * sup, sup

    def evaluation_sums(self, net: nn.Module, batch: dict, pad_id: int) -> dict[str, tuple[Tensor, Tensor]]:
        """:meth:`teacher_forced`'s parts per sentence, for a loss pooled over the whole split
        (text_attn.core.training.row_sums, pooled_means; :meth:`evaluation_loss` adds them up): ``ce``, each
        sentence's summed token cross-entropy and its tokens, without label smoothing (the split's cross-entropy as
        docs/text.md states it: exp of its mean is the perplexity; the smoothing's term would add to it a measure of
        how far the model is from uniform); under supervision ``attn_sup``, its supervised steps' sum and count."""
        logits, attn = self._forced(net, batch)
        target = batch["tgt"][:, 1:]
        ce = self._cross_entropy(logits, batch, pad_id, "none", smoothing=0.0).sum(1)
        parts = {"ce": (ce, (target != pad_id).sum(1))}
        if self.cfg.attn_sup_lambda > 0:
            self.supervision(batch, attn)  # its one-line refusals
            parts["attn_sup"] = attention_supervision_rows(attn, batch["attn_targets"], batch["attn_targets_mask"])
        return parts

    def evaluation_loss(self, means: dict[str, float]) -> float:
        """The split's loss from its pooled parts (:meth:`evaluation_sums`): plain cross-entropy + λ · supervision."""
        return means["ce"] + self.cfg.attn_sup_lambda * means.get("attn_sup", 0.0)

    def training_logs(self) -> frozenset[str]:
        """The names :meth:`training_loss` logs under these options: a monitored metric is checked against them
        before a fit (text_attn.core.lightning_parts.MonitorCheck). tests/text/test_text_objectives.py holds each
        kind of step's logs to them."""
        names = {"train_loss", "train_reward", "train_baseline", "train_advantage"} if self.cfg.scst else {"train_loss"}
        return frozenset(names | ({"train_attn_sup"} if self.cfg.attn_sup_lambda > 0 else set()))

    def training_loss(self, net: nn.Module, batch: dict, bos_id: int, eos_id: int, pad_id: int) -> ObjectiveResult:
        """One training step's loss on the batch, with what to log."""
        if self.cfg.scst:
            return self._self_critical(net, batch, bos_id, eos_id, pad_id)
        loss, sup = self.teacher_forced(net, batch, pad_id)
        logs = {"train_loss": loss}
        if sup is not None:
            logs["train_attn_sup"] = sup
        return ObjectiveResult(loss, logs)

    def _self_critical(self, net: nn.Module, batch: dict, bos: int, eos: int, pad: int) -> ObjectiveResult:
        """Sample K translations per source, reward each with its sentence BLEU minus the baseline, and minimise the
        self-critical loss on their log-probabilities (module doc)."""
        cfg = self.cfg
        k = cfg.scst_samples
        src, src_lens, tgt = batch["src"], batch["src_lens"], batch["tgt"]
        ref_lens = (tgt != pad).sum(1).tolist()  # bos + words + eos
        refs = [row[1 : m - 1] for row, m in zip(tgt.tolist(), ref_lens, strict=True)]
        max_len, caps = sample_caps(net, src_lens, cfg.scst_max_len)
        src_k, lens_k = src.repeat_interleave(k, 0), src_lens.repeat_interleave(k, 0)  # row b*K + j: sample j of b
        if caps is None:  # scst_max_len tokens and then the end (end_step), as translate --max-len decodes
            sample_cap = greedy_cap = {"end_step": True}
        else:  # each source's own cap, the end counted, as validation decodes it
            sample_cap, greedy_cap = {"row_max_len": caps.repeat_interleave(k)}, {"row_max_len": caps}
        was_training = net.training
        net.eval()  # no dropout, also for the supervision term below (self_critical_step restores eval)
        try:
            loss, stats = self_critical_step(
                net,
                sample=lambda: net.generate(
                    src_k, lens_k, bos, eos, max_len=max_len, sampling=self._sampling, banned=self.banned, **sample_cap
                ),  # fmt: skip
                greedy=lambda: net.generate(src, src_lens, bos, eos, max_len=max_len, banned=self.banned, **greedy_cap),
                reward=lambda lists, copies: torch.tensor(bleu_rewards(refs, lists, copies), device=src.device),
                score=lambda inputs, rows: teacher_forcing(net, src_k[rows], lens_k[rows], inputs, attention=False)[0],
                samples=k,
                baseline=cfg.scst_baseline,
                bos_id=bos,
                pad_id=pad,
                banned=self.banned,
            )
            sup = None
            if cfg.attn_sup_lambda > 0:  # the supervision term on the reference translation
                _, attn = teacher_forcing(net, src, src_lens, tgt[:, :-1], True, cfg.attn_sup_layer)
                sup = self.supervision(batch, attn)
                loss = loss + cfg.attn_sup_lambda * sup
        finally:
            net.train(was_training)
        logs = {"train_loss": loss, "train_reward": stats["reward"], "train_baseline": stats["baseline"]}
        logs["train_advantage"] = stats["advantage"]
        if sup is not None:
            logs["train_attn_sup"] = sup
        return ObjectiveResult(loss, logs)
