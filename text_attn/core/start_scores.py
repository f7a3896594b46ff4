"""A fit from ``model.init_from`` against its start, both families: the start's val scores (the sanity check's, before
the first step), the monitored metric before training and at the best checkpoint said in one line at the fit's end,
and which weights the model file gets.

Over the whole val split (``trainer.num_sanity_val_steps: -1``) the sanity check scores the start as every later
validation scores a checkpoint; over part of it, no score is comparable with a checkpoint's (a few batches' score
against the whole split's said "training did not beat the start" by chance), and the line says how to take one. Where
the start scored better than the best checkpoint, a self-critical stage's model file holds the start's weights (SCST
optimises the very score the checkpoints are chosen by: a stage that did not beat its start on it only made the model
worse), and the ``wrote`` line says so. A cross-entropy fit from a start (new photos, new
words) keeps its trained weights: a few val photos' score misses what it learned (docs/captioning.md, "Teach it your
photos": on the dog photos held out before 2026-12-02, 57.81 val CIDEr-D against the start's 62.11, yet 67.56 on
test against 64.07).
Lightning is not imported here: these take the trainer they are given.
"""

from __future__ import annotations

import math
import struct

from text_attn.core.run_report import out_of_100


class StartScores:
    """The start's val scores of one fit: :meth:`record` from the module's val epoch end, :meth:`verdict` at the fit's
    end."""

    def __init__(self) -> None:
        self.scores: dict[str, float] = {}  # the sanity check's over the whole split, by logged name (val_CIDEr, ...)
        self.partial: tuple[float, float, frozenset[str]] | None = None  # over part: (batches done, of, names)
        self.weights: str | None = None  # a digest of the weights scored (training.weights_digest)

    def record(self, trainer, init_from: str | None, scores: dict[str, float], weights=None) -> None:
        """``scores`` of a validation just done, by logged name: kept when it is the sanity check before a fit's
        first step from ``init_from`` (a resumed fit's sanity check scores its checkpoint, not the start).
        ``weights()``: a digest of the weights scored, kept beside them (the start put back at the fit's end must be
        those: a file replaced since was written as the start that scored)."""
        if not (trainer.sanity_checking and init_from and trainer.global_step == 0):
            return
        done, batches = sum(trainer.num_sanity_val_batches), sum(trainer.num_val_batches)
        if done >= batches:
            self.scores = dict(scores)
            self.weights = weights() if weights is not None else None
        else:
            self.partial = (done, batches, frozenset(scores))

    def state(self) -> dict | None:
        """What a checkpoint keeps of them (plain numbers and names: it loads with weights_only), so that a resumed
        fit still compares its best with the start and a self-critical stage still writes the start's weights where
        they scored better (a resumed SCST fit wrote weights worse than its start, unsaid); None: nothing kept."""
        if self.scores:
            kept = {"scores": {k: float(v) for k, v in self.scores.items()}}
            return kept | ({"weights": self.weights} if self.weights else {})
        if self.partial is not None:
            done, batches, names = self.partial
            return {"partial": [float(done), float(batches), sorted(names)]}
        return None

    def restore(self, state) -> None:
        """The scores :meth:`state` kept, from a resumed fit's checkpoint (one of another shape: left as it is)."""
        if not isinstance(state, dict):
            return
        scores, partial = state.get("scores"), state.get("partial")
        if isinstance(scores, dict):
            self.scores = {str(k): float(v) for k, v in scores.items() if isinstance(v, (int, float))}
            self.weights = state["weights"] if isinstance(state.get("weights"), str) else None
        elif isinstance(partial, list) and len(partial) == 3 and isinstance(partial[2], list):
            self.partial = (float(partial[0]), float(partial[1]), frozenset(map(str, partial[2])))

    def verdict(self, trainer, name: str | None, examples: str = "val examples") -> tuple[str | None, bool]:
        """(the fit's-end line, or None; whether the start scored better than the best checkpoint) for the first
        ModelCheckpoint whose monitored metric the start was scored on. ``name``: init_from as the line names it;
        ``examples``: what the split holds, and what to make of a start as good (``val photos (the start may caption
        them as well)``)."""
        for cb in getattr(trainer, "checkpoint_callbacks", []):
            metric, best = getattr(cb, "monitor", None), getattr(cb, "best_model_score", None)
            if metric is None or best is None:
                continue
            best, larger = float(best), getattr(cb, "mode", "min") == "max"
            if metric in self.scores:
                # as logged: the checkpoint's best is the float32 Lightning kept, the start's a float64; equal scores
                # differed in their last digits and the start's weights were "better" on a tie (written back)
                start = float(struct.unpack("f", struct.pack("f", self.scores[metric]))[0])
                line = f"{metric}: {shown(metric, start)} from model.init_from {name} before training, "
                line += f"{shown(metric, best)} at the best checkpoint{scale(metric)}"
                better = start > best if larger else start < best
                if better or start == best:
                    line += f": training did not beat the start on these {examples}"
                return line, better
            if self.partial is not None and metric in self.partial[2]:
                done, batches = self.partial[:2]  # batches: inf for a loader of no length
                part = f"{done:.0f} of the {batches:.0f}" if math.isfinite(batches) else f"{done:.0f} of the"
                line = (f"{metric}: {shown(metric, best)} at the best checkpoint{scale(metric)}; no start score to "
                        f"compare: the sanity check validated model.init_from {name} on {part} val batches "
                        "(trainer.num_sanity_val_steps -1 validates the whole split before training)")  # fmt: skip
                return line, False
        return None, False


def scale(metric: str) -> str:
    """What the line says after a score :func:`shown` gives out of 100 that the logs keep as a fraction (a val_bleu
    of 70.24 in the line was 0.7024 in metrics.csv, unsaid); "" for a loss and sacreBLEU's own 0-100."""
    return "" if metric.endswith("loss") or out_of_100(metric) else " (as 0-100; logged as a fraction, 0-1)"


def shown(metric: str, value: float) -> str:
    """A logged score as the lines give it: fractions (BLEU-4, CIDEr) as 0-100, sacreBLEU's own 0-100 as it is, a
    loss as it is."""
    if metric.endswith("loss"):
        return f"{value:.4f}"
    return f"{value if out_of_100(metric) else 100 * value:.2f}"
