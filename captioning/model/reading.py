"""Reading a caption someone wrote: how likely the model finds each of its words for a photo, and where it looks for
each (``caption --given``, :meth:`captioning.model.captioner.Captioner.read_features`).

The caption is teacher-forced through the search protocol (``init_state`` / ``step``), the very steps greedy and beam
search take, so one decoder and an ensemble read alike, and reading the model's own caption gives back the search's
attention and log-probability (tested). Its words are taken as the training captions were (:func:`caption_tokens`):
lowercased, typographic apostrophes read as ', punctuation dropped; a word the vocabulary lacks is read as ``<unk>``.
"""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

import torch
from torch import Tensor

from text_attn.core.decoding import evaluating, read_sequence
from text_attn.core.vocab import Vocabulary, is_word, tokenize

# Typographic single quotes read as the ASCII apostrophe (’ is iOS's and macOS's default): a French caption set written
# "aujourd’hui" and one written "aujourd'hui" build one vocabulary and score against each other, and a ‘ typed for
# the apostrophe joins its word as ' does (tokenize joins words at ' and ’, not at ‘). One character for one.
APOSTROPHES = str.maketrans({"’": "'", "‘": "'"})


def caption_tokens(text: str, lower: bool = True, split_marks: bool = False, fold: bool = True) -> list[str]:
    """A raw caption -> its word tokens (lowercased unless ``lower`` is False), typographic apostrophes read as '
    (:data:`APOSTROPHES`; ``fold`` False: as written, for a model whose vocabulary holds them), punctuation-only
    tokens dropped: how every caption reader takes a training caption, and how a given caption is read.
    ``split_marks``: the tokenizer of before 2026-12-02 (combining marks split off, and so dropped), for a model
    trained then (:attr:`captioning.model.captioner.Captioner.split_marks`), which reads apostrophes as written too."""
    if fold and not split_marks:
        text = text.translate(APOSTROPHES)
    return [t for t in tokenize(text, lower=lower, split_marks=split_marks) if is_word(t)]


def reads_apostrophes_folded(vocab: Vocabulary) -> bool:
    """Whether a caption vocabulary was built from captions read with their apostrophes folded (:data:`APOSTROPHES`):
    one holding a word with ’ or ‘ was built before the fold (2026-12-02) from captions that wrote them, and its model
    reads a given caption as written, as it did then."""
    return not any("’" in t or "‘" in t for t in vocab.itos)


def folded_vocabulary(vocab: Vocabulary) -> tuple[Vocabulary, list[str]]:
    """``vocab`` with its words written with ’ or ‘ read as the caption readers read them now (:data:`APOSTROPHES`),
    each at its own id, and the words so renamed. A model trained before the fold, started from, trains on captions
    read folded: its "cir’cle" is their "cir'cle", the word it was trained on, not a new untrained one beside it. A
    word whose folded form it holds too keeps its name (two ids cannot share one): its model reads as written."""
    names, renamed = set(vocab.itos), []
    tokens = list(vocab.itos)
    for i, token in enumerate(tokens):
        folded = token.translate(APOSTROPHES)
        if folded != token and folded not in names:
            tokens[i], names = folded, names | {folded}
            renamed.append(token)
    return (Vocabulary(tokens), renamed) if renamed else (vocab, [])


class GivenWords(NamedTuple):
    words: list[str]  # the caption's words as written (case and apostrophes kept), punctuation dropped
    ids: list[int]  # their vocabulary ids (lowercased; <unk> where the vocabulary lacks one)
    unknown: list[str]  # the words read as <unk>, in order, each once


def given_words(text: str, vocab: Vocabulary, split_marks: bool = False) -> GivenWords:
    """A caption as written -> its words, their ids, the words the model does not know (``split_marks``: read as a
    model trained before 2026-12-02 reads it, :func:`caption_tokens`; apostrophes folded where the vocabulary was
    built so, :func:`reads_apostrophes_folded`). No words: empty lists."""
    fold = reads_apostrophes_folded(vocab) and not split_marks
    read = caption_tokens(text, lower=False, split_marks=split_marks, fold=fold)
    ids = [vocab.stoi.get(w.lower(), vocab.unk_id) for w in read]
    words = _as_written(read, text) if fold else read  # "aujourd’hui" shown as typed, read as "aujourd'hui"
    unknown = list(dict.fromkeys(w for w, i in zip(words, ids, strict=True) if i == vocab.unk_id))
    return GivenWords(words, ids, unknown)


def _as_written(read: list[str], text: str) -> list[str]:
    """The words ``read`` from ``text`` with its apostrophes folded, as ``text`` writes them: the fold is one character
    for one, so each word is the same stretch of the text (in NFC, as tokenize reads it)."""
    written = unicodedata.normalize("NFC", text)
    folded, out, at = written.translate(APOSTROPHES), [], 0
    for word in read:
        at = folded.index(word, at)
        out.append(written[at : at + len(word)])
        at += len(word)
    return out


class Reading(NamedTuple):
    log_probs: Tensor  # (B, T): per photo, log p of each token given the tokens before it
    alphas: Tensor | None  # (B, T, L): the attention at each token's step (None: no tokens read)


def read_ids(model, features: Tensor, ids: list[int], bos_id: int, state: dict | None = None) -> Reading:
    """Teacher-force ``ids`` (one caption after bos; end it with eos to read the end too) over every photo's
    ``features`` (B, L, D) (text_attn.core.decoding.read_sequence), in eval mode (no dropout; a hard-attention model
    reads as it decodes), the model's mode restored after. ``state``: the photos' first state
    (:func:`first_state`), when several captions are read against them: computed once (it projects every region:
    30% of reading a 10-word caption with the bundled model). A step never changes the state it is given."""
    with evaluating(model):
        state = first_state(model, features) if state is None else state
        return Reading(*read_sequence(model, state, features.size(0), ids, bos_id))


@torch.no_grad()
def first_state(model, features: Tensor) -> dict:
    """The photos' state before the first word (features (B, L, D)), in eval mode, the model's mode restored."""
    with evaluating(model):
        return model.init_state(features)
