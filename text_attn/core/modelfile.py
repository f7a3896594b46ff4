"""Self-contained model files: ``torch.save`` of plain tensors and JSON-able metadata, read back with
``torch.load(weights_only=True)`` (no pickled code runs on load). Every model family of the project uses this.
"""

from __future__ import annotations

import argparse
import io
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from text_attn.core.errors import missing, one_line
from text_attn.core.run_checkpoints import CODE_REFUSED, damaged, holds_code, starts_as_torch, torch_unreadable
from text_attn.core.safe_files import OutputRefused, hold_outputs, inert, refuse_overlap, write_bytes


class ModelFileError(RuntimeError):
    """A model file that is missing, unreadable, or not the kind of model asked for. The message is one line."""


# Per model kind: the training command whose checkpoints hold it, the command that turns those into a model file, and
# the prefix of the network's weights in the checkpoint's state_dict (the LightningModule attribute).
CHECKPOINT_FAMILIES = {
    "text-model": ("text-train", "text-export", "net."),
    "caption-model": ("caption-train", "caption-export", "model."),
}


def path_problem(path: str | Path, typed: object = None) -> str | None:
    """Why ``path`` cannot be a model file, in the words every command says it (a folder; a device or FIFO, which
    "model file not found" said was not there; nothing there), or None for a regular file. ``typed``: as for
    :func:`load_model_file`. The commands ask before torch is imported: a mistyped path is said at once."""
    if (path if typed is None else typed) == "":  # Path("") is the current folder: ".: a folder" named nothing given
        return missing("", "model file not found")
    path = Path(path)
    if path.is_dir():
        return f"{path}: a folder, not a model file"
    if path.exists() and not path.is_file():  # /dev/null, a FIFO
        return f"{path}: not a regular file (a device, FIFO or socket), not a model file"
    if not path.is_file():
        return missing(path, "model file not found", typed)
    return None


def is_lightning_checkpoint(data: Any) -> bool:
    """Whether a ``torch.load``-ed object is a PyTorch Lightning checkpoint (judged by its content, not its name)."""
    return (
        isinstance(data, dict)
        and "format" not in data
        and isinstance(data.get("state_dict"), dict)
        and ("pytorch-lightning_version" in data or "hyper_parameters" in data)
    )


def checkpoint_family(data: dict) -> str | None:
    """The model kind whose training wrote this Lightning checkpoint, from its weight names (None: cannot tell)."""
    keys = list(data.get("state_dict") or {})
    found = [
        kind for kind, (_, _, prefix) in CHECKPOINT_FAMILIES.items() if keys and all(k.startswith(prefix) for k in keys)
    ]
    return found[0] if len(found) == 1 else None


def checkpoint_message(path: str | Path, data: dict, kind: str) -> str:
    """One line for a Lightning checkpoint given where a ``kind`` model file is expected: how to convert it."""
    family = checkpoint_family(data)
    if family is not None and family != kind:
        train, export, _ = CHECKPOINT_FAMILIES[family]
        return (
            f"{path} is a {train} checkpoint, not a {kind} file "
            f"(`{export} {shlex.quote(str(path))} model.pt` makes a {family} file of it)"
        )
    if kind in CHECKPOINT_FAMILIES:
        export = CHECKPOINT_FAMILIES[kind][1]
        return (
            f"{path} is a training checkpoint, not a model file; "
            f"convert it with: {export} {shlex.quote(str(path))} model.pt"
        )
    return f"{path} is a training checkpoint, not a {kind} file"


def save_model_file(path: str | Path, kind: str, payload: dict[str, Any], version: int = 1) -> Path:
    """Write ``payload`` (state_dict tensors + JSON-able values) tagged with ``kind`` and ``version``."""
    import torch  # here, not at the top: the export commands' --help and errors need no torch (seconds to import)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()  # serialised in memory, then written by Python: a full disk is an OSError naming its cause
    torch.save({"format": f"attention-toolkit/{kind}", "version": version, **payload}, buffer)  # (torch's own file
    return write_bytes(path, buffer.getbuffer())  # writer turns ENOSPC into an opaque RuntimeError); never torn


