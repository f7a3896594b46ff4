"""The fault row of benchmarks/serve.py: the bundled captioner and translator served, clients posting photos and
sentences without pause, the caption model's worker killed with SIGKILL mid-run (what the kernel's out-of-memory
killer does), and what every request got.

    python benchmarks/serve_fault.py --clients 16        # or: python benchmarks/serve.py --fault 16

Each client is a keep-alive connection that never retries a failed connection: a reset or a request with no answer
counts as lost. A client that gets 503 waits its Retry-After, as a well-behaved client does, then goes on. Counted:
caption and translate requests answered 200, answered 503 (refused, with Retry-After: the ones the dead worker held
and those that came while its replacement loaded), anything else, and lost; the slowest 503; and the seconds from the
kill until /health answers 200 and a caption is answered again (both models answer).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from text_attn.core.errors import new_file, positive_int

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from helpers.server import Server, multipart  # noqa: E402
from speed import photo_folder  # noqa: E402

SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch im Park."]


def post(conn: http.client.HTTPConnection, path: str, body: bytes, ctype: str) -> tuple[int, float, float]:
    """(status, seconds, Retry-After seconds); status 0: the connection failed (reset, closed, no answer)."""
    start = time.perf_counter()
    try:
        conn.request("POST", path, body, {"Content-Type": ctype})
        reply = conn.getresponse()
        reply.read()
        return reply.status, time.perf_counter() - start, float(reply.getheader("Retry-After") or 0)
    except (http.client.HTTPException, OSError):
        conn.close()
        return 0, time.perf_counter() - start, 0.0


def fault_row(photos: list[bytes], clients: int, work: Path, kill_after: float = 8.0) -> tuple[tuple, dict]:
    """The row (what, measured, goal) and its numbers: ``clients`` caption clients and 2 translate clients."""
    server = Server(["--max-queue", "512"], work / "fault.log")
    results: dict[str, list[tuple[int, float, float]]] = {"/caption": [], "/translate": []}  # status, start, end
    stop = threading.Event()
    bodies = {
        "/caption": [multipart({}, {"image": ("p.jpg", data)}) for data in photos],
        "/translate": [(json.dumps({"text": s}).encode(), "application/json") for s in SENTENCES],
    }

    def client(route: str, offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        i = offset
        while not stop.is_set():
            start = time.monotonic()
            status, _, retry_after = post(conn, route, *bodies[route][i % len(bodies[route])])
            results[route].append((status, start, time.monotonic()))
            i += 1
            if status == 503:
                time.sleep(retry_after or 1)
            if status in (0, 503):  # a new connection: the server closes one idle longer than its keep-alive (5 s)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)

    try:
        threads = [threading.Thread(target=client, args=("/caption", k)) for k in range(clients)]
        threads += [threading.Thread(target=client, args=("/translate", k)) for k in range(2)]
        for t in threads:
            t.start()
        time.sleep(kill_after)
        (victim,) = server.get("/info")[2]["workers"]["caption"]["pids"]
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        while server.get("/health")[0] == 200 and time.monotonic() - killed < 5:  # until the supervisor sees it
            time.sleep(0.02)
        while server.get("/health")[0] != 200:
            time.sleep(0.05)
        healthy = time.monotonic() - killed
        while server.post_file("/caption", photos[0], name="p.jpg")[0] != 200:  # the captioner answers again
            time.sleep(0.05)
        both = time.monotonic() - killed
        time.sleep(kill_after)
        stop.set()
        for t in threads:
            t.join(180)
    finally:
        server.stop()
    numbers: dict = {"clients": clients, "killed_after_s": kill_after, "healthy_after_s": healthy,
                     "both_answer_after_s": both}  # fmt: skip
    for route, got in results.items():
        codes = [s for s, _, _ in got]
        held = [end - killed for s, start, end in got if start < killed <= end]  # in flight at the kill
        numbers[route[1:]] = {"requests": len(got), "answered_200": codes.count(200), "answered_503": codes.count(503),
                              "other": sum(1 for s in codes if s not in (0, 200, 503)), "lost": codes.count(0),
                              "in_flight_at_kill": len(held), "in_flight_answered_within_s": max(held, default=0.0),
                              "in_flight_503": sum(1 for s, st, e in got if st < killed <= e and s == 503)}  # fmt: skip
    c, t = numbers["caption"], numbers["translate"]
    measured = (f"caption: {c['requests']} requests, {c['answered_200']} answered 200, {c['answered_503']} 503 with "
                f"Retry-After, {c['other']} other, {c['lost']} lost; the {c['in_flight_at_kill']} in flight at the "
                f"kill answered within {c['in_flight_answered_within_s']:.2f} s of it ({c['in_flight_503']} with 503); "
                f"translate: {t['answered_200']}/{t['requests']} answered 200, {t['lost']} lost; /health 200 again "
                f"{healthy:.1f} s after the kill, both models answer after {both:.1f} s")  # fmt: skip
    met = (c["lost"] == 0 and c["other"] == 0 and t["answered_200"] == t["requests"]
           and c["in_flight_answered_within_s"] < 5)  # fmt: skip
    goal = f"goal: none lost, the other model untouched, 503s within seconds: {'met' if met else 'NOT met'}"
    return (f"fault: the caption worker killed (SIGKILL), {clients} + 2 clients", measured, goal), numbers


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=positive_int, default=16,
                   help="caption clients (default 16; plus 2 translate clients)")  # fmt: skip
    p.add_argument("--json", type=new_file, help="also write the numbers here")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="serve-fault-"))
    photos = [f.read_bytes() for f in sorted(photo_folder(work / "photos").iterdir())]
    row, numbers = fault_row(photos, args.clients, work)
    print("\n| what | measured | goal |\n|---|---|---|")
    print("| " + " | ".join(row) + " |")
    if args.json:
        from text_attn.core.safe_files import write_text

        write_text(args.json, json.dumps(numbers, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
