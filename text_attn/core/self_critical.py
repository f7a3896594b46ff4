"""Self-critical sequence training (Rennie et al. 2017): REINFORCE on a sequence-level reward, with a baseline that
comes from the model itself.

For each source (an image, a source sentence) the model samples K sequences w¹..wᴷ; each gets a reward r (CIDEr-D,
BLEU, ...) and a baseline b that does not depend on the sample: the reward of the model's own greedy decode of the
same source (the paper), or, with K > 1, the mean reward of the OTHER K − 1 samples of the same source
("leave-one-out"; needs no extra greedy decode). The policy gradient  −(r − b) ∇ log p(w)  raises the probability
of samples that beat the baseline and lowers that of samples that fall short; a sample as good as the baseline
teaches nothing.

Layout: the N = B · K samples are stacked with the samples of one source next to each other, sample k of source b at
row b · K + k (what ``x.repeat_interleave(K, dim=0)`` gives). Sequences are (N, T) per-token log-probabilities of the
sampled tokens with a mask of the real tokens: every sampled word AND the eos that ended the sample (its probability
decides the length, which CIDEr-D's length penalty scores), nothing after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from text_attn.core.training import check_options
from text_attn.core.unread_options import Unread

if TYPE_CHECKING:
    from text_attn.core.decoding import SearchResult

NORMALISATIONS = ("tokens", "sequences")
BASELINES = ("greedy", "leave_one_out")
OBJECTIVE_PREFIX = "model.objective"  # where both families' configs set the objective's options


def self_critical_loss(
    sample_log_probs: Tensor,
    sample_mask: Tensor,
    rewards: Tensor,
    baseline: Tensor,
    normalise: str = "tokens",
) -> tuple[Tensor, dict[str, Tensor]]:
    """The self-critical surrogate loss, to MINIMISE.

    Args:
        sample_log_probs: (N, T) log p(w_t | w_<t, source) of each sampled token (a graph to the model's parameters).
        sample_mask: (N, T) bool, True on real tokens (words and the ending eos), False on padding after it.
        rewards: (N,) each sample's reward. baseline: (N,) its baseline (``greedy_baseline`` /
            ``leave_one_out_baseline``). Both are treated as constants (detached).
        normalise: ``tokens`` (default, as in the common SCST code): loss = −Σ_i (r_i − b_i) Σ_t log p(w_it) / Σ_i T_i,
            a mean over all real tokens of the batch, so the step size does not grow with caption length;
            ``sequences``: loss = −mean_i (r_i − b_i) Σ_t log p(w_it), the plain REINFORCE estimate per sample.

    Returns:
        (loss, stats): stats are detached scalars: ``reward`` (mean r), ``baseline`` (mean b), ``advantage`` (mean
        r − b), ``better`` (fraction of samples with r > b), ``tokens`` (mean real tokens per sample).
    """
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {NORMALISATIONS}, got {normalise!r}")
    if sample_log_probs.dim() != 2 or sample_mask.shape != sample_log_probs.shape:
        raise ValueError(
            f"sample_log_probs and sample_mask must both be (N, T), got {tuple(sample_log_probs.shape)} and "
            f"{tuple(sample_mask.shape)}"
        )
    n = sample_log_probs.size(0)
    if rewards.shape != (n,) or baseline.shape != (n,):
        raise ValueError(f"rewards and baseline must be ({n},), got {tuple(rewards.shape)} and {tuple(baseline.shape)}")
    mask = sample_mask.bool()
    rewards = rewards.detach().to(sample_log_probs.dtype)
    baseline = baseline.detach().to(sample_log_probs.dtype)
    advantage = rewards - baseline  # (N,)
    # where, not multiply: a padded step's log-prob may be -inf (a banned token), and 0 * -inf is nan.
    seq_log_prob = torch.where(mask, sample_log_probs, torch.zeros_like(sample_log_probs)).sum(dim=1)  # (N,)
    weighted = -(advantage * seq_log_prob)  # (N,)
    tokens = mask.sum()
    if normalise == "tokens":
        loss = weighted.sum() / tokens.clamp(min=1)
    else:
        loss = weighted.mean() if n else weighted.sum()
    stats = {
        "reward": rewards.mean(),
        "baseline": baseline.mean(),
        "advantage": advantage.mean(),
        "better": (advantage > 0).to(rewards.dtype).mean(),
        "tokens": tokens.to(rewards.dtype) / max(n, 1),
    }
    return loss, {k: v.detach() for k, v in stats.items()}


def greedy_baseline(greedy_rewards: Tensor, samples_per_source: int) -> Tensor:
    """The greedy decode's reward of each source, repeated for its K samples.  (B,) -> (B · K,)"""
    if samples_per_source < 1:
        raise ValueError(f"samples_per_source must be at least 1, got {samples_per_source}")
    return greedy_rewards.detach().repeat_interleave(samples_per_source)