def load_model_file(path: str | Path, kind: str, version: int = 1, map_location: str = "cpu",
                    typed: object = None) -> dict[str, Any]:  # fmt: skip
    """Read a file written by :func:`save_model_file`; anything else raises :class:`ModelFileError`. ``typed``: what
    the user gave, where ``path`` was resolved from it (a URL is named as given)."""
    import torch

    typed, path = path if typed is None else typed, Path(path)
    if problem := path_problem(path, typed) or damaged(path, named=str(path)):  # damaged: a flipped byte (torch
        raise ModelFileError(problem)  # never checks the zip's CRCs: used silently, or "not a model file")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except OSError as exc:  # the file is there but could not be read (no permission, an I/O error): not its content
        raise ModelFileError(cannot_read(path, exc)) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file gets the same one-line answer
        if map_location != "cpu":  # the device, not the file, may be what failed (CUDA asked for, none here)
            try:
                torch.load(path, map_location="cpu", weights_only=True)
            except Exception:  # noqa: BLE001 - the file itself is unreadable: said below
                pass
            else:
                raise ValueError(f"{path}: cannot load onto {map_location!r}: {one_line(exc)}") from None
        if holds_code(exc, path):  # pickled objects or code, which weights_only refuses to run (as the trainers say it)
            raise ModelFileError(f"{path}: {CODE_REFUSED}") from None
        raise ModelFileError(f"{path}: not a model file: {torch_unreadable(path)}") from None  # the exception's
    return check_model_data(path, data, kind, version)  # name (UnpicklingError, EOFError) said nothing


def update_info(
    path: str | Path, updates: dict[str, Any], merge: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Merge ``updates`` into a model file's ``info`` (any kind; its weights untouched) and rewrite it in place via a
    fresh temporary file and a rename (safe_files.atomic_output), so a failed write leaves the old file whole. Returns
    the new info. ``merge``: entries merged into the file's own dicts of those names as well (e.g. {"decoder":
    {"hard_inference": "expect"}}, a decoding setting the model reads from its config)."""
    path = Path(path)
    data = read_export_source(path)
    fmt = data.get("format") if isinstance(data, dict) else None
    if not (isinstance(fmt, str) and fmt.startswith("attention-toolkit/")):
        raise ModelFileError(f"{path}: not a model file of this toolkit")
    payload = {k: v for k, v in data.items() if k not in ("format", "version")}
    payload["info"] = {**dict(data.get("info") or {}), **updates}
    for name, entries in (merge or {}).items():
        if not isinstance(payload.get(name), dict):
            raise ModelFileError(f"{path}: the model file has no {name!r} settings to update")
        payload[name] = {**payload[name], **entries}
    save_model_file(path, fmt.removeprefix("attention-toolkit/"), payload, data.get("version", 1))  # atomic
    return payload["info"]


def decoding_defaults(info: dict[str, Any]) -> dict[str, Any]:
    """The decoding a model file recommends (``info["decoding"]``, chosen on validation data by a tuning benchmark):
    ``beam_size``, ``length_penalty`` and ``no_repeat_ngram`` where recorded; {} when none."""
    chosen = info.get("decoding") if isinstance(info, dict) else None
    if not isinstance(chosen, dict):
        return {}
    out: dict[str, Any] = {}
    if isinstance(chosen.get("beam_size"), int) and chosen["beam_size"] >= 1:
        out["beam_size"] = chosen["beam_size"]
    if isinstance(chosen.get("length_penalty"), (int, float)) and chosen["length_penalty"] >= 0:
        out["length_penalty"] = float(chosen["length_penalty"])
    if isinstance(chosen.get("no_repeat_ngram"), int) and chosen["no_repeat_ngram"] >= 0:
        out["no_repeat_ngram"] = chosen["no_repeat_ngram"]
    return out


def cannot_read(path: str | Path, err: OSError) -> str:
    """The line for a file that is there but could not be read: its reason (e.g. permission denied), not "not a model
    file", which sent people looking for damage in a good file."""
    return f"{path}: cannot read it ({(err.strerror or one_line(err)).lower()})"


def _not_a_file(src: str | Path, typed: object = None) -> str | None:
    """The line for an export's input that is not a file (missing, a folder), else None. ``typed``: what the user
    gave, where ``src`` was resolved from it (a URL is named as given: ``Path`` shows ``https:/host/x``)."""
    path = Path(src)
    if path.is_file():
        return None
    if path.is_dir():  # as the training commands say it
        return f"{src}: a folder, not a checkpoint or model file"
    return f"{src}: not a file" if path.exists() else missing(src, "no such file", typed)


