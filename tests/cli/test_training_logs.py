"""A fit whose output is a log file or a pipe, as under nohup, ``| tee`` or a batch scheduler: a line of news now and
then on stderr instead of a bar redrawn with carriage returns (~215 bytes a step on one line of the log), and a reader
that goes away does not end the run (the bar's next write raised BrokenPipeError inside Lightning's loop: a traceback,
exit 1, no last.ckpt and no model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# -m long (out of the default run; CI runs it): real text-train processes writing to pipes (~5-7 s each)
pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]
MAIN = (
    "import sys; from text_attn.translation.train_cli import main; sys.argv = ['text-train', *sys.argv[1:]]; "
    "sys.exit(main())"
)


def tiny_config(tmp_path: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "tests/fixtures/text/tiny_reorder.yaml").read_text())
    del cfg["trainer"]["enable_progress_bar"]  # left to the command: the output decides
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def fit(tmp_path: Path, *more: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    args = ["fit", "--config", str(tiny_config(tmp_path)), "--model.export_path", "m.pt", *more]
    # stdout block-buffered, as a pipe's is: the last lines wait in the buffer for the interpreter's last flush
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", MAIN, *args], cwd=tmp_path, env=env, stdout=stdout,
                            stderr=subprocess.PIPE)  # fmt: skip


def test_a_fit_logged_to_a_pipe_writes_lines_of_news_and_no_bar(tmp_path):
    out, err = fit(tmp_path).communicate(timeout=300)
    out, err = out.decode(), err.decode()
    assert "\r" not in out + err and "\x1b" not in out + err, (out + err)[-2000:]
    assert "text-train: step 1 of 6 (epoch 0)" in err, err[-2000:]
    assert "text-train: validated at step 6 (epoch 0): val_" in err, err[-2000:]
    assert out == "" and "\nwrote model file: m.pt (" in err, out  # stderr, as every `wrote` line


@pytest.mark.parametrize("bar", ["true", None])
def test_a_fit_whose_reader_goes_away_trains_to_the_end_and_writes_its_model(tmp_path, bar):
    # the bar, asked for, writes to stdout every step (BrokenPipeError in Lightning's loop: no model); without it, the
    # "wrote model file" line waited in the buffer for the interpreter's last flush (exit 120, "Exception ignored")
    proc = fit(tmp_path, *(["--trainer.enable_progress_bar", bar] if bar else []))
    proc.stdout.close()  # the reader is gone before the first write (a `| head` that ended, a killed `tee`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 0, err[-2000:]
    assert "Traceback" not in err and "BrokenPipeError" not in err, err[-2000:]
    assert (tmp_path / "m.pt").stat().st_size > 0


def test_a_config_with_a_bar_of_its_own_keeps_it_in_a_log(tmp_path, cli_run_in_tmp, monkeypatch, capsys):
    """A config naming a progress-bar callback ran in a terminal but was refused in a pipe (Lightning refuses a bar
    callback with enable_progress_bar false). In this process, its stdout taken for a pipe's as the command reads it
    (a new interpreter costs ~3 s; nothing here depends on the process's own streams)."""
    from text_attn.core import lightning_cli
    from text_attn.translation.train_cli import text_train_cli

    monkeypatch.setattr(lightning_cli, "is_terminal", lambda stream: False)
    cli = text_train_cli(["fit", "--config", str(tiny_config(tmp_path)), "--model.export_path", "m.pt",
                          "--trainer.callbacks+=TQDMProgressBar", "--trainer.callbacks.refresh_rate=50"])  # fmt: skip
    assert cli.trainer.global_step == 6 and (tmp_path / "m.pt").stat().st_size > 0
    assert "text-train: step 1 of" not in capsys.readouterr().err
