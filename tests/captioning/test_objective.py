"""What a captioner's training minimises (captioning.training.objective), without Lightning: the doubly stochastic
penalty and the cross-entropy by hand, CaptionObjective's step against those functions (soft, hard, SCST, attention
supervision), validation's loss pooled from each caption's sums, its options refused by name, and caption-train naming
the new place of an option given at the old one."""

import pytest
import torch

from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.objective import (
    CaptionObjective,
    CollapseMonitor,
    ObjectiveConfig,
    caption_loss,
    doubly_stochastic_penalty,
    hard_attention_loss,
)
from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.vocab import Vocabulary

V = 11


# --- doubly stochastic penalty ------------------------------------------------------------------
# B=2, T=3, L=2. Caption 0 has 3 real steps; caption 1 has 2 (its last step is padding).
ALPHAS = torch.tensor(
    [
        [[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]],
        [[0.3, 0.7], [0.6, 0.4], [0.1, 0.9]],  # [0.1, 0.9] is a padded step
    ]
)
STEP_MASK = torch.tensor([[True, True, True], [True, True, False]])


def test_doubly_stochastic_penalty_by_hand():
    # caption 0: Σ_t α = (1.6, 1.4) -> (1-1.6)² + (1-1.4)² = 0.36 + 0.16 = 0.52
    # caption 1: Σ_t α over real steps = (0.9, 1.1) -> 0.01 + 0.01 = 0.02;  mean = 0.27
    assert doubly_stochastic_penalty(ALPHAS, STEP_MASK).item() == pytest.approx(0.27)
    # counting the padded step would give (1.0, 2.0) -> 0 + 1 for caption 1 and a mean of 0.76
    all_real = torch.ones_like(STEP_MASK)
    assert doubly_stochastic_penalty(ALPHAS, all_real).item() == pytest.approx(0.76)
    # target 0.5: caption 0 (1.1² + 0.9²) = 2.02, caption 1 (0.4² + 0.6²) = 0.52 -> 1.27
    assert doubly_stochastic_penalty(ALPHAS, STEP_MASK, target=0.5).item() == pytest.approx(1.27)
    # target None = T_b / L: caption 0 aims at 1.5 -> 0.1² + 0.1² = 0.02; caption 1 at 1.0 -> 0.02
    assert doubly_stochastic_penalty(ALPHAS, STEP_MASK, target=None).item() == pytest.approx(0.02)


def test_doubly_stochastic_target_only_shifts_the_value_not_the_gradient():
    torch.manual_seed(0)
    scores = torch.randn(4, 7, 10, requires_grad=True)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 5:] = False
    mask[3, 2:] = False
    grads = []
    for target in (1.0, 0.3, None):
        (g,) = torch.autograd.grad(doubly_stochastic_penalty(scores.softmax(-1), mask, target), scores)
        grads.append(g)
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    assert torch.allclose(grads[0], grads[2], atol=1e-6)
    assert grads[0].abs().max() > 1e-3  # the gradient itself is not trivially zero


# --- caption loss --------------------------------------------------------------------------------
def _loss_inputs():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 3, V, generator=g)
    targets = torch.tensor([[5, 6, 2], [7, 2, 0]])  # pad = 0 at [1, 2]
    alphas = ALPHAS
    return logits, targets, alphas


def test_caption_loss_by_hand_and_ignores_pad_targets():
    logits, targets, alphas = _loss_inputs()
    total, parts = caption_loss(logits, targets, alphas, pad_id=0, ds_lambda=2.0)
    logp = logits.log_softmax(-1)
    real = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    ce = -sum(logp[b, t, targets[b, t]] for b, t in real) / len(real)
    assert parts["ce"].item() == pytest.approx(ce.item(), rel=1e-5)
    assert parts["ds"].item() == pytest.approx(0.27, rel=1e-5)  # the step mask comes from targets != pad
    assert total.item() == pytest.approx(ce.item() + 2.0 * 0.27, rel=1e-5)
    changed = logits.clone()
    changed[1, 2] = torch.randn(V) * 100  # logits at the pad position
    assert caption_loss(changed, targets, alphas, pad_id=0, ds_lambda=2.0)[0].item() == pytest.approx(
        total.item(), rel=1e-6
    )
    changed[1, 1, 4] += 5.0  # a real position does count
    assert caption_loss(changed, targets, alphas, pad_id=0)[1]["ce"].item() != pytest.approx(ce.item())


