"""``text-train optimize`` / ``caption-train optimize``: a corpus -> LitData chunks (text_attn.core.streaming).

They take what ``fit`` takes for the data: ``--config C.yaml`` (its ``data:`` block) and ``--data.X`` options, which
win over the config; the model and trainer blocks are read only where a family needs them (a frozen encoder's
features). Bad input is one line and exit code 2.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from text_attn.core import startup_gc
from text_attn.core.errors import fail


def optimize_main(
    prog: str,
    datamodule_cls: type,
    args: list[str] | None,
    errors: tuple,
    write: Callable[[Any, dict[str, Any], Any], Any],
    extra: Callable[[Any], None] | None = None,
) -> None:
    """Parse ``prog optimize`` options, build the data module with them and call ``write(dm, config, options)``
    (``config``: the ``--config`` files' contents merged; ``options``: --out, --num_workers, --chunk_bytes and what
    ``extra`` added to the parser)."""
    from jsonargparse import ArgumentParser

    from text_attn.core.lightning_cli import _parser_message, read_config_files

    argv, model_options = split_fit_options(list(sys.argv[2:] if args is None else args))
    description = (
        f"{prog} optimize: write a corpus as LitData chunks (train / val / test apart, vocabulary from train) for "
        f"`{prog} fit --config C.yaml --data.root DIR`. Takes fit's data options (--config and --data.*). Running "
        "the same command again continues a stopped run. Fit's --model.* and --trainer.* options are taken too, so "
        "that one command line serves both, and not checked: only a frozen encoder's --model.encoder.* are read "
        "(caption-train --features)."
    )

    class OneLine(ArgumentParser):
        def error(self, message: str, ex: Exception | None = None):
            if "arguments are required: out" in str(message):  # the option's name, as it is typed
                fail(f"{prog} optimize", "--out is required: the folder to write the chunks into")
            fail(f"{prog} optimize", _parser_message(message))

    parser = OneLine(prog=f"{prog} optimize", description=description, exit_on_error=True)
    parser.add_argument("--config", action="append", default=[], help="a fit config (its data: block is used)")
    parser.add_argument("--out", required=True, help="the folder to write the chunks into")
    parser.add_argument("--num_workers", type=int, default=1, help="LitData worker processes writing chunks")
    parser.add_argument(
        "--chunk_bytes",
        type=str,
        default="64MB",
        help="the size of a chunk file (default: 64MB; KB, MB, GB are decimal; digits alone: bytes)",
    )
    if extra is not None:
        extra(parser)
    parser.add_class_arguments(datamodule_cls, "data", fail_untyped=False)
    config: dict[str, Any] = {}
    for node in read_config_files(f"{prog} optimize", argv):
        for key, value in (node or {}).items():
            config[key] = {**config.get(key, {}), **value} if isinstance(value, dict) else value
    for dotted, value in model_options.items():  # --model.encoder.X on the command line wins over the config
        node = config.setdefault("model", {})
        *path, last = dotted.split(".")[1:]
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    data = dict(config.get("data") or {})
    known = {a.dest.split(".", 1)[1] for a in parser._actions if a.dest.startswith("data.")}
    unknown = sorted(set(data) - known)
    if unknown:
        fail(f"{prog} optimize", f"--config: data.{unknown[0]} is not a data option")
    parser.set_defaults({f"data.{k}": v for k, v in data.items()})
    opts = parser.parse_args(argv)
    if opts.num_workers < 1:
        fail(f"{prog} optimize", f"--num_workers must be at least 1, got {opts.num_workers}")
    opts.chunk_bytes = chunk_size(prog, opts.chunk_bytes)
    if problem := out_problem(Path(opts.out)):  # before the corpus is read or a photo encoded
        fail(f"{prog} optimize", f"--out {opts.out}: {problem}")
    try:
        dm = datamodule_cls(**opts.data.as_dict())
        startup_gc.release()  # the imports and the data module are in: the collector as usual (startup_gc.py)
        write(dm, config, opts)
    except (*errors, OSError) as exc:
        from text_attn.core.errors import one_line

        fail(f"{prog} optimize", one_line(exc, limit=400))


_UNITS = {"b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}  # LitData's (decimal) units, by first letter
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(tb|gb|mb|kb|t|g|m|k|b)?\s*", re.IGNORECASE)


def chunk_size(prog: str, given: str) -> str | int:
    """``--chunk_bytes`` as LitData takes it (``64MB``; digits alone: bytes, which LitData would refuse as a string),
    checked first: a unit it does not know was its traceback from a worker, with half a chunk folder left, and ``0``
    wrote chunks of no size."""
    found = _SIZE.fullmatch(given)
    if not found or float(found.group(1)) * _UNITS[(found.group(2) or "b").lower()[0]] < 1:
        fail(f"{prog} optimize", f"--chunk_bytes takes a size above 0 such as 64MB, 500KB or 1000000 (bytes), got "
             f"{given!r}")  # fmt: skip
    return int(found.group(1)) if found.group(1).isdigit() and not found.group(2) else given.strip()


def out_problem(out: Path) -> str | None:
    """Why ``--out`` cannot take the chunks, said before any work (a file there was said after every photo was
    encoded; a split folder holding another LitData dataset, after the splits before it were written beside it, as a
    traceback); None where it can."""
    from text_attn.core.streaming import MANIFEST, SPLITS

    for folder in (out, *out.parents):
        if folder.exists() and not folder.is_dir():
            return f"{folder} is a file, not a folder"
        if folder.is_dir():
            break
    if out.is_dir() and not (out / MANIFEST).is_file():
        held = [split for split in SPLITS if (out / split / "index.json").is_file()]
        if held:
            return (f"{out / held[0]} holds a LitData dataset this command did not write (no {MANIFEST} beside it): "
                    "give a new or empty folder")  # fmt: skip
    return None


def split_fit_options(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """A fit command line's options that optimize does not take, taken out: ``--model.*`` (kept, parsed as YAML
    values: a frozen encoder's settings), ``--trainer.*`` and ``--seed_everything`` (dropped). So the same options
    serve ``optimize`` and ``fit``."""
    import yaml

    rest: list[str] = []
    model: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if name.startswith(("--model.", "--trainer.")) or name == "--seed_everything":
            if "=" in arg:
                value, i = arg.split("=", 1)[1], i + 1
            else:
                value, i = (argv[i + 1] if i + 1 < len(argv) else ""), i + 2
            if name.startswith("--model."):
                parsed = yaml.safe_load(value)
                # YAML 1.1 reads 4:4:4 as a base-60 number (14644); fit's parser keeps the string it names
                model[name[2:]] = value if ":" in value and isinstance(parsed, int | float) else parsed
            continue
        rest.append(arg)
        i += 1
    return rest, model
