"""The RNN encoder-decoder: shapes, step == teacher forcing, padding invariance, overfitting a tiny batch."""

import pytest
import torch

from text_attn.core.decoding import greedy_search
from text_attn.translation.seq2seq import ATTENTIONS, Seq2Seq, Seq2SeqConfig

BOS, EOS = 1, 2


def _batch():
    torch.manual_seed(0)
    src = torch.tensor([[5, 6, 7, 8, EOS], [9, 5, EOS, 0, 0], [6, EOS, 0, 0, 0]])
    lens = torch.tensor([5, 3, 2])
    tgt = torch.tensor([[BOS, 8, 7, 6, 5, EOS], [BOS, 5, 9, EOS, 0, 0], [BOS, 6, EOS, 0, 0, 0]])
    return src, lens, tgt


def _model(attention, rnn="gru"):
    torch.manual_seed(0)
    dec = 32 if attention == "luong-dot" else 24  # luong-dot's state is as wide as the encoder's (2 x 16)
    cfg = Seq2SeqConfig(
        12, 12, attention=attention, rnn=rnn, embed_dim=16, enc_hidden=16, dec_hidden=dec, attn_dim=16, dropout=0.0
    )
    return Seq2Seq(cfg).eval()


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_shapes_masks_and_step_equals_teacher_forcing(attention, rnn):
    m = _model(attention, rnn)
    src, lens, tgt = _batch()
    logits, attn = m(src, lens, tgt[:, :-1])
    assert logits.shape == (3, 5, 12)
    if attention == "none":
        assert attn is None
    else:
        assert attn.shape == (3, 5, 5)
        assert torch.allclose(attn.sum(-1), torch.ones(3, 5), atol=1e-5)
        assert (attn[1, :, 3:] == 0).all() and (attn[2, :, 2:] == 0).all()  # padding gets no weight
    state = m.encode(src, lens)
    for t in range(5):
        lp, a, state = m.step(tgt[:, t], state)
        assert torch.allclose(lp, torch.log_softmax(logits[:, t], -1), atol=1e-5)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general"])
def test_two_decoder_steps_by_hand(attention):
    # Bahdanau: the query is s_{t-1}, s_t = RNN([E y; c_t], s_{t-1}). Luong: s_t = RNN([E y; h~_{t-1}], s_{t-1})
    # (input feeding, h~_0 = 0), the query is s_t. Both: h~_t = tanh(W_c [s_t; c_t]), logits = W_o h~_t.
    m = _model(attention)
    src, lens, tgt = _batch()
    states, final = m.encoder(src, lens)
    keys, mask = m.key_in(states), src != 0
    s = torch.tanh(m.bridge(final))  # s_0
    feed = torch.zeros_like(s)
    logits, _ = m(src, lens, tgt[:, :2])
    for t in range(2):
        emb = m.embed(tgt[:, t])
        if attention == "bahdanau":
            ctx, _ = m.attn(s, keys, mask=mask)
            s = m.cell(torch.cat([emb, ctx], -1), s)
        else:
            s = m.cell(torch.cat([emb, feed], -1), s)
            ctx, _ = m.attn(s, keys, mask=mask)
        feed = torch.tanh(m.hidden_out(torch.cat([s, ctx], -1)))
        torch.testing.assert_close(logits[:, t], m.out(feed), atol=1e-5, rtol=0)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_padding_does_not_change_a_sentence(attention):
    m = _model(attention)
    src, lens, tgt = _batch()
    full, _ = m(src, lens, tgt[:, :-1])
    alone, _ = m(src[1:2, :3], lens[1:2], tgt[1:2, :-1])
    assert torch.allclose(full[1], alone[0], atol=1e-5)


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="unknown attention"):
        Seq2SeqConfig(10, 10, attention="cosine")
    with pytest.raises(ValueError, match="unknown rnn"):
        Seq2SeqConfig(10, 10, rnn="transformer")


