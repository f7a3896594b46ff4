"""Resume that users can trust: a run resumed from a mid-epoch last.ckpt ends with the same weights as an
uninterrupted run; options given with --ckpt_path are honoured or refused in one line; a resumed fit gets its own
max_time; a NaN loss stops training with one line naming the step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from helpers.resumable import resumable_config

from captioning.commands.train import caption_train_cli
from text_attn.core.modelfile import load_model_file
from text_attn.translation.train_cli import text_train_cli

FIX = Path(__file__).parent.parent / "fixtures"


def run(family: str, args: list[str]):
    return (text_train_cli if family == "text" else caption_train_cli)(args)


def weights(cli) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in cli.model.state_dict().items()}


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


# caption: ~10 s, -m slow; -m long resumes the text run (the same Lightning loop and checkpoint, and
# tests/core/test_streaming_glue.py resumes the photo loader mid-epoch)
@pytest.mark.long
@pytest.mark.parametrize("family", ["text", pytest.param("caption", marks=pytest.mark.slow)])
def test_resume_from_a_last_checkpoint_at_an_epochs_end_matches_an_uninterrupted_run(family, tmp_path):
    # the next epoch's loader iterator draws its seed from torch's generator after the save: the resumed run made its
    # iterator before the random state was restored, so that draw was missing and dropout ran one number behind
    n = 6 if family == "text" else 8  # batches an epoch
    cfg = str(resumable_config(tmp_path, family, every=n // 2))  # last.ckpt at the epoch's end, and half way on
    epochs = ["--trainer.max_epochs", "3"]
    first = run(family, ["fit", "--config", cfg, *epochs, "--trainer.max_steps", str(n), "--trainer.default_root_dir",
                         "b"])  # fmt: skip
    assert first.trainer.num_training_batches == n, "the interruption must fall at an epoch's end"
    end = str(n + n // 2)
    run(family, ["fit", "--config", cfg, *epochs, "--trainer.max_steps", end, "--trainer.default_root_dir", "a"])
    last = next(Path("b").rglob("last.ckpt"))
    resumed = run(family, ["fit", "--config", cfg, *epochs, "--trainer.max_steps", end,
                           "--trainer.default_root_dir", "b", "--ckpt_path", str(last)])  # fmt: skip
    assert resumed.trainer.global_step == n + n // 2
    a = torch.load(next(Path("a").rglob("last.ckpt")), weights_only=True)
    c = torch.load(last, weights_only=True)
    assert a["global_step"] == c["global_step"] == n + n // 2
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(c["state_dict"][k], v, msg=k)


@pytest.mark.long
def test_a_run_resumed_twice_from_epochs_ends_matches_an_uninterrupted_run(tmp_path):
    """Resumed from a save at an epoch's last step, Lightning started the next epoch without counting it started:
    every checkpoint of that run named the epoch before (Lightning's progress and the data module's), and a second
    resume trained that epoch over again (18 steps became 24, the weights 0.026 off)."""
    n = 6  # batches an epoch
    cfg = str(resumable_config(tmp_path, "text", every=n // 2))
    epochs = ["fit", "--config", cfg, "--trainer.max_epochs", "3"]
    a = run("text", [*epochs, "--trainer.max_steps", str(3 * n), "--trainer.default_root_dir", "a"])
    assert a.trainer.global_step == 3 * n
    run("text", [*epochs, "--trainer.max_steps", str(n), "--trainer.default_root_dir", "b"])
    last = next(Path("b").rglob("last.ckpt"))
    run("text", [*epochs, "--trainer.max_steps", str(2 * n), "--trainer.default_root_dir", "b", "--ckpt_path",
                 str(last)])  # fmt: skip
    second = torch.load(last, weights_only=True)
    assert second["global_step"] == 2 * n and second["epoch"] == 1
    assert second["TranslationDataModule"]["epoch"] == 1  # the epoch its batches are of (it said 0)
    assert second["loops"]["fit_loop"]["epoch_progress"]["current"]["started"] == 2
    b = run("text", [*epochs, "--trainer.max_steps", str(3 * n), "--trainer.default_root_dir", "b", "--ckpt_path",
                     str(last)])  # fmt: skip
    assert b.trainer.global_step == 3 * n
    for k, v in a.model.state_dict().items():
        torch.testing.assert_close(b.model.state_dict()[k], v, msg=k)


@pytest.mark.long
def test_a_resume_from_a_save_at_an_epochs_last_step_runs_that_epochs_validation_first(tmp_path):
    """A periodic save (every_n_train_steps) falling on an epoch's last step comes before that epoch's validation;
    resumed from it (the run stopped there, or from the file), the validation was skipped: its score never logged,
    never weighed for the best model. Now it runs first, and the run goes on exactly as the uninterrupted one."""
    import csv

    cfg = yaml.safe_load(resumable_config(tmp_path, "text", every=6).read_text())  # 6 batches an epoch
    cfg["trainer"]["callbacks"][1]["init_args"]["save_top_k"] = -1  # each periodic save kept: epoch=0-step=6.ckpt
    cfg["trainer"]["logger"] = {"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": "logs"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = ["fit", "--config", str(path), "--trainer.max_steps", "18"]
    run("text", [*args, "--trainer.default_root_dir", "a"])
    saved = Path("logs/lightning_logs/version_0/checkpoints/epoch=0-step=6.ckpt")
    assert torch.load(saved, weights_only=True)["validation_due"]
    run("text", [*args, "--trainer.default_root_dir", "b", "--ckpt_path", str(saved)])

    def validations(version: int) -> list[tuple[str, str]]:
        rows = csv.DictReader(open(f"logs/lightning_logs/version_{version}/metrics.csv"))
        return [(r["step"], r["val_bleu"]) for r in rows if r.get("val_bleu")]

    assert [step for step, _ in validations(0)] == ["5", "11", "17"]  # logged at the step before: 6, 12, 18
    assert validations(1) == validations(0)  # step 6's was missing
    a, b = (torch.load(f"logs/lightning_logs/version_{v}/checkpoints/last.ckpt", weights_only=True) for v in (0, 1))
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, msg=k)


@pytest.mark.long
def test_a_fit_resumed_at_its_last_step_validates_the_whole_split(tmp_path):
    """A fit stopped at its last step (or one already finished), saved before that epoch's validation: resumed, the
    validation ran on from the progress the last one left in the checkpoint and scored 1 of its 3 batches (val_loss
    3.75 against 3.87), logged as the run's last score. It runs whole: the score the uninterrupted run logged."""
    import csv

    cfg = yaml.safe_load(resumable_config(tmp_path, "text", every=1).read_text())
    cfg["trainer"].update(limit_val_batches=1.0, max_epochs=2, max_steps=-1)  # 3 val batches of 16
    cfg["data"].update(train_size=64, val_size=48)
    cfg["trainer"]["logger"] = {"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": "logs"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run("text", ["fit", "--config", str(path)])
    run("text", ["fit", "--config", str(path), "--ckpt_path", "logs/lightning_logs/version_0/checkpoints/last.ckpt"])

    def losses(version: int) -> list[str]:
        rows = csv.DictReader(open(f"logs/lightning_logs/version_{version}/metrics.csv"))
        return [r["val_loss"] for r in rows if r.get("val_loss")]

    assert len(losses(0)) == 2 and losses(1) == losses(0)[-1:]


@pytest.mark.long
@pytest.mark.parametrize("family", ["text", pytest.param("caption", marks=pytest.mark.slow)])
@pytest.mark.parametrize("step", [3, 6])
def test_a_resume_from_a_save_before_an_every_n_steps_validation_runs_it_first(family, step, tmp_path):
    """A fit validating every 3 steps, saved every 3 steps: each save comes before a validation, mid-epoch (step 3) or
    at an epoch's end by the count (text's step 6: 6 batches an epoch). Resumed from it, Lightning counted that
    validation as done: its score never logged nor weighed for the best model. Now it runs first, and the run goes on
    exactly as the uninterrupted one (the validation's loader draws a number, and Lightning's restart another)."""
    import csv

    cfg = yaml.safe_load(resumable_config(tmp_path, family, every=3).read_text())
    cfg["trainer"]["callbacks"][1]["init_args"]["save_top_k"] = -1  # each periodic save kept
    cfg["trainer"]["val_check_interval"] = 3
    cfg["trainer"]["logger"] = {"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": "logs"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = ["fit", "--config", str(path), "--trainer.max_steps", "12"]
    run(family, [*args, "--trainer.default_root_dir", "a"])
    saved = Path(f"logs/lightning_logs/version_0/checkpoints/epoch=0-step={step}.ckpt")
    assert torch.load(saved, weights_only=True)["validation_due"]
    run(family, [*args, "--trainer.default_root_dir", "b", "--ckpt_path", str(saved)])

    metric = "val_bleu" if family == "text" else "val_Bleu_4"

    def validations(version: int) -> list[tuple[str, str]]:
        rows = csv.DictReader(open(f"logs/lightning_logs/version_{version}/metrics.csv"))
        return [(r["step"], r[metric]) for r in rows if r.get(metric)]

    # logged at the step before: 3, 6, 9, 12 (caption: 8 batches an epoch, the count restarting there: 3, 6, 11)
    assert [s for s, _ in validations(0)] == (["2", "5", "8", "11"] if family == "text" else ["2", "5", "10"])
    assert validations(1) == [(s, b) for s, b in validations(0) if int(s) >= step - 1]  # step's own was missing
    a, b = (torch.load(f"logs/lightning_logs/version_{v}/checkpoints/last.ckpt", weights_only=True) for v in (0, 1))
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, msg=k)


@pytest.mark.long
@pytest.mark.parametrize("family", ["text", pytest.param("caption", marks=pytest.mark.slow)])
def test_resume_from_a_mid_epoch_last_checkpoint_matches_an_uninterrupted_run(family, tmp_path):
    cfg = str(resumable_config(tmp_path, family, every=5))
    # 6 batches per epoch (text: 96 pairs / 16; caption: 32 scenes x ~3 captions / 16): step 10 is mid-epoch 1.
    # (fit leaves the BEST weights in the module and the model file; compare the last weights, from last.ckpt.)
    run(family, ["fit", "--config", cfg, "--trainer.max_steps", "15", "--trainer.default_root_dir", "a"])
    first = run(family, ["fit", "--config", cfg, "--trainer.max_steps", "10", "--trainer.default_root_dir", "b"])
    assert 10 % first.trainer.num_training_batches != 0, "the interruption must fall inside an epoch"
    last = next(Path("b").rglob("last.ckpt"))
    interrupted = torch.load(last, weights_only=True)
    assert interrupted["global_step"] == 10
    assert "validation_due" not in interrupted  # no validation follows step 10 (once an epoch: at 12)
    args = ["fit", "--config", cfg, "--trainer.max_steps", "15", "--trainer.default_root_dir", "c"]
    resumed = run(family, [*args, "--ckpt_path", str(last)])
    assert resumed.trainer.global_step == 15
    a = torch.load(next(Path("a").rglob("last.ckpt")), weights_only=True)
    c = torch.load(next(Path("c").rglob("last.ckpt")), weights_only=True)
    assert a["global_step"] == c["global_step"] == 15
    assert a["state_dict"].keys() == c["state_dict"].keys()
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(c["state_dict"][k], v, msg=k)
    # and the check has teeth: the weights at step 10 differ from those at 15
    assert any(not torch.allclose(interrupted["state_dict"][k], v) for k, v in a["state_dict"].items())


@pytest.mark.long
@pytest.mark.parametrize("family", ["text", "caption"])
def test_a_fit_resumed_with_another_batch_size_is_refused_in_one_line(family, tmp_path, capsys):
    """The skip counts batches: resumed with batches of 8, the 4 batches of 16 trained in epoch 1 were taken for 4 of 8,
    the resumed epoch trained pairs already trained and left out others, and the step totals were wrong ("step 6 of
    12", ending at 17). Now the resume is refused, saying what to do; test with another batch size reads the
    checkpoint as before."""
    cfg = str(resumable_config(tmp_path, family, every=5))
    # 5 steps of an epoch of 6: mid-epoch, with no validation yet (an epoch's end validates)
    first = run(family, ["fit", "--config", cfg, "--trainer.max_steps", "5", "--trainer.default_root_dir", "b"])
    epoch, done = divmod(5, first.trainer.num_training_batches)
    assert done, "the interruption must fall inside an epoch"
    last = next(Path("b").rglob("last.ckpt"))
    saved = {p: p.stat().st_mtime_ns for p in Path("b").rglob("*.ckpt")}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run(family, ["fit", "--config", cfg, "--trainer.max_steps", "15", "--trainer.default_root_dir", "b",
                     "--ckpt_path", "last", "--data.batch_size", "8"])  # fmt: skip
    (line,) = [x for x in capsys.readouterr().err.strip().splitlines() if "error" in x]
    prog = "text-train" if family == "text" else "caption-train"
    assert exc.value.code == 2 and line == (
        f"{prog}: error: data.batch_size 8: the checkpoint trained {done} batches of 16 in epoch {epoch}, and a resume "
        "goes on counting in batches of 16: keep data.batch_size 16, or start a new fit from its weights with "
        f"--model.init_from {last} (its steps and optimiser afresh)"
    )
    assert {p: p.stat().st_mtime_ns for p in Path("b").rglob("*.ckpt")} == saved  # nothing trained or saved
    # another rate: the restored optimiser went on at the checkpoint's, while hparams and config.yaml said the new one
    rate = float(torch.load(last, weights_only=True)["hyper_parameters"]["lr"])
    with pytest.raises(SystemExit) as exc:
        run(family, ["fit", "--config", cfg, "--trainer.max_steps", "15", "--trainer.default_root_dir", "b",
                     "--ckpt_path", "last", "--model.lr", "0.05"])  # fmt: skip
    (line,) = [x for x in capsys.readouterr().err.strip().splitlines() if "error" in x]
    assert exc.value.code == 2 and line == (
        f"{prog}: error: model.lr 0.05: a resumed fit goes on with the checkpoint's optimiser and schedule, at its "
        f"model.lr {rate}: keep model.lr {rate}, or start a new fit from its weights with --model.init_from {last} "
        "(its steps and optimiser afresh, at the new rate)"
    )
    assert {p: p.stat().st_mtime_ns for p in Path("b").rglob("*.ckpt")} == saved
    cli = run(family, ["test", "--config", cfg, "--ckpt_path", str(last), "--data.batch_size", "8"])
    assert cli.datamodule.hparams.batch_size == 8 and Path(cli.trainer.ckpt_path).resolve() == last.resolve()


@pytest.mark.slow
def test_command_line_options_win_over_the_checkpoints(tmp_path, capsys):
    cfg = str(resumable_config(tmp_path, "caption"))
    run("caption", ["fit", "--config", cfg, "--trainer.max_steps", "4", "--model.export_path", "old/model.pt"])
    old_bytes = Path("old/model.pt").read_bytes()
    ckpt = str(next(Path(".").rglob("last.ckpt")))
    args = ["fit", "--config", cfg, "--trainer.max_steps", "6", "--ckpt_path", ckpt]
    cli = run("caption", [*args, "--model.export_path", "new/model.pt"])
    assert cli.model.hparams.export_path == "new/model.pt" and Path("new/model.pt").is_file()
    assert Path("old/model.pt").read_bytes() == old_bytes  # resuming never overwrites the first run's model file
    cli = run("caption", ["test", "--config", cfg, "--ckpt_path", ckpt, "--model.val_beam_size", "3"])
    assert cli.model.hparams.val_beam_size == 3
    # an option that changes the network's shape cannot apply to the checkpoint's weights: one line, exit 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run("caption", ["test", "--config", cfg, "--ckpt_path", ckpt, "--model.decoder.hidden_dim", "48"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "model.decoder.hidden_dim=48 (checkpoint: 32)" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_checkpoint_fills_the_nested_blocks_field_by_field(tmp_path):
    """test --ckpt_path with no model options: the network comes from the checkpoint's model.encoder / model.decoder
    (the defaults would build a ResNet-101 and a 512-wide decoder); a field given on the command line still wins."""
    cfg = yaml.safe_load((FIX / "captions/tiny_shapes.yaml").read_text())
    run(
        "caption", ["fit", "--config", str(FIX / "captions/tiny_shapes.yaml"), "--trainer.enable_checkpointing", "true"]
    )
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    data = [f"--data.{k}={v}" for k, v in cfg["data"].items()]
    cli = run(
        "caption", ["test", "--ckpt_path", ckpt, *data, "--trainer.logger", "false", "--model.val_meteor", "false"]
    )
    enc, dec = cli.model.model.encoder, cli.model.model.decoder
    assert (enc.backbone, enc.grid, dec.cfg.hidden_dim) == ("resnet18", 4, 32)
    cli = run("caption", ["test", "--ckpt_path", ckpt, *data, "--trainer.logger", "false", "--model.val_meteor",
                          "false", "--model.decoder.fast_path", "false"])  # fmt: skip
    assert cli.model.model.decoder.cfg.fast_path is False and cli.model.model.encoder.grid == 4


@pytest.mark.long
def test_a_fit_ending_between_periodic_saves_leaves_last_at_its_final_step(tmp_path):
    """last.ckpt every 4 steps, the fit stopped by max_steps at 6: Lightning's end-of-fit save of last ran only where
    none had been made, so last.ckpt held step 4 and a resume redid steps 5-6; now it holds step 6, and the model file
    and the checkpoint agree on the last weights' step."""
    cfg = str(resumable_config(tmp_path, "text", every=4))
    cli = run("text", ["fit", "--config", cfg, "--trainer.max_steps", "6", "--trainer.default_root_dir", "a"])
    last = torch.load(next(Path("a").rglob("last.ckpt")), weights_only=True)
    assert cli.trainer.global_step == 6 and last["global_step"] == 6
    assert [p.name for p in Path("a").rglob("last*.ckpt")] == ["last.ckpt"]  # replaced, not a last-v1.ckpt beside it
    # resumed with a later stop, it goes on from step 6
    cli = run("text", ["fit", "--config", cfg, "--trainer.max_steps", "9", "--trainer.default_root_dir", "a",
                       "--ckpt_path", "last"])  # fmt: skip
    assert cli.trainer.global_step == 9


@pytest.mark.long
def test_a_fit_stopped_by_max_steps_at_an_epochs_end_resumes_exactly(tmp_path):
    """No periodic save at the stop (every 100 steps), the stop on an epoch's last batch: the end-of-fit save of
    last.ckpt named the next epoch with the last one's batches done, and the resumed run skipped a whole epoch (its
    steps logged as epoch 2, its weights off by 0.009). Now last.ckpt is saved at the last step's end, as a periodic
    save there is, and the resumed run ends with the uninterrupted run's weights."""
    cfg = str(resumable_config(tmp_path, "text", every=100))
    n = 6  # batches an epoch (96 pairs / 16)
    first = run("text", ["fit", "--config", cfg, "--trainer.max_steps", str(n), "--trainer.default_root_dir", "b"])
    assert first.trainer.num_training_batches == n
    straight = run("text", ["fit", "--config", cfg, "--trainer.max_steps", str(n + 2), "--trainer.default_root_dir",
                            "a"])  # fmt: skip
    resumed = run("text", ["fit", "--config", cfg, "--trainer.max_steps", str(n + 2), "--trainer.default_root_dir", "b",
                           "--ckpt_path", "last"])  # fmt: skip
    assert resumed.trainer.current_epoch == straight.trainer.current_epoch  # epoch 1's steps, not epoch 2's
    a = torch.load(next(Path("a").rglob("last.ckpt")), weights_only=True)
    c = torch.load(sorted(Path("b").rglob("last.ckpt"))[-1], weights_only=True)
    assert a["global_step"] == c["global_step"] == n + 2
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(c["state_dict"][k], v, msg=k)


@pytest.mark.long
def test_options_left_at_their_default_come_from_the_checkpoint(tmp_path):
    cfg = str(resumable_config(tmp_path, "text"))
    run("text", ["fit", "--config", cfg, "--trainer.max_steps", "2", "--model.val_beam_size", "2"])
    ckpt = str(next(Path(".").rglob("last.ckpt")))
    cli = run("text", ["validate", "--config", cfg, "--ckpt_path", ckpt])
    assert cli.model.hparams.val_beam_size == 2  # not in the config: the checkpoint's value, as before
    cli = run("text", ["validate", "--config", cfg, "--ckpt_path", "last"])  # the name: that file's values too
    assert cli.model.hparams.val_beam_size == 2 and cli.trainer.ckpt_path == str(Path(ckpt).resolve())
    for name in (ckpt, "last"):  # given equal to the default is still given: greedy, as asked
        cli = run("text", ["validate", "--config", cfg, "--ckpt_path", name, "--model.val_beam_size", "1"])
        assert cli.model.hparams.val_beam_size == 1


@pytest.mark.slow
def test_a_resumed_fit_gets_its_own_max_time(tmp_path):
    cfg = str(resumable_config(tmp_path, "text", every=1))
    args = ["fit", "--config", cfg, "--trainer.max_steps", "1000", "--trainer.max_time", "00:00:00:01"]
    first = run("text", args)
    stopped = first.trainer.global_step
    assert 0 < stopped < 1000  # stopped by the clock
    ckpt = str(next(Path(".").rglob("last.ckpt")))
    resumed = run("text", [*args, "--ckpt_path", ckpt])
    # Lightning would restore the elapsed second and stop at once; a fresh second trains on (at least one step)
    assert resumed.trainer.global_step > stopped


def test_a_nan_loss_stops_training_with_one_line_naming_the_step(tmp_path, capsys, monkeypatch):
    from text_attn.translation.objective import TranslationObjective

    real_loss = TranslationObjective.training_loss
    calls = []

    def loss_that_turns_nan(self, *args):
        loss, logs = real_loss(self, *args)
        calls.append(1)
        return (loss * float("nan") if len(calls) == 4 else loss), logs  # the 4th training step: step 3

    monkeypatch.setattr(TranslationObjective, "training_loss", loss_that_turns_nan)
    with pytest.raises(SystemExit) as exc:
        run("text", ["fit", "--config", str(resumable_config(tmp_path, "text"))])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0].startswith("text-train: error: the training loss is nan at step 3: training stopped"), err


