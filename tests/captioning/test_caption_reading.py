"""Reading a caption someone wrote (captioning.model.reading, ``Captioner.read_features`` / ``read_caption``): the
model's own caption read back gives the search's attention and log-probability (greedy and beam, soft and hard
attention, one decoder and an ensemble); a decoder's reading equals its teacher-forced training pass; an ensemble's
is the mean of its members' probabilities; words as written, unknown words read as <unk>."""

import dataclasses
import math
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from captioning.model.captioner import Captioner
from captioning.model.decoder import ShowAttendTellDecoder
from captioning.model.ensemble import DecoderEnsemble
from captioning.model.network import CaptionModel
from captioning.model.reading import caption_tokens, given_words
from captioning.training.shapes import VOCAB, make_scene
from text_attn.core.vocab import Vocabulary

PHOTO = Path(__file__).parent.parent / "fixtures" / "images" / "coffee.png"

pytestmark = pytest.mark.usefixtures("one_thread")


def _vocab() -> Vocabulary:
    return Vocabulary.build([list(VOCAB)])


def _shapes(attention: str = "soft", noise: float = 0.0) -> Captioner:
    """The bundled shapes model (trained: its captions end), its decoder as a hard-attention one when asked (the same
    weights: the scorer sits one level down), or with ``noise`` added to its weights (another ensemble member)."""
    cap = Captioner.load("shapes")
    dec = cap.model.decoder
    if attention == "hard":
        hard = ShowAttendTellDecoder(dataclasses.replace(dec.cfg, attention="hard"))
        state = {k.replace("attention.", "attention.scorer.", 1): v for k, v in dec.state_dict().items()}
        hard.load_state_dict(state)
        cap.model.decoder = hard.eval()
    if noise:
        torch.manual_seed(7)
        with torch.no_grad():
            for p in cap.model.decoder.parameters():
                p.add_(noise * torch.randn_like(p) * p.abs().mean())
    return cap


def _ensemble() -> Captioner:
    a, b = _shapes(), _shapes(noise=0.2)
    model = CaptionModel(a.model.encoder, DecoderEnsemble([a.model.decoder, b.model.decoder]))
    return Captioner(model, a.vocab)


def _features(captioner: Captioner, n: int = 4) -> torch.Tensor:
    size = captioner.preprocess.image_size
    scenes = [make_scene(random.Random(seed), size=size).image for seed in range(n)]
    return captioner.encode_photos(scenes)[1]  # (n, L, D)


def _read_back(captioner: Captioner, beam: int) -> int:
    """Each photo's own caption (beam search, no length penalty) read back: the same attention, and the search's
    score is the reading's total log-probability. Returns how many captions ended (not cut at max_len)."""
    feats = _features(captioner)
    ended = 0
    for b, own in enumerate(captioner.caption_features(feats, beam_size=beam, max_len=12, length_penalty=0.0)):
        if not own.words:
            continue
        (read,) = captioner.read_features(feats[b : b + 1], " ".join(own.words))
        assert read.words == own.words
        # 1e-5: the search steps a batch of beams and the reading one row; fp32 sums differ in the last bits
        # (1.5e-6 seen on one machine kind)
        torch.testing.assert_close(read.alphas, own.alphas, rtol=0, atol=1e-5)
        logs = [math.log(p) for p in read.probs] + ([] if own.truncated else [math.log(read.end_prob)])
        assert sum(logs) == pytest.approx(own.score, abs=1e-4)
        ended += not own.truncated
    return ended


@pytest.mark.parametrize("attention", ["soft", "hard"])
@pytest.mark.parametrize("beam", [1, 3])
def test_the_models_own_caption_reads_back_as_the_search_found_it(attention, beam):
    assert _read_back(_shapes(attention), beam) > 0  # at least one caption ended: its end's probability was checked


def test_an_ensemble_reads_its_own_caption_back_too():
    assert _read_back(_ensemble(), 3) > 0


def test_a_decoders_reading_is_its_teacher_forced_training_pass():
    cap = _shapes()
    feats, v = _features(cap, 2), cap.vocab
    text = "a red circle above a blue square"
    ids = [v.stoi[w] for w in text.split()]
    reads = cap.read_features(feats, text)
    dec = cap.model.decoder.eval()
    with torch.no_grad():  # the training path: bos + words in, next-word logits for every step at once
        out = dec(feats, torch.tensor([[v.bos_id, *ids]] * 2))
    log_probs = F.log_softmax(out.logits, dim=-1)  # (2, T + 1, V)
    for b, read in enumerate(reads):
        want = log_probs[b].gather(1, torch.tensor([*ids, v.eos_id])[:, None]).squeeze(1)
        got = torch.tensor([*read.probs, read.end_prob]).log()
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        torch.testing.assert_close(read.alphas, out.alphas[b, :-1], rtol=0, atol=1e-5)
        assert read.score == pytest.approx(float(want.mean()), abs=1e-5)
        torch.testing.assert_close(read.alphas.sum(-1), torch.ones(len(ids)))


