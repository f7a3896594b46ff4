"""How long a command takes to start: the imports, and ``caption`` on one photo with one and two processes.

    python benchmarks/starts.py                        # 5 repeats, the table of docs/speed.md
    python benchmarks/starts.py --repeats 3 --json docs/starts.json

Each row is a whole command, timed from its start to its exit, on one demo photo with the bundled model, run in a
fresh process as a user runs it; the rows are interleaved in every repeat (a machine that slows mid-run slows them
all alike) and the table gives the median and each row as a ratio of Lightning's import in the same run:
- ``python -c "import torch"`` and ``python -c "import pytorch_lightning"``: the floors (torchmetrics, which
  Lightning imports, pulls in torchvision); Lightning's again, ending with ``os._exit(0)``: the import alone, without
  the interpreter's teardown, which ``caption`` skips too (text_attn.core.fast_exit);
- ``caption PHOTO``: one process, the captioning loop of its own; and the same without the collector held back while
  it starts (text_attn.core.startup_gc): ``caption_main`` run as the console script runs it, less the hold;
- ``caption PHOTO --jsonl OUT --devices 1``: Lightning's predict loop in one process;
- ``caption PHOTO --jsonl OUT --devices 2``: two processes, started together (captioning.commands.process_start:
  each imports and loads the model beside the other);
- the same with ``CAPTION_EARLY_START=0``: the second process started by Lightning's launcher when the loop begins,
  so it imports and loads again, in series behind the first;
- ``translate SENTENCE`` with the bundled Transformer's file, and with a copy stored as model files were before
  their tables became strings (the vocabularies as lists, the source check's log-probabilities as dicts: ``plain_copy``)
  to show what reading them costs; and ``Translator.load`` of both files in this process, alone.
Goal (issue 63): ``--devices 2`` at most 1.4x Lightning's import. Measure on a quiet machine.
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

from captioning.model.bundled import DEMO_PHOTOS  # noqa: E402
from text_attn.core.errors import new_file  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402
from text_attn.translation.bundled import model_path  # noqa: E402

LIGHTNING = "python -c 'import pytorch_lightning'"
# `caption PHOTO` as its console script runs it (text_attn.core.fast_exit.leaving), without startup_gc.hold()
NOT_HELD = (
    "import sys; from captioning.commands.caption import caption_main; "
    "from text_attn.core.fast_exit import run_and_leave; sys.argv[0] = 'caption'; run_and_leave(caption_main)"
)


SENTENCE = "Ein Mann fährt Fahrrad."


def _script(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else name


def plain_copy(model: Path, out: Path) -> Path:
    """``model`` (a text model file) written to ``out`` as files were stored before their tables became strings: the
    vocabularies as lists of tokens, the source check's log-probabilities as dicts; the same weights and values."""
    from text_attn.core.modelfile import load_model_file, save_model_file
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.source_check import restored
    from text_attn.translation.translator import KIND

    data = load_model_file(model, KIND)
    payload = {k: v for k, v in data.items() if k not in ("format", "version")}
    for key in ("src_vocab", "tgt_vocab"):
        payload[key] = {"tokens": Vocabulary.from_dict(data[key]).itos}
    if "source_check" in data:
        payload["source_check"] = restored(data["source_check"])
    return save_model_file(out, KIND, payload, data["version"])


def rows(out: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """label -> (command, extra environment)."""
    photo, caption, translate = str(DEMO_PHOTOS[0]), _script("caption"), _script("translate")
    jsonl = ["--jsonl", str(out / "out.jsonl")]
    bundled = model_path(None)
    plain = plain_copy(bundled, out / "plain.pt")
    return {
        "python -c 'import torch'": ([sys.executable, "-c", "import torch"], {}),
        LIGHTNING: ([sys.executable, "-c", "import pytorch_lightning"], {}),
        "the same, leaving without the interpreter's teardown": (
            [sys.executable, "-c", "import os, pytorch_lightning; os._exit(0)"],
            {},
        ),
        "caption PHOTO": ([caption, photo], {}),
        "the same, the collector not held while it starts": ([sys.executable, "-c", NOT_HELD, photo], {}),
        "caption PHOTO --jsonl OUT --devices 1": ([caption, photo, *jsonl, "--devices", "1"], {}),
        "caption PHOTO --jsonl OUT --devices 2": ([caption, photo, *jsonl, "--devices", "2"], {}),
        "the same, second process started by Lightning's launcher": (
            [caption, photo, *jsonl, "--devices", "2"],
            {"CAPTION_EARLY_START": "0"},
        ),
        "translate SENTENCE": ([translate, "--model", str(bundled), SENTENCE], {}),
        "translate SENTENCE, the model file's tables stored as before": (
            [translate, "--model", str(plain), SENTENCE],
            {},
        ),
    }


def load_times(files: dict[str, Path], repeats: int) -> dict[str, list[float]]:
    """Seconds of ``Translator.load`` of each file in this process, as ``translate`` loads it: the garbage collector
    held back (text_attn.core.startup_gc), the files alternated."""
    from text_attn.core import startup_gc
    from text_attn.translation.translator import Translator

    startup_gc.hold()
    found: dict[str, list[float]] = {label: [] for label in files}
    for _ in range(repeats + 1):  # the first round untimed: the page cache, torch's first load
        for label, path in files.items():
            start = time.perf_counter()
            Translator.load(path)
            found[label].append(time.perf_counter() - start)
    startup_gc.release()
    return {label: t[1:] for label, t in found.items()}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"starts: error: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5, help="runs of every row, interleaved (default 5)")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    p.add_argument(
        "--rows", help="only the rows whose command holds this text (and Lightning's import, the ratios' base)"
    )
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        table = {k: v for k, v in rows(Path(tmp)).items() if not args.rows or args.rows in k or k == LIGHTNING}
        loads = load_times({"the bundled Transformer's file": model_path(None),
                            "the same, its tables stored as before": Path(tmp) / "plain.pt"}, args.repeats)  # fmt: skip
        times: dict[str, list[float]] = {label: [] for label in table}
        for cmd, env in table.values():  # once untimed: the files in the page cache, as on later runs
            timed(cmd, env)
        for _ in range(args.repeats):
            for label, (cmd, env) in table.items():
                times[label].append(timed(cmd, env))
    medians = {label: statistics.median(t) for label, t in times.items()}
    base = medians[LIGHTNING]
    print(f"{os.cpu_count()} cores; median of {args.repeats} runs; ratio: to Lightning's import in this run\n")
    print("| command | seconds (median) | min - max | x Lightning's import |\n|---|---|---|---|")
    for label, t in times.items():
        print(f"| `{label}` | {medians[label]:.2f} | {min(t):.2f} - {max(t):.2f} | {medians[label] / base:.2f}x |")
    print("\n`Translator.load` in one process, as `translate` loads it (median of the repeats):\n")
    print("| model file | seconds (median) | min - max |\n|---|---|---|")
    for label, t in loads.items():
        print(f"| {label} | {statistics.median(t):.3f} | {min(t):.3f} - {max(t):.3f} |")
    if args.json:
        data = {"cores": os.cpu_count(), "repeats": args.repeats, "seconds": times, "translator_load": loads}
        write_text(args.json, json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