def test_text_fit_exports_the_best_checkpoint_and_keeps_the_last_weights(tmp_path, capsys):
    """The model file holds the best checkpoint's weights; the module goes on holding the last step's, as the trainer's
    step and the optimizer do (a further fit, validate or save_checkpoint from Python went on from the best weights
    labelled as the last step). 8 steps: the one validation, the best, at step 6; last.ckpt at step 8."""
    cfg = str(resumable_config(tmp_path, "text"))
    cli = run("text", ["fit", "--config", cfg, "--trainer.max_steps", "8", "--model.export_path", "m.pt"])
    out = capsys.readouterr().err
    assert "wrote model file: m.pt (best checkpoint " in out
    best = out.split("(best checkpoint ")[1].split(")")[0]
    state = torch.load(best, weights_only=True)["state_dict"]
    exported = load_model_file("m.pt", "text-model")["state_dict"]
    for k, v in exported.items():
        torch.testing.assert_close(v, state[f"net.{k}"])
    last = next(cb.last_model_path for cb in cli.trainer.checkpoint_callbacks if cb.save_last)
    last_state = torch.load(last, weights_only=True)
    assert last_state["global_step"] == cli.trainer.global_step == 8 and best.endswith("step=6.ckpt")
    assert any(not torch.equal(v, state[k]) for k, v in last_state["state_dict"].items())
    own = weights(cli)
    assert own.keys() == last_state["state_dict"].keys()
    for k, v in last_state["state_dict"].items():
        assert torch.equal(own[k], v), k


