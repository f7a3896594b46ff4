"""How text becomes tokens and back, the way each task tokenizes: ``word`` (the offline regex tokenizer), ``char``
(characters; a space is the visible token SPACE) or ``subword`` (a SentencePiece model learned from the training
side: text keeps its case and punctuation, translation.subwords). Shared by the data module and the translator; no
Lightning."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from text_attn.core.vocab import Vocabulary, marks_split_off, tokenize
from text_attn.translation.subwords import Subwords

SPACE = "▁"  # the visible token for a space in `dates` sources
CHAR_TASKS = ("dates",)  # tasks whose tokens are characters
MODES = ("word", "char", "subword")


def tokenize_text(text: str, mode: str, lower: bool = True, split_marks: bool = False) -> list[str]:
    """User input -> tokens the way a task tokenizes: ``word`` (regex tokenizer; ``split_marks``: before
    2026-12-02's) or ``char``."""
    if mode == "char":
        text = " ".join(text.split())
        return list((text.lower() if lower else text).replace(" ", SPACE))
    return tokenize(text, lower=lower, split_marks=split_marks)


def detokenize(tokens: Sequence[str], mode: str) -> str:
    return "".join(tokens).replace(SPACE, " ") if mode == "char" else " ".join(tokens)


@dataclass
class TextCodec:
    """Text <-> tokens for one model: the mode, lowercasing (word and char), the subword model (subword), and for a
    word model trained before 2026-12-02 ``split_marks``: its text tokenized as then, combining marks split off
    (text_attn.core.vocab.marks_split_off tells such a model by its vocabularies)."""

    mode: str = "word"
    lower: bool = True
    subwords: Subwords | None = None
    split_marks: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown tokenizer {self.mode!r}; known: {', '.join(MODES)}")
        if (self.mode == "subword") != (self.subwords is not None):
            raise ValueError("the subword tokenizer needs its subword model, and only it has one")
        if self.split_marks and self.mode != "word":
            raise ValueError("split_marks is the word tokenizer's")

    def encode(self, text: str) -> list[str]:
        if self.subwords is not None:
            return self.subwords.encode(" ".join(text.split()))  # one space between words: decode gives it back
        return tokenize_text(text, self.mode, self.lower, self.split_marks)

    def decode(self, tokens: Sequence[str]) -> str:
        if self.subwords is not None:
            return self.subwords.decode(tokens)
        return detokenize(tokens, self.mode)

    def words(self, tokens: Sequence[str]) -> list[str]:
        """The units the tutorials' BLEU counts: lowercased words and punctuation (of the decoded text, for subwords);
        characters for ``char`` (a date's BLEU is over its characters)."""
        if self.mode == "char":
            return list(tokens)
        if self.mode == "word":
            return [t.lower() for t in tokens]
        return tokenize(self.decode(tokens), lower=True)

    # --- in a model file --------------------------------------------------------------------------------------------
    def metadata(self) -> dict:
        data = {"tokenizer": self.mode, "lower": self.lower, **({"split_marks": True} if self.split_marks else {})}
        if self.subwords is not None:
            data["subword_model"] = self.subwords.to_tensor()  # (N,) uint8: the SentencePiece model's bytes
        return data

    @classmethod
    def from_metadata(cls, data: dict, vocabularies: tuple[Vocabulary, ...] = ()) -> TextCodec:
        """The codec a model file's (or a checkpoint's) metadata names; a word model's files from before 2026-12-02
        say nothing of ``split_marks``: it is read off its ``vocabularies``."""
        model = data.get("subword_model")
        subwords = Subwords.from_tensor(model) if model is not None else None
        mode = data.get("tokenizer", "word")
        split = data.get("split_marks")
        if split is None:
            split = mode == "word" and marks_split_off(*vocabularies)
        return cls(mode, bool(data.get("lower", True)), subwords, bool(split))
