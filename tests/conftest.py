"""Shared test fixtures."""

import os

import pytest

from text_attn.core import startup_gc

# Python's full garbage collections walk every object alive: with torch and Lightning imported, ~450,000 of them and
# ~0.3 s a pass, 14 passes in each xdist worker (~5 s). As in a console script (text_attn.core.startup_gc), the
# imports (torch's here, the test modules' in collection) run with the collector held, and what they made is then
# frozen (later passes skip it; the cycles that collection left, ~3% of those objects, stay). The tests' own garbage
# is collected as usual. xdist's main process collects no tests: it releases the collector in pytest_configure.
# (Lightning is not imported here: imported before pytest's log capture is in place, it would keep its records from
# caplog.)
startup_gc.hold()
import torch  # noqa: E402

# The frozen EfficientNet-Lite encoder runs in PyTorch here, not ONNX Runtime (captioning.model.onnx_encoder): every
# test's randomly initialised encoder would be exported once (about a second each).
# tests/captioning/test_onnx_encoder.py turns it on and checks it against PyTorch, with the bundled model too.
os.environ.setdefault("CAPTION_ONNX", "0")

# The tests talk to servers of their own on this machine: a proxy set for the machine (http_proxy, as CI machines
# behind a firewall have) is not asked for them (urllib sent a local server's health checks to it: every server test
# waited 180 s and failed). The commands and browsers the tests start inherit it.
for _name in ("no_proxy", "NO_PROXY"):
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1,localhost,::1"]))

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers (addopts: -n auto) share the machine's cores: each computes on its share of threads,
    # and so do the commands its tests start; otherwise every worker's torch would use all of them and each wait.
    _share = str(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    os.environ["OMP_NUM_THREADS"] = _share
    torch.set_num_threads(int(_share))


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Every test leaves torch's thread count as it found it. Code under test sets it (a benchmark's --threads,
    attention-serve's lent cores), and a worker left on 2 threads beside a busy worker ran every later test slower:
    its threads wait on each other for a core (a 2-step fit: 7.5 s against 1.5 s, the default run ~20% longer)."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


@pytest.fixture
def one_thread():
    """Run with one torch thread: on a small shared CPU several intra-op threads mostly wait on each other (the count
    comes back after the test with _torch_threads_kept)."""
    torch.set_num_threads(1)


@pytest.fixture
def cli_run_in_tmp(tmp_path, monkeypatch):
    """For tests that run a training CLI: work in tmp_path (runs and LightningCLI's config.yaml land there). Configs may
    set model.cpu_threads: _torch_threads_kept gives later tests their thread count back."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def pytest_collection_finish(session):
    startup_gc.release()  # torch, the test modules and what they imported (see the top of this file)


def pytest_configure(config):
    """pytest collects garbage five times at the end of every process, to find exceptions raised in finalizers; with
    torch and Lightning loaded each full collection takes ~0.5 s, in each xdist worker and the main process. Once is
    enough here (the same check, on what the tests left)."""
    if config.getoption("numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):
        startup_gc.release()  # xdist's main process: its workers collect and run the tests (see the top of this file)
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:  # a pytest without the setting: its own count
        return
    config.stash[gc_collect_iterations_key] = 1


# The checkout stays as the tests found it: a test that ran a command in the repository's root left its model.pt or
# the demo's caption-demo/ there (each now runs in its own folder). Checked once, in the process that collected the
# run (xdist's main process, or the only one): what appeared at the top of the checkout fails the run.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LEFT_ALONE = {".pytest_cache", ".hypothesis"}  # pytest's and hypothesis's own caches


def pytest_sessionstart(session):
    session.config._checkout_before = set(os.listdir(_ROOT))


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_checkout_before", None)
    if before is None or hasattr(session.config, "workerinput"):
        return
    new = sorted(set(os.listdir(_ROOT)) - before - _LEFT_ALONE)
    if new:
        print(f"\nthe tests left {', '.join(new)} in the checkout ({_ROOT}): a test ran there, not in its tmp_path")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The default run stays under 4 minutes on 2 cores: a test of the default run (neither long nor slow) that took 3 s or
# more is named at the end, to be marked long (pyproject.toml: CI runs those after the default run). Said, not failed:
# a busy machine slows every test.
_LONG_SECONDS = 3.0
_default_run_seconds: dict[str, float] = {}  # test id -> its setup and call, in the process that reports the run


def pytest_runtest_logreport(report):
    if report.when in ("setup", "call") and not {"long", "slow"} & set(report.keywords):
        _default_run_seconds[report.nodeid] = _default_run_seconds.get(report.nodeid, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    took = sorted(((s, n) for n, s in _default_run_seconds.items() if s >= _LONG_SECONDS), reverse=True)
    if took:
        names = ", ".join(f"{n} ({s:.1f} s)" for s, n in took[:5])
        # said as what it is: a note for whoever writes tests, not a fault of the run (a new user read it as one)
        terminalreporter.write_line(f"note for test writers (nothing failed): {len(took)} test(s) of the default run "
                                    f"took {_LONG_SECONDS:g} s or more; one that always does belongs under "
                                    f"@pytest.mark.long ({names})")  # fmt: skip
