"""The text models installed with the package, by name (no torch here: the command's --help stays fast).

``Translator.load()``, ``translate`` and ``attention-serve`` resolve a model the same way (:func:`model_path`): no name
-> the default, a bundled model's name -> its file (unless a file of that name exists in the working folder: a path
always wins), anything else -> a path."""

from __future__ import annotations

from pathlib import Path

from text_attn.core.bundled_names import name_of, other_familys, resolve

ASSETS = Path(__file__).parent / "assets"
# German -> English, both trained on Multi30k. The default is the Transformer, the better of the two on val and test;
# the Bahdanau GRU stays installed: the classic attention model, and faster.
BUNDLED_MODEL = ASSETS / "multi30k_de_en.pt"  # the default: the Transformer
BAHDANAU_MODEL = ASSETS / "multi30k_de_en_bahdanau.pt"
MODEL_NAMES = {"multi30k_de_en": BUNDLED_MODEL, "transformer": BUNDLED_MODEL, "bahdanau": BAHDANAU_MODEL}  # by name
# The bundled caption models' names (captioning/model/bundled.py's MODEL_NAMES, which text_attn may not import; a test
# keeps the two equal): `translate --model flickr8k` was "model file not found", as if the name were mistyped.
CAPTION_NAMES = ("flickr8k", "shapes")


def model_path(model: str | Path | None = None) -> Path:
    """The file of ``model``: None -> the bundled default; a bundled name -> its file (a file of that name in the
    working folder wins); else the path itself."""
    return resolve(model, MODEL_NAMES, BUNDLED_MODEL)  # the module's names when called (tests replace them)


def bundled_name(path: str | Path) -> str | None:
    """The name a bundled model file is known by (its first name in MODEL_NAMES), or None for any other file."""
    return name_of(path, MODEL_NAMES)


def caption_model_named(model: str | Path | None, usage: str = "a bundled caption model: caption --model {name} PHOTO"
                        ) -> str | None:  # fmt: skip
    """The line for a ``--model`` that is a bundled caption model's name (``flickr8k``), not a file: its command
    (``usage``: the one for this context, e.g. caption-export's)."""
    return other_familys(model, CAPTION_NAMES, usage, f"the bundled text models are {', '.join(MODEL_NAMES)}")
