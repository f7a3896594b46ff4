"""The text models installed with the package, by name (no torch here: the command's --help stays fast).

``Translator.load()``, ``translate`` and ``attention-serve`` resolve a model the same way (:func:`model_path`): no name
-> the default, a bundled model's name -> its file (unless a file of that name exists in the working folder: a path
always wins), anything else -> a path."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).parent / "assets"
BUNDLED_MODEL = ASSETS / "multi30k_de_en.pt"  # the default: German -> English, a Bahdanau GRU trained on Multi30k
MODEL_NAMES = {"multi30k_de_en": BUNDLED_MODEL, "bahdanau": BUNDLED_MODEL}  # a bundled model by name


def model_path(model: str | Path | None = None) -> Path:
    """The file of ``model``: None -> the bundled default; a bundled name -> its file (a file of that name in the
    working folder wins); else the path itself."""
    if model is None:
        return BUNDLED_MODEL
    if str(model) in MODEL_NAMES and not Path(model).exists():
        return MODEL_NAMES[str(model)]
    return Path(model)
