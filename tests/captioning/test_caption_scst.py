"""Captioning beyond cross-entropy: self-critical training raises its reward, attention supervision pulls α to the
named object, and caption-train runs both through the CLI (an SCST stage starting from a first stage's model file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from captioning.commands.train import caption_train_cli
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.objective import CaptionReward, ObjectiveConfig, self_critical_step
from text_attn.core.vocab import Vocabulary

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
QUIET = ["--trainer.enable_progress_bar", "false"]


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Runs land in tmp_path; the tiny config's cpu_threads is undone afterwards (tests/conftest.py)."""


def _toy():
    torch.manual_seed(0)
    words = "a red blue circle square".split()
    vocab = Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", *words])
    enc = EncoderConfig(backbone="resnet18", weights=None, grid=2, stride=32, image_size=64, crop=False)
    dec = DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, dropout=0.0)
    model = CaptionModel.build(len(vocab), enc, dec)
    features = torch.randn(2, 4, model.decoder.cfg.feature_dim)  # two "images", four regions each
    references = [[["a", "red", "circle"]], [["a", "blue", "square"]]]
    return model, vocab, features, references


@pytest.mark.long
def test_self_critical_steps_raise_the_cider_reward(one_thread):
    model, vocab, features, references = _toy()
    reward = CaptionReward(references * 3)

    def greedy_reward() -> float:
        ids = model.generate(features, vocab.bos_id, vocab.eos_id, 5).token_lists()
        return float(reward([[vocab.itos[i] for i in row] for row in ids], references).mean())

    opt = torch.optim.Adam(model.decoder.parameters(), lr=0.01)
    torch.manual_seed(1)
    start, means = greedy_reward(), []
    for _ in range(80):
        loss, stats = self_critical_step(
            model, vocab, features, references, reward, samples=8, baseline="leave_one_out", max_len=5
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        means.append(float(stats["reward"]))
    # CIDEr-D (x10): a random caption scores under 1 here, the reference itself 10. How far 80 steps get depends on
    # the draws (2.3 to 6 over seeds); every seed tried at least doubles the first steps' reward.
    first, last = sum(means[:5]) / 5, sum(means[-5:]) / 5
    assert last > 2 * first and last > first + 1.2, means
    end = greedy_reward()
    assert end > start + 1.2, (start, end)


def test_the_bleu_weight_adds_sentence_bleu_to_the_cider_reward():
    references = [[["a", "red", "circle"], ["a", "red", "round", "circle"]], [["a", "blue", "square"]]]
    captions = [["a", "red", "circle"], ["a", "red", "square"]]
    cider = CaptionReward(references)(captions, references)
    mixed = CaptionReward(references, bleu=2.0)(captions, references)
    # BLEU-4 with add-one smoothing above unigrams, by hand (each caption as long as a reference: no brevity
    # penalty). The first is a reference: p1..p3 = 1, and its no 4-grams of at least one counted give (0+1)/(1+1).
    # The second matches "a" and "square": p1 = 2/3, no bigram (0+1)/(2+1), no trigram (0+1)/(1+1), p4 = 1/2.
    by_hand = [0.5**0.25, (2 / 3 * 1 / 3 * 1 / 2 * 1 / 2) ** 0.25]
    torch.testing.assert_close(mixed - cider, 2.0 * torch.tensor(by_hand))
    with pytest.raises(ValueError, match="scst_bleu must be at least 0, got -1"):
        ObjectiveConfig(scst_bleu=-1.0)
    # the METEOR-like term: the first caption is a reference (one chunk of 3: 1 - 0.5 / 27); the second matches
    # "a" and "square" of its only reference, in two chunks: P = R = 2/3, so Fmean 2/3, times 1 - 0.5 (2/2)^3
    both = CaptionReward(references, bleu=2.0, meteor=3.0)(captions, references)
    torch.testing.assert_close(both - mixed, 3.0 * torch.tensor([1 - 0.5 / 27, 2 / 3 * 0.5]))
    with pytest.raises(ValueError, match="scst_meteor must be at least 0, got -1"):
        ObjectiveConfig(scst_meteor=-1.0)


def test_an_scst_sample_as_good_as_greedy_teaches_nothing(one_thread):
    """Negative control: with every reward equal (a constant reward function), the loss has zero gradient."""
    model, vocab, features, references = _toy()

    class Constant(CaptionReward):
        def __call__(self, captions, refs):
            return torch.full((len(captions),), 3.0)

    loss, stats = self_critical_step(model, vocab, features, references, Constant(references), samples=3, max_len=5)
    loss.backward()
    assert float(stats["advantage"]) == 0.0
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in model.parameters())


