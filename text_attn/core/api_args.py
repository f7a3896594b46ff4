"""What a Python caller gives ``Captioner`` and ``Translator`` (no torch here), checked as the commands check their
options: one clear exception naming the argument instead of a wrong result or a torch error deep in the search.

- a batch is a list: a bare string was read one character at a time (``translate("Hallo")``: five translations of
  single letters; ``caption_images("photo.jpg")``: "p: no such file");
- decoding values in the commands' ranges: a beam wider than the model's vocabulary (a mistyped 100000 filled the
  memory), a beam below 1 (the translator searched greedily, unsaid), a max_len below 1, a negative or non-finite
  length penalty, a negative n-gram size.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

from text_attn.core.os_text import lone_surrogate


def a_batch(items: Any, name: str, what: str) -> list:
    """``items`` as a list (a generator read once: read twice it did the work, then failed on a zip); TypeError where
    it is one string, bytes or path instead of a list of them, or None."""
    if isinstance(items, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} takes a list of {what}: give [{items!r}]" if not isinstance(items, bytes) else
                        f"{name} takes a list of {what}: give [the bytes]")  # fmt: skip
    if items is None:
        raise TypeError(f"{name} takes a list of {what}, got None")
    if not hasattr(items, "__iter__"):
        raise TypeError(f"{name} takes a list of {what}, got {type(items).__name__}")
    return list(items)


def text_batch(items: Any, name: str, what: str, listed: str | None = None) -> list[str]:
    """``items`` as a list of texts (:func:`a_batch`; ``listed``: what the list holds in its message, default
    ``what`` + "s"), an element that is no text one TypeError naming it: the translator's sentences and translations,
    the captioner's captions read (one string was read a character a caption)."""
    items = a_batch(items, name, listed or f"{what}s")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}: {what} {i} must be a text, got {type(item).__name__}")
        check_encodable(item, f"{name}: {what} {i}")
    return items


def check_encodable(text: str, where: str) -> None:
    """ValueError where ``text`` holds a lone surrogate (a byte that was not UTF-8, as ``os.fsdecode`` and Python's
    reading of argv keep it: "l\\udce4uft"), naming it and where: the subword codec's C++ raised "Unable to cast
    Python instance of type <class 'str'>" 7-13 frames down, the captioner dropped the character unsaid. The commands
    refuse such input as "not valid UTF-8 text"."""
    if (at := lone_surrogate(text)) is not None:
        char = text[at]
        why = ("a byte that was not UTF-8, kept by errors='surrogateescape': decode the text's bytes in their own "
               "encoding" if "\udc80" <= char <= "\udcff" else "half of a UTF-16 pair, an emoji or other character "
               "cut in two: give the whole character")  # fmt: skip
        raise ValueError(f"{where} is not valid text: a lone surrogate {char!r} at character {at + 1} ({why})")


def check_flag(name: str, value: Any) -> None:
    """TypeError where an on/off option is not a bool (numpy's is one): a string was read by its truth ("no": on)."""
    numpy_bool = type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")
    if not (isinstance(value, bool) or numpy_bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def check_count(name: str, value: Any, low: int, note: str = "") -> None:
    """TypeError where ``value`` is no integer (numpy's are; a bool is not), ValueError where it is below ``low``
    (``note``: said after the bound, e.g. what 0 means)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # numpy's integers are integers
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be at least {low}{note}, got {value}")


def check_decoding(
    beam_size: Any = None, length_penalty: Any = None, max_len: Any = None, no_repeat_ngram: Any = None,
    words: int | None = None,
) -> None:  # fmt: skip
    """ValueError / TypeError for a decoding value out of the commands' ranges (None: not given, not checked).
    ``words``: the model's output vocabulary, the widest useful beam."""
    for name, value, low in (("beam_size", beam_size, 1), ("max_len", max_len, 1),
                             ("no_repeat_ngram", no_repeat_ngram, 0)):  # fmt: skip
        if value is not None:
            check_count(name, value, low)
    if words is not None and beam_size is not None and beam_size > words:
        raise ValueError(f"beam_size {beam_size} is more than the model's {words} words: at most {words}")
    if length_penalty is not None:
        if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real):
            raise TypeError(f"length_penalty must be a number, got {length_penalty!r}")
        if not math.isfinite(length_penalty) or length_penalty < 0:
            raise ValueError(f"length_penalty must be a finite number, 0 or more, got {length_penalty}")
