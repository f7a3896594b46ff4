"""Bundled model files by name, for both families (no torch here: the commands' --help stays fast).

Each family keeps its own table of names (captioning/model/bundled.py, text_attn/translation/bundled.py); the rules that
turn a ``--model`` value into a file, and a file back into its name, are these, once."""

from __future__ import annotations

from pathlib import Path


def resolve(model: str | Path | None, names: dict[str, Path], default: Path) -> Path:
    """The file of ``model``: None -> ``default``; a name in ``names`` -> its file (unless a file of that name exists
    in the working folder: a path to a file always wins; a folder of that name, as Flickr8k's own ``flickr8k/``
    beside the user, is no model and made ``model.init_from flickr8k`` "no such file"); else the path itself."""
    if model is None:
        return default
    if not isinstance(model, (str, Path)) and not hasattr(model, "__fspath__"):  # pathlib's own words named no model
        raise TypeError(f"a model is a file's path or a bundled model's name ({', '.join(names)}), got "
                        f"{type(model).__name__}")  # fmt: skip
    if str(model) in names and not Path(model).is_file():
        return names[str(model)]
    return Path(model)


def name_of(path: str | Path, names: dict[str, Path]) -> str | None:
    """The name a bundled model file is known by (its first name in ``names``), or None for any other file."""
    return next((name for name, file in names.items() if Path(path) == file), None)


def other_familys(model: str | Path | None, theirs: tuple[str, ...], usage: str, ours: str) -> str | None:
    """The line for a ``--model`` that is no file here but the other family's bundled name (``translate --model
    flickr8k``, which said "model file not found" as if mistyped): ``usage``, the command that reads it ("caption
    --model {name} PHOTO", "{name}" filled in), and what this family has (``ours``); None for anything else."""
    if model is None or str(model) not in theirs or Path(model).exists():
        return None
    return f"{model} is {usage.format(name=model)} uses it; {ours}"
