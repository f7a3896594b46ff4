"""A word model's tokens joined back as text is written (text_attn.translation.tokens.join_words), and a model that
writes lowercase scored case-insensitively ("case:lc"): its perfect output scores sacreBLEU 100 and chrF 100, in
validation, ``test`` and ``translate --references`` (until 2026-12-02 German's scored 25.75: space-joined lowercase
tokens against cased references)."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from helpers.multi30k import write_corpus

from text_attn.core.metrics import text_scores
from text_attn.core.vocab import Vocabulary, lost_addresses, tokenize
from text_attn.core.vocab import addresses as found_addresses
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.tokens import TextCodec, join_words
from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")

# (the tokens, space-separated; the text they stand for): one rule each
RULES = [
    ("ein mann , der lacht .", "ein mann, der lacht."),  # closing punctuation
    ("was ? ! ja ; nein : gut . . .", "was?! ja; nein: gut..."),
    ("( a ) [ b ] { c } 50 % 20 °", "(a) [b] {c} 50% 20°"),  # brackets, percent, degrees
    ("¿ qué ? ¡ sí ! $ 5 € 3 # tag", "¿qué? ¡sí! $5 €3 #tag"),  # opening marks, currencies, a hashtag
    ('he said " hi " to me " ok " .', 'he said "hi" to me "ok".'),  # straight quotes paired
    ('a 12 " record', 'a 12" record'),  # one left over after a word closes
    ("„ stop “ - schild", "„stop“-schild"),  # German quotes, a compound after the closing one
    ("“ hi ” , he said ‘ so ’", "“hi”, he said ‘so’"),  # English quotes
    ("« bonjour » dit - il", "«bonjour» dit - il"),  # guillemets; a spaced dash stays spaced
    ("she said ' hi ' .", "she said 'hi'."),
    ("the dogs ' toys", "the dogs' toys"),  # a plural's possessive
    ("it 's , we 're , do n't , i 'm", "it's, we're, don't, i'm"),  # clitics a tokenized corpus gives
    ("it ’ s the man ’ s", "it’s the man’s"),  # a curly apostrophe splits a word
    ("l ’ homme qu ' il voit , l' arbre", "l’homme qu'il voit, l'arbre"),  # French elision
    ("um 10 : 30 , and / or", "um 10:30, and/or"),  # a time, a slash
    ("j . p . morgan in the u . s . a .", "j.p. morgan in the u.s.a."),  # initials
    ("ein - und ausgang , teller und - tassen", "ein- und ausgang, teller und -tassen"),  # German's hanging hyphen
    ("- ein mann", "-ein mann"),
]


@pytest.mark.parametrize(("tokens", "text"), RULES)
def test_each_rule_joins_tokens_as_written(tokens, text):
    assert join_words(tokens.split()) == text
    assert join_words(tokenize(text)) == text  # and what the tokenizer makes of the text gives it back


# Multi30k-like sentences, as written (cased; quotes, clitics, elision, hyphens, numbers)
SENTENCES = {
    "de": [
        "Ein Mann in einem blauen Hemd hält ein Schild, auf dem „Stop“ steht.",
        "Zwei Kinder (ein Junge und ein Mädchen) spielen um 10:30 Uhr im Schnee.",
        "Eine Frau trägt ein T-Shirt mit der Aufschrift „I love NY“ und lacht!",
        "Der Ein- und Ausgang eines Ladens, in dem 50% Rabatt gilt.",
    ],
    "en": [
        'A man in a blue shirt is holding a sign that says "come on now... what\'s gayer than tea."',
        "Two dogs' owners aren't watching; they're talking about the 3.5 mile run.",
        'A woman (wearing a hat) walks past a store named "Joe\'s" in the U.S.A.',
        "People attending a J.P. Morgan Corporate Challenge, in New York City!",
    ],
    "fr": [
        'Un homme en polo bleu tient une pancarte qui dit : "allez quoi...".',
        "L’homme et l'enfant regardent qu'il n'y a personne dans l'eau.",
        "Une fille saute par-dessus la clôture (à côté d'un chien) à 10:30.",
        "Deux hommes jouent au football américain, l'un d'eux tient le ballon !",  # spaced, as Multi30k's
    ],
    "cs": [
        'Muž v modré košili drží ceduli s nápisem "Stop".',
        "Dvě děti (chlapec a dívka) si hrají na sněhu, zatímco se matka dívá.",
        'Žena v tričku s nápisem "I love NY" se směje!',
        "Mladý muž skáče přes plot; jeho pes běží za ním.",
    ],
}


def test_french_puts_a_space_before_the_marks_its_references_space():
    """Multi30k's French references write "dit :", "joie !" (train: 57 lines spaced, 5 not): a word model
    writing French joined them to the word. One space before a run; a time's colon stays inside it."""
    tokens = 'il dit : " bonjour " ! quoi ? ! non ; à 10 : 30 ? ? ?'.split()
    assert join_words(tokens, french=True) == 'il dit : "bonjour" ! quoi ?! non ; à 10:30 ???'
    assert join_words(tokens) == 'il dit: "bonjour"! quoi?! non; à 10:30???'  # every other language as before
    assert TextCodec("word", target_lang="fr").decode(tokens[:3]) == "il dit :"
    assert TextCodec("word", target_lang="de").decode(tokens[:3]) == "il dit:"
    # a URL's "://" is the scheme's, not a clause's colon: a URL a model writes token by token (the tokenizer keeps
    # one whole since 2026-12-03) joined as in every other language, not "http ://x."
    url = "voir http : / / x . fr : oui".split()
    assert join_words(url, french=True) == "voir http://x. fr : oui"
    assert join_words(url, french=True).split(" : ")[0] == join_words(url).split(": ")[0] == "voir http://x. fr"


