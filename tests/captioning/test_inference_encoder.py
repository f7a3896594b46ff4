"""The folded inference copy of a frozen EfficientNet-Lite (captioning.model.inference_encoder) computes what the plain
body computes, for every Lite backbone, odd and even input sizes and the multiscale tap; it is used only without
gradients, and made again when the weights change."""

from __future__ import annotations

import pytest
import torch

from captioning.model.encoder import ImageEncoder
from captioning.model.inference_encoder import fold_for_inference

pytestmark = pytest.mark.usefixtures("one_thread")


def _plain(enc: ImageEncoder, x: torch.Tensor) -> torch.Tensor:
    enc.fold_for_inference = False
    try:
        return enc(x)
    finally:
        enc.fold_for_inference = True


@pytest.mark.parametrize(
    "backbone, size, stride, multiscale",
    [
        ("efficientnet_lite0", 97, 32, False),  # odd: every strided layer pads asymmetrically
        ("efficientnet_lite0", 64, 8, True),
        ("efficientnet_lite1", 80, 16, False),
        ("efficientnet_lite2", 66, 32, False),
    ],
)
@torch.no_grad()
def test_folded_body_equals_the_plain_one(backbone, size, stride, multiscale):
    torch.manual_seed(0)
    enc = ImageEncoder(backbone, grid=3, weights=None, stride=stride, multiscale=multiscale).eval()
    for m in enc.modules():  # random BatchNorm statistics: an identity BN would hide a wrong fold
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
    assert enc.fold_for_inference
    x = torch.randn(2, 3, size, size)
    plain, folded = _plain(enc, x), enc(x)
    assert enc._folded is not None  # the folded copy ran
    torch.testing.assert_close(folded, plain, rtol=1e-4, atol=1e-4 * plain.abs().max().item())
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in enc._folded[1].modules())
    assert n_bn == 0 and sum(isinstance(m, torch.nn.BatchNorm2d) for m in enc.body.modules()) > 10


def test_folded_copy_follows_the_weights_and_needs_no_grad():
    enc = ImageEncoder("efficientnet_lite0", grid=2, weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
        again = enc(x)
        made = enc._folded[1]
        assert enc(x) is not None and enc._folded[1] is made  # reused while the weights stay
        state = {k: v * 1.5 if v.is_floating_point() and "running_var" not in k else v
                 for k, v in enc.state_dict().items()}  # fmt: skip
        enc.load_state_dict(state)
        changed = enc(x)
        assert enc._folded[1] is not made  # loaded weights: folded again
        torch.testing.assert_close(changed, _plain(enc, x), rtol=1e-4, atol=1e-4 * changed.abs().max().item())
    assert torch.equal(first, again) and not torch.allclose(first, changed)
    # with gradients (a trainable or probed encoder) the plain body runs: the folded copy has no gradient path
    enc._folded = None
    enc(x)
    assert enc._folded is None
    assert "_folded" not in "".join(enc.state_dict())


def test_fold_for_inference_leaves_the_original_alone():
    enc = ImageEncoder("efficientnet_lite0", grid=2, weights=None)
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    fold_for_inference(enc.body)
    after = enc.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


@torch.no_grad()
def test_the_first_encode_draws_nothing_from_the_global_random_stream():
    """The folded layers were built with their random init, drawn from torch's global generator and then overwritten:
    a fit that encoded its photos (no feature cache on disk yet) trained with other dropout masks than the same
    config and seed reading them."""
    enc = ImageEncoder("efficientnet_lite0", grid=2, weights=None, stride=8, multiscale=True).eval()
    x = torch.randn(1, 3, 64, 64)
    before = torch.get_rng_state()
    enc(x)  # the folded copy is made here
    assert enc._folded is not None and torch.equal(torch.get_rng_state(), before)


@torch.no_grad()
def test_the_folded_copy_keeps_the_bodys_device_and_dtype():
    """A body moved elsewhere folds into a copy there: `caption --device cuda` once ran CPU convolutions on CUDA
    input (found on a GPU). The CPU stand-in for a device is the dtype: a float64 body folds into float64 layers."""
    torch.manual_seed(0)
    enc = ImageEncoder("efficientnet_lite0", grid=2, weights=None, stride=16).eval().double()
    x = torch.randn(1, 3, 64, 64, dtype=torch.float64)
    folded = enc(x)
    assert {p.dtype for p in enc._folded[1].parameters()} == {torch.float64}
    assert {p.device for p in enc._folded[1].parameters()} == {x.device}
    torch.testing.assert_close(folded, _plain(enc, x), rtol=1e-9, atol=1e-9 * folded.abs().max().item())
