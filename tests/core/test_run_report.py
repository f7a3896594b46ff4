"""text_attn.core.run_report: a run's logged metrics read back from metrics.csv (the right version folder of a run),
and the panels they are drawn in. (The ``caption-train report`` / ``text-train report`` commands:
tests/cli/test_report_command.py; a real fit's logs, TensorBoard event files included, are reported in
tests/cli/test_train_cli_text.py and tests/cli/test_caption_train.py.)"""

from __future__ import annotations

import os

from helpers.run_logs import FIELDS, write_run

from text_attn.core.run_report import (
    chained_metrics,
    find_log_dir,
    locate_logs,
    monitored,
    panels_for,
    read_metrics,
    report_figure,
    resumed_chain,
    summary,
)


def test_metrics_are_read_back_per_step(tmp_path):
    folder = write_run(tmp_path)
    series = read_metrics(folder)
    assert set(series) == set(FIELDS) - {"epoch", "step"}
    # Lightning writes the steps done before the logging step's own (4 after 5 steps): read as the steps done
    assert series["train_loss"][:2] == [(5, 3.8), (10, 3.55)] and len(series["train_loss"]) == 12
    assert series["val_Bleu_4"] == [(20, 0.1), (40, 0.5), (60, 0.4)]
    assert summary(series) == "logged to step 60, 3 validations; best BLEU-4 0.500 at step 40"
    assert [name for name, _ in panels_for(series)] == ["loss", "validation scores", "CIDEr (validation)",
                                                        "grounding (validation)"]  # fmt: skip
    assert dict(panels_for(series))["loss"] == ["train_loss", "val_loss"]


def test_the_best_marked_is_of_the_metric_the_run_chooses_its_checkpoint_by(tmp_path):
    """The your_photos configs keep the best val_CIDEr: the report said the best BLEU-4 (and marked it) whatever the
    run chose by. config.yaml's first ModelCheckpoint with a monitor says which, and in which direction."""
    folder = write_run(tmp_path)
    series = read_metrics(folder)
    assert monitored(folder) is None  # no config.yaml: the first validation score, as before
    callbacks = """trainer:
  callbacks:
  - class_path: pytorch_lightning.callbacks.LearningRateMonitor
  - class_path: pytorch_lightning.callbacks.ModelCheckpoint
    init_args: {save_last: true, save_top_k: 0}
  - class_path: pytorch_lightning.callbacks.ModelCheckpoint
    init_args: {monitor: %s, mode: %s}
"""
    (folder / "config.yaml").write_text(callbacks % ("val_CIDEr", "max"))
    assert monitored(folder) == ("val_CIDEr", "max")
    assert summary(series, monitored(folder)) == "logged to step 60, 3 validations; best CIDEr 2.500 at step 40"
    (folder / "config.yaml").write_text(callbacks % ("val_loss", "min"))  # val_loss 3, 2, 1: the lowest, the last
    assert summary(series, monitored(folder)).endswith("3 validations; best validation loss 1.000 at step 60")
    (folder / "config.yaml").write_text(callbacks % ("val_accuracy", "max"))  # never logged: the first score
    assert summary(series, monitored(folder)).endswith("best BLEU-4 0.500 at step 40")


def test_the_run_folder_resolves_to_its_newest_version_with_training_steps(tmp_path):
    fit = write_run(tmp_path, 0)
    later = write_run(tmp_path, 1, steps=100, validations=(79, 99))
    tested = tmp_path / "lightning_logs" / "version_2"  # a `test` run afterwards: no training steps
    tested.mkdir()
    (tested / "metrics.csv").write_text("epoch,step,test_Bleu_4\n0,0,0.4\n")
    (tmp_path / "lightning_logs" / "version_3").mkdir()  # an empty one (logger false)
    assert find_log_dir(tmp_path) == later
    assert find_log_dir(tmp_path / "lightning_logs") == later
    assert find_log_dir(fit) == fit  # one version folder, as given


def test_a_short_fit_without_training_steps_is_still_found_before_a_later_test(tmp_path):
    """A fit shorter than log_every_n_steps logs its validations but no training step; the test run after it logs
    test metrics alone: the report draws the fit (it took the test's folder and found nothing to plot)."""
    root = tmp_path / "lightning_logs"
    (root / "version_0").mkdir(parents=True)
    (root / "version_0" / "metrics.csv").write_text("epoch,step,val_Bleu_4\n0,4,0.2\n")
    (root / "version_1").mkdir()
    (root / "version_1" / "metrics.csv").write_text("epoch,step,test_Bleu_4\n0,0,0.4\n")
    assert find_log_dir(tmp_path) == root / "version_0"