def test_caption_loss_label_smoothing_and_zero_lambda():
    logits, targets, alphas = _loss_inputs()
    total, parts = caption_loss(logits, targets, alphas, pad_id=0, ds_lambda=0.0, label_smoothing=0.1)
    assert total.item() == pytest.approx(parts["ce"].item())
    logp = logits.log_softmax(-1)
    real = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    smoothed = [-(0.9 * logp[b, t, targets[b, t]] + 0.1 * logp[b, t].mean()) for b, t in real]
    assert parts["ce"].item() == pytest.approx((sum(smoothed) / len(real)).item(), rel=1e-5)


# --- CaptionObjective: one training step's loss and logs ------------------------------------------------------------
WORDS = ["a", "red", "blue", "circle", "square", "left", "of"]


def _model(attention: str = "soft") -> tuple[CaptionModel, Vocabulary]:
    vocab = Vocabulary.build([WORDS])
    torch.manual_seed(0)
    enc = EncoderConfig(backbone="resnet18", stride=16, grid=2, weights=None, image_size=32)
    dec = DecoderConfig(embed_dim=8, hidden_dim=12, attn_dim=6, dropout=0.0, attention=attention, soft_prob=0.0)
    return CaptionModel.build(len(vocab), enc, dec), vocab


def _batch(vocab: Vocabulary, targets: bool = False) -> dict:
    captions = [["a", "red", "circle"], ["a", "blue", "square", "left", "of", "a", "circle"]]
    ids = [vocab.encode(c, eos=False) for c in captions]
    width = max(map(len, ids)) + 1
    inp = torch.full((2, width), vocab.pad_id)
    tgt = torch.full((2, width), vocab.pad_id)
    for i, row in enumerate(ids):
        inp[i, : len(row) + 1] = torch.tensor([vocab.bos_id, *row])
        tgt[i, : len(row) + 1] = torch.tensor([*row, vocab.eos_id])
    batch = {"captions_in": inp, "targets": tgt, "references": [[c] for c in captions]}
    if targets:  # attention targets: each real word on region 0
        batch["attn_targets"] = torch.zeros(2, width, 4)
        batch["attn_targets"][..., 0] = 1.0
        batch["attn_targets_mask"] = tgt != vocab.pad_id
    return batch


def test_a_soft_step_is_cross_entropy_plus_the_penalty_and_supervision():
    model, vocab = _model()
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)
    batch = _batch(vocab, targets=True)
    objective = CaptionObjective(ObjectiveConfig(ds_lambda=0.5, attn_sup_lambda=2.0), hard=False)
    model.train()
    loss, logs, warning = objective.training_loss(model, vocab, features, batch, step=0)
    out = model.decoder(features, batch["captions_in"])
    ce_ds, parts = caption_loss(out.logits, batch["targets"], out.alphas, vocab.pad_id, ds_lambda=0.5)
    sup = attention_supervision_loss(out.alphas, batch["attn_targets"], batch["attn_targets_mask"])
    assert float(loss) == pytest.approx(float(ce_ds + 2.0 * sup), rel=1e-5)
    assert set(logs) == {"train_loss", "train_ce", "train_ds", "train_attn_sup"} and warning is None
    assert objective.training_logs() == set(logs)  # what a monitored metric is checked against before a fit
    assert float(logs["train_ce"]) == pytest.approx(float(parts["ce"]), rel=1e-5)


def test_the_evaluation_sums_pool_to_validations_loss():
    """Validation's loss is pooled over the split from each caption's sums (text_attn.core.training.pooled_means):
    on one batch it is the teacher-forced loss without the label smoothing (the plain cross-entropy, as the text
    family's val_loss; it had the smoothing's term), and split in two batches it is still the whole batch's."""
    from text_attn.core.training import pooled_means, row_sums

    model, vocab = _model()
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)
    batch = _batch(vocab, targets=True)
    options = {"ds_lambda": 0.5, "attn_sup_lambda": 2.0}
    objective = CaptionObjective(ObjectiveConfig(**options, label_smoothing=0.1), hard=False)
    model.eval()
    with torch.no_grad():
        smoothed, _ = objective.teacher_forced(model, features, batch, vocab.pad_id)  # what training minimises
        plain = CaptionObjective(ObjectiveConfig(**options), hard=False)
        loss, _ = plain.teacher_forced(model, features, batch, vocab.pad_id)
        assert abs(float(smoothed - loss)) > 1e-3  # the two differ by the smoothing's term
        rows = [{"sums": r} for r in row_sums(objective.evaluation_sums(model, features, batch, vocab.pad_id))]
        halves = []
        for i in range(2):  # each caption alone: its own padding, a batch of one
            one = {k: v[i : i + 1] for k, v in batch.items() if k != "references"}
            width = int((one["targets"] != vocab.pad_id).sum())
            one = {k: v[:, :width] for k, v in one.items()}
            halves += row_sums(objective.evaluation_sums(model, features[i : i + 1], one, vocab.pad_id))
    assert objective.evaluation_loss(pooled_means(rows)) == pytest.approx(float(loss), rel=1e-5)
    halves = [{"sums": r} for r in halves]
    assert objective.evaluation_loss(pooled_means(halves)) == pytest.approx(float(loss), rel=1e-5)
    assert pooled_means(rows) == pytest.approx(pooled_means(halves), rel=1e-5)
    assert set(pooled_means(rows)) == {"ce", "ds", "attn_sup"}


