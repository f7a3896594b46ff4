"""Reading a translation someone wrote (``Translator.read`` / ``read_tokens``; text_attn.core.decoding.read_sequence):
the model's own translation read back gives the search's tokens, attention and log-probability (both bundled models,
greedy and beam); the reading equals the network's teacher-forced training pass; unknown tokens are named."""

import math

import pytest
import torch
import torch.nn.functional as F

from text_attn.core.vocab import Vocabulary
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translator import Translator

SENTENCES = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch auf einer Bank."]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=["transformer", "bahdanau"])
def bundled(request) -> Translator:
    return Translator.load(request.param)


@pytest.mark.parametrize("beam", [1, 4])
def test_the_models_own_translation_reads_back_as_the_search_found_it(bundled, beam):
    own = bundled.translate(SENTENCES, beam_size=beam, length_penalty=0.0)
    for sentence, tr in zip(SENTENCES, own, strict=True):
        assert not tr.truncated
        (read,) = bundled.read([sentence], tr.text)
        assert read.tokens == tr.tokens and read.text == tr.text
        total = sum(math.log(p) for p in [*read.probs, read.end_prob])
        assert total == pytest.approx(tr.score, abs=1e-4)
        assert read.score == pytest.approx(total / (len(read.tokens) + 1), abs=1e-5)
        torch.testing.assert_close(read.attention, tr.attention, rtol=0, atol=1e-5)


def test_a_reading_is_the_networks_teacher_forced_pass(bundled):
    given = "A man rides a bike."
    reads = bundled.read(SENTENCES[:2], given)
    tokens, unknown = bundled.target_tokens(given)
    assert unknown == [] and all(r.tokens == tokens for r in reads)
    v = bundled.tgt_vocab
    ids = v.encode(tokens, eos=True)
    net = bundled.net.eval()
    for sentence, read in zip(SENTENCES[:2], reads, strict=True):
        src = torch.tensor([bundled.src_vocab.encode(bundled.tokenize(sentence), eos=True)])
        with torch.no_grad():  # the training path: bos + tokens in, every step's logits at once
            logits = net(src, torch.tensor([src.size(1)]), torch.tensor([[v.bos_id, *ids[:-1]]]))[0]
        want = F.log_softmax(logits[0], dim=-1).gather(1, torch.tensor(ids)[:, None]).squeeze(1)
        got = torch.tensor([*read.probs, read.end_prob]).log()
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    assert reads[0].score > reads[1].score  # the sentence it translates fits better than another one


def test_a_word_model_names_the_tokens_it_does_not_know():
    vocab = Vocabulary.build([["ein", "mann", "hund", "a", "man", "dog"]])
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    tr = Translator(Seq2Seq(cfg), vocab, vocab, "word", True)
    assert tr.target_tokens("A zebra and a DOG") == (["a", "zebra", "and", "a", "dog"], ["zebra", "and"])
    (read,) = tr.read(["ein mann"], "a zebra")
    (other,) = tr.read(["ein mann"], "a qqq")
    assert read.probs == other.probs  # both unknown words are the same <unk>
    assert read.attention.shape == (2, 3) and torch.allclose(read.attention.sum(-1), torch.ones(2))
    with pytest.raises(ValueError, match="no tokens"):
        tr.read(["ein mann"], " ")
    with pytest.raises(ValueError, match="empty input"):
        tr.read([""], "a man")


def test_several_translations_read_at_once_as_one_by_one(bundled):
    """read_texts encodes the sentences once for all its translations: the same readings as one at a time."""
    toks = [bundled.tokenize(s) for s in SENTENCES]
    texts = ["A man rides a bike.", "Two dogs play in the snow."]
    for text, together in zip(texts, bundled.read_texts(toks, texts), strict=True):
        for alone, read in zip(bundled.read_tokens(toks, text), together, strict=True):
            assert read.probs == alone.probs and read.score == alone.score
            assert torch.equal(read.attention, alone.attention)


def test_each_sentence_read_with_its_own_translation_in_one_batch_as_alone(bundled):
    """read_each (translate --given-file): the sentences of one batch, each with a translation of its own length (the
    shorter ones padded past their end), read as read_tokens reads each alone."""
    toks = [bundled.tokenize(s) for s in SENTENCES]
    texts = ["A man rides a bike down the long road.", "Dogs.", "A woman reads a book on a bench."]
    together = bundled.read_each(toks, texts)
    for tok, text, read in zip(toks, texts, together, strict=True):
        (alone,) = bundled.read_tokens([tok], text)
        assert read.text == alone.text == text and read.tokens == alone.tokens and read.source == alone.source
        assert read.probs == pytest.approx(alone.probs, rel=1e-4) and read.end_prob == pytest.approx(alone.end_prob)
        assert read.word_probs == pytest.approx(alone.word_probs, rel=1e-4) and len(read.word_probs) == len(
            text.split()
        )
        assert read.score == pytest.approx(alone.score, abs=1e-5)
        torch.testing.assert_close(read.attention, alone.attention, rtol=0, atol=1e-5)
    assert bundled.read_each([], []) == []
    with pytest.raises(ValueError, match="3 sentences for 2 translations"):
        bundled.read_each(toks, texts[:2])
    with pytest.raises(ValueError, match="no tokens to read"):
        bundled.read_each(toks[:1], ["   "])
