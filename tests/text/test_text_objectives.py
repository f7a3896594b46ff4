"""TranslationModule's objectives beyond cross-entropy (issue 15), on tiny `reorder` models:

- attention supervision: the term is in the training and validation loss (CE + λ · supervision, checked by hand), and
  a few optimiser steps with it raise the teacher-forced attention on the true source word, far more than the same
  steps without it;
- self-critical training with a BLEU reward: a short seeded run raises the mean reward of the sampled translations,
  samples and scores them with dropout off, and logs reward, baseline and advantage; its samples stay within a
  learned position table; under weight averaging it writes the mean, even where its start scored better;
- ``init_from``: the network starts with the weights of a model file or a text-train checkpoint;
- each mistake is one clear line.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from pytorch_lightning.callbacks import ModelCheckpoint

from text_attn.core.attention_supervision import attention_supervision_loss
from text_attn.core.decoding import Sampling
from text_attn.core.rewards import bleu_rewards
from text_attn.core.vocab import Vocabulary
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.translator import Translator

FIX = Path(__file__).parent.parent / "fixtures"
NET = {"attention": "bahdanau", "embed_dim": 16, "enc_hidden": 16, "dec_hidden": 32, "attn_dim": 16, "dropout": 0.0}
DATA = {
    "task": "reorder",
    "train_size": 64,
    "val_size": 8,
    "test_size": 8,
    "batch_size": 32,
    "min_len": 5,
    "max_len": 8,
}


@pytest.fixture(autouse=True)
def _threads(one_thread):
    """One torch thread (tests/conftest.py): tiny models on a shared CPU."""


def _built(data: dict | None = None, seed: int = 0, **model) -> TranslationModule:
    """A module whose network is built (setup) from the tiny data, without a Trainer."""
    model.setdefault("network", dict(NET))
    dm = TranslationDataModule(**{**DATA, "attention_targets": True, **(data or {})})
    torch.manual_seed(seed)
    module = TranslationModule(**model)
    module.trainer = SimpleNamespace(datamodule=dm)  # all setup reads from a trainer
    module.setup("fit")
    return module


def _loss(module: TranslationModule, batch: dict):
    """The module's teacher-forced loss: (cross-entropy + λ · supervision, the supervision term or None)."""
    return module.objective.teacher_forced(module.net, batch, module.tgt_vocab.pad_id)


def _batch(module: TranslationModule) -> dict:
    return next(iter(module.trainer.datamodule.train_dataloader()))


def _trainer(steps: int, root) -> pl.Trainer:
    return pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        default_root_dir=root,
    )


@pytest.mark.parametrize("objective", [{}, {"attn_sup_lambda": 0.5}, {"scst": True, "scst_samples": 2},
                                       {"scst": True, "scst_samples": 2, "attn_sup_lambda": 0.5}])  # fmt: skip
def test_the_names_a_training_step_logs_are_the_ones_it_declares(objective):
    """training_logs(): what a monitored metric that is no validation's is checked against before a fit
    (lightning_parts.MonitorCheck); each kind of step logs exactly those."""
    module = _built(objective=objective)
    v = module.tgt_vocab
    logs = module.objective.training_loss(module.net, _batch(module), v.bos_id, v.eos_id, v.pad_id).logs
    assert module.training_logs() == set(logs) and "train_loss" in logs


# --- attention supervision -------------------------------------------------------------------------------------------
def test_the_supervision_term_is_in_the_loss():
    module = _built(objective={"attn_sup_lambda": 0.5})
    batch = _batch(module)
    loss, sup = (x.detach() for x in _loss(module, batch))
    logits, attn = module.net(batch["src"], batch["src_lens"], batch["tgt"][:, :-1])  # no dropout: the same values
    ce = F.cross_entropy(logits.transpose(1, 2), batch["tgt"][:, 1:], ignore_index=module.tgt_vocab.pad_id)
    by_hand = attention_supervision_loss(attn, batch["attn_targets"], batch["attn_targets_mask"])
    assert float(sup.detach()) == pytest.approx(float(by_hand.detach())) and float(sup.detach()) > 0.5
    assert float(loss.detach()) == pytest.approx(float((ce + 0.5 * by_hand).detach()))
    plain_loss, none = _loss(
        _built(objective={"attn_sup_lambda": 0.0}), batch
    )  # same seed, same weights: λ = 0 is plain CE
    assert none is None and float(plain_loss.detach()) == pytest.approx(float(ce.detach()))


