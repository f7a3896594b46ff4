"""Stochastic hard attention in the Show-Attend-Tell decoder and its REINFORCE loss (Xu et al. 2015, eq. 12):
per-step log-probs and entropies against torch.distributions, soft_prob=1 == soft attention, deterministic
search, the REINFORCE sign, the baseline rule, a hand-computed loss, and a toy problem only REINFORCE solves."""

import math
from pathlib import Path

import pytest
import torch
from torch.distributions import Categorical

from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig, DecoderOutput, ShowAttendTellDecoder
from captioning.model.encoder import EncoderConfig
from captioning.training.objective import CollapseMonitor, MovingAverageBaseline, hard_attention_loss
from text_attn.core.decoding import beam_search, greedy_search
from text_attn.core.vocab import Vocabulary

B, T, L, D, V = 4, 5, 6, 8, 11


def _decoder(**kw) -> ShowAttendTellDecoder:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, feature_dim=D, embed_dim=7, hidden_dim=9, attn_dim=5, dropout=0.0, attention="hard")
    return ShowAttendTellDecoder(DecoderConfig(**{**cfg, **kw}))


def _inputs():
    g = torch.Generator().manual_seed(1)
    return torch.randn(B, L, D, generator=g), torch.randint(1, V, (B, T), generator=g)


# --- the decoder's per-step outputs ------------------------------------------------------------------------------
def test_per_step_log_probs_and_entropies_match_torch_distributions():
    dec = _decoder(soft_prob=0.0).train()
    feats, caps = _inputs()
    torch.manual_seed(3)
    out = dec(feats, caps)
    assert out.logits.shape == (B, T, V) and out.alphas.shape == (B, T, L)
    assert out.attn_log_probs.shape == out.entropies.shape == out.chosen.shape == (B, T)
    assert out.sampled.all()  # soft_prob 0: every caption samples
    dist = Categorical(probs=out.alphas)
    torch.testing.assert_close(out.attn_log_probs, dist.log_prob(out.chosen))
    torch.testing.assert_close(out.entropies, dist.entropy())
    assert out.attn_log_probs.requires_grad and out.entropies.requires_grad  # REINFORCE needs their gradients


def test_sampling_draws_from_alpha():
    # Many captions of one image at its first step: the chosen regions' frequencies approach α_0.
    dec = _decoder(soft_prob=0.0).train()
    feats, caps = _inputs()
    n = 4000
    torch.manual_seed(4)
    out = dec(feats[:1].expand(n, L, D), caps[:1, :1].expand(n, 1))
    freq = torch.bincount(out.chosen[:, 0], minlength=L).float() / n
    torch.testing.assert_close(freq, out.alphas[0, 0].detach(), atol=0.03, rtol=0)


def test_soft_captions_sample_nothing_and_report_the_argmax():
    dec = _decoder(soft_prob=0.5).train()
    feats, caps = _inputs()
    torch.manual_seed(0)
    out = dec(feats.repeat(8, 1, 1), caps.repeat(8, 1))  # 32 captions: both kinds occur
    soft = ~out.sampled
    assert soft.any() and out.sampled.any()
    assert (out.attn_log_probs[soft] == 0).all()  # nothing was sampled
    assert torch.equal(out.chosen[soft], out.alphas[soft].argmax(-1))
    assert (out.attn_log_probs[out.sampled] < 0).all()


def test_soft_prob_argument_overrides_the_config_for_one_batch():
    dec = _decoder(soft_prob=0.0).train()
    feats, caps = _inputs()
    torch.manual_seed(0)
    assert not dec(feats, caps, soft_prob=1.0).sampled.any()  # a warm-up batch: every caption soft
    assert dec(feats, caps).sampled.all()  # the config's 0.0 again


def test_soft_prob_one_is_the_soft_decoder_with_the_same_weights():
    soft = ShowAttendTellDecoder(DecoderConfig(**{**_decoder().cfg.__dict__, "attention": "soft"}))
    hard = _decoder(soft_prob=1.0)
    # Same parameters; the hard module keeps its scorer one level down (attention.scorer.*).
    state = {k.replace("attention.", "attention.scorer.", 1): v for k, v in soft.state_dict().items()}
    hard.load_state_dict(state)
    feats, caps = _inputs()
    ref = soft.eval()(feats, caps)
    out = hard.train()(feats, caps)  # training mode: every caption takes the expected context
    assert not out.sampled.any()
    torch.testing.assert_close(out.logits, ref.logits)
    torch.testing.assert_close(out.alphas, ref.alphas)
    # eval with hard_inference "expect" is the soft decoder too, and "argmax" is not
    hard.cfg.hard_inference = "expect"
    torch.testing.assert_close(hard.eval()(feats, caps).logits, ref.logits)
    hard.cfg.hard_inference = "argmax"
    assert not torch.allclose(hard.eval()(feats, caps).logits, ref.logits, atol=1e-3)


