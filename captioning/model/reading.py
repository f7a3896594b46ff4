"""Reading a caption someone wrote: how likely the model finds each of its words for a photo, and where it looks for
each (``caption --given``, :meth:`captioning.model.captioner.Captioner.read_features`).

The caption is teacher-forced through the search protocol (``init_state`` / ``step``), the very steps greedy and beam
search take, so one decoder and an ensemble read alike, and reading the model's own caption gives back the search's
attention and log-probability (tested). Its words are taken as the training captions were (:func:`caption_tokens`):
lowercased, punctuation dropped; a word the vocabulary lacks is read as ``<unk>``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from text_attn.core.decoding import evaluating, read_sequence
from text_attn.core.vocab import Vocabulary, is_word, tokenize


def caption_tokens(text: str, lower: bool = True, split_marks: bool = False) -> list[str]:
    """A raw caption -> its word tokens (lowercased unless ``lower`` is False), punctuation-only tokens dropped: how
    every caption reader takes a training caption, and how a given caption is read. ``split_marks``: the tokenizer of
    before 2026-12-02 (combining marks split off, and so dropped), for a model trained then
    (:attr:`captioning.model.captioner.Captioner.split_marks`)."""
    return [t for t in tokenize(text, lower=lower, split_marks=split_marks) if is_word(t)]


class GivenWords(NamedTuple):
    words: list[str]  # the caption's words as written (case kept), punctuation dropped
    ids: list[int]  # their vocabulary ids (lowercased; <unk> where the vocabulary lacks one)
    unknown: list[str]  # the words read as <unk>, in order, each once


def given_words(text: str, vocab: Vocabulary, split_marks: bool = False) -> GivenWords:
    """A caption as written -> its words, their ids, the words the model does not know (``split_marks``: read as a
    model trained before 2026-12-02 reads it, :func:`caption_tokens`). No words: empty lists."""
    words = caption_tokens(text, lower=False, split_marks=split_marks)
    ids = [vocab.stoi.get(w.lower(), vocab.unk_id) for w in words]
    unknown = list(dict.fromkeys(w for w, i in zip(words, ids, strict=True) if i == vocab.unk_id))
    return GivenWords(words, ids, unknown)


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
