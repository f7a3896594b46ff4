"""``caption`` and ``translate`` on a machine that is busy with something else: the default thread count (one per core
that other programs leave free when the command starts, text_attn/core/cpu_load.py) against one thread per CPU
(torch's choice on these machines, the default before) and one fewer, alone and beside busy processes. Prints a
markdown table.

    python benchmarks/busy_machine.py                   # 1 busy process, 2 repeats: about 3 minutes on 2 cores
    python benchmarks/busy_machine.py --busy 1 2 --repeats 3 --json busy.json

Each row runs the command as a user does (a fresh process: start-up and model load included) with the bundled models:
``caption FOLDER`` of 48 JPEG photos of 500 x 375 (crops of the bundled CC0 photos, as benchmarks/speed.py makes them)
and ``translate`` of 120 German sentences (the demo's four, repeated) from a file. "Busy" is N other processes each
spinning on the CPU (``while True: pass``: a build, a training run, a browser tab at work). The variants are
interleaved in each repeat and the table gives medians; "the default chose" is what the default picks in that condition,
read the same way in this process just before the runs. An explicit OMP_NUM_THREADS / MKL_NUM_THREADS, which the
default obeys, is left out of this process's environment and the commands'.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

SPIN = "while True: pass"


def _timed(cmd: list[str], stdin: Path | None) -> float:
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as f:
        done = subprocess.run(cmd, stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"busy_machine: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return seconds


def _chosen() -> int:
    """What the default chooses now: torch's count less the busy cores, read over one second as the commands do."""
    import torch

    from text_attn.core import cpu_load

    cpu_load.start()
    time.sleep(1.0)
    return cpu_load.free_threads(torch.get_num_threads())


def measure(commands: dict[str, tuple[list[str], Path | None]], settings: dict[str, list[str]], busy: int,
            repeats: int) -> list[dict]:  # fmt: skip
    """Rows for one load: each command under each thread setting, ``repeats`` times interleaved, beside ``busy``
    spinning processes."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        time.sleep(0.5 if busy else 0.0)
        chosen = _chosen()
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(repeats):
            for cname, (cmd, stdin) in commands.items():
                for sname, flags in settings.items():
                    times.setdefault((cname, sname), []).append(_timed([*cmd, *flags], stdin))
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    rows = []
    for cname in commands:
        default = statistics.median(times[(cname, "default")])
        for sname in settings:
            t = statistics.median(times[(cname, sname)])
            rows.append({"command": cname, "busy": busy, "setting": sname, "seconds": t, "vs_default": t / default,
                         "chosen": chosen, "each": times[(cname, sname)]})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--busy", type=int, nargs="+", default=[1], help="busy processes beside the runs (default: 1; "
                   "a load of 0, alone, is always measured)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=2, help="runs per variant, interleaved; the median is reported")
    p.add_argument("--photos", type=int, default=48, help="photos in the caption folder (default 48)")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.photos < 1 or any(b < 0 for b in args.busy):
        p.error("--repeats and --photos must be at least 1, --busy 0 or more")
    from text_attn.core.cpu_load import EXPLICIT, cpu_ids

    for name in EXPLICIT:  # before torch is imported here (by speed.py, below)
        os.environ.pop(name, None)  # the children inherit the environment without them too
    from _runs import StageError, console_script
    from speed import photo_folder

    from text_attn.translation.translate_cli import DEMO_SENTENCES

    cores = len(cpu_ids())
    try:
        caption, translate = console_script("caption"), console_script("translate")
    except StageError as err:
        raise SystemExit(f"busy_machine: {err}") from None
    with tempfile.TemporaryDirectory() as tmp:
        folder = photo_folder(Path(tmp) / "photos", args.photos)
        sentences = Path(tmp) / "de.txt"
        sentences.write_text("\n".join(DEMO_SENTENCES * 30) + "\n", encoding="utf-8")
        commands = {
            f"caption FOLDER ({args.photos} photos)": ([caption, str(folder), "--device", "cpu"], None),
            "translate (120 sentences)": ([translate, "--device", "cpu"], sentences),
        }
        settings = {"default": [], f"--threads {cores}": ["--threads", str(cores)]}
        if cores > 1:
            settings[f"--threads {cores - 1}"] = ["--threads", str(cores - 1)]
        rows = []
        for busy in sorted({0, *args.busy}):
            rows += measure(commands, settings, busy, args.repeats)
            print(f"... {busy} busy: done", flush=True)
    print(f"\n{cores} cores; median of {args.repeats} runs; default = one thread per core left free when it starts\n")
    print("| command | busy processes | threads | seconds | vs the default | the default chose |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['command']} | {r['busy']} | {r['setting']} | {r['seconds']:.2f} | {r['vs_default']:.2f}x | "
              f"{r['chosen']} |")  # fmt: skip
    if args.json:
        write_text(args.json, json.dumps({"cores": cores, "repeats": args.repeats, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
