"""TranslationEnsemble / EnsembleTranslator: translators of different kinds and vocabularies decoded as one model (the
mean of their next-token probabilities over the first member's target vocabulary)."""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from text_attn.core.vocab import Vocabulary
from text_attn.translation.ensemble import EnsembleTranslator, TranslationEnsemble
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.transformer import Transformer, TransformerConfig
from text_attn.translation.translator import Translator

SOURCE = ["ein", "mann", "hund", "läuft", "sitzt", "im", "park"]
TARGET = ("a", "man", "dog", "runs", "sits", "in", "the", "park")
SENTENCES = ["ein mann läuft", "ein hund sitzt im park", "mann", "ein hund läuft im park ein mann sitzt"]
PAIRS = [("ein mann läuft", "a man runs"), ("ein hund sitzt im park", "a dog sits in the park"),
         ("ein mann sitzt", "a man sits"), ("ein hund läuft im park", "a dog runs in the park")]  # fmt: skip


def taught(t: Translator, steps: int = 60) -> Translator:
    """``t`` after a few Adam steps on PAIRS (teacher forcing): outputs that differ by sentence, not one repeated
    word, so that equal translations say something."""
    src, lens = t._source_batch([s.split() for s, _ in PAIRS])
    tgt = [[t.tgt_vocab.bos_id, *t.tgt_vocab.encode(e.split())] for _, e in PAIRS]
    tgt = torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in tgt], batch_first=True)  # (4, T + 1), pad 0
    opt = torch.optim.Adam(t.net.parameters(), lr=0.02)
    for _ in range(steps):
        logits = t.net(src, lens, tgt[:, :-1])[0]  # (4, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    t.net.eval()
    return t


@functools.cache  # taught once a session: the tests only read them
def gru(seed: int, target: tuple[str, ...] = TARGET, codec: str = "word") -> Translator:
    torch.manual_seed(seed)
    src, tgt = Vocabulary.build([SOURCE]), Vocabulary.build([target])
    cfg = Seq2SeqConfig(src_vocab_size=len(src), tgt_vocab_size=len(tgt), embed_dim=8, enc_hidden=8, dec_hidden=16,
                        attn_dim=8)  # fmt: skip
    return taught(Translator(Seq2Seq(cfg), src, tgt, codec, True))


@functools.cache
def transformer(seed: int) -> Translator:
    torch.manual_seed(seed)
    src, tgt = Vocabulary.build([SOURCE]), Vocabulary.build([TARGET])
    cfg = TransformerConfig(len(src), len(tgt), d_model=8, num_heads=2, enc_layers=1, dec_layers=1, ff_dim=16)
    return taught(Translator(Transformer(cfg), src, tgt, "word", True))


def twin(t: Translator) -> Translator:
    return Translator(copy.deepcopy(t.net), t.src_vocab, t.tgt_vocab, "word", True)


@pytest.mark.parametrize("beam", [1, 3])
def test_a_model_with_its_own_twin_translates_as_the_model_alone(beam):
    # the mean of two equal distributions is that distribution: the same search, the same words
    alone = gru(0)
    both = EnsembleTranslator([alone, twin(alone)])
    expected = alone.translate(SENTENCES, beam_size=beam, probs=True)
    found = both.translate(SENTENCES, beam_size=beam, probs=True)
    assert [t.text for t in found] == [t.text for t in expected]
    for f, e in zip(found, expected, strict=True):
        torch.testing.assert_close(f.probs, e.probs)  # the ensemble's probabilities: the model's own
        torch.testing.assert_close(f.attention, e.attention)  # the first member's attention
    read, read_alone = both.read(SENTENCES, "a dog runs"), alone.read(SENTENCES, "a dog runs")  # a given text
    assert [r.score for r in read] == pytest.approx([r.score for r in read_alone], abs=1e-5)