@pytest.mark.parametrize("attention", ["bahdanau", "luong-dot", "luong-concat", "none"])
def test_overfits_a_tiny_batch(attention):
    m = _model(attention).train()
    src, lens, tgt = _batch()
    opt = torch.optim.Adam(m.parameters(), lr=0.02)
    for _ in range(150):
        logits, _ = m(src, lens, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.05:  # overfitted: the steps left would only cost time
            break
    assert loss.item() < 0.05
    m.eval()
    res = greedy_search(m, m.encode(src, lens), 3, BOS, EOS, max_len=8)
    assert res.token_lists() == [[8, 7, 6, 5], [5, 9], [6]]
    beam = m.generate(src, lens, BOS, EOS, max_len=8, beam_size=3)
    assert beam.token_lists() == res.token_lists()


@pytest.mark.parametrize("rnn", ["gru", "lstm"])
def test_a_one_directional_encoder_reads_left_to_right_only(rnn):
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(12, 12, rnn=rnn, embed_dim=16, enc_hidden=16, dec_hidden=24, attn_dim=16, dropout=0.0,
                        bidirectional=False)  # fmt: skip
    m = Seq2Seq(cfg).eval()
    src, lens, tgt = _batch()
    states, final = m.encoder(src, lens)
    assert states.shape == (3, 5, 16) and final.shape == (3, 16)  # enc_hidden, not 2 x enc_hidden
    # the last real position's state is the final state, and a state never depends on later words
    torch.testing.assert_close(final[0], states[0, 4])
    changed = src.clone()
    changed[0, 3] = 9  # a later word
    torch.testing.assert_close(m.encoder(changed, lens)[0][0, :3], states[0, :3])
    logits, attn = m(src, lens, tgt[:, :-1])
    assert logits.shape == (3, 5, 12) and torch.allclose(attn.sum(-1), torch.ones(3, 5), atol=1e-5)
    state = m.encode(src, lens)
    for t in range(5):  # step == teacher forcing, as for the bidirectional encoder
        lp, _, state = m.step(tgt[:, t], state)
        assert torch.allclose(lp, torch.log_softmax(logits[:, t], -1), atol=1e-5)
    assert Seq2SeqConfig(12, 12).bidirectional  # the default (and every model file before the switch) reads both ways


def test_a_translation_never_holds_pad_or_bos_and_each_word_keeps_its_own_attention_row():
    # an undertrained model that ranks <bos> first: written, it was dropped from the words while its step's
    # attention row stayed, so every later word showed an earlier step's row
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.explain import step_through
    from text_attn.translation.translator import Translator

    torch.manual_seed(0)
    vocab = Vocabulary.build([["ein", "mann", "hund", "a", "man", "dog"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8)  # fmt: skip
    net = Seq2Seq(cfg).eval()
    with torch.no_grad():
        net.out.bias[vocab.bos_id] += 8.0  # <bos> first at every step, then <pad>
        net.out.bias[vocab.pad_id] += 7.0
        net.out.bias[vocab.eos_id] -= 20.0  # never ends: every step is a word
    tr = Translator(net, vocab, vocab, "word", True)
    for beam in (1, 3):
        (t,) = tr.translate(["ein mann hund"], beam_size=beam, max_len=5)
        assert len(t.tokens) == 5 and not {"<bos>", "<pad>"} & set(t.tokens), t.tokens
        src = torch.tensor([vocab.encode(t.source, eos=True)])
        steps = step_through(net, src, vocab.encode(t.tokens, eos=False), vocab.bos_id)  # teacher-forced rows
        torch.testing.assert_close(t.attention.float(), steps.alphas, atol=1e-5, rtol=0)


@pytest.mark.parametrize("attention", ["bahdanau", "luong-general", "none"])
def test_a_batch_of_no_sentences_gives_an_empty_result(attention):
    """pack_padded_sequence refused them: "Cannot pack empty tensors" (the Transformer gave an empty result)."""
    model, src, lens = _model(attention), torch.zeros(0, 6, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    for beam_size in (1, 3):
        found = model.generate(src, lens, BOS, EOS, 5, beam_size=beam_size)
        assert found.tokens.size(0) == 0 and found.lengths.shape == (0,)
    logits, _ = model(src, lens, torch.zeros(0, 4, dtype=torch.long))
    assert logits.shape == (0, 4, 12)