def test_a_resumed_fit_is_read_with_the_versions_it_continues(tmp_path):
    """A fit resumed with --ckpt_path logs into a new version from the checkpoint's step: the report reads the run's
    start from the version before it (the steps after the checkpoint, trained again, from the resumed one); a fresh
    fit in the same folder afterwards is a run of its own."""
    first = write_run(tmp_path, 0, steps=60)  # logged to step 54 (train) and 59 (val); its last.ckpt at step 40
    resumed = write_run(tmp_path, 1, steps=100, validations=(59, 79, 99), first=40)  # logs from step 44
    assert find_log_dir(tmp_path) == resumed and resumed_chain(resumed) == [first, resumed]
    series = chained_metrics([first, resumed])
    assert [s for s, _ in series["train_loss"]] == [5, 10, 15, 20, 25, 30, 35, 40, *range(45, 101, 5)]
    assert [s for s, _ in series["val_Bleu_4"]] == [20, 40, 60, 80, 100]  # the first's 60 was trained again
    fresh = write_run(tmp_path, 2, steps=30, validations=(19,))  # fit again from the start: not a continuation
    assert resumed_chain(fresh) == [fresh]


def test_a_short_fit_with_one_training_log_is_chained_to_its_resumed_version(tmp_path):
    """A fit of 30 steps logging every 20 has one training log (step 20) and validations to step 30; resumed from
    last (step 30) it logs from step 40: its interval read as 1, the report drew the resumed version alone."""
    root = tmp_path / "lightning_logs"
    first, resumed = root / "version_0", root / "version_1"
    for folder in (first, resumed):
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text("trainer:\n  log_every_n_steps: 20\nckpt_path: last\n")
    (first / "config.yaml").write_text("trainer:\n  log_every_n_steps: 20\nckpt_path: null\n")
    rows = ["epoch,step,train_loss,val_Bleu_4", "0,9,,0.1", "1,19,2.0,", "1,19,,0.2", "2,29,,0.3"]
    (first / "metrics.csv").write_text("\n".join(rows) + "\n")
    (resumed / "metrics.csv").write_text("epoch,step,train_loss,val_Bleu_4\n3,39,1.5,\n3,39,,0.4\n")
    assert resumed_chain(resumed) == [first, resumed]
    (resumed / "metrics.csv").write_text("epoch,step,train_loss,val_Bleu_4\n9,99,1.5,\n")  # far past its logs
    assert resumed_chain(resumed) == [resumed]


def test_a_resumed_fit_that_logged_only_a_validation_is_drawn_with_the_fit_it_continues(tmp_path):
    """Resumed from last (step 20) for 6 steps, logging every 10: its version holds one validation (step 24) and no
    training step, and the report drew the first version alone, as if the run had ended at step 20."""
    root = tmp_path / "lightning_logs"
    first, resumed = root / "version_0", root / "version_1"
    for folder, start in ((first, "null"), (resumed, "last")):
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(f"trainer:\n  log_every_n_steps: 10\nckpt_path: {start}\n")
    rows = ["epoch,step,train_loss,val_bleu", "0,9,3.0,", "0,9,,0.1", "1,19,2.0,", "1,19,,0.2"]
    (first / "metrics.csv").write_text("\n".join(rows) + "\n")
    (resumed / "metrics.csv").write_text("epoch,step,train_loss,val_bleu\n2,23,,0.3\n")
    assert find_log_dir(tmp_path) == resumed and resumed_chain(resumed) == [first, resumed]
    assert [s for s, _ in chained_metrics([first, resumed])["val_bleu"]] == [10, 20, 24]


def test_a_validation_only_segment_in_the_middle_of_a_chain_is_drawn(tmp_path):
    """Stopped at step 26, resumed for a few steps (a validation at 38, no training log: under log_every_n_steps),
    resumed again to the end: the third version's chain passed over the second, and began at it: its validation,
    and the run's first 26 steps, left out of the report."""
    root = tmp_path / "lightning_logs"
    versions = [root / f"version_{k}" for k in range(3)]
    for folder, start in zip(versions, ("null", "last", "last"), strict=True):
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(f"trainer:\n  log_every_n_steps: 10\nckpt_path: {start}\n")
    (versions[0] / "metrics.csv").write_text("epoch,step,train_loss,val_bleu\n0,9,3.0,\n0,19,2.5,\n")
    (versions[1] / "metrics.csv").write_text("epoch,step,train_loss,val_bleu\n1,37,,0.2\n")
    (versions[2] / "metrics.csv").write_text("epoch,step,train_loss,val_bleu\n2,49,1.5,\n2,75,,0.4\n")
    assert resumed_chain(versions[2]) == versions
    assert [s for s, _ in chained_metrics(versions)["val_bleu"]] == [38, 76]
    tested = root / "version_3"  # a test run's version (its config has validate's and test's own option) is no fit
    tested.mkdir()
    (tested / "config.yaml").write_text("verbose: true\nckpt_path: last\n")
    (tested / "metrics.csv").write_text("epoch,step,test_bleu\n2,75,0.4\n")
    later = root / "version_4"
    later.mkdir()
    (later / "config.yaml").write_text("trainer:\n  log_every_n_steps: 10\nckpt_path: last\n")
    (later / "metrics.csv").write_text("epoch,step,train_loss,val_bleu\n3,79,1.2,\n")
    assert resumed_chain(later)[-2:] == [versions[2], later]


