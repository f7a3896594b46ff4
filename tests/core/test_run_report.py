"""text_attn.core.run_report: a run's logged metrics read back from metrics.csv (the right version folder of a run),
and the panels they are drawn in. (The ``caption-train report`` / ``text-train report`` commands:
tests/cli/test_report_command.py; a real fit's logs, TensorBoard event files included, are reported in
tests/cli/test_train_cli_text.py and tests/cli/test_caption_train.py.)"""

from __future__ import annotations

from helpers.run_logs import FIELDS, write_run

from text_attn.core.run_report import find_log_dir, panels_for, read_metrics, summary


def test_metrics_are_read_back_per_step(tmp_path):
    folder = write_run(tmp_path)
    series = read_metrics(folder)
    assert set(series) == set(FIELDS) - {"epoch", "step"}
    assert series["train_loss"][:2] == [(4, 3.8), (9, 3.55)] and len(series["train_loss"]) == 12
    assert series["val_Bleu_4"] == [(19, 0.1), (39, 0.5), (59, 0.4)]
    assert summary(series) == "logged to step 59, 3 validations; best BLEU-4 0.500 at step 39"
    assert [name for name, _ in panels_for(series)] == ["loss", "validation scores", "CIDEr (validation)",
                                                        "grounding (validation)"]  # fmt: skip
    assert dict(panels_for(series))["loss"] == ["train_loss", "val_loss"]


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
