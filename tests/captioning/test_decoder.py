"""Show-Attend-Tell decoder: shapes, forward == repeated step, gates, dropout, region positions, and that the loss
trains through it (the loss itself: test_objective.py)."""

import pytest
import torch
import torch.nn.functional as F

from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder
from captioning.training.objective import caption_loss

B, T, L, D, V = 3, 5, 6, 8, 11


def _decoder(**kw) -> ShowAttendTellDecoder:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, feature_dim=D, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0)
    return ShowAttendTellDecoder(DecoderConfig(**{**cfg, **kw})).eval()


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(B, L, D, generator=g), torch.randint(1, V, (B, T), generator=g)


def test_shapes_and_alphas_are_distributions():
    feats, caps = _inputs()
    out = _decoder()(feats, caps)
    logits, alphas = out.logits, out.alphas
    assert out.attn_log_probs is None and out.entropies is None and out.chosen is None  # soft: no hard extras
    assert logits.shape == (B, T, V)
    assert alphas.shape == (B, T, L)
    assert (alphas >= 0).all()
    assert torch.allclose(alphas.sum(-1), torch.ones(B, T), atol=1e-6)


@pytest.mark.parametrize("gate", ["scalar", "vector", "none"])
@pytest.mark.parametrize("deep_output", [True, False])
def test_forward_equals_repeated_step(gate, deep_output):
    dec = _decoder(gate=gate, deep_output=deep_output)
    feats, caps = _inputs()
    logits, alphas = dec(feats, caps)[:2]
    state = dec.init_state(feats)
    for t in range(T):
        log_probs, alpha, state = dec.step(caps[:, t], state)
        assert torch.allclose(log_probs, F.log_softmax(logits[:, t], -1), atol=1e-5)
        assert torch.allclose(alpha, alphas[:, t], atol=1e-6)
    assert set(state) == {"h", "c", "keys"}


def test_first_step_follows_the_papers_equations_by_hand():
    # h0, c0 = tanh(f_init(mean_i a_i)); α = softmax(vᵀ tanh(W h + U a_i + b)); z = σ(f_β(h)) Σ_i α_i a_i;
    # h1, c1 = LSTM([E y; z], (h0, c0)); logits = L_o(E y + L_h h1 + L_z z)  (eq. 7, the deep output)
    dec = _decoder(gate="scalar")
    feats, caps = _inputs()
    mean = feats.mean(dim=1)
    h0, c0 = torch.tanh(dec.init_h(mean)), torch.tanh(dec.init_c(mean))
    state = dec.init_state(feats)
    torch.testing.assert_close(state["h"], h0)
    torch.testing.assert_close(state["c"], c0)
    att = dec.attention
    e = att.v(torch.tanh(att.query_proj(h0).unsqueeze(1) + att.key_proj(feats))).squeeze(-1)  # (B, L)
    alpha = torch.softmax(e, dim=-1)
    z = torch.sigmoid(dec.f_beta(h0)) * torch.einsum("bl,bld->bd", alpha, feats)
    y = dec.embedding(caps[:, 0])
    h1, _ = dec.lstm(torch.cat([y, z], dim=-1), (h0, c0))
    logits = dec.L_o(y + dec.L_h(h1) + dec.L_z(z))
    log_probs, got_alpha, _ = dec.step(caps[:, 0], state)
    torch.testing.assert_close(got_alpha, alpha, atol=1e-6, rtol=0)
    torch.testing.assert_close(log_probs, F.log_softmax(logits, -1), atol=1e-5, rtol=0)
    torch.testing.assert_close(dec(feats, caps).logits[:, 0], logits, atol=1e-5, rtol=0)


def test_region_keys_are_projected_once_per_image():
    dec = _decoder()
    calls = []
    dec.attention.key_proj.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape))
    feats, caps = _inputs()
    dec(feats, caps)  # T steps of teacher forcing
    assert calls == [(B, L, D)]
    calls.clear()
    state = dec.init_state(feats)
    for t in range(T):
        _, _, state = dec.step(caps[:, t], state)
    assert calls == [(B, L, D)]


