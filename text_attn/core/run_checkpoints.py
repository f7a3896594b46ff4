"""``--ckpt_path best`` and ``--ckpt_path last`` in a new process: the checkpoints an earlier run wrote.

Lightning resolves these names from the trainer's own checkpoint callbacks, which in a new process know nothing: the
callbacks of a fresh ``text-train test`` or ``caption-train test`` have no best model (Lightning then refused with
"ModelCheckpoint is not configured to save the best model", though the config saves one), and their folder is the new
run's empty ``version_N+1/checkpoints`` (so ``last`` found nothing and the run tested, or trained, from freshly made
weights, after a warning). Here the names mean what the docs' commands mean by them:

- the folders searched: each checkpoint callback's own ``dirpath`` where the config sets one, every
  ``<save_dir>/<name>/version_*/checkpoints`` of a logger the config gives (a CSVLogger or TensorBoardLogger whose
  save_dir is elsewhere), every ``<default_root_dir>/lightning_logs/version_*/checkpoints`` (where the default
  loggers put them) and ``<default_root_dir>/checkpoints`` (where they go without a logger);
- ``last``: the newest ``last*.ckpt`` there (Lightning's own choice among its candidates: the latest written);
- ``best``: the best checkpoint recorded by the first callback that monitors a metric, as the newest checkpoint there
  saved its state (Lightning's ``best`` is the first callback's best model too).

Neither found: ``fit`` goes on as Lightning would (from the start: "set and forget" before the first run), while
``validate`` and ``test``, which would score weights nobody trained, are refused in one line naming where it looked.
"""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path
from typing import Any

NAMES = ("best", "last")
CODE_REFUSED = (
    "refused: it holds more than tensors and plain values (pickled objects or code), which this toolkit never loads"
)


# torch's weights-only reader warns of a pickle protocol it does not write, two lines on stderr before the refusal
# this toolkit says of such a file (a pickle.dump of a dict given as a model file) in one
warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning,
                        module=r"torch\._weights_only_unpickler")  # fmt: skip


def torch_unreadable(path: str | Path, cut_off: str = "") -> str:
    """What a file torch cannot load is, for a checkpoint's or model file's refusal: its size, not the exception's
    name (RuntimeError, KeyError, EOFError said nothing), and what it is where it is whole but not torch's
    (:func:`whole_other`); ``cut_off`` (a hint, " (cut off by ...?)") follows where it is not such a file: the
    file walked once (a 17 MB pickle took 2.4 s)."""
    size = Path(path).stat().st_size
    other = whole_other(path) if size else None
    if other:
        return f"{size:,} bytes, {other}"
    said = "an empty file" if size == 0 else f"{size:,} bytes that torch cannot read as one"
    return said + (cut_off if other is None else "")


def whole_other(path: str | Path) -> str | None:
    """What a file that starts as torch's (:func:`starts_as_torch`) is where it is whole and not torch's: a zip
    archive without torch's data.pkl, or one pickle that ends where the file does (torch.save's own zip holds its
    pickle inside; its old format is several pickles in a row); None for anything else, a file cut off among them
    ("cut off by a copy or a full disk?" was said of a whole pickle.dump of a dict); "" (not told) for a pickle over
    WALKED bytes, not walked. Walked, never unpickled."""
    import io
    import pickletools
    import zipfile

    try:
        with open(path, "rb") as f:
            head = f.read(2)
            if head == b"PK":
                if not zipfile.is_zipfile(f):
                    return None  # its directory at the end is missing: cut off
                with zipfile.ZipFile(f) as archive:
                    names = archive.namelist()
                return None if any(n.endswith("data.pkl") for n in names) else "a zip archive torch did not write"
            if head[:1] != b"\x80":
                return None
            f.seek(0)
            data = f.read(WALKED + 1)
        if len(data) > WALKED:  # a large one: not walked, and not called cut off either
            return ""
        # from memory: a damaged length field (2**62 bytes) asks a file for that much, and BytesIO gives what it has
        walked = io.BytesIO(data)
        for opcode, _, _ in pickletools.genops(walked):
            if opcode.name == "STOP":
                return "a Python pickle torch did not write" if walked.read(1) == b"" else None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):  # unreadable, or a pickle that breaks off
        return None
    return None


