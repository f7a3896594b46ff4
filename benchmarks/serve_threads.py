"""`attention-serve`'s torch threads per worker: the default (the cores lent by demand, attention_serve/cores.py)
against a fixed share (``--threads`` cores / workers, the default before) and ``--threads N`` (every worker all N
cores), with only the captioner busy and with both models busy, in alternating rounds.

    python benchmarks/serve_threads.py                 # 2 rounds, both bundled models; ~10 minutes on 2 cores
    python benchmarks/serve_threads.py --rounds 3 --json docs/serve_threads.json
    python benchmarks/serve_threads.py --rounds 4 --photos 192 --arms lent,share   # both busy: longer, two arms

One round starts the default server (both bundled models) for each arm, the arm that goes first alternating. Each
server: 16 photos posted by one client, one after the other (its median latency), ``--photos`` photos posted by 16
clients with the translator idle (images/s), then the same photos again while 4 clients post German sentences for as
long (images/s and sentences/s). Prints every round and each arm's medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _runs import alternating  # noqa: E402
from helpers.server import Server, multipart  # noqa: E402
from serve import drive  # noqa: E402
from speed import photo_folder  # noqa: E402

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

GERMAN = ["Ein Mann fährt Fahrrad auf einer Straße.", "Zwei Hunde spielen im Schnee mit einem Ball.",
          "Eine Frau mit einem roten Hut liest ein Buch im Park."]  # fmt: skip


def one_arm(flags: list[str], photos: list, sentences: list, log: Path) -> dict[str, float]:
    server = Server(["--max-queue", "512", *flags], log)
    try:
        drive(server.port, photos[:8], 2)  # warm up both models: the first batches pay for lazy set-up
        drive(server.port, sentences[:8], 2)
        alone, _ = drive(server.port, photos[:16], 1)
        out = {"one_client_p50_ms": 1000 * statistics.median(s for _, s in alone)}
        results, wall = drive(server.port, photos, 16)
        out["caption_alone"] = sum(code == 200 for code, _ in results) / wall
        texts: dict[str, tuple] = {}
        stop = threading.Event()

        def translate() -> None:  # 4 clients, batch after batch, until the photos are done
            answered, seconds = 0, 0.0
            while not stop.is_set():
                got, took = drive(server.port, sentences, 4)
                answered, seconds = answered + sum(code == 200 for code, _ in got), seconds + took
            texts["rate"] = (answered, seconds)

        side = threading.Thread(target=translate)
        side.start()
        results, wall = drive(server.port, photos, 16)
        stop.set()
        side.join()
        out["caption_both"] = sum(code == 200 for code, _ in results) / wall
        answered, seconds = texts["rate"]
        out["translate_both"] = answered / seconds
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="rounds, each arm once a round (default 2)")
    p.add_argument("--photos", type=int, default=96, help="photos posted in each part (default 96)")
    p.add_argument("--arms", default="lent,share,every", help="which of lent (the default), share (--threads "
                   "cores/2) and every (--threads cores) to run, comma-separated (default: all three)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write every round's numbers here")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.photos < 1:
        p.error("--rounds and --photos must be at least 1")
    cores = os.cpu_count() or 1
    share = str(max(1, cores // 2))  # the two bundled models, one worker each
    known = {"lent": ("default (lent by demand)", []),
             "share": (f"--threads {share} (a fixed share)", ["--threads", share]),
             "every": (f"--threads {cores} (each worker every core)", ["--threads", str(cores)])}  # fmt: skip
    chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not chosen or any(a not in known for a in chosen):
        p.error(f"--arms {args.arms}: each one of {', '.join(known)}")
    arms = dict(known[a] for a in chosen)
    work = Path(tempfile.mkdtemp(prefix="serve-threads-"))
    files = [f.read_bytes() for f in sorted(photo_folder(work / "photos").iterdir())]
    photos = [("/caption", *multipart({}, {"image": ("p.jpg", files[i % len(files)])})) for i in range(args.photos)]
    sentences = [("/translate", json.dumps({"text": GERMAN[i % len(GERMAN)]}).encode(), "application/json")
                 for i in range(24)]  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
    print("| round | threads | 1 client, p50 ms | captioner alone, images/s | both busy: images/s | both busy: "
          "sentences/s |\n|---|---|---|---|---|---|")  # fmt: skip
    for r, arm in alternating(list(arms), args.rounds):
        got = one_arm(arms[arm], photos, sentences, work / f"server-{r}-{len(runs[arm])}.log")
        runs[arm].append(got)
        print(f"| {r + 1} | {arm} | {got['one_client_p50_ms']:.0f} | {got['caption_alone']:.2f} | "
              f"{got['caption_both']:.2f} | {got['translate_both']:.1f} |", flush=True)  # fmt: skip
    print("\n| threads | 1 client, median p50 ms | captioner alone, median images/s | both busy: median images/s | "
          "both busy: median sentences/s |\n|---|---|---|---|---|")  # fmt: skip
    summary = {}
    for arm, got in runs.items():
        summary[arm] = {k: statistics.median(g[k] for g in got) for k in got[0]}
        m = summary[arm]
        print(f"| {arm} | {m['one_client_p50_ms']:.0f} | {m['caption_alone']:.2f} | {m['caption_both']:.2f} | "
              f"{m['translate_both']:.1f} |")  # fmt: skip
    if args.json:
        numbers = {"rounds": args.rounds, "photos": args.photos, "machine": f"{cores} cores", "summary": summary,
                   "runs": runs}  # fmt: skip
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
