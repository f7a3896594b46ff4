"""Sentence-pair tasks: two synthetic ones with ground truth (the readers for real corpora: translation.corpora).

`reorder` is a toy translation between two made-up languages with a fixed, small lexicon
(30 nouns, 14 adjectives, 14 verbs, 4 determiners, 3 conjunctions: 65 source words). Source
content words are CVCV syllable strings ("bako"), function words are CV ("ka"); target content
words are CVCVN ("zuhen"), function words CVN ("fen"), so the two word sets can never collide.
The dictionary is one-to-one, built once from a fixed seed: every split speaks the same language.
Grammar: a sentence is clauses joined by conjunctions; a clause is `NP VERB [NP [NP]]` with
`NP = DET [ADJ] NOUN` (3 to 8 tokens). Translation is word for word with two local reorderings:
the adjective follows its noun (`DET NOUN ADJ`) and the verb ends its clause (SVO -> SOV).
Conjunctions stay between clauses. So the true alignment is a permutation, kept in
`Example.alignment`, and attention can be scored against it.

`dates` maps a human-readable date ("the 3rd of march 2015", "03/04/2015", ...) to ISO 8601
("2015-04-03" for the latter: numeric dates are day first, dd/mm/yyyy; two-digit years mean
1950..2049). Tokens are characters on both sides; a space is the visible token `SPACE` ("▁").
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Sequence

from text_attn.translation.pairs import Example
from text_attn.translation.tokens import SPACE

# --- reorder: the two made-up languages -------------------------------------------------------
_LEXICON_SEED = 20240607  # fixed: the language must not depend on the data seed
_POS_SIZES = {"noun": 30, "adj": 14, "verb": 14, "det": 4, "conj": 3}
_CONTENT = ("noun", "adj", "verb")
_SRC_C, _SRC_V = "bdgklmnprst", "aeiou"
_TGT_C, _TGT_V, _TGT_END = "fhjvwz", "aeiouy", "nrs"
_MIN_CLAUSE, _MAX_CLAUSE = 3, 8  # DET NOUN VERB .. DET ADJ NOUN VERB DET NOUN DET NOUN


def _build_lexicon() -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    rng = random.Random(_LEXICON_SEED)
    used: set[str] = set()

    def fresh(shape: str, cons: str, vowels: str) -> str:
        while True:  # redraw until unused: no word is shared within or across languages
            pools = {"C": cons, "V": vowels, "N": _TGT_END}
            word = "".join(rng.choice(pools[c]) for c in shape)
            if word not in used:
                used.add(word)
                return word

    by_pos: dict[str, tuple[str, ...]] = {}
    table: dict[str, str] = {}
    for pos, size in _POS_SIZES.items():
        content = pos in _CONTENT
        words = []
        for _ in range(size):
            src = fresh("CVCV" if content else "CV", _SRC_C, _SRC_V)
            table[src] = fresh("CVCVN" if content else "CVN", _TGT_C, _TGT_V)
            words.append(src)
        by_pos[pos] = tuple(words)
    return by_pos, table


REORDER_POS, REORDER_DICT = _build_lexicon()  # part of speech -> source words; source -> target
REORDER_SRC_WORDS: tuple[str, ...] = tuple(REORDER_DICT)
REORDER_TGT_WORDS: tuple[str, ...] = tuple(REORDER_DICT.values())


def translate_word(src_word: str) -> str:
    """The target word for a source word of the `reorder` language (KeyError if unknown)."""
    return REORDER_DICT[src_word]


def _clause_lengths(total: int, rng: random.Random) -> list[int]:
    """Split `total` tokens into clause lengths in [3, 8], one conjunction token between clauses."""
    lengths, left = [], total
    while left > _MAX_CLAUSE:
        # leave room for the conjunction and at least one minimal clause after it
        length = rng.randint(_MIN_CLAUSE, min(_MAX_CLAUSE, left - 1 - _MIN_CLAUSE))
        lengths.append(length)
        left -= length + 1
    return [*lengths, left]


def _reorder_sentence(length: int, rng: random.Random) -> Example:
    src: list[str] = []
    order: list[int] = []  # source indices in target order

    def add(pos: str) -> int:  # append a random word of this part of speech, return its index
        src.append(rng.choice(REORDER_POS[pos]))
        return len(src) - 1

    for c, clause_len in enumerate(_clause_lengths(length, rng)):
        if c:
            order.append(add("conj"))
        # clause_len - 1 tokens of noun phrases, each 2 (DET NOUN) or 3 (DET ADJ NOUN) long
        n_np = rng.choice([k for k in (1, 2, 3) if 2 * k <= clause_len - 1 <= 3 * k])
        with_adj = set(rng.sample(range(n_np), clause_len - 1 - 2 * n_np))
        clause_order: list[int] = []
        verb = -1
        for i in range(n_np):
            det = add("det")
            adj = [add("adj")] if i in with_adj else []
            clause_order += [det, add("noun"), *adj]  # the adjective follows its noun
            if i == 0:  # subject, then the verb
                verb = add("verb")
        order += [*clause_order, verb]  # verb at the end of its clause
    return Example(src=src, tgt=[translate_word(src[i]) for i in order], alignment=order)


def make_reorder(n: int, seed: int, min_len: int = 5, max_len: int = 60) -> list[Example]:
    """`n` sentence pairs; source lengths uniform over [min_len, max_len] (target has the same)."""
    if not _MIN_CLAUSE <= min_len <= max_len:
        raise ValueError(f"need {_MIN_CLAUSE} <= min_len <= max_len, got {min_len}, {max_len}")
    rng = random.Random(seed)
    return [_reorder_sentence(rng.randint(min_len, max_len), rng) for _ in range(n)]


# --- dates ------------------------------------------------------------------------------------
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DATE_RANGE = (datetime.date(1950, 1, 1), datetime.date(2049, 12, 31))


def _nth(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _parts(d: datetime.date) -> tuple[str, str, str, str]:
    """(month, month abbreviation, weekday, weekday abbreviation); no locale-dependent strftime."""
    month, weekday = MONTHS[d.month - 1], WEEKDAYS[d.weekday()]
    return month, month[:3], weekday, weekday[:3]


DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "d month yyyy": lambda d: f"{d.day} {_parts(d)[0]} {d.year}",
    "month d, yyyy": lambda d: f"{_parts(d)[0]} {d.day}, {d.year}",
    "month dth, yyyy": lambda d: f"{_parts(d)[0]} {_nth(d.day)}, {d.year}",
    "dd/mm/yyyy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year}",
    "weekday, month d, yyyy": lambda d: f"{_parts(d)[2]}, {_parts(d)[0]} {d.day}, {d.year}",
    "d mon yy": lambda d: f"{d.day} {_parts(d)[1]} {d.year % 100:02d}",
    "yyyy.mm.dd": lambda d: f"{d.year}.{d.month:02d}.{d.day:02d}",
    "the dth of month yyyy": lambda d: f"the {_nth(d.day)} of {_parts(d)[0]} {d.year}",
    "mon d yyyy": lambda d: f"{_parts(d)[1]} {d.day} {d.year}",
    "dd-mon-yyyy": lambda d: f"{d.day:02d}-{_parts(d)[1]}-{d.year}",
    "wkd d mon yyyy": lambda d: f"{_parts(d)[3]} {d.day} {_parts(d)[1]} {d.year}",
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
}


def format_date(d: datetime.date, fmt: str) -> str:
    """`d` written in the named format of `DATE_FORMATS` (plain spaces, not `SPACE`)."""
    return DATE_FORMATS[fmt](d)


def make_dates(n: int, seed: int, formats: Sequence[str] | None = None) -> list[Example]:
    """`n` (date in a random format -> ISO date) pairs, character tokens, dates in `DATE_RANGE`."""
    names = list(formats) if formats is not None else list(DATE_FORMATS)
    unknown = [f for f in names if f not in DATE_FORMATS]
    if unknown or not names:
        raise ValueError(f"unknown date formats {unknown}; known: {list(DATE_FORMATS)}")
    rng = random.Random(seed)
    lo, hi = (d.toordinal() for d in DATE_RANGE)
    out = []
    for _ in range(n):
        d = datetime.date.fromordinal(rng.randint(lo, hi))
        text = format_date(d, rng.choice(names))
        out.append(Example(src=list(text.replace(" ", SPACE)), tgt=list(d.isoformat())))
    return out


TASKS = ("dates", "parallel", "reorder", "tsv")


def load_examples(task: str, n: int, seed: int, **kwargs) -> list[Example]:
    """Dispatch by task name. For the readers `n` caps the number of pairs (n <= 0: all) and
    `seed` is unused: splitting and shuffling belong to the data module."""
    if task == "reorder":
        return make_reorder(n, seed, **kwargs)
    if task == "dates":
        return make_dates(n, seed, **kwargs)
    if task in ("tsv", "parallel"):
        paths = ("path",) if task == "tsv" else ("src_path", "tgt_path")
        missing = [k for k in paths if k not in kwargs]
        if missing:
            raise ValueError(f"task {task!r} needs {', '.join(k + '=...' for k in missing)}")
        from text_attn.translation.corpora import read_parallel_files, read_tsv_pairs

        reader = read_tsv_pairs if task == "tsv" else read_parallel_files
        return reader(**kwargs, max_pairs=n if n > 0 else None)
    raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
