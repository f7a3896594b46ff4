"""text_attn.core.run_report and ``caption-train report`` / ``text-train report``: a run's logged metrics read back
from metrics.csv (the right version folder of a run), drawn as one PNG with the loss, validation and grounding
panels; a RUN_DIR with nothing to report is one line and exit code 2. (A real fit's logs, TensorBoard event files
included, are reported in tests/test_train_cli_text.py and tests/test_caption_train.py.)"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from PIL import Image

from captioning.train_cli import train_main as caption_train
from text_attn.core.run_report import find_log_dir, panels_for, read_metrics, summary
from text_attn.translation.train_cli import train_main as text_train

FIELDS = ["epoch", "step", "train_loss", "val_loss", "val_Bleu_4", "val_CIDEr", "val_grounding", "val_grounding_mass"]


def write_run(root: Path, version: int = 0, steps: int = 60, validations: tuple[int, ...] = (19, 39, 59)) -> Path:
    """A caption run's metrics.csv as Lightning's CSVLogger writes it: one row per logged step, one per validation."""
    folder = root / "lightning_logs" / f"version_{version}"
    folder.mkdir(parents=True)
    with (folder / "metrics.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=FIELDS)
        out.writeheader()
        for step in range(4, steps, 5):
            out.writerow({"epoch": step // 20, "step": step, "train_loss": 4.0 - step / 20})
        for k, step in enumerate(validations):
            bleu = [0.1, 0.5, 0.4][k % 3]
            out.writerow({"epoch": k, "step": step, "val_loss": 3.0 - k, "val_Bleu_4": bleu, "val_CIDEr": 5 * bleu,
                          "val_grounding": 0.2 * (k + 1), "val_grounding_mass": 0.1 * (k + 1)})  # fmt: skip
    return folder


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


@pytest.mark.parametrize("main, out", [(caption_train, None), (text_train, "other/r.png")])
def test_report_command_writes_the_png(tmp_path, capsys, main, out):
    write_run(tmp_path / "run")
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "run"), *(["--out", str(tmp_path / out)] if out else [])])
    printed, err = capsys.readouterr()
    assert exc.value.code == 0
    assert printed.strip().endswith("logged to step 59, 3 validations; best BLEU-4 0.500 at step 39")
    png = tmp_path / out if out else tmp_path / "run" / "report.png"  # default: RUN_DIR/report.png
    assert err.strip() == f"wrote {png}"
    with Image.open(png) as im:
        assert im.format == "PNG" and 1000 <= im.width <= 1400 and 600 <= im.height <= 1200  # 2 x 2 panels


def test_report_help_and_bad_run_dirs(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        caption_train(["report", "--help"])
    assert exc.value.code == 0 and "RUN_DIR" in capsys.readouterr().out
    (tmp_path / "empty").mkdir()
    for run, says in ((tmp_path / "nope", "is not a folder"), (tmp_path / "empty", "holds no training logs")):
        with pytest.raises(SystemExit) as exc:
            text_train(["report", str(run)])
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1
        assert err[0].startswith(f"text-train report: error: {run} ") and says in err[0]