@pytest.mark.parametrize("inference", ["argmax", "expect"])
def test_eval_is_deterministic_and_forward_equals_repeated_step(inference):
    dec = _decoder(hard_inference=inference).eval()
    feats, caps = _inputs()
    out = dec(feats, caps)
    torch.testing.assert_close(dec(feats, caps).logits, out.logits, rtol=0, atol=0)
    assert not out.sampled.any()
    assert torch.equal(out.chosen, out.alphas.argmax(-1))
    state = dec.init_state(feats)
    for t in range(T):
        log_probs, alpha, state = dec.step(caps[:, t], state)
        torch.testing.assert_close(log_probs, out.logits[:, t].log_softmax(-1), atol=1e-5, rtol=0)
        torch.testing.assert_close(alpha, out.alphas[:, t])
    if inference == "argmax":  # the context is exactly the arg-max region's (gated) feature
        emb = dec.embedding(caps[:, 0])
        s = dec._recur(emb, *dec.init_state(feats).values())
        beta = torch.sigmoid(dec.f_beta(dec.init_state(feats)["h"]))
        torch.testing.assert_close(s.z, beta * feats[torch.arange(B), s.alpha.argmax(-1)])


def test_region_keys_are_projected_once_per_image():
    dec = _decoder().train()
    calls = []
    dec.attention.scorer.key_proj.register_forward_hook(lambda mod, inp, out: calls.append(inp[0].shape))
    feats, caps = _inputs()
    dec(feats, caps)
    assert calls == [(B, L, D)]


# --- beam search and the model --------------------------------------------------------------------------------------
def test_beam_search_over_a_hard_model():
    vocab = Vocabulary.build([["a", "red", "circle", "blue", "square"]])
    torch.manual_seed(0)
    captioner = Captioner.build(
        vocab,
        EncoderConfig(backbone="resnet18", weights=None, grid=2, image_size=64),
        DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, attention="hard"),
    )
    model = captioner.model.eval()
    feats = torch.randn(3, 4, model.encoder.out_dim)
    args = (model, model.init_state(feats), 3, vocab.bos_id, vocab.eos_id, 6)
    greedy = greedy_search(*args)
    beam1 = beam_search(*args, beam_size=1)
    assert torch.equal(greedy.tokens, beam1.tokens)
    torch.testing.assert_close(greedy.attention, beam1.attention)
    first, again = (captioner.caption_features(feats, beam_size=3, max_len=6) for _ in range(2))
    for (w1, a1, *_), (w2, a2, *_) in zip(first, again, strict=True):
        assert w1 == w2 and torch.equal(a1, a2)  # eval-mode hard attention is deterministic
        assert captioner.chosen_regions(a1) == a1.argmax(-1).tolist()
    model.decoder.cfg.hard_inference = "expect"
    assert captioner.chosen_regions(first[0][1]) is None  # no single region when the context is the expectation


# --- the loss -----------------------------------------------------------------------------------------------------
def _fake_output(attn_log_probs, entropies, sampled, logits=None, alphas=None) -> DecoderOutput:
    b, t = attn_log_probs.shape
    logits = torch.zeros(b, t, V) if logits is None else logits
    alphas = torch.full((b, t, 3), 1 / 3) if alphas is None else alphas
    return DecoderOutput(logits, alphas, attn_log_probs, entropies, torch.zeros(b, t, dtype=torch.long), sampled)