def test_the_evaluation_loss_is_the_plain_cross_entropy_and_training_keeps_the_smoothing():
    """val_loss is the split's cross-entropy per token (exp: the perplexity), + λ · supervision: label smoothing is
    what training minimises, not what validation reports (it was in val_loss too)."""
    from text_attn.core.training import pooled_means, row_sums

    module = _built(objective={"label_smoothing": 0.1, "attn_sup_lambda": 0.5})
    batch, objective, pad = _batch(module), module.objective, module.tgt_vocab.pad_id
    with torch.no_grad():
        logits, attn = module.net(batch["src"], batch["src_lens"], batch["tgt"][:, :-1])  # no dropout
        sup = attention_supervision_loss(attn, batch["attn_targets"], batch["attn_targets_mask"])
        ce, smoothed = (F.cross_entropy(logits.transpose(1, 2), batch["tgt"][:, 1:], ignore_index=pad,
                                        label_smoothing=ls) for ls in (0.0, 0.1))  # fmt: skip
        rows = [{"sums": r} for r in row_sums(objective.evaluation_sums(module.net, batch, pad))]
        val_loss = objective.evaluation_loss(pooled_means(rows))
        train_loss, _ = _loss(module, batch)
    assert val_loss == pytest.approx(float(ce + 0.5 * sup), rel=1e-5)
    assert float(train_loss) == pytest.approx(float(smoothed + 0.5 * sup), rel=1e-5)
    assert abs(float(smoothed - ce)) > 1e-3  # the two differ by the smoothing's term (an untrained model: a little)


def test_the_transformer_supervises_the_mean_of_its_penultimate_layer_heads_or_the_layer_named():
    tiny = {"d_model": 16, "num_heads": 2, "enc_layers": 1, "dec_layers": 2, "ff_dim": 32, "dropout": 0.0}
    for layer, named in ((None, 0), (-1, 1)):  # default: the penultimate (alignments.alignment_layer); -1: the last
        module = _built(arch="transformer", network=tiny, objective={"attn_sup_lambda": 1.0, "attn_sup_layer": layer})
        batch = _batch(module)
        loss, sup = _loss(module, batch)
        assert module.net.plot_layer == -1  # what translate draws is left as it was
        module.net.set_plot_layer(named)
        _, heads = module.net(batch["src"], batch["src_lens"], batch["tgt"][:, :-1], need_weights=True)  # (B,T,H,S)
        module.net.set_plot_layer(-1)
        by_hand = attention_supervision_loss(heads.mean(2), batch["attn_targets"], batch["attn_targets_mask"])
        assert float(sup.detach()) == pytest.approx(float(by_hand.detach()))
        sup.backward()
        grads = [0.0 if (g := d.cross_attn.in_proj_weight.grad) is None else float(g.abs().sum())
                 for d in module.net.decoder_layers]  # fmt: skip
        assert grads[named] > 0  # the supervised layer's attention is pulled; a later layer's is not
        assert named == 1 or grads[1] == 0


@pytest.mark.parametrize(
    ("network", "layer", "why"),
    [({"d_model": 16, "num_heads": 2, "enc_layers": 1, "dec_layers": 2, "ff_dim": 32}, 2, "attn_sup_layer 2 is out "
      "of range: the network has 2 decoder layers"),
     (None, 0, "attn_sup_layer picks a Transformer decoder layer; this network has one attention")],
)  # fmt: skip
def test_a_supervised_layer_the_network_lacks_is_refused(network, layer, why):
    arch = {"arch": "transformer", "network": network} if network else {}
    with pytest.raises(ValueError, match=why):
        _built(objective={"attn_sup_lambda": 1.0, "attn_sup_layer": layer}, **arch)


def _true_word_weight(module: TranslationModule, batch: dict) -> float:
    """Mean teacher-forced attention on the source word each target word translates."""
    with torch.no_grad():
        _, attn = module.net(batch["src"], batch["src_lens"], batch["tgt"][:, :-1])  # (B, T+1, S)
    mask = batch["attn_targets_mask"]
    return float((attn * batch["attn_targets"]).sum(-1)[mask].mean())