def _copy_shared(src: ShowAttendTellDecoder, dst: ShowAttendTellDecoder) -> None:
    shared = {k: v for k, v in src.state_dict().items() if not k.startswith("f_beta")}
    missing, unexpected = dst.load_state_dict(shared, strict=False)
    assert not unexpected and all(k.startswith("f_beta") for k in missing)


def test_gates_change_the_output_and_an_open_gate_is_no_gate():
    feats, caps = _inputs()
    none = _decoder(gate="none")
    outs = {"none": none(feats, caps)[0]}
    for gate in ("scalar", "vector"):
        dec = _decoder(gate=gate)
        _copy_shared(none, dec)
        assert dec.f_beta.out_features == (1 if gate == "scalar" else D)
        outs[gate] = dec(feats, caps)[0]
        # β = σ(50) = 1 everywhere: z = Σ α a exactly as without a gate.
        with torch.no_grad():
            dec.f_beta.weight.zero_()
            dec.f_beta.bias.fill_(50.0)
        assert torch.allclose(dec(feats, caps)[0], outs["none"], atol=1e-5)
    assert not torch.allclose(outs["scalar"], outs["none"], atol=1e-3)
    assert not torch.allclose(outs["vector"], outs["none"], atol=1e-3)
    assert not torch.allclose(outs["scalar"], outs["vector"], atol=1e-3)


def test_scalar_gate_scales_the_context_by_one_number():
    # f_β = 0 gives β = σ(0) = 1/2 for every feature: z_t = ½ Σ_i α_ti a_i, checked on one step by hand.
    dec = _decoder(gate="scalar")
    with torch.no_grad():
        dec.f_beta.weight.zero_()
        dec.f_beta.bias.zero_()
    feats, caps = _inputs()
    state = dec.init_state(feats)
    emb = dec.embedding(caps[:, 0])
    h, c, z, alpha, hard = dec._recur(emb, state["h"], state["c"], state["keys"])
    assert hard is None
    expected = 0.5 * torch.einsum("bl,bld->bd", alpha, feats)
    assert torch.allclose(z, expected, atol=1e-6)


def test_deep_output_false_uses_a_linear_layer_on_h():
    dec = _decoder(deep_output=False)
    assert not hasattr(dec, "L_o") and dec.out.in_features == 9
    feats, caps = _inputs()
    logits, alphas = dec(feats, caps)[:2]
    assert logits.shape == (B, T, V) and alphas.shape == (B, T, L)


def test_config_rejects_unknown_choices():
    with pytest.raises(ValueError, match="unknown attention 'sparse'"):
        DecoderConfig(vocab_size=V, feature_dim=D, attention="sparse")
    with pytest.raises(ValueError, match="hard_inference"):
        DecoderConfig(vocab_size=V, feature_dim=D, attention="hard", hard_inference="sample")
    with pytest.raises(ValueError, match="soft_prob"):
        DecoderConfig(vocab_size=V, feature_dim=D, attention="hard", soft_prob=1.5)
    with pytest.raises(ValueError, match="gate"):
        DecoderConfig(vocab_size=V, feature_dim=D, gate="sigmoid")


def test_dropout_is_active_in_training_only():
    dec = _decoder(dropout=0.5)
    feats, caps = _inputs()
    assert torch.equal(dec(feats, caps)[0], dec(feats, caps)[0])
    dec.train()
    assert not torch.equal(dec(feats, caps)[0], dec(feats, caps)[0])


def test_caption_loss_trains_through_the_decoder():
    dec = _decoder()
    dec.train()
    feats, caps = _inputs()
    logits, alphas = dec(feats, caps)[:2]
    targets = torch.cat([caps[:, 1:], torch.full((B, 1), 2)], dim=1)
    total, _ = caption_loss(logits, targets, alphas, pad_id=0)
    total.backward()
    assert dec.attention.key_proj.weight.grad.abs().sum() > 0
    assert dec.init_h.weight.grad.abs().sum() > 0
    # and those gradients train: a few steps on the same batch lower the loss (the name said so; nothing checked it)
    opt = torch.optim.Adam(dec.parameters(), lr=1e-2)
    first = total.item()
    for _ in range(20):
        opt.step()
        opt.zero_grad()
        logits, alphas = dec(feats, caps)[:2]
        total, _ = caption_loss(logits, targets, alphas, pad_id=0)
        total.backward()
    assert total.item() < 0.7 * first, (first, total.item())


