"""Writing lowercase words as a training text writes them: a line typed without capitals read by a translator, a
caption from a model trained on lowercased German, French or Czech captions (captioning: ``Captioner.casing``).

A subword model keeps case, and German writes every noun with a capital, so "ein mann fährt fahrrad ." is, to a
model trained on Multi30k, a string of pieces it rarely saw: the bundled Transformer scores sacreBLEU 42.33 on the
test sentences as written, 18.09 on the same sentences lowercased (the Transformer before it: 0.00 in capitals, its
outputs running to the length cap), while the source check, which lowercases, passes them all. A line whose case
says nothing (no capital past its first letter, or nothing but capitals) is read instead with each word in the form
the training source text most often writes it in (away from a line's start, where every word is capitalised), and
its first letter capitalised where the training lines mostly start with one: 42.05 lowercased
(docs/multi30k_casing_transformer.json, 2026-12-04; the Transformer before it 40.79) and, for that one, 40.72 in
capitals (benchmarks/casing.py, docs/text.md).
A line with capitals of its own is read as typed, but for its words in capitals alone ("EIN MANN fährt Fahrrad.": read
as "Ein Mann fährt Fahrrad."; acronyms kept, :meth:`Casing._unshouted`): a correctly cased "essen" (to eat) stays
lowercase even though the training text writes "Essen" (food) more often.

The casing is learned with the source check (text_attn.translation.source_check) from the same training lines, and
kept in it as plain JSON-able values: ``{"first": bool, "words": "Mann Frau T-Shirt weiße ..."}``, the forms a line
without case cannot give back, in one string (one string loads at once, where a dict of 12,000 words costs a tenth
of a second). A model file from before it has none, and reads every line as typed.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Container, Iterable

WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")  # a word: letters, joined by hyphens or apostrophes (' or ’)


# characters no reader sees, there to guide a typesetter: a soft hyphen (where a word may break), the zero-width space,
# the word joiner, a byte-order mark inside a text. Read, they cut a word in two ("Fahr\u00adrad" -> "riding the
# train of some wheel"). Not the zero-width joiner and non-joiner, nor the direction marks: Persian, Indic scripts
# and emoji are written with them (a word without its joiner renders otherwise)
INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))


def visible(text: str) -> str:
    """``text`` without the characters no reader sees (:data:`INVISIBLE`)."""
    return text.translate(INVISIBLE)


def shows_nothing(text: str) -> bool:
    """Whether ``text`` holds nothing a reader sees: white space and format characters alone (a zero-width space, a
    joiner, a direction mark, a byte-order mark): a line that looks blank is blank, not "an empty sentence"."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def composed(text: str) -> str:
    """``text`` with its letters composed (NFC): "ä" typed as "a" + a combining diaeresis (macOS file names, some
    keyboards) is otherwise cased letter by letter ("LÄuft") and read as unknown words; and without the characters no
    reader sees (:func:`visible`)."""
    return unicodedata.normalize("NFC", visible(text))


def changed_reading(text: str, read: str) -> str | None:
    """``read`` (how a translator read ``text``) where it differs from ``text`` by more than composed letters and runs
    of white space (a paragraph's line breaks), which change nothing a reader sees; else None."""
    return None if read.split() == composed(text).split() else read


def learn_casing(train: Iterable[str]) -> dict | None:
    """The casing of the training source lines ``train``: each word's most frequent form away from a line's start,
    kept where a line without case cannot give it back (the form is not its own casefold: "Mann", "weiße"), and
    whether the lines mostly start with a capital (None: nothing to learn, no capital and no form like "weiße": a
    synthetic task)."""
    forms: dict[str, Counter] = defaultdict(Counter)
    starts = capitals = 0
    for line in train:
        words = WORD.findall(line)
        if not words:
            continue
        if (start := opening(line)) is not None:
            starts += 1
            capitals += line[start].isupper()
        for word in words[1:]:  # a line's first word is capitalised whatever it is
            forms[word.lower()][word] += 1
    # kept: what a line without case cannot give back; casefold() is what it can ("STRASSE", "strasse" -> "Straße")
    kept = sorted(best for seen in forms.values() if (best := seen.most_common(1)[0][0]) != best.casefold())
    if not kept and not capitals:
        return None
    return {"first": capitals * 2 > starts, "words": " ".join(kept)}