def _given_twice(first: str, others: list[str]) -> str | None:
    """The first file among CHECKPOINT and the --average / --ensemble files that is given again (by another path too),
    as typed; None where each is given once."""
    import os

    seen: list[str] = []
    for path in [first, *others]:
        for earlier in seen:
            try:
                if os.path.samefile(earlier, path):
                    return path
            except OSError:  # a bundled name or a missing file: said by the reader
                continue
        seen.append(path)
    return None


def _refuse_checkpoint_in_place(src: str | Path, out: str | Path) -> None:
    """Re-exporting in place is for model files (halve one, re-save it): OUT naming the input TRAINING CHECKPOINT
    would replace it with a model file, and its optimiser state, epoch and step (what resuming needs) would be lost."""
    import os

    try:
        same = os.path.samefile(src, out)
    except OSError:  # OUT does not exist yet: not the input
        return
    if same and is_lightning_checkpoint(read_export_source(src)):
        raise ModelFileError(f"OUT {out} is the input, a training checkpoint: writing the model file over it would "
                             "lose what resuming needs (optimiser, epoch, step); give another file")  # fmt: skip
    if not same and Path(out).is_file() and _holds_checkpoint(out):  # another run's (two arguments swapped): was lost
        raise ModelFileError(f"OUT {out} is a training checkpoint: writing the model file over it would lose what "
                             "resuming needs (optimiser, epoch, step); give another file")  # fmt: skip


def _holds_checkpoint(path: str | Path) -> bool:
    """Whether the file at ``path`` is a Lightning training checkpoint: read mapped (its tensors are not read into
    memory), weights only; a file that is not one of torch's, or cannot be read, is not."""
    import torch

    try:
        return is_lightning_checkpoint(torch.load(path, map_location="cpu", weights_only=True, mmap=True))
    except Exception:  # noqa: BLE001 - anything torch cannot read is no checkpoint to keep
        return False


def read_export_source(src: str | Path) -> Any:
    """``torch.load`` of what an export command is given (a training checkpoint or a model file, to be told apart
    by the caller); a missing or unreadable file, or one whose weights are not all finite (:func:`not_finite`: every
    source of an export, CHECKPOINT or ``--average`` / ``--ensemble`` file, is read here), raises
    :class:`ModelFileError` with one line."""
    import torch

    path = Path(src)
    missing = _not_a_file(src) or damaged(path, named=str(src))  # damaged: "cut off by a copy?", or used silently
    if missing:
        raise ModelFileError(missing)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:  # there, but unreadable (no permission): its reason, not a verdict on its content
        raise ModelFileError(cannot_read(src, exc)) from None
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same one-line answer, with what it is
        if holds_code(err, path):  # code in the file, which weights_only refuses to run (as the trainers say it)
            raise ModelFileError(f"{src}: {CODE_REFUSED}") from None
        # the hint for a file that starts as torch's (its zip, a pickle) and breaks off, not for a text file
        hint = " (cut off by a copy or a full disk?)" if starts_as_torch(path) else ""
        raise ModelFileError(f"{src}: not a checkpoint or model file: {torch_unreadable(path, hint)}") from None
    state = data.get("state_dict") if isinstance(data, dict) else None
    if isinstance(state, dict) and (bad := not_finite(state)):  # a diverged run's: exported or averaged, exit 0,
        raise ModelFileError(f"{src}: {bad}")  # it captioned "yellow yellow ..." and translated empty lines
    return data


def check_model_data(path: str | Path, data: Any, kind: str, version: int = 1) -> dict[str, Any]:
    """``data`` (a ``torch.load``-ed file) if it is a ``kind`` model file of ``version``, else :class:`ModelFileError`
    (for a training checkpoint: which export command turns it into a model file)."""
    if is_lightning_checkpoint(data):
        raise ModelFileError(checkpoint_message(path, data, kind))
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt != f"attention-toolkit/{kind}":
        what = f"a {fmt.split('/')[-1]} file" if isinstance(fmt, str) else "not a model file of this toolkit"
        raise ModelFileError(f"{path}: expected a {kind} file, found {what}")
    found = data.get("version")
    if found != version or type(found) is not int:  # "1" or True equal to no version this toolkit writes
        raise ModelFileError(f"{path}: {kind} file {_version_problem(found, version)}")
    return data


