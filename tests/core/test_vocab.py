"""Vocabulary build, encode/decode; the offline tokenizer."""

import pytest

from text_attn.core.vocab import SPECIALS, Vocabulary, tokenize


def test_build_orders_by_frequency_and_applies_min_freq_and_max_size():
    sents = [["b", "a", "a"], ["c", "a", "b"], ["d"]]
    v = Vocabulary.build(sents)
    assert v.itos == [*SPECIALS, "a", "b", "c", "d"]
    assert Vocabulary.build(sents, min_freq=2).itos == [*SPECIALS, "a", "b"]
    assert Vocabulary.build(sents, max_size=5).itos == [*SPECIALS, "a"]


def test_encode_decode_with_specials_and_unknowns():
    v = Vocabulary.build([["the", "cat", "sat"]])
    ids = v.encode(["the", "dog", "sat"], bos=True, eos=True)
    assert ids == [v.bos_id, v.stoi["the"], v.unk_id, v.stoi["sat"], v.eos_id]
    assert v.decode(ids) == ["the", "<unk>", "sat"]
    assert v.decode(ids + [v.stoi["cat"]]) == ["the", "<unk>", "sat"]  # stops at eos
    assert v.decode([v.pad_id, v.stoi["cat"]], strip_special=False) == ["<pad>", "cat"]
    assert v.decode([v.bos_id, v.stoi["cat"], v.pad_id, v.stoi["sat"]]) == ["cat", "sat"]  # pad and bos dropped
    assert v.unknown(["the", "dog"]) == ["dog"]


def test_invalid_vocabularies_are_rejected():
    with pytest.raises(ValueError, match="special"):
        Vocabulary(["a", "b"])
    with pytest.raises(ValueError, match="unique"):
        Vocabulary([*SPECIALS, "a", "a"])


def test_tokenize_offline():
    assert tokenize("Don't stop, it's 3.5 km!") == ["don't", "stop", ",", "it's", "3.5", "km", "!"]
    assert tokenize("Ein Mann läuft.", lower=False) == ["Ein", "Mann", "läuft", "."]


def test_a_vocabulary_is_stored_as_one_string_and_read_back_from_either_form():
    v = Vocabulary([*SPECIALS, "▁Mann", "a b", "", "ü"])
    assert v.to_dict() == {"lines": "<pad>\n<bos>\n<eos>\n<unk>\n▁Mann\na b\n\nü"}
    assert Vocabulary.from_dict(v.to_dict()) == v
    assert Vocabulary.from_dict({"tokens": v.itos}) == v  # a file written before the one string
    broken = Vocabulary([*SPECIALS, "line\nbreak", "x"])  # a token holding a line break stays a list
    assert broken.to_dict() == {"tokens": broken.itos} and Vocabulary.from_dict(broken.to_dict()) == broken
