"""The text family's faithfulness hooks (text_attn.translation.explain) on tiny random models, where each answer has an
independent reference (teacher forcing, translate_tokens, a per-token scale's finite difference), and one bundled
model sentence through the whole measure."""

from __future__ import annotations

import math

import pytest
import torch

from text_attn.core.faithfulness import measure_word, summarize
from text_attn.core.vocab import SPECIALS, Vocabulary
from text_attn.translation.explain import (
    gradient_scores,
    next_word_probs,
    removal_prob,
    rollout,
    sentence_probes,
    step_through,
    word_probe,
)
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.transformer import Transformer, TransformerConfig
from text_attn.translation.translator import Translator

SRC_WORDS = [f"s{i}" for i in range(12)]
TGT_WORDS = [f"t{i}" for i in range(12)]
SENTENCE = "s1 s4 s2 s7 s9"  # 5 tokens + eos: S = 6 units
ARCHS = ["bahdanau", "luong-general", "transformer"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """A second thread only contends with whatever else the machine runs: these models are tiny."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny(arch: str, rnn: str = "gru", seed: int = 0) -> Translator:
    torch.manual_seed(seed)
    V = len(SPECIALS) + 12
    if arch == "transformer":
        cfg = TransformerConfig(V, V, d_model=16, num_heads=2, enc_layers=2, dec_layers=2, ff_dim=32, dropout=0.0)
        net = Transformer(cfg)
    else:
        dec = 32 if arch == "luong-dot" else 24  # luong-dot's state is as wide as the encoder's (2 x 16)
        cfg = Seq2SeqConfig(V, V, attention=arch, rnn=rnn, embed_dim=16, enc_hidden=16, dec_hidden=dec, attn_dim=16,
                            dropout=0.0)  # fmt: skip
        net = Seq2Seq(cfg)
    with torch.no_grad():  # never pad or bos, as a trained model: translate_tokens' words then hold every token
        net.out.bias[[Vocabulary.pad_id, Vocabulary.bos_id]] = -1e4
    # A random model seldom says eos: its translations stop at translate_tokens' max_len (22 tokens here), so these
    # tests probe tokens without an eos step; the bundled model's sentence has one.
    return Translator(net.eval(), Vocabulary([*SPECIALS, *SRC_WORDS]), Vocabulary([*SPECIALS, *TGT_WORDS]), "word")


def steps_of(tr: Translator, sentence: str = SENTENCE):
    src = torch.tensor([tr.src_vocab.encode(tr.tokenize(sentence), eos=True)])
    out = tr.translate_tokens([tr.tokenize(sentence)])[0]
    ids = tr.tgt_vocab.encode(out.tokens, eos=not out.truncated)
    return step_through(tr.net, src, ids, tr.tgt_vocab.bos_id), out


@pytest.mark.parametrize("arch", ARCHS)
def test_nothing_removed_reproduces_the_models_own_probabilities(arch):
    tr = tiny(arch)
    words, units, probes = sentence_probes(tr, SENTENCE)
    out = tr.translate_tokens([tr.tokenize(SENTENCE)])[0]
    assert units == [*SENTENCE.split(), "<eos>"] and all(p.n_units == 6 for p in probes)
    assert words == [*out.tokens, *([] if out.truncated else ["<eos>"])] and len(probes) == len(words)
    ids = tr.tgt_vocab.encode(out.tokens, eos=not out.truncated)
    src = torch.tensor([tr.src_vocab.encode(SENTENCE.split(), eos=True)])
    logits, _ = tr.net(src, torch.tensor([6]), torch.tensor([[tr.tgt_vocab.bos_id, *ids[:-1]]]))  # teacher forcing
    reference = logits[0].softmax(-1)[torch.arange(len(ids)), ids]  # (T,)
    own = torch.stack([p.prob(torch.zeros(3, 6, dtype=torch.bool))[1] for p in probes])
    torch.testing.assert_close(own, reference, atol=1e-5, rtol=0)
    assert math.isclose(float(own.log().sum()), out.score, abs_tol=1e-4)  # greedy's score: the same log-probs


def test_step_through_attention_is_what_the_model_returns():
    tr = tiny("bahdanau")
    steps, out = steps_of(tr)
    torch.testing.assert_close(steps.alphas[: len(out.tokens)], out.attention, atol=1e-6, rtol=0)
    keys = tr.net.encode(steps.src, torch.tensor([6]))["keys"]
    torch.testing.assert_close(tr.net.attn.precompute(tr.net.key_in(steps.memory)).proj, keys.proj)


def test_transformer_attention_is_the_mean_over_heads_and_layers():
    tr = tiny("transformer")
    steps, out = steps_of(tr)
    T, L = len(out.tokens), len(tr.net.decoder_layers)
    per_layer = []
    for layer in range(L):  # translate_tokens returns one layer's heads: ask for each in turn
        tr.net.set_plot_layer(layer)
        per_layer.append(tr.translate_tokens([tr.tokenize(SENTENCE)])[0].attention)  # (T, H, S)
    tr.net.set_plot_layer(-1)
    reference = torch.stack(per_layer, 1)  # (T, L, H, S)
    torch.testing.assert_close(steps.heads[:T], reference, atol=1e-6, rtol=0)
    torch.testing.assert_close(steps.alphas[:T], reference.mean(dim=(1, 2)), atol=1e-6, rtol=0)
    assert steps.alphas.shape == (len(steps.tokens), 6)
    cross = tr.net.encode(steps.src, torch.tensor([6]))["cross"]
    torch.testing.assert_close(tr.net.decoder_layers[0].cross_attn.precompute(steps.memory).k, cross[0].k)


@pytest.mark.parametrize("arch", ["bahdanau", "luong-dot"])
def test_removing_a_unit_changes_that_step_only_and_renormalises_its_attention(arch):
    tr = tiny(arch, rnn="lstm" if arch == "luong-dot" else "gru")
    with torch.no_grad():
        tr.net.hidden_out.weight.mul_(5.0)  # sharper word distributions: a removal's effect well above rounding
        if arch == "bahdanau":
            tr.net.attn.v.weight.zero_()  # every score 0: the attention is uniform, 1/S over the kept tokens
    steps, _ = steps_of(tr)
    T, S = len(steps.tokens), 6
    assert T >= 2
    if arch == "bahdanau":
        torch.testing.assert_close(steps.alphas, torch.full((T, S), 1 / S))
    t, u = T - 1, 2
    removed = torch.zeros(1, S, dtype=torch.bool)
    removed[0, u] = True
    p = removal_prob(tr.net, steps, t, removed)[0]
    # by hand: weight 0 on u, the rest renormalised (uniform model: 1/(S-1) each), through the intervention hook
    alpha = steps.alphas[t].masked_fill(removed[0], 0.0)
    alpha = alpha / alpha.sum()
    if arch == "bahdanau":
        torch.testing.assert_close(alpha, torch.tensor([0.2, 0.2, 0.0, 0.2, 0.2, 0.2]))
    assert torch.isclose(p, next_word_probs(tr.net, steps, t, alpha[None])[0, steps.tokens[t]], atol=1e-6)
    # teacher forcing with the mask changed at step t only gives the same; changed from the start, it differs
    net, bos = tr.net, tr.tgt_vocab.bos_id
    masked = net.encode(steps.src, torch.tensor([S]))
    masked["mask"] = masked["mask"] & ~removed
    with torch.no_grad():
        state_only, state_all = net.encode(steps.src, torch.tensor([S])), masked
        prev = torch.tensor([bos])
        for i, tok in enumerate(steps.tokens[: t + 1]):
            at_t = {**state_only, "mask": masked["mask"]} if i == t else state_only
            lp_only, _, state_only = net.step(prev, at_t)
            lp_all, _, state_all = net.step(prev, state_all)
            prev = torch.tensor([tok])
    assert torch.isclose(p, lp_only[0, steps.tokens[t]].exp(), atol=1e-6)
    assert not torch.isclose(p, lp_all[0, steps.tokens[t]].exp(), atol=2e-5)
    assert not torch.isclose(p, steps.probs[t], atol=2e-5)  # and removing it did change the word's probability


@pytest.mark.parametrize("arch", ARCHS)
def test_every_unit_removed_is_a_zero_context_never_nan(arch):
    tr = tiny(arch)
    net, (steps, _) = tr.net, steps_of(tr)
    assert len(steps.tokens) > 0  # a translation to check: the loop's asserts run
    for t in range(len(steps.tokens)):
        p = removal_prob(net, steps, t, torch.ones(2, 6, dtype=torch.bool))
        zero = next_word_probs(net, steps, t, torch.zeros(1, 6))[0, steps.tokens[t]]
        assert torch.isfinite(p).all() and torch.allclose(p, zero.expand(2), atol=1e-6)


@pytest.mark.parametrize("arch", ["bahdanau", "transformer"])
def test_gradient_scores_are_the_derivative_of_a_per_token_scale(arch):
    """gradient x input summed over features = d log p / d c_u of the encoder outputs scaled by c at c = 1: a central
    finite difference (float64), the scale applied by a hook on the model's own encode."""
    tr = tiny(arch)
    net = tr.net.double()
    steps, _ = steps_of(tr)
    encoder_out = net.encoder if arch != "transformer" else net.enc_norm
    source = "keys" if arch != "transformer" else "cross"

    def log_p(t: int, scale: torch.Tensor) -> float:
        def hook(module, args, out):
            return (out[0] * scale[None, :, None], out[1]) if isinstance(out, tuple) else out * scale[None, :, None]

        handle = encoder_out.register_forward_hook(hook)
        try:
            with torch.no_grad():
                state = {**steps.states[t], source: net.encode(steps.src, torch.tensor([6]))[source]}
                prev = torch.tensor([tr.tgt_vocab.bos_id if t == 0 else steps.tokens[t - 1]])
                return float(net.step(prev, state)[0][0, steps.tokens[t]])
        finally:
            handle.remove()

    eps = 1e-6
    for t in (0, len(steps.tokens) - 1):
        g = gradient_scores(net, steps, t)
        fd = torch.tensor([(log_p(t, 1 + eps * e) - log_p(t, 1 - eps * e)) / (2 * eps)
                           for e in torch.eye(6, dtype=torch.float64)], dtype=torch.float64)  # fmt: skip
        torch.testing.assert_close(g, fd, atol=1e-6, rtol=1e-5)
        assert g.abs().sum() > 1e-3


@pytest.mark.parametrize(("arch", "rnn"), [("bahdanau", "gru"), ("luong-dot", "lstm"), ("luong-concat", "gru")])
def test_next_word_probs_with_the_models_own_alpha_is_its_distribution(arch, rnn):
    tr = tiny(arch, rnn)
    steps, _ = steps_of(tr)
    assert len(steps.tokens) > 0  # a translation to check: the loop's asserts run
    for t in range(len(steps.tokens)):
        own = next_word_probs(tr.net, steps, t, steps.alphas[t][None])  # (1, V)
        state = steps.states[t]
        prev = torch.tensor([tr.tgt_vocab.bos_id if t == 0 else steps.tokens[t - 1]])
        with torch.no_grad():
            torch.testing.assert_close(own, tr.net.step(prev, state)[0].exp(), atol=1e-6, rtol=0)
        first = next_word_probs(tr.net, steps, t, torch.eye(6)[:1])  # all weight on the first token
        assert not torch.allclose(own, first, atol=1e-4)


def test_transformer_next_word_probs_with_every_heads_own_weights_is_its_distribution():
    tr = tiny("transformer")
    steps, _ = steps_of(tr)
    assert len(steps.tokens) > 0  # a translation to check: the loop's asserts run
    for t in range(len(steps.tokens)):
        own = next_word_probs(tr.net, steps, t, steps.heads[t][None])  # (1, L, H, S): each head its own
        torch.testing.assert_close(own[0, steps.tokens[t]], steps.probs[t], atol=1e-6, rtol=0)
        mean = next_word_probs(tr.net, steps, t, steps.alphas[t].expand(2, -1))  # (2, S): the mean in every head
        assert mean.shape == (2, own.size(1)) and torch.allclose(mean.sum(-1), torch.ones(2), atol=1e-5)


@pytest.mark.parametrize("arch", ["bahdanau", "transformer"])
def test_the_own_row_is_the_forced_baseline_against_the_models_step(arch):
    """A Transformer's one row of weights read by every head moves its distribution: the probe carries the model's
    own step (own_probs) and the "own" intervention says how far; for Bahdanau forcing alpha is the model itself."""
    tr = tiny(arch)
    steps, _ = steps_of(tr)
    assert len(steps.tokens) > 0  # a translation to check: the loop's asserts run
    for t in range(len(steps.tokens)):
        probe = word_probe(tr.net, steps, t)
        torch.testing.assert_close(probe.own_probs[steps.tokens[t]], steps.probs[t], atol=1e-6, rtol=0)
        own = measure_word(probe, "x", random_draws=1).interventions["own"]
        if arch == "bahdanau":
            assert own.tv == pytest.approx(0.0, abs=1e-6) and not own.changed
        else:
            forced = next_word_probs(tr.net, steps, t, steps.alphas[t][None])[0].double()
            assert own.tv == pytest.approx(0.5 * float((forced - probe.own_probs.double()).abs().sum()), abs=1e-6)
    if arch == "transformer":  # the heads differ, so forcing their mean moves the distribution somewhere
        tvs = [measure_word(word_probe(tr.net, steps, t), "x", random_draws=1).interventions["own"].tv
               for t in range(len(steps.tokens))]  # fmt: skip
        assert max(tvs) > 1e-4


def test_rollout_by_hand_and_from_the_encoders_own_attention():
    A1 = torch.tensor([[1.0, 0.0], [0.5, 0.5]])  # layer 1, one head
    A2 = torch.tensor([[0.0, 1.0], [0.0, 1.0]])  # layer 2
    R = rollout(torch.stack([A1, A2])[:, None])  # (L=2, H=1, 2, 2)
    # with the residual: [[0.5, 0.5], [0, 1]] @ [[1, 0], [0.25, 0.75]]
    torch.testing.assert_close(R, torch.tensor([[0.625, 0.375], [0.25, 0.75]]))
    tr = tiny("transformer")
    net = tr.net
    steps, _ = steps_of(tr)
    x = net.src_embed(steps.src) * net.scale + net.src_pos(6)  # the encoder by hand, each layer's weights asked for
    reference = []
    with torch.no_grad():
        for layer in net.encoder_layers:
            reference.append(layer.self_attn(x, x, need_weights=True)[1][0])
            x = layer(x, torch.ones(1, 6, dtype=torch.bool))
    torch.testing.assert_close(steps.encoder_attention, torch.stack(reference))
    probes = sentence_probes(tr, SENTENCE).probes
    for t, probe in enumerate(probes):
        torch.testing.assert_close(probe.scores["rollout"], steps.alphas[t] @ rollout(steps.encoder_attention))
        assert math.isclose(float(probe.scores["rollout"].sum()), 1.0, abs_tol=1e-5)


def test_a_model_without_attention_is_refused_in_one_line():
    tr = tiny("none")
    with pytest.raises(ValueError, match="has no attention to explain") as caught:
        sentence_probes(tr, SENTENCE)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match="has no attention to explain"):
        step_through(tr.net, torch.tensor([[4, 5, 2]]), [4, 2], 1)