def _version_problem(found: Any, version: int) -> str:
    """What is wrong with a model file's ``version`` (``found``) where ``version`` is read: shown as written (a
    string "1" printed as 1 read "version 1 is not supported (need 1)"), and a newer one says what to do."""
    if found is None:
        return f"has no version (need {version}): damaged, or not written by this toolkit"
    if type(found) is not int:
        return f"version {found!r} is a {type(found).__name__}, not a version number (need {version}): damaged"
    if found > version:
        return f"version {found} is not supported: newer than this toolkit reads ({version}); upgrade attention-toolkit"
    return f"version {found} is not supported (need {version})"


def export_command(
    prog: str,
    description: str,
    input_help: str,
    output_help: str,
    convert: Callable[..., str],
    argv: list[str] | None = None,
    add_options: Callable[[argparse.ArgumentParser], None] | None = None,
    named: Callable[[str], str] | None = None,
    other_family: Callable[[str], str | None] | None = None,
) -> int:
    """The one shape of every family's export command (``caption-export``, ``text-export``): ``CHECKPOINT OUT
    [--half]``; ``convert(input, output, half, **family_options)`` writes the file and returns its "wrote" line, said
    on stderr as every command's "wrote" lines are (stdout holds a command's results; an export's is the file). Bad
    input: one line, exit code 2. ``add_options`` adds a family's own options to the parser; they reach convert by
    name. ``named``: maps a bundled model's name (``flickr8k``, ``transformer``) to its file, as ``--model`` takes
    one. ``other_family``: the line for the other family's bundled name (``caption-export transformer`` said "no such
    file"), None for any other input."""
    from text_attn.core.errors import ArgumentParser, dash_refused, fail, one_line
    from text_attn.core.version import add_version

    p = ArgumentParser(prog=prog, description=description)
    add_version(p)
    p.add_argument("input", metavar="CHECKPOINT", help=input_help)
    p.add_argument("output", metavar="OUT", help=output_help)
    p.add_argument("--half", action="store_true", help="store weights as float16 (half the size; loads as float32)")
    if add_options is not None:
        add_options(p)
    args = p.parse_args(argv)
    typed = args.input  # as given: a URL is named as typed (Path would collapse its slashes)
    if named is not None:
        args.input = named(args.input)
    extra = {k: v for k, v in vars(args).items() if k not in ("input", "output", "half")}
    others = [v for v in extra.values() if isinstance(v, str)] + [x for v in extra.values() if isinstance(v, list)
                                                                  for x in v if isinstance(x, str)]  # fmt: skip
    if args.output in ("", "-"):  # "-" is no file here; a file named "-" is ./- (it was written silently)
        fail(prog, dash_refused("OUT", "a model file") if args.output else "OUT is empty: give the model file to write")
    if typed in ("", "-"):  # Path("") is the current folder: ".: not a file" named no input
        fail(prog, "CHECKPOINT -: a model is read from a file, not stdin; use ./- for a file named -" if typed else
             "CHECKPOINT is empty: give a checkpoint or model file")  # fmt: skip
    for name, value in extra.items():  # "--encoder-of ''", "--info ''" were dropped (exit 0), "--average ''" read "."
        if value == "" or isinstance(value, list) and "" in value:
            fail(prog, f"--{name.replace('_', '-')} is empty: give a file")
    try:  # the input itself may be OUT (a re-export in place: read whole, then replaced); no other input may
        refuse_overlap({f"OUT {args.output}": args.output}, others)
    except OSError as err:
        fail(prog, str(err))
    missing = _not_a_file(args.input, typed)
    if missing and other_family is not None and (line := other_family(typed)):
        fail(prog, line)
    if missing:  # said before convert imports torch (seconds): a mistyped path is answered at once
        fail(prog, missing)
    folder = Path(args.output).parent
    if not folder.is_dir():  # likewise, as caption and translate say it of their outputs (a folder is not made)
        fail(prog, f"cannot write {args.output}: " + (f"{folder} is not a folder" if folder.exists() else
                                                      f"the folder {folder} does not exist"))  # fmt: skip
    # the bundled names resolved as CHECKPOINT's is ("--average transformer" beside "transformer")
    given = [named(v) if named is not None else v for k in ("average", "ensemble") for v in (extra.get(k) or [])]
    twice = _given_twice(args.input, given)
    try:  # one export writes OUT at a time (two to one OUT both said "wrote", one of them lost)
        held = hold_outputs([("OUT", args.output)])
    except OutputRefused as err:
        fail(prog, str(err))
    try:
        _refuse_checkpoint_in_place(args.input, args.output)
        line = convert(args.input, args.output, args.half, **extra)
    except ModelFileError as err:
        fail(prog, str(err))
    except OSError as err:
        fail(prog, f"cannot write {args.output}: {getattr(err, 'strerror', None) or one_line(err)}")
    finally:
        held.release()
    try:
        if twice:  # said once the file is written (a refusal is one line)
            print(f"{prog}: note: {twice} is given twice: its weights count twice (an ensemble of it with itself "
                  "decodes as it does, at twice the cost; a mean with itself is itself)", file=sys.stderr)  # fmt: skip
        print(line, file=sys.stderr)
    except OSError:  # stderr gone (`2>&1 | true`): the file is written, and there is no one left to tell
        pass
    return 0


