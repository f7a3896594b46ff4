"""The translator's lower-level calls (``translate_tokens``, ``read_texts``, ``read_each``, ``read_tokens``,
``with_probs``, ``tokenize``, ``unseen_words``, ``decoding``) and the score functions (``coco_metrics``,
``text_scores``) refuse bad input in one line that names it, as ``translate`` does: a beam below 1 (searched greedily,
unsaid) or wider than the vocabulary, a negative max_len or length penalty (torch's "stack expects a non-empty
TensorList", or taken as given), a sentence of no tokens (translated from its end alone, with a score), one string
for a list of translations (read a character at a time, each a translation), None or a list where a text is due, a
text where a Translation is due (AttributeErrors and TypeErrors from deep inside), an unknown decoding option (handed
back in the dict), and two strings given to score (scored character by character)."""

import re

import pytest

from text_attn.core.metrics import coco_metrics, sacre_scores, text_scores
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bahdanau():
    """The bundled RNN translator (the smaller one) and one sentence's tokens."""
    translator = Translator.load("bahdanau")
    return translator, [translator.tokenize("Ein Mann fährt Fahrrad.")]


def test_translate_tokens_checks_its_decoding_as_translate_does(bahdanau):
    translator, toks = bahdanau
    wide = len(translator.tgt_vocab) + 1
    for kwargs, says in (({"beam_size": 0}, "beam_size must be at least 1, got 0"),  # was a greedy search, unsaid
                         ({"beam_size": -1}, "beam_size must be at least 1, got -1"),
                         ({"beam_size": wide}, f"beam_size {wide} is more than the model's {wide - 1} words"),
                         ({"length_penalty": -1}, "length_penalty must be a finite number, 0 or more, got -1"),
                         ({"max_len": -1}, "max_len must be at least 0 (0 or None: each sentence's own cap), got -1"),
                         ):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{re.escape(says)}"):
            translator.translate_tokens(toks, **kwargs)
    uncapped = translator.translate_tokens(toks)[0].text  # 0 and None: each sentence's own cap, as documented
    assert translator.translate_tokens(toks, max_len=0)[0].text == uncapped and uncapped


def test_a_sentence_of_no_tokens_is_refused_by_its_number(bahdanau):
    translator, toks = bahdanau
    with pytest.raises(ValueError, match=r"^empty input: sentence 1 has no tokens$"):  # was '' with a score
        translator.translate_tokens([toks[0], []])


def test_translations_to_read_are_a_list_of_texts(bahdanau):
    translator, toks = bahdanau
    with pytest.raises(TypeError, match=re.escape("read_each takes a list of translations: give ['Abc']")):
        translator.read_each(toks * 3, "Abc")  # was three readings: "A", "b", "c"
    with pytest.raises(TypeError, match=re.escape("read_texts takes a list of translations: give ['A man']")):
        translator.read_texts(toks, "A man")
    with pytest.raises(TypeError, match=r"^read_each takes a list of translations, got None$"):
        translator.read_each(toks, None)  # was "object of type 'NoneType' has no len()"
    with pytest.raises(TypeError, match=r"^read_texts: translation 1 must be a text, got list$"):
        translator.read_texts(toks, ["A man.", ["A man."]])
    with pytest.raises(TypeError, match=r"^read_tokens takes one translation \(a string\), got list$"):
        translator.read_tokens(toks, ["A man."])
    assert translator.read_each(toks, ["A man rides a bike."])[0].tokens


def test_with_probs_takes_translations_not_texts(bahdanau):
    translator, toks = bahdanau
    says = "with_probs: translation 0 must be a Translation (what translate_tokens returns), got str; read_texts reads"
    with pytest.raises(TypeError, match=f"^{re.escape(says)} translations given as text$"):
        translator.with_probs(toks, ["A man"])  # was "'str' object has no attribute 'pieces'"
    assert translator.with_probs(toks, translator.translate_tokens(toks))[0].probs


