"""Vocabulary and an offline tokenizer.

The vocabulary maps tokens to ids with four special tokens at fixed ids (pad=0, bos=1, eos=2, unk=3),
so padding masks and decoding never need to look the ids up. It is saved as JSON, never pickled.
"""

from __future__ import annotations

import numbers
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)

# Words (with inner apostrophes/hyphens, e.g. "don't", "don’t", "well-known"), numbers, or any single other
# non-space character (punctuation). Needs no downloaded data, unlike nltk.word_tokenize. A word's characters are
# letters, digits and the marks that combine with them (\p{M}: Devanagari's and Thai's vowel signs, Arabic's shadda,
# an accent typed apart from its letter) and the zero-width (non-)joiners of Persian and emoji: `re` has no class of
# marks, and with it "आदमी" was "आदम" + "ी" and a captioner dropped the vowel sign as punctuation. For text
# without marks (English, German, French, Czech as typed) the tokens are those of `[^\W_]`, letter for letter.
_WORD_CHARS = r"\p{L}\p{N}\p{M}\u200c\u200d"
# str.isspace's characters, as `re`'s \s matches them (the `regex` module's \s leaves out \x1c-\x1f)
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# punctuation: one character neither of a word nor a space (the `regex` module's \w would also take ⓐ and ‿)
# a word's inner apostrophe: ASCII or typographic (’, the default of iOS and macOS keyboards: "aujourd’hui", "don’t")
_TOKEN = rf"\d+(?:[.,]\d+)+|[{_WORD_CHARS}]+(?:['’\-][{_WORD_CHARS}]+)*|[^{_WORD_CHARS}{_SPACE}]"
_compiled: list = []  # the patterns, compiled at first use (the `regex` module: 17 ms of imports a command may skip)
# A web address (a scheme's "://", or "www.") or an e-mail address: one token, typed as is (case too), in every
# language; split apart, "http://example.com/a-b" was 9 tokens and came back "http://example. com/a-b". A URL runs to
# the next space, quote or unpaired bracket, less the punctuation that ends a sentence or a clause ("see
# http://x.fr." ends in "." of its own); one pair of brackets may stand inside it (Wikipedia's "a_(b)").
_URL_CHAR = rf"[^{_SPACE}<>\"«»“”‘’()\[\]{{}}]"
_URL_START = rf"[A-Za-z][A-Za-z0-9+\-]*://|[Ww][Ww][Ww]\.(?=[{_WORD_CHARS}])"  # a scheme's "://", or "www." and a word
_URL = rf"(?:{_URL_START})(?:{_URL_CHAR}|\({_URL_CHAR}*\))+(?<![.,;:!?'…])"
_LABEL = rf"[{_WORD_CHARS}](?:[{_WORD_CHARS}\-]*[{_WORD_CHARS}])?"  # a domain name's part, no hyphen at its ends
_EMAIL = rf"[{_WORD_CHARS}](?:[{_WORD_CHARS}.%+\-]*[{_WORD_CHARS}])?@{_LABEL}(?:\.{_LABEL})+"
_ADDRESS = rf"{_URL}|{_EMAIL}"
# The tokenizer before 2026-12-02 (`re`'s \w): every combining mark and zero-width (non-)joiner a token of its own
# ("आदमी" was "आदम" + "ी"). Word vocabularies built then hold those tokens; the models read text with it still
# (:func:`marks_split_off`), so an old model reads its language as it was trained to.
_SPLIT_MARKS = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['\-][^\W_]+)*|[^\w\s]|_")
# what --model-info says of a model that reads text so (translate and caption)
SPLIT_MARKS_INFO = "split at combining marks: trained before 2026-12-02; retrain for today's tokens"
# a vocabulary's tokens a line each: one made of marks (or a non-joiner) alone, and a mark or joiner beside a letter
_ALONE = r"(?m)^[\p{M}\u200c]+$"
_BESIDE = r"[\p{L}\p{N}][\p{M}\u200c\u200d]|[\p{M}\u200c\u200d][\p{L}\p{N}]"


def tokenize(text: str, lower: bool = True, split_marks: bool = False) -> list[str]:
    """Split a sentence into word and punctuation tokens, offline. The text is read in NFC first (an accent typed as
    its own character, as macOS's file names and some keyboards give it, is one letter with its base): training,
    translating and scoring read "řídí" alike however it was typed. A URL or an e-mail address is one token as typed,
    not lowercased (``_ADDRESS``). ``split_marks``: the tokenizer of before 2026-12-02 as it was, which split
    combining marks off as tokens of their own and read text as typed, not in NFC (a model whose vocabulary was built
    by it: :func:`marks_split_off`)."""
    if split_marks:  # as it was: not in NFC either (an NFD accent or a Hindi nukta letter stays apart, as trained)
        return _SPLIT_MARKS.findall(text.lower() if lower else text)
    text = unicodedata.normalize("NFC", text)
    if not _compiled:
        import regex

        _compiled.extend((regex.compile(_TOKEN), regex.compile(_ADDRESS)))
    words, addresses = _compiled
    if not _may_hold_address(text):  # no address can be there: the one scan
        return words.findall(text.lower() if lower else text)
    tokens, start = [], 0
    for found in addresses.finditer(text):  # the text between addresses as before; each address whole, as typed
        before = text[start : found.start()]
        tokens += words.findall(before.lower() if lower else before)
        tokens.append(found.group())
        start = found.end()
    rest = text[start:]
    return tokens + words.findall(rest.lower() if lower else rest)


def _may_hold_address(text: str) -> bool:
    return "@" in text or "://" in text or "www." in text.lower()


def addresses(text: str) -> list[str]:
    """The web and e-mail addresses in ``text``, as typed (the tokens :func:`tokenize` keeps whole)."""
    if not _may_hold_address(text):
        return []
    tokenize("")  # compiles the patterns once
    return [found.group() for found in _compiled[1].finditer(unicodedata.normalize("NFC", text))]


def lost_addresses(source: str, output: str) -> list[str]:
    """The web and e-mail addresses typed in ``source`` that ``output`` does not hold as typed: what a translation
    lost (a model that learned from text without addresses garbles them: 'http://www.example.com/a-b' came back
    'high-fielding, who is motion' from the bundled Transformer)."""
    return [found for found in addresses(source) if found not in output]


def marks_split_off(*vocabularies: Vocabulary) -> bool:
    """Whether word vocabularies were built by the tokenizer of before 2026-12-02 (:func:`tokenize`'s
    ``split_marks``): one holds a token made of combining marks alone (Hindi's "ी", "ा"), and none a mark or
    zero-width joiner inside a word, which that tokenizer never made and today's makes from every such text (a token
    of marks alone, today's makes only from a stray mark after a space)."""
    lines = "\n".join(t for v in vocabularies for t in v.itos)
    if lines.isascii():  # every English or synthetic vocabulary: no regex to import
        return False
    import regex

    return regex.search(_ALONE, lines) is not None and regex.search(_BESIDE, lines) is None


def is_word(token: str) -> bool:
    """Whether a token holds a letter or a digit: a word or a number, not punctuation alone."""
    return any(ch.isalnum() for ch in token)


def vocab_sizes(**sizes: object) -> tuple[int, ...]:
    """A network config's vocabulary sizes, checked, as plain ints (a numpy one went into the model file as it was, and
    its load, weights_only, refused the file); ValueError / TypeError for a size no Vocabulary has (at least its
    specials): ``Seq2SeqConfig(src_vocab_size=0, ...)`` built, and failed in torch's embedding lookup (IndexError)."""
    for name, size in sizes.items():
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):  # numpy's integers are integers
            raise TypeError(f"{name} must be an integer (len(vocabulary)), got {size!r}")
        if size < len(SPECIALS):
            raise ValueError(f"{name} must be at least {len(SPECIALS)} (the specials {', '.join(SPECIALS)} and the "
                             f"words: len(vocabulary)), got {size}")  # fmt: skip
    return tuple(int(size) for size in sizes.values())