def wrote_line(out: str | Path, what: str, source: str, parameters: int, half: bool) -> str:
    """An export's "wrote" line, in one wording for both families: ``wrote OUT from WHAT SOURCE: N parameters, DTYPE
    weights, SIZE`` (the parameters counted exactly: a tiny model's were "0.00M"; the size in KiB under a MiB)."""
    size = Path(out).stat().st_size
    shown = f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"
    dtype = "float16" if half else "float32"
    return f"wrote {out} from {what} {source}: {parameters:,} parameters, {dtype} weights, {shown}"


def float16_note(data: Any, source: str, half: bool, out: str | Path, mean: bool = False) -> str | None:
    """The note a re-export says where the model file it read (``data``, its contents) stores float16 weights (written
    with --half, as the bundled models are) and ``out`` will not (no ``half``): the same values at twice the size,
    written silently before; ``mean``: OUT holds a mean of them with others (--average), not the same values."""
    import torch

    tensors = data.get("state_dict") if isinstance(data, dict) else None
    if half or not isinstance(tensors, dict):
        return None
    if not any(isinstance(t, torch.Tensor) and t.dtype == torch.float16 for t in tensors.values()):
        return None
    if mean:
        return (f"{file_name(source)} stores float16 weights: {out} holds the mean as float32, twice the size (--half "
                "keeps float16)")  # fmt: skip
    return (f"{file_name(source)} stores float16 weights: {out} holds them as float32, the same values at twice the "
            "size (--half keeps float16)")  # fmt: skip


def file_name(path: str | Path) -> str:
    """A path's file name alone, as a model file names the files it was made from or learned from: no machine's folders
    in it, whichever separator (/ or \\) the path was written with."""
    return re.sub(r"^.*[\\/]", "", str(path))


def info_lines(info: dict[str, Any]) -> list[str]:
    """A model file's ``info`` (training data, terms, scores) as ``--model-info`` prints it: one aligned line a key."""
    lines = []
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        label, value = inert(key.replace("_", " ")) + ":", inert(value)  # a file's text: no line breaks, no escapes
        if len(label) > 15:  # a long label on a line of its own, its value below in the values' column
            lines += [label, f"{'':15} {value}"]
        else:
            lines.append(f"{label:<15} {value}")
    return lines


def weights_said(weights: list[float]) -> str:
    """``--weights`` as typed back in messages and export lines: "0.5 0.5"."""
    return " ".join(f"{w:g}" for w in weights)


def check_shares(weights: list[float] | None, average: list[str] | None) -> None:
    """An export's ``--weights``: one number above 0 for CHECKPOINT and each ``--average`` model, CHECKPOINT's first;
    :class:`ModelFileError` (one line) else. Checked before any file is read."""
    if weights is None:
        return
    if not average:
        raise ModelFileError("--weights: needs --average (the models whose mean they weigh)")
    if len(weights) != 1 + len(average):
        raise ModelFileError(f"--weights: {len(weights)} given for {1 + len(average)} models (CHECKPOINT and "
                             f"{len(average)} --average); one each, CHECKPOINT's first")  # fmt: skip
    if any(w <= 0 for w in weights):  # a weight of 0 leaves a model out (and CHECKPOINT's added rows undefined)
        raise ModelFileError(f"--weights {weights_said(weights)}: each above 0")


