"""A learning rate that falls to zero exactly when the run's budget ends: steps, epochs or wall time.

Runs here are capped by ``trainer.max_time`` as often as by a step count (a CPU run of "15 minutes" is a different
number of steps on every machine). A step-based schedule cannot end on time, and a plateau schedule cuts the rate
late, on noisy validations. Decaying the rate linearly to zero over the budget, whichever of its limits comes first,
is the simple schedule that Li, Yumer and Ramanan ("Budgeted Training", ICLR 2020) found best for a fixed budget:
the run ends annealed, wherever its budget ends.

Progress p in [0, 1] is the largest of: global_step / max_steps, global_step / (max_epochs x batches per epoch) and
elapsed / max_time. The factor on the base rate is 1 - p. A resumed fit gets a max_time of its own
(text_attn.core.training.forget_elapsed_time), so the time part continues from the progress saved with the
checkpoint: p = p_saved + (1 - p_saved) x elapsed / max_time. p never falls.
"""

from __future__ import annotations

import torch

LR_SCHEDULES = ("plateau", "budget")


def _timer(trainer):
    """The trainer's Timer callback (there when max_time is set), else None."""
    from pytorch_lightning.callbacks import Timer  # here: importing the core never loads Lightning

    return next((c for c in trainer.callbacks if isinstance(c, Timer)), None)


class BudgetProgress:
    """How far a fit is through its budget (module doc). ``last`` is what a checkpoint keeps; a fit resumed from it
    passes it back as ``saved``."""

    def __init__(self, trainer, saved: float = 0.0) -> None:
        self.trainer = trainer
        self.saved = saved  # progress when the checkpoint this fit resumed from was written
        self.last = saved

    def check(self) -> None:
        """Raise when the trainer sets no budget at all (no max_steps, max_epochs or max_time), and when the fit
        resumes from a checkpoint whose budget is spent: its rate is 0 and stays there (p never falls), so every
        step would change nothing (a resume with a larger max_steps trained at rate 0, its weights unchanged)."""
        if self.saved >= 1.0:
            raise ValueError(
                "the checkpoint's learning-rate budget is spent (the budget schedule's rate reached 0 at its last "
                "step): resumed, the fit would train at rate 0. To train further, start a new run from it with a "
                "budget of its own: --model.init_from CHECKPOINT (or its model file) instead of --ckpt_path"
            )
        t = self.trainer
        timer = _timer(t)
        if (t.max_steps or -1) <= 0 and (t.max_epochs or -1) <= 0 and (timer is None or timer.time_remaining() is None):
            raise ValueError(
                "the budget learning-rate schedule needs a budget: set trainer.max_steps, max_epochs or max_time"
            )

    def __call__(self) -> float:
        t = self.trainer
        parts = []
        if (t.max_steps or -1) > 0:
            parts.append(t.global_step / t.max_steps)
        batches = t.num_training_batches
        if (t.max_epochs or -1) > 0 and isinstance(batches, int) and batches > 0:
            # Lightning also steps on an epoch's last batch: 8 batches accumulated by 3 are 3 steps, not 2
            per_epoch = max(1, -(-batches // max(1, t.accumulate_grad_batches)))
            parts.append(t.global_step / (t.max_epochs * per_epoch))
        timer = _timer(t)
        remaining = timer.time_remaining() if timer is not None else None
        if remaining is not None:
            elapsed = timer.time_elapsed()
            duration = elapsed + remaining
            if duration > 0:
                parts.append(self.saved + (1 - self.saved) * elapsed / duration)
        self.last = min(1.0, max([self.last, *parts]))
        return self.last


def budget_scheduler(optimizer: torch.optim.Optimizer, progress: BudgetProgress) -> dict:
    """Lightning's scheduler entry: the rates times 1 - progress, updated after every optimizer step."""
    progress.check()
    # A closure, not a callable object: LambdaLR's state_dict would try to save an object's fields (the trainer).
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _step: 1.0 - progress())
    return {"scheduler": sched, "interval": "step"}
