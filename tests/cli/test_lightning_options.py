"""Lightning's own options under text-train (an audit's findings, issue s53): a fast_dev_run writes no model file
and no checkpoint; StochasticWeightAveraging averages the network and the model file holds the mean; checkpoints
under a logger's own save_dir are found by --ckpt_path best; a config's `enable_progress_bar: null` is no value given;
a mistyped monitor is one line before anything acts on it; validate / test without a checkpoint are refused; the
trainer pickles (ddp_spawn sends it to new processes). Tiny fits of a few seconds each. (The model file's line when
validation is off: tests/cli/test_resume.py.)"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
import yaml
from helpers.resumable import FIX, resumable_config

from text_attn.core.progress_lines import ProgressLines
from text_attn.translation.train_cli import text_train_cli

SWA = "pytorch_lightning.callbacks.StochasticWeightAveraging"


def _config(tmp_path: Path, name: str = "c.yaml", **trainer) -> Path:
    """The tiny text config with the shipped configs' checkpointing (best by val_bleu, last.ckpt), into run/."""
    cfg = yaml.safe_load(resumable_config(tmp_path, "text").read_text())
    cfg["trainer"].update(default_root_dir="run", **trainer)
    cfg["model"]["export_path"] = "run/model.pt"
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.long
def test_a_smoke_test_writes_nothing_and_a_loggers_save_dir_is_searched(cli_run_in_tmp, capsys):
    tmp = cli_run_in_tmp
    logger = {"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": "logs"}}
    # enable_progress_bar: null, as --print_config and a run's config.yaml write an option left unset
    cfg = _config(tmp, logger=logger, enable_progress_bar=None)
    text_train_cli(["fit", "--config", str(cfg)])
    ckpts, model = sorted(tmp.rglob("*.ckpt")), (tmp / "run" / "model.pt").read_bytes()
    (best,) = [p for p in ckpts if p.name.startswith("epoch=")]
    assert best.parent == tmp / "logs" / "lightning_logs" / "version_0" / "checkpoints"  # the logger's, not run/
    capsys.readouterr()

    cli = text_train_cli(["fit", "--config", str(cfg), "--trainer.fast_dev_run", "true"])
    out, err = capsys.readouterr()
    assert "fast_dev_run: no model file written" in err.splitlines()
    # Lightning 2.6 saved last.ckpt (run/checkpoints/) at its end: `--ckpt_path last` resumed the smoke test
    assert sorted(tmp.rglob("*.ckpt")) == ckpts and (tmp / "run" / "model.pt").read_bytes() == model
    # the null was read as given: the bar's carriage returns went into the log file, and no line of news
    assert cli.trainer.progress_bar_callback is None
    assert any(isinstance(c, ProgressLines) for c in cli.trainer.callbacks)
    assert "text-train: step 1 of 1 (epoch 0)" in err and "\r" not in out + err

    cli = text_train_cli(["test", "--config", str(cfg), "--ckpt_path", "best"])  # it looked in run/lightning_logs only
    out, err = capsys.readouterr()
    assert f"text-train: --ckpt_path best: {best.relative_to(tmp)}" in err
    # test too draws no bar where the output is no terminal (its carriage returns went into the log file), and says
    # no lines of news: its scores' table at the end says what it did
    assert cli.trainer.progress_bar_callback is None and "\r" not in out + err
    assert not any(isinstance(c, ProgressLines) for c in cli.trainer.callbacks)

    for sub in ("validate", "test"):  # scored the freshly made weights, silently
        with pytest.raises(SystemExit) as exc:
            text_train_cli([sub, "--config", str(cfg)])
        err = capsys.readouterr().err.splitlines()
        assert exc.value.code == 2 and len(err) == 1, err
        assert err[0].startswith(f"text-train: error: {sub} without --ckpt_path would score weights nobody trained")
        assert "--ckpt_path best, last or a .ckpt file" in err[0]