# (language, a sentence with addresses, its addresses as typed): a scheme's URL, www., an e-mail address, each
# beside the punctuation that ends a sentence or a clause, a bracket or a quote of its language
ADDRESSES = [
    ("en", "See http://Example.com/a-b?q=1&r=2. Write to Jane.Doe+news@example.co.uk, or call.",
     ["http://Example.com/a-b?q=1&r=2", "Jane.Doe+news@example.co.uk"]),
    ("fr", "Voir www.exemple.fr/Été_(2024), ou écrire à prénom.nom@exemple.fr !",
     ["www.exemple.fr/Été_(2024)", "prénom.nom@exemple.fr"]),
    ("de", "Siehe „https://de.wikipedia.org/wiki/Straße“ (oder info@müller-bau.de).",
     ["https://de.wikipedia.org/wiki/Straße", "info@müller-bau.de"]),
    ("cs", "Viz ftp://soubory.cz/Řeka; nebo pište na jan@příklad.cz.", ["ftp://soubory.cz/Řeka", "jan@příklad.cz"]),
]  # fmt: skip


@pytest.mark.parametrize(("lang", "line", "addresses"), ADDRESSES, ids=[a[0] for a in ADDRESSES])
def test_a_url_or_an_address_is_joined_as_typed_in_every_language(lang, line, addresses):
    """Split at every mark ("http", ":", "/", "/", "example", ".", "com", ...), an address came back spaced
    ("http://example. com/a-b") and lowercased. Now each is one token as typed, the sentence's own marks tokens of
    their own, and the rest as before: every other token is the tokenizer's of the line with the addresses cut out."""
    assert found_addresses(line) == addresses  # what translate looks for in the translation
    for lower in (True, False):
        tokens = tokenize(line, lower=lower)
        assert [t for t in tokens if t in addresses] == addresses  # whole, and as typed however the rest is read
        rest = line
        for address in addresses:
            rest = rest.replace(address, " ")
        assert [t for t in tokens if t not in addresses] == tokenize(rest, lower=lower)
        after = [tokens[tokens.index(a) + 1] for a in addresses]  # the mark ending a clause is a token of its own
        assert all(t in ".,;!?“)" for t in after), after
    codec = TextCodec("word", lower=True, target_lang=lang)
    expected = line
    for i, address in enumerate(addresses):  # the line as a lowercasing model writes it: lowercase but its addresses
        expected = expected.replace(address, f"<{i}>")
    expected = expected.lower()
    for i, address in enumerate(addresses):
        expected = expected.replace(f"<{i}>", address)
    assert codec.decode(codec.encode(line)) == expected


def test_lost_addresses_are_those_typed_that_the_output_does_not_hold_as_typed():
    line = ADDRESSES[0][1]  # http://Example.com/a-b?q=1&r=2 and Jane.Doe+news@example.co.uk
    assert lost_addresses(line, "Write to Jane.Doe+news@example.co.uk.") == ["http://Example.com/a-b?q=1&r=2"]
    assert lost_addresses(line, "see http://example.com/a-b?q=1&r=2 and jane.doe+news@example.co.uk") == [
        "http://Example.com/a-b?q=1&r=2",
        "Jane.Doe+news@example.co.uk",
    ]  # lowercased is not as typed
    assert lost_addresses(line, line) == [] and lost_addresses("Ein Mann fährt Fahrrad.", "A man rides.") == []


def test_a_sentence_final_stop_after_a_url_stays_a_token():
    assert tokenize("see http://x.fr.") == ["see", "http://x.fr", "."]
    assert tokenize("Siehe www.x.de/A.") == ["siehe", "www.x.de/A", "."]
    # what is no address stays as it was: a bare scheme, "www." alone, an "@" without a domain, a handle
    assert found_addresses("http:// www. a@b @@ @jane") == [] and found_addresses("ein Hund") == []
    assert tokenize("http:// www. a@b @@ @jane") == ["http", ":", "/", "/", "www", ".", "a", "@", "b", "@", "@", "@",
                                                      "jane"]  # fmt: skip


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_a_word_codecs_perfect_output_scores_100(lang):
    codec = TextCodec("word", lower=True, target_lang=lang)
    refs = SENTENCES[lang]
    hyps = [codec.decode(codec.encode(r)) for r in refs]
    # every sentence given back as written, French's space before its colon included (13a and chrF do not see it)
    assert [h for h, r in zip(hyps, refs, strict=True) if h != " ".join(r.lower().split())] == []
    scores = text_scores(refs, hyps, lowercase=codec.lowercased)
    assert (scores["sacrebleu"], scores["chrf"], scores["bleu_tok"]) == (pytest.approx(100), pytest.approx(100), 100)
    assert scores["signature"].count("case:lc") == 2  # BLEU's and chrF's