def valid_casing(casing: object) -> bool:
    """Whether ``casing`` (read from a model file) is what :func:`learn_casing` makes."""
    return isinstance(casing, dict) and isinstance(casing.get("first"), bool) and isinstance(casing.get("words"), str)


def says_nothing(line: str) -> bool:
    """Whether the case of ``line`` carries no information: it has letters with a case, and no capital past its
    first letter, or nothing but capitals ("ein mann", "Ein mann", "EIN MANN"; not "Ein Mann", not "2024")."""
    cased = [c for c in line if c.islower() or c.isupper()]
    # Caps Lock leaves a letter without a one-letter capital as it is: "STRAßE" is all capitals too (ß's is "SS")
    shouted = all(c.isupper() or len(c.upper()) > 1 for c in cased) and any(c.isupper() for c in cased)
    return bool(cased) and (all(c.islower() for c in cased[1:]) or shouted)


def opening(line: str) -> int | None:
    """Where the line's first word starts when nothing but spaces and punctuation come before it (a sentence's
    capital goes there), else None ("2 boys ...": the line starts with a number, and "boys" keeps its case)."""
    m = WORD.search(line)
    return m.start() if m and not any(c.isalnum() for c in line[: m.start()]) else None


def capitalised(line: str) -> str:
    """``line`` with a capital where a sentence's goes (:func:`opening`), else as it is."""
    start = opening(line)
    return line if start is None else line[:start] + line[start].upper() + line[start + 1 :]


class Casing:
    """A learned casing, ready to apply: ``recase(line)``."""

    def __init__(self, casing: dict, known: Container[str] | None = None):
        """``known``: the training text's words, lowercased (the source check's word profile), which a word in
        capitals in a line with case must be to be lowercased (:meth:`recase`); None: such words keep their
        capitals unless training wrote them with some ("MANN" -> "Mann")."""
        self.first, self.known = casing["first"], known
        # "mann" -> "Mann", "strasse" -> "Straße"
        self.forms = {form.casefold(): form for form in casing["words"].split()}

    def recase(self, line: str) -> str:
        """``line`` as the training text would write it when its case says nothing (:func:`says_nothing`); else
        ``line`` with its words in capitals alone so written ("EIN MANN fährt Fahrrad.": Caps Lock for a word or
        two, a shouted name; they were translated as "ANNNNNNNN.", nothing said), the other words as typed. Only
        letters change: spacing, digits and punctuation stay as typed."""
        if not says_nothing(line):
            start = opening(line)
            return WORD.sub(lambda m: self._unshouted(m.group(), m.start() == start), line)
        text = WORD.sub(lambda m: self._form(m.group()), line.lower())
        return capitalised(text) if self.first else text

    def _unshouted(self, word: str, first: bool) -> str:
        """A word of a line with case, in capitals: as training wrote it where it wrote it with capitals ("MANN" ->
        "Mann", "USA" stays); lowercased where it is a training word of three letters or more written lowercase
        ("EIN" -> "ein"; "AM" in "Texas AM" and an acronym training never wrote, "PM", stay: the test set's two
        such lines were read "Texas am", "pm"); a line's first word with a capital where the lines start with one.
        Any other word as typed ("A", "Mann", "essen", "MaNN")."""
        letters = sum(c.isalpha() for c in word)
        if letters < 2 or not says_nothing(word) or not any(c.isupper() for c in word[1:]):
            return word
        low = word.lower()
        form = self._form(low)
        if form == low and not (letters >= 3 and self.known is not None and low in self.known):
            return word
        return form[0].upper() + form[1:] if first and self.first else form

    def _form(self, word: str) -> str:
        """A lowercase word as training wrote it; a hyphenated compound training never wrote whole, part by part
        ("usa-flagge" -> "USA-Flagge", where "USA" and "Flagge" were written)."""
        form = self.forms.get(word.casefold())
        if form is not None or "-" not in word:
            return word if form is None else form
        return "-".join(self.forms.get(part.casefold(), part) for part in word.split("-"))

    def words(self, words: list[str]) -> list[str]:
        """Lowercase words (a caption) as the training text writes them, one for one: ["ein", "hund", "im",
        "schnee"] -> ["Ein", "Hund", "im", "Schnee"]."""
        cased = self.recase(" ".join(words)).split(" ")
        return cased if len(cased) == len(words) else list(words)
