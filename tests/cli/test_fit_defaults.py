"""What a fit with no config says before it trains: told nothing of what to train on, it is refused in one line (it
trained the library's defaults: "step 1 of 313,000 ... about 135 h left", or reached for ImageNet weights and left
lightning_logs/version_0 behind); a model file it would write over is named; busy cores are noted. Trainer.fit is
replaced by a stub: every line here comes before training, so no test trains."""

import datetime
import functools
import sys
from pathlib import Path

import pytest
import torch
from pytorch_lightning import Trainer

from captioning.commands.train import train_main as caption_train
from text_attn.core import cpu_load
from text_attn.translation.train_cli import train_main as text_train


@pytest.fixture
def no_training(cli_run_in_tmp, monkeypatch):
    """Trainer.fit does nothing: the CLI's checks and notes before it run as in a real fit (its signature kept: the
    CLI's fit options, --ckpt_path among them, are read from it)."""

    @functools.wraps(Trainer.fit)
    def fit(self, *args, **kwargs) -> None:
        return None

    monkeypatch.setattr(Trainer, "fit", fit)
    return cli_run_in_tmp


@pytest.mark.parametrize(
    ("main", "prog", "config"), [(text_train, "text-train", "reorder_bahdanau"), (caption_train, "caption-train",
                                                                                  "shapes_soft")]
)  # fmt: skip
def test_a_fit_told_nothing_is_refused_in_one_line_before_any_folder(main, prog, config, no_training, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"{prog}: error: fit without --config or a data option would train the built-in defaults")
    assert f"give --config {config} or another shipped config" in err and "docs/" in err
    assert not Path("lightning_logs").exists() and list(Path().iterdir()) == []
    with pytest.raises(SystemExit):  # `last` of no earlier run starts afresh: refused as well
        main(["fit", "--ckpt_path", "last"])
    assert "fit without --config" in capsys.readouterr().err


def test_a_data_option_a_checkpoint_or_a_smoke_test_is_enough(no_training, capsys):
    text_train(["fit", "--data.train_size", "8"])
    text_train(["fit", "--trainer.fast_dev_run", "true"])  # a batch, no model file: kept as a smoke test
    ckpt = Path("old.ckpt")
    torch.save({"pytorch-lightning_version": "2.6.0", "hyper_parameters": {}, "state_dict": {}}, ckpt)
    text_train(["fit", "--ckpt_path", str(ckpt)])  # a resume takes its data options from the checkpoint
    assert "error" not in capsys.readouterr().err


def test_a_model_file_a_fit_would_replace_is_named_before_it_trains(no_training, capsys):
    """A shipped config's model.export_path is fixed (runs/reorder_bahdanau/model.pt) while its logs go to version_0,
    version_1: a second fit wrote over the first one's model file without a word."""
    old = Path("runs/m.pt")
    old.parent.mkdir()
    old.write_bytes(b"the first run's model")
    args = ["fit", "--data.train_size", "8", "--model.export_path", str(old)]
    text_train(args)
    written = datetime.datetime.fromtimestamp(old.stat().st_mtime)
    note = (f"text-train: note: runs/m.pt exists (written {written:%Y-%m-%d %H:%M}): this run replaces it when it "
            "ends; give another --model.export_path to keep both")  # fmt: skip
    assert note in capsys.readouterr().err.splitlines()
    ckpt = Path("old.ckpt")
    torch.save({"pytorch-lightning_version": "2.6.0", "hyper_parameters": {}, "state_dict": {}}, ckpt)
    text_train([*args, "--ckpt_path", str(ckpt)])  # a resume goes on with the run that wrote it: no note
    text_train(["fit", "--data.train_size", "8", "--model.export_path", "runs/new.pt"])  # nothing there yet
    assert "exists" not in capsys.readouterr().err


def test_busy_cores_are_noted_where_model_cpu_threads_is_not_set(no_training, capsys, monkeypatch):
    """A fit beside other work ran 7-10x slower on 2 cores than at model.cpu_threads 1, without a word. The load is
    read as caption and translate read it (text_attn.core.cpu_load), from the console script's start to fit's; here
    it is patched: another program kept one of 2 cores busy."""
    monkeypatch.setattr(cpu_load, "_busy_since", lambda first: (1.0, 2))
    for name in cpu_load.EXPLICIT:
        monkeypatch.delenv(name, raising=False)
    torch.set_num_threads(2)  # the conftest gives the test run's own count back
    monkeypatch.setattr(sys, "argv", ["text-train", "fit", "--data.train_size", "8"])
    text_train()  # as the console script runs it: the first reading taken at its start
    note = "text-train: note: other programs keep 1 of 2 cores busy: model.cpu_threads 1 may train faster"
    assert note in capsys.readouterr().err.splitlines()
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--model.cpu_threads", "2"])
    text_train()  # threads chosen: no note
    text_train(["fit", "--data.train_size", "8"])  # called from Python: no reading taken, no note
    assert "cores busy" not in capsys.readouterr().err
