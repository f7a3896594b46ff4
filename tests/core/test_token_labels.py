"""How tokens are labelled where people read them (text_attn.core.token_labels): SentencePiece's and subword-nmt's
pieces shown as the words they spell, a word's later pieces marked; whole words, the dates task's characters and
special tokens as they are (the grids' axes: tests/text/test_plots.py)."""

from __future__ import annotations

import pytest

from text_attn.core.token_labels import token_labels

CASES = [
    # the bundled models' pieces: the mark dropped, "sche" goes on "Bü", "." after a word is punctuation
    (["▁Die", "▁Bü", "sche", "▁sind", "▁grün", ".", "<eos>"], ["Die", "Bü", "·sche", "sind", "grün", ".", "<eos>"]),
    (["▁The", "▁n", "urs", "es", "."], ["The", "n", "·urs", "·es", "."]),
    (["▁is", "n", "'", "t", "<0xC5>", "<0x9F>"], ["is", "·n", "'", "·t", "<0xC5>", "<0x9F>"]),  # byte pieces as are
    (["▁", "(", "▁a", "▁1", "2"], ["▁", "(", "a", "1", "·2"]),  # a lone "▁" piece stays visible
    (["Bü@@", "sche", "sind", "gr@@", "ün", "."], ["Bü", "·sche", "sind", "gr", "·ün", "."]),  # subword-nmt BPE
    (["a", "dog", "runs", "<eos>"], ["a", "dog", "runs", "<eos>"]),  # whole words: as they are
    (["1", "9", "▁", "0", "3"], ["1", "9", "▁", "0", "3"]),  # dates' characters, "▁" a space: as they are
    (["<unk>", "▁Haus"], ["<unk>", "Haus"]),
    ([], []),
]


@pytest.mark.parametrize(("tokens", "labels"), CASES)
def test_pieces_are_labelled_as_the_words_they_spell(tokens, labels):
    assert token_labels(tokens) == labels
    assert token_labels(labels) == labels  # labelled twice: the same (a drawing may label labels)
