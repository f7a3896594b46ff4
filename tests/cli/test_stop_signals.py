"""A fit stopped by SIGTERM (a scheduler's time limit, a preemption, ``kill``) or Ctrl-C: exit code 143 or 130 and one
line (SIGTERM exited 0 and wrote no model: the job was recorded as a success and ``fit && export`` went on), with
last.ckpt saved at the step reached, from which ``--ckpt_path last`` ends with an uninterrupted run's weights (a Ctrl-C
at step 157 of a run saving every 200 steps lost everything)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers.resumable import resumable_config

from text_attn.translation.module import TranslationModule
from text_attn.translation.train_cli import text_train_cli

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["--trainer.max_steps", "15"]  # 6 batches an epoch, last.ckpt every 5 steps: the stop at step 7 is neither

# The real command in a child, its 7th step held (after the backward pass) until the signal has come: the signal lands
# mid-step every time, as most of a real run's time is spent there (a fixed delay would race a loaded machine).
HELD_STEP = """
import pathlib, signal, sys, time
sys.path.insert(0, {root!r})
signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal leaves it (a background shell ignores it)
from text_attn.translation.module import TranslationModule
marker = pathlib.Path(sys.argv[1])
def on_after_backward(self):
    if self.trainer.global_step == 6 and not marker.exists():
        marker.touch()
        deadline = time.monotonic() + 120
        while not (self.trainer.received_sigterm or self._stop_asked) and time.monotonic() < deadline:
            time.sleep(0.01)
TranslationModule.on_after_backward = on_after_backward
from text_attn.translation.train_cli import main
sys.argv = ["text-train", *sys.argv[2:]]
sys.exit(main())
"""


def last_ckpt(root: str | Path) -> dict:
    return torch.load(next(Path(root).rglob("last.ckpt")), weights_only=True)


def assert_same_weights(a: dict, b: dict, steps: int = 15) -> None:
    assert a["global_step"] == b["global_step"] == steps
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, msg=k)


@pytest.fixture
def _int_handler():
    """Python's own Ctrl-C handler (a test run started in the background inherits SIGINT ignored) and SIGTERM's
    default, as a command starts with them: an earlier test in this process may have left its own (attention-serve's
    stop handler, run in-process), which Lightning's SIGTERM handler calls too (a test worker ended by it)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    term = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGINT, before)
    signal.signal(signal.SIGTERM, term)


@pytest.mark.long
def test_sigterm_to_the_command_mid_step_exits_143_with_last_saved_at_that_step(tmp_path):
    cfg = str(resumable_config(tmp_path, "text", every=5))
    marker = tmp_path / "in-step"
    fit = ["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b", "--model.export_path", "b.pt"]
    proc = subprocess.Popen([sys.executable, "-c", HELD_STEP.format(root=str(ROOT)), str(marker), *fit],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()[1][-2000:]
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 143, err[-2000:]
    assert err.strip().splitlines()[-1] == ("text-train: interrupted at step 7; the newest last.ckpt is "
                                            "b/checkpoints/last.ckpt (saved at this step): --ckpt_path last resumes "
                                            "from it"), err[-2000:]  # fmt: skip
    assert "Traceback" not in err and not (tmp_path / "b.pt").exists()  # no model from an unfinished fit
    assert last_ckpt(tmp_path / "b")["global_step"] == 7


@pytest.mark.long
def test_a_sigterm_before_the_training_loop_exits_143_with_one_line(tmp_path, cli_run_in_tmp, capsys, caplog,
                                                                  monkeypatch, _int_handler):  # fmt: skip
    """Before Lightning's loop takes the signals (on_fit_start: caption-train caches its photos' features there,
    minutes), a SIGTERM ended the process at once, exit 143 without a line; it stops as Ctrl-C does, said once (not
    beside Lightning's "Detected KeyboardInterrupt")."""
    cfg = str(resumable_config(tmp_path, "text", every=5))
    monkeypatch.setattr(TranslationModule, "on_fit_start", lambda self: os.kill(os.getpid(), signal.SIGTERM))
    with caplog.at_level("INFO"), pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b"])
    err = capsys.readouterr().err
    assert exc.value.code == 143, err
    assert err.strip().splitlines()[-1] == "text-train: interrupted at step 0; no last.ckpt was written yet"
    assert "KeyboardInterrupt" not in err + caplog.text and "Traceback" not in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the run's stand-in given back


@pytest.mark.long
def test_a_sigterm_as_the_model_file_is_written_lets_it_be_written(tmp_path, cli_run_in_tmp, capsys, monkeypatch,
                                                                   _int_handler):  # fmt: skip
    """Lightning gives the run's own handler back before on_fit_end: a SIGTERM as the model file was written raised
    there, said "interrupted ... --ckpt_path last resumes from it", and a resume of that last.ckpt exported without
    its best checkpoint (review). The fit ends as usual, its model file written, exit 0."""
    from text_attn.core.training import RunState

    cfg = str(resumable_config(tmp_path, "text", every=5))
    real = RunState.export_best

    def signalled(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RunState, "export_best", signalled)
    text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b", "--model.export_path", "b.pt"])
    err = capsys.readouterr().err
    assert (tmp_path / "b.pt").is_file() and "interrupted" not in err and "wrote model file: b.pt" in err, err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    # its finished run resumed without a sanity check: no loop runs, and the fit's end alone marks it (review)
    (tmp_path / "b.pt").unlink()
    text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b", "--model.export_path", "b.pt",
                    "--trainer.num_sanity_val_steps", "0", "--ckpt_path", "last"])  # fmt: skip
    err = capsys.readouterr().err
    assert (tmp_path / "b.pt").is_file() and "interrupted" not in err, err