@pytest.mark.long
def test_measure_word_on_a_bundled_model_sentence():
    tr = Translator.load()  # the bundled Transformer
    words, units, probes = sentence_probes(tr, "Ein Mann fährt Fahrrad.")
    assert units[-1] == "<eos>" and words[-1] == "<eos>" and "▁man" in words
    results = [measure_word(p, w, seed=i, random_draws=2) for i, (p, w) in enumerate(zip(probes, words, strict=True))]
    out = tr.translate_tokens([tr.tokenize("Ein Mann fährt Fahrrad.")])[0]
    assert math.isclose(sum(math.log(r.p_full) for r in results), out.score, abs_tol=1e-4)
    for r in results:
        assert set(r.rankings) == {"attention", "random", "leave_one_out", "gradient", "rollout", "penultimate_layer"}
        assert set(r.interventions) == {"own", "uniform", "permuted"}
        numbers = [r.p_full, r.p_empty, *r.leave_one_out, *(i.tv for i in r.interventions.values())]
        numbers += [v for k in r.rankings.values() for v in (k.deletion_area, k.insertion_area, *k.deletion)]
        assert all(math.isfinite(v) for v in numbers)
    table = summarize(results).format()
    assert "rollout" in table and "nan" not in table


def test_the_penultimate_layer_ranking_is_the_attention_the_search_returns_from_that_layer():
    """A Transformer's probe also ranks by its penultimate decoder layer alone (heads averaged): the layer translate
    shows; equal to what the search returns when that layer is its plot layer. An RNN has no such ranking."""
    tr = tiny("transformer")
    tr.net.set_plot_layer(0)  # the penultimate of 2
    steps, out = steps_of(tr)  # out: the search's translation, its attention (T, H, S) from layer 0
    probes = sentence_probes(tr, SENTENCE).probes
    assert len(probes) == out.attention.size(0)
    for t, probe in enumerate(probes):
        torch.testing.assert_close(probe.scores["penultimate_layer"], steps.heads[t][0].mean(dim=0))
        torch.testing.assert_close(probe.scores["penultimate_layer"], out.attention[t].mean(dim=0), atol=1e-5, rtol=0)
        assert not torch.allclose(probe.scores["penultimate_layer"], probe.attention)  # not the layers' mean
    assert "penultimate_layer" not in sentence_probes(tiny("bahdanau"), SENTENCE).probes[0].scores
