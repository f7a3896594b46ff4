"""The source check: whether an input line looks like the text a translation model was trained on.

A subword model translates anything without an ``<unk>``, so English given to a German -> English model comes back as
a fluent, confident and wrong "translation", and so does German news given to a model that only saw descriptions of
pictures. The check has two parts:
- the language: a character-trigram profile of the training source side (its most frequent trigrams'
  log-probabilities, lowercased); a line whose mean trigram log-probability is below what 99% of the validation
  source lines reach (less a margin) is flagged. On Multi30k's German side it flags 0.1% of German val lines and
  91-100% of the English, French and Czech ones (docs/text.md);
- the world: a word profile of the training source side (each word's log-probability, lowercased, add-half
  smoothed); a line whose words are on average more surprising than the threshold is flagged. The threshold is set on
  the validation lines so that both parts together flag at most ``FLAGGED`` (2%) of them. News and everyday speech use
  words a corpus of picture descriptions rarely or never has ("Verspätung", "Haushalt", "Rechnung").
Beside them the check keeps the training text's casing (``casing``: text_attn.core.casing), which flags
nothing: a line typed without capitals is read with the training text's capitals before it is translated.
Beside them it records how long the training sentences were, in tokens (``lengths``: :func:`token_lengths`): a line
longer than any source the model learned from is translated as one sentence and said so (translate's note).
Plain JSON-able values: model files store the check (``Translator.source_check``), and neither side needs a model.
A model file from before the word profile has only the first part, and keeps it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import islice

from text_attn.core.casing import WORD, learn_casing, valid_casing

# a profile of a few thousand trigrams is settled long before this; it keeps a WMT-sized corpus from costing minutes
SAMPLE_LINES = 200_000
TRIGRAMS = 2000  # the profile's size: more changed the flagged fractions by under 0.5% on Multi30k, and cost room
# nats of mean log-probability below the val lines' 1st percentile: on Multi30k it brings German val lines flagged from
# 1% to 0.1%; a greeting or a question ("Hallo", "Wo ist der Bahnhof?") is still flagged: the corpus describes pictures
MARGIN = 0.5
WORDS = (
    50_000  # the word profile's most: Multi30k's German side has 18,500 words; the rest of a larger corpus's is rare
)
LANGUAGES = {"de": "German", "en": "English", "fr": "French", "cs": "Czech"}  # Multi30k's, for the notes
FLAGGED = 0.02  # at most this share of the val lines is flagged by the two parts together


def trigrams(line: str) -> list[str]:
    """The character trigrams of ``line``, lowercased, whitespace runs as one space, padded by a space each side."""
    text = f" {' '.join(line.lower().split())} "
    return [text[i : i + 3] for i in range(len(text) - 2)]


def source_check(train: Iterable[str], val: Sequence[str], lang: str | None = None) -> dict | None:
    """The check from the training source lines (the first ``SAMPLE_LINES`` of them) and the validation source lines
    that set its threshold (None when either has no text). ``lang``: the source language's code, for messages."""
    train = list(islice(train, SAMPLE_LINES))
    counts = Counter(g for line in train for g in trigrams(line))
    if not counts or not val:
        return None
    total = sum(counts.values())
    kept = counts.most_common(TRIGRAMS)
    check = {
        "logp": {g: round(math.log(n / total), 3) for g, n in kept},
        # a trigram outside the profile: a tenth of the rarest kept one's probability
        "floor": round(math.log(kept[-1][1] / total / 10), 3),
    }
    scored = [(line_score(check, line), line) for line in val]  # each val line scored once
    check["threshold"] = round(sorted(score for score, _ in scored)[len(scored) // 100] - MARGIN, 3)
    words = word_profile(train)
    if words is not None:
        other = [line for score, line in scored if score >= check["threshold"]]  # not flagged already
        allowed = int(len(val) * FLAGGED) - (len(val) - len(other))
        surprise = sorted(word_score(words, line) for line in other)
        # the score that at most `allowed` of those lines exceed (none: the highest)
        # rounded up: a threshold rounded below a line's score would flag it too
        words["threshold"] = math.ceil(surprise[-1 - max(allowed, 0)] * 1000) / 1000 if surprise else 1e9
        check["words"] = words
    casing = learn_casing(train)
    if casing is not None:
        check["casing"] = casing
    return {**check, **({"lang": lang} if lang else {})}


def words_of(line: str) -> list[str]:
    """The words of ``line``, lowercased (numbers and punctuation are left out: they say nothing of its world)."""
    return WORD.findall(line.lower())


def word_profile(train: Sequence[str]) -> dict | None:
    """Each training word's log-probability, add-half smoothed, and the floor for a word never seen (None: no words)."""
    counts = Counter(w for line in train for w in words_of(line))
    if not counts:
        return None
    total = sum(counts.values()) + 0.5 * (len(counts) + 1)
    return {"logp": {w: round(math.log((n + 0.5) / total), 3) for w, n in counts.most_common(WORDS)},
            "floor": round(math.log(0.5 / total), 3)}  # fmt: skip


def word_score(words: dict, line: str) -> float:
    """The mean surprisal (nats) of the words of ``line`` under a :func:`word_profile` (higher: less like the training
    text; 0 for a line without words)."""
    found = words_of(line)
    logp, floor = words["logp"], words["floor"]
    return -sum(logp.get(w, floor) for w in found) / len(found) if found else 0.0


def unseen_words(check: dict | None, line: str) -> list[str]:
    """The words of ``line`` that the training source text of ``check`` (a :func:`source_check`) never has: each once
    (compared lowercased), as typed, in order. A subword or character model translates such a word from its pieces: a
    guess (the bundled Transformer, whose picture descriptions never say "Regenwald", reads it as "rain"). [] where the
    check has no word profile, or a full one (``WORDS`` words: a word beyond it may be rare rather than unseen)."""
    words = (check or {}).get("words")
    if not isinstance(words, dict) or len(words["logp"]) >= WORDS:
        return []
    found: dict[str, str] = {}
    for m in WORD.finditer(line):
        found.setdefault(m.group().lower(), m.group())
    return [typed for low, typed in found.items() if low not in words["logp"]]


def unseen_words_line(words: list[str] | None) -> str | None:
    """The line under a translation whose input held :func:`unseen_words` (``translate --html``, a notebook's
    translations; attention-serve's page writes the same), or None."""
    if not words:
        return None
    its = "its" if len(words) == 1 else "their"
    return f"not in the text the model learned from, translated from {its} pieces (a guess): {', '.join(words)}"


def valid_check(check: object) -> bool:
    """Whether ``check`` (read from a model file) is what :func:`source_check` makes (with or without its words)."""
    number = (int, float)
    words = check.get("words") if isinstance(check, dict) else None
    casing = check.get("casing") if isinstance(check, dict) else None
    return (
        isinstance(check, dict)
        and isinstance(check.get("logp"), dict)
        and all(isinstance(g, str) and isinstance(v, number) for g, v in check["logp"].items())
        and isinstance(check.get("floor"), number)
        and isinstance(check.get("threshold"), number)
        and isinstance(check.get("lang", ""), str)
        and isinstance(check.get("about", ""), str)
        and (
            words is None
            or isinstance(words, dict)
            and isinstance(words.get("logp"), dict)
            and all(isinstance(w, str) and isinstance(v, number) for w, v in words["logp"].items())
            and isinstance(words.get("floor"), number)
            and isinstance(words.get("threshold"), number)
        )
        and (casing is None or valid_casing(casing))
        and valid_lengths(check.get("lengths"))
    )


def token_lengths(pairs: Iterable[tuple[Sequence, Sequence]]) -> dict[str, int] | None:
    """The training pairs' token lengths as a model file records them: each side's longest and 99th percentile
    (None: no pairs). ``translate`` says when an input is longer than every training source, and caps its search."""
    src, tgt = [], []
    for s, t in pairs:
        src.append(len(s))
        tgt.append(len(t))
    if not src:
        return None
    src.sort()
    tgt.sort()
    p99 = min(len(src) - 1, math.ceil(0.99 * len(src)) - 1)  # the length 99% of the pairs are at most
    return {"source_max": src[-1], "source_p99": src[p99], "target_max": tgt[-1], "target_p99": tgt[p99]}


# a model file without the record of its training sentences' lengths (:func:`token_lengths`; before 2026-12): inputs
# longer than this many source tokens are taken as longer than any it learned from. The bundled models' longest
# Multi30k training source is 54 subword tokens (99%: 32); a sentence of 100 is rare in any corpus
LONG_INPUT = 100


def longest_source(lengths: dict[str, int] | None) -> int:
    """The most source tokens of an input the model learned from: the longest training source where ``lengths``
    records it, else LONG_INPUT."""
    return lengths["source_max"] if lengths else LONG_INPUT


def output_cap(n_tokens: int, lengths: dict[str, int] | None) -> int:
    """The most output tokens a source of ``n_tokens`` (its end not counted) is searched to when no cap is given, in
    ``translate`` and in validation alike: 2 x (its tokens + 1) + 10; for an input longer than every training source
    (``lengths``: :func:`token_lengths`' record; None: longer than LONG_INPUT), at most 2 x the longest training
    target + 10 (None: the cap of a LONG_INPUT-token input): a 669-token line was searched to 1,350 steps, 57 s and
    2.8 GB, for the 25 words a cap of 80 gives too."""
    own = (n_tokens + 1) * 2 + 10
    if n_tokens <= longest_source(lengths):
        return own
    return min(own, lengths["target_max"] * 2 + 10 if lengths else (LONG_INPUT + 1) * 2 + 10)


def valid_lengths(lengths: object) -> bool:
    """Whether ``lengths`` (read from a model file) is what :func:`token_lengths` makes, or absent (a file from before
    2026-12: the record is new)."""
    keys = {"source_max", "source_p99", "target_max", "target_p99"}
    return lengths is None or (
        isinstance(lengths, dict)
        and set(lengths) == keys
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in lengths.values())
    )


def stored(check: dict) -> dict:
    """The check as a model file keeps it: each log-probability table (trigrams, words) as two strings, its keys a
    line each and its values separated by spaces. ``torch.load(weights_only=True)`` reads a string at once, where a
    dict of Multi30k's 18,500 words costs 0.15 s of every load. :func:`restored` gives the check back as it was."""
    out = {**check, "logp": _packed(check["logp"])}
    if isinstance(check.get("words"), dict):
        out["words"] = {**check["words"], "logp": _packed(check["words"]["logp"])}
    return out


def restored(data: object) -> object:
    """A check read from a model file: the tables :func:`stored` packed, unpacked; one written before that (plain
    dicts), or anything else, as it is (:func:`valid_check` judges it)."""
    if not isinstance(data, dict):
        return data
    out = {**data, "logp": _unpacked(data.get("logp"))}
    if isinstance(data.get("words"), dict):
        out["words"] = {**data["words"], "logp": _unpacked(data["words"].get("logp"))}
    return out


def _packed(table: dict[str, float]) -> dict[str, str]:
    # keys hold no line break: trigrams of text whose whitespace is one space, words of letters (WORD)
    return {"keys": "\n".join(table), "values": " ".join(map(repr, table.values()))}  # repr: the float exactly


def _unpacked(table: object) -> object:
    if not (isinstance(table, dict) and set(table) == {"keys", "values"}):
        return table  # a plain table (a file from before), or something valid_check refuses
    keys, values = table["keys"], table["values"]
    if not (isinstance(keys, str) and isinstance(values, str)):
        return table
    keys_list, values_list = (keys.split("\n") if keys else []), values.split()
    try:
        numbers = [float(v) for v in values_list]
    except ValueError:
        return table
    return dict(zip(keys_list, numbers, strict=True)) if len(keys_list) == len(numbers) else table


def line_score(check: dict, line: str) -> float:
    """The mean trigram log-probability of ``line`` under the check's profile (higher: more like its training text)."""
    grams = trigrams(line)
    logp, floor = check["logp"], check["floor"]
    return sum(logp.get(g, floor) for g in grams) / max(len(grams), 1)


def unlike_language(check: dict, lines: Iterable[str]) -> int:
    """How many of ``lines`` the check's language part flags. Its word part is left out: a corpus of another world (a
    clinic's, news) in the language the model reads is not another language."""
    return sum(line_score(check, line) < check["threshold"] for line in lines)


def unlike_source(check: dict, line: str) -> bool:
    """Whether ``line`` looks unlike the training source text of ``check`` (a :func:`source_check`): another language,
    or words its training text rarely or never had."""
    if line_score(check, line) < check["threshold"]:
        return True
    words = check.get("words")
    return words is not None and word_score(words, line) > words["threshold"]
