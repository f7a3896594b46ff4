"""Training progress as a line now and then, for a run whose output is no terminal (a log file, ``| tee``, nohup, a
batch scheduler).

Lightning's bar redraws itself with carriage returns: in a log file that is ~215 bytes a step on one line that grep
and ``tail -f`` read as a single line, and it tells nothing a person can read at a glance. When the trainers' stdout
(where the bar goes) is no terminal and ``trainer.enable_progress_bar`` was not given, the bar is off and
:class:`ProgressLines` writes to stderr: a line once the first step is done, then one a minute, and one after each
validation with its metrics (``text_attn.core.lightning_cli``). A score on sacrebleu's 0..100 scale says so
(``val_sacrebleu 23.4/100``) beside the 0..1 ones (``val_bleu 0.2312``), as a real corpus's validation logs both.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import pytorch_lightning as pl

from text_attn.core.run_report import out_of_100

EVERY_S = 60.0


def _number(value: object) -> str:
    try:
        x = float(value)  # a 0-d tensor or a number
    except (TypeError, ValueError):
        return str(value)
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def _metrics(metrics: dict) -> str:
    """'val_bleu 0.2312, val_sacrebleu 23.4/100': each metric and its value, a 0..100 score with its scale."""
    return ", ".join(f"{k} {_number(v)}" + ("/100" if out_of_100(k) else "") for k, v in metrics.items())


def duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


class ProgressLines(pl.Callback):
    """A line on ``stream`` (stderr) after the first training step, then at most one every ``every`` seconds, and one
    after each validation (not the sanity check); on the first process only. ``clock``: for tests."""

    def __init__(self, prog: str, every: float = EVERY_S, stream=None, clock: Callable[[], float] = time.monotonic):
        self.prog, self.every, self._stream, self._clock = prog, every, stream, clock
        self._start: tuple[float, int] | None = None  # (time, step) where this process's training began
        self._said: tuple[float, int] | None = None  # the last line's (time, step)

    def _say(self, trainer: pl.Trainer, text: str) -> None:
        if trainer.is_global_zero:
            self.say(text)

    def say(self, text: str) -> None:
        """One line, ``prog: text`` (also for work of the run's own that a bar would show: caching features)."""
        stream = self._stream or sys.stderr
        try:
            print(f"{self.prog}: {text}", file=stream, flush=True)
        except (OSError, ValueError):  # stderr closed too: the run goes on without news
            pass

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = (self._clock(), trainer.global_step)
        self._said = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self._start is None:
            return
        now, step = self._clock(), trainer.global_step
        recent = self._said is not None and (step == self._said[1] or now - self._said[0] < self.every)
        if step == self._start[1] or recent:
            return  # no optimizer step yet (gradients accumulating), or a line said less than `every` ago
        self._said = (now, step)
        self._say(trainer, self.step_line(trainer, now, step))

    def step_line(self, trainer: pl.Trainer, now: float, step: int) -> str:
        """``step 400 of 2,000 (epoch 2), 3.1 steps/s, train_loss 2.345; about 8 min left``."""
        total = trainer.estimated_stepping_batches  # max_steps, or the epochs' steps; inf when neither bounds it
        of = f" of {int(total):,}" if math.isfinite(total) else ""
        line = f"step {step:,}{of} (epoch {trainer.current_epoch})"
        t0, s0 = self._start  # type: ignore[misc]
        rate = (step - s0) / (now - t0) if now > t0 else 0.0
        if rate > 0:
            line += f", {rate:.3g} steps/s"
        metrics = _metrics(trainer.progress_bar_metrics)
        if metrics:
            line += f", {metrics}"
        if math.isfinite(total) and step >= total:
            return line  # the last step: nothing left (the time limit's budget was said as left: "about 2 min")
        seconds = (total - step) / rate if rate > 0 and math.isfinite(total) else math.inf
        timer = next((c for c in trainer.callbacks if isinstance(c, pl.callbacks.Timer)), None)  # max_time
        budget = timer.time_remaining("train") if timer is not None else None
        if budget is not None and budget < seconds:  # the time limit ends the run first (most shipped text configs)
            seconds, why = budget, " (max_time)"
        else:
            why = ""
        if math.isfinite(seconds):
            left = duration(seconds)
            line += f"; {left} left{why}" if left.startswith("under") else f"; about {left} left{why}"
        return line

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        shown = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val")}
        metrics = _metrics(dict(sorted(shown.items())))
        where = f"step {trainer.global_step:,} (epoch {trainer.current_epoch})"
        self._say(trainer, f"validated at {where}" + (f": {metrics}" if metrics else ""))
