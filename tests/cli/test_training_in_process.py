"""Both trainers run in process, as a notebook or a script runs them (issue 57's small gaps): the model file's path
printed as the user would type it, no warning about a Jupyter kernel's own argv, torch's thread count given back
after a run with ``model.cpu_threads`` (one that raised or was interrupted too), a shipped config by name, and
Lightning's notices quiet for the call only (the warnings filters and its loggers' filters as they were)."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import pytest
import torch
import yaml

from captioning.commands.train import caption_train_cli
from captioning.training.module import CaptionModule
from text_attn.core.lightning_cli import QUIET_WARNINGS, SCORING_WARNING, TIP_LOGGERS
from text_attn.translation.module import TranslationModule
from text_attn.translation.train_cli import text_train_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = {
    "caption": (caption_train_cli, FIX / "captions" / "tiny_shapes.yaml"),
    "text": (text_train_cli, FIX / "text" / "tiny_reorder.yaml"),
}
MODULES = {"caption": CaptionModule, "text": TranslationModule}


def process_filters() -> tuple[list, list[list]]:
    """The warnings filters and the filters on Lightning's loggers: what a later plain Lightning run prints by."""
    return list(warnings.filters), [list(logging.getLogger(name).filters) for name in TIP_LOGGERS]


def assert_as_before(before: tuple[list, list[list]]) -> None:
    """The filters as ``before``, but for those the call's first imports add (urllib3's, ...: a plain import's)."""
    filters, loggers = process_filters()
    assert [f for f in filters if f in before[0]] == before[0] and loggers == before[1]
    ours = (*QUIET_WARNINGS, SCORING_WARNING)
    assert not [f for f in filters if f not in before[0] and f[1] is not None and f[1].pattern in ours]


@pytest.mark.parametrize("family", sorted(RUNS))
def test_a_fit_from_a_notebook(family, cli_run_in_tmp, monkeypatch, capsys):
    train, config = RUNS[family]
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "/run/jupyter/kernel-1.json"])  # a kernel's
    set_to: list[int] = []
    real_set = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (set_to.append(n), real_set(n)))
    torch.set_num_threads(3)  # the caller's own count
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = process_filters()
        train(["fit", "--config", str(config), "--trainer.logger", "true", "--model.cpu_threads", "1"])
        assert_as_before(before)  # Lightning's notices were quiet for the call only
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated", stacklevel=1)  # a notice the run drops
    assert not [w for w in caught if "argv" in str(w.message)], [str(w.message) for w in caught]
    # two batches an epoch, fewer than log_every_n_steps: Lightning's notice of it says nothing of use here
    assert not [w for w in caught if "logging interval" in str(w.message)]
    assert "LeafSpec" in str(caught[-1].message)  # shown: the filter that dropped it in the run is gone
    assert sys.argv[1:] == ["-f", "/run/jupyter/kernel-1.json"]  # the process's argv, as it was
    # no default_root_dir or export_path: the file lies under the working directory and is named from it
    assert "wrote model file: lightning_logs/version_0/model.pt (" in capsys.readouterr().err
    assert (cli_run_in_tmp / "lightning_logs" / "version_0" / "model.pt").is_file()
    assert set_to == [3, 1, 3] and torch.get_num_threads() == 3  # 1 during the run, then the caller's 3 again


@pytest.mark.parametrize("family", sorted(RUNS))
@pytest.mark.parametrize(("raised", "code"), [(ValueError("a bad batch"), 2), (KeyboardInterrupt(), 130)])
def test_a_fit_that_raises_gives_the_callers_threads_back(family, raised, code, cli_run_in_tmp, monkeypatch):
    """Lightning calls no teardown hook where a fit raised or was interrupted (Ctrl-C), where RunState gave the
    caller's thread count back: a notebook went on at model.cpu_threads."""
    train, config = RUNS[family]

    def step(self, batch, batch_idx):
        raise raised

    monkeypatch.setattr(MODULES[family], "training_step", step)
    torch.set_num_threads(3)  # the caller's own count
    with pytest.raises(SystemExit) as exc:
        train(["fit", "--config", str(config), "--model.cpu_threads", "1"])
    assert exc.value.code == code and torch.get_num_threads() == 3


@pytest.mark.parametrize(("train", "name"), [(text_train_cli, "reorder_bahdanau"), (caption_train_cli, "shapes_soft")])
def test_a_shipped_config_by_name_from_python(train, name, cli_run_in_tmp, capsys):
    """--help says a shipped config is given by name; only the console scripts' train_main read names."""
    with pytest.raises(SystemExit) as exc:
        train(["fit", "--config", name, "--print_config"])
    assert exc.value.code == 0
    assert yaml.safe_load(capsys.readouterr().out)["trainer"]["default_root_dir"] == f"runs/{name}"


def test_a_refused_run_leaves_the_filters_as_they_were(cli_run_in_tmp, capsys):
    """A refusal (validate without weights: the validate / test filter is added too) ends the call with the warnings
    filters and Lightning's loggers' filters as they were: a later plain Lightning run prints its notices."""
    before = process_filters()
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["validate", "--config", str(RUNS["text"][1])])
    assert exc.value.code == 2 and "validate without --ckpt_path" in capsys.readouterr().err
    assert_as_before(before)
    tip = logging.makeLogRecord({"msg": "💡 Tip: a promotion"})
    assert all(logging.getLogger(name).filter(tip) for name in TIP_LOGGERS)