def test_a_resumed_fit_whose_config_names_its_checkpoint_skips_an_unrelated_fit_between(tmp_path):
    first = write_run(tmp_path, 0, steps=60)
    write_run(tmp_path, 1, steps=100)  # a fresh fit of its own, long enough to look like the start
    resumed = write_run(tmp_path, 2, steps=100, validations=(59, 79, 99), first=40)
    (resumed / "config.yaml").write_text(f"ckpt_path: {tmp_path}/lightning_logs/version_0/checkpoints/last.ckpt\n")
    assert resumed_chain(resumed) == [first, resumed]
    (resumed / "config.yaml").write_text("ckpt_path: last\n")  # a name: the nearest fit that reaches it
    assert resumed_chain(resumed) == [tmp_path / "lightning_logs" / "version_1", resumed]


def test_a_loggers_own_folder_below_the_run_dir_is_found(tmp_path):
    """A CSVLogger given in the config (save_dir RUN_DIR/logs, name csv) logs to RUN_DIR/logs/csv/version_N: the
    report asked "was it trained with trainer.logger false?"."""
    folder = tmp_path / "logs" / "csv" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("epoch,step,val_Bleu_4\n0,4,0.2\n")
    assert find_log_dir(tmp_path) == folder and find_log_dir(tmp_path / "logs") == folder


def test_a_fresh_fit_is_never_chained_to_an_earlier_one_whatever_its_steps(tmp_path):
    """A fresh fit (config.yaml: ckpt_path null) logging every 20 steps after one logging every 5: its first step (20)
    fell within the earlier's, and the report drew both as one run "resumed; with version_0"."""
    write_run(tmp_path, 0, steps=30)  # train steps 5..30
    fresh = write_run(tmp_path, 1, steps=60, validations=(39, 59), first=15)  # its first logged step: 20
    (fresh / "config.yaml").write_text("trainer:\n  log_every_n_steps: 20\nckpt_path: null\n")
    assert resumed_chain(fresh) == [fresh]


def test_a_fit_resumed_from_another_run_folders_checkpoint_is_chained_to_that_folder(tmp_path, monkeypatch):
    """--ckpt_path other/lightning_logs/version_0/checkpoints/last.ckpt: the report chained the version_0 of the
    fit's own folder, another run. The path is read from where the fit ran (its default_root_dir tells which)."""
    other, own = tmp_path / "runs" / "other", tmp_path / "runs" / "own"
    theirs = write_run(other, 0, steps=60)
    write_run(own, 0, steps=60)  # an unrelated fit in the resumed one's folder
    resumed = write_run(own, 1, steps=100, validations=(59, 79, 99), first=40)
    config = (
        "trainer:\n  default_root_dir: runs/own\nckpt_path: runs/other/lightning_logs/version_0/checkpoints/last.ckpt\n"
    )
    (resumed / "config.yaml").write_text(config)
    monkeypatch.chdir(tmp_path / "runs")  # the report run elsewhere than the fit: the path as the fit read it
    assert [p.resolve() for p in resumed_chain(resumed)] == [theirs, resumed]
    (resumed / "config.yaml").write_text(f"ckpt_path: {theirs}/checkpoints/last.ckpt\n")  # an absolute path
    assert resumed_chain(resumed) == [theirs, resumed]
    (resumed / "config.yaml").write_text(f"ckpt_path: {tmp_path}/gone/version_0/checkpoints/last.ckpt\n")
    assert resumed_chain(resumed) == [resumed]  # no folder holds it (moved, removed): no guess


