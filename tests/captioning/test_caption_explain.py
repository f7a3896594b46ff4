"""The captioning family's faithfulness hooks (captioning.model.explain, issue 73): a removal with nothing removed gives
the model's own probability; the per-mask mixing equals re-running the step on the modified regions; gradient x input
and Grad-CAM against autograd written out; the attention interventions with the word's own α reproduce the model's
distribution; pixel space greys the right pixels and encodes a recurring mask once; an ensemble's probes work."""

from __future__ import annotations

import pytest
import torch

from captioning.model import explain
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.ensemble import DecoderEnsemble
from text_attn.core.faithfulness import measure_word
from text_attn.core.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = Vocabulary.build([["a", "dog", "runs", "on", "grass"], ["a", "cat", "sits"]])


def _model(attention: str = "soft", members: int = 1, **decoder):
    torch.manual_seed(0)
    enc = EncoderConfig("resnet18", weights=None, grid=3, image_size=48)
    cap = Captioner.build(VOCAB, enc, DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, attention=attention,
                                                    **decoder))  # fmt: skip
    if members > 1:
        torch.manual_seed(1)
        cap.model.decoder = DecoderEnsemble([cap.model.decoder] + [type(cap.model.decoder)(cap.model.decoder.cfg)
                                                                   for _ in range(members - 1)])  # fmt: skip
    with torch.no_grad():
        for p in cap.model.decoder.parameters():
            p.mul_(3.0)  # sharper attention and words than at init: differences a test can see
    cap.model.eval()
    return cap


def _steps(cap, tokens=(4, 5, 6, 2)):
    torch.manual_seed(2)
    image = torch.randn(3, 48, 48)
    with torch.no_grad():
        feats = cap.model.encode(image[None])  # (1, 9, 512)
    return image, explain.step_through(cap.model, feats, list(tokens), VOCAB.bos_id)


@pytest.mark.parametrize(
    ("attention", "members", "decoder"),
    [("soft", 1, {}), ("soft", 2, {}), ("hard", 1, {"hard_inference": "argmax"}),
     ("hard", 1, {"hard_inference": "expect"}), ("soft", 1, {"gate": "vector", "region_pos": True})],
)  # fmt: skip
def test_removal_is_the_step_on_the_modified_regions(attention, members, decoder):
    """RegionRemoval.prob's shared-state arithmetic (no K copies of the regions) against the decoder's own step."""
    cap = _model(attention, members, **decoder)
    _, words = _steps(cap)
    model, feats = cap.model, words.features
    fill = explain.photo_fill(model, feats)
    removal = explain.RegionRemoval(model, words, fill)
    torch.manual_seed(3)
    removed = torch.rand(6, 9) < 0.4
    removed[0] = False
    for t in range(len(words.tokens)):
        got = removal.prob(t, removed)  # (6,)
        assert got[0].item() == pytest.approx(words.probs[t].item(), abs=1e-6)  # nothing removed: its own p
        modified = torch.where(removed[..., None], fill, feats.expand(6, -1, -1))  # (6, 9, D) written out
        state = explain._state_with_regions(model, words, t, modified)
        prev = torch.full((6,), VOCAB.bos_id if t == 0 else words.tokens[t - 1])
        log_probs, _, _ = model.step(prev, state)
        torch.testing.assert_close(got, log_probs[:, words.tokens[t]].exp(), rtol=1e-5, atol=1e-6)
        assert removal._shared_state_prob(t, removed) is not None  # the arithmetic above was the shared-state one
        torch.testing.assert_close(removal._step_prob(t, removed), got, rtol=1e-5, atol=1e-6)  # and the fallback
    # the state a word starts from is left as it was (the next probe of the same photo starts from it again)
    before = {k: v.clone() for k, v in words.states[2].items() if isinstance(v, torch.Tensor)}
    removal.prob(2, torch.ones(3, 9, dtype=torch.bool))
    assert all(torch.equal(words.states[2][k], v) for k, v in before.items()) and before


def test_every_region_removed_leaves_the_photos_mean_whatever_the_attention():
    """The default fill is the photo's mean region: with every region removed the context is that mean, as uniform
    attention over the photo's own regions reads it (module doc of photo_fill)."""
    cap = _model()
    _, words = _steps(cap)
    fill = explain.photo_fill(cap.model, words.features)
    torch.testing.assert_close(fill, words.features[0].mean(dim=0))
    removal = explain.RegionRemoval(cap.model, words, fill)
    for t in range(len(words.tokens)):
        uniform = explain.next_word_probs(cap.model, words, t, torch.full((1, 9), 1 / 9))[0, words.tokens[t]]
        got = removal.prob(t, torch.ones(1, 9, dtype=torch.bool))[0]
        assert got.item() == pytest.approx(uniform.item(), rel=1e-5)


