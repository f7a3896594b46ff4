"""``caption --cuda-graphs``: the search at fixed shapes (text_attn.core.fixed_search) gives the bundled model's
captions, reaches the model from the command line, and is refused where it cannot run. The capture itself needs a
GPU: its test skips without one."""

import argparse
import json

import pytest
import torch

from captioning.commands.caption import caption_main
from captioning.model import network
from captioning.model.bundled import DEMO_PHOTOS
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from text_attn.core.decoding import search
from text_attn.core.fixed_search import _Search, fixed_search
from text_attn.core.search_options import search_options
from text_attn.core.sync_check import no_host_sync

BOS, EOS, PAD = 1, 2, 0


def _same(a, b):
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.lengths, b.lengths) and a.nbest == b.nbest
    torch.testing.assert_close(a.scores, b.scores, rtol=0, atol=0)
    torch.testing.assert_close(a.attention, b.attention, rtol=0, atol=0)


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_the_caption_decoder_searches_the_same(attention):
    torch.manual_seed(1)
    cfg = DecoderConfig(vocab_size=30, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10, attention=attention)
    dec = ShowAttendTellDecoder(cfg).eval()
    feats = torch.randn(4, 9, 12)
    for beam, ngram in [(1, 0), (3, 3), (5, 2)]:
        kw = dict(beam_size=beam, no_repeat_ngram=ngram, banned=(PAD, BOS, 3), n_best=min(beam, 2))
        eager = search(dec, dec.init_state(feats), 4, BOS, EOS, 15, pad_id=PAD, drop_ended=False, **kw)
        fixed = fixed_search(dec, dec.init_state(feats), 4, BOS, EOS, 15, pad_id=PAD, **kw)
        _same(fixed, eager)


@pytest.mark.parametrize("beam", [1, 3])
def test_steps_read_nothing_on_the_host(beam):
    # On the meta device a tensor has no values: any host read (.item(), bool(), nonzero, a data-dependent shape)
    # raises. The steps a CUDA graph would capture run there without one, on the decoder's GPU code path (the CPU's
    # fused attention score is for device "cpu" only).
    cfg = DecoderConfig(vocab_size=30, feature_dim=12, embed_dim=8, hidden_dim=16, attn_dim=10)
    dec = ShowAttendTellDecoder(cfg).eval().to("meta")
    B, N = 4, 4 * beam
    state = dec.init_state(torch.empty(B, 9, 12, device="meta"))
    if beam > 1:
        state = {**state, "h": state["h"].repeat_interleave(beam, 0), "c": state["c"].repeat_interleave(beam, 0)}
    start = {"state": state, "attn": torch.empty(11, N, 9, device="meta"), "scores": torch.empty(N, device="meta"),
            "prev": torch.empty(N, dtype=torch.long, device="meta"), "finished": torch.empty(N, dtype=torch.bool,
            device="meta"), "lengths": torch.empty(N, dtype=torch.long, device="meta"), "t": torch.empty((),
            dtype=torch.long, device="meta"), "tokens": torch.empty(11, N, dtype=torch.long, device="meta"),
            "parents": torch.empty(11, N, dtype=torch.long, device="meta"), "history": torch.empty(N, 11,
            dtype=torch.long, device="meta")}  # fmt: skip
    s = _Search(dec, B, beam, 10, EOS, PAD, 3, (PAD, BOS), start)
    s.load(start)
    with no_host_sync():  # and what the dispatcher sees refuses none of its operations
        s.chunk(3)
    with pytest.raises(Exception, match="meta"):
        bool(s.finished.all())  # the check itself: a host read fails here


@pytest.fixture(scope="module")
def bundled():
    captioner = Captioner.load()
    return captioner, captioner.encode_photos(DEMO_PHOTOS)[1]


@pytest.mark.parametrize("decoding", [dict(beam_size=1), dict(beam_size=5, length_penalty=1.0, no_repeat_ngram=3)])
def test_the_bundled_model_captions_the_same(bundled, decoding):
    captioner, features = bundled
    eager = captioner.generate(features, **decoding)
    fixed = captioner.generate(features, **decoding, capture=True)  # on the CPU: the fixed-shape steps, eagerly
    assert fixed.token_lists() == eager.token_lists()
    assert torch.equal(fixed.lengths, eager.lengths)
    torch.testing.assert_close(fixed.scores, eager.scores, rtol=0, atol=1e-4)
    torch.testing.assert_close(fixed.attention, eager.attention, rtol=0, atol=1e-5)


def test_the_flag_reaches_the_fixed_search(bundled, monkeypatch):
    captioner, features = bundled
    args = argparse.Namespace(n_best=1, no_repeat_ngram=0, sample=False, cuda_graphs=True)
    options = search_options(args)
    assert options["capture"] is True
    calls = []
    real = network.fixed_search
    monkeypatch.setattr(network, "fixed_search", lambda *a, **k: calls.append(k) or real(*a, **k))
    captioner.generate(features[:2], beam_size=2, **options)
    assert len(calls) == 1 and calls[0]["capture"] is True
    assert "capture" not in search_options(argparse.Namespace(n_best=1, no_repeat_ngram=0, sample=False))


@pytest.mark.parametrize(
    "args, says",
    [
        (
            ["--cuda-graphs", "--device", "cpu"],
            "--cuda-graphs captures the search on a GPU: give it with --device cuda (not cpu)",
        ),
        pytest.param(
            ["--cuda-graphs"],
            "--device auto found none here",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="auto chooses the GPU here"),
        ),
        (["--cuda-graphs", "--device", "cuda", "--sample"], "--sample draws its words eagerly"),
    ],
)
def test_refused_where_it_cannot_run(capsys, args, says):
    with pytest.raises(SystemExit) as stop:
        caption_main([str(DEMO_PHOTOS[0]), *args])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the capture needs a CUDA GPU (none here)")
def test_captured_on_a_gpu_captions_as_the_eager_search(tmp_path):
    out = {}
    for name, extra in (("eager", []), ("captured", ["--cuda-graphs"])):
        path = tmp_path / f"{name}.jsonl"
        assert caption_main([*map(str, DEMO_PHOTOS), "--device", "cuda", "--jsonl", str(path), *extra]) == 0
        out[name] = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["caption"] for r in out["captured"]] == [r["caption"] for r in out["eager"]]
    for a, b in zip(out["captured"], out["eager"], strict=True):
        assert max(abs(x - y) for ra, rb in zip(a["attention"], b["attention"], strict=True)
                   for x, y in zip(ra, rb, strict=True)) <= 0.01  # fmt: skip