def test_the_methods_of_one_text_name_what_they_got(bahdanau):
    translator, _ = bahdanau
    with pytest.raises(TypeError, match=r"^tokenize takes one text \(a str\), got NoneType$"):
        translator.tokenize(None)  # was "normalize() argument 2 must be str, not None"
    with pytest.raises(TypeError, match=r"^unseen_words takes one text \(a str\), got list: call it once for each$"):
        translator.unseen_words(["Ein"])
    with pytest.raises(TypeError, match=r"^read_as takes one text \(a str\), got bytes$"):
        translator.read_as(b"Ein Mann.")


def test_an_unknown_decoding_option_is_named_with_the_known_ones(bahdanau):
    translator, _ = bahdanau
    with pytest.raises(TypeError, match=r"^decoding: unknown option\(s\) max_len: the options are beam_size, "
                                         r"length_penalty, no_repeat_ngram$"):  # fmt: skip
        translator.decoding(max_len=20)  # was returned in the dict
    assert translator.decoding(beam_size=3)["beam_size"] == 3


def test_scores_take_lists_of_texts():
    with pytest.raises(TypeError, match=r"^coco_metrics: hypotheses\['p'\] must be one caption \(a str\), got list$"):
        coco_metrics({"p": ["a man"]}, {"p": ["a man"]}, meteor=False)  # was "'list' object has no attribute 'split'"
    with pytest.raises(TypeError, match=r"^coco_metrics: references\['p'\] must be a non-empty list of str, one of"):
        coco_metrics({"p": [["a", "man"]]}, {"p": "a man"}, meteor=False)
    for call in (text_scores, sacre_scores):  # was chrF 100, BLEU 0: the characters scored
        name = call.__name__
        with pytest.raises(TypeError, match=re.escape(f"{name}: references must be a list of strings, one a sentence, "
                                                      "got one str: give ['A man']")):  # fmt: skip
            call("A man", "A man")
    with pytest.raises(TypeError, match=r"^text_scores: hypotheses\[0\] must be a str, got NoneType$"):
        text_scores(["A man"], [None])
    assert text_scores(["A man ."], ["A man ."])["chrf"] == 100.0


def test_another_models_translation_is_refused_by_explain_and_with_probs(bahdanau, tmp_path):
    """A word model handed the bundled model's Translation read its pieces as <unk> and scored them (probabilities of
    about 0.06 each, evidence of the right shape), silently; chunk 0 was range()'s "arg 3 must not be zero"."""
    from helpers.tiny_translator import tiny_word_model_file

    translator, toks = bahdanau
    (theirs,) = translator.translate_tokens(toks)
    word = Translator.load(tiny_word_model_file(tmp_path / "w.pt"))
    for call in (lambda: word.explain(theirs), lambda: word.with_probs(toks, [theirs])):
        with pytest.raises(ValueError, match=r"of its tokens are not in this model's vocabulary \('▁"):
            call()
    with pytest.raises(ValueError, match="^chunk must be at least 1, got 0"):
        translator.with_probs(toks, [theirs], chunk=0)
    ((read,),) = word.read_texts([["ein", "mann"]], ["a zebra"])  # a text given to it: its unknown word, <unk>
    assert read.given and word.explain(read).evidence.shape[0] == len(read.tokens)
    assert translator.with_probs(toks, [theirs])[0].probs is not None  # its own: read as before


def test_a_sampling_seed_and_an_ensembles_names_are_checked_when_given(bahdanau):
    """A seed of 'x' or 1.5 was taken, then failed at the first draw deep in the search ("can only concatenate str");
    an ensemble given fewer names than members failed in zip; a bad threshold passed where no probabilities were
    read."""
    from text_attn.core.decoding import Sampling
    from text_attn.translation.ensemble import EnsembleTranslator

    for seed in ("x", 1.5, True):
        with pytest.raises(
            ValueError, match=f"^sampling's seed must be an integer or None, got {re.escape(repr(seed))}"
        ):
            Sampling(seed=seed)
    assert Sampling(seed=3).seed == 3
    translator, toks = bahdanau
    with pytest.raises(ValueError, match="^an ensemble of 2 translators needs 2 names, got 1"):
        EnsembleTranslator([translator, translator], names=["a"])
    (plain,) = translator.translate_tokens(toks)
    assert plain.unsure() == []
    with pytest.raises(ValueError, match="below must be a probability"):
        plain.unsure(below=0)
