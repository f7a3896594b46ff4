"""How long `attention-serve` takes to start and to replace a dead worker: its workers forked from a template with
torch imported (the default, attention_serve/worker_start.py) against LitServe's fresh interpreters
(``ATTENTION_SERVE_TEMPLATE=0``), in alternating rounds.

    python benchmarks/serve_start.py                   # 5 rounds, both bundled models; ~4 minutes on 2 cores
    python benchmarks/serve_start.py --rounds 8 --json docs/serve_start.json

One round starts the default server (both bundled models, as a user types ``attention-serve``) for each arm, the arm
that goes first alternating from round to round, so that a machine that drifts weighs on both alike. Each server:
the seconds from its start until /health answers 200 (both models ready; looked at every 0.05 s), the memory of its
processes idle (the sum of their PSS: pages shared between processes counted once, in shares; and of their RSS), then
its caption worker killed with SIGKILL and the seconds until /health says the replacement is ready, then the seconds
from SIGTERM until the server has exited (idle: the stop's own cost). Each round also
says which process started that worker (the server or the template), so an arm cannot silently be the other. Prints
every round and each arm's median and range.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _runs import alternating  # noqa: E402
from helpers.server import Server  # noqa: E402

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

ARMS = {"LitServe's fresh interpreters": {"ATTENTION_SERVE_TEMPLATE": "0"}, "forked from the template": {}}
POLL = 0.05  # seconds between looks at /health


def memory_mb(server: Server, field: str) -> float:
    """The sum of ``field`` (``Pss`` or ``Rss``) over the server's processes, MB (Linux /proc/PID/smaps_rollup)."""
    total = 0
    for pid in server.group():
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue  # a process that ended between pgrep and the read
        total += sum(int(line.split()[1]) for line in lines if line.startswith(f"{field}:"))
    return total / 1024


def started_by(server: Server, pid: int) -> str:
    """Which process started worker ``pid``: "the server" (LitServe's spawn) or "the template" (a forkserver)."""
    parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    if "forkserver" in Path(f"/proc/{parent}/cmdline").read_text():
        return "the template"
    return "the server" if parent == server.proc.pid else f"process {parent}"


def restart_seconds(server: Server, pid: int, timeout: float = 120) -> float:
    """SIGKILL the caption worker ``pid``; seconds until /health says a replacement is ready."""
    start = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while time.monotonic() - start < timeout:
        code, _, body = server.get("/health")
        if code == 200 and body["models"]["caption"]["restarts"] == 1:
            return time.monotonic() - start
        time.sleep(POLL)
    raise RuntimeError(f"no new caption worker within {timeout} s: {server.log.read_text()[-2000:]}")


def one_arm(env: dict[str, str], log: Path) -> dict[str, float | str]:
    server = Server([], log, env=env, poll=POLL)
    try:
        out = {"start_s": server.started_in}
        time.sleep(2)  # settled: the page and the first /health answered, nothing loading
        out["pss_mb"], out["rss_mb"] = memory_mb(server, "Pss"), memory_mb(server, "Rss")
        (pid,) = server.get("/info")[2]["workers"]["caption"]["pids"]
        out["started_by"] = started_by(server, pid)
        out["restart_s"] = restart_seconds(server, pid)
        time.sleep(1)  # idle again
        stopping = time.monotonic()
        code = server.stop()
        out["stop_s"] = time.monotonic() - stopping
        if code != 0:
            raise RuntimeError(f"attention-serve exited {code} on SIGTERM: {server.log.read_text()[-2000:]}")
    finally:
        server.stop()  # already stopped unless a step above failed
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds, each arm once a round (default 5)")
    p.add_argument("--json", type=new_file, help="also write every round's numbers here")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    work = Path(tempfile.mkdtemp(prefix="serve-start-"))
    runs: dict[str, list[dict[str, float | str]]] = {arm: [] for arm in ARMS}
    print("| round | arm | start to /health 200, s | memory idle: PSS / RSS, MB | a killed worker replaced, s | "
          "SIGTERM to exit, s | the worker started by |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for r, arm in alternating(list(ARMS), args.rounds):
        got = one_arm(ARMS[arm], work / f"server-{r}-{len(runs[arm])}.log")
        runs[arm].append(got)
        print(f"| {r + 1} | {arm} | {got['start_s']:.2f} | {got['pss_mb']:.0f} / {got['rss_mb']:.0f} | "
              f"{got['restart_s']:.2f} | {got['stop_s']:.2f} | {got['started_by']} |", flush=True)  # fmt: skip
        time.sleep(1)  # the stopped server's processes gone
    print("\n| workers | start to /health 200, median s (range) | memory idle, median PSS / RSS MB | a killed worker "
          "replaced, median s (range) | SIGTERM to exit, median s (range) |\n|---|---|---|---|---|")  # fmt: skip
    summary = {}
    for arm, got in runs.items():
        cols = {k: [g[k] for g in got] for k in ("start_s", "pss_mb", "rss_mb", "restart_s", "stop_s")}
        summary[arm] = {k: statistics.median(v) for k, v in cols.items()}
        start, restart, stop = cols["start_s"], cols["restart_s"], cols["stop_s"]
        print(f"| {arm} | {statistics.median(start):.2f} ({min(start):.2f}-{max(start):.2f}) | "
              f"{summary[arm]['pss_mb']:.0f} / {summary[arm]['rss_mb']:.0f} | {statistics.median(restart):.2f} "
              f"({min(restart):.2f}-{max(restart):.2f}) | {statistics.median(stop):.2f} "
              f"({min(stop):.2f}-{max(stop):.2f}) |")  # fmt: skip
    if args.json:
        numbers = {"rounds": args.rounds, "machine": f"{os.cpu_count()} cores", "summary": summary, "runs": runs}
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