def test_stochastic_weight_averaging_writes_the_mean_of_the_weights_it_averaged(cli_run_in_tmp, capsys):
    """Lightning's SWA copied the module before its setup built the network: 0 parameters averaged, and the model
    file held the best checkpoint's weights. swa_epoch_start 1 of 3 epochs: Lightning averages the weights at the
    start of epochs 0, 1 and 2 (the last epoch's own steps are not in the mean) and puts the mean in at the end."""
    swa = {"class_path": SWA, "init_args": {"swa_lrs": 0.01, "swa_epoch_start": 1}}
    cfg = _config(cli_run_in_tmp, max_steps=-1, max_epochs=3, limit_train_batches=2)
    args = ["--trainer.callbacks+", yaml.safe_dump(swa), "--trainer.callbacks+=helpers.epoch_weights.EpochStartWeights"]
    cli = text_train_cli(["fit", "--config", str(cfg), *args])
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("wrote model file")]
    assert line == ("wrote model file: run/model.pt (StochasticWeightAveraging's mean of the weights at the start of "
                    "epochs 0 to 2, 3 of them)")  # fmt: skip
    (probe,) = [c for c in cli.trainer.callbacks if type(c).__name__ == "EpochStartWeights"]
    assert sorted(probe.taken) == [0, 1, 2]
    saved = torch.load(cli_run_in_tmp / "run" / "model.pt", weights_only=True)["state_dict"]
    for name, value in saved.items():
        mean = torch.stack([probe.taken[e][name] for e in (0, 1, 2)]).mean(0)
        torch.testing.assert_close(value, mean, atol=1e-6, rtol=1e-5)
    assert not any(torch.equal(saved[name], probe.taken[e][name]) for e in (0, 1, 2) for name in saved)


@pytest.mark.parametrize("sanity", [1, 0], ids=["at-the-sanity-check", "at-the-first-validation"])
def test_a_mistyped_monitor_is_one_line_before_anything_acts_on_it(sanity, cli_run_in_tmp, capsys):
    """EarlyStopping(monitor='val_blue') ended the run after its first epoch in a 65-line traceback."""
    args = ["--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=val_blue"]
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", str(FIX / "text" / "tiny_reorder.yaml"), *args,
                        f"--trainer.num_sanity_val_steps={sanity}"])  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line or "Traceback" in line]
    assert exc.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("text-train: error: trainer.callbacks: EarlyStopping(monitor='val_blue'): no validation")
    assert "val_bleu" in err[0] and ("sanity check" in err[0]) == bool(sanity)


@pytest.mark.parametrize("callback, name", [("ModelCheckpoint", "train_loss_typo"), ("EarlyStopping", "loss")])
def test_a_monitor_no_training_step_logs_is_one_line_before_training(callback, name, cli_run_in_tmp, capsys):
    """Only val* monitors were checked: ModelCheckpoint(monitor='train_loss_typo') trained an epoch and then ended the
    run at its first save, EarlyStopping(monitor='loss') at its first check. Every other name is checked as the fit
    starts against what the module's training step logs (its objective's names)."""
    args = [
        f"--trainer.callbacks+={callback}",
        f"--trainer.callbacks.monitor={name}",
        "--trainer.enable_checkpointing=true",
    ]
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", str(FIX / "text" / "tiny_reorder.yaml"), *args])
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2 and not any("step 1 of" in line for line in err), err  # not one step trained
    assert err[-1] == (f"text-train: error: trainer.callbacks: {callback}(monitor={name!r}): this run logs no such "
                       "metric (its training: train_loss, epoch, step; its validation: val_* names, such as val_loss); "
                       "said before training, nothing was saved")  # fmt: skip


def test_the_names_a_training_step_logs_and_lightnings_own_are_monitored_as_before(cli_run_in_tmp, capsys):
    args = ["--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=train_loss"]
    args += ["--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.monitor=step", "--trainer.callbacks.mode=max"]
    args += ["--trainer.callbacks+=LearningRateMonitor", "--trainer.callbacks+=EarlyStopping"]
    args += ["--trainer.callbacks.monitor=lr-Adam", "--trainer.callbacks.patience=9"]
    cli = text_train_cli(["fit", "--config", str(FIX / "text" / "tiny_reorder.yaml"), *args, "--trainer.logger=true",
                          "--trainer.log_every_n_steps=1", "--trainer.enable_checkpointing=true"])  # fmt: skip
    assert cli.trainer.global_step == 6
    best = [cb.best_model_path for cb in cli.trainer.checkpoint_callbacks if cb.monitor]
    assert len(best) == 2 and all(Path(p).is_file() for p in best)