def test_supervision_moves_the_attention_to_the_true_word():
    after = {}
    for lam in (0.0, 1.0):
        module = _built(objective={"attn_sup_lambda": lam}, lr=0.03)
        batch = _batch(module)
        before = _true_word_weight(module, batch)
        opt = module.configure_optimizers()
        for _ in range(20):
            opt.zero_grad()
            _loss(module, batch)[0].backward()
            opt.step()
        after[lam] = _true_word_weight(module, batch)
    # seeded: 0.16 at the start; 0.21 after 20 steps of cross-entropy alone, 0.73 with the supervision term
    assert before < 0.2 and after[0.0] < 0.3 and after[1.0] > 0.6, (before, after)


# --- init_from -------------------------------------------------------------------------------------------------------
def _equal_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_init_from_a_model_file_or_a_checkpoint_loads_its_weights(tmp_path):
    trained = _built(seed=1)
    model_file = trained.translator().save(tmp_path / "model.pt")
    checkpoint = {"state_dict": trained.state_dict(), "pytorch-lightning_version": pl.__version__}
    trained.on_save_checkpoint(checkpoint)  # what a text-train checkpoint holds: the weights and the model metadata
    torch.save(checkpoint, tmp_path / "last.ckpt")
    fresh = _built(seed=2)
    assert not _equal_weights(fresh.net, trained.net)  # a different start without init_from
    for path in (model_file, tmp_path / "last.ckpt"):
        started = _built(seed=2, network=None, init_from=str(path))  # the network's settings come from the file
        assert _equal_weights(started.net, trained.net) and started.config == trained.config
    # an option that keeps every weight's shape may differ from the file's
    assert _built(network={"dropout": 0.3}, init_from=str(model_file)).net.cfg.dropout == 0.3


# --- self-critical training ------------------------------------------------------------------------------------------
def _sample_reward(module: TranslationModule, batch: dict, k: int = 8) -> float:
    """Mean BLEU of k seeded samples per source: the expected reward the policy gets."""
    net, vocab = module.net.eval(), module.tgt_vocab
    refs = [row[1 : n - 1] for row, n in zip(batch["tgt"].tolist(), (batch["tgt"] != 0).sum(1).tolist(), strict=True)]
    src, lens = batch["src"].repeat_interleave(k, 0), batch["src_lens"].repeat_interleave(k, 0)
    res = net.generate(src, lens, vocab.bos_id, vocab.eos_id, max_len=30, sampling=Sampling(seed=123))
    return sum(bleu_rewards(refs, res.token_lists(), k)) / len(res.token_lists())


@pytest.mark.long
def test_a_short_scst_run_raises_the_sampled_reward(tmp_path):
    pl.seed_everything(0, verbose=False)
    data = TranslationDataModule(**DATA)
    first = TranslationModule(network=dict(NET), lr=0.01, export_path=str(tmp_path / "ce.pt"))
    _trainer(20, tmp_path).fit(first, data)  # a weak cross-entropy model: room to improve
    batch = next(iter(data.train_dataloader()))
    start = _sample_reward(first, batch)

    pl.seed_everything(1, verbose=False)
    net = dict(NET, dropout=0.3)  # dropout must be off while sampling and scoring
    scst = TranslationModule(
        network=net,
        lr=0.01,
        objective={"scst": True, "scst_samples": 4},
        init_from=str(tmp_path / "ce.pt"),
        export_path=str(tmp_path / "scst.pt"),
    )
    modes = []
    trainer = _trainer(20, tmp_path)
    scst.setup = _record_modes(scst, modes)
    trainer.fit(scst, TranslationDataModule(**DATA))
    assert modes and not any(modes)  # every encoder call of the SCST steps ran in eval mode
    assert scst.net.training  # and training mode is back afterwards
    vocab = scst.tgt_vocab  # its samples are drawn and scored without what translate never writes
    assert set(scst.objective.banned) >= {vocab.pad_id, vocab.bos_id} and vocab.eos_id not in scst.objective.banned
    end = _sample_reward(scst, batch)
    assert end > start + 0.03, (start, end)
    logged = trainer.callback_metrics
    assert {"train_reward", "train_baseline", "train_advantage"} <= set(logged)
    assert float(logged["train_advantage"]) == pytest.approx(
        float(logged["train_reward"]) - float(logged["train_baseline"]), abs=1e-6
    )


