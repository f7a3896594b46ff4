"""Vocabulary and an offline tokenizer.

The vocabulary maps tokens to ids with four special tokens at fixed ids (pad=0, bos=1, eos=2, unk=3),
so padding masks and decoding never need to look the ids up. It is saved as JSON, never pickled.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)

# Words (with inner apostrophes/hyphens, e.g. "don't", "well-known"), numbers, or any single other
# non-space character (punctuation). Needs no downloaded data, unlike nltk.word_tokenize.
_TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['\-][^\W_]+)*|[^\w\s]|_", re.UNICODE)


def tokenize(text: str, lower: bool = True) -> list[str]:
    """Split a sentence into word and punctuation tokens, offline."""
    if lower:
        text = text.lower()
    return _TOKEN_RE.findall(text)


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