def test_a_newer_version_that_has_logged_nothing_yet_is_said(tmp_path):
    """A fit just started in a folder holding a finished one: the report drew the old run without a word."""
    old = write_run(tmp_path, 0)
    new = tmp_path / "lightning_logs" / "version_1"
    new.mkdir()
    (new / "events.out.tfevents.1.host").write_bytes(b"")  # TensorBoard's file, made as the fit starts
    (new / "config.yaml").write_text("trainer:\n  log_every_n_steps: 20\n")
    assert locate_logs(tmp_path) == (old, "version_1 has logged nothing yet (a fit logs every 20 steps: "
                                          "trainer.log_every_n_steps); this report is of version_0")  # fmt: skip
    assert locate_logs(tmp_path / "lightning_logs" / "version_0") == (old, None)


def test_a_newer_run_here_is_drawn_before_an_older_recorded_folder(tmp_path):
    """RUN_DIR/logs.yaml records a logger's folder elsewhere; a later fit with the default loggers logs into
    RUN_DIR/lightning_logs: the report drew the recorded folder's older run (recorded folders came first). Ranked by
    when each last logged (times set here: no test waits on the clock)."""
    from text_attn.core.log_record import record_logs

    run, elsewhere = tmp_path / "run", write_run(tmp_path / "logs", 0)
    record_logs(run, [elsewhere])
    here = write_run(run, 0, steps=100)
    os.utime(elsewhere / "metrics.csv", (1000, 1000))
    os.utime(here / "metrics.csv", (2000, 2000))
    assert locate_logs(run) == (here, None)
    os.utime(here / "metrics.csv", (500, 500))  # the recorded folder logged last: it is drawn
    assert locate_logs(run) == (elsewhere, None)


def test_one_validation_is_said_so_and_sacrebleus_scores_get_their_own_panel(tmp_path):
    series = {
        "train_loss": [(5, 3.0)],
        "val_bleu": [(10, 0.2)],
        "val_sacrebleu": [(10, 21.0)],
        "val_chrf": [(10, 48.0)],
    }
    assert summary(series) == "logged to step 10, 1 validation; best BLEU-4 0.200 at step 10"
    hundreds = ("sacreBLEU and chrF (validation, 0-100)", ["val_sacrebleu", "val_chrf"])  # not on BLEU-4's 0..1 axis
    assert panels_for(series) == [("loss", ["train_loss"]), ("validation scores", ["val_bleu"]), hundreds]


def _drawn(figure, title: str) -> dict[str, tuple[list[float], list[float]]]:
    """The lines of the report panel titled ``title``: legend label -> (steps, values)."""
    (ax,) = [ax for ax in figure.axes if ax.get_title(loc="left") == title]
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def test_reinforcement_learnings_reward_and_baseline_are_drawn_beside_the_surrogate_loss(tmp_path):
    """An SCST run's metrics.csv, and a hard-attention run's: the reward with its baseline (and SCST's advantage), the
    attention's entropy with the REINFORCE term, each on a panel of its own; the SCST loss's legend says what it is.
    Before, neither was drawn: an SCST report showed a loss near 0 and nothing of the reward."""
    scst = tmp_path / "scst" / "lightning_logs" / "version_0"
    scst.mkdir(parents=True)
    (scst / "metrics.csv").write_text(
        "epoch,step,train_loss,train_reward,train_baseline,train_advantage,val_CIDEr\n"
        "0,9,0.01,0.50,0.60,-0.10,\n0,19,-0.02,0.70,0.65,0.05,\n0,19,,,,,0.9\n"
    )
    figure = report_figure(read_metrics(scst))
    assert _drawn(figure, "reward (training)") == {
        "reward": ([10, 20], [0.5, 0.7]),
        "baseline": ([10, 20], [0.6, 0.65]),
        "advantage (reward - baseline)": ([10, 20], [-0.1, 0.05]),
    }
    assert list(_drawn(figure, "loss")) == ["train loss (SCST's surrogate, near 0: see the reward)"]
    hard = tmp_path / "hard"
    hard.mkdir()
    (hard / "metrics.csv").write_text(
        "epoch,step,train_loss,train_reward,baseline,train_entropy,train_reinforce\n"
        "0,4,3.0,-20.0,-21.0,2.5,0.3\n0,9,2.5,-15.0,-19.0,2.1,-0.2\n"
    )
    series = read_metrics(hard)
    assert [name for name, _ in panels_for(series)] == ["loss", "reward (training)", "hard attention (training)"]
    figure = report_figure(series)
    assert _drawn(figure, "reward (training)") == {
        "reward": ([5, 10], [-20.0, -15.0]),
        "baseline (moving average)": ([5, 10], [-21.0, -19.0]),
    }
    assert _drawn(figure, "hard attention (training)") == {
        "attention entropy (nats)": ([5, 10], [2.5, 2.1]),
        "REINFORCE term": ([5, 10], [0.3, -0.2]),
    }
    assert list(_drawn(figure, "loss")) == ["train loss"]  # a real loss here
    # one step range on every panel, with whole steps on the axis (a lone validation's point drew 12.4, 12.6, ...)
    drawn = [ax for ax in figure.axes if ax.get_title(loc="left")]
    assert len({ax.get_xlim() for ax in drawn}) == 1 and drawn[0].get_xlim() == (4.5, 10.5)  # steps 5-10
    figure.canvas.draw()
    assert all(float(t).is_integer() for ax in drawn for t in ax.get_xticks())