@pytest.mark.long
def test_best_and_last_name_an_earlier_runs_checkpoints(tmp_path, capsys):
    """`test --ckpt_path best` / `last` in a new CLI (a new process in real use): Lightning's callbacks know no best
    model there (it refused, though the config saves one) and look for last.ckpt in the new run's empty folder (it
    tested untrained weights after a warning). Now each names the earlier run's file and uses it; validate / test with
    none to find is refused in one line; fit with none starts from the beginning, as Lightning does."""
    cfg = str(resumable_config(tmp_path, "text", every=2))
    root = ["--trainer.default_root_dir", str(tmp_path / "run")]
    fit = run("text", ["fit", "--config", cfg, *root, "--trainer.max_steps", "6", "--model.export_path", "m.pt"])
    best = Path(fit.trainer.checkpoint_callback.best_model_path)
    last = next((tmp_path / "run").rglob("last.ckpt"))
    assert best.is_file() and best != last
    capsys.readouterr()
    for name, path in (("best", best), ("last", last)):
        cli = run("text", ["test", "--config", cfg, *root, "--ckpt_path", name])
        said = [line for line in capsys.readouterr().err.splitlines() if "--ckpt_path" in line]
        assert said == [f"text-train: --ckpt_path {name}: {path}"]
        assert cli.trainer.ckpt_path == str(path)  # the weights tested are that file's
    empty = ["--trainer.default_root_dir", str(tmp_path / "none")]
    for name in ("best", "last"):
        with pytest.raises(SystemExit) as stop:
            run("text", ["test", "--config", cfg, *empty, "--ckpt_path", name])
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and line.startswith(f"text-train: error: --ckpt_path {name}: no "), line
    cli = run("text", ["fit", "--config", cfg, *empty, "--trainer.max_steps", "2", "--ckpt_path", "last"])
    assert cli.trainer.global_step == 2  # from the beginning


