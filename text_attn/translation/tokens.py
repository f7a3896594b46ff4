"""How text becomes tokens and back, the way each task tokenizes: ``word`` (the offline regex tokenizer), ``char``
(characters; a space is the visible token SPACE) or ``subword`` (a SentencePiece model learned from the training
side: text keeps its case and punctuation, translation.subwords). Shared by the data module and the translator; no
Lightning."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from text_attn.core.vocab import Vocabulary, is_word, marks_split_off, tokenize
from text_attn.translation.subwords import Subwords

SPACE = "▁"  # the visible token for a space in `dates` sources
CHAR_TASKS = ("dates",)  # tasks whose tokens are characters
MODES = ("word", "char", "subword")
# typographic quotes (iOS's and macOS's default) and the acute accent typed for an apostrophe ("Peter´s"), read as
# their ASCII form by a side whose vocabulary lacks them (it read them as <unk>)
FOLDS = {"’": "'", "‘": "'", "“": '"', "”": '"', "´": "'"}


def tokenize_text(text: str, mode: str, lower: bool = True, split_marks: bool = False) -> list[str]:
    """User input -> tokens the way a task tokenizes: ``word`` (regex tokenizer; ``split_marks``: before
    2026-12-02's) or ``char``."""
    if mode == "char":
        text = " ".join(text.split())
        return list((text.lower() if lower else text).replace(" ", SPACE))
    return tokenize(text, lower=lower, split_marks=split_marks)


def detokenize(tokens: Sequence[str], mode: str, french: bool = False) -> str:
    return "".join(tokens).replace(SPACE, " ") if mode == "char" else join_words(tokens, french)


# How a word model's tokens are joined back into text as people write it (and as sacreBLEU's references are written:
# "ein mann , der lacht ." scored German's own references at sacreBLEU 25.75 / chrF 78.39, not 100). The tokenizer
# (text_attn.core.vocab) keeps a word's inner apostrophes and hyphens ("don't", "l'homme", "t-shirt") and splits off
# every other character that is not a letter, digit or mark; these rules put back the spaces those had.
_CLOSING = set(".,!?;:)]}%…»”°")  # no space before
_OPENING = set("([{¿¡«„‚$€£#")  # no space after
_APOSTROPHES = ("'", "’")
# English clitics: the tokens a corpus tokenized before (Moses: "it 's", "do n't") gives, and the word after an
# apostrophe the tokenizer split off (a curly "it’s" is "it", "’", "s")
_CLITICS = {"s", "re", "t", "ll", "ve", "d", "m"}
_CLITIC_TOKENS = {"n't", *(a + c for a in _APOSTROPHES for c in _CLITICS)}
# French elision: the word before an apostrophe that belongs to the next word ("l’homme" is "l", "’", "homme")
_ELISIONS = {"l", "d", "qu", "j", "n", "s", "c", "m", "t", "jusqu", "lorsqu", "puisqu", "quoiqu", "presqu"}
# a hyphen left hanging beside a conjunction: German's "Ein- und Ausgang", "Teller und -tassen" (de, en, fr, cs)
_SUSPENDED = {"und", "oder", "bis", "sowie", "and", "or", "et", "ou", "nebo"}
_BEFORE_COMPOUND = {'"', "”", "“", "’", ")", "]"}  # a hyphen after these joins a compound: „Stop“-Schild
# French puts a space before these, and Multi30k's French references do (train: 57 lines space one, 5 attach one:
# English quotes, a time, "???"; val: 1 of 1): 'il dit : "bonjour" !'. One space before a run ("?!", "???").
_SPACED_IN_FRENCH = {";", ":", "!", "?"}


def join_words(tokens: Sequence[str], french: bool = False) -> str:
    """A word model's tokens as written text: no space before closing punctuation (. , ! ? ; : ) ] } % and closing
    quotes) or a clitic ("n't", "'s"), none after opening brackets and quotes, an elided French article and an
    apostrophe inside a word attached on both sides, straight quotes paired (the first of a pair opens), the colon of
    a time (10:30) and a slash (and/or) attached on both sides. ``french``: a space before ; : ! ? (and none inside a
    run of them, nor before a URL's "://"), as French text writes them. ``join_words(tokenize(x), french) ==
    x.lower()`` for the lines of Multi30k's val split in de/en/fr/cs (``french`` for fr), bar a few odd lines."""
    tokens = list(tokens)
    n = len(tokens)
    glue = [False] * (n + 1)  # glue[i]: no space between tokens[i - 1] and tokens[i]
    straight = {q: [i for i, t in enumerate(tokens) if t == q] for q in ('"', "'")}  # paired in order, below
    open_low = 0  # „ or ‚ opened and not yet closed: “ and ‘ then close (German), else they open (English)

    def word(i: int) -> bool:
        return 0 <= i < n and is_word(tokens[i])

    def digits(i: int) -> bool:
        return 0 <= i < n and tokens[i].isdigit()

    for i, tok in enumerate(tokens):
        if tok == "/" or (tok == ":" and digits(i - 1) and digits(i + 1)):  # "and/or", "10:30"
            glue[i] = glue[i + 1] = True
        elif tok in _CLOSING or tok.lower() in _CLITIC_TOKENS:
            url = tok == ":" and i + 1 < n and tokens[i + 1].startswith("/")  # "http://": the scheme's, not a clause's
            spaced = french and tok in _SPACED_IN_FRENCH and (i == 0 or tokens[i - 1] not in _SPACED_IN_FRENCH)
            glue[i] = not spaced or url
        elif tok in _OPENING:
            glue[i + 1] = True
            open_low += tok in "„‚"
        elif tok in "“‘":
            if open_low:  # German: „ ... “
                glue[i], open_low = True, open_low - 1
            else:
                glue[i + 1] = True
        elif tok in _APOSTROPHES and word(i - 1) and word(i + 1) and _inside_word(tok, tokens[i - 1], tokens[i + 1]):
            glue[i] = glue[i + 1] = True
        elif tok in straight:  # a straight quote: the first of a pair opens, the second closes; one left over closes
            pos = straight[tok].index(i)
            last_unpaired = pos == len(straight[tok]) - 1 and pos % 2 == 0
            if pos % 2 == 0 and not (last_unpaired and word(i - 1)):
                glue[i + 1] = True
            else:
                glue[i] = True
        elif tok == "’":  # a closing single quote, or a plural's possessive ("the dogs’ toys")
            glue[i] = True
        elif tok == "-":
            if word(i + 1) and (i == 0 or tokens[i - 1].lower() in _SUSPENDED):  # "-ein mann", "teller und -tassen"
                glue[i + 1] = True
            elif word(i - 1) and i + 1 < n and tokens[i + 1].lower() in _SUSPENDED:  # "ein- und ausgang"
                glue[i] = True
            elif i and tokens[i - 1] in _BEFORE_COMPOUND and word(i + 1):  # „stop“-schild
                glue[i] = glue[i + 1] = True
        elif len(tok) == 1 and word(i) and i > 1 and tokens[i - 1] == "." and len(tokens[i - 2]) == 1 and word(i - 2):
            glue[i] = True  # initials: "j.p. morgan", "u.s.a."
        elif tok.endswith(_APOSTROPHES) and is_word(tok) and word(i + 1):  # an elision tokenized apart: "l' homme"
            glue[i + 1] = True
    return "".join(("" if glue[i] or not i else " ") + tok for i, tok in enumerate(tokens))


def _inside_word(apostrophe: str, before: str, after: str) -> bool:
    """Whether an apostrophe between two words belongs inside one ("l’homme", "it’s"): a curly one always (a
    closing quote comes after a word, not between two); a straight one, which the tokenizer split off only where it
    had a space beside it, before a clitic or after a French elision."""
    return apostrophe == "’" or before.lower() in _ELISIONS or after.lower() in _CLITICS


@dataclass
class TextCodec:
    """Text <-> tokens for one model: the mode, lowercasing (word and char), the subword model (subword), and for a
    word model trained before 2026-12-02 ``split_marks``: its text tokenized as then, combining marks split off
    (text_attn.core.vocab.marks_split_off tells such a model by its vocabularies). ``target_lang``: the code of the
    language a word model writes (``data.tgt_lang``), where its joining differs: French's space before ; : ! ?."""

    mode: str = "word"
    lower: bool = True
    subwords: Subwords | None = None
    split_marks: bool = False
    target_lang: str | None = None
    # side ("source", "target") -> its vocabulary's tokens (:meth:`for_vocabularies`), and what is built from them
    sides: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)
    _built: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"unknown tokenizer {self.mode!r}; known: {', '.join(MODES)}")
        if (self.mode == "subword") != (self.subwords is not None):
            raise ValueError("the subword tokenizer needs its subword model, and only it has one")
        if self.split_marks and self.mode != "word":
            raise ValueError("split_marks is the word tokenizer's")

    def for_vocabularies(self, source: Vocabulary, target: Vocabulary) -> TextCodec:
        """This codec reading each side's text with the tokens of its vocabulary (``encode``'s ``side``): a subword
        model spells a side's words from the pieces it knows (Subwords.restricted), and quotes the side lacks are
        folded (:meth:`folded`)."""
        return replace(self, sides={"source": tuple(source.itos), "target": tuple(target.itos)}, _built={})

    def folded(self, text: str, side: str | None = None) -> str:
        """``text`` with the typographic quotes (FOLDS) that ``side``'s vocabulary lacks as ASCII ones;
        ``text`` for a codec without that side."""
        if side not in self.sides:
            return text
        if ("fold", side) not in self._built:
            tokens = "\n".join(self.sides[side])
            self._built["fold", side] = str.maketrans({c: plain for c, plain in FOLDS.items() if c not in tokens})
        return text.translate(self._built["fold", side])

    def encode(self, text: str, side: str | None = None) -> list[str]:
        """``text``'s tokens; with ``side`` (a codec :meth:`for_vocabularies`) as that side reads it: its quotes
        :meth:`folded`, a subword model's pieces only those of its vocabulary."""
        text = self.folded(text, side)
        if self.subwords is not None:
            if side not in self.sides:
                return self.subwords.encode(text)  # one space between words: decode gives it back
            if ("subwords", side) not in self._built:
                self._built["subwords", side] = self.subwords.restricted(self.sides[side])
            return self._built["subwords", side].encode(text)
        if side in self.sides and self.mode == "word" and self._apart(side):
            text = text.replace("’", " ’ ")  # read as the tokenizer that built it read text
        return tokenize_text(text, self.mode, self.lower, self.split_marks)

    def _apart(self, side: str) -> bool:
        """Whether a word vocabulary has "’" only as a token of its own: built by a tokenizer that split "aujourd’hui"
        at it (as the word tokenizer did until ’ joined words, 2026-12-02; today's keeps such a word whole)."""
        if ("apart", side) not in self._built:
            tokens = self.sides[side]
            self._built["apart", side] = "’" in tokens and not any("’" in t and len(t) > 1 for t in tokens)
        return self._built["apart", side]

    def decode(self, tokens: Sequence[str]) -> str:
        if self.subwords is not None:  # SentencePiece gives back the spaces the training text had
            return self.subwords.decode(tokens)
        return detokenize(tokens, self.mode, self.target_lang == "fr")

    @property
    def lowercased(self) -> bool:
        """Whether the text it decodes is lowercase (word and char with ``lower``; subwords keep case): such a model is
        scored case-insensitively (sacreBLEU's and chrF's ``lowercase``, signature "case:lc")."""
        return self.lower and self.subwords is None

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
        if self.target_lang and self.mode == "word":  # only a word model's joining reads it
            data["target_lang"] = self.target_lang
        return data

    @classmethod
    def from_metadata(cls, data: dict, vocabularies: tuple[Vocabulary, ...] = ()) -> TextCodec:
        """The codec a model file's (or a checkpoint's) metadata names; a word model's files from before 2026-12-02
        say nothing of ``split_marks`` (it is read off its ``vocabularies``) nor of ``target_lang`` (read off the
        language pair its facts name: ``info``'s "languages" or "training_data", "... -> French")."""
        model = data.get("subword_model")
        subwords = Subwords.from_tensor(model) if model is not None else None
        mode = data.get("tokenizer", "word")
        split = data.get("split_marks")
        if split is None:
            split = mode == "word" and marks_split_off(*vocabularies)
        target = data.get("target_lang") or (_named_target(data.get("info")) if mode == "word" else None)
        return cls(mode, bool(data.get("lower", True)), subwords, bool(split), target)


