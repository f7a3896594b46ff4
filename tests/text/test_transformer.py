"""The Transformer: shapes, causality, padding invariance, cached decoding vs recomputation, search, training, CLI."""

import math
from pathlib import Path

import pytest
import torch

from text_attn.core.decoding import beam_search, greedy_search
from text_attn.translation.transformer import (
    DecoderLayer,
    EncoderLayer,
    Transformer,
    TransformerConfig,
    sinusoid_table,
)
from text_attn.translation.translator import Translator

V_SRC, V_TGT, BOS, EOS, PAD = 13, 11, 1, 2, 0
FIXTURE = str(Path(__file__).parent.parent / "fixtures/text/tiny_transformer.yaml")


def _model(**kw) -> Transformer:
    torch.manual_seed(0)
    opts = {"d_model": 16, "num_heads": 4, "enc_layers": 2, "dec_layers": 2, "ff_dim": 32, **kw}
    return Transformer(TransformerConfig(V_SRC, V_TGT, **opts)).eval()


def _batch():
    """Three sources of lengths 5, 3, 1 (padded) and target prefixes (bos ...), the last two padded."""
    torch.manual_seed(1)
    lens = torch.tensor([5, 3, 1])
    src = torch.randint(3, V_SRC, (3, 5)) * (torch.arange(5) < lens.unsqueeze(1))
    tgt = torch.randint(3, V_TGT, (3, 6))
    tgt[:, 0] = BOS
    tgt[1, 4:] = PAD
    tgt[2, 2:] = PAD
    return src, lens, tgt


VARIANTS = [{}, {"norm_first": True}, {"positions": "learned", "max_len": 32}, {"tie_output": False}]


@pytest.mark.parametrize("kw", VARIANTS)
def test_shapes_and_attention_rows(kw):
    model = _model(**kw)
    src, lens, tgt = _batch()
    logits, attn = model(src, lens, tgt)
    assert logits.shape == (3, 6, V_TGT) and attn is None
    _, attn = model(src, lens, tgt, need_weights=True)
    assert attn.shape == (3, 6, 4, 5)  # (B, T, H, S)
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6, 4))
    assert (attn[1, ..., 3:] == 0).all() and (attn[2, ..., 1:] == 0).all()  # no weight on source padding


@pytest.mark.parametrize("kw", VARIANTS[:2])
def test_changing_a_future_target_token_leaves_earlier_logits_alone(kw):
    model = _model(**kw)
    src, lens, tgt = _batch()
    before, _ = model(src, lens, tgt)
    changed = tgt.clone()
    changed[:, 3] = (changed[:, 3] + 1) % V_TGT
    after, _ = model(src, lens, changed)
    torch.testing.assert_close(after[:, :3], before[:, :3], atol=1e-6, rtol=0)
    assert not torch.allclose(after[:, 3:], before[:, 3:])


@pytest.mark.parametrize("kw", VARIANTS[:2])
def test_a_sentence_alone_equals_it_in_a_padded_batch(kw):
    model = _model(**kw)
    src, lens, tgt = _batch()
    batch, _ = model(src, lens, tgt)
    for i, (n, t) in enumerate([(5, 6), (3, 4), (1, 2)]):
        alone, _ = model(src[i : i + 1, :n], lens[i : i + 1], tgt[i : i + 1, :t])
        torch.testing.assert_close(alone[0], batch[i, :t], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kw", VARIANTS)
def test_cached_step_log_probs_equal_full_recompute(kw):
    model = _model(**kw)
    src, lens, tgt = _batch()
    tgt[tgt == PAD] = 4  # every row a real prefix here
    state = model.encode(src, lens)
    full, full_attn = model.decode(tgt, state, need_weights=True)  # the whole prefix at once
    full = torch.log_softmax(full, -1)
    for t in range(tgt.size(1)):
        log_probs, attn, state = model.step(tgt[:, t], state)
        assert state["self"][0].k.shape == (3, 4, t + 1, 4)  # the cache grew by one position
        torch.testing.assert_close(log_probs, full[:, t], atol=1e-5, rtol=0)
        torch.testing.assert_close(attn, full_attn[:, t], atol=1e-5, rtol=0)  # (N, H, S)


# torch.nn's layer parameter names -> ours (the attention modules' names already match torch's)
_TORCH_NAMES = {"norm1": "norms.0", "norm2": "norms.1", "norm3": "norms.2", "linear1": "ff.0", "linear2": "ff.3",
                "multihead_attn": "cross_attn"}  # fmt: skip


def _from_torch(ours: torch.nn.Module, ref: torch.nn.Module) -> None:
    with torch.no_grad():  # random LayerNorm gains and biases too, so that every parameter is exercised
        for p in ref.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    state = {}
    for name, value in ref.state_dict().items():
        head, _, rest = name.partition(".")
        state[f"{_TORCH_NAMES.get(head, head)}.{rest}"] = value
    ours.load_state_dict(state)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_decoder_layers_equal_torchs_with_the_same_weights(norm_first):
    """Post-norm LayerNorm(x + sublayer(x)) (the paper) and pre-norm x + sublayer(LayerNorm(x)), against
    torch.nn.TransformerEncoderLayer / TransformerDecoderLayer (ReLU, no dropout) holding the same weights."""
    torch.manual_seed(0)
    cfg = TransformerConfig(V_SRC, V_TGT, d_model=16, num_heads=4, ff_dim=32, dropout=0.0, norm_first=norm_first)
    kw = dict(dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=norm_first)
    enc, ref_enc = EncoderLayer(cfg).eval(), torch.nn.TransformerEncoderLayer(16, 4, **kw).eval()
    dec, ref_dec = DecoderLayer(cfg).eval(), torch.nn.TransformerDecoderLayer(16, 4, **kw).eval()
    _from_torch(enc, ref_enc)
    _from_torch(dec, ref_dec)
    x, y = torch.randn(2, 5, 16), torch.randn(2, 4, 16)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])  # True = a real source token
    torch.testing.assert_close(enc(x, mask), ref_enc(x, src_key_padding_mask=~mask), atol=1e-5, rtol=0)
    got, _, _ = dec(y, dec.cross_attn.precompute(x), mask)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
    want = ref_dec(y, x, tgt_mask=causal, memory_key_padding_mask=~mask, tgt_is_causal=True)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_plot_layer_selects_the_cross_attention_layer():
    model = _model()
    src, lens, tgt = _batch()
    state = model.encode(src, lens)
    last = model.step(tgt[:, 0], state)[1]
    model.set_plot_layer(0)
    first = model.step(tgt[:, 0], state)[1]
    _, want = model.decode(tgt[:, :1], state, need_weights=True)
    torch.testing.assert_close(first, want[:, 0], atol=1e-6, rtol=0)
    assert not torch.allclose(first, last)
    with pytest.raises(ValueError, match="out of range"):
        model.set_plot_layer(2)
    model.step_attention = False
    assert model.step(tgt[:, 0], state)[1] is None


