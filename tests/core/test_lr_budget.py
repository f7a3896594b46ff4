"""The budget learning-rate schedule: the rate falls linearly to zero over steps, epochs or wall time, whichever
ends the run first; a resumed fit decays what is left. (A caption fit with the schedule really ends at rate zero:
tests/captioning/test_caption_lr_budget.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.callbacks import Timer

from text_attn.core.lr_budget import BudgetProgress, budget_scheduler


class _Clock(Timer):
    """A Timer whose elapsed and remaining seconds the test sets."""

    def __init__(self, elapsed: float, duration: float | None):
        super().__init__()
        self.elapsed, self.duration = elapsed, duration

    def time_elapsed(self, stage="train") -> float:
        return self.elapsed

    def time_remaining(self, stage="train") -> float | None:
        return None if self.duration is None else self.duration - self.elapsed


def _trainer(step=0, max_steps=-1, max_epochs=None, batches=float("inf"), clock=None):
    return SimpleNamespace(
        global_step=step,
        max_steps=max_steps,
        max_epochs=max_epochs,
        num_training_batches=batches,
        accumulate_grad_batches=1,
        callbacks=[clock] if clock is not None else [],
    )


def test_progress_is_the_first_budget_to_end():
    assert BudgetProgress(_trainer(step=25, max_steps=100))() == 0.25
    assert BudgetProgress(_trainer(step=25, max_epochs=2, batches=50))() == 0.25  # 25 of 100 steps
    assert BudgetProgress(_trainer(step=10, max_steps=100, clock=_Clock(30, 60)))() == 0.5  # time ends first
    assert BudgetProgress(_trainer(step=90, max_steps=100, clock=_Clock(30, 60)))() == 0.9  # steps end first
    assert BudgetProgress(_trainer(step=500, max_steps=100))() == 1.0  # never past the end


def test_a_resumed_fit_decays_what_is_left_and_progress_never_falls():
    clock = _Clock(30, 60)
    p = BudgetProgress(_trainer(clock=clock), saved=0.5)  # written half way: the new max_time covers the other half
    assert p() == 0.75
    clock.elapsed = 0  # a clock that went back does not raise the rate again
    assert p() == 0.75


def test_the_scheduler_scales_the_rate_after_every_step():
    trainer = _trainer(max_steps=4)
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=0.2)
    sched = budget_scheduler(opt, BudgetProgress(trainer))["scheduler"]
    lrs = []
    for step in range(1, 5):
        trainer.global_step = step
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == pytest.approx([0.15, 0.1, 0.05, 0.0])
    assert "lr_lambdas" in sched.state_dict()  # saves (no trainer inside)


def test_no_budget_is_one_clear_error():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="needs a budget"):
        budget_scheduler(opt, BudgetProgress(_trainer(max_epochs=-1)))
    # a checkpoint whose budget is spent, resumed with a larger max_steps: it trained at rate 0, the weights unchanged
    with pytest.raises(ValueError, match="learning-rate budget is spent .* --model.init_from CHECKPOINT"):
        budget_scheduler(opt, BudgetProgress(_trainer(step=2, max_steps=4), saved=1.0))
    budget_scheduler(opt, BudgetProgress(_trainer(step=2, max_steps=4), saved=0.99))  # some budget left: resumed


def test_with_accumulated_gradients_the_rate_reaches_zero_at_the_runs_last_step(tmp_path):
    # 8 batches accumulated by 3: Lightning steps after batches 3, 6 and 8 (the epoch's last), 3 steps an epoch
    import pytorch_lightning as pl

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(1))
            self.rates: list[float] = []

        def training_step(self, batch, _):
            return (self.w * batch).sum() ** 2

        def on_train_batch_end(self, *_):
            self.rates.append(self.optimizers().param_groups[0]["lr"])

        def configure_optimizers(self):
            opt = torch.optim.SGD([self.w], lr=0.01)
            return {"optimizer": opt, "lr_scheduler": budget_scheduler(opt, BudgetProgress(self.trainer))}

    model = Tiny()
    trainer = pl.Trainer(max_epochs=2, accumulate_grad_batches=3, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(model, torch.utils.data.DataLoader(torch.ones(8, 1), batch_size=1))
    assert trainer.global_step == 6
    stepped = [model.rates[i] for i in (2, 5, 7, 10, 13, 15)]  # the rate after each optimizer step
    assert stepped == pytest.approx([0.01 * (1 - k / 6) for k in range(1, 7)])  # 0 only after the last