@pytest.mark.parametrize(
    ("limit", "why"),
    [
        ("0", "validation is off (trainer.limit_val_batches 0)"),  # it said "the run ended before its first validation"
        ("1", "the run ended before its first validation"),  # 2 steps of an epoch of 6: validated at its end
    ],
)
def test_the_model_file_line_says_why_it_holds_the_last_weights(limit, why, tmp_path, capsys, recwarn):
    """A config whose checkpoint monitors val_bleu, stopped before its first validation or without validation: the
    model file holds the last weights, and the line says why there was no best checkpoint (it said no checkpoint
    monitored a metric); Lightning's own "could not find the monitored key ... Did you call `log('val_bleu', value)`"
    is not said beside it (a misnamed metric is refused at the first validation: lightning_parts)."""
    cfg = str(resumable_config(tmp_path, "text", every=2))
    run("text", ["fit", "--config", cfg, "--trainer.max_steps", "2", "--trainer.limit_val_batches", limit,
                 "--model.export_path", str(tmp_path / "m.pt")])  # fmt: skip
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("wrote model file")]
    assert line.endswith(f"(the last weights: no best checkpoint was saved: {why})")
    assert not [w for w in recwarn if "monitored key" in str(w.message)]


@pytest.mark.long
def test_a_resumed_fit_keeps_the_best_checkpoint_of_before_and_exports_what_an_uninterrupted_run_does(
    tmp_path, recwarn
):
    # Lightning restores a callback's best only in the same folder; a resumed fit writes into a new version folder
    cfg = str(resumable_config(tmp_path, "text", every=4))
    logged = ["--trainer.logger", "true"]  # checkpoints under lightning_logs/version_N: a new folder when resumed
    whole = run("text", ["fit", "--config", cfg, *logged, "--trainer.max_steps", "18", "--trainer.default_root_dir",
                         "a", "--model.export_path", "a.pt"])  # fmt: skip
    run("text", ["fit", "--config", cfg, *logged, "--trainer.max_steps", "8", "--trainer.default_root_dir", "b"])
    resumed = run("text", ["fit", "--config", cfg, *logged, "--trainer.max_steps", "18", "--trainer.default_root_dir",
                           "b", "--model.export_path", "b.pt", "--ckpt_path", "last"])  # fmt: skip
    ours, theirs = (c.trainer.checkpoint_callback for c in (whole, resumed))
    assert "version_1" in str(theirs.dirpath)
    assert theirs.best_model_score == ours.best_model_score  # the same validations, the same best
    assert Path(theirs.best_model_path).name == Path(ours.best_model_path).name
    a, b = (load_model_file(p, "text-model")["state_dict"] for p in ("a.pt", "b.pt"))
    for k, v in a.items():
        torch.testing.assert_close(b[k], v, msg=k)
    # both callbacks' states carried (the one keeping last.ckpt too): no "dirpath has changed ... won't be reloaded"
    assert not [w for w in recwarn if "dirpath has changed" in str(w.message)]