WALKED = 32 << 20  # the largest pickle whole_other walks (a 17 MB one took 2.4 s); larger: not told


def hpc_file(root: str | Path | None) -> Path | None:
    """The file ``--ckpt_path hpc`` names, as Lightning finds it: ``hpc_ckpt_N.ckpt`` of the highest N in the run's
    ``default_root_dir`` (the working folder without one); None where there is none."""
    folder = Path(root or ".")
    numbered = [(int(m.group(1)), p) for p in folder.glob("hpc_ckpt_*.ckpt")
                if (m := re.fullmatch(r"hpc_ckpt_(\d+)\.ckpt", p.name))]  # fmt: skip
    return max(numbered)[1] if numbered else None


def holds_code(err: Exception, path: str | Path) -> bool:
    """Whether torch's weights-only reader refused the file at ``path`` for what it holds (pickled objects or code)
    rather than for not being a pickle at all (a text file, random bytes: "Unsupported operand"; one that starts as
    neither torch's zip nor a pickle: a text starting with "c" read as pickle's GLOBAL, a config given as --model was
    said to hold code), which is unreadable, not code."""
    if not isinstance(err, pickle.UnpicklingError) or "Unsupported operand" in str(err):
        return False
    return starts_as_torch(path, unreadable=True)


def starts_as_torch(path: str | Path, unreadable: bool = False) -> bool:
    """Whether the file at ``path`` starts as torch.save writes: its zip, or a pickle of protocol 2 or later
    (``unreadable``: the answer for a file that cannot be opened)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        return unreadable
    return head[:2] == b"PK" or head[:1] == b"\x80"


def damaged(path: str | Path, named: str = "") -> str | None:
    """What is wrong with a torch file whose bytes changed where its size did not (a flipped bit, a copy or a disk gone
    wrong): the first entry of its zip whose bytes do not match the CRC-32 stored beside them, in words (after
    ``named`` and ": " where given: the whole refusal); None where every entry matches (or the file is no zip, or
    cannot be opened: torch.load says what else it is). torch.load never checks them: a checkpoint with 100 bytes
    flipped was exported, exit 0, a model file with 4 KiB overwritten captioned every photo "A a a a a ...", and a
    byte changed in the pickle was "not a model file". Checked before each load, reading the file once more costs
    about what torch.load does (24 ms the bundled text model, 65 ms the 50 MB captioner, from the page cache)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None
    if bad is None:
        return None
    said = f"damaged: its part {bad!r} does not match its checksum (a copy or a disk gone wrong): copy it again"
    return f"{named}: {said}" if named else said


class CheckpointRefused(ValueError):
    """A checkpoint that is not loaded: remote, or holding pickled objects beyond tensors. One line."""


def remote_message(path) -> str:
    return (
        f"--ckpt_path {path}: remote checkpoints are not loaded (a checkpoint from elsewhere can run code when "
        "unpickled); download it first and give the local file"
    )


def checkpoint_folders(trainer: Any) -> list[Path]:
    """Where earlier runs of this config put checkpoints: the callbacks' explicit folders, then the version folders
    of the loggers the config names (``<save_dir>/<name>/<version>/checkpoints``, where Lightning puts them with a
    logger whose save_dir is elsewhere) and of the default loggers (newest version first)."""
    folders = []
    for callback in getattr(trainer, "checkpoint_callbacks", []):
        dirpath = getattr(callback, "dirpath", None)
        if dirpath and "lightning_logs" not in Path(dirpath).parts:  # an explicit folder, not this run's version one
            folders.append(Path(dirpath))
    root = Path(getattr(trainer, "default_root_dir", None) or ".")
    logged = [Path(lg.save_dir) / str(lg.name) for lg in getattr(trainer, "loggers", None) or []
              if getattr(lg, "save_dir", None)]  # fmt: skip
    for logs in dict.fromkeys([*logged, root / "lightning_logs"]):
        versions = [p for p in logs.glob("*/checkpoints") if p.is_dir()]
        versions.sort(key=lambda p: (_version_number(p.parent.name), p.stat().st_mtime))
        folders += reversed(versions)
    unlogged = [root / "checkpoints"] if (root / "checkpoints").is_dir() else []  # trainer.logger false: here
    return list(dict.fromkeys([*folders, *unlogged]))


