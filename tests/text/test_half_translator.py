"""A Translator whose network is float16 / bfloat16: its results' attention is float32 (numpy has no bfloat16), its
explanation is its float32 copy's, the label-smoothed loss on its half logits is finite, and a fit under 16-true
(float16 weights and Adam statistics) is refused."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from text_attn.core.vocab import SPECIALS, Vocabulary
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.module import TranslationModule
from text_attn.translation.objective import ObjectiveConfig, TranslationObjective
from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.transformer import Transformer, TransformerConfig
from text_attn.translation.translator import Translator

SRC = [f"s{i}" for i in range(12)]
TGT = [f"t{i}" for i in range(12)]
SENTENCE = "s1 s4 s2 s7 s9"
HALVES = [torch.float16, torch.bfloat16]
FIX = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(autouse=True)
def _threads(one_thread):
    """One torch thread (tests/conftest.py)."""


def _net(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    V = len(SPECIALS) + 12
    if arch == "transformer":
        return Transformer(TransformerConfig(V, V, d_model=16, num_heads=2, enc_layers=2, dec_layers=2, ff_dim=32,
                                             dropout=0.0)).eval()  # fmt: skip
    cfg = Seq2SeqConfig(V, V, attention=arch, embed_dim=16, enc_hidden=16, dec_hidden=24, attn_dim=16, dropout=0.0)
    return Seq2Seq(cfg).eval()


def _translator(net: torch.nn.Module) -> Translator:
    return Translator(net, Vocabulary([*SPECIALS, *SRC]), Vocabulary([*SPECIALS, *TGT]), "word")


@pytest.mark.parametrize("dtype", HALVES)
def test_a_half_networks_results_hold_float32_attention(dtype):
    half = _translator(_net("bahdanau").to(dtype))
    full = _translator(copy.deepcopy(half.net).float())
    (got,) = half.translate([SENTENCE], max_len=6)
    assert got.attention.dtype == torch.float32 and got.attention.numpy().shape == (len(got.tokens), 6)
    (read,), (want,) = half.read([SENTENCE], "t1 t2 t3"), full.read([SENTENCE], "t1 t2 t3")
    assert read.attention.dtype == torch.float32
    torch.testing.assert_close(read.attention, want.attention, atol=0.02, rtol=0)  # half rounding of the weights


@pytest.mark.parametrize("arch", ["bahdanau", "transformer"])
@pytest.mark.parametrize("dtype", HALVES)
def test_a_half_networks_explanation_is_its_float32_copys(arch, dtype):
    half = _translator(_net(arch).to(dtype))
    full = _translator(copy.deepcopy(half.net).float())
    (translation,) = half.translate([SENTENCE], max_len=5)
    got, want = half.explain(translation), full.explain(translation)
    assert got.evidence.dtype == torch.float32
    assert torch.equal(got.evidence, want.evidence) and torch.equal(got.attention, want.attention)
    assert [None if math.isnan(a) else a for a in got.agreement] == [
        None if math.isnan(a) else a for a in want.agreement
    ]
    assert {p.dtype for p in half.net.parameters()} == {dtype}  # the user's network untouched
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a caller's autocast: the probes still in float32
        assert torch.equal(full.explain(translation).evidence, want.evidence)


def test_the_label_smoothed_loss_of_float16_logits_is_finite():
    net = _net("bahdanau")
    torch.manual_seed(1)
    V = net.cfg.tgt_vocab_size
    # 32 x 21 rows of 16 words: the smoothing term sums ~10,000 log-probabilities, past float16's 65,504 at ~-7 each
    batch = {"src": torch.randint(4, V, (32, 10)), "src_lens": torch.full((32,), 10),
             "tgt": torch.randint(4, V, (32, 22))}  # fmt: skip
    objective = TranslationObjective(ObjectiveConfig(label_smoothing=0.1))
    want, _ = objective.teacher_forced(copy.deepcopy(net).double(), batch, 0)
    got, _ = objective.teacher_forced(net.half(), batch, 0)
    assert got.dtype == torch.float32 and got.item() == pytest.approx(want.item(), rel=1e-3)  # was inf


@pytest.mark.parametrize(("precision", "fused"), [("16-true", True), ("bf16-true", True), ("32-true", None)])
def test_half_weights_step_a_fused_adam_and_stay_finite(precision, fused):
    dm = TranslationDataModule(task="reorder", train_size=32, val_size=8, test_size=8, batch_size=16)
    torch.manual_seed(0)
    module = TranslationModule(network={"attention": "bahdanau", "embed_dim": 16, "enc_hidden": 16, "dec_hidden": 32,
                                        "attn_dim": 16, "dropout": 0.0}, lr=0.005)  # fmt: skip
    module.trainer = SimpleNamespace(datamodule=dm, precision=precision)  # what setup and the optimiser read
    module.setup("fit")
    if precision == "16-true":
        module.net.half()  # as Lightning's 16-true plugin has it
    opt = module.configure_optimizers()
    opt = opt["optimizer"] if isinstance(opt, dict) else opt
    assert opt.defaults["fused"] is fused  # float32: the plain Adam, its numbers as ever
    batch = next(iter(dm.train_dataloader()))
    loss, _ = module.objective.teacher_forced(module.net, batch, module.tgt_vocab.pad_id)
    loss.backward()
    opt.step()  # the plain step on float16 weights: eps 1e-9 is 0, 0 / 0 = nan wherever a gradient is 0
    assert all(bool(torch.isfinite(p).all()) for p in module.net.parameters())


@pytest.mark.parametrize("family", ["text", "caption"])
def test_a_fit_under_16_true_is_refused_in_one_line(family, tmp_path, capsys):
    """Float16 weights keep Adam's statistics in float16: a gradient under about 2e-4 squares to 0 there and the
    steps grow unbounded (fused Adam, 1e-5 gradients: 0.001, 0.0014, 0.0017, ... a step). A caption fine-tune's val
    CIDEr fell from 0.63 to 0 at its second step, exit 0. Refused, naming what trains instead."""
    from captioning.commands.train import caption_train_cli

    run, config = ((text_train_cli, FIX / "text/tiny_reorder.yaml") if family == "text" else
                   (caption_train_cli, FIX / "captions/tiny_shapes.yaml"))  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        run(["fit", "--config", str(config), "--trainer.precision", "16-true", "--model.export_path",
             str(tmp_path / "m.pt"), "--trainer.default_root_dir", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert "--trainer.precision 16-true trains float16 weights" in err[0] and "bf16-true, bf16-mixed or 16-mixed" \
        in err[0]  # fmt: skip
    assert not (tmp_path / "m.pt").exists()
