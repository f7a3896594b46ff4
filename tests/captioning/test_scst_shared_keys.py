"""SCST's captioning side scores an image's K samples against ONE projection of its region keys: the decoder's
``rows`` and the model's ``copies`` must give what K copies of the features give, in values and gradients, and the
self-critical loss must not depend on how the samples are grouped by length."""

from __future__ import annotations

import pytest
import torch

from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.objective import CaptionReward, self_critical_step
from text_attn.core.decoding import Sampling
from text_attn.core.vocab import Vocabulary

WORDS = "a red blue circle square big small".split()


def _model(attention: str = "soft", fast_path: bool = True) -> tuple[CaptionModel, Vocabulary, torch.Tensor]:
    torch.manual_seed(0)
    vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", *WORDS])
    enc = EncoderConfig(backbone="resnet18", weights=None, grid=2, stride=32, image_size=64, crop=False)
    dec = DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, dropout=0.0, attention=attention, fast_path=fast_path)
    model = CaptionModel.build(len(vocab), enc, dec)
    return model, vocab, torch.randn(3, 4, model.decoder.cfg.feature_dim)  # three "images", four regions each


@pytest.mark.parametrize("fast_path", [True, False])
def test_decoder_rows_equal_repeated_features_in_values_and_gradients(fast_path):
    model, vocab, features = _model(fast_path=fast_path)
    model.eval()  # SCST scores in eval mode
    rows = torch.tensor([2, 0, 0, 1, 2, 2])  # six captions of the three images, in any order
    captions = torch.randint(4, len(vocab), (6, 5))
    shared = model.decoder(features, captions, rows=rows)
    g_shared = torch.autograd.grad(shared.logits.square().sum(), list(model.decoder.parameters()))
    copied = model.decoder(features[rows], captions)
    g_copied = torch.autograd.grad(copied.logits.square().sum(), list(model.decoder.parameters()))
    torch.testing.assert_close(shared.logits, copied.logits)
    torch.testing.assert_close(shared.alphas, copied.alphas)
    for a, b in zip(g_shared, g_copied, strict=True):
        torch.testing.assert_close(a, b)


def test_generate_copies_equal_repeated_features():
    model, vocab, features = _model()
    bos, eos = vocab.bos_id, vocab.eos_id
    a = model.generate(features, bos, eos, 8, sampling=Sampling(seed=3), copies=4)
    b = model.generate(features.repeat_interleave(4, 0), bos, eos, 8, sampling=Sampling(seed=3))
    assert a.tokens.shape[0] == 12 and torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths)
    torch.testing.assert_close(a.attention, b.attention)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_self_critical_loss_is_the_same_scored_in_groups_or_at_once(attention):
    model, vocab, features = _model(attention)
    references = [[["a", "red", "circle"]], [["a", "blue", "square"]], [["a", "big", "red", "square"]]]
    reward = CaptionReward(references, bleu=1.0)
    results = []
    for groups in (1, 4):
        torch.manual_seed(5)  # the same draws both times
        loss, stats = self_critical_step(
            model, vocab, features, references, reward, samples=5, baseline="leave_one_out", max_len=8,
            max_groups=groups,
        )  # fmt: skip
        grads = torch.autograd.grad(loss, list(model.decoder.parameters()), allow_unused=True)
        results.append((loss, stats, grads))
    (l1, s1, g1), (l4, s4, g4) = results
    assert s1["tokens"] > 1  # samples of several lengths, so the groups really differ from one batch
    torch.testing.assert_close(l1, l4)
    for a, b in zip(g1, g4, strict=True):
        if a is None:
            assert b is None
        else:
            torch.testing.assert_close(a, b)


def test_generate_copies_with_keys_draw_each_images_copies_as_in_any_batch():
    model, vocab, features = _model()
    bos, eos, run = vocab.bos_id, vocab.eos_id, Sampling(seed=3, temperature=2.0)
    keys = torch.tensor([5, 17, 2**40])  # (3,) one key an image
    together = model.generate(features, bos, eos, 8, sampling=run, copies=4, keys=keys).token_lists()
    alone = model.generate(features[1:2], bos, eos, 8, sampling=run, copies=4, keys=keys[1:2]).token_lists()
    assert together[4:8] == alone  # image 1's four samples, drawn beside the others or alone
    assert len({tuple(ids) for ids in together}) > 4  # the copies draw apart
