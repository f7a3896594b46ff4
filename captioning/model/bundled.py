"""The caption models installed with the package, by name (no torch here: the command's --help stays fast).

``Captioner.load()``, ``caption``, ``attention-serve`` and the benchmarks all resolve a model the same way
(:func:`model_path`): no name -> the default, a bundled model's name -> its file (unless a file of that name exists
in the working folder: a path always wins), anything else -> a path."""

from __future__ import annotations

from pathlib import Path

from text_attn.core.bundled_names import name_of, other_familys, resolve

ASSETS = Path(__file__).parents[1] / "assets"
BUNDLED_MODEL = ASSETS / "flickr8k_soft.pt"  # the default model: Show-Attend-Tell trained on Flickr8k's photographs
SHAPES_MODEL = ASSETS / "shapes_soft.pt"  # trained on synthetic shape scenes (--model shapes, --demo shapes)
MODEL_NAMES = {"flickr8k": BUNDLED_MODEL, "shapes": SHAPES_MODEL}  # a bundled model by name
# The bundled text models' names (text_attn/translation/bundled.py's MODEL_NAMES, which captioning may not import; a
# test keeps the two equal): `caption --model transformer` was "model file not found", as if the name were mistyped.
TEXT_NAMES = ("multi30k_de_en", "transformer", "bahdanau")
DEMO_PHOTOS = sorted((ASSETS / "photos").glob("*.[jp][pn]g"))  # CC0 / public-domain photos (assets/photos/README.md)


def model_path(model: str | Path | None = None) -> Path:
    """The file of ``model``: None -> the bundled Flickr8k model; ``flickr8k`` / ``shapes`` -> that bundled model
    (a file of that name in the working folder wins); else the path itself."""
    return resolve(model, MODEL_NAMES, BUNDLED_MODEL)  # the module's names when called (tests replace them)


def bundled_name(path: str | Path) -> str | None:
    """The name a bundled model file is known by (``flickr8k``, ``shapes``), or None for any other file."""
    return name_of(path, MODEL_NAMES)


def text_model_named(model: str | Path | None, usage: str = "a bundled text model: translate --model {name} SENTENCE"
                     ) -> str | None:  # fmt: skip
    """The line for a ``--model`` that is a bundled text model's name (``transformer``), not a file: its command
    (``usage``: the one for this context, e.g. text-export's)."""
    return other_familys(model, TEXT_NAMES, usage, f"the bundled caption models are {', '.join(MODEL_NAMES)}")
