"""Vocabulary build, encode/decode; the offline tokenizer."""

import pytest

from text_attn.core.vocab import SPECIALS, Vocabulary, first_difference, marks_split_off, tokenize


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


def test_marks_stay_in_their_words_and_accents_typed_apart_are_one_letter():
    """The marks that combine with a letter (Hindi's and Thai's vowel signs, Arabic's shadda, an accent typed apart)
    were tokens of their own: "आदमी" was "आदम" + "ी", and a captioner dropped the sign as punctuation."""
    assert tokenize("एक आदमी साइकिल चलाता है।") == ["एक", "आदमी", "साइकिल", "चलाता", "है", "।"]
    assert tokenize("ผู้ชาย") == ["ผู้ชาย"]
    assert tokenize("درّاجة") == ["درّاجة"]
    nfd = "Mu\u017e r\u030ci\u0301di\u0301 c\u030cervene\u0301 kolo."  # "řídí": r + caron, i + acute, ...
    assert tokenize(nfd) == tokenize("Muž řídí červené kolo.") == ["muž", "řídí", "červené", "kolo", "."]
    assert tokenize("İstanbul") == ["i\u0307stanbul"]  # lowercased İ keeps its dot, in the word
    assert tokenize("\U0001f469\u200d\U0001f52c a") == ["\U0001f469", "\u200d", "\U0001f52c", "a"]  # symbols
    assert tokenize("\u0645\u06cc\u200c\u062e\u0648\u0627\u0645") == ["\u0645\u06cc\u200c\u062e\u0648\u0627\u0645"]


def test_text_without_marks_is_split_as_before():
    """The pattern of `re` this tokenizer used ([^\\W_] words, one non-space character of punctuation), for text
    without combining marks or joiners: each character between two letters, and spaces, punctuation, digits."""
    import re
    import unicodedata

    before = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['\-][^\W_]+)*|[^\w\s]|_")
    for text in ("Don't stop, it's 3,000.5 km_h!", "a\x1cb\u3000c\xa0d", "Ⓐ‿b ＿ c", "Ein Mädchen\tläuft…"):
        assert tokenize(text) == before.findall(text.lower()), text
    for cp in range(0x20, 0x3000):  # every character of these planes between two letters
        ch = chr(cp)
        if unicodedata.category(ch)[0] == "M" or cp in (0x200C, 0x200D) or unicodedata.category(ch) == "Cn":
            continue
        if cp == 0x2019:  # the typographic apostrophe joins a word as ' does since 2026-12-02 ("aujourd’hui")
            assert tokenize("aujourd’hui l’homme", lower=False) == ["aujourd’hui", "l’homme"]
            continue
        text = f"a{ch}b"
        if unicodedata.normalize("NFC", text) == text:
            assert tokenize(text, lower=False) == before.findall(text), hex(cp)


def test_a_vocabulary_is_stored_as_one_string_and_read_back_from_either_form():
    v = Vocabulary([*SPECIALS, "▁Mann", "a b", "", "ü"])
    assert v.to_dict() == {"lines": "<pad>\n<bos>\n<eos>\n<unk>\n▁Mann\na b\n\nü"}
    assert Vocabulary.from_dict(v.to_dict()) == v
    assert Vocabulary.from_dict({"tokens": v.itos}) == v  # a file written before the one string
    broken = Vocabulary([*SPECIALS, "line\nbreak", "x"])  # a token holding a line break stays a list
    assert broken.to_dict() == {"tokens": broken.itos} and Vocabulary.from_dict(broken.to_dict()) == broken


def test_the_tokenizer_of_before_marks_stayed_in_words_is_kept_for_the_models_it_built():
    """Word models trained before 2026-12-02 hold marks split off as tokens (translation and caption models read text
    with that rule still): ``split_marks`` is the old `re` pattern on the text as typed (no NFC then: an NFD accent and
    a precomposed nukta letter read as they were); such a vocabulary is told by its tokens."""
    import re

    before = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:['\-][^\W_]+)*|[^\w\s]|_")
    nfd, nukta = "Muz\u030c r\u030ci\u0301di\u0301 kolo", "\u095bरूरह\u0948"  # NFD Czech; U+095B, NFC's ज + ़
    for text in ("एक आदमी साइकिल चलाता है।", "ผู้ชาย", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0645", "Ein Mann läuft.",
                 nfd, nukta):  # fmt: skip
        assert tokenize(text, split_marks=True) == before.findall(text.lower()), text
    assert tokenize(nukta, split_marks=True)[0] == "\u095bर" and tokenize(nfd)[:2] == ["muž", "řídí"]  # today: NFC
    old = Vocabulary.build([tokenize("एक आदमी साइकिल चलाता है।", split_marks=True)])
    today = Vocabulary.build([tokenize("एक आदमी साइकिल चलाता है। ी")])  # a stray mark after a space: a token alone
    assert marks_split_off(old) and not marks_split_off(today) and not marks_split_off(Vocabulary.build([["a", "b"]]))
    assert marks_split_off(Vocabulary.build([["a"]]), old)  # either side of a model


def test_the_first_difference_of_two_vocabularies_names_its_entry():
    """A resume's refusal: two vocabularies of one size read alike by their sizes ("19 words" and "19 words")."""
    a = Vocabulary.build([["a", "dog", "runs"]], min_freq=1)
    b = Vocabulary.build([["a", "cat", "runs"]], min_freq=1)
    assert (a.itos[5], b.itos[5]) == ("dog", "cat")  # after the 4 specials and "a"
    assert first_difference(a, b, "word") == '; word 5 is "dog" there, "cat" here'
    assert first_difference(a, a) == "" and first_difference(Vocabulary.build([["a"]], min_freq=1), a) == ""