def _sequence_log_prob(model, src, lens, tokens):
    """Total log-probability of `tokens` (B, T) by recomputing whole prefixes (no cache)."""
    tgt_in = torch.cat([torch.full((tokens.size(0), 1), BOS), tokens[:, :-1]], 1)
    logits, _ = model(src, lens, tgt_in)
    return torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1).sum(-1)


def test_beam_size_one_equals_greedy_and_beam_scores_match_recomputation():
    model = _model()
    src, lens, _ = _batch()
    greedy = greedy_search(model, model.encode(src, lens), 3, BOS, EOS, max_len=7)
    beam1 = beam_search(model, model.encode(src, lens), 3, BOS, EOS, max_len=7, beam_size=1)
    assert torch.equal(greedy.tokens, beam1.tokens)
    torch.testing.assert_close(greedy.scores, beam1.scores)
    assert greedy.attention.shape[:3] == (3, greedy.tokens.size(1), 4)  # (B, T, H, S)
    # beam 3 reorders the caches at every step: its scores must equal a from-scratch recomputation of its tokens
    beam = beam_search(model, model.encode(src, lens), 3, BOS, EOS, max_len=7, beam_size=3)
    for i, toks in enumerate(beam.tokens):
        n = int(beam.lengths[i])
        want = _sequence_log_prob(model, src[i : i + 1], lens[i : i + 1], toks[:n].unsqueeze(0))
        torch.testing.assert_close(beam.scores[i : i + 1], want, atol=1e-4, rtol=0)


def test_overfits_a_tiny_batch():
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(V_SRC, V_TGT, d_model=32, num_heads=4, enc_layers=1, dec_layers=1, ff_dim=64, dropout=0.0)
    )
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 0], [10, 11, 0, 0]])
    lens = torch.tensor([4, 3, 2])
    tgt = torch.tensor([[BOS, 6, 5, 4, 3, EOS], [BOS, 9, 8, 7, EOS, PAD], [BOS, 10, 10, 10, EOS, PAD]])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(120):
        logits, _ = model(src, lens, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.05:  # overfitted: the steps left would only cost time
            break
    assert loss.item() < 0.05
    out = model.eval().generate(src, lens, BOS, EOS, max_len=8, beam_size=2)
    assert out.token_lists() == [[6, 5, 4, 3], [9, 8, 7], [10, 10, 10]]


def test_sinusoids_by_hand_and_past_the_table():
    pe = sinusoid_table(3, 4)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    torch.testing.assert_close(pe[2], torch.tensor([math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)]))
    model = _model(max_len=4)
    torch.testing.assert_close(model.tgt_pos(3, offset=3), sinusoid_table(6, 16)[3:])  # grows past max_len
    with pytest.raises(ValueError, match="longer than the learned max_len"):
        _model(positions="learned", max_len=4).tgt_pos(3, offset=3)


