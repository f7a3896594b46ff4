"""What the benchmarks share: train a config through its CLI once, timed, and remember how long it took; run a
console script as a stage with its output in a log file."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class StageError(RuntimeError):
    """A stage failed: one line naming it and its log."""


ROOT = Path(__file__).resolve().parents[1]
# the toolkit's bad-input errors a benchmark meets reading its data, models and options (by name: importing their
# modules here would import torch for every --help)
BAD_INPUT = (
    "ModelFileError",
    "CaptionDataError",
    "TaskError",
    "SubwordError",
    "ChunkError",
    "ImageReadError",
    "ScoresFileError",
    "FaithfulnessFileError",
    "UnseenFileError",
    "ReadLinesError",
)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A table as the docs hold it: the header, its rule, a line a row (cells already formatted)."""
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def record_json(data, indent: int = 1) -> str:
    """``data`` as strict JSON (RFC 8259) for a record under docs/: a float that is not a number (an empty length
    bucket's BLEU, a model with no attention's alignment accuracy) is written ``null``, which JavaScript's JSON.parse
    and serde read, where Python's default ``NaN`` is refused."""
    from text_attn.core.json_numbers import json_safe

    return json.dumps(json_safe(data), indent=indent, allow_nan=False) + "\n"


def read_json(path: Path, error: type[Exception]) -> Any:
    """The JSON file ``path`` parsed, or ``error`` (a class of BAD_INPUT's, one line) where it is missing or is not
    JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise error(f"{path}: not a JSON file ({err})") from None


def run_main(main: Callable[[], int | None]) -> int:
    """A benchmark's exit code from ``main()``, with bad input (a missing data root or model file, a stage that
    failed, an output that cannot be written) as one line, ``SCRIPT: error: ...``, and exit code 2, never a
    traceback; Ctrl-C: one line, 130. A bug still shows its traceback."""
    prog = Path(sys.argv[0]).name
    try:
        return main() or 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (OSError, StageError) as err:
        print(f"{prog}: error: {_said(err)}", file=sys.stderr)
        return 2
    except Exception as err:
        if type(err).__name__ not in BAD_INPUT:
            raise
        print(f"{prog}: error: {_said(err)}", file=sys.stderr)
        return 2


def _said(err: BaseException) -> str:
    from text_attn.core.errors import one_line

    return one_line(err, 400)


def int_list(minimum: int) -> Callable[[str], list[int]]:
    """argparse type of comma-separated counts (``--workers 1,2``), each at least ``minimum``: parsed when the options
    are read, not after the photos are written or the baselines ran."""

    def counts(text: str) -> list[int]:
        try:
            values = [int(x) for x in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
        if min(values) < minimum:
            raise argparse.ArgumentTypeError(f"each must be at least {minimum}, got {text}")
        return values

    return counts


def batch_settings(text: str) -> list[tuple[int, float]]:
    """argparse type of attention-serve batch settings, ``max_batch_size:batch_timeout`` comma-separated
    (``1:0,16:0.01``): a bad one was a ValueError traceback after the photos were written, or a server that refused
    to start, a minute later."""
    settings = []
    for one in text.split(","):
        size, colon, timeout = one.partition(":")
        try:
            pair = (int(size), float(timeout))
        except ValueError:
            pair = None
        if not colon or pair is None or pair[0] < 1 or not 0 <= pair[1] < float("inf"):
            raise argparse.ArgumentTypeError(
                f"{one!r}: expected max_batch_size:batch_timeout, a count of at least 1 and seconds of at least 0 "
                "(e.g. 1:0,16:0.01)"
            )
        settings.append(pair)
    return settings


def torch_device(text: str) -> str:
    """argparse type of a torch device name (cpu, cuda, cuda:1): a name torch does not know was a RuntimeError
    traceback where the device was first used. Whether the machine has it is the script's check."""
    import torch  # here: --help stays fast

    try:
        torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a torch device (cpu, cuda, cuda:1, ...)") from None
    return text


