"""``caption-train report`` / ``text-train report``: a run's logged metrics drawn as one PNG with the loss,
validation and grounding panels; a RUN_DIR with nothing to report is one line and exit code 2. (Reading the metrics
back: tests/core/test_run_report.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.run_logs import write_run
from PIL import Image

from captioning.commands.train import train_main as caption_train
from text_attn.core.log_record import record_logs
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.train_cli import train_main as text_train


@pytest.mark.parametrize("main, out", [(caption_train, None), (text_train, "other/r.png")])
def test_report_command_writes_the_png(tmp_path, capsys, main, out):
    write_run(tmp_path / "run")
    (tmp_path / "other").mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path / "run"), *(["--out", str(tmp_path / out)] if out else [])])
    printed, err = capsys.readouterr()
    assert exc.value.code == 0
    assert printed.strip().endswith("logged to step 60, 3 validations; best BLEU-4 0.500 at step 40")
    png = tmp_path / out if out else tmp_path / "run" / "report.png"  # default: RUN_DIR/report.png
    assert err.strip() == f"wrote {png}"
    with Image.open(png) as im:
        assert im.format == "PNG" and 1000 <= im.width <= 1400 and 600 <= im.height <= 1200  # 2 x 2 panels


def test_the_report_takes_its_format_from_the_name_and_refuses_a_page_name(tmp_path, capsys):
    """--out report.html wrote a PNG under that name, said "wrote", exit 0: refused before anything is read; .pdf and
    .svg are written as such."""
    write_run(tmp_path / "run")
    with pytest.raises(SystemExit) as exc:
        text_train(["report", str(tmp_path / "run"), "--out", str(tmp_path / "r.html")])
    assert exc.value.code == 2 and not (tmp_path / "r.html").exists()
    assert capsys.readouterr().err == (f"text-train report: error: --out {tmp_path / 'r.html'}: the report is a "
                                       "picture: give a .png, .pdf or .svg name\n")  # fmt: skip
    for out, said in (("", "--out is empty: give the report's file name (default: RUN_DIR/report.png)"),
                      ("-", "--out -: --out writes a picture, not stdout; use ./- for a file named -")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:  # were RUN_DIR/report.png, unsaid, and a file named "-"
            text_train(["report", str(tmp_path / "run"), "--out", out])
        assert exc.value.code == 2 and capsys.readouterr().err == f"text-train report: error: {said}\n"
    assert not (tmp_path / "run" / "report.png").exists()
    (tmp_path / "r.png").mkdir()
    for out, said in ((tmp_path / "nodir" / "r.png", f"cannot write --out {tmp_path / 'nodir' / 'r.png'}: the folder "
                       f"{tmp_path / 'nodir'} does not exist"),  # the folder was made, as no other command does
                      (tmp_path / "r.png", f"--out {tmp_path / 'r.png'} is a folder; give a file name")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            text_train(["report", str(tmp_path / "run"), "--out", str(out)])
        assert exc.value.code == 2 and capsys.readouterr().err == f"text-train report: error: {said}\n"
    assert not (tmp_path / "nodir").exists()
    for name, starts in (("r.pdf", b"%PDF"), ("r.svg", b"<?xml")):
        with pytest.raises(SystemExit) as exc:
            caption_train(["report", str(tmp_path / "run"), "--out", str(tmp_path / name)])
        assert exc.value.code == 0 and (tmp_path / name).read_bytes().startswith(starts)


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


def test_a_run_dir_that_is_no_folder_is_answered_with_the_familys_own_example(tmp_path, capsys):
    """text-train report nope/ suggested "e.g. runs/shapes_soft", a captioning run."""
    for main, prog, example in ((text_train, "text-train", "runs/reorder_bahdanau"),
                                (caption_train, "caption-train", "runs/shapes_soft")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(["report", str(tmp_path / "nope")])
        assert (exc.value.code, capsys.readouterr().err) == (2, f"{prog} report: error: {tmp_path / 'nope'} is not a "
                                                             f"folder (give a run's trainer.default_root_dir, e.g. "
                                                             f"{example})\n")  # fmt: skip
        with pytest.raises(SystemExit):
            main(["report", "--help"])
        assert f"e.g. {example}" in capsys.readouterr().out


def test_a_fit_that_has_logged_nothing_yet_is_said_in_one_line(tmp_path, capsys):
    """report while a new fit starts in a folder holding a finished one: the old run was drawn without a word; with
    the new one alone: "nothing to plot: no loss or validation metric among no metrics"."""
    write_run(tmp_path / "run")
    new = tmp_path / "run" / "lightning_logs" / "version_1"
    new.mkdir()
    (new / "events.out.tfevents.1.host").write_bytes(b"")  # what a fit has written before its first logged step
    (new / "config.yaml").write_text("trainer:\n  log_every_n_steps: 5\nckpt_path: null\n")
    with pytest.raises(SystemExit) as exc:
        text_train(["report", str(tmp_path / "run")])
    printed, err = capsys.readouterr()
    note = ("text-train report: note: version_1 has logged nothing yet (a fit logs every 5 steps: "
            "trainer.log_every_n_steps); this report is of version_0")  # fmt: skip
    assert exc.value.code == 0 and err.splitlines() == [note, f"wrote {tmp_path / 'run' / 'report.png'}"]
    assert printed.startswith(f"{tmp_path / 'run' / 'lightning_logs' / 'version_0'}: logged to step 60")
    with pytest.raises(SystemExit) as exc:
        text_train(["report", str(new)])
    said = (
        f"text-train report: error: {new}: no metrics logged yet (a fit logs every 5 steps: trainer.log_every_n_steps)"
    )
    assert (exc.value.code, capsys.readouterr().err) == (2, said + "\n")


def test_a_run_whose_logger_writes_elsewhere_is_reported_from_its_run_folder(tmp_path, monkeypatch, capsys):
    """A fit with --trainer.logger a CSVLogger (or TensorBoardLogger) whose save_dir is another folder wrote its logs,
    its config.yaml and its checkpoints there and nothing into its default_root_dir: `report RUN_DIR` said "is not a
    folder". The run folder records the logger's folder (logs.yaml), and report finds the logs through it."""
    monkeypatch.chdir(tmp_path)
    fixture = Path(__file__).parent.parent / "fixtures" / "text" / "tiny_reorder.yaml"
    text_train_cli(["fit", "--config", str(fixture), "--trainer.default_root_dir", "run", "--model.export_path", "m.pt",
                    "--trainer.logger", "CSVLogger", "--trainer.logger.save_dir", "elsewhere"])  # fmt: skip
    logs = (tmp_path / "elsewhere" / "lightning_logs" / "version_0").resolve()
    assert not (tmp_path / "run" / "lightning_logs").exists()  # nothing of the logs in the run folder itself
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        text_train(["report", "run"])
    printed, err = capsys.readouterr()
    assert exc.value.code == 0, err
    assert printed == f"{logs}: logged to step 6, 1 validation; best BLEU-4 {printed.split()[-4]} at step 6\n"
    assert err == "wrote run/report.png\n" and (tmp_path / "run" / "report.png").stat().st_size > 0


