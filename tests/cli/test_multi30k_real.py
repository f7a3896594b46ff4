"""The real Multi30k (../shared/data/multi30k, never in the repository) through the shipped Bahdanau config: fit on
2,000 German -> English pairs for a few minutes, test on 200, translate with the model file. Slow; skipped with its
reason when the data is not there (CI has it)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "multi30k"
CONFIG = ROOT / "configs" / "text" / "multi30k_de_en_bahdanau.yaml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "train.de.gz").is_file(), reason=f"real Multi30k not found at {DATA}"),
]


def test_shipped_config_fits_tests_and_translates_2000_real_pairs(cli_run_in_tmp, capsys):
    tmp = cli_run_in_tmp
    common = ["--config", str(CONFIG), "--data.root", str(DATA), "--data.train_size", "2000"]
    common += ["--data.val_size", "200", "--data.test_size", "200", "--data.subword_vocab", "2000"]
    common += ["--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(tmp)]
    fit = text_train_cli(["fit", *common, "--trainer.max_epochs", "6", "--model.export_path", str(tmp / "model.pt")])
    metrics = fit.trainer.callback_metrics
    translator = Translator.load(tmp / "model.pt")
    assert translator.codec.mode == "subword"  # and it says what it was trained on, under which terms
    assert translator.info["training_data"] == "Multi30k task 1 (Elliott et al. 2016), German -> English"
    assert "non-commercial research" in translator.info["terms"]
    # the loss came down from ln |vocabulary| (uniform over ~2,000 pieces: 7.6)
    assert float(metrics["val_loss"]) < 0.8 * math.log(len(translator.tgt_vocab)), metrics
    assert float(metrics["val_sacrebleu"]) > 1.0 and float(metrics["val_chrf"]) > 15.0, metrics
    test = text_train_cli(["test", *common, "--ckpt_path", str(_best_checkpoint(tmp))])
    scores = test.trainer.callback_metrics
    assert {"test_bleu", "test_sacrebleu", "test_chrf", "test_bleu_1-10"} <= set(scores), scores
    assert "sacreBLEU" in capsys.readouterr().out  # with its signature
    outs = translator.translate(["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."], beam_size=3)
    for out in outs:  # cased, punctuated text, never <unk>
        assert out.text and "<unk>" not in out.text and out.text[0].isupper(), out.text


def _best_checkpoint(run: Path) -> Path:
    """The checkpoint the shipped config's ModelCheckpoint kept as best (a new `test` process cannot say "best")."""
    (best,) = run.rglob("best-*.ckpt")
    return best
