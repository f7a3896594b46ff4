"""What a captioner's training minimises: the whole objective of ``caption-train``, in one place.

Configured by the ``model.objective`` block of a caption config (:class:`ObjectiveConfig`); computed by
:class:`CaptionObjective`, a plain ``nn.Module`` (it holds the hard-attention baseline, which checkpoints keep) that
needs no Lightning: given the model, a batch and the step, it returns the loss and what to log.

- **Cross-entropy** of the reference words (label smoothing optional) plus λ times the doubly stochastic attention
  penalty (Xu et al. 2015, eq. 14): :func:`caption_loss`. This is also the loss validation reports, without the
  label smoothing (its cross-entropy is the plain one per word, as the text family's).
- **Hard attention** (``decoder.attention: hard``), in training: eq. (12), cross-entropy with sampled locations,
  REINFORCE with a moving-average baseline and an entropy bonus (:func:`hard_attention_loss`, below); a soft warm-up
  first (``soft_warmup`` steps of expected context), and a warning when the attention stays near uniform.
- **Self-critical sequence training** (``scst: true``, Rennie et al. 2017) instead of the cross-entropy: K sampled
  captions per image, each rewarded with its CIDEr-D against the image's references (document frequencies from the
  TRAINING references, computed once) minus a baseline, the model's own greedy caption's CIDEr-D (the paper) or the
  mean of the image's other samples (leave-one-out); the loss is the shared
  :func:`text_attn.core.self_critical.self_critical_step`. Sampling, the greedy baseline and the scoring of the
  samples run with the decoder in eval mode (no dropout; hard attention deterministic), so the policy that drew a
  caption is the one whose log-probability is raised.
- **Attention supervision** (``attn_sup_lambda`` > 0, Liu et al. 2017): + λ times the cross-entropy between α_t and
  the ground-truth attention of each word that names a region (batches from ``data.attention_targets: true``), added
  to any of the above.

REINFORCE for hard attention (Sec. 4.1, eq. 12).

With s the attended locations, a the regions and y the caption, the paper maximises the lower bound
L_s = Σ_s p(s | a) log p(y | s, a) with the sampled gradient of eq. (12):

    ∂L_s/∂W ≈ 1/N Σ_n [ ∂log p(y | s̃ⁿ, a)/∂W  +  λ_r (log p(y | s̃ⁿ, a) − b) ∂log p(s̃ⁿ | a)/∂W  +  λ_e ∂H[s̃ⁿ]/∂W ]

and b ← 0.9 b + 0.1 log p(y | s̃, a) per mini-batch. We MINIMISE the surrogate loss whose gradient is minus that:

    loss = CE − λ_r Σ_caption (R − b)·Σ_t log p(s_t | a) − λ_e Σ_caption Σ_t H[α_t]      (all over N_tokens)

with R = log p(y | s̃, a) = Σ_t log p(y_t | ...) the caption's own log-likelihood (detached: it is a reward, not a
path for gradients), padded steps left out of every sum. CE is our usual mean over real tokens; the REINFORCE and
entropy sums are divided by the same token count, so the three terms keep the paper's relative weights (each is a
sum over the caption there) and λ_r, λ_e mean what they mean in the paper. Captions that took the expected context
(probability ``soft_prob``) sampled nothing: their log p(s) is 0 and they add no REINFORCE term (their attention
learns through the soft path); the entropy bonus applies to every caption.

The authors' code (kelvinxu/arctic-captions, capgen.py), for reference: it injects the gradient on α directly
(Theano ``known_grads``) as  cost/10 · s̃/α + alpha_entropy_c · (log α + 1),  i.e. λ_r = 1/10 (and not divided by
the batch size, while its cost is a batch mean), λ_e = ``alpha_entropy_c`` (default 0: no entropy term), and by
default each step's reward is that step's word NLL with no baseline; only its ``RL_sumCost`` option uses the moving
baseline, there as (b − mean_t cost), which has the opposite sign of the paper's rule (b tracks the cost, not the
log-likelihood). It also draws the sample-or-expect coin once per mini-batch, not per caption. We follow the paper,
and offer that per-word reward as ``reward="word"``: location s_t is credited with log p(y_t | ...) of the word it
was sampled for, with no baseline (the reward is at most 0, so a location that yields its word with certainty is
left alone and one that yields a wrong word is pushed down). It ignores what s_t does to later words (through h_t),
but its variance is far smaller than the whole caption's: the other T − 1 words' luck no longer moves s_t.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from captioning.model.fast_path import cross_entropy
from captioning.training.distillation import (
    Teacher,
    TeacherCache,
    attention_distillation_loss,
    distillation_loss,
)
from text_attn.core.attention_supervision import attention_supervision_loss, attention_supervision_rows
from text_attn.core.cider import CiderD
from text_attn.core.decoding import Sampling
from text_attn.core.precision import widened
from text_attn.core.rewards import sentence_bleu, unigram_fmean
from text_attn.core.self_critical import OBJECTIVE_PREFIX as PREFIX
from text_attn.core.self_critical import SequenceObjectiveConfig, unused_under_scst
from text_attn.core.self_critical import self_critical_step as shared_step
from text_attn.core.training import check_finite, check_options

if TYPE_CHECKING:
    from captioning.model.decoder import DecoderOutput
    from captioning.model.network import CaptionModel
    from text_attn.core.vocab import Vocabulary

# (features (B, L, D), captions_in (B, T), soft_prob=None) -> DecoderOutput: the decoder's forward or a stand-in
DecoderForward = Callable[..., "DecoderOutput"]

REWARDS = ("caption", "word")  # the paper's R = log p(y | s, a) minus a baseline; the authors' code's log p(y_t)


@dataclass(frozen=True)
class ObjectiveConfig(SequenceObjectiveConfig):
    """The ``model.objective`` block of a caption config: the options both families take (label smoothing,
    attention supervision, SCST: core/self_critical.py's SequenceObjectiveConfig) and these.

    ds_lambda: weight of the doubly stochastic penalty (the paper: 1.0; a soft-attention regulariser, 0 is usual
        for hard attention). Refused above 0 with ``scst``: SCST's loss has no penalty term (set it 0).
    attn_sup_lambda (Liu et al. 2017) supervises α_t for each word that names a region (shapes scenes and Karpathy
        sentence boxes have the ground truth); for hard attention it supervises the distribution the location is
        sampled from.
    Hard attention only:
    soft_warmup: for the first this many steps every caption takes the expected context (soft attention), then
        ``decoder.soft_prob`` applies. Not in the paper: REINFORCE from a random start spends its budget finding the
        objects; after a soft start it only has to learn to use one region at a time.
    rl_lambda: λ_r, weight of the REINFORCE term (reward = the caption's log-likelihood minus the baseline).
    rl_reward: ``caption`` (the paper: every location of a caption shares its log-likelihood minus the baseline) or
        ``word`` (the authors' code: each location gets its own word's log-probability, no baseline; less variance,
        blind to what a location does to later words).
    entropy_lambda: λ_e, weight of the attention entropy bonus. baseline_decay: the moving-average baseline's decay
        (the paper: 0.9).
    collapse_warmup / collapse_ratio: warn once when, this many steps after the soft warm-up, the mean attention
        entropy is still above ratio x log L (near uniform; a ratio between 0 and 1). 0 turns the check off.
    Self-critical training (``scst``) rewards a caption with its CIDEr-D; ``scst_max_len``: words, then the end (as
        validation decodes model.val_max_len); null: the module's val_max_len.
    scst_bleu: SCST's reward becomes CIDEr-D + this x the caption's smoothed sentence BLEU-4 against its image's
        references (text_attn.core.rewards): what the coco-caption BLEU scores reward, beside CIDEr's consensus. 0
        (default): CIDEr-D alone, as Rennie et al. (a Flickr8k caption's CIDEr-D averages about 0.5: val CIDEr 56).
    scst_meteor: adds this x the caption's METEOR-like unigram score (text_attn.core.rewards.unigram_fmean: exact
        matches, recall-weighted, fragmentation penalty; no stems or synonyms): the references' words a caption leaves
        out, which BLEU does not count. 0 (default): off.
    distil_from: a teacher (a model file, or a bundled name such as ``flickr8k``; an ensemble decodes as one) whose
        next-word probabilities the student learns at every word of the training captions (word-level knowledge
        distillation: captioning.training.distillation); it reads the student's features, so the student's encoder
        must be frozen and give the teacher's features (checked). null (default): off. Soft attention,
        cross-entropy training only.
    distil_weight: α: the loss is (1 - α) x cross-entropy + α x KL(teacher || student) per word (default 0.5).
    distil_attention: β: adds β x KL(α_teacher || α_student) per word, where the teacher looks taught as well as
        what it says (its decoders' mean attention, as the ensemble draws it); logged as train_kd_attn. 0 (default):
        off, and the student's attention is free to flatten.
    distil_cache_gb: the teacher's targets of each training pair are kept from their first pass, up to this many
        GB (captioning.training.distillation.TeacherCache): later epochs read them instead of running the teacher
        (its input never changes: a frozen encoder's features, the pair's caption). Flickr8k's 6,000 teacher captions
        hold 0.62 GB at the bundled vocabulary; each process keeps its own (DDP). At most half the memory free as
        fit starts (a container's limit, or the GPU's free memory on CUDA; said in a note where it binds). 0: the
        teacher runs at every step. Default 2.
    """

    ds_lambda: float = 1.0
    soft_warmup: int = 0
    rl_lambda: float = 1.0
    rl_reward: str = "caption"
    entropy_lambda: float = 0.01
    baseline_decay: float = 0.9
    collapse_warmup: int = 500
    collapse_ratio: float = 0.95
    scst_bleu: float = 0.0
    scst_meteor: float = 0.0
    distil_from: str | None = None
    distil_weight: float = 0.5
    distil_attention: float = 0.0
    distil_cache_gb: float = 2.0

    def __post_init__(self):
        super().__post_init__()
        if self.rl_reward not in REWARDS:
            raise ValueError(f"unknown rl_reward {self.rl_reward!r}; choose one of {REWARDS}")
        inf = float("inf")
        # a negative rl_lambda flipped REINFORCE's sign, a negative entropy_lambda rewarded sharp attention, a ratio
        # above 1 never warned (the level is entropy / log L, at most 1): all silently
        check_options(
            PREFIX,
            ds_lambda=(self.ds_lambda, 0, inf),
            soft_warmup=(self.soft_warmup, 0, inf),
            rl_lambda=(self.rl_lambda, 0, inf),
            entropy_lambda=(self.entropy_lambda, 0, inf),
            collapse_warmup=(self.collapse_warmup, 0, inf),
            collapse_ratio=(self.collapse_ratio, 0, 1),
            scst_bleu=(self.scst_bleu, 0, inf),
            scst_meteor=(self.scst_meteor, 0, inf),
            distil_attention=(self.distil_attention, 0, inf),
            distil_cache_gb=(self.distil_cache_gb, 0, inf),
        )
        if not 0 <= self.baseline_decay < 1:  # named here, not when the baseline is built
            raise ValueError(f"{PREFIX}.baseline_decay must be at least 0 and below 1, got {self.baseline_decay:g}")
        if self.scst and self.ds_lambda > 0:  # SCST's loss has no reference caption's attention to penalise
            raise ValueError(unused_under_scst("ds_lambda", self.ds_lambda))
        if not 0 <= self.distil_weight <= 1:
            raise ValueError(f"{PREFIX}.distil_weight must be between 0 and 1, got {self.distil_weight:g}")
        if self.scst and self.distil_from:  # SCST samples its own captions: there is no written word to mix with
            raise ValueError(f"{PREFIX}.distil_from is for cross-entropy training; SCST's loss has no term for it: "
                             "distil first, then run SCST from that model")  # fmt: skip


# the caption-only options first (messages name them in this order), then those both families take
OBJECTIVE_OPTIONS = tuple(
    sorted(ObjectiveConfig.__dataclass_fields__, key=lambda n: n in SequenceObjectiveConfig.__dataclass_fields__)
)


SCST_STATS = ("reward", "baseline", "advantage")  # what an SCST step logs beside its loss, each as train_<name>


class ObjectiveResult(NamedTuple):
    loss: Tensor  # () what the step minimises
    logs: dict[str, Tensor]  # what to log, by name (train_loss, train_ce, ...)
    warning: str | None  # once, when hard attention stays near uniform


class CaptionObjective(nn.Module):
    """:class:`ObjectiveConfig` applied to a :class:`~captioning.model.network.CaptionModel`'s batches (module doc).

    ``hard``: the decoder uses hard attention, so training follows eq. (12) and a moving-average baseline is kept (a
    buffer: checkpoints save it). Before SCST, :meth:`use_references` gives it the training references (CIDEr-D's
    document frequencies).
    """

    def __init__(self, cfg: ObjectiveConfig, hard: bool, val_max_len: int = 30):
        super().__init__()
        self.cfg, self.hard = cfg, hard
        self.scst_max_len = cfg.scst_max_len or val_max_len
        self.baseline = MovingAverageBaseline(cfg.baseline_decay) if hard else None
        self._collapse = CollapseMonitor(cfg.collapse_warmup, cfg.collapse_ratio)
        self._reward: CaptionReward | None = None
        self._teacher: Teacher | None = None
        self._teacher_cache: TeacherCache | None = None

    @property
    def collapse_monitor(self) -> CollapseMonitor:
        """The hard-attention collapse watch (its state goes into checkpoints beside the module's weights)."""
        return self._collapse

    def training_logs(self) -> frozenset[str]:
        """The names :meth:`training_loss` may log under these options: a monitored metric is checked against them
        before a fit (text_attn.core.lightning_parts.MonitorCheck). tests/captioning/test_objective.py holds each
        kind of step's logs to them."""
        cfg = self.cfg
        if cfg.scst:
            names = {"train_loss", *(f"train_{key}" for key in SCST_STATS)}
        else:
            names = {"train_loss", "train_ce", "train_ds"}
            if self.hard:  # _after_hard_step's; the moving baseline only where the reward is the caption's
                names |= {"train_reinforce", "train_entropy", "train_reward"}
                names |= {"baseline"} if cfg.rl_reward == "caption" else set()
        if cfg.attn_sup_lambda > 0:
            names.add("train_attn_sup")
        if cfg.distil_from and not cfg.scst:
            names.add("train_kd")
            names |= {"train_kd_attn"} if cfg.distil_attention > 0 else set()
        return frozenset(names)

    def use_teacher(self, teacher: Teacher, room: int | None = None) -> str | None:
        """``distil_from``'s teacher (captioning.training.distillation.load_teacher): a plain attribute, not a
        submodule, so no checkpoint or model file holds its weights. Its targets are kept from their first pass
        (``distil_cache_gb``; a new cache: a resumed fit fills it again), in at most half the ``room`` (bytes the
        targets' device may still hold: text_attn.core.memory_room on the CPU, the GPU's free memory on CUDA; the
        other half is the fit's own). Returns a note where the room bounded the budget, else None."""
        self._teacher = teacher
        budget, note = int(self.cfg.distil_cache_gb * 1e9), None
        if room is not None and budget > room // 2:
            note = (f"{PREFIX}.distil_cache_gb {self.cfg.distil_cache_gb:g} kept to {room // 2 / 1e9:.2f} GB: half "
                    f"the {room / 1e9:.2f} GB of memory free for the teacher's targets (a container's limit, or what "
                    "the machine or GPU has free); pairs past it are made at every step")  # fmt: skip
            budget = room // 2
        self._teacher_cache = TeacherCache(budget) if budget > 0 else None
        return note

    @property
    def teacher_cache(self) -> TeacherCache | None:
        """The kept teacher targets (None: no teacher, or distil_cache_gb 0)."""
        return self._teacher_cache

    def forget_teacher_targets(self) -> None:
        """Empty the cache (its memory back; a later pass would fill it again)."""
        if self._teacher_cache is not None:
            self._teacher_cache = TeacherCache(self._teacher_cache.budget)

    def _teacher_targets(self, features: Tensor, batch: dict, pad_id: int) -> tuple[Tensor, Tensor]:
        """The teacher's (log-probabilities (B, T, S), attention (B, T, L)) of the batch: read from the cache for the
        pairs it keeps (a batch without ``pair_index`` is not cached), made by the teacher for the others."""
        index = batch.get("pair_index")
        if self._teacher_cache is None or index is None:
            return self._teacher.targets(features, batch["captions_in"])
        captions_in, lengths = batch["captions_in"], (batch["targets"] != pad_id).sum(1)  # (B,): words and end
        keys = TeacherCache.keys(captions_in, lengths, index, batch.get("image_index"))
        return self._teacher_cache.targets(self._teacher, features, captions_in, lengths, keys)

    def use_references(self, train_references: list[list[list[str]]]) -> None:
        """SCST's reward: CIDEr-D with document frequencies from these (per training image, its token lists), plus
        ``scst_bleu`` x BLEU-4 + ``scst_meteor`` x the METEOR-like unigram score."""
        if self.cfg.scst and self._reward is None:
            self._reward = CaptionReward(train_references, self.cfg.scst_bleu, self.cfg.scst_meteor)

    def teacher_forced(
        self,
        model: CaptionModel,
        features: Tensor,
        batch: dict,
        pad_id: int,
        step: int = 0,
        forward: DecoderForward | None = None,
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The reference words' loss: eq. (12) for a hard decoder in training, else cross-entropy + λ_ds · penalty
        (validation's loss); + λ · attention supervision when on and the batch has targets. (loss, parts)
        ``forward``: what runs the decoder (its signature; captioning.training.cuda_graphs), else the decoder."""
        cfg, decoder = self.cfg, model.decoder
        warm = decoder.training and step < cfg.soft_warmup
        # logits (B, T, V), alphas (B, T, L), ...
        out = (forward or decoder)(features, batch["captions_in"], soft_prob=1.0 if warm else None)
        if self.hard and decoder.training:
            baseline = self.baseline.value if self.baseline.ready else None
            loss, parts = hard_attention_loss(
                out, batch["targets"], pad_id, baseline, rl_lambda=cfg.rl_lambda, reward=cfg.rl_reward,
                entropy_lambda=cfg.entropy_lambda, ds_lambda=cfg.ds_lambda, label_smoothing=cfg.label_smoothing,
            )  # fmt: skip
        else:
            loss, parts = caption_loss(
                out.logits, batch["targets"], out.alphas, pad_id, cfg.ds_lambda, cfg.label_smoothing
            )
        if cfg.attn_sup_lambda > 0 and "attn_targets" in batch:
            sup = attention_supervision_loss(out.alphas, batch["attn_targets"], batch["attn_targets_mask"])
            loss, parts = loss + cfg.attn_sup_lambda * sup, {**parts, "attn_sup": sup}
        if self._teacher is not None and decoder.training and not self.hard:
            # (1 - α) · ce + α · KL: the cross-entropy part of the loss exchanged for the teacher's at weight α
            teacher_lp, teacher_alphas = self._teacher_targets(features, batch, pad_id)  # (B, T, S), (B, T, L)
            kd = distillation_loss(out.logits, teacher_lp, self._teacher.student_ids, batch["targets"], pad_id)
            loss, parts = loss + cfg.distil_weight * (kd - parts["ce"]), {**parts, "kd": kd}
            if cfg.distil_attention > 0:
                kd_attn = attention_distillation_loss(out.alphas, teacher_alphas, batch["targets"], pad_id)
                loss, parts = loss + cfg.distil_attention * kd_attn, {**parts, "kd_attn": kd_attn}
        return loss, parts

    def evaluation_sums(
        self, model: CaptionModel, features: Tensor, batch: dict, pad_id: int
    ) -> dict[str, tuple[Tensor, Tensor]]:
        """:meth:`teacher_forced`'s parts per caption as validation scores them (the decoder in eval mode), for a loss
        pooled over the whole split (text_attn.core.training.row_sums, pooled_means; :meth:`evaluation_loss` adds them
        up): ``ce``, each caption's summed word cross-entropy and its words (the end counted), without label
        smoothing (the plain cross-entropy: exp of its mean is the perplexity); ``ds``, its doubly stochastic penalty
        (one a caption); ``attn_sup`` when on, its supervised words' sum and count."""
        out = model.decoder(features, batch["captions_in"])
        targets, cfg = batch["targets"], self.cfg
        real = targets != pad_id  # (B, T)
        # in float32 at least, as caption_loss (cross_entropy) computes it
        ce = F.cross_entropy(widened(out.logits).transpose(1, 2), targets, ignore_index=pad_id,
                             reduction="none").sum(1)  # fmt: skip
        ds = penalty_rows(out.alphas, real)
        parts = {"ce": (ce, real.sum(1)), "ds": (ds, torch.ones_like(ds))}
        if cfg.attn_sup_lambda > 0 and "attn_targets" in batch:
            sup = attention_supervision_rows(out.alphas, batch["attn_targets"], batch["attn_targets_mask"])
            parts["attn_sup"] = sup
        return parts

    def evaluation_loss(self, means: dict[str, float]) -> float:
        """The split's loss from its pooled parts (:meth:`evaluation_sums`): plain cross-entropy + λ_ds · penalty
        (+ λ · supervision)."""
        cfg = self.cfg
        return means["ce"] + cfg.ds_lambda * means["ds"] + cfg.attn_sup_lambda * means.get("attn_sup", 0.0)

    def training_loss(
        self,
        model: CaptionModel,
        vocab: Vocabulary,
        features: Tensor,
        batch: dict,
        step: int,
        forward: DecoderForward | None = None,
    ) -> ObjectiveResult:
        """One training step's loss on ``features`` (B, L, D) of the batch's images, with what to log. A NaN/inf loss
        stops training with one line (text_attn.core.training.TrainingDiverged) before any state moves.
        ``forward``: what runs the decoder's teacher-forced loop (:meth:`teacher_forced`); not SCST's sampling."""
        if self.cfg.scst:
            return self._self_critical(model, vocab, features, batch, step)
        loss, parts = self.teacher_forced(model, features, batch, vocab.pad_id, step, forward)
        check_finite(loss, step)  # before the baseline takes this batch's rewards
        logs = {"train_loss": loss, "train_ce": parts["ce"], "train_ds": parts["ds"]}
        for name in ("attn_sup", "kd", "kd_attn"):
            if name in parts:
                logs[f"train_{name}"] = parts[name]
        warning = self._after_hard_step(parts, logs, features.size(1), step) if "reinforce" in parts else None
        return ObjectiveResult(loss, logs, warning)

    def _self_critical(
        self, model: CaptionModel, vocab: Vocabulary, features: Tensor, batch: dict, step: int
    ) -> ObjectiveResult:
        """Self-critical loss on the batch's images (+ λ attention supervision on their captions when on)."""
        cfg = self.cfg
        if self._reward is None:
            raise ValueError("SCST needs the training references first: CaptionObjective.use_references")
        loss, stats = self_critical_step(
            model, vocab, features, batch["references"], self._reward, cfg.scst_samples, cfg.scst_baseline,
            self.scst_max_len,
        )  # fmt: skip
        logs = {"train_loss": loss}
        if cfg.attn_sup_lambda > 0:
            _, parts = self.teacher_forced(model, features, batch, vocab.pad_id, step)
            loss = loss + cfg.attn_sup_lambda * parts["attn_sup"]
            logs = {"train_attn_sup": parts["attn_sup"], "train_loss": loss}
        check_finite(loss, step)
        logs.update({f"train_{key}": stats[key] for key in SCST_STATS})
        return ObjectiveResult(loss, logs, None)

    def _after_hard_step(self, parts: dict[str, Tensor], logs: dict[str, Tensor], num_regions: int, step: int):
        """Log the REINFORCE pieces, move the baseline (after the loss used its old value), watch for collapse;
        the collapse warning's text, once, or None."""
        sampled = parts["sampled"]  # (B,) captions that sampled locations (the rest took the expected context)
        logs["train_reinforce"], logs["train_entropy"] = parts["reinforce"], parts["entropy"]
        if bool(sampled.any()):
            # rl_reward word: the mean word log-probability the locations were credited with (it logged the caption's
            # summed log-likelihood, a reward that objective does not use, at another scale)
            logs["train_reward"] = parts.get("word_reward", parts["reward"])[sampled].mean()
        # the b this step's loss used: the average before this batch moves it (it was logged after, this batch's
        # reward in it: the reward's gap to it, what REINFORCE weighed, looked smaller); the first sampled batch used
        # its own mean (hard_attention_loss). None before the first sampled batch (a soft warm-up logged 0.0), and
        # none with rl_reward word
        used = self.baseline.value.clone() if self.baseline.ready else None
        self.baseline.update(parts["reward"][sampled])
        if self.cfg.rl_reward == "caption" and self.baseline.ready:
            logs["baseline"] = used if used is not None else self.baseline.value
        # The watch starts when sampling does: during a soft warm-up the attention may well be spread (soft attention
        # averages), and the move to sampling is what should sharpen it.
        sampling_steps = step - self.cfg.soft_warmup
        if sampling_steps < 0:
            return None
        return self._collapse.update(parts["entropy"].item(), num_regions, sampling_steps)


# --- cross-entropy and the doubly stochastic penalty (eq. 14) ---------------------------------------------------------
def doubly_stochastic_penalty(alphas: Tensor, step_mask: Tensor, target: float | None = 1.0) -> Tensor:
    """Eq. (14)'s λ-free term: mean over the batch of Σ_i (target − Σ_t α_ti)², padded steps left out of Σ_t.

    alphas (B, T, L), step_mask (B, T) bool (True = a real step). ``target=None`` uses each caption's own T_b / L.

    Softmax already makes Σ_i α_ti = 1 at every step; this asks also Σ_t α_ti ≈ target, i.e. that every region
    gets its share of attention over the whole caption (the paper: "pay equal attention to every part of the image
    over the course of generation"). Choice of target -- we checked the authors' code (kelvinxu/arctic-captions,
    capgen.py): ``alpha_c * ((1 - alphas.sum(0))**2).sum(0).mean()`` with alphas (T, B, L), i.e. target 1 as in
    the paper, Σ_t over ALL steps (padding included -- we exclude it), then a SUM over the batch and a MEAN over
    the L regions; so their alpha_c equals our λ times L/B. There is no τ/L target in that code.
    Why the target hardly matters: since Σ_i Σ_t α_ti = T_b exactly (T_b real steps), with s_i = Σ_t α_ti
    and s̄ = T_b / L,  Σ_i (τ − s_i)² = Σ_i (s_i − s̄)² + L (τ − s̄)².  The second term is a constant, so every τ
    gives the same gradient; only the reported value moves. τ = 1 (default) matches the paper and its code;
    τ = None (s̄ per caption) reports the constant-free spread, 0 for perfectly uniform attention.
    """
    return penalty_rows(alphas, step_mask, target).mean()


def penalty_rows(alphas: Tensor, step_mask: Tensor, target: float | None = 1.0) -> Tensor:
    """:func:`doubly_stochastic_penalty` of each caption (B,), before the mean over the batch."""
    mask = step_mask.to(alphas.dtype).unsqueeze(-1)  # (B, T, 1)
    totals = (alphas * mask).sum(dim=1)  # (B, L) Σ_t α_ti over real steps
    if target is None:
        goal = step_mask.sum(dim=1, keepdim=True).to(alphas.dtype) / alphas.size(-1)  # (B, 1) T_b / L
    else:
        goal = float(target)  # a Python number, not a tensor made on the host and copied to the device every step
    return ((goal - totals) ** 2).sum(dim=-1)


def caption_loss(
    logits: Tensor,
    targets: Tensor,
    alphas: Tensor,
    pad_id: int,
    ds_lambda: float = 1.0,
    label_smoothing: float = 0.0,
    ds_target: float | None = 1.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Cross-entropy per non-pad target token + ds_lambda · doubly stochastic penalty (eq. 14).

    logits (B, T, V), targets (B, T) = words + eos then pad, alphas (B, T, L). Returns (total, {"ce", "ds"}).
    """
    ce = cross_entropy(  # F.cross_entropy's numbers (a compiled kernel on the CPU: captioning.model.fast_path)
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=pad_id,  # mean over the non-pad tokens only
        label_smoothing=label_smoothing,
    )
    ds = doubly_stochastic_penalty(alphas, targets != pad_id, target=ds_target)
    return ce + ds_lambda * ds, {"ce": ce, "ds": ds}


# --- hard attention: REINFORCE (eq. 12) -------------------------------------------------------------------------------
class MovingAverageBaseline(nn.Module):
    """The reward baseline b ← decay · b + (1 − decay) · mean(R) (the paper: decay 0.9), one update per batch.

    The first update sets b to that batch's mean (b = 0 would make every early sample look terrible: R is a
    caption log-likelihood, tens of nats below 0 at the start). Buffers, so checkpoints keep it.
    """

    def __init__(self, decay: float = 0.9):
        super().__init__()
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"baseline decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.register_buffer("value", torch.zeros(()))
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))

    @property
    def ready(self) -> bool:
        """False until the first update: there is no estimate yet (use the batch mean instead)."""
        return bool(self.updates > 0)

    @torch.no_grad()
    def update(self, rewards: Tensor) -> None:
        """rewards (N,): this batch's rewards of the sampled captions; no-op when there are none."""
        if rewards.numel() == 0:
            return
        mean = rewards.detach().float().mean().to(self.value.dtype)
        self.value.copy_(mean if not self.ready else self.decay * self.value + (1.0 - self.decay) * mean)
        self.updates += 1


def word_log_likelihoods(logits: Tensor, targets: Tensor, pad_id: int) -> Tensor:
    """log p(y_t) of each target word, 0 at padding.  (B, T, V), (B, T) -> (B, T)"""
    return -F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id, reduction="none")


def hard_attention_loss(
    out: DecoderOutput,
    targets: Tensor,
    pad_id: int,
    baseline: Tensor | float | None,
    *,
    rl_lambda: float = 1.0,
    entropy_lambda: float = 0.01,
    ds_lambda: float = 0.0,
    label_smoothing: float = 0.0,
    ds_target: float | None = 1.0,
    reward: str = "caption",
) -> tuple[Tensor, dict[str, Tensor]]:
    """Eq. (12) as a loss to minimise (see the module doc); ``out`` from a hard decoder's training-mode forward.

    targets (B, T) = words + eos then pad. ``baseline``: b, or None to use the mean reward of this batch's sampled
    captions (before the moving average has its first value). Returns (total, parts): "ce", "ds" (as
    :func:`caption_loss`), "reinforce" and "entropy_bonus" (the terms as added to the total), "entropy" (mean H[α_t]
    per real step), "reward" (B,) R detached, "advantage" (B,) (R − b) where sampled, else 0, "sampled" (B,) bool.
    ``reward="word"``: each location's reward is its own word's log p(y_t), no baseline; "advantage" is then (B, T).
    """
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; choose one of {REWARDS}")
    per_word = reward == "word"
    if out.attn_log_probs is None or out.entropies is None or out.sampled is None:
        raise ValueError("hard_attention_loss needs a hard-attention decoder output (attention='hard')")
    total, parts = caption_loss(
        out.logits,
        targets,
        out.alphas,
        pad_id,
        ds_lambda=ds_lambda,
        label_smoothing=label_smoothing,
        ds_target=ds_target,
    )
    step_mask = (targets != pad_id).to(out.logits.dtype)  # (B, T)
    n_tokens = step_mask.sum().clamp_min(1.0)
    with torch.no_grad():
        word_logp = word_log_likelihoods(out.logits.detach().float(), targets, pad_id)  # (B, T) no label smoothing
        reward = word_logp.sum(dim=1)  # (B,) R = log p(y | s, a)
        sampled = out.sampled
        took_sample = sampled.to(reward.dtype)  # (B,) soft captions sampled nothing: no REINFORCE term
        if per_word:
            advantage = word_logp * took_sample.unsqueeze(1)  # (B, T)
        else:
            if baseline is None:
                baseline = reward[sampled].mean() if bool(sampled.any()) else reward.new_zeros(())
            advantage = (reward - baseline) * took_sample  # (B,)
    if per_word:
        log_p_s = out.attn_log_probs * step_mask  # (B, T) each step credited with its own word
    else:
        log_p_s = (out.attn_log_probs * step_mask).sum(dim=1)  # (B,) Σ_t log p(s_t | a) over real steps
    reinforce = -rl_lambda * (advantage.to(log_p_s.dtype) * log_p_s).sum() / n_tokens
    entropy = (out.entropies * step_mask).sum() / n_tokens  # mean H[α_t] per real step
    entropy_bonus = -entropy_lambda * entropy
    parts.update(reinforce=reinforce, entropy_bonus=entropy_bonus, entropy=entropy)
    parts.update(reward=reward, advantage=advantage, sampled=sampled)
    if per_word:  # the reward each location got: its word's log-probability, a caption's mean (B,)
        parts["word_reward"] = (word_logp * step_mask).sum(dim=1) / step_mask.sum(dim=1).clamp_min(1.0)
    return total + reinforce + entropy_bonus, parts


class CollapseMonitor:
    """Spots hard attention that stays near uniform, the failure users of other ports report.

    Keeps a moving average (decay 0.9) of the mean attention entropy divided by its uniform value log L; after
    ``warmup`` training steps, the first time it is above ``ratio``, :meth:`update` returns a warning message
    (once per monitor). ``warmup`` 0 or less disables it. Plain attributes, not buffers (a buffer would make every
    checkpoint written before it unloadable): the module keeps :meth:`state_dict` in its checkpoints.
    """

    def __init__(self, warmup: int = 500, ratio: float = 0.95, decay: float = 0.9):
        self.warmup, self.ratio, self.decay = warmup, ratio, decay
        self.level: float | None = None
        self.warned = False

    def state_dict(self) -> dict:
        """Its moving level and whether it warned, for a checkpoint (plain values): a resumed fit neither warns again
        nor starts the average afresh."""
        return {"level": self.level, "warned": self.warned}

    def load_state_dict(self, state: dict | None) -> None:
        """What :meth:`state_dict` gave; None (a checkpoint written before it was kept): as it is."""
        if state:
            self.level, self.warned = state.get("level"), bool(state.get("warned", False))

    def update(self, mean_entropy: float, num_regions: int, step: int) -> str | None:
        if num_regions < 2:
            return None
        x = float(mean_entropy) / math.log(num_regions)
        self.level = x if self.level is None else self.decay * self.level + (1.0 - self.decay) * x
        if self.warned or self.warmup <= 0 or step < self.warmup or self.level <= self.ratio:
            return None
        self.warned = True
        return (
            f"hard attention is still almost uniform after {step} steps of sampling: mean entropy "
            f"{self.level:.3f} x log L "
            f"(L = {num_regions}); REINFORCE is not moving it. Try a smaller model.objective.entropy_lambda, a larger "
            "model.objective.rl_lambda or model.decoder.soft_prob, or a lower learning rate."
        )


# --- self-critical training -------------------------------------------------------------------------------------------
class CaptionReward:
    """CIDEr-D of captions against their image's references, document frequencies from ``train_references``
    (per training image, its reference token lists), plus ``bleu`` x each caption's smoothed sentence BLEU-4 against
    the same references and ``meteor`` x its METEOR-like unigram score (text_attn.core.rewards.unigram_fmean)."""

    def __init__(self, train_references: list[list[list[str]]], bleu: float = 0.0, meteor: float = 0.0):
        self.cider, self.bleu, self.meteor = CiderD(train_references), bleu, meteor

    def __call__(self, captions: list[list[str]], references: list[list[list[str]]]) -> Tensor:
        scores = torch.as_tensor(self.cider.scores(captions, references), dtype=torch.float32)  # (N,)
        pairs = list(zip(captions, references, strict=True))
        if self.bleu:
            bleu = [sentence_bleu(refs, cap) for cap, refs in pairs]
            scores = scores + self.bleu * torch.tensor(bleu, dtype=torch.float32)
        if self.meteor:
            meteor = [unigram_fmean(refs, cap) for cap, refs in pairs]
            scores = scores + self.meteor * torch.tensor(meteor, dtype=torch.float32)
        return scores


def self_critical_step(
    model: CaptionModel,
    vocab: Vocabulary,
    features: Tensor,
    references: list[list[list[str]]],
    reward: CaptionReward,
    samples: int = 5,
    baseline: str = "greedy",
    max_len: int = 30,
    max_groups: int = 4,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One SCST loss: features (B, L, D) of B images, ``references`` per image -> (loss, stats).

    K = ``samples`` captions per image, each of at most ``max_len`` words and then its end (as validation and
    ``caption`` decode), are drawn from the model's distribution (rows b*K .. b*K+K-1 are image b's),
    scored with ``reward``, and compared with ``baseline`` ("greedy" or "leave_one_out"); the shared
    :func:`text_attn.core.self_critical.self_critical_step` does the rest, scoring the samples in up to ``max_groups``
    groups of similar length. Each image's region keys are projected once for all its samples.
    """
    bos, eos = vocab.bos_id, vocab.eos_id
    banned = (vocab.pad_id, vocab.bos_id, vocab.unk_id)  # what `caption` never writes (Captioner.generate)

    def cider(token_lists: list[list[int]], copies: int) -> Tensor:  # (len,)
        refs = [r for r in references for _ in range(copies)]
        return reward([vocab.decode(ids) for ids in token_lists], refs).to(features.device)

    # end_step: max_len counts words, the end not among them, as validation and `caption` decode (Captioner.generate):
    # a caption of exactly max_len words ends, and the end's probability is trained
    search = {"banned": banned, "end_step": True}
    return shared_step(
        model,
        sample=lambda: model.generate(features, bos, eos, max_len, sampling=Sampling(), copies=samples, **search),
        greedy=lambda: model.generate(features, bos, eos, max_len, **search),
        reward=cider,
        # (n, T, V) for samples ``rows``, each of image row // K: the image's keys projected once for its K samples
        score=lambda inputs, rows: model.decoder(features, inputs, rows=rows // samples).logits,
        samples=samples,
        baseline=baseline,
        bos_id=bos,
        pad_id=vocab.pad_id,
        max_groups=max_groups,
        banned=banned,
    )