def test_a_hard_step_follows_eq_12_and_moves_the_baseline():
    model, vocab = _model("hard")
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)
    batch = _batch(vocab)
    objective = CaptionObjective(ObjectiveConfig(ds_lambda=0.0, rl_lambda=0.5), hard=True)
    model.train()
    torch.manual_seed(1)
    loss, logs, _ = objective.training_loss(model, vocab, features, batch, step=0)
    torch.manual_seed(1)  # the same sampled regions
    out = model.decoder(features, batch["captions_in"])
    expected, parts = hard_attention_loss(out, batch["targets"], vocab.pad_id, None, rl_lambda=0.5)
    assert float(loss) == pytest.approx(float(expected), rel=1e-5)
    assert {"train_reinforce", "train_entropy", "train_reward", "baseline"} <= set(logs)
    assert objective.training_logs() == set(logs)
    assert int(objective.baseline.updates) == 1
    assert float(objective.baseline.value) == pytest.approx(float(parts["reward"].mean()), rel=1e-5)
    model.eval()  # evaluation: plain cross-entropy, no baseline move
    objective.teacher_forced(model, features, batch, vocab.pad_id)
    assert int(objective.baseline.updates) == 1


def test_the_hard_baseline_is_logged_only_once_set_and_only_where_used():
    """A soft warm-up samples nothing: no baseline exists yet (it logged 0.0); ``rl_reward: word`` uses none (it
    logged one all the same)."""
    model, vocab = _model("hard")  # soft_prob 0: every caption samples once the warm-up is over
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)
    batch = _batch(vocab)
    model.train()
    objective = CaptionObjective(ObjectiveConfig(ds_lambda=0.0, soft_warmup=1), hard=True)
    _, warm, _ = objective.training_loss(model, vocab, features, batch, step=0)
    assert "baseline" not in warm and "train_reinforce" in warm
    _, sampled, _ = objective.training_loss(model, vocab, features, batch, step=1)
    assert float(sampled["baseline"]) == pytest.approx(float(sampled["train_reward"]), rel=1e-5)  # its first value
    # later: the b the step's loss used, the average before this batch moved it (it was logged after the move)
    before = float(objective.baseline.value)
    _, later, _ = objective.training_loss(model, vocab, features, batch, step=2)
    assert float(later["baseline"]) == pytest.approx(before, rel=1e-6)
    assert float(objective.baseline.value) != pytest.approx(before, rel=1e-6)  # the batch moved it, after
    word = CaptionObjective(ObjectiveConfig(ds_lambda=0.0, rl_reward="word"), hard=True)
    for step in range(2):
        assert "baseline" not in word.training_loss(model, vocab, features, batch, step=step).logs
    # its reward: the words' mean log-probability (what each location is credited with), not the caption's sum
    torch.manual_seed(3)
    logs = word.training_loss(model, vocab, features, batch, step=2).logs
    torch.manual_seed(3)
    out = model.decoder(features, batch["captions_in"])
    from captioning.training.objective import word_log_likelihoods

    mask = batch["targets"] != vocab.pad_id
    per_word = word_log_likelihoods(out.logits.float(), batch["targets"], vocab.pad_id)
    means = (per_word * mask).sum(1) / mask.sum(1)
    assert float(logs["train_reward"]) == pytest.approx(float(means[out.sampled].mean()), rel=1e-5)
    assert objective.training_logs() == set(sampled) and word.training_logs() == set(sampled) - {"baseline"}


