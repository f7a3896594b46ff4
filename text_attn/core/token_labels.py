"""How a sequence of tokens is labelled where people read it: the alignment grids (``translate --plot``, Jupyter,
the notebooks), the HTML pages (``translate --html``) and attention-serve's page. Records (``--jsonl``, the JSON API)
keep the tokens as the model has them.

Subword pieces are shown as the text they spell: SentencePiece's word-start mark is dropped ("▁man" -> "man") and
a piece that goes on a word gets a leading "·" ("▁Bü" "sche" -> "Bü" "·sche"), so a grid's columns read as words and
its split words stay visible; subword-nmt's "@@" (the piece goes on into the next) the same way ("Bü@@" "sche" ->
"Bü" "·sche"). Punctuation that follows a word without a space (SentencePiece's "." after "▁bicycle") is shown as it
is, and so are special tokens (``<eos>``, ``<unk>``, a byte piece ``<0xC5>``). A sequence of whole words, and the
``dates`` task's characters with "▁" for a space, are shown as they are. attention_serve's page labels its tokens by
the same rules (its script's ``shown``; tests/serve/test_page_browser.py holds the two equal).
"""

from __future__ import annotations

from collections.abc import Sequence

WORD_START = "▁"  # SentencePiece's mark of a piece that starts a word
GOES_ON = "@@"  # subword-nmt's mark of a piece that goes on into the next
JOINED = "·"  # shown before a piece that goes on the word before it


def _special(token: str) -> bool:
    return len(token) > 2 and token.startswith("<") and token.endswith(">")


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Each token's label (see the module docstring): ``["▁A", "▁Bü", "sche", "."]`` -> ``["A", "Bü", "·sche",
    "."]``; a sequence with neither mark comes back unchanged."""
    tokens = [str(t) for t in tokens]
    sentencepiece = any(t.startswith(WORD_START) and len(t) > 1 and not _special(t) for t in tokens)
    bpe = not sentencepiece and any(t.endswith(GOES_ON) and len(t) > 2 for t in tokens)
    if not (sentencepiece or bpe):
        return tokens
    out = []
    for i, token in enumerate(tokens):
        if _special(token):
            out.append(token)
            continue
        if sentencepiece:
            starts = token.startswith(WORD_START)
            text = token[1:] if starts and len(token) > 1 else token
        else:
            starts = i == 0 or not tokens[i - 1].endswith(GOES_ON) or _special(tokens[i - 1])
            text = token[: -len(GOES_ON)] if token.endswith(GOES_ON) and len(token) > 2 else token
        goes_on = not starts and i > 0 and text[:1].isalnum()  # a word's later piece; not "." after a word
        out.append(JOINED + text if goes_on else text)
    return out