def leave_one_out_baseline(rewards: Tensor, samples_per_source: int) -> Tensor:
    """Each sample's baseline = the mean reward of the other K − 1 samples of its source.  (B · K,) -> (B · K,)"""
    k = samples_per_source
    if k < 2:
        raise ValueError(f"a leave-one-out baseline needs at least 2 samples per source, got {k}")
    if rewards.dim() != 1 or rewards.numel() % k:
        raise ValueError(f"rewards must be (B * {k},), got shape {tuple(rewards.shape)}")
    r = rewards.detach().view(-1, k)  # (B, K)
    return ((r.sum(dim=1, keepdim=True) - r) / (k - 1)).reshape(-1)


def scst_baseline(kind: str, rewards: Tensor, samples_per_source: int, greedy_rewards: Tensor | None = None) -> Tensor:
    """The baseline of each sample by name: ``greedy`` (needs greedy_rewards, (B,)) or ``leave_one_out`` (K > 1).

    rewards: (B · K,) the samples' rewards. Returns (B · K,).
    """
    if kind == "greedy":
        if greedy_rewards is None:
            raise ValueError("the greedy baseline needs greedy_rewards: the reward of each source's greedy decode")
        if greedy_rewards.numel() * samples_per_source != rewards.numel():
            raise ValueError(
                f"{greedy_rewards.numel()} greedy rewards x {samples_per_source} samples per source != "
                f"{rewards.numel()} sample rewards"
            )
        return greedy_baseline(greedy_rewards, samples_per_source)
    if kind == "leave_one_out":
        return leave_one_out_baseline(rewards, samples_per_source)
    raise ValueError(f"unknown baseline {kind!r}; choose one of {BASELINES}")