def test_only_a_lowercasing_codec_is_scored_case_insensitively():
    assert TextCodec("word", lower=True).lowercased and TextCodec("char", lower=True).lowercased
    assert not TextCodec("word", lower=False).lowercased
    ref = ["Ein Mann fährt mit dem Fahrrad."]
    cased = text_scores(ref, ref)
    assert cased["sacrebleu"] == pytest.approx(100) and cased["signature"].count("case:mixed") == 2
    assert text_scores(ref, [ref[0].lower()])["sacrebleu"] < 100  # a cased model's lowercase is wrong


@pytest.mark.parametrize("lower", [True, False])
def test_test_scores_a_lowercasing_word_model_case_insensitively(lower, tmp_path, capsys):
    dm = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "c")), src_lang="de", tgt_lang="en",
                               tokenizer="word", lower=lower, batch_size=4)  # fmt: skip
    module = TranslationModule(network=dict(attention="bahdanau", embed_dim=8, enc_hidden=8, dec_hidden=8, attn_dim=8))
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)  # fmt: skip
    trainer.test(module, dm, verbose=False)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("sacreBLEU "))
    assert line.count("case:lc" if lower else "case:mixed") == 2, line


@pytest.fixture(scope="module")
def word_model(tmp_path_factory):
    """A random-weight word model whose output for SOURCE holds punctuation (seed 0: "mann mann.., lacht mann.")."""
    vocab = Vocabulary.build([["ein", "mann", "hund", ",", ".", "„", "“", "der", "lacht"]])
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    return Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(tmp_path_factory.mktemp("word") / "m.pt")


SOURCE = "ein mann, der lacht."


def test_translate_prints_a_word_models_tokens_joined_and_scores_them_case_insensitively(word_model, tmp_path, capsys):
    assert translate_main([SOURCE, "--model", str(word_model)]) == 0
    (printed,) = capsys.readouterr().out.splitlines()
    translator = Translator.load(word_model)
    tokens = translator.translate([SOURCE])[0].tokens
    assert {".", ","} & set(tokens) and printed == join_words(tokens) != " ".join(tokens)
    (read,) = translator.read([SOURCE], printed)  # --given: a probability per token, so the tokens shown spaced
    assert read.tokens == tokens and read.text == " ".join(tokens) and len(read.word_probs) == len(tokens)
    refs = tmp_path / "refs"
    refs.write_text(printed.capitalize() + "\n")  # the reference as a person writes it
    assert translate_main([SOURCE, "--model", str(word_model), "--references", str(refs)]) == 0
    err = capsys.readouterr().err
    assert "translate: sacreBLEU 100.00  chrF 100.00  BLEU (tok.) 100.00" in err, err
    assert "sacreBLEU and chrF case-insensitive: the model writes lowercase" in err
    signatures = next(x for x in err.splitlines() if x.startswith("translate: signatures:"))
    assert signatures.count("case:lc") == 2, signatures


def test_a_word_model_trained_to_write_french_keeps_its_language_in_its_file(word_model, tmp_path):
    """data.tgt_lang fr reaches the model file (``target_lang``), so translate, validation and the server join its
    output as French is written; a file written before says its pair only in its facts, and is read by them."""
    root = write_corpus(tmp_path / "c", langs=("en", "fr"))
    dm = TranslationDataModule(task="pair", root=str(root), src_lang="en", tgt_lang="fr", tokenizer="word")
    dm.setup("fit")
    assert dm.codec.target_lang == "fr" and dm.codec.metadata()["target_lang"] == "fr"
    english = TranslationDataModule(task="pair", root=str(root), src_lang="fr", tgt_lang="en", tokenizer="word")
    english.setup("fit")
    assert english.codec.decode(["oui", "!"]) == "oui!"
    saved = Translator.load(word_model)
    saved.codec.target_lang = "fr"
    again = Translator.load(saved.save(tmp_path / "fr.pt"))
    assert again.codec.target_lang == "fr" and again.codec.decode(["oui", "!"]) == "oui !"
    before = {"tokenizer": "word", "lower": True, "info": {"training_data": "Multi30k task 1, English -> French"}}
    assert TextCodec.from_metadata(before).target_lang == "fr"
    assert TextCodec.from_metadata({**before, "info": {"languages": "French -> German"}}).target_lang == "de"
    assert TextCodec.from_metadata({"tokenizer": "word"}).target_lang is None