def test_a_callback_state_is_carried_into_the_resumed_runs_folder(tmp_path):
    from text_attn.core.run_checkpoints import carried_best

    old, new = tmp_path / "version_0" / "checkpoints", tmp_path / "version_1" / "checkpoints"
    old.mkdir(parents=True)
    best = old / "best-step=6.ckpt"
    torch.save({"global_step": 6, "callbacks": {"ModelCheckpoint{'monitor': 'val_bleu'}": {
        "monitor": "val_bleu", "best_model_path": str(best), "best_model_score": torch.tensor(0.5),
        "best_k_models": {str(best): torch.tensor(0.5)}, "kth_best_model_path": str(best),
        "kth_value": torch.tensor(0.5), "dirpath": str(old)}}}, best)  # fmt: skip
    gone = str(old / "best-step=3.ckpt")  # removed by save_top_k after last.ckpt recorded it
    state = {"monitor": "val_bleu", "best_model_path": gone, "best_model_score": torch.tensor(0.1),
             "best_k_models": {gone: torch.tensor(0.1)}, "kth_best_model_path": gone, "kth_value": torch.tensor(0.1),
             "dirpath": str(old)}  # fmt: skip
    carried = carried_best(state, str(new))
    assert carried["dirpath"] == str(new) and carried["best_model_path"] == str(best)
    assert float(carried["best_model_score"]) == 0.5 and list(carried["best_k_models"]) == [str(best)]
    assert carried_best(state, str(new), step=6)["best_model_path"] == str(best)  # the resumed step's own best
    # resumed from step 5: the earlier run went on, and its best of step 6 is not this run's past (it was exported)
    assert carried_best(state, str(new), step=5)["best_model_path"] == ""
    best.unlink()  # nothing recorded is left: nothing is claimed
    carried = carried_best(state, str(new))
    assert carried["best_model_path"] == "" and carried["best_model_score"] is None and carried["best_k_models"] == {}
    assert carried_best({**state, "dirpath": str(new)}, str(new)) == {**state, "dirpath": str(new)}  # same folder
    last = {"monitor": None, "best_model_path": "", "best_model_score": None, "last_model_path": str(old / "last.ckpt"),
            "dirpath": str(old)}  # fmt: skip
    assert carried_best(last, str(new)) == {**last, "dirpath": str(new)}  # no best to carry: the folder, for Lightning


