"""CaptionModel and Captioner: overfit tiny images to exact recall, greedy / beam search through the search protocol,
the self-contained model file and its error messages."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from captioning.model.captioner import Captioner, ModelFileError
from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.objective import caption_loss
from text_attn.core.decoding import SearchResult, beam_search, greedy_search
from text_attn.core.vocab import Vocabulary

CAPTIONS = [
    "a red circle above squares",
    "two small blue triangles",
    "a green square near circles",
    "one large yellow star",
]
TINY = EncoderConfig(backbone="resnet18", weights=None, grid=4, image_size=64, crop=False)
SMALL_DECODER = dict(embed_dim=32, hidden_dim=64, attn_dim=32, dropout=0.0)


def _batch(vocab: Vocabulary, sentences: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """captions_in = bos + words, targets = words + eos, both padded with pad (0) to the longest."""
    ids = [vocab.encode(s, bos=False, eos=False) for s in sentences]
    T = max(len(x) for x in ids) + 1
    cin = torch.zeros(len(ids), T, dtype=torch.long)
    tgt = torch.zeros(len(ids), T, dtype=torch.long)
    for b, x in enumerate(ids):
        cin[b, : len(x) + 1] = torch.tensor([vocab.bos_id, *x])
        tgt[b, : len(x) + 1] = torch.tensor([*x, vocab.eos_id])
    return cin, tgt


def _block_images() -> list[Image.Image]:
    """Four 64 px images, each a different grey with a coloured block in a different quadrant.

    (Random-noise images give a random-init CNN nearly the same features, which makes overfitting slow.)
    """
    images = []
    for k, colour in enumerate([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]):
        a = np.full((64, 64, 3), 40 * k, dtype=np.uint8)
        y, x = (k // 2) * 32, (k % 2) * 32
        a[y : y + 32, x : x + 32] = colour
        images.append(Image.fromarray(a))
    return images


@pytest.fixture(scope="module")
def trained():
    """A random-init, frozen resnet18 encoder; the decoder is trained on the 4 images' features."""
    torch.manual_seed(0)
    words = [c.split() for c in CAPTIONS]
    vocab = Vocabulary.build(words)
    captioner = Captioner.build(vocab, TINY, DecoderConfig(**SMALL_DECODER))
    model = captioner.model
    images = _block_images()
    model.eval()
    with torch.no_grad():
        feats = model.encode(torch.stack([model.encoder.preprocess(im) for im in images]))  # (4, 16, 512)
    cin, tgt = _batch(vocab, words)
    opt = torch.optim.Adam(model.decoder.parameters(), lr=1e-2)
    model.train()
    for _ in range(300):
        logits, alphas = model.decoder(feats, cin)[:2]
        loss, parts = caption_loss(logits, tgt, alphas, pad_id=vocab.pad_id, ds_lambda=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if parts["ce"].item() < 0.01:
            break
    assert parts["ce"].item() < 0.01, "the decoder did not overfit 4 captions"
    model.eval()
    return captioner, images, feats, words


def test_overfits_to_exact_recall_with_greedy_and_beam(trained):
    captioner, _, feats, words = trained
    for beam_size in (1, 3):
        out = captioner.caption_features(feats, beam_size=beam_size, max_len=12)
        assert [c.words for c in out] == words
        for w, alphas, *_ in out:
            assert alphas.shape == (len(w), feats.size(1))  # the eos step's alpha is dropped
            assert torch.allclose(alphas.sum(-1), torch.ones(len(w)), atol=1e-5)


def test_caption_images_end_to_end(trained):
    captioner, images, _, words = trained
    captioner.model.train()  # generate must switch dropout off itself, and restore the mode after
    out = captioner.caption_images(images, beam_size=3)
    assert captioner.model.training
    captioner.model.eval()
    assert [c.words for c in out] == words
    assert captioner.caption_images([]) == []


def test_beam_size_one_equals_greedy_on_an_untrained_decoder(trained):
    model = trained[0].model
    torch.manual_seed(5)
    vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", *[f"w{i}" for i in range(20)]])
    cfg = DecoderConfig(vocab_size=len(vocab), feature_dim=model.encoder.out_dim, **SMALL_DECODER)
    fresh = CaptionModel(model.encoder, ShowAttendTellDecoder(cfg)).eval()
    feats = torch.randn(6, 16, model.encoder.out_dim)
    args = (fresh, fresh.init_state(feats), 6, vocab.bos_id, vocab.eos_id, 8)
    g = greedy_search(*args)
    b = beam_search(*args, beam_size=1)
    assert torch.equal(g.tokens, b.tokens)
    assert torch.allclose(g.scores, b.scores, atol=1e-5)
    assert torch.allclose(g.attention, b.attention, atol=1e-6)
    assert g.tokens.size(1) > 1  # a random decoder does not stop at once: the comparison covers steps
    result = fresh.generate(feats, vocab.bos_id, vocab.eos_id, max_len=8, beam_size=1)  # ids: a SearchResult
    assert torch.equal(result.tokens, g.tokens)
    words = [c.words for c in Captioner(fresh, vocab).captions(result)]
    assert words == [[vocab.itos[i] for i in ids if i > 3] for ids in g.token_lists()]


def test_captions_drop_pad_and_bos_with_their_attention_rows_and_say_which_were_cut_off():
    # ids as an untrained model searching with banned=() may write them: caption 0 holds a pad and a bos among its
    # words, then eos; caption 1 ran to the length cap without eos. Each step's attention row names its step.
    vocab = Vocabulary.build([["a", "red", "circle"]])
    torch.manual_seed(0)
    captioner = Captioner.build(vocab, TINY, DecoderConfig(**SMALL_DECODER))
    a, red, circle = (vocab.stoi[w] for w in ("a", "red", "circle"))
    tokens = torch.tensor([[a, vocab.pad_id, red, vocab.bos_id, circle, vocab.eos_id], [red, red, red, red, red, red]])
    attention = torch.arange(12.0).view(2, 6, 1).expand(2, 6, 16)  # row t of caption b: 6 b + t everywhere
    result = SearchResult(tokens, torch.tensor([6, 6]), torch.tensor([-1.0, -2.0]), attention, vocab.eos_id)
    first, second = captioner.captions(result)
    assert first.words == ["a", "red", "circle"] and not first.truncated
    assert first.alphas[:, 0].tolist() == [0.0, 2.0, 4.0]  # the words' own steps: not the pad's, bos's or eos's
    assert second.words == ["red"] * 6 and second.truncated and second.alphas.shape == (6, 16)


def test_save_load_round_trip(trained, tmp_path, monkeypatch):
    captioner, images, feats, words = trained
    model = captioner.model
    path = tmp_path / "sub" / "model.pt"
    captioner.save(path)
    # Loading must never reach for downloadable weights.
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", lambda *a, **k: pytest.fail("load tried a download"))
    reloaded = Captioner.load(path)
    loaded = reloaded.model
    assert not loaded.training
    assert reloaded.vocab == captioner.vocab
    assert loaded.decoder.cfg == model.decoder.cfg
    assert loaded.encoder.preprocess == model.encoder.preprocess
    x = torch.stack([model.encoder.preprocess(im) for im in images])
    cin, _ = _batch(captioner.vocab, words)
    with torch.no_grad():
        a, b = model(x, cin), loaded(x, cin)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    out_a, out_b = captioner.caption_features(feats), reloaded.caption_features(feats)
    assert all(wa == wb and torch.equal(aa, ab) for (wa, aa, *_), (wb, ab, *_) in zip(out_a, out_b, strict=True))


def test_model_file_is_plain_tensors_and_json(trained, tmp_path):
    captioner = trained[0]
    path = tmp_path / "model.pt"
    captioner.save(path)
    data = torch.load(path, weights_only=True)
    assert data["format"] == "attention-toolkit/caption-model" and data["version"] == 1
    assert all(isinstance(v, torch.Tensor) for v in data["state_dict"].values())
    meta = {k: v for k, v in data.items() if k != "state_dict"}
    json.dumps(meta)  # raises TypeError unless everything but the tensors is JSON-able
    assert data["encoder"] == {
        "backbone": "resnet18",
        "grid": 4,
        "stride": 32,
        "fine_tune": "none",
        "image_size": 64,
        "crop": False,
        "multiscale": False,
    }
    assert data["vocab"] == captioner.vocab.to_dict()
    assert any(k.startswith("encoder.") for k in data["state_dict"])  # the encoder's weights travel too


def test_bad_model_files_raise_one_clear_error(trained, tmp_path):
    captioner = trained[0]
    with pytest.raises(ModelFileError, match="not found"):
        Captioner.load(tmp_path / "missing.pt")
    text = tmp_path / "notes.txt"
    text.write_text("just some words\n")
    with pytest.raises(ModelFileError, match="not a model file"):
        Captioner.load(text)
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(3)}, plain)
    with pytest.raises(ModelFileError, match="expected a caption-model file"):
        Captioner.load(plain)
    good = tmp_path / "model.pt"
    captioner.save(good)
    data = torch.load(good, weights_only=True)
    torch.save({**data, "version": 99}, tmp_path / "future.pt")
    with pytest.raises(ModelFileError, match="version 99 is not supported"):
        Captioner.load(tmp_path / "future.pt")
    del data["state_dict"]["decoder.L_o.weight"]
    torch.save(data, tmp_path / "broken.pt")
    with pytest.raises(ModelFileError, match="broken caption model file"):
        Captioner.load(tmp_path / "broken.pt")