def _version_number(name: str) -> int:
    m = re.fullmatch(r"version_(\d+)", name)
    return int(m.group(1)) if m else -1  # a version the logger was given by name: before the numbered ones


def _newest(paths: list[Path]) -> Path | None:
    files = [p for p in paths if p.is_file()]
    return max(files, key=lambda p: p.stat().st_mtime) if files else None


def _read(checkpoint: Path) -> dict[str, Any] | None:
    """``checkpoint``'s contents (its tensors mapped, not read); None for an unreadable file (it records nothing: the
    caller says what was not found)."""
    import torch

    try:
        data = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - any unreadable file alike
        return None
    return data if isinstance(data, dict) else None


def _monitoring_states(checkpoint: Path) -> list[dict[str, Any]]:
    """The states a checkpoint's metric-monitoring ModelCheckpoints saved, in order (a callback without a monitor, one
    that keeps last.ckpt, records no best); none for an unreadable file."""
    data = _read(checkpoint)
    callbacks = (data.get("callbacks") or {}) if data is not None else {}
    return [state for key, state in callbacks.items()
            if str(key).startswith("ModelCheckpoint") and isinstance(state, dict) and state.get("monitor")]  # fmt: skip


def best_recorded(checkpoint: Path) -> Path | None:
    """The best model path that ``checkpoint``'s first metric-monitoring ModelCheckpoint state records (existing).
    Lightning records it as the run named it: relative to the folder the fit ran in, so another working folder (an
    absolute default_root_dir, a cd into the run) found none, and fit then started again from step 0 (review). Such a
    path is looked for from each folder above the checkpoint too, and by its name beside it (a run folder moved)."""
    for state in _monitoring_states(checkpoint):
        if (found := located(state.get("best_model_path"), checkpoint)) is not None:
            return found
    return None


def located(recorded: Any, near: Path | None, kind: str = "file") -> Path | None:
    """The file (``kind`` "dir": the folder) a checkpoint's callback state names, as Lightning recorded it: relative
    to the folder its fit ran in. Looked for from each folder above ``near`` (a checkpoint of that run: the one
    named so under the run's own folder first, not a same-named one of another run under the working folder), then
    from the working folder, then by its name beside ``near`` (a run folder moved); None where none is there."""
    text = str(recorded or "")
    if not text or text == ".":
        return None
    path = Path(text)
    tried = [path] if path.is_absolute() else [*(up / path for up in near.resolve().parents), path] if near else [path]
    if near is not None:
        tried.append(near.parent if kind == "dir" and near.parent.name == path.name else near.parent / path.name)
    test = Path.is_dir if kind == "dir" else Path.is_file
    found = next((p for p in tried if test(p)), None)
    if found is not None and not path.is_absolute() and test(path) and path.resolve() == found.resolve():
        return path  # as recorded, where the working folder is the fit's: the lines name it so
    return found


def resolve(name: str, trainer: Any) -> Path | None:
    """The file ``--ckpt_path NAME`` (``best`` / ``last``) means for an earlier run of this config; None: none."""
    folders = checkpoint_folders(trainer)
    if name == "last":
        return _newest([p for folder in folders for p in folder.glob("last*.ckpt")])
    newest = _newest([p for folder in folders for p in folder.glob("*.ckpt")])
    return best_recorded(newest) if newest is not None else None