def test_a_checkpoint_scored_through_another_datas_vocabulary_is_refused_in_one_line(tmp_path, capsys):
    # the data's vocabulary is built again for test / validate: another max_vocab (or seed, or lower) gave other ids
    from helpers.multi30k import DE, EN

    pairs = tmp_path / "pairs.tsv"  # more words than max_vocab keeps: each seed's train split fills it
    pairs.write_text("".join(f"{de}\t{en}\n" for de, en in zip(DE, EN, strict=True)))
    cfg = yaml.safe_load((FIX / "text/tiny_reorder.yaml").read_text())
    cfg["data"] = {"task": "tsv", "path": str(pairs), "val_size": 2, "test_size": 2, "batch_size": 4, "max_vocab": 12}
    cfg["trainer"]["enable_checkpointing"] = True
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run("text", ["fit", "--config", str(path), "--trainer.max_steps", "2"])
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    run("text", ["test", "--config", str(path), "--ckpt_path", ckpt])  # the same data: tested
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run("text", ["test", "--config", str(path), "--ckpt_path", ckpt, "--data.seed", "1"])  # the same sizes
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert "the checkpoint's source vocabulary" in err[0]
    # the option that differs named (it named none: "use the data settings the checkpoint was trained with")
    assert err[0].endswith(": here data.seed 1 (the checkpoint's: 0): use those the checkpoint was trained with"), err
    assert '" there, "' in err[0] and '" here' in err[0]  # of one size: where they differ (both said "12 tokens")


def test_a_resume_with_only_its_checkpoint_takes_the_data_options_from_it(tmp_path, capsys):
    """`fit --ckpt_path CKPT` alone: the data options, as the model's, come from the checkpoint (they were the
    defaults: other data, "the checkpoint's source vocabulary (69 tokens) differs ... (69 tokens)")."""
    cfg = yaml.safe_load((FIX / "text/tiny_reorder.yaml").read_text())
    cfg["data"].update(train_size=64, seed=3)  # not the defaults
    cfg["trainer"]["enable_checkpointing"] = True
    path = tmp_path / "seed3.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run("text", ["fit", "--config", str(path), "--trainer.max_steps", "2"])
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    capsys.readouterr()
    run("text", ["fit", "--ckpt_path", ckpt, "--trainer.max_steps", "4", "--trainer.logger", "false",
                 "--trainer.enable_progress_bar", "false"])  # fmt: skip
    assert "error" not in capsys.readouterr().err