def test_logs_that_left_the_recorded_folder_are_one_line_naming_it(tmp_path, capsys):
    record_logs(tmp_path / "run", [tmp_path / "gone" / "version_0"])  # recorded, then moved away
    with pytest.raises(SystemExit) as exc:
        caption_train(["report", str(tmp_path / "run")])
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0] == (f"caption-train report: error: {tmp_path / 'run'} holds no training logs, and the folders its "
                      f"logs.yaml records hold none either (moved or removed?): {tmp_path / 'gone' / 'version_0'}; "
                      "give the logger's folder (its save_dir) as RUN_DIR")  # fmt: skip


def test_a_log_that_cannot_be_read_and_a_report_that_cannot_be_written_are_said_as_such(tmp_path, capsys,
                                                                                      monkeypatch):  # fmt: skip
    """A log the command could not read was "cannot write RUN_DIR/report.png: ... metrics.csv", the placeholder
    itself, not the path (review)."""
    import errno

    import text_attn.core.run_report as run_report

    run = write_run(tmp_path / "run")
    metrics = next(Path(run).rglob("metrics.csv"))
    for failed, said in ((metrics, f"cannot read {metrics}: Permission denied"),
                         (tmp_path / "run" / "report.png", f"cannot write {tmp_path / 'run' / 'report.png'}: "
                          "Permission denied (--out FILE writes it elsewhere)")):  # fmt: skip

        def refused(*args, failed=failed, **kwargs):
            raise PermissionError(errno.EACCES, "Permission denied", str(failed))

        monkeypatch.setattr(run_report, "plot_report", refused)
        with pytest.raises(SystemExit) as exc:
            text_train(["report", str(tmp_path / "run")])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err == f"text-train report: error: {said}\n", err


@pytest.mark.parametrize("text", ["", "epoch,step,train_loss\n", "epoch,train_loss\n0,3.5\n0,3.2\n"])
def test_a_metrics_file_that_holds_nothing_readable_is_said_as_such(tmp_path, capsys, text):
    """An empty, header-only or step-less metrics.csv of a finished run was "no metrics logged yet (a fit logs every
    50 steps ...)", as if the run had just begun."""
    version = tmp_path / "run" / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    (version / "metrics.csv").write_text(text)
    with pytest.raises(SystemExit) as exc:
        text_train(["report", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err == (f"text-train report: error: {version / 'metrics.csv'}: no metric with its "
                                           "step can be read from it (empty, cut off, or not the CSV logger's "
                                           "columns: step, then the metrics)\n"), err  # fmt: skip


def test_a_run_folder_named_in_another_script_gets_one_note_not_a_warning_a_character(tmp_path, capsys):
    """matplotlib warned once a character ("run_report.py:447: UserWarning: Glyph 26085 ... missing from font(s)
    DejaVu Sans"), and the title was drawn in DejaVu Sans alone: an installed font that has them draws them now, and
    what none has is named in one note."""
    import warnings

    from text_attn.core.fonts import glyph_message, uncovered

    run = tmp_path / "my run 日本"
    write_run(run)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the report
        with pytest.raises(SystemExit) as exc:
            text_train(["report", str(run)])
    err = capsys.readouterr().err
    assert exc.value.code == 0 and "Warning" not in err, err
    missing = uncovered(["日本"])
    assert (f"text-train report: note: {glyph_message(missing)}" in err) == bool(missing), err
