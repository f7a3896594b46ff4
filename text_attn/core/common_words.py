"""Which of a few languages a sample of sentences is written in, by the share of its words that are that language's
most common ones (articles, prepositions, conjunctions): enough to tell a corpus's German side from its English one,
so that ``data.src_lang en`` given for German sources (the columns or the codes swapped) is said instead of recorded
as the model's pair. Only the languages below are told; any other code is taken as given."""

from __future__ import annotations

import re
from collections.abc import Iterable

# the most common words of each language (its function words; none two of them share, as "in" and Czech's "a"): on
# Multi30k's train sentences each set covers 24-39% of its language's words and at most 3% of another's
COMMON = {
    "de": frozenset(
        "der die das und ein eine einen einem einer ist sind mit auf im den dem von zu zwei sich "
        "nicht an am vor bei für aus".split()
    ),  # fmt: skip
    "en": frozenset("the a an and is are of on with to at two his her their its while for from by".split()),
    "fr": frozenset("le la les un une des et est sont dans sur avec de du au aux en deux pour par qui".split()),
    "cs": frozenset("v ve na se s je jsou z do dva dvě muž žena který která pro před".split()),
}
NAMES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech"}
# a language's names as people type them for its code ("german" for de)
TYPED_NAMES = {name.lower(): code for code, name in NAMES.items()} | {
    "deutsch": "de", "englisch": "en", "anglais": "en", "français": "fr", "francais": "fr", "čeština": "cs",
    "czech": "cs", "tschechisch": "cs", "allemand": "de"}  # fmt: skip
SAMPLE = 2000  # sentences of a side looked at
CLEAR = 3.0  # the guess must cover this many times the words the given language's set covers
LEAST = 0.12  # and at least this share of the words (a list of names or numbers is no language's)


def shares(lines: Iterable[str]) -> dict[str, float]:
    """Per language, the share of the words of ``lines`` that are among its common words (lowercased, split at
    anything that is not a letter)."""
    counts, total = dict.fromkeys(COMMON, 0), 0
    for line in lines:
        for word in re.findall(r"[^\W\d_]+", line.lower()):
            total += 1
            for code, words in COMMON.items():
                counts[code] += word in words
    return {code: n / total if total else 0.0 for code, n in counts.items()}


def other_language(lines: Iterable[str], given: str) -> str | None:
    """The language (code) ``lines`` are clearly written in where it is not ``given`` (one of COMMON's codes), else
    None (the given one fits, the sample is too short or unlike any of them, or ``given`` is a code not told)."""
    if given not in COMMON:
        return None
    found = shares(lines)
    best = max(found, key=found.get)
    if best != given and found[best] >= LEAST and found[best] >= CLEAR * found[given]:
        return best
    return None


def languages_read(sides: dict[str, tuple[str | None, list[str]]]) -> tuple[list[str], dict[str, str | None]]:
    """A corpus's language codes, each side looked at once (``sides``: "source" / "target" -> (the code given, a
    sample of its sentences, SAMPLE of them: the caller's cut)) -> (the notes on them, the code each side is recorded
    with). Noted: a code whose side reads clearly as another of COMMON's languages (columns or codes swapped), and a
    language's name typed for its code ("german" for de). Recorded: the code given (a name typed: its code), or the
    language the side clearly reads as (:func:`other_language`): data.src_lang en given for German sources was
    recorded, and ``translate`` then called German input "unlike the English text" the model learned from."""
    notes, recorded = [], {}
    for side, (code, lines) in sides.items():
        flag = "data.src_lang" if side == "source" else "data.tgt_lang"
        if code and code.lower() in TYPED_NAMES:
            notes.append(f"{flag} {code!r} is a language's name: give its code, {TYPED_NAMES[code.lower()]!r} (the "
                         "model file records the code)")  # fmt: skip
            code = TYPED_NAMES[code.lower()]
        if code and (found := other_language(lines, code)):
            notes.append(f"the {side} sentences read as {NAMES[found]}, not {NAMES[code]} as {flag} {code} says (their "
                         f"common words are {NAMES[found]}'s): columns or codes swapped? The model file records "
                         f"{NAMES[found]}, what they read as")  # fmt: skip
            code = found
        recorded[side] = code
    return notes, recorded


def language_notes(sides: dict[str, tuple[str | None, list[str]]]) -> list[str]:
    """The notes of :func:`languages_read`."""
    return languages_read(sides)[0]


def read_as(code: str | None, lines: list[str]) -> str | None:
    """The code one side is recorded with (:func:`languages_read`)."""
    return languages_read({"source": (code, lines)})[1]["source"]


UNSPACED_LEAST = 20  # sentences looked at before a text is said to be written without spaces


def unspaced(words: list[int], chars: list[int]) -> tuple[int, int] | None:
    """(the median words, the median characters) of sentences (each one's count of words and of characters) that
    are one or two words each though long: a language written without spaces (Chinese, Japanese, Thai), each
    sentence one word to a tokenizer that splits at spaces; None for others, or fewer than UNSPACED_LEAST."""
    if len(words) < UNSPACED_LEAST:
        return None
    n, letters = sorted(words)[len(words) // 2], sorted(chars)[len(chars) // 2]
    return (n, letters) if n <= 2 and letters >= 8 else None