def test_scst_rewards_each_sample_against_its_own_reference_words(monkeypatch):
    """The reference a sample's BLEU is taken against is the target's words: no bos, no eos (a sample's token list
    has no eos either), and K samples per source."""
    from text_attn.translation import objective

    module = _built(objective={"scst": True, "scst_samples": 2})
    batch = _batch(module)
    v = module.tgt_vocab
    seen = []

    def spy(refs, hypotheses, copies):
        seen.append((refs, copies))
        return bleu_rewards(refs, hypotheses, copies)

    monkeypatch.setattr(objective, "bleu_rewards", spy)
    module.objective.training_loss(module.net, batch, v.bos_id, v.eos_id, v.pad_id)
    by_hand = [row[1 : row.index(v.eos_id)] for row in batch["tgt"].tolist()]  # bos w1 .. wn eos pad ...
    assert [copies for _, copies in seen] == [2, 1]  # the samples, then the greedy baseline
    assert all(refs == by_hand for refs, _ in seen)


def test_scst_caps_its_samples_as_validation_and_translate_do():
    """SCST ran every source to 2 x its batch's longest + 10, where validation (and translate) cap each source at its
    own 2 x (its tokens and end) + 10; and a given scst_max_len counted the end among its tokens, where translate
    --max-len and the caption family's scst_max_len do not. Here no output ends of itself (the end's logit far down)
    for the null cap, so each runs to its cap: the greedy baseline is validation's translation, row for row."""
    module = _built(objective={"scst": True, "scst_samples": 2})
    batch, net, v = _batch(module), module.net, module.tgt_vocab
    decoded, generate = [], net.generate

    def recorded(*args, **options):  # the searches SCST runs, as they are
        decoded.append(generate(*args, **options))
        return decoded[-1]

    net.generate = recorded
    with torch.no_grad():
        net.out.bias[v.eos_id] -= 50.0
    module.objective.training_loss(net, batch, v.bos_id, v.eos_id, v.pad_id)
    sampled, greedy = decoded
    validation = module._decode(batch).token_lists()
    assert greedy.token_lists() == validation and len({len(t) for t in validation}) > 1  # each its own length
    assert [len(t) for t in sampled.token_lists()] == [len(t) for t in validation for _ in range(2)]

    with torch.no_grad():  # a given cap: 2 tokens, then the end
        net.out.bias[v.eos_id] += 52.0
    capped = _built(objective={"scst": True, "scst_samples": 8, "scst_max_len": 2})
    capped.net, decoded[:] = net, []
    torch.manual_seed(0)
    capped.objective.training_loss(net, batch, v.bos_id, v.eos_id, v.pad_id)
    lengths, ended = [len(t) for t in decoded[0].token_lists()], decoded[0].ended().tolist()
    assert max(lengths) == 2 and any(n == 2 and e for n, e in zip(lengths, ended, strict=True))


def test_scst_samples_of_a_learned_position_table_stop_within_it():
    """A Transformer with 8 learned positions and scst_max_len 8: its samples run to 7 tokens and then the end (the
    table's last row), not to 8 (a ninth position: "longer than the learned max_len 8", the step a traceback). No
    output ends of itself here (the end's logit far down), so each runs to the cap."""
    network = {"d_model": 16, "num_heads": 2, "enc_layers": 1, "dec_layers": 1, "ff_dim": 32, "positions": "learned",
               "max_len": 8, "dropout": 0.0}  # fmt: skip
    module = _built({"min_len": 3, "max_len": 5}, arch="transformer", network=network,
                    objective={"scst": True, "scst_samples": 2, "scst_max_len": 8})  # fmt: skip
    batch, net, v = _batch(module), module.net, module.tgt_vocab
    decoded, generate = [], net.generate

    def recorded(*args, **options):
        decoded.append(generate(*args, **options))
        return decoded[-1]

    net.generate = recorded
    with torch.no_grad():
        net.out.bias[v.eos_id] -= 50.0
    out = module.objective.training_loss(net, batch, v.bos_id, v.eos_id, v.pad_id)
    assert torch.isfinite(out.loss)
    assert {len(t) for d in decoded for t in d.token_lists()} == {7}  # sampled and greedy: the table's room


