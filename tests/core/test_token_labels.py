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
    # byte pieces that spell a character: it, then a joined mark per further byte (they showed as "<0xC5>" ...);
    # an emoji is no word's letter; bytes that spell nothing whole stay as they are
    (["▁is", "n", "'", "t", "<0xC5>", "<0x9F>"], ["is", "·n", "'", "·t", "ş", "·"]),
    (["▁mit", "▁", "<0xF0>", "<0x9F>", "<0x8E>", "<0x88>", "."], ["mit", "▁", "🎈", "·", "·", "·", "."]),
    (["<0xF0>", "<0x9F>", "<0x8E>", "<0x88>"], ["🎈", "·", "·", "·"]),
    (["▁", "<0xD9>", "<0x85>", "<0xD8>", "<0xB1>"], ["▁", "م", "·", "ر", "·"]),
    (["▁a", "<0xC5>", "<0x41>", "<0x9F>", "<0xFF>"], ["a", "<0xC5>", "A", "<0x9F>", "<0xFF>"]),
    # newer than this Python's Unicode tables (🫨, Unicode 15): shown, as the browser's newer tables show it
    (["▁mit", "<0xF0>", "<0x9F>", "<0xAB>", "<0xA8>"], ["mit", "🫨", "·", "·", "·"]),
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