def teacher_inputs(tokens: Tensor, lengths: Tensor, bos_id: int, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """Sampled sequences -> what teacher forcing needs to score them again with gradients.

    tokens (N, T) generated ids (a ``SearchResult``: eos included when produced, anything after it), lengths (N,) the
    generated tokens per row, eos included. Returns inputs (N, T) = bos + tokens[:, :-1], targets (N, T) = tokens
    with pad after each row's end, and mask (N, T) bool, True on the real tokens (position < length).
    """
    steps = torch.arange(tokens.size(1), device=tokens.device)
    mask = steps.unsqueeze(0) < lengths.unsqueeze(1)  # (N, T)
    targets = tokens.masked_fill(~mask, pad_id)
    bos = targets.new_full((tokens.size(0), 1), bos_id)
    return torch.cat([bos, targets[:, :-1]], dim=1), targets, mask


def ban_logits(logits: Tensor, banned: Sequence[int]) -> Tensor:
    """logits (..., V) with the ``banned`` token ids at -inf (what the search's ban does to its log-probabilities)."""
    ids = torch.tensor(list(banned), device=logits.device)
    return logits.index_fill(-1, ids, float("-inf"))


def token_log_probs(logits: Tensor, targets: Tensor) -> Tensor:
    """logits (N, T, V), targets (N, T) -> log p(targets[n, t]) (N, T): what ``self_critical_loss`` takes."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def length_groups(lengths: Tensor, max_groups: int = 4) -> list[tuple[Tensor, int]]:
    """Split N sequences by length into at most ``max_groups`` groups -> [(rows (n_g,), steps T_g)], T_g the longest
    length in the group, chosen to make Σ n_g T_g (the teacher-forced steps run) smallest.

    Samples end anywhere from the first word to the length cap: scored as one (N, T_max) batch, half of the steps of
    a typical SCST batch are padding after the end. Groups of similar length skip most of them. Exact optimum over
    contiguous runs of the sorted lengths, by dynamic programming over the distinct lengths (at most T_max + 1 of
    them). Empty rows (length 0) need no scoring and are left out."""
    lengths = lengths.long()
    values, counts = torch.unique(lengths[lengths > 0], return_counts=True)  # ascending
    vals, cnts = values.tolist(), counts.tolist()
    m = len(vals)
    if m == 0:
        return []
    before = [0]
    for c in cnts:
        before.append(before[-1] + c)
    inf = float("inf")
    # cost[g][j]: the least steps for the first j distinct lengths in g groups; cut[g][j]: where its last group starts
    cost = [[0.0] + [inf] * m] + [[inf] * (m + 1) for _ in range(max_groups)]
    cut = [[0] * (m + 1) for _ in range(max_groups + 1)]
    for g in range(1, max_groups + 1):
        for j in range(1, m + 1):
            for i in range(j):  # last group: distinct lengths i .. j-1, all padded to vals[j-1]
                c = cost[g - 1][i] + (before[j] - before[i]) * vals[j - 1]
                if c < cost[g][j]:
                    cost[g][j], cut[g][j] = c, i
    g = min(range(1, max_groups + 1), key=lambda k: cost[k][m])
    bounds, j = [], m
    while j > 0:
        i = cut[g][j]
        bounds.append((vals[i], vals[j - 1]))
        j, g = i, g - 1
    return [(((lengths >= lo) & (lengths <= hi)).nonzero().squeeze(1), hi) for lo, hi in reversed(bounds)]


def grouped_token_log_probs(
    score: Callable[[Tensor, Tensor], Tensor], inputs: Tensor, targets: Tensor, mask: Tensor, max_groups: int = 4
) -> Tensor:
    """Teacher-forced log-probabilities of ``targets`` (N, T) -> (N, T), zero where ``mask`` (N, T) (True on each
    row's real tokens, :func:`teacher_inputs`) is False, scored group by group (:func:`length_groups` of the rows'
    lengths): ``score(inputs[rows, :T_g], rows)`` -> logits (n_g, T_g, V) of those rows. A row's log-probabilities do
    not depend on the other rows of its batch (eval mode, no batch statistics), so this equals scoring all N rows at
    once over T steps, on the real tokens."""
    out = torch.zeros(targets.shape, dtype=torch.float32, device=targets.device)
    for rows, steps in length_groups(mask.sum(dim=1), max_groups):
        logp = token_log_probs(score(inputs[rows, :steps], rows), targets[rows, :steps])  # (n_g, T_g)
        logp = torch.where(mask[rows, :steps], logp, torch.zeros_like(logp))  # where: a padded step may be -inf
        out = out.index_put((rows,), F.pad(logp, (0, targets.size(1) - steps)))
    return out


def self_critical_step(
    policy: nn.Module,
    sample: Callable[[], SearchResult],
    greedy: Callable[[], SearchResult],
    reward: Callable[[list[list[int]], int], Tensor],
    score: Callable[[Tensor, Tensor], Tensor],
    samples: int,
    baseline: str,
    bos_id: int,
    pad_id: int,
    max_groups: int = 4,
    banned: Sequence[int] = (),
) -> tuple[Tensor, dict[str, Tensor]]:
    """One self-critical loss, the same for every family: ``policy`` (the network) runs in eval mode throughout (no
    dropout: the policy that draws a sequence is the one whose log-probabilities are raised).

    ``banned``: the token ids the family's search never writes (a caption's <unk>, <pad>, <bos>), which sample() and
    greedy() must ban too; their logits are set to -inf before the samples are scored, so the log-probabilities
    raised are those of the distribution the samples were drawn from (renormalised without them), the policy that
    ``caption`` / ``translate`` decode with.

    sample() -> K = ``samples`` sampled sequences per source (rows b*K .. b*K+K-1 are source b's); greedy() -> one
    greedy sequence per source (called only for the ``greedy`` baseline); reward(token lists, copies per source) ->
    (len,) rewards; score(inputs (n, T'), rows (n,)) -> teacher-forced logits (n, T', V), with gradients, of the
    samples ``rows`` (of the N = B*K; sample row r is of source r // K). The samples are scored in up to
    ``max_groups`` groups of similar length (:func:`grouped_token_log_probs`; 1: all at once).
    """
    was_training = policy.training
    policy.eval()
    try:
        with torch.no_grad():
            drawn = sample()
            rewards = reward(drawn.token_lists(), samples)  # (B*K,)
            best = reward(greedy().token_lists(), 1) if baseline == "greedy" else None  # (B,)
            b = scst_baseline(baseline, rewards, samples, best)
        inputs, targets, mask = teacher_inputs(drawn.tokens, drawn.lengths, bos_id, pad_id)
        scored = score if not banned else (lambda x, rows: ban_logits(score(x, rows), banned))
        log_probs = grouped_token_log_probs(scored, inputs, targets, mask, max_groups)
        return self_critical_loss(log_probs, mask, rewards, b)
    finally:
        policy.train(was_training)


@dataclass(frozen=True)
class SequenceObjectiveConfig:
    """The ``model.objective`` options both families take; each family's ObjectiveConfig adds its own.

    label_smoothing: cross-entropy label smoothing.
    attn_sup_lambda: weight λ of attention supervision (the cross-entropy between α_t and the ground-truth attention,
        where the data has it: ``data.attention_targets: true``); 0 = off.
    scst: self-critical sequence training (above) instead of cross-entropy; start it from a trained model
        (``model.init_from``: a fit without one is refused, :func:`check_scst_start`); label smoothing, a
        cross-entropy option, is refused beside it. scst_samples: K samples per source. scst_baseline: ``greedy``
        (the reward of the greedy decode, the paper's choice) or ``leave_one_out`` (the mean reward of the source's
        other K − 1 samples; needs K >= 2). scst_max_len: longest sample, in words or tokens and then its end (as
        ``--max-len`` counts; null: the family's own, as its validation decodes: a caption's model.val_max_len words,
        each text source's own cap, 2 x (its tokens and end) + 10).
    A bad value is one ValueError line naming it as ``model.objective.NAME``.
    """

    label_smoothing: float = 0.0
    attn_sup_lambda: float = 0.0
    scst: bool = False
    scst_samples: int = 5
    scst_baseline: str = "greedy"
    scst_max_len: int | None = None

    def __post_init__(self):
        prefix = OBJECTIVE_PREFIX
        check_options(prefix, label_smoothing=(self.label_smoothing, 0, 0.99))
        if self.attn_sup_lambda < 0:
            raise ValueError(f"{prefix}.attn_sup_lambda must be >= 0, got {self.attn_sup_lambda}")
        if self.scst_baseline not in BASELINES:
            raise ValueError(f"{prefix}.scst_baseline must be one of {BASELINES}, got {self.scst_baseline!r}")
        least = 2 if self.scst_baseline == "leave_one_out" else 1
        if self.scst_samples < least:
            raise ValueError(
                f"{prefix}.scst_samples must be >= {least} with the {self.scst_baseline} baseline, "
                f"got {self.scst_samples}"
            )
        if self.scst_max_len is not None and self.scst_max_len < 1:
            raise ValueError(f"{prefix}.scst_max_len must be >= 1 (or null), got {self.scst_max_len}")
        if self.scst and self.label_smoothing > 0:
            raise ValueError(unused_under_scst("label_smoothing", self.label_smoothing))


def unused_under_scst(name: str, value: float) -> str:
    """The refusal of a cross-entropy option set beside ``scst`` (label smoothing; a caption's doubly stochastic
    penalty): SCST's loss is the samples' reward, so the option changed nothing that trains (only the val_loss
    reported), silently."""
    return (
        f"{OBJECTIVE_PREFIX}.{name} {value:g} has no effect under {OBJECTIVE_PREFIX}.scst (its loss is the sampled "
        f"sequences' reward, not the cross-entropy loss this option is part of): set {OBJECTIVE_PREFIX}.{name} 0"
    )


SCST_OPTIONS = ("scst_samples", "scst_baseline", "scst_max_len")  # what only SCST reads, in both families


def unread_without_scst(objective: dict, extra: tuple[str, ...] = ()) -> list[Unread]:
    """The SCST options (and a family's ``extra`` ones) as unread by a run without ``scst`` (``objective``: the parsed
    block): given, they trained a cross-entropy model silently (text_attn.core.unread_options)."""
    if objective.get("scst"):
        return []
    names = tuple(f"{OBJECTIVE_PREFIX}.{n}" for n in (*SCST_OPTIONS, *extra))
    return [Unread(names, f"a run without {OBJECTIVE_PREFIX}.scst", f"set {OBJECTIVE_PREFIX}.scst true (self-critical "
                   "training, from model.init_from)")]  # fmt: skip


def check_scst_start(cfg: SequenceObjectiveConfig, init_from: str | None, from_checkpoint: bool) -> None:
    """One ValueError line for a fit that would train self-critically from random weights: ``scst`` without
    ``model.init_from`` (a first stage's weights), unless the module holds a checkpoint's (``from_checkpoint``: a
    resume with ``--ckpt_path``, load_from_checkpoint). From random weights the samples earn next to no reward and the
    run learns little, with nothing said."""
    if cfg.scst and not init_from and not from_checkpoint:
        raise ValueError(
            f"{OBJECTIVE_PREFIX}.scst starts from a trained model's weights: give model.init_from (the first stage's "
            "model file or checkpoint), or resume an SCST run with --ckpt_path"
        )