def test_a_logger_folder_outside_the_run_folder_is_recorded_newest_last(tmp_path):
    """RUN_DIR/logs.yaml (text_attn.core.log_record): the folders a logger wrote outside RUN_DIR/lightning_logs/, as
    paths from RUN_DIR, newest first when read; the default loggers' own folder is not recorded, and a logs.yaml of
    the user's is never overwritten."""
    from text_attn.core.log_record import record_logs, recorded

    run, a, b = tmp_path / "run", tmp_path / "logs" / "version_0", tmp_path / "logs" / "version_1"
    a.mkdir(parents=True)
    assert record_logs(run, [run / "lightning_logs" / "version_0"]) is None and not run.exists()
    record_logs(run, [a])
    record_logs(run, [b])
    record_logs(run, [a])  # recorded again (a validate of it): the newest again
    assert recorded(run) == [a, b]
    assert (run / "logs.yaml").read_text().splitlines()[1:] == ['- "../logs/version_1"', '- "../logs/version_0"']
    (tmp_path / "new").mkdir()  # the run folder moved with its logs: still found
    for name in ("run", "logs"):
        (tmp_path / name).rename(tmp_path / "new" / name)
    assert recorded(tmp_path / "new" / "run") == [tmp_path / "new" / "logs" / "version_0", tmp_path / "new" / "logs" /
                                                  "version_1"]  # fmt: skip
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "logs.yaml").write_text("mine: true\n")
    assert record_logs(tmp_path / "other", [a]) is None and recorded(tmp_path / "other") == []
    assert (tmp_path / "other" / "logs.yaml").read_text() == "mine: true\n"


def test_a_validate_of_a_checkpoint_given_by_path_continues_no_fit(tmp_path):
    """``validate --ckpt_path .../version_0/checkpoints/x.ckpt`` logs into version_1: its config (the subcommand's
    own ``verbose``) says it is no fit, which the report had counted as one resumed, its validation twice."""
    fit = write_run(tmp_path, 0, steps=60)
    check = tmp_path / "lightning_logs" / "version_1"
    check.mkdir(parents=True)
    (check / "metrics.csv").write_text("epoch,step,val_Bleu_4\n0,59,0.4\n")
    (check / "config.yaml").write_text(f"ckpt_path: {fit}/checkpoints/last.ckpt\nverbose: true\n")
    assert resumed_chain(check) == [check]
    (check / "config.yaml").write_text(f"ckpt_path: {fit}/checkpoints/last.ckpt\n")  # a fit's: resumed from it
    assert resumed_chain(check) == [fit, check]


def test_a_folder_above_several_runs_reports_the_one_logged_last_and_says_so(tmp_path):
    """runs/old/lightning_logs/version_1 was drawn over runs/new/lightning_logs/version_0, written after it, unsaid:
    two runs' version numbers say nothing of which is newer."""
    old = write_run(tmp_path / "old", 1)
    new = write_run(tmp_path / "new", 0)
    os.utime(old / "metrics.csv", (1_000_000, 1_000_000))  # logged long before
    chosen, note = locate_logs(tmp_path)
    assert chosen == new and note == (f"{tmp_path} holds the logs of 2 runs; this report is of the one logged last, "
                                      f"{tmp_path / 'new'}: give another's folder for it")  # fmt: skip
    assert locate_logs(tmp_path / "old") == (old, None)  # one run's folder: no note


def test_the_best_skips_a_validation_that_logged_nan():
    """A run whose first validation logged NaN reported "best BLEU-4 nan at step 10" (max and min stay on a first
    NaN), where ModelCheckpoint kept the later score's checkpoint."""
    nan = float("nan")
    series = {"val_bleu": [(10, nan), (20, 0.21), (30, 0.18)], "train_loss": [(30, 1.0)]}
    assert summary(series) == "logged to step 30, 3 validations; best BLEU-4 0.210 at step 20"
    assert summary({"val_bleu": [(10, nan)]}) == "logged to step 10"  # no score to call best
