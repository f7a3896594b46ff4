"""``benchmarks/checkpoint_averaging.py`` on a tiny Multi30k-shaped corpus written by the test: one fit (subword
vocabulary) saving each epoch's weights, then the fit's model file against the mean of its last k epochs, scored on
val; ``--write`` writes the best row; test splits and runs without epoch checkpoints are refused with one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.multi30k import write_corpus
from text_attn.core.modelfile import load_model_file
from text_attn.translation.train_cli import text_train_cli

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
EACH_EPOCH = (
    '[{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": {"monitor": "val_bleu", "mode": '
    '"max", "save_top_k": 1}}, {"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": '
    '{"save_top_k": -1, "every_n_epochs": 1, "save_weights_only": true, "filename": "epoch-{epoch}"}}]'
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(corpus root, run dir) of a 4-epoch fit of a tiny Bahdanau GRU on the corpus's own splits."""
    tmp = tmp_path_factory.mktemp("avg")
    corpus = write_corpus(tmp / "m30k", {"train": 48, "val": 6, "test_2016_flickr": 6})
    run = tmp / "run"
    text_train_cli(
        ["fit", "--config", str(ROOT / "tests/fixtures/text/tiny_reorder.yaml"), "--data.task", "pair"]
        + ["--data.root", str(corpus), "--data.src_lang", "de", "--data.tgt_lang", "en", "--data.train_size", "0"]
        + ["--data.tokenizer", "subword", "--data.subword_vocab", "300"]
        + ["--data.val_size", "0", "--data.test_size", "0", "--trainer.max_steps", "-1", "--trainer.max_epochs", "4"]
        + ["--trainer.enable_checkpointing", "true", "--trainer.callbacks", EACH_EPOCH]
        + ["--trainer.default_root_dir", str(run), "--model.export_path", str(run / "model.pt")]
    )
    return corpus, run


def test_rows_are_scored_on_val_and_the_best_is_written(run, tmp_path, capsys):
    from checkpoint_averaging import epoch_checkpoints, main

    corpus, run_dir = run
    ckpts = epoch_checkpoints(run_dir)
    assert [c.name for c in ckpts] == [f"epoch-epoch={e}.ckpt" for e in range(4)]
    out, report = tmp_path / "best.pt", tmp_path / "avg.json"
    args = ["--run", str(run_dir), "--data-root", str(corpus), "--counts", "2", "3", "9"]
    assert main(args + ["--write", str(out), "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    assert "| variant | epochs (0-based) | val BLEU (tok.), greedy | sacreBLEU | chrF |" in printed
    rows = json.loads(report.read_text())["rows"]
    assert [r["variant"] for r in rows] == [
        "fit's model file (best epoch)",
        "mean of the last 2 epochs",
        "mean of the last 3 epochs",
    ]  # fmt: skip  (9 > the 4 epochs: left out)
    assert [r["epochs"] for r in rows] == ["", "2, 3", "1, 2, 3"]
    assert all(0 <= r["bleu"] <= 100 and 0 <= r["chrf"] <= 100 for r in rows)
    best = max(rows, key=lambda r: r["bleu"])
    assert json.loads(report.read_text())["chosen"] == best["variant"] and printed.count("**") == 2
    written = load_model_file(out, "text-model")["state_dict"]
    if best["epochs"]:  # the mean of the named epochs, weight by weight
        states = [torch.load(ckpts[int(e)], weights_only=True)["state_dict"] for e in best["epochs"].split(", ")]
        for k, v in written.items():
            torch.testing.assert_close(v, sum(s["net." + k] for s in states) / len(states), rtol=0, atol=1e-6)
    else:
        fit = load_model_file(run_dir / "model.pt", "text-model")["state_dict"]
        assert all(torch.equal(fit[k], v) for k, v in written.items())


def test_a_test_split_and_a_run_without_epoch_checkpoints_are_refused(run, tmp_path, capsys):
    from checkpoint_averaging import main

    corpus, run_dir = run
    with pytest.raises(SystemExit) as exc:
        main(["--run", str(run_dir), "--data-root", str(corpus), "--split", "test_2016_flickr"])
    assert exc.value.code == 2 and "never on a test split" in capsys.readouterr().err
    assert main(["--run", str(tmp_path), "--data-root", str(corpus)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "found 0" in err and str(tmp_path) in err