def test_the_trainer_the_cli_builds_pickles_for_ddp_spawn(cli_run_in_tmp):
    """ddp_spawn pickles the trainer into its processes: the CLI's checkpoint writer, config saver and default CSV
    logger were classes made inside functions ("Can't pickle local object ...AtomicCheckpointIO")."""
    from text_attn.core.lightning_cli import _make_cli_class
    from text_attn.translation.data import TranslationDataModule
    from text_attn.translation.module import TranslationModule

    cls = _make_cli_class("text-train")
    swa = {"class_path": SWA, "init_args": {"swa_lrs": 0.01}}
    args = [
        "--config",
        str(_config(cli_run_in_tmp)),
        "--trainer.logger",
        "true",
        "--trainer.callbacks+",
        yaml.safe_dump(swa),
    ]
    cli = cls(TranslationModule, TranslationDataModule, args=args, run=False, parser_class=cls.parser_class_,
              save_config_callback=cls.save_config_class_, save_config_kwargs={"overwrite": True})  # fmt: skip
    sent = pickle.loads(pickle.dumps(cli.trainer))
    assert type(sent.strategy.checkpoint_io).__name__ == "AtomicCheckpointIO"
    assert [type(lg).__name__ for lg in sent.loggers] == ["BesideBoard", "TensorBoardLogger"]
    assert {"SafeSaveConfig", "BuiltModuleSWA", "MonitorCheck"} <= {type(c).__name__ for c in sent.callbacks}
    (saver,) = [c for c in sent.callbacks if type(c).__name__ == "SafeSaveConfig"]
    assert saver.parser is None and "default_root_dir: run" in saver.config_text()  # the config travels as text


@pytest.mark.parametrize("option", ["--trainer.max_epochs", "--trainer.max_steps", "--trainer.limit_train_batches"])
def test_a_fit_that_would_train_no_step_is_refused_and_the_model_file_kept(cli_run_in_tmp, capsys, option):
    """It ended with exit code 0, "wrote model file ... (the last weights ...)": untrained weights over the file."""
    cfg = _config(cli_run_in_tmp)
    model = cli_run_in_tmp / "run" / "model.pt"
    model.parent.mkdir()
    model.write_bytes(b"a trained model")
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", str(cfg), option, "0"])
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2 and err == [f"text-train: error: {option} 0: fit would train no step and write the "
                                           "untrained weights as the model file; give a positive value (validate or "
                                           "test scores a checkpoint without training)"]  # fmt: skip
    assert model.read_bytes() == b"a trained model" and not list(cli_run_in_tmp.rglob("*.ckpt"))


@pytest.mark.parametrize(("value", "said"), [
    ("00:00:00:00", "fit would train no step"),  # "Time limit reached" at once: the model file replaced, exit 0
    ("{minutes: -1}", "fit would train no step"),
    ("{minute: 1}", "not a duration ('minute' is an invalid keyword argument"),  # Lightning's Timer: a traceback
    ("{days: 1000000000}", "not a duration (days=1000000000; must have magnitude"),  # review: an OverflowError
    ("1000000000:00:00:00", "longer than a duration can be (999,999,999 days at most)"),  # Lightning's: a traceback
])  # fmt: skip
def test_a_max_time_of_nothing_or_no_duration_is_refused_and_the_model_file_kept(cli_run_in_tmp, capsys, value,
                                                                                said):  # fmt: skip
    cfg = _config(cli_run_in_tmp)
    model = cli_run_in_tmp / "run" / "model.pt"
    model.parent.mkdir()
    model.write_bytes(b"a trained model")
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", str(cfg), "--trainer.max_time", value])
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("text-train: error: --trainer.max_time ")
    assert said in err[0], err
    assert model.read_bytes() == b"a trained model" and not list(cli_run_in_tmp.rglob("*.ckpt"))