def test_scst_samples_and_scores_what_caption_writes(one_thread):
    """caption never writes <unk>, <pad> or <bos>; SCST drew from the unbanned distribution, so the policy it trained
    was not the one captions are decoded with. Here <unk> is the model's favourite by far: no sample holds it, and each
    sampled token's log-probability is that of the distribution without the three (renormalised)."""
    model, vocab, features, references = _toy()
    out = model.decoder.L_o if hasattr(model.decoder, "L_o") else model.decoder.out
    with torch.no_grad():
        out.bias[vocab.unk_id] += 50.0
    drawn = []

    class Length(CaptionReward):
        def __call__(self, captions, refs):
            drawn.extend(captions)
            return torch.tensor([float(len(c)) for c in captions])

    torch.manual_seed(0)
    loss, stats = self_critical_step(model, vocab, features, references, Length(references), samples=4, max_len=5,
                                     baseline="leave_one_out")  # fmt: skip
    assert drawn and not any({"<unk>", "<pad>", "<bos>"} & set(c) for c in drawn)
    # unbanned, each sampled token would cost about 50 nats; banned and renormalised, a few at most
    assert torch.isfinite(loss) and float(loss.abs()) < 50, float(loss)


def test_scst_caps_its_captions_as_validation_does(one_thread):
    """scst_max_len counted the end among its tokens where validation and `caption` decode up to max_len words and then
    the end: a caption of exactly max_len words was cut off in SCST (its end's probability never trained) and whole in
    validation. Now the greedy baseline is validation's caption, and samples of max_len words can end."""
    model, vocab, features, references = _toy()
    out = model.decoder.L_o if hasattr(model.decoder, "L_o") else model.decoder.out
    with torch.no_grad():
        out.bias[vocab.eos_id] -= 0.2  # the first image's greedy caption: a few words, then the end
    captioner = Captioner(model, vocab)
    (first, *_) = captioner.caption_features(features, 1, 30)
    n = len(first.words)
    assert n >= 1 and not first.truncated
    validation = captioner.caption_features(features, 1, n)  # as CaptionModule validates at val_max_len n
    decoded, generate = [], model.generate

    def recorded(*args, **options):  # the searches SCST runs, as they are
        decoded.append(generate(*args, **options))
        return decoded[-1]

    model.generate = recorded
    torch.manual_seed(0)
    self_critical_step(model, vocab, features, references, CaptionReward(references), samples=20, max_len=n)
    sampled, greedy = decoded
    assert [vocab.decode(ids) for ids in greedy.token_lists()] == [c.words for c in validation]
    assert greedy.ended().tolist() == [not c.truncated for c in validation] and greedy.ended()[0]
    lengths = [len(ids) for ids in sampled.token_lists()]
    assert max(lengths) == n and any(k == n and e for k, e in zip(lengths, sampled.ended().tolist(), strict=True))


