"""How text becomes tokens and back, the way each task tokenizes: ``word`` (the offline regex tokenizer) or ``char``
(characters; a space is the visible token SPACE). Shared by the data module and the translator; no Lightning."""

from __future__ import annotations

from collections.abc import Sequence

from text_attn.core.vocab import tokenize

SPACE = "▁"  # the visible token for a space in `dates` sources
CHAR_TASKS = ("dates",)  # tasks whose tokens are characters


def tokenize_text(text: str, mode: str, lower: bool = True) -> list[str]:
    """User input -> tokens the way a task tokenizes: ``word`` (regex tokenizer) or ``char``."""
    if mode == "char":
        text = " ".join(text.split())
        return list((text.lower() if lower else text).replace(" ", SPACE))
    return tokenize(text, lower=lower)


def detokenize(tokens: Sequence[str], mode: str) -> str:
    return "".join(tokens).replace(SPACE, " ") if mode == "char" else " ".join(tokens)
