"""`attention-serve` with and without `--idle-wait`, in alternating rounds: idle CPU, then photos/s under load.

    python benchmarks/serve_idle.py                   # 6 rounds, the bundled captioner; ~8 minutes on 2 cores
    python benchmarks/serve_idle.py --rounds 10 --json docs/serve_idle.json

One round starts a server (captioner only, as benchmarks/serve.py runs it) for each arm, the arm that goes first
alternating from round to round so that a machine that drifts (another program, a warming cache) weighs on both arms
alike. Each server: warmed up, then its process group's CPU-seconds over ``--idle`` idle seconds, then three lone
requests 3 s apart (the latency of a request that finds the worker idle), then ``--requests`` photos from 1 client and
from 16 clients (the speed benchmark's 192 photos, cycled). Prints every round and each arm's median and range, so
that a difference can be told from the noise of one run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _runs import alternating  # noqa: E402
from helpers.server import Server, multipart  # noqa: E402
from serve import drive  # noqa: E402
from speed import photo_folder  # noqa: E402

from attention_serve.idle_loop import HOT_SECONDS  # noqa: E402
from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

ARMS = {"LitServe's loop": ["--no-idle-wait"], "--idle-wait": ["--idle-wait"]}  # each named: the default may change
CLIENTS = (1, 16)
LONE = 3  # lone requests, each after HOT_SECONDS + 1 idle seconds


def one_arm(flags: list[str], jobs: list, idle: float, log: Path) -> dict[str, float]:
    server = Server(["--text-model", "none", "--max-queue", "512", "--max-batch-size", "16", "--batch-timeout",
                     "0.01", *flags], log)  # fmt: skip
    try:
        drive(server.port, jobs[:8], 2)  # warm up: the first batches pay for lazy set-up
        time.sleep(HOT_SECONDS + 1)  # so that --idle-wait's workers are in their waiting get
        before = server.cpu_seconds()
        time.sleep(idle)
        out = {"idle_cpu_share": (server.cpu_seconds() - before) / idle}
        lone = []  # a request that finds the worker idle: what waking it costs a user who posts now and then
        for _ in range(LONE):
            results, _ = drive(server.port, jobs[:1], 1)
            lone.append(results[0][1])
            time.sleep(HOT_SECONDS + 1)  # idle again
        out["lone_ms"] = statistics.median(lone) * 1000
        for clients in CLIENTS:
            results, wall = drive(server.port, jobs, clients)
            ok = [s for code, s in results if code == 200]
            out[f"clients_{clients}"] = len(ok) / wall
            out[f"clients_{clients}_p50_ms"] = statistics.median(ok) * 1000 if ok else float("nan")
            out[f"clients_{clients}_errors"] = len(results) - len(ok)
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6, help="rounds, each arm once a round (default 6)")
    p.add_argument("--requests", type=int, default=64, help="photos posted at each client count (default 64)")
    p.add_argument("--idle", type=float, default=10.0, help="idle seconds over which CPU is measured (default 10)")
    p.add_argument("--json", type=new_file, help="also write every round's numbers here")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.requests < 1 or args.idle <= 0:
        p.error("--rounds and --requests must be at least 1 and --idle positive")
    work = Path(tempfile.mkdtemp(prefix="serve-idle-"))
    photos = [f.read_bytes() for f in sorted(photo_folder(work / "photos").iterdir())]
    jobs = [("/caption", *multipart({}, {"image": ("p.jpg", photos[i % len(photos)])})) for i in range(args.requests)]
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    print("| round | arm | idle CPU (share of a core) | a lone request, ms | 1 client photos/s | 16 clients photos/s |"
          "\n|---|---|---|---|---|---|")  # fmt: skip
    for r, arm in alternating(list(ARMS), args.rounds):
        got = one_arm(ARMS[arm], jobs, args.idle, work / f"server-{r}-{len(runs[arm])}.log")
        runs[arm].append(got)
        print(f"| {r + 1} | {arm} | {got['idle_cpu_share']:.1%} | {got['lone_ms']:.0f} | {got['clients_1']:.2f} | "
              f"{got['clients_16']:.2f} |", flush=True)  # fmt: skip
    print("\n| arm | idle CPU, median | a lone request, median ms (range) | 1 client, median photos/s (range) | "
          "16 clients, median photos/s (range) | errors |\n|---|---|---|---|---|---|")  # fmt: skip
    summary = {}
    for arm, got in runs.items():
        cols = {k: [g[k] for g in got] for k in ("idle_cpu_share", "lone_ms", "clients_1", "clients_16")}
        errors = sum(g[f"clients_{c}_errors"] for g in got for c in CLIENTS)
        summary[arm] = {k: statistics.median(v) for k, v in cols.items()} | {"errors": errors}
        c1, c16, lone = cols["clients_1"], cols["clients_16"], cols["lone_ms"]
        print(f"| {arm} | {statistics.median(cols['idle_cpu_share']):.1%} | {statistics.median(lone):.0f} "
              f"({min(lone):.0f}-{max(lone):.0f}) | {statistics.median(c1):.2f} "
              f"({min(c1):.2f}-{max(c1):.2f}) | {statistics.median(c16):.2f} ({min(c16):.2f}-{max(c16):.2f}) | "
              f"{errors} |")  # fmt: skip
    if args.json:
        numbers = {"rounds": args.rounds, "requests": args.requests, "idle_seconds": args.idle,
                   "machine": f"{__import__('os').cpu_count()} cores", "summary": summary, "runs": runs}  # fmt: skip
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
