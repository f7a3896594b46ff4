"""Content words and function words: the split the faithfulness results are reported by (issue 73).

The list the project ships is :data:`FUNCTION_WORDS`, hand-written from English's closed word classes:

- articles, determiners and quantifiers (a, the, this, each, some, many, ...),
- pronouns, possessives and indefinite pronouns (he, its, themselves, someone, nothing, ...),
- wh-words (who, which, where, how, ...),
- prepositions and verb particles (of, on, in, with, over, down, ...),
- conjunctions and subordinators (and, or, because, while, than, ...),
- auxiliaries, copulas and modals in every form (is, was, been, has, did, can, would, ...),
- negation, contraction pieces and the infinitive "to" (not, n't, 's, 're, ...),
- a few deictic and degree adverbs (here, there, very, too, also, just, ...).

Everything else is a content word: nouns, main verbs, adjectives, most adverbs, and numerals ("two dogs": a count is
what a photo shows, so "one", "two", "3" are content). Punctuation (a token with no letter or digit) and special tokens
in angle brackets (``<eos>``, ``<unk>``, ``<pad>``, ``<bos>``, ``<s>``, ``</s>``) count as function words: they carry
no content of the input. Words are lower-cased first, and subword marks are stripped (SentencePiece's leading "▁",
BPE's trailing "@@"); a fragment of a longer word that is not itself on the list counts as content. In a sequence of
subword pieces (:func:`piece_kinds`) each piece takes the kind of the whole word it is part of: the "on" of
"▁Bo st on" is Boston's, a content word. An apostrophe (' or ’) inside a word joins it (the bundled translators have no
"'s" or "n't" piece: "isn't" is "▁is n ' t"), and a word with one is of its head's kind unless it ends in "n't": it's
and they're are function words, man's a content word.
"""

from __future__ import annotations

from typing import Literal

WordKind = Literal["function", "content"]

_DETERMINERS = """a an the this that these those each every either neither some any no all both another other such
what which whose much many few several more most less least own enough"""
_PRONOUNS = """i me my mine myself you your yours yourself yourselves he him his himself she her hers herself it its
itself we us our ours ourselves they them their theirs themselves someone somebody something anyone anybody anything
everyone everybody everything nobody nothing none who whom whoever whatever when where why how"""
_PREPOSITIONS = """about above across after against along alongside amid among around as at before behind below beneath
beside besides between beyond by down during except for from in inside into near of off on onto out outside over past
since through throughout to toward towards under underneath until up upon via with within without"""
_CONJUNCTIONS = """and or but nor so yet because although though if unless while whereas whether than then"""
_AUXILIARIES = """be am is are was were been being have has had having do does did doing will would shall should can
could may might must ought"""
_PARTICLES = """not n't 's 're 've 'll 'd 'm"""
_ADVERBS = """here there very too also just only even again still now ever quite rather almost"""

FUNCTION_WORDS: frozenset[str] = frozenset(
    " ".join((_DETERMINERS, _PRONOUNS, _PREPOSITIONS, _CONJUNCTIONS, _AUXILIARIES, _PARTICLES, _ADVERBS)).split()
)


def _bare(word: str) -> str:
    """The word as the list spells it: lower case, without subword marks."""
    word = word.strip().lower().replace("’", "'")
    if word.startswith("▁"):  # SentencePiece: the piece starts a word
        word = word[1:]
    if word.endswith("@@"):  # subword-nmt BPE: the piece continues into the next
        word = word[:-2]
    return word


def word_kind(word: str) -> WordKind:
    """``"function"`` or ``"content"`` for one output word (see the module docstring for the list and the rules)."""
    if _apart(word):  # punctuation or an empty piece; <eos>, <unk>, <pad>, <bos>, <s>, </s>
        return "function"
    bare = _bare(word)
    if bare in FUNCTION_WORDS or bare.endswith("n't"):  # "isn't", "don't", "can't"
        return "function"
    head = bare.split("'")[0]
    return "function" if head != bare and head in FUNCTION_WORDS else "content"  # it's, they're; not man's


def piece_kinds(tokens: list[str]) -> list[WordKind]:
    """Each token's kind, a subword piece taking its whole word's (``["▁Bo", "st", "on", "▁in"]``: Boston is
    content, so all three of its pieces are; "in" is function). SentencePiece pieces (the sequence has a piece
    starting with "▁") join a word until the next "▁"; BPE pieces ending with "@@" join the next. Punctuation and
    special tokens (``<eos>``, ``<unk>``) are words of their own, but for an apostrophe between two pieces of one word
    ("▁man ' s": man's), and so are all tokens of a sequence of whole words: :func:`word_kind` of themselves."""
    sentencepiece = any(tok.startswith("▁") for tok in tokens)
    inner = {i for i in range(1, len(tokens) - 1) if _inner_apostrophe(tokens, i, sentencepiece)}
    words: list[list[int]] = []  # token indices per word
    for i, tok in enumerate(tokens):
        alone = _apart(tok) and i not in inner  # punctuation or <...>: never part of a word
        prev = tokens[i - 1] if i else None
        if prev is None or alone or (_apart(prev) and i - 1 not in inner):
            joins = False
        elif i in inner or i - 1 in inner:  # "▁man ' s": the apostrophe and the piece after it join the word
            joins = True
        elif sentencepiece:
            joins = not tok.startswith("▁")
        else:
            joins = prev.endswith("@@")
        if joins:
            words[-1].append(i)
        else:
            words.append([i])
    kinds: list[WordKind] = ["content"] * len(tokens)
    for word in words:
        kind = word_kind("".join(_bare(tokens[i]) for i in word))
        for i in word:
            kinds[i] = kind
    return kinds


def _inner_apostrophe(tokens: list[str], i: int, sentencepiece: bool) -> bool:
    """Whether tokens[i] is an apostrophe piece inside a word: a word piece before it and one continuing after it
    ("▁is n ' t"; BPE "is@@ n@@ '@@ t"), not a quote mark opening or closing a phrase ("▁'", "dog ' ▁on")."""
    tok, prev, after = tokens[i], tokens[i - 1], tokens[i + 1]
    if _bare(tok) != "'" or _apart(prev) or _apart(after):
        return False
    if sentencepiece:
        return not tok.startswith("▁") and not after.startswith("▁")
    return prev.endswith("@@") and tok.endswith("@@")


def _apart(token: str) -> bool:
    """Punctuation (no letter or digit), an empty piece, or a special token in angle brackets: never part of a word,
    and a function word by itself."""
    bare = _bare(token)
    return not any(ch.isalnum() for ch in bare) or (bare.startswith("<") and bare.endswith(">"))