def test_scoring_a_checkpoint_does_not_ask_for_the_callbacks_that_saved_it(tmp_path, recwarn):
    """Lightning warned at every ``test --ckpt_path`` of a config without the run's ModelCheckpoint that "callbacks
    used to create the checkpoint need to be provided": scoring trains nothing; the notice is left to fit."""
    tiny = str(FIX / "text/tiny_reorder.yaml")
    run("text", ["fit", "--config", tiny, "--trainer.enable_checkpointing", "true"])
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    run("text", ["test", "--config", tiny, "--ckpt_path", ckpt])
    assert not [w for w in recwarn if "callbacks used to create the checkpoint" in str(w.message)]


def test_the_fits_last_validation_can_be_its_best_checkpoint_when_that_callback_also_saves_last(tmp_path):
    """One ModelCheckpoint keeping the best by val_loss and last.ckpt: the save of last at the final step (before its
    validation) marked the step saved, so that validation's score was never weighed: the model file came from an
    earlier validation, whatever the last one scored."""
    cfg = yaml.safe_load((FIX / "text/tiny_reorder.yaml").read_text())
    best = {"monitor": "val_loss", "mode": "min", "save_top_k": -1, "save_last": True}  # every validation kept
    cfg["trainer"].update(
        enable_checkpointing=True,
        max_steps=12,
        callbacks=[{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": best}],
    )
    Path("c.yaml").write_text(yaml.safe_dump(cfg))
    run("text", ["fit", "--config", "c.yaml", "--trainer.default_root_dir", "r"])
    saved = sorted(p.name for p in Path("r").rglob("*.ckpt"))
    assert saved == ["epoch=0-step=6.ckpt", "epoch=1-step=12.ckpt", "last.ckpt"]


@pytest.mark.long
def test_a_scored_checkpoint_is_logged_at_its_step_without_a_bar_or_a_folder_notice(tmp_path, capsys, recwarn):
    """validate --ckpt_path: its scores were logged at step 0 (report: "best ... at step 1" for a checkpoint of step
    6), Lightning said the callbacks' folder had changed, and, its output a log file, it drew its bar there."""
    from text_attn.core.progress_lines import ProgressLines
    from text_attn.core.run_report import read_metrics, summary

    cfg = yaml.safe_load(resumable_config(tmp_path, "text", every=3).read_text())
    del cfg["trainer"]["enable_progress_bar"]  # left to the command: the output decides
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    args = ["--config", str(tmp_path / "cfg.yaml"), "--trainer.logger", "true", "--trainer.default_root_dir", "r"]
    run("text", ["fit", *args, "--trainer.max_steps", "6"])
    capsys.readouterr()
    cli = run("text", ["validate", *args, "--ckpt_path", "last"])
    out, err = capsys.readouterr()
    assert cli.trainer.progress_bar_callback is None and "\r" not in out + err
    assert not any(isinstance(c, ProgressLines) for c in cli.trainer.callbacks)
    assert not [w for w in recwarn if "dirpath has changed" in str(w.message)]
    series = read_metrics(Path("r/lightning_logs/version_1"))
    assert [step for step, _ in series["val_bleu"]] == [6]  # the checkpoint's step (last.ckpt: 6)
    assert summary(series).startswith("logged to step 6, 1 validation; best BLEU-4 ")
    assert cli.trainer.fit_loop.epoch_loop._batches_that_stepped == 0  # the trainer's own count back after the run


def test_a_network_key_given_with_a_checkpoint_merges_into_its_saved_network():
    """--model.network.dropout 0.1 with --ckpt_path: the checkpoint's other network keys stay (they had been dropped:
    the block given replaced the saved one, and the defaults' network did not fit the weights); a key given wins, and
    an option left unset still takes the checkpoint's value."""
    from jsonargparse import Namespace

    from text_attn.core.lightning_cli import _fill_unset

    class Module:
        def __init__(self, network: dict | None = None, lr: float = 1.0):
            pass

    saved = {"network": {"arch": "transformer", "d_model": 64, "dropout": 0.3}, "lr": 0.5}
    config = Namespace(network={"dropout": 0.1}, lr=1.0)
    _fill_unset(config, "model", saved, Module, frozenset({"model.network.dropout"}))
    assert config.network == {"arch": "transformer", "d_model": 64, "dropout": 0.1} and config.lr == 0.5
    config = Namespace(network=None, lr=2.0)  # nothing given: the saved block whole; a value given wins
    _fill_unset(config, "model", saved, Module, frozenset({"model.lr"}))
    assert config.network == saved["network"] and config.lr == 2.0


@pytest.mark.slow
def test_a_text_checkpoint_tested_with_one_network_key_given_keeps_its_network(tmp_path):
    """End to end: a text fit, then test --ckpt_path with no config and one network key: the checkpoint's network is
    rebuilt (its weights load) with the key given."""
    cfg = yaml.safe_load((FIX / "text/tiny_reorder.yaml").read_text())
    run("text", ["fit", "--config", str(FIX / "text/tiny_reorder.yaml"), "--trainer.enable_checkpointing", "true"])
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    data = [f"--data.{k}={v}" for k, v in cfg["data"].items()]
    cli = run("text", ["test", "--ckpt_path", ckpt, *data, "--trainer.logger", "false", "--model.network.dropout",
                       "0.25"])  # fmt: skip
    assert cli.model.hparams.network == {**cfg["model"]["network"], "dropout": 0.25}


@pytest.mark.long
def test_a_resume_whose_start_file_is_gone_says_how_to_go_on(tmp_path, capsys):
    """A run started from model.init_from (an SCST stage 2, a fine-tune), resumed once that file was removed or from
    another folder (a relative path): "no such file", with nothing to say that the resume needs none of its weights."""
    import shutil

    cfg = str(resumable_config(tmp_path, "caption", every=2))
    run("caption", ["fit", "--config", cfg, "--trainer.max_steps", "2", "--trainer.default_root_dir", "first"])
    start = tmp_path / "start.pt"
    shutil.copy(next(Path("first").rglob("model.pt")), start)
    args = ["fit", "--config", cfg, "--model.init_from", str(start), "--trainer.default_root_dir", "b"]
    run("caption", [*args, "--trainer.max_steps", "2"])
    start.unlink()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run("caption", [*args, "--trainer.max_steps", "4", "--ckpt_path", str(next(Path("b").rglob("last.ckpt")))])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    said = f"model.init_from: {start}: no such file: a resume takes its weights from --ckpt_path; give"
    assert err[0].startswith(f"caption-train: error: {said} --model.init_from null to resume without it"), err
    # as it says: resumed, to the step asked
    last = str(next(Path("b").rglob("last.ckpt")))
    resumed = run("caption", ["fit", "--config", cfg, "--model.init_from", "null", "--trainer.default_root_dir", "b",
                              "--trainer.max_steps", "4", "--ckpt_path", last])  # fmt: skip
    assert resumed.trainer.global_step == 4


def test_ckpt_path_last_with_nothing_saved_starts_a_fit_afresh_in_our_words(tmp_path, capsys, recwarn):
    """A run stopped before its first save (while caption-train cached its features), resumed with --ckpt_path last:
    Lightning's warning hinted at ModelCheckpoint(save_last=True), which the configs set; one note says it now. A
    validate finds nothing to score: refused in one line."""
    cfg = str(resumable_config(tmp_path, "text", every=2))
    made = run("text", ["fit", "--config", cfg, "--trainer.max_steps", "1", "--trainer.default_root_dir", "empty",
                        "--ckpt_path", "last"])  # fmt: skip
    assert made.trainer.global_step == 1
    err = capsys.readouterr().err
    assert (
        "text-train: note: --ckpt_path last: no last*.ckpt in empty/lightning_logs/* (the config's "
        "trainer.default_root_dir, or its logger's save_dir); this fit starts from its first step"
    ) in err
    assert not [w for w in recwarn if "no last checkpoint available" in str(w.message)]
    with pytest.raises(SystemExit) as exc:
        run("text", ["validate", "--config", cfg, "--trainer.default_root_dir", "none", "--ckpt_path", "last"])
    assert exc.value.code == 2
    assert "--ckpt_path last: no last*.ckpt in none/lightning_logs/*" in capsys.readouterr().err


def test_a_resume_with_another_arch_is_refused_naming_the_checkpoints(tmp_path, capsys):
    """--model.arch transformer --model.network null --model.network {...} beside an RNN's --ckpt_path was refused
    with "give --model.network null before the new block", which had been given: the checkpoint's architecture."""
    cfg = str(resumable_config(tmp_path, "text", every=1))
    run("text", ["fit", "--config", cfg, "--trainer.max_steps", "1", "--trainer.default_root_dir", "a"])
    last = next(Path("a").rglob("last.ckpt"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run("text", ["fit", "--config", cfg, "--trainer.max_steps", "2", "--trainer.default_root_dir", "a",
                     "--ckpt_path", str(last), "--model.arch", "transformer", "--model.network", "null",
                     "--model.network", "{d_model: 32, num_heads: 2}"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err == [
        f"text-train: error: --ckpt_path {last}: a model.arch rnn checkpoint; a resume goes on with its weights and "
        "architecture: drop --model.arch transformer, or start a new fit without --ckpt_path"
    ], err


def test_a_checkpoint_of_a_run_started_from_a_model_is_scored_without_that_models_file(tmp_path, capsys):
    """test / validate read the vocabularies from model.init_from's file, as its fit did: once the file was gone it
    was "model.init_from: start.pt: no such file", and once replaced (a bundled model upgraded) "the checkpoint's
    vocabulary differs ... use the data settings", though the checkpoint holds them. Now the checkpoint's are read."""
    from helpers.multi30k import DE, EN
    from helpers.tiny_translator import tiny_word_model_file

    start = tiny_word_model_file(tmp_path / "start.pt")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{de}\t{en}\n" for de, en in zip(DE, EN, strict=True)))
    cfg = yaml.safe_load((FIX / "text/tiny_reorder.yaml").read_text())
    cfg["model"] = {"arch": "rnn", "init_from": str(start), "lr": 0.005}
    cfg["data"] = {"task": "tsv", "path": str(pairs), "val_size": 2, "test_size": 2, "batch_size": 4}
    cfg["trainer"]["enable_checkpointing"] = True
    path = tmp_path / "pair.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run("text", ["fit", "--config", str(path), "--trainer.max_steps", "2"])
    ckpt = str(next(Path(".").rglob("*.ckpt")))
    scored = run("text", ["test", "--config", str(path), "--ckpt_path", ckpt]).trainer.callback_metrics
    start.unlink()  # gone
    gone = run("text", ["test", "--config", str(path), "--ckpt_path", ckpt]).trainer.callback_metrics
    tiny_word_model_file(start)  # replaced by another model of the same name (its vocabulary smaller)
    torch.save({**torch.load(start, weights_only=True), "src_vocab": {"itos": ["<pad>", "<unk>", "<bos>", "<eos>"]}},
               start)  # fmt: skip
    other = run("text", ["test", "--config", str(path), "--ckpt_path", ckpt]).trainer.callback_metrics
    assert "error" not in capsys.readouterr().err
    assert {k: float(v) for k, v in gone.items()} == {k: float(v) for k, v in scored.items()}
    assert {k: float(v) for k, v in other.items()} == {k: float(v) for k, v in scored.items()}
