"""Training news for a log file: a line after the first step, then one a minute, one after each validation (not the
sanity check); and an output whose reader has gone that does not end the run (BrokenPipeError inside Lightning's loop
ended a fit piped to ``tee`` with a traceback and no last.ckpt)."""

from __future__ import annotations

import io
import os
from types import SimpleNamespace

from text_attn.core.closed_outputs import _DropWhenClosed, is_terminal, survive_closed_outputs
from text_attn.core.progress_lines import ProgressLines, duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def trainer(**kw) -> SimpleNamespace:
    base = dict(global_step=0, current_epoch=0, estimated_stepping_batches=2000, progress_bar_metrics={},
                callback_metrics={}, is_global_zero=True, sanity_checking=False, callbacks=[])  # fmt: skip
    return SimpleNamespace(**{**base, **kw})


def lines_of(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_a_line_after_the_first_step_then_at_most_one_a_minute_with_rate_metrics_and_time_left():
    out, clock, t = io.StringIO(), Clock(), trainer()
    cb = ProgressLines("text-train", stream=out, clock=clock)
    cb.on_train_start(t, None)
    clock.now += 4.0
    cb.on_train_batch_end(t, None, None, None, 0)  # gradients accumulating: no optimizer step yet, nothing to say
    assert lines_of(out) == []
    t.global_step, t.progress_bar_metrics = 1, {"train_loss": 4.21687}
    cb.on_train_batch_end(t, None, None, None, 1)
    # 1 step in 4 s: 0.25 steps/s, 1,999 steps left: 7,996 s = 133 min
    assert lines_of(out) == [
        "text-train: step 1 of 2,000 (epoch 0), 0.25 steps/s, train_loss 4.217; about 2 h 13 min left"
    ]
    for step in range(2, 200):  # 59.5 s later: still within the minute
        t.global_step, clock.now = step, clock.now + 0.3
        cb.on_train_batch_end(t, None, None, None, step)
    assert len(lines_of(out)) == 1
    t.global_step, clock.now = 241, 1000.0 + 64.0  # 241 steps in 64 s: 3.77 steps/s, 1,759 left: 467 s
    cb.on_train_batch_end(t, None, None, None, 241)
    assert lines_of(out)[1] == (
        "text-train: step 241 of 2,000 (epoch 0), 3.77 steps/s, train_loss 4.217; about 8 min left"
    )


def test_time_left_and_totals_are_said_only_where_known():
    out, clock = io.StringIO(), Clock()
    t = trainer(estimated_stepping_batches=float("inf"))  # neither max_steps nor max_epochs bounds the run
    cb = ProgressLines("caption-train", stream=out, clock=clock)
    cb.on_train_start(t, None)
    clock.now += 100
    t.global_step = 10
    cb.on_train_batch_end(t, None, None, None, 9)
    assert lines_of(out) == ["caption-train: step 10 (epoch 0), 0.1 steps/s"]
    assert duration(20) == "under a minute" and duration(90) == "2 min" and duration(7500) == "2 h 05 min"


def test_a_time_limit_that_ends_the_run_first_is_the_time_left():
    """Most shipped text configs end by max_time (100 epochs or 14.5 minutes): the steps' estimate said an hour."""
    from pytorch_lightning.callbacks import Timer

    timer = Timer(duration="00:00:10:00")
    timer.time_remaining = lambda stage: 290.0  # 4 min 50 s of the 10 left
    out, clock = io.StringIO(), Clock()
    t = trainer(estimated_stepping_batches=120_000, callbacks=[timer])
    cb = ProgressLines("text-train", stream=out, clock=clock)
    cb.on_train_start(t, None)
    clock.now += 10
    t.global_step = 100
    cb.on_train_batch_end(t, None, None, None, 99)
    assert lines_of(out) == ["text-train: step 100 of 120,000 (epoch 0), 10 steps/s; about 5 min left (max_time)"]
    out, t = io.StringIO(), trainer(estimated_stepping_batches=1, callbacks=[timer])  # fast_dev_run, max_steps 1
    cb = ProgressLines("text-train", stream=out, clock=clock)
    cb.on_train_start(t, None)
    clock.now, t.global_step = clock.now + 0.5, 1
    cb.on_train_batch_end(t, None, None, None, 0)
    assert lines_of(out) == ["text-train: step 1 of 1 (epoch 0), 2 steps/s"]  # its last step: no time is left


def test_a_line_after_each_validation_with_its_metrics_but_not_after_the_sanity_check_nor_on_other_ranks():
    out = io.StringIO()
    cb = ProgressLines("text-train", stream=out, clock=Clock())
    metrics = {"val_bleu": 0.2134567, "train_loss": 2.0, "val_loss": 1.5}
    cb.on_validation_end(trainer(sanity_checking=True, callback_metrics=metrics), None)
    cb.on_validation_end(trainer(is_global_zero=False, callback_metrics=metrics), None)
    assert lines_of(out) == []
    cb.on_validation_end(trainer(global_step=400, current_epoch=2, callback_metrics=metrics), None)
    assert lines_of(out) == ["text-train: validated at step 400 (epoch 2): val_bleu 0.2135, val_loss 1.5"]


def test_sacrebleus_scores_say_their_scale_beside_the_fractions():
    """A real corpus's validation logs val_sacrebleu and val_chrf (0..100) beside val_bleu (0..1): "val_bleu 0.2312,
    val_sacrebleu 23.4" read as two scores a hundred times apart."""
    out, clock = io.StringIO(), Clock()
    cb = ProgressLines("text-train", stream=out, clock=clock)
    metrics = {"val_bleu": 0.23123, "val_chrf": 51.234, "val_sacrebleu": 23.41}
    cb.on_validation_end(trainer(global_step=400, current_epoch=2, callback_metrics=metrics), None)
    t = trainer(estimated_stepping_batches=float("inf"), progress_bar_metrics={"train_loss": 2.0, **metrics})
    cb.on_train_start(t, None)
    clock.now, t.global_step = clock.now + 10, 10
    cb.on_train_batch_end(t, None, None, None, 9)
    assert lines_of(out) == [
        "text-train: validated at step 400 (epoch 2): val_bleu 0.2312, val_chrf 51.23/100, val_sacrebleu 23.41/100",
        "text-train: step 10 (epoch 0), 1 steps/s, train_loss 2, val_bleu 0.2312, val_chrf 51.23/100, "
        "val_sacrebleu 23.41/100",
    ]


def test_a_write_to_an_output_whose_reader_has_gone_is_dropped_and_the_descriptor_points_at_devnull():
    read_end, write_end = os.pipe()
    stream = io.TextIOWrapper(io.FileIO(write_end, "w"), write_through=True)
    wrapped = _DropWhenClosed(stream)
    wrapped.write("seen\n")
    assert os.read(read_end, 100) == b"seen\n"
    os.close(read_end)
    assert wrapped.write("x" * 10) == 10  # EPIPE: BrokenPipeError unwrapped (SIGPIPE is ignored by Python)
    wrapped.write("more\n")
    wrapped.flush()
    assert os.path.realpath(f"/proc/self/fd/{write_end}") == os.devnull
    stream.close()


def test_the_process_streams_are_wrapped_once_and_given_back():
    import sys

    before = sys.stdout, sys.stderr
    restore = survive_closed_outputs()
    try:
        assert isinstance(sys.stdout, _DropWhenClosed) and isinstance(sys.stderr, _DropWhenClosed)
        inner = survive_closed_outputs()
        assert sys.stdout._stream is before[0]  # not wrapped twice
        inner()
    finally:
        restore()
    assert (sys.stdout, sys.stderr) == before
    assert not is_terminal(io.StringIO()) and not is_terminal(object())
