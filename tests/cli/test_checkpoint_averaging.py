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


def test_saved_checkpoints_are_the_latest_fits_in_step_order(tmp_path):
    """Epoch or step files, numerically ordered (step 50 before step 100), from the folder of the newest file only:
    a second fit under the same root (version_1) never mixes with the first's."""
    import os

    from checkpoint_averaging import saved_checkpoints

    old, new = tmp_path / "lightning_logs/version_0/checkpoints", tmp_path / "lightning_logs/version_1/checkpoints"
    for folder, steps, when in ((old, (50, 100, 150), 1000), (new, (100, 50), 2000)):
        folder.mkdir(parents=True)
        for s in steps:
            (folder / f"step-step={s}.ckpt").write_bytes(b"")
            os.utime(folder / f"step-step={s}.ckpt", (when + s, when + s))
    (new / "last.ckpt").write_bytes(b"")  # not a saved-weights file: left out
    assert saved_checkpoints(tmp_path) == [new / "step-step=50.ckpt", new / "step-step=100.ckpt"]
    assert saved_checkpoints(tmp_path / "lightning_logs/version_0") == [
        old / f"step-step={s}.ckpt" for s in (50, 100, 150)
    ]
    assert saved_checkpoints(tmp_path / "nothing") == []


@pytest.mark.long
def test_rows_are_scored_on_val_and_the_best_is_written(run, tmp_path, capsys):
    from checkpoint_averaging import main, saved_checkpoints

    corpus, run_dir = run
    ckpts = saved_checkpoints(run_dir)
    assert [c.name for c in ckpts] == [f"epoch-epoch={e}.ckpt" for e in range(4)]
    out, report = tmp_path / "best.pt", tmp_path / "avg.json"
    args = ["--run", str(run_dir), "--data-root", str(corpus), "--counts", "2", "3", "9"]
    assert main(args + ["--write", str(out), "--json", str(report)]) == 0
    assert torch.is_grad_enabled()  # the caller's autograd is left on (later tests in this process need it)
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
    named = [ckpts[int(e)] for e in best["epochs"].split(", ")] if best["epochs"] else []
    fit = load_model_file(run_dir / "model.pt", "text-model")["state_dict"]
    _assert_written(load_model_file(out, "text-model")["state_dict"], named, "net.", fit)