def existing_file(text: str) -> Path:
    """argparse type of an input file: one that is not there is refused naming the option, not met after the work
    before it ("[Errno 2]" without the option)."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    return path


def _model(text: str, names: dict[str, Path]) -> str:
    from text_attn.core.bundled_names import resolve

    if not resolve(text, names, Path()).is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such model file (nor a bundled model: {', '.join(names)})")
    return text


def text_model(text: str) -> str:
    """argparse type of a translation model: a bundled name (transformer, bahdanau) or a file that exists, checked
    when the options are read (it was loaded after minutes of other rows). The text, as Translator.load takes it."""
    from text_attn.translation.bundled import MODEL_NAMES

    return _model(text, MODEL_NAMES)


def text_models(text: str) -> str:
    """argparse type of comma-separated translation models (``--models transformer,M.pt``), each as
    :func:`text_model`."""
    names = text.split(",")
    for name in names:
        text_model(name)
    if twice := sorted({n for n in names if names.count(n) > 1}):  # each model's rows and JSON are keyed by its name
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} named twice: each model once")
    return text


def caption_model(text: str) -> str:
    """argparse type of a caption model: a bundled name (flickr8k, shapes) or a file that exists, as
    :func:`text_model`."""
    from captioning.model.bundled import MODEL_NAMES

    return _model(text, MODEL_NAMES)


def check_corpus(p: argparse.ArgumentParser, option: str, root: Path, split: str, *langs: str,
                 split_option: str | None = None) -> None:  # fmt: skip
    """Refuse (``p.error``, naming ``option``) a corpus folder that is not one or lacks ``<split>.<lang>[.gz]`` for
    each of ``langs``: checked before the work, and named by the option typed, not the config key (data.root). A split
    the user named (``split_option``, e.g. --splits): a missing one names that option."""
    if not root.is_dir():
        p.error(f"{option} {root}: {'not a folder' if root.exists() else 'no such folder'}")
    for lang in langs:
        if not any((root / f"{split}.{lang}{gz}").is_file() for gz in ("", ".gz")):
            said = f"neither {split}.{lang} nor {split}.{lang}.gz"
            if split_option:
                p.error(f"{split_option} {split}: {root} holds {said}")
            p.error(f"{option} {root}: found {said}")  # as text_attn.translation.corpora words it


def check_flickr8k(p: argparse.ArgumentParser, option: str, root: Path) -> None:
    """Refuse (``p.error``, naming ``option``) a Flickr8k folder that is missing or holds neither layout (the cheap
    check of captioning.training.readers.detect_layout), before the work."""
    from captioning.training.readers import detect_layout

    try:
        detect_layout(root)
    except Exception as err:  # CaptionDataError: one line
        if type(err).__name__ not in BAD_INPUT:
            raise
        p.error(f"{option} {_said(err)}")


def check_new_folder(p: argparse.ArgumentParser, option: str, folder: Path) -> None:
    """Refuse (``p.error``, naming ``option``) an output folder that is a file: its ``mkdir`` was a FileExistsError
    traceback."""
    if folder.exists() and not folder.is_dir():
        p.error(f"{option} {folder}: a file, not a folder")


_WRITTEN: dict[str, str] = {}  # console scripts written by this process where the project is not installed


def distil_parser(
    doc: str, data_help: str, teacher_default: str, teacher_help: str, unit: str
) -> argparse.ArgumentParser:
    """The options both distillation-corpus scripts take (benchmarks/distil_data.py, caption_distil_data.py): the
    dataset, the folder written, the teacher (the command's options naming it) and a smoke run's size."""
    from text_attn.core.errors import positive_int  # here, as the other toolkit imports of this module

    first, _, rest = doc.partition("\n\n")  # the summary, then the commands and what is written, as the doc has them
    p = argparse.ArgumentParser(description=first, epilog=rest, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, required=True, help=data_help)
    p.add_argument("--out", type=Path, required=True, help="the folder to write (made where missing)")
    p.add_argument("--teacher", default=teacher_default, help=teacher_help)
    p.add_argument("--limit", type=positive_int, help=f"only the first N train {unit} (a smoke run)")
    return p


def teacher_named(command: str, options: str) -> str:
    """How a distillation corpus's data note (text_attn.core.data_note) names its teacher: ``command`` and the
    ``--teacher`` options, each path cut to its file name (no machine's folders in a model file: the note is copied
    into the student's)."""
    from text_attn.core.modelfile import file_name  # here, as the other toolkit imports of this module

    words = []
    for word in shlex.split(options):
        option, eq, value = word.rpartition("=")  # --model=a/b.pt: --model=b.pt
        words.append(option + eq + file_name(value))
    return " ".join([command, *map(shlex.quote, words)])


def teacher_files(options: str, resolve: Callable[[str | None], Path]) -> list[Path]:
    """The model files a teacher's ``caption`` or ``translate`` options read: the ``--model`` (``resolve(None)``, the
    bundled default, where none is given) and each ``--ensemble``, each through ``resolve`` (a bundled name to its
    file), as the command resolves them."""
    words, model, more = shlex.split(options), None, []
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in ("--model", "--ensemble"):
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if flag == "--model":
                model = value
            else:
                more.append(value)
    return [resolve(model), *(resolve(m) for m in more)]


def files_named(files: list[Path]) -> str:
    """Each file's name and the first 12 hex digits of its SHA-256, comma-separated (those that exist): which model
    files a teacher was, even after a bundled one is replaced (the same name, other weights)."""
    from text_attn.core.file_digest import sha256_of  # here, as the other toolkit imports of this module
    from text_attn.core.modelfile import file_name

    return ", ".join(f"{file_name(f)} sha256:{sha256_of(f)[:12]}" for f in files if f.is_file())


def entry_points(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """The project's console scripts, ``name -> "module:function"`` ([project.scripts]; read by hand: Python 3.10,
    which the project supports, has no tomllib)."""
    text = pyproject.read_text(encoding="utf-8")
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    points = {}
    for line in section.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            points[name.strip()] = value.strip().strip('"')
    return points


def console_script(name: str) -> str:
    """The console script ``name``: the installed one (beside this Python first, then on PATH); where the project is
    not installed (the GPU machine gets a copy of the checkout, not an installation), a script file that does what
    pip's would, written once into a temporary folder. A file, not ``python -c``: Lightning's launcher re-runs
    ``sys.argv[0]``. StageError for a name the project does not define."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is not None:
        return found
    if name not in _WRITTEN:
        _WRITTEN[name] = str(write_console_script(name, Path(tempfile.mkdtemp(prefix="console-scripts-"))))
    return _WRITTEN[name]


def write_console_script(name: str, folder: Path) -> Path:
    """``folder/name``: an executable script that runs the project's console script ``name`` as pip's would
    (``sys.exit(function())`` when run as the program, nothing when imported) with this Python, the project importable
    from any directory; StageError for a name the project does not define."""
    points = entry_points()
    if name not in points:
        raise StageError(f"no console script {name!r} in this project (pyproject.toml [project.scripts])")
    module, function = points[name].split(":")
    script = folder / name
    # run only as the program: a worker that multiprocessing starts imports the main script again (as __mp_main__)
    lines = [f"#!{sys.executable}", "import sys", f"sys.path.insert(0, {str(ROOT)!r})",
             f"from {module} import {function}", "if __name__ == '__main__':",
             f"    sys.exit({function}())"]  # fmt: skip
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return script


def alternating(names: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round, name) for every name once a round, the one that goes first alternating from round to round, so that a
    machine that drifts (another program, a warming cache) weighs on every arm alike."""
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            yield r, name


def run_stage(stage: str, cmd: list[str], logs: Path, stdin: str | None = None) -> float:
    """Run cmd (printed first) with its output in logs/<stage>.log; returns its wall seconds; StageError on failure."""
    print(f"[{stage}] $ {shlex.join([Path(cmd[0]).name, *cmd[1:]])}", flush=True)
    log = logs / f"{stage}.log"
    t0 = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(cmd, input=stdin, text=True, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise StageError(f"stage {stage} failed (exit code {code}); its output: {log}; last line: {tail[0][:200]}")
    print(f"[{stage}] done in {seconds / 60:.1f} min", flush=True)
    return seconds


def timed_fit(cli: Callable, config: Path, out: Path, extra: list[str] = ()) -> tuple[Path, float]:
    """``cli(["fit", ...])`` with its logs and model file under ``out``; returns (model file, wall minutes)."""
    model = out / "model.pt"
    t0 = time.perf_counter()
    cli(
        [
            "fit",
            "--config",
            str(config),
            "--trainer.default_root_dir",
            str(out),
            "--model.export_path",
            str(model),
            *extra,
        ]
    )
    minutes = (time.perf_counter() - t0) / 60
    (out / "train_minutes.txt").write_text(f"{minutes:.2f}\n")
    return model, minutes


def recorded_minutes(out: Path) -> float:
    """The training minutes ``timed_fit`` wrote for ``out`` (NaN when the model was made otherwise)."""
    stamp = out / "train_minutes.txt"
    return float(stamp.read_text()) if stamp.exists() else math.nan


def logged_curve(run: Path, metric: str) -> list[tuple[int, int, float]]:
    """(epoch, step, value) of every ``metric`` a fit under ``run`` logged (its metrics.csv files), in order."""
    import csv

    rows = []
    for metrics in sorted(run.glob("lightning_logs/version_*/metrics.csv")):
        with metrics.open() as f:
            rows += [(int(r["epoch"]), int(r["step"]), float(r[metric])) for r in csv.DictReader(f) if r.get(metric)]
    return rows


def best_logged(run: Path, metric: str) -> float:
    """The best (highest) value of ``metric`` a fit under ``run`` logged (its metrics.csv files; -inf when none)."""
    return max((value for _, _, value in logged_curve(run, metric)), default=float("-inf"))
