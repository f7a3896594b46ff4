"""attention-serve under load, measured against `caption FOLDER` on the same photos in the same run.

    python benchmarks/serve.py                      # the bundled models, the speed benchmark's 192 photos
    python benchmarks/serve.py --clients 1,4,16,64 --soak 10000 --multi30k-root ../shared/data/multi30k \\
        --json docs/serve.json

Starts the server (its own process, a free port), then:
- the baselines: `caption FOLDER` (images/s, the command as a user runs it; before the server starts and again after
  it stops, the 16-client goal against their mean: this machine's rate drifts by 10-30% over the minutes between)
  and one in-process ``Captioner`` call on one photo (the 1-client latency goal's yardstick);
- per number of concurrent clients (each a keep-alive connection posting photos one after another): images/s,
  p50 / p95 / p99 latency, errors;
- the soak: ``--soak`` requests at 16 clients with 5% bad uploads mixed in (truncated files, text, an unknown
  option): every good one must be answered 200, every bad one a 4xx; the server's memory (all its processes' RSS)
  over the first and the last thousand requests;
- with --multi30k-root: sentences/s posting Multi30k val German sentences one request each;
- the fault row (--fault N): both models served, the caption worker killed mid-run (benchmarks/serve_fault.py).
Prints the table with each goal met or not (goals: docs/serve.md).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from _runs import batch_settings, check_corpus, int_list  # noqa: E402
from helpers.server import Server, multipart  # noqa: E402
from serve_fault import fault_row  # noqa: E402
from speed import photo_folder  # noqa: E402

from text_attn.core.errors import at_least, new_file, positive_int  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402


def rss_mb(pid: int) -> float:
    """The resident memory of a process and all its descendants, MB (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total / 1024


class Client:
    """One keep-alive connection posting multipart photos (what a browser or an application does)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def post(self, path: str, body: bytes, ctype: str) -> tuple[int, float]:
        start = time.perf_counter()
        for attempt in range(2):
            try:
                self.conn.request("POST", path, body, {"Content-Type": ctype})
                reply = self.conn.getresponse()
                reply.read()
                return reply.status, time.perf_counter() - start
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                if attempt:
                    return 0, time.perf_counter() - start
        return 0, time.perf_counter() - start


def drive(port: int, jobs: list[tuple[str, bytes, str]], clients: int) -> tuple[list[tuple[int, float]], float]:
    """Post every job, ``clients`` at a time; (per job: status and seconds, in job order), and the wall time."""
    results: list[tuple[int, float] | None] = [None] * len(jobs)
    next_job = iter(range(len(jobs)))
    lock = threading.Lock()

    def worker() -> None:
        client = Client(port)
        while True:
            with lock:
                i = next(next_job, None)
            if i is None:
                return
            results[i] = client.post(*jobs[i])

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(worker) for _ in range(clients)]:
            f.result()
    return results, time.perf_counter() - start  # type: ignore[return-value]


def quantiles(seconds: list[float]) -> tuple[float, float, float]:
    qs = statistics.quantiles(seconds, n=100, method="inclusive") if len(seconds) > 1 else seconds * 99
    return qs[49] * 1000, qs[94] * 1000, qs[98] * 1000


def baseline_folder(folder: Path, threads: int) -> float:
    """`caption FOLDER` as a user runs it: images/s over the whole command (model loading included once)."""
    caption = str(Path(sys.executable).parent / "caption")
    subprocess.run([caption, str(next(folder.iterdir()))], capture_output=True, check=True)  # warm the caches
    start = time.perf_counter()
    subprocess.run([caption, str(folder), "--threads", str(threads)], capture_output=True, check=True)
    return len(list(folder.iterdir())) / (time.perf_counter() - start)


def in_process_latency(photo: Path, repeats: int = 20) -> float:
    """The median seconds of one ``Captioner`` call on one photo, at the model's recorded decoding (in process)."""
    from captioning.commands.caption import BUNDLED_MODEL
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import load_photo
    from text_attn.core.modelfile import decoding_defaults

    cap = Captioner.load(BUNDLED_MODEL)
    d = decoding_defaults(cap.info)
    times = []
    for _ in range(repeats + 2):
        start = time.perf_counter()
        image, _ = load_photo(photo, cap.preprocess.decode_side)
        feats = cap.encode(cap.preprocess(image).unsqueeze(0))
        cap.caption_features(feats, d.get("beam_size", 3), 30, d.get("length_penalty", 0.0),
                             no_repeat_ngram=d.get("no_repeat_ngram", 0))  # fmt: skip
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int_list(1), default=[1, 4, 16, 64],
                   help="concurrent clients, comma-separated (default 1,4,16,64)")  # fmt: skip
    p.add_argument("--requests", type=positive_int, default=192,
                   help="photos posted at each client count (default 192)")  # fmt: skip
    p.add_argument("--soak", type=at_least(0), default=10000,
                   help="requests of the soak with 5%% bad ones (default 10000; 0: no soak)")  # fmt: skip
    p.add_argument("--threads", type=positive_int, default=2, help="torch threads for the baselines (default 2)")
    p.add_argument("--max-batch-size", type=positive_int, default=16, help="the server's --max-batch-size")
    p.add_argument("--batch-timeout", type=float, default=0.01, help="the server's --batch-timeout")
    p.add_argument("--multi30k-root", type=Path, help="Multi30k (val.de or val.de.gz): also time /translate")
    p.add_argument("--fault", type=at_least(0), default=16, help="the fault row's caption clients: the caption "
                   "worker killed mid-run, both bundled models served (serve_fault.py; default 16; 0: no fault "
                   "row)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    p.add_argument("--batching", type=batch_settings, help="instead: compare batch settings at 16 clients, e.g. "
                   "1:0,4:0.01,16:0.01 (max_batch_size:batch_timeout each; the captioner alone)")  # fmt: skip
    args = p.parse_args(argv)
    if args.multi30k_root is not None:  # read after the baselines and the caption rows: checked first
        check_corpus(p, "--multi30k-root", args.multi30k_root, "val", "de")
    if args.batching:
        return compare_batching(args)
    work = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    folder = photo_folder(work / "photos")
    photos = [f.read_bytes() for f in sorted(folder.iterdir())]
    rows, numbers = [], {"machine": f"{__import__('os').cpu_count()} cores"}

    print("baselines ...", file=sys.stderr)
    folder_before = baseline_folder(folder, args.threads)
    one_call = in_process_latency(next(folder.iterdir()))
    numbers["in_process_call_ms"] = one_call * 1000
    rows.append(("caption FOLDER (the command)", "", ""))  # filled in once it has run again, after the server
    rows.append(("one in-process Captioner call", f"{one_call * 1000:.0f} ms", ""))
    goal_row: tuple[int, float] | None = None  # the 16-client row's index and rate: its goal once FOLDER ran again

    options = ["--max-queue", "512", "--max-batch-size", str(args.max_batch_size), "--batch-timeout",
               str(args.batch_timeout)]  # fmt: skip
    if not args.multi30k_root:  # the translator's worker would share the cores for nothing
        options += ["--text-model", "none"]
    server = Server(options, work / "server.log")
    try:
        jobs_of = [multipart({}, {"image": ("p.jpg", data)}) for data in photos]
        drive(server.port, [("/caption", *jobs_of[i % len(jobs_of)]) for i in range(8)], 2)  # warm up
        for clients in args.clients:
            jobs = [("/caption", *jobs_of[i % len(jobs_of)]) for i in range(args.requests)]
            results, wall = drive(server.port, jobs, clients)
            ok = [s for code, s in results if code == 200]
            p50, p95, p99 = quantiles(ok)
            rate = len(ok) / wall
            numbers[f"clients_{clients}"] = {"images_per_s": rate, "p50_ms": p50, "p95_ms": p95, "p99_ms": p99,
                                             "errors": len(results) - len(ok)}  # fmt: skip
            goal = ""
            if clients == 16:
                goal_row = (len(rows), rate)
            if clients == 1:
                met = "met" if p50 / 1000 <= 1.5 * one_call else "NOT met"
                goal = f"goal p50 <= 1.5x one call: {p50 / 1000 / one_call:.2f}x, {met}"
            measured = f"{rate:.1f} images/s; p50 {p50:.0f} / p95 {p95:.0f} / p99 {p99:.0f} ms"
            rows.append((f"{clients} client(s)", f"{measured}; errors {len(results) - len(ok)}", goal))
        if args.soak:
            soak(server, photos, args.soak, rows, numbers)
        if args.multi30k_root:
            translate_rows(server, args.multi30k_root, rows, numbers)
    finally:
        server.stop()
    print("caption FOLDER again ...", file=sys.stderr)
    folder_after = baseline_folder(folder, args.threads)
    folder_rate = (folder_before + folder_after) / 2
    numbers.update(caption_folder_images_per_s=folder_rate, caption_folder_before=folder_before,
                   caption_folder_after=folder_after)  # fmt: skip
    rows[0] = ("caption FOLDER (the command)", f"{folder_rate:.1f} images/s (the mean of {folder_before:.1f} before "
               f"the server and {folder_after:.1f} after)", "")  # fmt: skip
    if goal_row is not None:
        at, rate = goal_row
        met = "met" if rate >= 0.9 * folder_rate else "NOT met"
        rows[at] = (*rows[at][:2], f"goal >= 90% of caption FOLDER: {rate / folder_rate:.0%}, {met}")
    if args.fault:
        print("the fault row ...", file=sys.stderr)
        row, numbers["fault"] = fault_row(photos, args.fault, work)
        rows.append(row)
    print("\n| what | measured | goal |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.json:
        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
    return 0


def compare_batching(args: argparse.Namespace) -> int:
    """Images/s and latency at 16 clients for each batch setting, one server each, the same photos."""
    work = Path(tempfile.mkdtemp(prefix="serve-batching-"))
    photos = [f.read_bytes() for f in sorted(photo_folder(work / "photos").iterdir())]
    jobs = [("/caption", *multipart({}, {"image": ("p.jpg", photos[i % len(photos)])})) for i in range(args.requests)]
    rows, numbers = [], {}
    for size, timeout in args.batching:
        setting = f"{size}:{timeout:g}"
        server = Server(["--text-model", "none", "--max-queue", "512", "--max-batch-size", str(size),
                         "--batch-timeout", f"{timeout:g}"], work / f"server-{setting}.log")  # fmt: skip
        try:
            drive(server.port, jobs[:8], 2)  # warm up
            results, wall = drive(server.port, jobs, 16)
        finally:
            server.stop()
        ok = [s for code, s in results if code == 200]
        p50, p95, _ = quantiles(ok)
        numbers[setting] = {"images_per_s": len(ok) / wall, "p50_ms": p50, "p95_ms": p95}
        rows.append(f"| {size} | {timeout} | {len(ok) / wall:.1f} | {p50:.0f} | {p95:.0f} | {len(results) - len(ok)} |")
    print("\n| max_batch_size | batch_timeout (s) | images/s | p50 ms | p95 ms | errors |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    if args.json:
        write_text(args.json, json.dumps({"clients": 16, "requests": args.requests, "settings": numbers}, indent=1))
    return 0


def soak(server: Server, photos: list[bytes], n: int, rows: list, numbers: dict) -> None:
    """``n`` requests at 16 clients, every 20th a bad upload; memory at the first and the last thousand."""
    bad_kinds = [
        multipart({}, {"image": ("t.jpg", photos[0][: len(photos[0]) // 2])}),  # truncated: 422
        multipart({}, {"image": ("t.txt", b"not a photo at all")}),  # not an image: 415
        multipart({"colour": "red"}, {"image": ("p.jpg", photos[1])}),  # unknown option: 422
    ]
    jobs, bad = [], set()
    for i in range(n):
        if i % 20 == 19:
            bad.add(i)
            jobs.append(("/caption", *bad_kinds[i % len(bad_kinds)]))
        else:
            body, ctype = multipart({}, {"image": ("p.jpg", photos[i % len(photos)])})
            jobs.append(("/caption", body, ctype))
    first = min(1000, n)
    results, _ = drive(server.port, jobs[:first], 16)
    mem_first = rss_mb(server.proc.pid)
    rest, wall = drive(server.port, jobs[first:], 16)
    mem_last = rss_mb(server.proc.pid)
    results += rest
    good_ok = sum(1 for i, (code, _) in enumerate(results) if i not in bad and code == 200)
    bad_4xx = sum(1 for i, (code, _) in enumerate(results) if i in bad and 400 <= code < 500)
    growth = (mem_last - mem_first) / mem_first
    met = good_ok == n - len(bad) and bad_4xx == len(bad) and growth < 0.10
    numbers["soak"] = {"requests": n, "good_answered": good_ok, "good": n - len(bad), "bad_4xx": bad_4xx,
                       "bad": len(bad), "memory_first_mb": mem_first, "memory_last_mb": mem_last}  # fmt: skip
    rows.append((f"soak: {n} requests, {len(bad)} bad, 16 clients",
                 f"good answered {good_ok}/{n - len(bad)}, bad 4xx {bad_4xx}/{len(bad)}; memory {mem_first:.0f} -> "
                 f"{mem_last:.0f} MB ({growth:+.1%})", f"goal: all answered, all 4xx, growth < 10%: "
                 f"{'met' if met else 'NOT met'}"))  # fmt: skip


def translate_rows(server: Server, root: Path, rows: list, numbers: dict) -> None:
    import gzip

    path = root / "val.de" if (root / "val.de").exists() else root / "val.de.gz"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()][:512]
    for clients in (1, 16):
        jobs = [("/translate", json.dumps({"text": s}).encode(), "application/json") for s in lines]
        results, wall = drive(server.port, jobs, clients)
        ok = [s for code, s in results if code == 200]
        p50, p95, p99 = quantiles(ok)
        numbers[f"translate_clients_{clients}"] = {"sentences_per_s": len(ok) / wall, "p50_ms": p50}
        rows.append((f"translate, {clients} client(s), Multi30k val", f"{len(ok) / wall:.1f} sentences/s; p50 "
                     f"{p50:.0f} ms; errors {len(results) - len(ok)}", ""))  # fmt: skip


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