@pytest.mark.long
def test_an_scst_stage_needs_a_start_and_keeps_one_it_did_not_beat(tmp_path, capsys):
    """SCST from random weights is refused in one line, a resume of an SCST run is not; a stage that made its start
    worse on val (validated on the whole split before the first step) writes the start's weights, and says so: it
    wrote the worse model, silently."""
    pl.seed_everything(0, verbose=False)
    start = tmp_path / "ce.pt"
    _trainer(20, tmp_path).fit(TranslationModule(network=dict(NET), lr=0.01, export_path=str(start)),
                               TranslationDataModule(**DATA))  # fmt: skip
    scst = {"scst": True, "scst_samples": 2}
    with pytest.raises(ValueError, match="^model.objective.scst starts from a trained model's weights: give model.i"):
        _trainer(1, tmp_path).fit(TranslationModule(network=dict(NET), objective=scst), TranslationDataModule(**DATA))
    with pytest.raises(ValueError, match="^model.objective.label_smoothing 0.1 has no effect under model.objective.s"):
        TranslationModule(objective={**scst, "label_smoothing": 0.1})

    def trainer(steps: int) -> pl.Trainer:  # validates the start, then after every step; keeps the best and the last
        best = ModelCheckpoint(tmp_path / "ckpt", monitor="val_loss", mode="min", save_last=True)
        return pl.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                          enable_model_summary=False, num_sanity_val_steps=-1, val_check_interval=1,
                          callbacks=[best], default_root_dir=tmp_path)  # fmt: skip

    worse = TranslationModule(network=dict(NET), lr=1.0, objective=scst, init_from=str(start),
                              export_path=str(tmp_path / "scst.pt"))  # fmt: skip
    fit = trainer(2)
    fit.fit(worse, TranslationDataModule(**DATA))
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("text-train: val_loss: "))
    before, best = (float(v) for v in re.findall(r"(\d+\.\d+) (?:from|at)", line))  # lower is better here
    assert before < best and line.endswith("training did not beat the start on these val pairs (the start may "
                                           "translate them as well)"), line  # fmt: skip
    written, begun = Translator.load(tmp_path / "scst.pt").net.state_dict(), Translator.load(start).net.state_dict()
    assert all(torch.equal(written[k], begun[k]) for k in begun)  # the start's weights, not the best checkpoint's
    last = worse.net.state_dict()
    assert not all(torch.equal(last[k], begun[k]) for k in begun)  # the module holds its last weights again
    # the resume of an SCST run: its checkpoint's weights, no model.init_from needed
    # (at its rate: another is refused, the restored optimiser going on at the checkpoint's)
    trainer(3).fit(TranslationModule(network=dict(NET), lr=1.0, objective=scst), TranslationDataModule(**DATA),
                   ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))  # fmt: skip
    with pytest.raises(ValueError, match="^model.lr 0.0001: a resumed fit goes on with the checkpoint's optimiser"):
        trainer(4).fit(TranslationModule(network=dict(NET), lr=1e-4, objective=scst), TranslationDataModule(**DATA),
                       ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))  # fmt: skip


