"""How a sequence of tokens is labelled where people read it: the alignment grids (``translate --plot``, Jupyter,
the notebooks), the HTML pages (``translate --html``) and attention-serve's page. Records (``--jsonl``, the JSON API)
keep the tokens as the model has them.

Subword pieces are shown as the text they spell: SentencePiece's word-start mark is dropped ("▁man" -> "man") and
a piece that goes on a word gets a leading "·" ("▁Bü" "sche" -> "Bü" "·sche"), so a grid's columns read as words and
its split words stay visible; subword-nmt's "@@" (the piece goes on into the next) the same way ("Bü@@" "sche" ->
"Bü" "·sche"). Punctuation that follows a word without a space (SentencePiece's "." after "▁bicycle") is shown as it
is, and so are special tokens (``<eos>``, ``<unk>``). Byte pieces that spell one character together (SentencePiece's
fallback for a character its vocabulary lacks: an emoji, Arabic, "ş") are shown as that character on the first and
"·" on the others ("<0xF0>" "<0x9F>" "<0x8E>" "<0x88>" -> "🎈" "·" "·" "·"); a byte piece that spells nothing whole
stays as it is. A sequence of whole words, and the
``dates`` task's characters with "▁" for a space, are shown as they are. attention_serve's page labels its tokens by
the same rules (its script's ``shown``; tests/serve/test_page_browser.py holds the two equal).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's byte fallback: one byte of a UTF-8 character
WORD_START = "▁"  # SentencePiece's mark of a piece that starts a word
GOES_ON = "@@"  # subword-nmt's mark of a piece that goes on into the next
JOINED = "·"  # shown before a piece that goes on the word before it


def _special(token: str) -> bool:
    return len(token) > 2 and token.startswith("<") and token.endswith(">")


# characters a label does not show (controls, format marks, separators but the space); a character newer than this
# Python's Unicode tables (unassigned here, an emoji to the browser) is shown, as the page's script shows it
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp", "Zs"}


def _shown(char: str) -> bool:
    import unicodedata

    return char == " " or unicodedata.category(char) not in _HIDDEN


def _spelled(tokens: list[str]) -> dict[int, str]:
    """Byte pieces that spell one UTF-8 character together: the first one's index -> the character, each further
    one's -> "" (shown as a joined piece). Runs that spell nothing whole are left out."""
    out: dict[int, str] = {}
    i = 0
    while i < len(tokens):
        lead = BYTE_PIECE.fullmatch(tokens[i])
        if lead:
            first = int(lead.group(1), 16)
            n = 2 if 0xC0 <= first < 0xE0 else 3 if 0xE0 <= first < 0xF0 else 4 if 0xF0 <= first < 0xF8 else 1
            run = [BYTE_PIECE.fullmatch(t) for t in tokens[i : i + n]]
            if len(run) == n and all(run):
                try:
                    char = bytes(int(m.group(1), 16) for m in run).decode("utf-8")  # type: ignore[union-attr]
                except UnicodeDecodeError:
                    char = ""
                if char and _shown(char):
                    out.update({i: char, **{j: "" for j in range(i + 1, i + n)}})
                    i += n
                    continue
        i += 1
    return out


def token_labels(tokens: Sequence[str]) -> list[str]:
    """Each token's label (see the module docstring): ``["▁A", "▁Bü", "sche", "."]`` -> ``["A", "Bü", "·sche",
    "."]``; a sequence with neither mark comes back unchanged."""
    tokens = [str(t) for t in tokens]
    spelled = _spelled(tokens)
    sentencepiece = bool(spelled) or any(t.startswith(WORD_START) and len(t) > 1 and not _special(t) for t in tokens)
    bpe = not sentencepiece and any(t.endswith(GOES_ON) and len(t) > 2 for t in tokens)
    if not (sentencepiece or bpe):
        return tokens
    out = []
    for i, token in enumerate(tokens):
        if i in spelled:  # a character's bytes: the character, then a joined mark for each further byte (no word
            # mark before the character: whether it is a letter depends on the Unicode tables, the browser's newer)
            out.append(spelled[i] or JOINED)
            continue
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
