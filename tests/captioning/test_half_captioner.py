"""The public Captioner on a float16 / bfloat16 model and with float16 features (the feature cache's): it captions,
reads and explains; what it hands back is float32; the explanation is the float32 copy's; float16 features are read
as their float32 values. And the caption loss with label smoothing on float16 logits stays finite."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.fast_path import cross_entropy
from text_attn.core.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = Vocabulary.build([["a", "dog", "runs", "on", "grass"], ["a", "cat", "sits"]])
HALVES = [torch.float16, torch.bfloat16]


def _captioner(region_pos: bool = True) -> Captioner:
    """region_pos: its float32 position codes meet the weights first (and would widen float16 features)."""
    torch.manual_seed(0)
    enc = EncoderConfig("resnet18", weights=None, grid=3, image_size=48)
    dec = DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, region_pos=region_pos)
    cap = Captioner.build(VOCAB, enc, dec)
    with torch.no_grad():
        for p in cap.model.decoder.parameters():
            p.mul_(3.0)  # sharper attention and words than at init
    cap.model.eval()  # as Captioner.load gives it: no dropout
    return cap


def _photos() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)) for _ in range(2)]


def _float32_copy(cap: Captioner) -> Captioner:
    return Captioner(copy.deepcopy(cap.model).float(), cap.vocab)


@pytest.mark.parametrize("dtype", HALVES)
def test_a_half_captioner_captions_and_reads_photos_in_float32_results(dtype):
    half = _captioner().to(dtype)
    full = _float32_copy(half)  # the same weights, exactly
    out = half.caption_images(_photos(), beam_size=2, max_len=6)
    ref = full.caption_images(_photos(), beam_size=2, max_len=6)
    for a, b in zip(out, ref, strict=True):
        assert a.alphas.dtype == torch.float32 and a.alphas.numpy().shape == (len(a.words), 9)
        assert a.words == b.words  # (checked for this seed: half rounding keeps these words)
        torch.testing.assert_close(a.alphas, b.alphas, atol=0.05, rtol=0)
    read, read_ref = half.read_caption(_photos(), "a dog runs"), full.read_caption(_photos(), "a dog runs")
    for a, b in zip(read, read_ref, strict=True):
        assert a.alphas.dtype == torch.float32
        # bfloat16 logits of this sharpened model (up to ~30) are rounded to 1/8: log-probabilities to about 0.2
        np.testing.assert_allclose(np.log(a.probs), np.log(b.probs), atol=0.3)
    assert {p.dtype for p in half.model.parameters()} == {dtype}  # nothing widened the user's model


@pytest.mark.parametrize("dtype", HALVES)
def test_a_half_models_explanation_is_its_float32_copys(dtype):
    half = _captioner().to(dtype)
    full = _float32_copy(half)
    _, features = full.encode_photos(_photos()[:1])  # (1, 9, 512) float32
    words = ["a", "dog", "runs"]
    got, want = half.evidence(features, words), full.evidence(features, words)
    assert got.evidence.dtype == torch.float32
    assert torch.equal(got.evidence, want.evidence) and torch.equal(got.attention, want.attention)
    assert [a if not math.isnan(a) else None for a in got.agreement] == [
        a if not math.isnan(a) else None for a in want.agreement
    ]
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a caller's autocast: the probes still in float32
        assert torch.equal(full.evidence(features, words).evidence, want.evidence)
    explained = half.explain(_photos()[0], beam_size=1, max_len=5)  # the photo through the half encoder too
    assert explained.evidence.dtype == torch.float32 and explained.evidence.shape == (len(explained.words), 9)
    assert {p.dtype for p in half.model.parameters()} == {dtype}


def test_float16_features_are_read_as_their_float32_values():
    cap = _captioner(region_pos=False)  # the features meet a weight matrix first
    _, features = cap.encode_photos(_photos())
    stored = features.half()  # as the feature cache keeps them
    got, want = cap.caption_features(stored, beam_size=2, max_len=6), cap.caption_features(stored.float(), 2, 6)
    assert [c.words for c in got] == [c.words for c in want]
    assert all(torch.equal(a.alphas, b.alphas) for a, b in zip(got, want, strict=True))
    got, want = cap.read_features(stored, "a cat sits"), cap.read_features(stored.float(), "a cat sits")
    assert [c.probs for c in got] == [c.probs for c in want]


def test_caption_cross_entropy_with_label_smoothing_is_finite_on_float16_logits():
    torch.manual_seed(0)
    logits = (torch.randn(64 * 60, 30) * 2).half()  # the smoothing term sums 115,200 log-probabilities
    targets = torch.randint(1, 30, (64 * 60,))
    loss = cross_entropy(logits, targets, ignore_index=0, label_smoothing=0.1)
    want = F.cross_entropy(logits.float(), targets, ignore_index=0, label_smoothing=0.1)
    assert torch.equal(loss, want)  # was inf
