"""``luong-dot`` is Luong et al. 2015's eq. 8, s_tᵀ h̄_s over the encoder states as they are: no parameters. Until
2026-12-02 it projected the states first (a Linear with bias, ``key_in``), which softmax makes luong-general's score;
the model files and checkpoints written then load as they were built and translate as before."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.translator import Translator

BOS, EOS = 1, 2
SIZES = {"embed_dim": 8, "enc_hidden": 8, "attn_dim": 8, "dropout": 0.0}  # encoder states: 2 x 8 = 16 wide

pytestmark = pytest.mark.usefixtures("one_thread")


def _by_hand(m: Seq2Seq, keys=lambda states: states) -> None:
    """Luong's decoder over ``keys`` of the encoder states h̄_s, step by step against the network's teacher forcing:
    s_t = RNN([E y; h~_{t-1}], s_{t-1}); score = s_tᵀ k_s; c_t = Σ α k_s; h~_t = tanh(W_c [s_t; c_t])."""
    src = torch.tensor([[5, 6, 7, EOS], [9, EOS, 0, 0]])
    lens, tgt = torch.tensor([4, 2]), torch.tensor([[BOS, 8, 7], [BOS, 5, 9]])
    logits, attn = m(src, lens, tgt)
    states, final = m.encoder(src, lens)  # (B, S, 16)
    k = keys(states)
    s = torch.tanh(m.bridge(final))
    feed = torch.zeros_like(s)
    for t in range(3):
        s = m.cell(torch.cat([m.embed(tgt[:, t]), feed], -1), s)
        alpha = torch.softmax(torch.einsum("bh,bsh->bs", s, k).masked_fill(src == 0, float("-inf")), -1)
        feed = torch.tanh(m.hidden_out(torch.cat([s, torch.einsum("bs,bsh->bh", alpha, k)], -1)))
        torch.testing.assert_close(attn[:, t], alpha, atol=1e-6, rtol=0)
        torch.testing.assert_close(logits[:, t], m.out(feed), atol=1e-5, rtol=0)


def test_luong_dot_scores_the_raw_encoder_states_by_hand():
    torch.manual_seed(0)
    m = Seq2Seq(Seq2SeqConfig(12, 12, attention="luong-dot", dec_hidden=16, **SIZES)).eval()
    assert not [name for name in m.state_dict() if name.startswith(("key_in", "attn"))]  # eq. 8 has no parameters
    _by_hand(m)


@pytest.mark.parametrize(("bidirectional", "size"), [(True, "16: 2 x enc_hidden"), (False, "8: enc_hidden")])
def test_luong_dot_refuses_a_decoder_state_of_another_size(bidirectional, size):
    with pytest.raises(ValueError) as err:
        Seq2SeqConfig(12, 12, attention="luong-dot", dec_hidden=24, bidirectional=bidirectional, **SIZES)
    message = str(err.value)
    assert "\n" not in message and f"dec_hidden (24) must equal their size ({size})" in message
    assert "luong-general" in message and "set dec_hidden to" in message
    Seq2SeqConfig(12, 12, attention="luong-general", dec_hidden=24, **SIZES)  # the others take any size


def _old_file(net: Seq2Seq, path) -> Translator:
    """``net`` (built with dot_projection, as luong-dot was until 2026-12-02) in a model file as the code of then
    wrote it: its config says nothing of the projection."""
    vocab = _vocab()
    translator = Translator(net.eval(), vocab, vocab, "word")
    data = torch.load(translator.save(path), weights_only=True)
    del data["config"]["dot_projection"]
    torch.save(data, path)
    return translator


def _vocab():
    from text_attn.core.vocab import Vocabulary

    return Vocabulary.build([["ein", "mann", "hund", "sieht", "a", "man", "dog", "sees"]])


def _same_translations(ours: Translator, theirs: Translator) -> None:
    sentences = ["ein mann sieht hund", "hund sieht ein mann ein hund"]
    for a, b in zip(ours.translate(sentences, max_len=6), theirs.translate(sentences, max_len=6), strict=True):
        assert a.tokens == b.tokens
        torch.testing.assert_close(a.attention, b.attention, atol=0, rtol=0)


def test_an_old_luong_dot_model_file_translates_as_before(tmp_path):
    torch.manual_seed(0)  # dec_hidden 24 beside states 16 wide: the projection made any size fit
    net = Seq2Seq(Seq2SeqConfig(len(_vocab()), len(_vocab()), attention="luong-dot", dec_hidden=24,
                                dot_projection=True, **SIZES))  # fmt: skip
    before = _old_file(net, tmp_path / "old.pt")
    loaded = Translator.load(tmp_path / "old.pt")
    assert loaded.net.cfg.dot_projection and isinstance(loaded.net.key_in, torch.nn.Linear)
    _same_translations(loaded, before)
    again = torch.load(loaded.save(tmp_path / "again.pt"), weights_only=True)  # saved again, it says so
    assert again["config"]["dot_projection"] is True
    _by_hand(net.eval(), net.key_in)  # the old code's: keys W h̄_s + b, scored and summed as they are


def _module(**model) -> TranslationModule:
    """A module built on a tiny reorder task as text-train's fit builds it (no Trainer)."""
    dm = TranslationDataModule(task="reorder", train_size=40, val_size=4, test_size=4, batch_size=8)
    dm.setup("fit")
    torch.manual_seed(0)
    module = TranslationModule(**model)
    module.trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")
    return module


def test_an_old_luong_dot_checkpoint_loads_resumes_and_starts_a_run_as_it_was_built(tmp_path):
    network = {"attention": "luong-dot", "dec_hidden": 16, **SIZES}  # sizes that fit either way: only the file tells
    old = _module(network={**network, "dot_projection": True})
    checkpoint = {"state_dict": old.state_dict()}
    old.on_save_checkpoint(checkpoint)
    del checkpoint["model_metadata"]["config"]["dot_projection"]  # as the code of before 2026-12-02 wrote it
    sentences = [" ".join(e.src) for e in old.trainer.datamodule.splits["val"].examples]
    expected = [t.tokens for t in old.translator().translate(sentences)]
    # load_from_checkpoint's way: the network built from the checkpoint alone
    loaded = TranslationModule(network=network)
    loaded.on_load_checkpoint(checkpoint)
    loaded.load_state_dict(checkpoint["state_dict"])
    assert [t.tokens for t in loaded.translator().translate(sentences)] == expected
    # fit / validate --ckpt_path: setup built today's luong-dot from the options; the checkpoint's is built instead
    resumed = _module(network=network)
    assert isinstance(resumed.net.key_in, torch.nn.Identity)
    resumed.on_load_checkpoint(checkpoint)  # was: unexpected keys net.key_in.weight, net.key_in.bias
    resumed.load_state_dict(checkpoint["state_dict"])
    assert [t.tokens for t in resumed.translator().translate(sentences)] == expected
    # model.init_from an old model file: its network as it was built, its weights loaded
    path = tmp_path / "old.pt"
    data = torch.load(old.translator().save(path), weights_only=True)
    del data["config"]["dot_projection"]
    torch.save(data, path)
    started = _module(network=network, init_from=str(path))
    assert started.net.cfg.dot_projection
    assert [t.tokens for t in started.translator().translate(sentences)] == expected