def test_init_from_checks_the_network_and_the_vocabulary(tmp_path):
    model, vocab, _, _ = _toy()
    path = tmp_path / "m.pt"
    Captioner(model, vocab).save(path)
    other, _, _, _ = _toy()
    torch.nn.init.zeros_(other.decoder.L_o.weight)
    Captioner.start_weights(path, other, vocab)
    assert torch.equal(other.decoder.L_o.weight, model.decoder.L_o.weight)
    with pytest.raises(ValueError, match="another vocabulary"):
        Captioner.start_weights(path, other, Vocabulary(["<pad>", "<bos>", "<eos>", "<unk>", "x"]))
    shuffled = Vocabulary([*vocab.itos[:4], *reversed(vocab.itos[4:])])  # other data: the ids in another order
    with pytest.raises(ValueError, match=r"another vocabulary \(the same words in another order\)"):
        Captioner.start_weights(path, other, shuffled)
    bigger = CaptionModel.build(
        len(vocab), EncoderConfig(backbone="resnet18", weights=None, grid=2, stride=32, image_size=64, crop=False),
        DecoderConfig(embed_dim=8, hidden_dim=24, attn_dim=8),
    )  # fmt: skip
    with pytest.raises(ValueError, match="does not fit this config's network"):
        Captioner.start_weights(path, bigger, vocab)
    ungated = CaptionModel.build(
        len(vocab), EncoderConfig(backbone="resnet18", weights=None, grid=2, stride=32, image_size=64, crop=False),
        DecoderConfig(embed_dim=8, hidden_dim=16, attn_dim=8, gate="none"),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"decoder\.f_beta\.bias: only in the file"):  # named, not a trace
        Captioner.start_weights(path, ungated, vocab)
    with pytest.raises(ValueError, match="no such file"):
        Captioner.start_weights(tmp_path / "missing.pt", other, vocab)


@pytest.mark.long
def test_an_scst_stage_needs_a_start_and_writes_the_start_it_did_not_beat(tmp_path, capsys, monkeypatch):
    """SCST from random weights is refused in one line, before the features are encoded. A stage at a rate that
    wrecks the model: the start, validated on the whole val split before the first step, scored better than any
    checkpoint, so the model file holds the start's weights (it held the worse model, said by a line the shipped
    configs never printed), and the module its last weights again."""
    from captioning.training.feature_cache import FeatureCacheCallback

    scst = ["--model.objective.scst", "true", "--model.objective.ds_lambda", "0", "--model.objective.scst_samples", "2"]
    encoded = []
    with monkeypatch.context() as patch, pytest.raises(SystemExit) as exc:
        patch.setattr(FeatureCacheCallback, "_share", lambda self, *args: encoded.append(args[-1]))
        caption_train_cli(["fit", "--config", CONFIG, *QUIET, *scst])
    assert encoded == []  # refused before the feature cache's work (minutes on real data)
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        exc.value.code == 2
        and len(err) == 1
        and err[0].startswith(
            "caption-train: error: model.objective.scst starts from a trained model's weights: give model.init_from"
        )
    ), err
    first = tmp_path / "first.pt"
    caption_train_cli(["fit", "--config", CONFIG, "--model.export_path", str(first), *QUIET])
    capsys.readouterr()
    best = ["--trainer.enable_checkpointing", "true", "--trainer.callbacks+=ModelCheckpoint",
            "--trainer.callbacks.monitor", "val_loss", "--trainer.callbacks.mode", "min"]  # fmt: skip
    validated = ["--trainer.num_sanity_val_steps", "-1", "--trainer.val_check_interval", "1"]  # the start, each step
    cli = caption_train_cli(["fit", "--config", CONFIG, *QUIET, *scst, *best, *validated, "--model.lr", "1.0",
                             "--trainer.max_steps", "2", "--model.init_from", str(first),
                             "--model.export_path", str(tmp_path / "second.pt")])  # fmt: skip
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "before training" in x)
    before, best_loss = (float(v) for v in re.findall(r"(\d+\.\d+) (?:from|at)", line))
    assert line.startswith("caption-train: val_loss: ") and before < best_loss, line  # lower is better
    assert f"wrote model file: {tmp_path / 'second.pt'} (model.init_from's weights: they scored better on val" in err
    begun, written = Captioner.load(first).model.state_dict(), Captioner.load(tmp_path / "second.pt").model.state_dict()
    assert all(torch.equal(written[k], begun[k]) for k in begun)
    last = cli.model.model.state_dict()
    assert not all(torch.equal(last[k], begun[k]) for k in begun)
    # resumed (its checkpoint, a step more): the start's scores came with it, so it is written back again (a resumed
    # fit had none: the worse trained weights were written, unsaid)
    ckpt = cli.trainer.checkpoint_callback.best_model_path
    assert torch.load(ckpt, weights_only=True)["start_scores"]["scores"]["val_loss"] == pytest.approx(before, abs=1e-4)

    def resumed(steps: int, out: Path) -> str:
        """The stage resumed from its best checkpoint for ``steps`` in all, its model file at ``out``: stderr."""
        caption_train_cli(["fit", "--config", CONFIG, *QUIET, *scst, *best, *validated, "--model.lr", "1.0",
                           "--trainer.max_steps", str(steps), "--model.init_from", str(first), "--ckpt_path", ckpt,
                           "--model.export_path", str(out)])  # fmt: skip
        return capsys.readouterr().err

    third = tmp_path / "third.pt"
    err = resumed(3, third)
    assert f"wrote model file: {third} (model.init_from's weights: they scored better on val" in err, err[-3000:]
    written = Captioner.load(third).model.state_dict()
    assert all(torch.equal(written[k], begun[k]) for k in begun)
    # the start's file replaced since (another model, the same vocabulary): it was written as the start that scored
    # better (review of a text-train audit); now the trained weights are, said so
    replaced = Captioner.load(first)
    with torch.no_grad():
        next(replaced.model.parameters()).add_(1.0)
    replaced.save(first)
    fourth = tmp_path / "fourth.pt"
    err = resumed(4, fourth)
    assert f"model.init_from {first} is not the file whose weights were scored before training" in err, err[-3000:]
    written, other = Captioner.load(fourth).model.state_dict(), replaced.model.state_dict()
    assert not all(torch.equal(written[k], other[k]) for k in other)
    assert not all(torch.equal(written[k], begun[k]) for k in begun)