def not_found_message(name: str, trainer: Any, fit: bool = False) -> str:
    """``--ckpt_path best`` / ``last`` with none found: validate and test are refused with this line; ``fit`` starts
    from its first step, and this note says so (Lightning's own warning hinted at ``save_last=True``, which the
    configs set: nothing had been saved yet, e.g. a run stopped while it cached its features)."""
    folders = checkpoint_folders(trainer)
    where = ", ".join(str(f) for f in folders) or f"{Path(trainer.default_root_dir or '.') / 'lightning_logs'}/*"
    what = "no last*.ckpt" if name == "last" else "no checkpoint recording a best model"
    then = "this fit starts from its first step" if fit else "give the .ckpt file's path"
    return (f"--ckpt_path {name}: {what} in {where} (the config's trainer.default_root_dir, or its logger's "
            f"save_dir); {then}")  # fmt: skip


def carried_best(state: dict[str, Any], dirpath: str, step: int | None = None,
                 near: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """A ModelCheckpoint's saved ``state`` made to load into a resumed run whose checkpoint folder is ``dirpath``.

    Lightning restores a callback's best model and score only when the folder is the same, and a resumed fit logs
    into a new version folder: the best was forgotten, so the first validation after resuming became "best" however
    it scored, and the run exported worse weights than an uninterrupted one. The state now names the new folder (the
    earlier files stay: Lightning never removes a file outside its folder). A last.ckpt written at an epoch's end,
    before that step's validation found a new best, records a best file that ``save_top_k`` has since removed: the
    best the newest checkpoint of the earlier folder records is taken instead, of those written at or before ``step``
    (the resumed checkpoint's): the earlier run may have gone on, and its later best is not this run's past (a
    resumed fit exported the other run's step-120 weights, none of which it had trained). Recorded files that are
    gone are dropped. A callback without a monitor (one keeping last.ckpt) records no best: its state names the new
    folder all the same, so Lightning loads it whole, without its notice that "the dirpath has changed ... won't be
    reloaded" at every resume, validate and test (what it holds, the last files written, stays where it was:
    Lightning never removes a file outside its folder). The paths it records are relative to the folder the fit ran
    in: found from ``near`` (the resumed checkpoint) as :func:`located` finds them, so a resume from another working
    folder keeps its best (review: it was dropped, and a worse epoch exported)."""
    old = state.get("dirpath")
    if not old or str(old) == str(dirpath):
        return state
    if not state.get("monitor"):
        return {**state, "dirpath": str(dirpath)}
    state = dict(state)
    if located(state.get("best_model_path"), near) is None:
        old_dir = located(old, near, "dir") or Path(old)
        kept = [p for p in old_dir.glob("*.ckpt") if not p.name.startswith("last")]
        if step is not None:
            kept = [p for p in kept if (written := _step(p)) is not None and written <= step]
        newest = _newest(kept)
        found = _monitor_state(newest, state["monitor"]) if newest is not None else None
        if found is not None and located(found.get("best_model_path"), newest) is not None:
            for key in ("best_model_path", "best_model_score", "best_k_models", "kth_best_model_path", "kth_value"):
                state[key] = found.get(key, state.get(key))
            near = newest
    kept = {str(at): v for p, v in (state.get("best_k_models") or {}).items() if (at := located(p, near))}
    state["best_k_models"] = kept
    kth = located(state.get("kth_best_model_path"), near)
    if kth is None or str(kth) not in kept:
        state["kth_best_model_path"] = ""
        state.pop("kth_value", None)
    else:
        state["kth_best_model_path"] = str(kth)
    best = located(state.get("best_model_path"), near)
    state["best_model_path"] = str(best) if best is not None else ""
    if best is None:
        state["best_model_score"] = None
    state["dirpath"] = str(dirpath)
    return state


def _step(checkpoint: Path) -> int | None:
    """The training step ``checkpoint`` was written at; None for an unreadable file."""
    step = (_read(checkpoint) or {}).get("global_step")
    return int(step) if isinstance(step, int) else None


def _monitor_state(checkpoint: Path, monitor: str) -> dict[str, Any] | None:
    """The state of ``checkpoint``'s ModelCheckpoint that monitors ``monitor``."""
    return next((state for state in _monitoring_states(checkpoint) if state["monitor"] == monitor), None)