def _named_target(info: object) -> str | None:
    """The code of the target language a model file's facts name (TranslationDataModule.facts writes the pair as
    "German -> English"), else None."""
    from text_attn.translation.source_check import LANGUAGES

    codes = {name: code for code, name in LANGUAGES.items()}
    for key in ("languages", "training_data"):
        pair = info.get(key) if isinstance(info, dict) else None
        if isinstance(pair, str) and " -> " in pair:
            # the first arrow's next word: the facts may go on after the pair (": 29,000 pairs", a folder's note)
            target = re.match(r"\s*(\w+)", pair.split(" -> ", 1)[1])
            return codes.get(target.group(1)) if target else None
    return None


def read_by_sides(examples: list[Any], codec: TextCodec, source: Vocabulary, target: Vocabulary) -> list[Any]:
    """A corpus's evaluation pairs (translation.pairs.Example, their sentences as written) read as ``translate`` reads
    a source: each side spelled from the tokens of its own vocabulary (:meth:`TextCodec.for_vocabularies`; the joint
    SentencePiece model split some words into pieces only the other side knew: <unk> in validation, not in
    translate). A made-up task's examples (no text) stay as they are."""
    sided = codec.for_vocabularies(source, target)

    def read(e: Any) -> Any:
        if e.src_text is None:
            return e
        return replace(e, src=sided.encode(e.src_text, "source"), tgt=sided.encode(e.tgt_text, "target"))

    return [read(e) for e in examples]
