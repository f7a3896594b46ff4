"""``caption`` on one process against several (``--devices``), from a folder against from tar shards: the same photos,
the same model, the whole command timed as a user runs it. Prints a markdown table (and writes JSON with --json).

    python benchmarks/caption_scale.py                       # 192 photos, the bundled Flickr8k model, 3 repeats
    python benchmarks/caption_scale.py --before /tmp/before  # also a tree of the code before, as a row

The photos are benchmarks/speed.py's 192 JPEGs of 500 x 375; the shards hold the same files (one shard of all, or
two of half each), packed as img2dataset packs them. Rows, each run ``--repeats`` times in turn (medians, and each
run's wall seconds; CPU seconds: user + system of the command and every process it started):
- 1 process, 2 torch threads: ``caption FOLDER --jsonl OUT --threads 2`` and the same from one shard;
- 1 process on Lightning's predict loop (``--devices 1 --threads 2``);
- 2 processes of 1 thread each (``--devices 2 --threads 1``, gloo), from the folder and from 2 shards;
- with ``--before TREE``: the one-process folder row run from TREE (a copy of the code before a change).
Every run's records are checked: the captions of every row equal the first row's, word for word.
Each row also runs once on one photo, so the table splits the time into a fixed cost (model load, process start, for
several processes their group's start) and the rate after it: (N - 1) / (time(N) - time(1)).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from text_attn.core.errors import at_least, new_file, positive_int

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import StageError, caption_model  # noqa: E402

ENTRY = "import sys\nfrom captioning.commands.caption import caption_main\nsys.exit(caption_main(sys.argv[1:]))\n"


def pack(photos: list[Path], path: Path, first: int) -> Path:
    """The photos as a webdataset shard: KEY.jpg, KEY.txt, KEY.json per photo (img2dataset's layout)."""
    with tarfile.open(path, "w") as tar:
        for i, photo in enumerate(photos, first):
            key = f"{i:09d}"
            tar.add(photo, f"{key}.jpg")
            for ext, data in (("txt", photo.stem.encode()), ("json", json.dumps({"key": key}).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def run(tree: Path, inputs: list[str], out: Path, extra: list[str]) -> tuple[float, float]:
    """Seconds of one ``caption`` command run from the code in ``tree`` (a script there: Lightning's launcher starts
    the other processes by running it again): wall, and CPU (user + system of it and every process it started: less
    sensitive than the wall to other work on a shared machine)."""
    out.unlink(missing_ok=True)
    entry = out.parent / ".caption_entry.py"  # beside the output, in the run's own folder: not left in the checkout
    if not entry.is_file():
        entry.write_text(ENTRY)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0, cpu0 = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, str(entry), *inputs, "--jsonl", str(out), *extra], env=env,
                          capture_output=True, text=True)  # fmt: skip
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode != 0:  # one line (run_main): the command's own last line says why
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise StageError(f"caption {' '.join(extra)} failed (exit code {done.returncode}): {said[:300]}")
    return seconds, cpu


def code_tree(text: str) -> Path:
    """argparse type of --tree and --before: a folder holding the package ``captioning/`` (only PYTHONPATH names it:
    a mistyped one ran the installed code, or failed at the first row)."""
    tree = Path(text)
    if not (tree / "captioning").is_dir():
        said = "no such folder" if not tree.is_dir() else "holds no captioning/ package (a copy of the code's tree)"
        raise argparse.ArgumentTypeError(f"{text}: {said}")
    return tree


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def captions(out: Path) -> list[str]:
    return [json.loads(line)["caption"] for line in out.read_text().splitlines()]


def merge_rate(tmp: Path, records: list[str], rows: int = 20_000) -> dict[str, float]:
    """Seconds to merge ``rows`` records (the run's own, repeated) from 2 interleaved parts into one output."""
    from text_attn.core.part_files import PartWriter, Row, merge_parts

    parts = tmp / "merge.parts"
    writers = [PartWriter(parts, 0), PartWriter(parts, 1)]
    for start in range(0, rows, 1000):
        for k, w in enumerate(writers):
            w.write(Row((i, 0), "ok", records[i % len(records)]) for i in range(start + k, start + 1000, 2))
    for w in writers:
        w.close()
    t0 = time.perf_counter()
    merge_parts(parts, tmp / "merged.jsonl")
    seconds = time.perf_counter() - t0
    size = (tmp / "merged.jsonl").stat().st_size
    return {"rows": rows, "rows_per_s": rows / seconds, "mb_per_s": size / seconds / 1e6}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # at least 2: the 2-shard row packs half the photos into each shard
    p.add_argument("--photos", type=at_least(2), default=192, help="photos to caption, at least 2 (default: 192)")
    p.add_argument("--repeats", type=positive_int, default=3, help="runs of each row, in turn (default: 3)")
    p.add_argument("--model", type=caption_model, help="model file (default: the bundled Flickr8k model)")
    p.add_argument("--tree", type=code_tree, default=ROOT, help="the code to time (default: this repository)")
    p.add_argument("--before", type=code_tree, help="a tree of the code before a change: one more row run from it")
    p.add_argument("--json", type=new_file, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    from speed import photo_folder
    from tqdm import tqdm

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = photo_folder(tmp / "photos", args.photos)
        photos = sorted(folder.iterdir())
        one = tmp / "one"
        one.mkdir()
        (one / photos[0].name).write_bytes(photos[0].read_bytes())
        half = len(photos) // 2
        shard = [str(pack(photos, tmp / "all.tar", 0))]
        shards = [str(pack(photos[:half], tmp / "a.tar", 0)), str(pack(photos[half:], tmp / "b.tar", half))]
        small = [str(pack(photos[:1], tmp / "one.tar", 0))]
        model = ["--model", args.model] if args.model else []
        tree = args.tree
        rows = {  # name: (tree, inputs for N photos, inputs for 1 photo, options)
            "1 process, 2 threads, folder": (tree, [str(folder)], [str(one)], ["--threads", "2"]),
            "1 process, 2 threads, 1 tar shard": (tree, shard, small, ["--threads", "2"]),
            "1 process on Lightning (--devices 1), 2 threads, folder": (tree, [str(folder)], [str(one)],
                                                                        ["--devices", "1", "--threads", "2"]),
            "2 processes (--devices 2), 1 thread each, folder": (tree, [str(folder)], [str(one)],
                                                                 ["--devices", "2", "--threads", "1"]),
            "2 processes (--devices 2), 1 thread each, 2 tar shards": (tree, shards, small,
                                                                       ["--devices", "2", "--threads", "1"]),
        }  # fmt: skip
        if args.before:
            rows["before: 1 process, 2 threads, folder"] = (args.before, [str(folder)], [str(one)], ["--threads", "2"])
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
        fixed: dict[str, list[tuple[float, float]]] = {k: [] for k in rows}
        words: dict[str, list[str]] = {}
        with tqdm(total=(args.repeats + 1) * len(rows), desc="runs", file=sys.stderr) as bar:
            for repeat in range(args.repeats):
                for name, (tree, many, few, extra) in rows.items():
                    out = tmp / "out.jsonl"
                    times[name].append(run(tree, many, out, [*model, *extra]))
                    words[name] = captions(out)
                    bar.update()
                    if repeat == 0:  # the fixed cost once a row: the rows' spread is in the photos' part
                        fixed[name].append(run(tree, few, tmp / "few.jsonl", [*model, *extra]))
                        bar.update()
        record_bytes = (tmp / "out.jsonl").stat().st_size / len(photos)
        merge = merge_rate(tmp, (tmp / "out.jsonl").read_text().splitlines())
        first = next(iter(words.values()))
        table = []
        for name in rows:
            t = statistics.median(w for w, _ in times[name])
            cpu = statistics.median(c for _, c in times[name])
            f = statistics.median(w for w, _ in fixed[name])
            rate = (len(photos) - 1) / (t - f) if t > f else float("nan")
            table.append({"what": name, "seconds": round(t, 2), "runs_s": [round(w, 1) for w, _ in times[name]],
                          "cpu_s": round(cpu, 1), "images_per_s": round(len(photos) / t, 2), "fixed_s": round(f, 2),
                          "rate_after_start": round(rate, 2), "same_captions": words[name] == first})  # fmt: skip
    cores = os.cpu_count()
    print(f"caption scale: {len(photos)} photos of 500 x 375, {args.model or 'the bundled Flickr8k model'}, "
          f"{cores} cores, median of {args.repeats}\n")  # fmt: skip
    print("| run | seconds (each run) | images/s | CPU seconds | fixed cost (1 photo), s | images/s after it | "
          "same captions |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for r in table:
        each = ", ".join(map(str, r["runs_s"]))
        print(f"| {r['what']} | {r['seconds']} ({each}) | {r['images_per_s']} | {r['cpu_s']} | {r['fixed_s']} | "
              f"{r['rate_after_start']} | {r['same_captions']} |")  # fmt: skip
    print(f"\nOUT: {record_bytes:.0f} bytes a record (with its attention rows). Merge (text_attn.core.part_files."
          f"merge_parts) of {merge['rows']} such rows from 2 parts: {merge['rows_per_s']:.0f} rows/s, "
          f"{merge['mb_per_s']:.0f} MB/s")  # fmt: skip
    table.append({"what": "merge", **merge, "record_bytes": round(record_bytes)})
    if args.json:
        from text_attn.core.safe_files import write_text

        write_text(args.json, json.dumps(table, indent=1))
    return 0 if all(r.get("same_captions", True) for r in table) else 1


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