def test_hard_attention_loss_by_hand():
    # 2 captions; caption 1's last step is padding. Uniform logits: log p(y_t) = -log V at every step.
    targets = torch.tensor([[5, 6, 2], [7, 2, 0]])
    logp_s = torch.tensor([[-0.5, -1.0, -0.2], [-0.3, -0.4, -9.0]], requires_grad=True)
    ent = torch.tensor([[1.0, 0.8, 0.6], [0.9, 0.7, 5.0]], requires_grad=True)
    out = _fake_output(logp_s, ent, torch.tensor([True, True]))
    total, parts = hard_attention_loss(out, targets, 0, baseline=-4.0, rl_lambda=0.5, entropy_lambda=0.1)
    R = torch.tensor([-3 * math.log(V), -2 * math.log(V)])  # caption log-likelihoods: -7.19, -4.80
    torch.testing.assert_close(parts["reward"], R)
    adv = R + 4.0
    n_tok = 5
    reinforce = -0.5 * (adv[0] * (-0.5 - 1.0 - 0.2) + adv[1] * (-0.3 - 0.4)) / n_tok  # padded step left out
    entropy = (1.0 + 0.8 + 0.6 + 0.9 + 0.7) / n_tok
    assert parts["ce"].item() == pytest.approx(math.log(V))
    assert parts["reinforce"].item() == pytest.approx(reinforce.item())
    assert parts["entropy"].item() == pytest.approx(entropy)
    assert total.item() == pytest.approx(math.log(V) + reinforce.item() - 0.1 * entropy)  # ds_lambda 0 by default
    total.backward()
    # d total / d log p(s_t) = -λ_r (R - b) / N_tokens at real steps, 0 at the padded one
    torch.testing.assert_close(logp_s.grad[:, 0], -0.5 * adv / n_tok)
    assert logp_s.grad[1, 2] == 0 and ent.grad[1, 2] == 0
    torch.testing.assert_close(ent.grad[0], torch.full((3,), -0.1 / n_tok))


def test_word_reward_credits_each_location_with_its_own_word_by_hand():
    # Caption 0: step 0 puts p = 0.9 on its target, step 1 p = 0.2, step 2 is padding. Caption 1 took the expected
    # context (sampled nothing). Each sampled location's gradient is -λ_r log p(y_t) / N_tokens, no baseline.
    targets = torch.tensor([[5, 2, 0], [6, 2, 0]])
    probs = torch.full((2, 3, V), 1e-9)
    probs[0, 0, 5], probs[0, 0, 6] = 0.9, 0.1
    probs[0, 1, 2], probs[0, 1, 7] = 0.2, 0.8
    probs[1, :, 2] = probs[1, :, 6] = 0.5
    logits = probs.log()
    logp_s = torch.tensor([[-0.5, -1.0, -0.2], [-0.3, -0.4, -0.6]], requires_grad=True)
    out = _fake_output(logp_s, torch.zeros(2, 3), torch.tensor([True, False]), logits=logits)
    kw = dict(rl_lambda=2.0, entropy_lambda=0.0, reward="word")
    total, parts = hard_attention_loss(out, targets, 0, baseline=123.0, **kw)
    n_tok = 4
    word = torch.tensor([math.log(0.9), math.log(0.2)])
    torch.testing.assert_close(parts["advantage"][0, :2], word)
    assert parts["advantage"][0, 2] == 0 and bool((parts["advantage"][1] == 0).all())  # padding; soft caption
    expected = -2.0 * (word[0] * -0.5 + word[1] * -1.0) / n_tok  # the baseline (123) plays no part
    assert parts["reinforce"].item() == pytest.approx(expected.item(), rel=1e-5)
    total.backward()
    torch.testing.assert_close(logp_s.grad[0, :2], -2.0 * word / n_tok)
    assert logp_s.grad[0, 2] == 0 and bool((logp_s.grad[1] == 0).all())
    # A worse word pushes its location down harder: the step with p(y) = 0.2 gets the larger gradient on log p(s).
    assert logp_s.grad[0, 1] > logp_s.grad[0, 0] > 0


def test_unknown_reward_is_refused():
    out = _fake_output(torch.zeros(1, 1), torch.zeros(1, 1), torch.tensor([True]))
    with pytest.raises(ValueError, match="unknown reward"):
        hard_attention_loss(out, torch.tensor([[2]]), 0, baseline=0.0, reward="sentence")


def test_soft_captions_get_no_reinforce_term_and_no_baseline_uses_the_batch_mean():
    targets = torch.tensor([[5, 2], [6, 2], [7, 2]])
    logits = torch.randn(3, 2, V, generator=torch.Generator().manual_seed(0))
    logp_s = torch.tensor([[-0.5, -1.0], [-0.3, -0.4], [0.0, 0.0]], requires_grad=True)
    out = _fake_output(logp_s, torch.zeros(3, 2), torch.tensor([True, True, False]), logits=logits)
    _, parts = hard_attention_loss(out, targets, 0, baseline=None)
    R = parts["reward"]
    torch.testing.assert_close(parts["advantage"], torch.stack([R[0] - R[:2].mean(), R[1] - R[:2].mean(), R[2] * 0]))
    assert parts["sampled"].tolist() == [True, True, False]