def test_an_ensembles_reading_is_the_mean_of_its_members_probabilities():
    ens = _ensemble()
    feats = _features(ens, 2)
    text = "a green triangle"
    members = [Captioner(CaptionModel(ens.model.encoder, dec), ens.vocab) for dec in ens.model.decoder.members]
    reads = [m.read_features(feats, text) for m in members]
    for b, read in enumerate(ens.read_features(feats, text)):
        mean = torch.tensor([[*r[b].probs, r[b].end_prob] for r in reads]).mean(0)
        torch.testing.assert_close(torch.tensor([*read.probs, read.end_prob]), mean, rtol=0, atol=1e-6)
        torch.testing.assert_close(read.alphas, (reads[0][b].alphas + reads[1][b].alphas) / 2, rtol=0, atol=1e-6)


def test_words_as_written_and_unknown_words_read_as_unk():
    v = _vocab()
    assert caption_tokens("A red, circle!") == ["a", "red", "circle"]
    given = given_words("A Zorblax above a red circle; a zorblax.", v)
    assert given.words == ["A", "Zorblax", "above", "a", "red", "circle", "a", "zorblax"]
    assert given.unknown == ["Zorblax", "zorblax"] and given.ids.count(v.unk_id) == 2
    assert given.ids[2:6] == [v.stoi[w] for w in ("above", "a", "red", "circle")]
    cap = _shapes()
    feats = _features(cap, 1)
    (cased,) = cap.read_features(feats, "A RED Circle")
    (lower,) = cap.read_features(feats, "a red circle")
    assert cased.words == ["A", "RED", "Circle"] and cased.probs == lower.probs
    (unk,) = cap.read_features(feats, "a zorblax circle")
    (by_id,) = cap.read_features(feats, "a qqq circle")
    assert unk.probs == by_id.probs  # any unknown word is the same <unk>
    with pytest.raises(ValueError, match="no words"):
        cap.read_features(feats, " ,.! ")


def test_a_given_caption_reads_typographic_apostrophes_as_its_vocabulary_was_built():
    """A vocabulary built today reads "aujourd’hui" as "aujourd'hui" (shown as typed); one built from captions that
    kept ’ (before the fold) reads a caption as written, as it did."""
    folded = Vocabulary.build([["un", "chien", "aujourd'hui"]])
    given = given_words("Un chien aujourd’hui, c‘est", folded)
    assert given.words == ["Un", "chien", "aujourd’hui", "c‘est"]
    assert given.ids[:3] == [folded.stoi[w] for w in ("un", "chien", "aujourd'hui")] and given.unknown == ["c‘est"]
    kept = Vocabulary.build([["un", "chien", "aujourd’hui"]])
    assert given_words("Un chien aujourd’hui", kept).ids == [kept.stoi[w] for w in ("un", "chien", "aujourd’hui")]
    assert given_words("aujourd'hui c‘est", kept).words == ["aujourd'hui", "c", "est"]  # split at ‘, as before


def test_read_caption_on_a_photo_file():
    cap = _shapes()
    (read,) = cap.read_caption([PHOTO], "a red circle")
    assert read.name == "coffee.png" and read.photo is not None and read.grid == cap.grid
    assert len(read.probs) == len(read.words) == 3 and 0 < read.end_prob <= 1
    assert read.alphas.shape == (3, cap.grid * cap.grid)
    assert cap.read_caption([], "a red circle") == []


def test_several_captions_read_at_once_as_one_by_one():
    """read_texts computes the photos' first state once for all its captions: the same readings as one at a time."""
    cap = _ensemble()
    feats = _features(cap, 3)
    texts = ["a green triangle", "a small red circle above a blue square", "there is a single diamond"]
    for text, together in zip(texts, cap.read_texts(feats, texts), strict=True):
        for alone, read in zip(cap.read_features(feats, text), together, strict=True):
            assert read.probs == alone.probs and read.end_prob == alone.end_prob and read.score == alone.score
            assert torch.equal(read.alphas, alone.alphas)