def test_mismatched_parts_are_rejected(trained):
    captioner = trained[0]
    model, vocab = captioner.model, captioner.vocab
    cfg = DecoderConfig(vocab_size=len(vocab) + 1, feature_dim=model.encoder.out_dim)
    with pytest.raises(ValueError, match="vocab_size"):
        Captioner(CaptionModel(model.encoder, ShowAttendTellDecoder(cfg)), vocab)
    cfg = DecoderConfig(vocab_size=len(vocab), feature_dim=7)
    with pytest.raises(ValueError, match="feature_dim"):
        CaptionModel(model.encoder, ShowAttendTellDecoder(cfg))
    with pytest.raises(ValueError, match="decoder.vocab_size is set from the data"):
        CaptionModel.build(len(vocab), TINY, DecoderConfig(vocab_size=3))


def test_attend_on_fine_keys_the_scores_to_the_fine_channels_and_survives_save_load(tmp_path):
    vocab = Vocabulary.build([["a", "red", "circle"]])
    kw = dict(backbone="efficientnet_lite0", weights=None, stride=8, grid=4, image_size=64, crop=False)
    small = dict(hidden_dim=8, embed_dim=8, attn_dim=8)
    captioner = Captioner.build(vocab, EncoderConfig(multiscale=True, **kw), DecoderConfig(attend_on="fine", **small))
    model = captioner.model
    assert model.decoder.cfg.key_dims == model.encoder.fine_dim == 40 and model.encoder.out_dim == 152
    assert model.decoder.attention.key_proj.in_features == 40
    captioner.save(tmp_path / "m.pt")
    assert Captioner.load(tmp_path / "m.pt").model.decoder.cfg.key_dims == 40
    with pytest.raises(ValueError, match="needs multiscale"):
        CaptionModel.build(len(vocab), EncoderConfig(**kw), DecoderConfig(attend_on="fine"))
    with pytest.raises(ValueError, match="attend_on"):
        DecoderConfig(attend_on="coarse")