def add_weights_option(p: argparse.ArgumentParser, example: str) -> None:
    """An export's ``--weights W ...`` (checked by :func:`check_shares`); ``example``: the family's blend, in its
    words."""
    p.add_argument(
        "--weights",
        nargs="+",
        type=float,
        metavar="W",
        help="with --average: each model's weight in the mean, CHECKPOINT's first (default: equal; scaled to sum "
        f"1). {example}",
    )


def shares_said(shares: list[float] | None) -> str:
    """How a weighted mean's record says its weights, scaled to sum 1 (" (weighted 0.75, 0.25)"); "" for equal ones
    (None)."""
    if shares is None:
        return ""
    scaled = _scaled(shares)  # 1e308 twice summed to infinity
    total = sum(scaled)
    return f" (weighted {', '.join(f'{w / total:.3g}' for w in scaled)})"


def _scaled(shares: list[float]) -> list[float]:
    """Weights (each above 0) divided by the largest: none overflows when multiplied or summed (1e308 x a weight of
    1.5 was infinity, and the mean NaN)."""
    top = max(shares)
    return [w / top for w in shares]


def not_finite(state: dict[str, Any]) -> str | None:
    """What is wrong with weights some of which are NaN or infinite ("3,135 of its 1,210,000 weights are NaN or
    infinite (a run that diverged?)"), else None."""
    import torch

    floats = [v for v in state.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    bad = sum(int((~torch.isfinite(v)).sum()) for v in floats)
    if not bad:
        return None
    return f"{bad:,} of its {sum(v.numel() for v in floats):,} weights are NaN or infinite (a run that diverged?)"


def mean_weights(
    states: list[dict[str, Any]], sources: list[str], shares: list[float] | None = None, grown: bool = False
) -> dict[str, Any]:
    """The mean of several state dicts of one network (checkpoint averaging, as Vaswani et al. 2017 did with their last
    checkpoints; for caption models, the last steps of a self-critical run). ``sources[i]`` names ``states[i]`` in the
    one-line :class:`ModelFileError` raised when its weight names or shapes differ from the first's. ``shares``: each
    state's weight in the mean (None: equal; a fine-tuned model blended back towards the one it started from, as
    Wortsman et al. 2022's WiSE-FT). ``grown``: a later state's tensor may have fewer rows (dim 0) than the first's,
    its rows being the first's first ones (a vocabulary the first extends: text-train's ``model.init_vocab: extend``);
    each row is the mean over the states that have it. Floating weights are summed in float64 and returned in the widest
    of the states' dtypes, at least float32; integer buffers are kept from the first."""
    import torch

    for state, source in zip(states, sources, strict=True):  # a damaged file: one line naming it, not a traceback
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ModelFileError(f"{source}: its weights are not all tensors: damaged, cannot average")
    shares = [1.0] * len(states) if shares is None else _scaled([float(w) for w in shares])

    def rows(t: torch.Tensor) -> torch.Tensor:  # (R, C): a row per entry of dim 0 (one row for a scalar)
        return t.double().reshape(t.shape[0], -1) if t.dim() else t.double().reshape(1, 1)

    def fits(t: torch.Tensor, ref: torch.Tensor) -> bool:
        fewer = grown and t.dim() == ref.dim() > 0 and t.shape[1:] == ref.shape[1:] and t.shape[0] <= ref.shape[0]
        return t.shape == ref.shape or fewer

    first = states[0]
    floats = [k for k, v in first.items() if v.is_floating_point()]
    total = {k: rows(first[k]) * shares[0] for k in floats}  # (R, C) each
    mass = {k: torch.full((total[k].shape[0], 1), shares[0], dtype=torch.float64) for k in floats}  # (R, 1)
    for state, source, share in zip(states[1:], sources[1:], shares[1:], strict=True):
        if state.keys() != first.keys() or any(not fits(state[k], v) for k, v in first.items()):
            raise ModelFileError(f"{source}: its weights differ in names or shapes from {sources[0]}'s: cannot average")
        for k in floats:
            r = rows(state[k])
            total[k][: r.shape[0]] += r * share
            mass[k][: r.shape[0]] += share
    out = dict(first)  # integer buffers: the first's
    for k in floats:
        # the widest of the states' dtypes, at least float32: the first's (a --half file's float16) rounded the mean
        # of a float32 file with it to float16, and said "the same values" as the file read
        dtype = torch.float32
        for state in states:
            dtype = torch.promote_types(dtype, state[k].dtype)
        out[k] = (total[k] / mass[k]).reshape(first[k].shape).to(dtype)
    return out