@pytest.mark.parametrize(("baseline", "direction"), [(-10.0, 1), (-1.0, -1)])
def test_reinforce_moves_the_sampled_location_by_the_sign_of_the_advantage(baseline, direction):
    # One caption, one step, 3 locations; location 2 was sampled. The caption's log-likelihood is fixed at
    # log(1/V) = -2.40: above a baseline of -10 (a good sample), below -1 (a bad one). One SGD step on the loss must
    # make location 2 more likely in the first case and less likely in the second.
    scores = torch.zeros(1, 1, 3, requires_grad=True)
    targets = torch.tensor([[2]])
    s = torch.tensor([[2]])

    def log_p_sampled():
        return scores.log_softmax(-1).gather(-1, s.unsqueeze(-1)).squeeze(-1)  # (1, 1)

    before = log_p_sampled().item()
    out = _fake_output(log_p_sampled(), torch.zeros(1, 1), torch.tensor([True]))
    loss, parts = hard_attention_loss(out, targets, 0, baseline=baseline, entropy_lambda=0.0)
    assert parts["advantage"].item() == pytest.approx(-math.log(V) - baseline)
    loss.backward()
    with torch.no_grad():
        scores -= 0.5 * scores.grad
    assert (log_p_sampled().item() - before) * direction > 1e-3


def test_loss_needs_a_hard_output():
    soft = ShowAttendTellDecoder(DecoderConfig(vocab_size=V, feature_dim=D, embed_dim=7, hidden_dim=9, attn_dim=5))
    feats, caps = _inputs()
    with pytest.raises(ValueError, match="hard-attention"):
        hard_attention_loss(soft(feats, caps), caps, 0, baseline=0.0)


def test_moving_average_baseline_rule():
    b = MovingAverageBaseline()  # decay 0.9, the paper's
    assert not b.ready and b.value.item() == 0.0
    b.update(torch.tensor([-10.0, -20.0]))  # the first batch sets it to its mean
    assert b.ready and b.value.item() == pytest.approx(-15.0)
    b.update(torch.tensor([-5.0]))
    assert b.value.item() == pytest.approx(0.9 * -15.0 + 0.1 * -5.0)  # -14.0
    b.update(torch.tensor([]))  # no sampled captions in this batch: unchanged
    assert b.value.item() == pytest.approx(-14.0) and int(b.updates) == 2
    half = MovingAverageBaseline(decay=0.5)
    half.update(torch.tensor([4.0]))
    half.update(torch.tensor([0.0, 2.0]))
    assert half.value.item() == pytest.approx(0.5 * 4.0 + 0.5 * 1.0)
    assert set(half.state_dict()) == {"value", "updates"}  # buffers: checkpoints keep the baseline
    with pytest.raises(ValueError, match="decay"):
        MovingAverageBaseline(decay=1.0)


def test_collapse_monitor_warns_once_after_warmup_when_attention_stays_uniform():
    uniform = math.log(16)
    mon = CollapseMonitor(warmup=10, ratio=0.95)
    assert all(mon.update(uniform, 16, step) is None for step in range(10))  # warming up
    message = mon.update(uniform, 16, 10)
    assert message and "almost uniform after 10 steps" in message
    assert mon.update(uniform, 16, 11) is None  # once
    focused = CollapseMonitor(warmup=10, ratio=0.95)
    assert all(focused.update(0.5 * uniform, 16, step) is None for step in range(50))
    assert CollapseMonitor(warmup=0).update(uniform, 16, 1000) is None  # 0 = off


# --- a toy problem only the REINFORCE term can solve ----------------------------------------------------------------
K = 2  # the region that carries the answer


def _toy_batch(n: int, g: torch.Generator):
    """4 regions with a random ±1 bit in feature 1; region K is marked (feature 0 = 1) and its bit is the answer."""
    f = torch.randn(n, 4, 6, generator=g) * 0.5
    f[:, :, 0] = 0.0
    f[:, K, 0] = 1.0
    bits = torch.randint(0, 2, (n, 4), generator=g)
    f[:, :, 1] = bits.float() * 2 - 1
    targets = torch.stack([4 + bits[:, K], torch.full((n,), 2)], dim=1)  # the answer word, then eos
    captions_in = torch.stack([torch.full((n,), 1), targets[:, 0]], dim=1)  # bos, word
    return f, captions_in, targets


