"""A stopped ``optimize`` (text_attn.core.optimize_stops): Ctrl-C ended with LitData's ``os._exit(0)`` (a stopped run
looked finished to a script), SIGTERM with no word. Each now says where it stopped and exits 128 + the signal's
number; running the same call again continues to every sample. A real LitData write in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from text_attn.core.optimize_stops import WORKER_WAIT_S

N = 300  # samples of the train split: 50 ms each, so the write is under way when the signal comes

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from text_attn.core.streaming import optimize_splits

    out, marker, slow = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "slow"

    def sample(i):
        marker.touch()
        if slow:
            time.sleep(0.05)
        return {"index": i}

    inputs = {"train": list(range(N)), "val": [0], "test": [0]}
    optimize_splits(out, "text", {}, {}, inputs, lambda split: sample, log=lambda line: None)
    print("ALL WRITTEN")
    """
).replace("N)", f"{N})")


def _alive(tag: str) -> list[int]:
    """The processes whose command line holds ``tag`` (the run's folder): its LitData worker, once the main is gone."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.long
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; signals as Linux sends them")
@pytest.mark.parametrize(("number", "said"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_a_stopped_optimize_says_so_with_its_code_and_the_same_call_continues(tmp_path, number, said):
    from text_attn.core.streaming import read_all

    out, marker = tmp_path / "chunks", tmp_path / "started"
    script = tmp_path / "write.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # files, not pipes: LitData's worker holds them open after the command has ended (until it ends itself)
    with open(tmp_path / "out.txt", "w") as stdout_file, open(tmp_path / "err.txt", "w") as stderr_file:
        run = subprocess.Popen([sys.executable, str(script), str(out), str(marker), "slow"], stdout=stdout_file,
                               stderr=stderr_file, env=env)  # fmt: skip
        deadline = time.monotonic() + 120
        while not marker.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # a few samples in
        run.send_signal(number)
        run.wait(timeout=60)
    stdout, stderr = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert run.returncode == 128 + number, stderr[-2000:]
    assert "ALL WRITTEN" not in stdout
    assert stderr.rstrip().splitlines()[-1] == (
        f"{script.name}: stopped ({said}) while writing {out / 'train'}: the chunks written so far are kept; run the "
        "same command again to continue"
    )
    # LitData's worker reads the stop (or, its queued inputs lost with the main process, waits WORKER_WAIT_S), writes
    # what it holds and ends on its own: not left running
    deadline = time.monotonic() + WORKER_WAIT_S + 60
    while _alive(str(out)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(str(out))
    again = subprocess.run([sys.executable, str(script), str(out), str(marker), "fast"], capture_output=True,
                           text=True, env=env, timeout=120)  # fmt: skip
    assert again.returncode == 0 and "ALL WRITTEN" in again.stdout, again.stderr[-2000:]
    assert sorted(int(s["index"]) for s in read_all(out, "train")) == list(range(N))