def test_a_step_is_the_log_of_the_mean_of_the_members_probabilities():
    # a Transformer over all 8 target words with a GRU that knows only 4 of them
    first, second = transformer(0), gru(1, TARGET[:4])
    both = TranslationEnsemble([first, second])
    tokens = torch.tensor([first.tgt_vocab.bos_id] * 2)
    with torch.no_grad():
        for m in both.members:
            m.net.eval()  # no dropout (translate does this itself)
        state = both.encode([first.tokenize(s) for s in SENTENCES[:2]])
        log_probs, attention, _ = both.step(tokens, state)  # (2, 12)
        s0, l0 = first._source_batch([first.tokenize(s) for s in SENTENCES[:2]])
        s1, l1 = second._source_batch([second.tokenize(s) for s in SENTENCES[:2]])
        lp0, attn0, _ = first.net.step(tokens, first.net.encode(s0, l0))
        lp1, _, _ = second.net.step(tokens, second.net.encode(s1, l1))  # bos has the same id in both
    p1 = torch.zeros_like(lp0)
    for i, word in enumerate(second.tgt_vocab.itos):
        p1[:, first.tgt_vocab.stoi[word]] = lp1[:, i].exp()
    torch.testing.assert_close(log_probs.exp(), (lp0.exp() + p1) / 2)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2))
    park = first.tgt_vocab.stoi["park"]  # a word the GRU cannot write: half the Transformer's probability
    torch.testing.assert_close(log_probs[:, park].exp(), lp0[:, park].exp() / 2)
    torch.testing.assert_close(attention, attn0)  # the first member's attention, over its own source tokens


def test_a_translation_does_not_depend_on_the_sentences_beside_it():
    both = EnsembleTranslator([transformer(0), gru(1, TARGET[:5])])
    one_by_one = [both.translate([s], beam_size=3)[0].text for s in SENTENCES]
    assert [t.text for t in both.translate(SENTENCES, beam_size=3)] == one_by_one
    assert [t.text for t in both.translate(SENTENCES[::-1], beam_size=3)] == one_by_one[::-1]


def test_the_search_writes_only_the_first_members_words_at_its_recorded_decoding():
    first, second = copy.copy(transformer(2)), gru(3, TARGET[:4])
    first.info = {"decoding": {"beam_size": 2, "length_penalty": 1.0}}  # as a model file records its choice
    both = EnsembleTranslator([first, second])
    out = [t.text for t in both.translate(SENTENCES)]
    assert out == [t.text for t in both.translate(SENTENCES, beam_size=2, length_penalty=1.0)]
    assert all(set(text.split()) <= set(first.tgt_vocab.itos) for text in out)
    assert all(len(t.tokens) <= 3 for t in both.translate(SENTENCES, max_len=3))
    with pytest.raises(ValueError, match="measured for one model, not an ensemble"):
        both.explain(SENTENCES[0])
    with pytest.raises(TypeError, match="not one model file"):
        both.save("both.pt")


def test_members_that_cannot_share_one_search_are_refused():
    with pytest.raises(ValueError, match="at least 2 translators"):
        TranslationEnsemble([gru(0)])
    with pytest.raises(
        ValueError,
        match=r"member 1 can write 4 target token\(s\) that the first member's vocabulary lacks "
        r"\('in', 'park', 'sits', 'the'\): the model with the largest target vocabulary goes first",
    ):
        TranslationEnsemble([gru(0, TARGET[:4]), gru(1)])
    with pytest.raises(ValueError, match="member 1 reads text as char tokens"):
        TranslationEnsemble([gru(0), gru(1, codec="char")])


def test_a_member_with_learned_positions_caps_every_search(tmp_path):
    # a Transformer whose position table has 8 rows beside a GRU without one: outputs stay within 8 steps, and a
    # source past the table is refused in the member's words, not an index error mid-search
    from helpers.tiny_translator import learned_positions_model_file

    words = ["ma", "mo", "pe", "gake", "soru"]
    torch.manual_seed(0)
    vocab = Vocabulary.build([words])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    first = Translator(Seq2Seq(cfg), vocab, vocab, "word", True)
    both = EnsembleTranslator([first, Translator.load(learned_positions_model_file(tmp_path / "p.pt"))])
    assert both.position_limit == 8 and first.position_limit is None
    assert all(len(t.tokens) <= 8 for t in both.translate(["ma mo pe", "gake soru ma mo"], beam_size=2))
    with pytest.raises(ValueError, match="sentence 0: .*8"):
        both.translate([" ".join(words * 2)])