def test_gradient_and_gradcam_against_autograd_written_out():
    cap = _model()
    _, words = _steps(cap)
    model, t = cap.model, 2
    scores = explain.gradient_scores(model, words, t)
    feats = words.features.clone().requires_grad_(True)
    state = {**words.states[t], "keys": model.decoder._keys(feats)}
    log_probs, _, _ = model.decoder.step(torch.tensor([words.tokens[t - 1]]), state)
    (grad,) = torch.autograd.grad(log_probs[0, words.tokens[t]], feats)
    a, g = feats.detach()[0], grad[0]  # (9, D)
    torch.testing.assert_close(scores["gradient"], (a * g).sum(-1))
    weights = [float(g[:, d].mean()) for d in range(a.size(1))]  # Grad-CAM: each channel's mean gradient
    cam = torch.tensor([max(0.0, sum(float(a[i, d]) * w for d, w in enumerate(weights))) for i in range(9)])
    torch.testing.assert_close(scores["gradcam"], cam, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("attention", "inference"), [("soft", "argmax"), ("hard", "argmax"), ("hard", "expect")])
def test_the_words_own_alpha_gives_the_models_own_distribution(attention, inference):
    cap = _model(attention, hard_inference=inference)
    _, words = _steps(cap)
    for t in range(len(words.tokens)):
        probs = explain.next_word_probs(cap.model, words, t, torch.stack([words.alphas[t], torch.full((9,), 1 / 9)]))
        assert probs.shape == (2, len(VOCAB))
        torch.testing.assert_close(probs[0, words.tokens[t]], words.probs[t], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    ensemble = _model(members=2)
    _, e_words = _steps(ensemble)
    with pytest.raises(ValueError, match="one decoder"):
        explain.next_word_probs(ensemble.model, e_words, 0, e_words.alphas[:1])
    probes = explain.region_probes(ensemble.model, e_words, explain.photo_fill(ensemble.model, e_words.features))
    assert all(p.next_word_probs is None for p in probes)  # no interventions for an ensemble: not one α


def test_pixel_blocks_grey_their_pixels_and_encode_a_recurring_mask_once(monkeypatch):
    cap = _model()
    image, words = _steps(cap)
    blocks = explain.PhotoBlocks(cap.model, image, words.tokens, VOCAB.bos_id, block=1)  # 3 x 3 grid: 9 units
    assert blocks.n_units == 9 and blocks.unit_of_region().tolist() == list(range(9))
    removed = torch.zeros(2, 9, dtype=torch.bool)
    removed[1, 4] = True  # the centre block
    masks = blocks.pixel_masks(removed)  # (2, 1, 48, 48)
    assert not masks[0].any() and masks[1, 0, 16:32, 16:32].all() and int(masks[1].sum()) == 16 * 16
    encoded: list[int] = []
    real = cap.model.encode

    def counting(images):
        encoded.append(images.size(0))
        return real(images)

    monkeypatch.setattr(cap.model, "encode", counting)
    probs = blocks.probs(removed)  # (2, T)
    torch.testing.assert_close(probs[0], words.probs, rtol=1e-5, atol=1e-6)  # nothing greyed: its own p
    assert not torch.allclose(probs[1], words.probs)
    blocks.probs(removed.flip(0))  # the same masks again: nothing encoded
    assert sum(encoded) == 2
    coarse = explain.PhotoBlocks(cap.model, image, words.tokens, VOCAB.bos_id, block=3)
    assert coarse.n_units == 1 and coarse.pool(words.alphas).squeeze(-1).allclose(torch.ones(len(words.tokens)))
    with pytest.raises(ValueError, match="does not tile"):
        explain.PhotoBlocks(cap.model, image, words.tokens, VOCAB.bos_id, block=2)


def test_a_whole_word_measured_through_the_captioning_probes():
    cap = _model()
    _, words = _steps(cap)
    probes = explain.region_probes(cap.model, words, explain.photo_fill(cap.model, words.features))
    result = measure_word(probes[1], "dog", random_draws=2, other_alpha=words.alphas[2])
    assert result.p_full == pytest.approx(words.probs[1].item(), abs=1e-6)
    assert set(result.rankings) == {"attention", "random", "leave_one_out", "gradient", "gradcam"}
    assert result.rankings["leave_one_out"].tau == pytest.approx(1.0)
    assert set(result.interventions) == {"uniform", "permuted", "other"}
    assert all(0.0 <= r.tv <= 1.0 for r in result.interventions.values())