def test_shared_and_tied_embeddings():
    shared = Transformer(TransformerConfig(V_SRC, V_SRC, d_model=16, num_heads=2, share_embeddings=True))
    assert shared.src_embed is shared.tgt_embed and shared.out.weight is shared.tgt_embed.weight
    untied = _model(tie_output=False)
    assert untied.out.weight is not untied.tgt_embed.weight
    with pytest.raises(ValueError, match="shared_vocab"):
        TransformerConfig(V_SRC, V_TGT, share_embeddings=True)


def test_warmup_schedule_is_the_papers_inverse_square_root():
    """lr(s) ∝ min(s^-0.5, s * warm^-1.5) for step s = 1, 2, ..., rescaled so the peak (s = warm) is `lr`."""
    from text_attn.translation.module import TranslationModule

    module = TranslationModule(arch="transformer", lr=0.01, warmup_steps=4)
    module.net = torch.nn.Linear(1, 1)
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    got = []
    for _ in range(12):
        got.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    paper = [min(s**-0.5, s * 4**-1.5) for s in range(1, 13)]
    torch.testing.assert_close(torch.tensor(got), 0.01 * torch.tensor(paper) / max(paper))


# --- the CLI: text-train fit on a tiny transformer config, translate --plot draws the heads ---------------------------
@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    from text_attn.translation.train_cli import train_main

    out = tmp_path_factory.mktemp("fit") / "model.pt"
    train_main(
        ["fit", "--config", FIXTURE, "--model.export_path", str(out), "--trainer.default_root_dir", str(out.parent)]
    )
    return out


@pytest.mark.long
def test_fit_and_translate_plot_the_heads_of_a_layer(model_file, tmp_path, capsys, monkeypatch):
    import text_attn.translation.plots
    from text_attn.translation.translate_cli import translate_main

    data = torch.load(model_file, weights_only=True)
    assert data["arch"] == "transformer" and data["config"]["d_model"] == 16
    drawn = []
    real = text_attn.translation.plots.plot_alignment_heads

    def spy(weights, src, tgt, path, title=None):
        drawn.append((tuple(weights.shape), len(src), len(tgt), title))
        return real(weights, src, tgt, path, title)

    monkeypatch.setattr(text_attn.translation.plots, "plot_alignment_heads", spy)
    png = tmp_path / "heads.png"
    assert translate_main(["--model", str(model_file), "--plot", str(png), "--layer", "0", "ma pipo deko ro"]) == 0
    assert png.stat().st_size > 0
    (h, t, s), n_src, n_tgt, title = drawn[0]
    assert (h, s) == (2, 5) and n_src == 5 and t == n_tgt and "(--layer 0)" in title  # 2 heads; 4 words + eos
    # without --layer: the layer that aligns best, the penultimate (of 2 here), as the loaded model reads it
    assert Translator.load(model_file).net.plot_layer == 0
    assert translate_main(["--model", str(model_file), "--plot", str(png), "ma pipo deko ro"]) == 0
    assert drawn[1][3] == "cross-attention, decoder layer 1 of 2 (--layer 0)"  # counted from 1, as the page does
    assert translate_main(["--model", str(model_file), "--plot", str(png), "--layer", "-1", "ma pipo deko ro"]) == 0
    assert drawn[2][3] == "cross-attention, decoder layer 2 of 2 (--layer 1)"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(model_file), "--plot", str(png), "--layer", "7", "ma pipo"])
    assert exc.value.code == 2 and "out of range" in capsys.readouterr().err


def test_share_embeddings_without_shared_vocab_is_one_clear_line(capsys, tmp_path, monkeypatch):
    from text_attn.translation.train_cli import train_main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", FIXTURE, "--model.network.share_embeddings", "true"])
    assert exc.value.code == 2 and "shared_vocab" in capsys.readouterr().err


def test_cached_generation_under_bf16_autocast():
    """Mixed-precision validation decodes under autocast: the cache stays in the projections' bfloat16 (the empty
    start cache, made from the float32 memory, must not promote it to float32 and double its size)."""
    model = _model()
    src, lens, _ = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        state = model.encode(src, lens)
        for t in range(3):
            _, _, state = model.step(torch.full((3,), BOS), state)
            assert state["self"][0].k.dtype == torch.bfloat16 and state["self"][0].k.size(2) == t + 1
        for beam in (1, 2):
            res = model.generate(src, lens, BOS, EOS, max_len=4, beam_size=beam)
            assert res.tokens.shape[0] == 3 and torch.isfinite(res.scores).all()


def test_alignment_hits_averages_the_heads():
    from text_attn.core.metrics import alignment_hits

    # 2 target words, 2 heads, 3 source words: head 1 alone would say [0, 0], the mean over heads says [2, 1]
    attn = torch.tensor([[[0.5, 0.0, 0.5], [0.0, 0.1, 0.9]], [[0.4, 0.3, 0.3], [0.0, 0.9, 0.1]]])  # (T, H, S)
    assert alignment_hits(attn, [2, 1], 2) == (2, 2)
    assert alignment_hits(attn[:, 0], [2, 1], 2) == (0, 2)