def test_until_averages_the_checkpoints_up_to_a_step(run, tmp_path, capsys):
    """``--until N``: the means end at epoch N (a run that went on past its best), never at a later one; fewer than 2
    checkpoints up to N is refused in one line."""
    from checkpoint_averaging import main

    corpus, run_dir = run
    report = tmp_path / "avg.json"
    args = ["--run", str(run_dir), "--data-root", str(corpus), "--counts", "2", "3", "4"]
    assert main([*args, "--until", "2", "--json", str(report)]) == 0
    rows = json.loads(report.read_text())["rows"]
    assert [r["epochs"] for r in rows] == ["", "1, 2", "0, 1, 2"]  # 4 > the 3 epochs up to 2: left out
    capsys.readouterr()
    assert main([*args, "--until", "0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "checkpoints up to 0" in err and "found 1" in err


def _assert_written(written: dict, named: list, prefix: str, fit: dict) -> None:
    """The written row's weights: the mean of the named checkpoints' (``prefix`` + name in their state_dict; integer
    buffers as the newest one's), or, when the row names none, the fit's own model file's."""
    if not named:
        assert all(torch.equal(fit[k], v) for k, v in written.items())
        return
    states = [torch.load(c, weights_only=True)["state_dict"] for c in named]
    for k, v in written.items():
        if v.is_floating_point():
            torch.testing.assert_close(v, sum(s[prefix + k] for s in states) / len(states), rtol=0, atol=1e-6)
        else:
            assert torch.equal(v, states[-1][prefix + k]), k


@pytest.mark.slow
def test_the_benchmark_stage_keeps_the_fit_s_file_and_writes_the_chosen_row(run, tmp_path, capsys):
    """averaging_stage (what benchmarks/multi30k.py and flickr8k.py run after a fit), on a copy of the run: the
    script in a subprocess, the fit's model file kept as model_best_epoch.pt, the chosen row written over it."""
    import shutil

    from checkpoint_averaging import averaging_stage, saved_checkpoints

    corpus, run_dir = run
    copy, logs = tmp_path / "run", tmp_path / "logs"
    shutil.copytree(run_dir, copy)  # modification times kept: the same latest folder
    logs.mkdir()
    model = copy / "model.pt"
    fit_bytes = model.read_bytes()
    assert averaging_stage("x", copy, model, corpus, [9], logs) == 0.0  # fewer checkpoints than 9: nothing runs
    assert not (copy / "model_best_epoch.pt").exists() and not (logs / "average-x.log").exists()
    assert averaging_stage("x", copy, model, corpus, [2, 3], logs) > 0
    assert "[average-x] $ python" in capsys.readouterr().out
    assert (copy / "model_best_epoch.pt").read_bytes() == fit_bytes
    report = json.loads((copy / "averaging.json").read_text())
    chosen = next(r for r in report["rows"] if r["variant"] == report["chosen"])
    named = [saved_checkpoints(copy)[int(e)] for e in chosen["epochs"].split(", ")] if chosen["epochs"] else []
    fit = load_model_file(copy / "model_best_epoch.pt", "text-model")["state_dict"]
    _assert_written(load_model_file(model, "text-model")["state_dict"], named, "net.", fit)


def test_a_test_split_and_a_run_without_saved_checkpoints_are_refused(run, tmp_path, capsys):
    from checkpoint_averaging import main

    corpus, run_dir = run
    with pytest.raises(SystemExit) as exc:
        main(["--run", str(run_dir), "--data-root", str(corpus), "--split", "test_2016_flickr"])
    assert exc.value.code == 2 and "never on a test split" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["--run", str(run_dir), "--data-root", str(corpus), "--beam-size", "0"])
    assert exc.value.code == 2 and "--beam-size must be >= 1" in capsys.readouterr().err
    assert main(["--run", str(tmp_path), "--data-root", str(corpus)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "found 0" in err and str(tmp_path) in err


EACH_STEP = (
    '[{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": {"monitor": "val_CIDEr", "mode": '
    '"max", "save_top_k": 1, "filename": "best-{step}"}}, {"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",'
    ' "init_args": {"save_top_k": -1, "every_n_train_steps": 1, "save_weights_only": true, "filename": "step-{step}"}}]'
)


@pytest.mark.slow
def test_a_caption_run_is_averaged_over_its_step_checkpoints(cli_run_in_tmp, capsys):
    """The caption family: a 3-step fit of the shipped Flickr8k config on a 4-photo copy of the dataset's layout,
    its weights saved each step; rows scored with coco-caption on the val photo; the chosen row written."""
    from checkpoint_averaging import _number, main, saved_checkpoints

    from captioning.commands.train import caption_train_cli
    from captioning.model.captioner import Captioner
    from tests.helpers.flickr8k import write_original

    tmp = cli_run_in_tmp
    data, run = write_original(tmp / "flickr8k", copies=True), tmp / "run"
    caption_train_cli(
        ["fit", "--config", str(ROOT / "configs/caption/flickr8k_lite2_soft.yaml"), "--data.root", str(data)]
        + ["--data.min_freq", "1", "--data.batch_size", "2", "--trainer.max_steps", "3", "--trainer.max_time", "null"]
        + ["--trainer.val_check_interval", "1.0", "--trainer.callbacks", EACH_STEP, "--trainer.max_epochs", "3"]
        + ["--trainer.default_root_dir", str(run), "--model.export_path", str(run / "model.pt")]
        + ["--data.feature_cache_dir", str(tmp / "cache"), "--trainer.enable_progress_bar", "false"]
    )
    ckpts = saved_checkpoints(run)
    assert [c.name for c in ckpts] == [f"step-step={s}.ckpt" for s in (1, 2, 3)]
    out, report = tmp / "best.pt", tmp / "avg.json"
    args = ["--run", str(run), "--data-root", str(data), "--counts", "2", "3", "9", "--write", str(out)]
    assert main([*args, "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    how = "beam 5, length penalty 1, no repeated 3-gram"  # the default: how the Flickr8k models are used
    head = f"| variant | steps | Bleu-1 | Bleu-2 | Bleu-3 | Bleu-4 | METEOR | CIDEr (coco-caption, val, {how}) |"
    assert head in printed
    assert f"val features from the fit's feature cache {tmp / 'cache'}" in printed  # not encoded again
    rows = json.loads(report.read_text())["rows"]
    assert [r["variant"] for r in rows] == [
        "fit's model file (best step)",
        "mean of the last 2 step checkpoints",
        "mean of the last 3 step checkpoints",
    ]  # fmt: skip  (9 > the 3 checkpoints: left out)
    assert [r["steps"] for r in rows] == ["", "2, 3", "1, 2, 3"]
    for r in rows:  # the choice: the sum of BLEU-1..4, METEOR and CIDEr, each in 0..100 (CIDEr may pass 100)
        assert 0 <= r["Bleu_4"] <= 100 and 0 <= r["METEOR"] <= 100 and r["CIDEr"] >= 0
        parts = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr")
        assert r["chosen_by"] == pytest.approx(sum(r[m] for m in parts))
    best = max(rows, key=lambda r: r["chosen_by"])
    assert json.loads(report.read_text())["chosen"] == best["variant"] and printed.count("**") == 2
    by_step = {_number(c): c for c in ckpts}
    named = [by_step[n] for n in best["steps"].split(", ")] if best["steps"] else []
    fit = Captioner.load(run / "model.pt").model.state_dict()
    _assert_written(Captioner.load(out).model.state_dict(), named, "model.", fit)


def test_a_model_trained_on_multi30k_says_its_data_and_terms(run):
    """The data's README: a model trained on Multi30k must say so. One trained on its splits (named as Multi30k
    names them) said nothing of the data or its terms; a corpus with other split names stays the user's to state."""
    from text_attn.translation.data import TranslationDataModule
    from text_attn.translation.translator import Translator

    corpus, folder = run
    info = Translator.load(folder / "model.pt").info
    assert info["training_data"] == "Multi30k task 1 (Elliott et al. 2016), German -> English"
    assert "non-commercial research" in info["terms"]
    own = TranslationDataModule(task="pair", root=str(corpus), src_lang="de", tgt_lang="en",
                                split_names={"test": "test"})  # fmt: skip
    # the pair given and the folder named (its name alone), no terms said
    assert own.facts == {"trained_on": corpus.resolve().name, "languages": "German -> English"}