def test_region_positions_make_identical_regions_distinguishable():
    from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder, region_codes

    codes = region_codes(16)
    assert codes.shape == (16, 16)
    assert torch.cdist(codes, codes).add(torch.eye(16)).min() > 0.1  # every region has its own code
    torch.manual_seed(0)
    feats = torch.ones(1, 16, 8)  # all regions look the same
    plain = ShowAttendTellDecoder(DecoderConfig(vocab_size=10, feature_dim=8, embed_dim=8, hidden_dim=8, attn_dim=8))
    alpha = plain.eval()(feats, torch.tensor([[1, 4]])).alphas
    assert torch.allclose(alpha, torch.full_like(alpha, 1 / 16))  # without positions attention cannot choose
    pos = ShowAttendTellDecoder(
        DecoderConfig(vocab_size=10, feature_dim=8, embed_dim=8, hidden_dim=8, attn_dim=8, region_pos=True)
    )
    alpha = pos.eval()(feats, torch.tensor([[1, 4]])).alphas
    assert alpha.std() > 1e-4 and torch.allclose(alpha.sum(-1), torch.ones(1, 2), atol=1e-5)


def test_region_codes_by_hand():
    # a 2 x 2 grid: cell centres at 0.25 and 0.75; per axis sin then cos of pos · π 2^k, k = 0..3; rows then columns
    from captioning.model.decoder import region_codes

    r = 0.5**0.5
    row0 = [r, 1.0, 0.0, 0.0, r, 0.0, -1.0, 1.0]  # sin, cos of 0.25 π (1, 2, 4, 8)
    col1 = [r, -1.0, 0.0, 0.0, -r, 0.0, -1.0, 1.0]  # the same at 0.75
    codes = region_codes(4)
    torch.testing.assert_close(codes[1], torch.tensor(row0 + col1), atol=1e-6, rtol=0)  # row 0, column 1
    torch.testing.assert_close(codes[2], torch.tensor(col1 + row0), atol=1e-6, rtol=0)  # row 1, column 0


def test_init_from_image_false_starts_every_image_the_same():
    from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder

    dec = ShowAttendTellDecoder(
        DecoderConfig(vocab_size=10, feature_dim=8, embed_dim=8, hidden_dim=8, attn_dim=8, init_from_image=False)
    )
    a, b = dec.init_state(torch.randn(1, 4, 8)), dec.init_state(torch.randn(1, 4, 8))
    assert torch.equal(a["h"], b["h"]) and torch.equal(a["c"], b["c"])
    paper = ShowAttendTellDecoder(DecoderConfig(vocab_size=10, feature_dim=8, embed_dim=8, hidden_dim=8, attn_dim=8))
    assert not torch.equal(paper.init_state(torch.randn(1, 4, 8))["h"], paper.init_state(torch.randn(1, 4, 8))["h"])


@pytest.mark.parametrize("attention", ["soft", "hard"])
def test_key_dims_scores_see_only_the_first_channels_and_the_context_reads_all(attention):
    dec = _decoder(key_dims=3, attention=attention)
    feats, caps = _inputs()
    other = feats.clone()
    other[..., 3:] = torch.randn(B, L, D - 3)  # change only the channels the scores must not see
    out_a, out_b = dec(feats, caps), dec(other, caps)
    assert not torch.allclose(out_a.logits, out_b.logits)  # the context (and h0, from the mean) read channels 3..D
    # With a fixed start (h0 not from the image) the first step's α depends on the key channels only.
    fixed = _decoder(key_dims=3, attention=attention, init_from_image=False)
    _, a0, s0 = fixed.step(caps[:, 0], fixed.init_state(feats))
    _, b0, _ = fixed.step(caps[:, 0], fixed.init_state(other))
    assert torch.allclose(a0, b0, atol=1e-6)
    assert s0["keys"].proj.shape == (B, L, 5) and s0["keys"].keys.shape == (B, L, D)
    with pytest.raises(ValueError, match="key_dims"):
        DecoderConfig(vocab_size=V, feature_dim=D, key_dims=D + 1)