@pytest.mark.slow
def test_caption_train_runs_an_scst_stage_from_a_model_file_and_attention_supervision(tmp_path, capsys):
    first = tmp_path / "first.pt"
    caption_train_cli(["fit", "--config", CONFIG, "--model.export_path", str(first), *QUIET])
    second = tmp_path / "second.pt"
    args = ["fit", "--config", CONFIG, "--model.export_path", str(second), *QUIET]
    cli = caption_train_cli(
        [
            *args,
            "--model.objective.scst",
            "true",
            "--model.objective.ds_lambda",
            "0",
            "--model.init_from",
            str(first),
            "--trainer.max_steps",
            "2",
        ]
    )
    assert cli.trainer.global_step == 2
    logged = cli.trainer.logged_metrics
    assert {"train_reward", "train_baseline", "train_advantage"} <= set(logged)
    assert Captioner.load(second).vocab == cli.datamodule.vocab
    sup = ["--model.objective.attn_sup_lambda", "1.0", "--data.attention_targets", "true", "--trainer.max_steps", "2"]
    cli = caption_train_cli([*args, *sup])
    assert float(cli.trainer.logged_metrics["train_attn_sup"]) > 0
    with pytest.raises(SystemExit):
        caption_train_cli([*args, "--model.objective.attn_sup_lambda", "1.0"])
    assert "set data.attention_targets: true" in capsys.readouterr().err


def test_attention_supervision_pulls_alpha_to_the_target(one_thread):
    from text_attn.core.attention_supervision import attention_supervision_loss

    model, vocab, features, _ = _toy()
    caps = torch.tensor([[1, 4, 5, 6], [1, 4, 7, 8]])  # bos a red circle / bos a blue square
    target = torch.zeros(2, 4, 4)
    target[:, 3, 2] = 1.0  # the noun (step 3) names region 2
    mask = torch.zeros(2, 4, dtype=torch.bool)
    mask[:, 3] = True
    opt = torch.optim.Adam(model.decoder.parameters(), lr=0.05)
    before = model.decoder(features, caps).alphas[:, 3, 2].detach()
    for _ in range(20):
        loss = attention_supervision_loss(model.decoder(features, caps).alphas, target, mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = model.decoder(features, caps).alphas[:, 3, 2].detach()
    assert bool((after > 0.9).all()) and bool((before < 0.5).all()), (before, after)