def _resumed_as_uninterrupted(cfg: str, options: list[str], **compared) -> None:
    """The stopped run in ``b`` resumed with ``--ckpt_path last`` to the end has the weights of the same fit run
    uninterrupted in ``a`` (``options``: the fit's; ``compared``: assert_same_weights' options)."""
    text_train_cli(["fit", "--config", cfg, *options, "--trainer.default_root_dir", "b", "--ckpt_path", "last"])
    text_train_cli(["fit", "--config", cfg, *options, "--trainer.default_root_dir", "a"])
    assert_same_weights(last_ckpt("a"), last_ckpt("b"), **compared)


def _signal_mid_step(monkeypatch, step: int, signum: int) -> None:
    """``signum`` sent to this process in the middle of training step ``step`` (counted from 1: after its backward),
    as a scheduler's SIGTERM or a Ctrl-C arrives while a step runs."""

    def on_after_backward(self):
        if self.trainer.global_step == step - 1:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(TranslationModule, "on_after_backward", on_after_backward)


@pytest.mark.long
@pytest.mark.parametrize(("sig", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stop_mid_step_saves_last_there_and_last_resumes_exactly(
    sig, code, tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """In this process (the SIGTERM to the command: above), then ``--ckpt_path last`` to the end: an uninterrupted
    run's weights, dropout's random state included."""
    cfg = str(resumable_config(tmp_path, "text", every=5))
    real = TranslationModule.on_after_backward

    _signal_mid_step(monkeypatch, 7, getattr(signal, sig))
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == code and last_ckpt("b")["global_step"] == 7
    assert line == ("text-train: interrupted at step 7; the newest last.ckpt is b/checkpoints/last.ckpt (saved at "
                    "this step): --ckpt_path last resumes from it")  # fmt: skip
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the run's own handler is gone
    monkeypatch.setattr(TranslationModule, "on_after_backward", real)
    _resumed_as_uninterrupted(cfg, STEPS)


@pytest.mark.long
def test_a_stop_between_accumulated_batches_waits_for_the_optimizers_step(
    tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """accumulate_grad_batches 2: Ctrl-C in the first batch of a step's pair stopped there and said "saved at this
    step", the half-summed gradient lost (a resume 0.02 off an uninterrupted run); it waits for the second."""
    cfg = str(resumable_config(tmp_path, "text", every=5))
    steps = ["--trainer.max_steps", "8", "--trainer.accumulate_grad_batches", "2"]
    real, seen = TranslationModule.on_after_backward, []

    def on_after_backward(self):  # batch 7: the first of step 4's two
        seen.append(1)
        if len(seen) == 7:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(TranslationModule, "on_after_backward", on_after_backward)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *steps, "--trainer.default_root_dir", "b"])
    assert exc.value.code == 130 and len(seen) == 8 and last_ckpt("b")["global_step"] == 4, capsys.readouterr().err
    monkeypatch.setattr(TranslationModule, "on_after_backward", real)
    _resumed_as_uninterrupted(cfg, steps, steps=8)


def test_a_second_ctrl_c_stops_mid_step_at_once_saving_nothing(tmp_path, cli_run_in_tmp, capsys, monkeypatch,
                                                              _int_handler):  # fmt: skip
    cfg = str(resumable_config(tmp_path, "text", every=5))

    def on_after_backward(self):  # Ctrl-C twice in the middle of step 7
        if self.trainer.global_step == 6:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(TranslationModule, "on_after_backward", on_after_backward)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 130 and last_ckpt("b")["global_step"] == 5  # the periodic save: nothing half-stepped
    assert line == ("text-train: interrupted at step 6; the newest last.ckpt is b/checkpoints/last.ckpt (from step 5: "
                    "the steps since are redone): --ckpt_path last resumes from it")  # fmt: skip


@pytest.mark.long
@pytest.mark.parametrize(("sig", "code", "at", "saved"), [("SIGINT", 130, 3, 3), ("SIGTERM", 143, 6, 7)])
def test_a_stop_during_validation_saves_where_a_resume_is_exact(
    sig, code, at, saved, tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """A signal during a fit's validation stopped at once (Ctrl-C) or at the epoch's end (SIGTERM), saving nothing:
    the steps since the last periodic save were lost. Mid-epoch (step 3) the stop comes as that validation ends, saved
    there; after an epoch's last step (6 of 6) at the next step's end (a save at that validation's end resumed 0.04
    off). Either resumes to an uninterrupted run's weights."""
    cfg = str(resumable_config(tmp_path, "text", every=5))
    steps = [*STEPS, "--trainer.val_check_interval", "3"]
    real = TranslationModule.validation_step

    def validation_step(self, batch, batch_idx):
        if self.trainer.global_step == at and not self.trainer.sanity_checking:
            os.kill(os.getpid(), getattr(signal, sig))
        return real(self, batch, batch_idx)

    monkeypatch.setattr(TranslationModule, "validation_step", validation_step)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *steps, "--trainer.default_root_dir", "b"])
    err = capsys.readouterr().err
    assert exc.value.code == code and last_ckpt("b")["global_step"] == saved, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"text-train: interrupted at step {saved}; the newest last.ckpt is "
                                            "b/checkpoints/last.ckpt (saved at this step): --ckpt_path last resumes "
                                            "from it")  # fmt: skip
    if sig == "SIGINT":  # said at once: a validation may take minutes
        assert ("text-train: Ctrl-C: stopping once this validation ends, saving last.ckpt there (Ctrl-C again stops "
                "now, saving nothing)") in err  # fmt: skip
    monkeypatch.setattr(TranslationModule, "validation_step", real)
    _resumed_as_uninterrupted(cfg, steps)