class Vocabulary:
    """Token <-> id mapping with special tokens pad/bos/eos/unk at ids 0..3."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[:4]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with the special tokens {SPECIALS}")
        if len(set(tokens)) != len(tokens):
            raise ValueError("vocabulary tokens must be unique")
        self.itos: list[str] = list(tokens)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        min_freq: int = 1,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Build from tokenized sentences: most frequent first (ties alphabetical, so builds repeat).

        `max_size` counts the special tokens too.
        """
        counts = Counter(tok for toks in token_lists for tok in toks)
        for special in SPECIALS:
            counts.pop(special, None)
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls([*SPECIALS, *words])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.itos == other.itos

    def encode(self, tokens: Sequence[str], bos: bool = False, eos: bool = True) -> list[int]:
        ids = [self.stoi.get(t, self.unk_id) for t in tokens]
        return ([self.bos_id] if bos else []) + ids + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Ids -> tokens. With `strip_special`, stops at the first eos and drops pad/bos."""
        out = []
        for i in ids:
            i = int(i)
            if strip_special:
                if i == self.eos_id:
                    break
                if i in (self.pad_id, self.bos_id):
                    continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out

    def extended(self, other: Vocabulary) -> Vocabulary:
        """This vocabulary's tokens at their own ids, then ``other``'s tokens that it lacks, in ``other``'s order (most
        frequent first, for a built one). A model trained with this vocabulary keeps every id; fine-tuning it on data
        whose vocabulary is ``other`` adds rows for the new words (:func:`text_attn.core.training.grow_rows`)."""
        return Vocabulary([*self.itos, *(t for t in other.itos if t not in self.stoi)])

    def unknown(self, tokens: Sequence[str]) -> list[str]:
        """The tokens of `tokens` that this vocabulary does not know."""
        return [t for t in tokens if t not in self.stoi]

    # --- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The tokens as one string, a line each (``torch.load(weights_only=True)`` reads one string at once, where a
        list of 8,000 strings costs 0.05 s); as a list where a token holds a line break."""
        if any("\n" in t for t in self.itos):
            return {"tokens": self.itos}
        return {"lines": "\n".join(self.itos)}

    @classmethod
    def from_dict(cls, data: dict) -> Vocabulary:
        """A vocabulary from :meth:`to_dict`'s value, or from the list of tokens files written before it made one
        string of them."""
        return cls(data["lines"].split("\n") if "lines" in data else data["tokens"])


def first_difference(saved: Vocabulary, own: Vocabulary, unit: str = "token") -> str:
    """Where two vocabularies first differ, for a resume's refusal (of the same size they read alike: "69 tokens"
    and "69 tokens"): '; token 12 is "dog" there, "cat" here' (``unit``: what an entry is called); "" if one is the
    other's start."""
    from text_attn.core.safe_files import inert  # the data's words, printed: no terminal control characters

    for i, (a, b) in enumerate(zip(saved.itos, own.itos, strict=False)):
        if a != b:
            return f'; {unit} {i} is "{inert(a)}" there, "{inert(b)}" here'
    return ""