def _train_toy(rl_lambda: float, reward: str = "caption") -> float:
    torch.manual_seed(0)
    # soft_prob 0: every caption samples, so the attention scorer gets gradients from the REINFORCE term only.
    cfg = DecoderConfig(vocab_size=6, feature_dim=6, embed_dim=8, hidden_dim=16, attn_dim=16, dropout=0.0)
    cfg.attention, cfg.soft_prob = "hard", 0.0
    dec = ShowAttendTellDecoder(cfg)
    opt = torch.optim.Adam(dec.parameters(), lr=0.01)
    baseline = MovingAverageBaseline()
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        f, cin, tgt = _toy_batch(64, g)
        out = dec.train()(f, cin)
        b = baseline.value if baseline.ready else None
        loss, parts = hard_attention_loss(out, tgt, 0, b, rl_lambda=rl_lambda, entropy_lambda=0.0, reward=reward)
        opt.zero_grad()
        loss.backward()
        opt.step()
        baseline.update(parts["reward"][parts["sampled"]])
    f, cin, _ = _toy_batch(500, torch.Generator().manual_seed(99))
    with torch.no_grad():
        return (dec.eval()(f, cin).chosen[:, 0] == K).float().mean().item()


@pytest.mark.slow
def test_hard_attention_learns_to_pick_the_region_that_carries_the_answer():
    assert _train_toy(rl_lambda=1.0) > 0.9
    assert _train_toy(rl_lambda=0.0) < 0.7  # without REINFORCE the sampled attention never learns where to look


@pytest.mark.slow
def test_the_per_word_reward_learns_it_too():
    assert _train_toy(rl_lambda=1.0, reward="word") > 0.9


def test_captioner_takes_the_hard_attention_decoding_as_one_keyword(tmp_path):
    """Issue 57: Captioner.caption_images(hard_inference="expect") decodes a hard-attention model with the expected
    context, as the model would with that setting in its file; "argmax" with one region a word; the file's own
    setting is back after the call; a soft model takes the expected context anyway, and refuses "argmax" (it decoded
    as ever, silently); an unknown value is one ValueError line."""
    from helpers.tiny_captioner import tiny_model_file

    photo = Path(__file__).parent.parent / "fixtures" / "images" / "rocket.jpg"
    cap = Captioner.load(tiny_model_file(tmp_path / "hard.pt", attention="hard"))
    assert cap.model.decoder.cfg.hard_inference == "argmax"
    reference = Captioner.load(tmp_path / "hard.pt")
    reference.model.decoder.cfg.hard_inference = "expect"  # as a file that records the expected context
    (expect,) = cap.caption_images([photo], beam_size=2, hard_inference="expect")
    (want,) = reference.caption_images([photo], beam_size=2)
    assert expect.words == want.words and torch.equal(expect.alphas, want.alphas) and expect.chosen is None
    (argmax,) = cap.caption_images([photo], beam_size=2, hard_inference="argmax")
    assert argmax.chosen == argmax.alphas.argmax(-1).tolist() and cap.model.decoder.cfg.hard_inference == "argmax"
    reference.model.decoder.cfg.hard_inference = "argmax"
    assert cap.caption_images([photo], beam_size=2)[0].words == reference.caption_images([photo], beam_size=2)[0].words
    soft = Captioner.load(tiny_model_file(tmp_path / "soft.pt"))
    (plain,) = soft.caption_images([photo], beam_size=2)
    assert soft.caption_images([photo], beam_size=2, hard_inference="expect")[0].words == plain.words
    with pytest.raises(ValueError, match="^hard_inference 'argmax' decodes a hard-attention model with one region"):
        soft.caption_images([photo], beam_size=2, hard_inference="argmax")
    with pytest.raises(ValueError, match="hard_inference must be one of argmax, expect, got 'sample'"):
        cap.caption_images([photo], hard_inference="sample")


def test_model_info_and_the_servers_info_say_how_a_hard_model_decodes(tmp_path, capsys):
    """An argmax file and an expect file give different captions but were described alike, by `caption --model-info`
    and by attention-serve's /info (which takes the same lines)."""
    from helpers.tiny_captioner import tiny_model_file

    from attention_serve.models import load_caption
    from captioning.commands.caption import caption_main

    said = {}
    for how in ("argmax", "expect"):
        path = tiny_model_file(tmp_path / f"{how}.pt", attention="hard", hard_inference=how)
        assert caption_main(["--model", str(path), "--model-info"]) == 0
        said[how] = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("attention:"))
        assert load_caption(path).info["attention"] == said[how].removeprefix("attention:").strip()
    assert said["argmax"].endswith("hard (Show-Attend-Tell; decodes with argmax: one region a word), 4 x 4 regions")
    assert "decodes with expect: each word from the expected context of all regions" in said["expect"]
    soft = tiny_model_file(tmp_path / "soft.pt")
    assert load_caption(soft).info["attention"] == "soft (Show-Attend-Tell), 4 x 4 regions"  # as before