def test_ctrl_c_while_the_next_batch_is_read_stops_after_that_batchs_step(
    tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """Between two steps (the loader reading the next batch) Ctrl-C stopped at once, saving nothing; it now waits
    for the next step's end and saves there, saying so."""
    cfg = str(resumable_config(tmp_path, "text", every=5))

    def on_before_batch_transfer(self, batch, dataloader_idx):
        if self.trainer.training and self.trainer.global_step == 6:  # batch 7 read, its step not begun
            os.kill(os.getpid(), signal.SIGINT)
        return batch

    monkeypatch.setattr(TranslationModule, "on_before_batch_transfer", on_before_batch_transfer)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b"])
    err = capsys.readouterr().err
    assert exc.value.code == 130 and last_ckpt("b")["global_step"] == 7, err[-2000:]
    assert "text-train: Ctrl-C: stopping after this training step, saving last.ckpt there" in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.long
def test_ctrl_c_in_an_epochs_last_step_lets_its_validation_run_first(
    tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """Stopped at the end of epoch 0's last step (6 of 6), the run was resumed past that epoch's validation: its score
    never logged nor weighed for the best model. The stop now waits for the next step's end (7), the validation run."""
    cfg = str(resumable_config(tmp_path, "text", every=5))
    real = TranslationModule.on_after_backward

    _signal_mid_step(monkeypatch, 6, signal.SIGINT)  # step 6: the epoch's last
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, "--trainer.default_root_dir", "b"])
    err = capsys.readouterr().err
    assert exc.value.code == 130 and last_ckpt("b")["global_step"] == 7, err[-2000:]
    assert "text-train: Ctrl-C: stopping after this epoch's validation and the next training step" in err
    assert (tmp_path / "b/checkpoints/epoch=0-step=6.ckpt").is_file()  # epoch 0's validation was weighed
    monkeypatch.setattr(TranslationModule, "on_after_backward", real)
    _resumed_as_uninterrupted(cfg, STEPS)
    assert sorted(p.name for p in (tmp_path / "a/checkpoints").iterdir()) == sorted(
        p.name for p in (tmp_path / "b/checkpoints").iterdir()
    )


def test_the_step_a_sigterm_stops_at_is_logged_as_last_ckpt_holds_it(
    tmp_path, cli_run_in_tmp, capsys, monkeypatch, _int_handler
):
    """log_every_n_steps 5, SIGTERM in step 5: last.ckpt was saved at step 5 but the logs ended before it (the stop
    raised before Lightning logged the step): `report` drew nothing of the run's last step."""
    from text_attn.core.run_report import read_metrics

    cfg = str(resumable_config(tmp_path, "text", every=5))

    _signal_mid_step(monkeypatch, 5, signal.SIGTERM)
    logs = ["--trainer.logger", "true", "--trainer.log_every_n_steps", "5", "--trainer.default_root_dir", "b"]
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, *STEPS, *logs])
    assert exc.value.code == 143 and last_ckpt("b")["global_step"] == 5, capsys.readouterr().err[-2000:]
    assert [step for step, _ in read_metrics(Path("b/lightning_logs/version_0"))["train_loss"]] == [5]