def test_the_collapse_watch_state_round_trips_and_an_older_checkpoint_leaves_it_as_it_is():
    watch = CollapseMonitor(warmup=1, ratio=0.0)
    assert watch.update(1.0, 4, 0) is None and watch.update(1.0, 4, 1) is not None  # warned at step 1
    resumed = CollapseMonitor(warmup=1, ratio=0.0)
    resumed.load_state_dict(watch.state_dict())
    assert resumed.level == watch.level and resumed.update(1.0, 4, 2) is None  # not twice
    older = CollapseMonitor(warmup=1, ratio=0.0)
    older.load_state_dict(None)  # a checkpoint written before the watch was kept
    assert older.level is None and not older.warned


def test_an_scst_step_needs_the_training_references_and_logs_its_reward():
    model, vocab = _model()
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)
    batch = _batch(vocab)
    config = ObjectiveConfig(ds_lambda=0.0, scst=True, scst_samples=3, scst_baseline="leave_one_out")
    objective = CaptionObjective(config, False)
    with pytest.raises(ValueError, match="use_references"):
        objective.training_loss(model, vocab, features, batch, step=0)
    objective.use_references([r for r in batch["references"]])
    loss, logs, _ = objective.training_loss(model, vocab, features, batch, step=0)
    assert loss.requires_grad and set(logs) == {"train_loss", "train_reward", "train_baseline", "train_advantage"}
    assert objective.training_logs() == set(logs)
    assert float(logs["train_advantage"]) == pytest.approx(
        float(logs["train_reward"]) - float(logs["train_baseline"]), abs=1e-6
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ds_lambda": -1.0}, "model.objective.ds_lambda must be at least 0, got -1"),
        ({"label_smoothing": 1.0}, "model.objective.label_smoothing must be between 0 and 0.99, got 1"),
        ({"attn_sup_lambda": -0.5}, "model.objective.attn_sup_lambda must be >= 0, got -0.5"),
        ({"scst_baseline": "beam"}, "model.objective.scst_baseline must be one of"),
        ({"rl_reward": "sentence"}, "unknown rl_reward 'sentence'"),
        # a negative weight flipped REINFORCE or rewarded sharp attention, silently; a decay of 1.5 failed later,
        # unnamed; a ratio above 1 never warned (the level is entropy / log L)
        ({"rl_lambda": -1.0}, "model.objective.rl_lambda must be at least 0, got -1"),
        ({"entropy_lambda": -0.5}, "model.objective.entropy_lambda must be at least 0, got -0.5"),
        ({"baseline_decay": 1.5}, "model.objective.baseline_decay must be at least 0 and below 1, got 1.5"),
        ({"baseline_decay": 1.0}, "model.objective.baseline_decay must be at least 0 and below 1, got 1"),
        ({"soft_warmup": -3}, "model.objective.soft_warmup must be at least 0, got -3"),
        ({"collapse_warmup": -1}, "model.objective.collapse_warmup must be at least 0, got -1"),
        ({"collapse_ratio": 7.0}, "model.objective.collapse_ratio must be between 0 and 1, got 7"),
        # SCST's loss is the samples' reward: these changed nothing that trains (ds_lambda's default 1 included)
        ({"scst": True}, r"model.objective.ds_lambda 1 has no effect under model.objective.scst .*ds_lambda 0$"),
        ({"scst": True, "ds_lambda": 0.0, "label_smoothing": 0.5}, "label_smoothing 0.5 has no effect under"),
    ],
)
def test_bad_objective_options_are_refused_by_name(options, message):
    with pytest.raises(ValueError, match=message):
        ObjectiveConfig(**options)


def test_an_objective_option_at_its_old_place_names_the_new_one(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    from captioning.commands.train import caption_train_cli

    monkeypatch.chdir(tmp_path)
    config = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", config, "--model.ds_lambda", "0.1", "--model.scst", "true"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert "put ds_lambda, scst under model.objective (e.g. model.ds_lambda -> model.objective.ds_lambda" in err[0]


def test_a_hard_checkpoint_from_before_the_objective_block_is_refused_in_one_line():
    """Its baseline buffer sat at the module's top level ("baseline.value"); resuming it is refused, not mis-loaded."""
    from captioning.training.module import CaptionModule

    old = {"state_dict": {"baseline.value": torch.tensor(-3.0), "baseline.updates": torch.tensor(7)}}
    with pytest.raises(ValueError, match="predates model.objective .* start from its model file with model.init_from"):
        CaptionModule(decoder={"attention": "hard"}).on_load_checkpoint(old)