@pytest.mark.long
def test_an_scst_stage_under_weight_averaging_writes_the_mean_even_where_the_start_scored_better(tmp_path, capsys):
    """StochasticWeightAveraging's mean was never validated, so a start that beat the validated checkpoints says
    nothing of it: the stage writes the mean and its line says so, not "model.init_from's weights: they scored better
    on val" (RunState.export_best). swa_epoch_start 1 of 3 epochs: the mean of the weights at the start of epochs 0,
    1 and 2."""
    from helpers.epoch_weights import EpochStartWeights

    from text_attn.core.lightning_parts import BuiltModuleSWA

    pl.seed_everything(0, verbose=False)
    start = tmp_path / "ce.pt"
    _trainer(20, tmp_path).fit(TranslationModule(network=dict(NET), lr=0.01, export_path=str(start)),
                               TranslationDataModule(**DATA))  # fmt: skip
    probe = EpochStartWeights()
    callbacks = [ModelCheckpoint(tmp_path / "ckpt", monitor="val_loss", mode="min"), probe,
                 BuiltModuleSWA(swa_lrs=1.0, swa_epoch_start=1)]  # fmt: skip
    trainer = pl.Trainer(max_epochs=3, limit_train_batches=1, accelerator="cpu", logger=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=-1,
                         callbacks=callbacks, default_root_dir=tmp_path)  # fmt: skip
    worse = TranslationModule(network=dict(NET), lr=1.0, objective={"scst": True, "scst_samples": 2},
                              init_from=str(start), export_path=str(tmp_path / "swa.pt"))  # fmt: skip
    trainer.fit(worse, TranslationDataModule(**DATA))
    written, begun = Translator.load(tmp_path / "swa.pt").net.state_dict(), Translator.load(start).net.state_dict()
    for name, value in written.items():
        torch.testing.assert_close(value, torch.stack([probe.taken[e][name] for e in (0, 1, 2)]).mean(0))
    err = capsys.readouterr().err.splitlines()
    verdict = next(x for x in err if x.startswith("text-train: val_loss: "))
    assert verdict.endswith("training did not beat the start on these val pairs (the start may translate them as well)")
    mean = "StochasticWeightAveraging's mean of the weights at the start of epochs 0 to 2, 3 of them"
    assert f"wrote model file: {tmp_path / 'swa.pt'} ({mean})" in err
    assert not all(torch.equal(written[k], begun[k]) for k in begun)


def _record_modes(module: TranslationModule, modes: list):
    """Wrap setup: once the network exists, record its training flag at every encoder call."""
    setup = module.setup

    def wrapped(stage=None):
        setup(stage)
        module.net.encoder.register_forward_pre_hook(lambda *_: modes.append(module.net.training))

    return wrapped


# --- one clear line per mistake ---------------------------------------------------------------------------------------
def test_mistakes_are_one_clear_line(tmp_path):
    with pytest.raises(ValueError, match=r"set data.attention_targets: true \(task reorder"):
        _built(data={"attention_targets": False}, objective={"attn_sup_lambda": 1.0})
    with pytest.raises(ValueError, match="needs a network with attention, but network.attention is 'none'"):
        _built(network=dict(NET, attention="none"), objective={"attn_sup_lambda": 1.0})
    with pytest.raises(ValueError, match="leave_one_out baseline, got 1"):
        TranslationModule(objective={"scst": True, "scst_baseline": "leave_one_out", "scst_samples": 1})
    with pytest.raises(ValueError, match="scst_baseline must be one of"):
        TranslationModule(objective={"scst_baseline": "beam"})
    model_file = _built().translator().save(tmp_path / "model.pt")
    # other data: read with the start's vocabularies, its tokens at their ids (tests/text/test_text_start_from.py)
    start = Translator.load(model_file)
    other = _built(data={"train_size": 40}, init_from=str(model_file))
    assert other.src_vocab.itos[: len(start.src_vocab)] == start.src_vocab.itos
    scrambled = Vocabulary([*start.src_vocab.itos[:4], *reversed(start.src_vocab.itos[4:])])
    with pytest.raises(ValueError, match=r"its source vocabulary differs from the data's .*same data options and seed"):
        Translator.check_start(model_file, Translator.read_start(model_file, "rnn"), scrambled, start.tgt_vocab)
    with pytest.raises(ValueError, match="holds a 'rnn' network, but model.arch is 'transformer'"):
        _built(arch="transformer", network=None, init_from=str(model_file))
    with pytest.raises(ValueError, match=r"encoder.embed.weight: .* leave out the network options"):
        _built(network={"embed_dim": 8}, init_from=str(model_file))
    with pytest.raises(ValueError, match="model.init_from: .*nowhere.pt: no such file"):
        _built(init_from=str(tmp_path / "nowhere.pt"))


def test_the_cli_reports_missing_targets_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(
            ["fit", "--config", str(FIX / "text/tiny_reorder.yaml"), "--model.objective.attn_sup_lambda", "1.0"]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert err[0].startswith("text-train: error: model.objective.attn_sup_lambda=1.0 needs the true alignment")


def test_an_objective_option_at_its_old_place_names_the_new_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", str(FIX / "text/tiny_reorder.yaml"), "--model.label_smoothing", "0.1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1
    assert "put label_smoothing under model.objective (e.g. model.label_smoothing -> model.objective." in err[0]
