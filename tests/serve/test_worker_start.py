"""attention_serve/worker_start.py: the model workers start from a template process with torch imported (a forkserver)
instead of fresh interpreters; ``ATTENTION_SERVE_TEMPLATE=0`` gives LitServe's "spawn"; LitServe asks for "spawn" and
gets the template, while its HTTP process is still forked and its manager is the default context's (outliving a
group's SIGTERM: tests/cli/test_start_methods.py). benchmarks/serve_start.py: both arms, alternating."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
from pathlib import Path

import litserve.server
import pytest
from helpers.scripts import run_benchmark, run_main
from helpers.tiny_captioner import tiny_model_file

from attention_serve.cli import _parser, build_server
from attention_serve.worker_start import PRELOAD, StartingFrom, start_worker_template

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "serve_start.py"


def test_litserve_asking_for_spawn_gets_the_template_and_everything_else_is_multiprocessing():
    template = mp.get_context("forkserver")
    swapped = StartingFrom(template)
    assert swapped.get_context("spawn") is template
    assert swapped.get_context("fork") is mp.get_context("fork")  # LitServe's HTTP process: still forked
    assert swapped.Value is mp.Value and swapped.Process is mp.Process


def test_the_template_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("ATTENTION_SERVE_TEMPLATE", "0")
    assert start_worker_template().get_start_method() == "spawn"


@pytest.mark.long
def test_the_preloaded_modules_import_and_touch_no_cuda():
    """A name that does not import would be skipped by the forkserver without a word (its workers would pay for it
    again); and a module that asked CUDA anything at import would start the driver in the template, which no forked
    worker could then use (on a GPU machine): every way torch reaches the driver is watched while they import."""
    code = (
        "import importlib, torch\n"
        "asked = []\n"
        "def watch(owner, name):\n"
        "    real = getattr(owner, name)\n"
        "    setattr(owner, name, lambda *a, **k: asked.append(name) or real(*a, **k))\n"
        "for owner, name in [(torch._C, '_cuda_getDeviceCount'), (torch.cuda, 'is_available'), (torch.cuda, 'init'),"
        " (torch.cuda, '_lazy_init'), (torch.cuda, 'device_count')]:\n"
        "    watch(owner, name)\n"
        f"[importlib.import_module(m) for m in {PRELOAD!r}]\n"
        "print('asked', asked)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "asked []"
    assert "torch" in PRELOAD and "attention_serve.apis" in PRELOAD


def test_the_server_starts_its_workers_from_the_context_it_is_given(tmp_path, monkeypatch):
    monkeypatch.setattr(litserve.server, "mp", litserve.server.mp)  # undone after the test: the swap is global
    args = _parser().parse_args(["--caption-model", str(tiny_model_file(tmp_path / "c.pt")), "--text-model", "none"])
    template = mp.get_context("forkserver")  # not started: only handed over
    build_server(args, template)
    assert litserve.server.mp.get_context("spawn") is template


def test_bad_rounds_are_refused_in_one_line(capsys):
    code, _, err = run_main(SCRIPT, capsys, "--rounds", "0")
    assert code == 2 and "--rounds must be at least 1, got 0" in err


@pytest.mark.slow
def test_both_arms_start_their_workers_as_they_say(tmp_path):
    printed, report = run_benchmark(SCRIPT, tmp_path / "start.json", "--rounds", 2)
    runs = report["runs"]
    assert [g["started_by"] for g in runs["LitServe's fresh interpreters"]] == ["the server"] * 2
    assert [g["started_by"] for g in runs["forked from the template"]] == ["the template"] * 2
    for got in (g for r in runs.values() for g in r):
        assert got["start_s"] > 0 and got["restart_s"] > 0 and got["stop_s"] > 0 and 0 < got["pss_mb"] <= got["rss_mb"]
    order = [line.split(" | ")[1] for line in printed.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    spawn, template = "LitServe's fresh interpreters", "forked from the template"
    assert order == [spawn, template, template, spawn]
