"""caption-train through its LightningCLI: fit caches features and writes a model file Captioner.load reads,
the best checkpoint's weights are what gets exported, test / validate report coco metrics and grounding, and bad
options get one clear line."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch
import yaml
from helpers.shipped import fitted_by_default

from captioning.commands.train import caption_train_cli, train_main
from captioning.model.captioner import Captioner
from captioning.model.encoder import LITE
from text_attn.core.run_report import find_log_dir, panels_for, read_metrics

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
COCO_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "ROUGE_L", "CIDEr")


@pytest.fixture(autouse=True)
def _run_in_tmp(tmp_path, monkeypatch):
    """LightningCLI saves its config.yaml in the working directory when there is no logger."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module", autouse=True)
def _restore_threads():
    """The tiny config sets torch to 1 CPU thread (cpu_threads); give later test files back their default."""
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "model.pt"
    cli = caption_train_cli(
        ["fit", "--config", CONFIG, "--model.export_path", str(out), "--trainer.default_root_dir", str(out.parent)]
    )
    return cli, out


@pytest.mark.long
def test_fit_caches_features_and_writes_a_loadable_model_file(fitted, capsys):
    cli, path = fitted
    dm = cli.datamodule
    assert sorted(dm.features) == ["train", "val"]  # fit encodes train and val once, not test
    assert dm.features["train"].shape == (32, 16, 512)  # resnet18, 4 x 4 grid
    assert cli.trainer.global_step == 4
    captioner = Captioner.load(path)
    model = captioner.model
    assert captioner.vocab == dm.vocab
    # what it was trained on; no out-of-domain check: 8 val images and a tenth of 32 train ones set no threshold
    # worth the name (captioning.photos.domain.MIN_HELD_OUT), so the model says nothing rather than flag at random
    assert captioner.domain == "synthetic shapes" and captioner.domain_check is None
    assert captioner.out_of_domain(dm.features["train"][:8].float()) is None
    # with more images held out, fit's features give the check: prototypes (no more than there are), a threshold
    from captioning.photos.domain import domain_check, far_from_domain

    check = domain_check(dm.features["train"], torch.cat([dm.features["val"]] * 3), photos=False)  # 24 held out
    assert check["prototypes"].shape == (32, 512)
    assert far_from_domain(check, dm.features["train"][:8].float()) == [False] * 8
    assert model.encoder.config()["grid"] == 4 and model.decoder.cfg.hidden_dim == 32
    # the file holds the trained weights: same decoder parameters as the module after fit
    trained = cli.model.model.decoder.state_dict()
    for k, v in model.decoder.state_dict().items():
        torch.testing.assert_close(v, trained[k].cpu())
    # and the loaded model captions images end to end
    (words, alphas, *_), *_ = captioner.caption_images([dm.scenes["test"][0].image], beam_size=2, max_len=8)
    assert alphas.shape == (len(words), 16) and all(w in dm.vocab for w in words)


@pytest.mark.long
def test_fit_exports_the_best_checkpoint(tmp_path, capsys):
    cfg = yaml.safe_load(Path(CONFIG).read_text())
    cfg["trainer"].update(
        max_steps=6,
        val_check_interval=2,
        enable_checkpointing=True,
        callbacks=[
            {
                "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                "init_args": {"monitor": "val_loss", "mode": "min", "save_top_k": 1, "dirpath": str(tmp_path / "ck")},
            }
        ],
    )
    cfg["model"]["lr"] = 0.05  # big steps, so the three validated weight sets differ
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp_path / "best.pt"
    cli = caption_train_cli(["fit", "--config", str(tmp_path / "cfg.yaml"), "--model.export_path", str(out)])
    best = cli.trainer.checkpoint_callback.best_model_path
    assert best and f"wrote model file: {out} (best checkpoint {best})" in capsys.readouterr().err
    ckpt = torch.load(best, map_location="cpu", weights_only=True)
    assert ckpt["vocab"] == cli.datamodule.vocab.to_dict()  # checkpoints carry their vocabulary
    exported = torch.load(out, weights_only=True)["state_dict"]
    for k, v in exported.items():
        torch.testing.assert_close(v, ckpt["state_dict"][f"model.{k}"])


@pytest.mark.long
def test_test_and_validate_report_coco_metrics_and_grounding(capsys):
    cli = caption_train_cli(["test", "--config", CONFIG, "--ckpt_path", "null"])  # untrained, on purpose
    metrics = cli.trainer.callback_metrics
    # the logged fractions said once more as the docs give them (the README's BLEU-4 23.57 is test_Bleu_4 0.2357)
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("caption-train: test, "))
    assert f"BLEU-4 {100 * float(metrics['test_Bleu_4']):.2f}, " in line
    assert line.endswith(f"CIDEr-D {100 * float(metrics['test_CIDEr']):.2f} (0-100, as docs/results.md and caption "
                         "--references give them)")  # fmt: skip
    for key in ("loss", *COCO_KEYS, "grounding", "grounding_mass", "grounding_words"):
        assert f"test_{key}" in metrics, key
    assert "test" in cli.datamodule.features and "train" not in cli.datamodule.features  # test encodes test only
    for key in ("Bleu_4", "grounding", "grounding_mass"):
        assert 0.0 <= float(metrics[f"test_{key}"]) <= 1.0
    cli = caption_train_cli(["validate", "--config", CONFIG, "--ckpt_path", "null"])
    assert {"val_Bleu_4", "val_CIDEr", "val_grounding"} <= set(cli.trainer.callback_metrics)


def test_without_cache_training_reads_images(tmp_path):
    cli = caption_train_cli(
        ["fit", "--config", CONFIG, "--data.cache_features", "false", "--trainer.max_steps", "1"]
        + ["--trainer.limit_val_batches", "0", "--model.export_path", str(tmp_path / "m.pt")]
    )
    assert cli.datamodule.features == {} and cli.trainer.global_step == 1


@pytest.mark.slow
def test_lr_patience_cuts_the_rate_when_val_bleu_stalls(tmp_path):
    cfg = yaml.safe_load(Path(CONFIG).read_text())
    cfg["trainer"].update(
        max_steps=-1,
        max_epochs=5,
        logger={"class_path": "pytorch_lightning.loggers.CSVLogger", "init_args": {"save_dir": str(tmp_path)}},
        callbacks=[{"class_path": "pytorch_lightning.callbacks.LearningRateMonitor"}],
    )
    cfg["model"].update(lr_patience=0, lr_factor=0.1, export_path=str(tmp_path / "m.pt"))
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    cli = caption_train_cli(["fit", "--config", str(tmp_path / "cfg.yaml")])
    rows = list(csv.DictReader(open(Path(cli.trainer.logger.log_dir) / "metrics.csv")))
    bleus = [float(r["val_Bleu_4"]) for r in rows if r.get("val_Bleu_4")]  # one per epoch
    lrs = [float(r["lr-Adam"]) for r in rows if r.get("lr-Adam")]  # at the start of each epoch
    assert len(bleus) == 5 and len(lrs) == 5 and lrs[0] == 0.01
    # By hand: patience 0 cuts the rate after every validation that does not beat the best so far (ReduceLROnPlateau's
    # default threshold: 1e-4 relative), effective from the next epoch.
    best, lr = -math.inf, 0.01
    for bleu, got in zip(bleus[:-1], lrs[1:], strict=True):
        if bleu > (best * (1 + 1e-4) if best > 0 else best):
            best = bleu
        else:
            lr *= 0.1
        assert got == pytest.approx(lr)
    final = cli.trainer.optimizers[0].param_groups[0]["lr"]
    assert final == pytest.approx(lr * (1 if bleus[-1] > best * (1 + 1e-4) else 0.1))
    assert final < 0.01  # an untrained tiny model's BLEU stalls at some point in 5 epochs
    # the run's report reads that metrics.csv: loss, scores, CIDEr, grounding on shapes, and the learning rate
    names = [name for name, _ in panels_for(read_metrics(find_log_dir(tmp_path)))]
    assert names == ["loss", "validation scores", "CIDEr (validation)", "grounding (validation)", "learning rate"]
    with pytest.raises(SystemExit) as exc:
        train_main(["report", str(tmp_path)])
    assert exc.value.code == 0 and (tmp_path / "report.png").is_file()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--data.source", "coco", "unknown caption source 'coco'"),
        ("--model.encoder.backbone", "alexnet", "model.encoder: unknown backbone 'alexnet'"),
        # said as the model is made, naming its block: it came after the data was read and the run folder made
        (
            "--model.encoder.fine_tune",
            "last3",
            "model.encoder: fine_tune must be one of none, last, last2, all, got 'last3'",
        ),
        ("--model.grid", "7", "put grid under model.encoder"),
        ("--data.source", "karpathy", "needs data.karpathy_json"),
        # a hard-attention option on the soft config: unread (its values: tests/captioning/test_objective.py)
        ("--model.objective.rl_reward", "word", "model.decoder.attention soft reads no model.objective.rl_reward"),
    ],
)
def test_bad_options_get_one_clear_line(option, value, message, capsys):
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", CONFIG, option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("caption-train: error: ") and message in err[-1]
    assert not any("Traceback" in line for line in err)


@pytest.mark.long
def test_a_named_subcommand_parses_alone_and_help_still_lists_them_all(capsys):
    """A command line that names its subcommand first gets only that subcommand's parser built (the others cost a
    third of a short run's start); without one, --help lists all five and a misspelt one is refused naming them."""
    cli = caption_train_cli(["validate", "--config", CONFIG, "--trainer.limit_val_batches", "1", "--ckpt_path", "null"])
    assert "{validate}" in cli.parser.format_usage()  # the one subcommand its parser knows
    with pytest.raises(SystemExit) as exc:
        train_main(["--help"])
    assert exc.value.code == 0 and "{fit,validate,test,report,optimize}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        train_main(["fitt", "--config", CONFIG])
    assert exc.value.code == 2 and "unknown subcommand 'fitt': fit, validate, test, report" in capsys.readouterr().err


def test_a_config_written_before_the_nesting_gets_one_line(tmp_path, capsys):
    old = yaml.safe_load(Path(CONFIG).read_text())
    model = old.pop("model")
    old["model"] = {**model.pop("encoder"), **model.pop("decoder"), **model}  # the flat layout of older configs
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(old))
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert "put backbone, grid, stride, weights, image_size, crop under model.encoder" in err[0]
    assert "embed_dim, hidden_dim, attn_dim, dropout under model.decoder" in err[0]


def test_fit_hard_attention_logs_reinforce_and_warns_on_near_uniform_attention(tmp_path, capsys):
    out = tmp_path / "hard.pt"
    # ratio 0: any entropy counts as "near uniform", so the one-time warning must fire right after the warm-up.
    args = ["--model.decoder.attention", "hard", "--model.objective.collapse_warmup", "2"]
    args += ["--model.objective.collapse_ratio", "0.0"]
    cli = caption_train_cli(["fit", "--config", CONFIG, *args, "--model.export_path", str(out)])
    said = [line for line in capsys.readouterr().err.splitlines() if "almost uniform" in line]
    assert len(said) == 1, said  # once, not at every later step; a caption-train line, not a Python warning
    assert said[0].startswith(
        "caption-train: warning: hard attention is still almost uniform after 2 steps of sampling"
    )
    metrics = cli.trainer.callback_metrics
    for key in ("train_reinforce", "train_entropy", "train_reward", "baseline"):
        assert key in metrics, key
    assert 0.0 < float(metrics["train_entropy"]) <= math.log(16) + 1e-5  # mean H[α] over a 4 x 4 grid
    module = cli.model
    assert int(module.objective.baseline.updates) == cli.trainer.global_step == 4  # one baseline update per batch
    # the b the last step used: the batch's reward then moved it (b <- 0.9 b + 0.1 reward)
    moved = 0.9 * float(metrics["baseline"]) + 0.1 * float(metrics["train_reward"])
    assert float(module.objective.baseline.value) == pytest.approx(moved, rel=1e-5)
    assert "objective.baseline.value" in module.state_dict()  # checkpoints keep the baseline
    captioner = Captioner.load(out)
    assert captioner.model.decoder.cfg.attention == "hard" and captioner.model.decoder.cfg.soft_prob == 0.5
    (words, alphas, *_), *_ = captioner.caption_images([cli.datamodule.scenes["val"][0].image], beam_size=2, max_len=8)
    assert captioner.chosen_regions(alphas) == alphas.argmax(-1).tolist()


@pytest.mark.long
def test_a_resumed_hard_fit_neither_warns_of_collapse_again_nor_restarts_the_watch(tmp_path, capsys):
    """The collapse watch's moving level and its one warning go into checkpoints: resumed, it warned a second time
    and its average began afresh."""
    args = ["--config", CONFIG, "--model.decoder.attention", "hard", "--model.objective.collapse_warmup", "2"]
    args += ["--model.objective.collapse_ratio", "0.0", "--model.export_path", str(tmp_path / "m.pt")]
    cli = caption_train_cli(["fit", *args])
    assert "almost uniform" in capsys.readouterr().err
    watch = cli.model.objective.collapse_monitor
    ckpt = tmp_path / "step4.ckpt"
    cli.trainer.save_checkpoint(ckpt)
    resumed = caption_train_cli(["fit", *args, "--ckpt_path", str(ckpt), "--trainer.max_steps", "5"])
    assert resumed.trainer.global_step == 5
    assert "almost uniform" not in capsys.readouterr().err  # warned once, before the resume
    again = resumed.model.objective.collapse_monitor
    step5 = float(resumed.trainer.callback_metrics["train_entropy"]) / math.log(16)  # 4 x 4 regions
    assert again.warned and again.level == pytest.approx(0.9 * watch.level + 0.1 * step5)  # the saved average, moved
    assert torch.load(ckpt, weights_only=True)["collapse_monitor"] == {"level": watch.level, "warned": True}


def test_soft_warmup_trains_hard_attention_softly_first(tmp_path):
    # 4 steps, warm-up 2: the first two batches sample no location (nothing for REINFORCE, no baseline update),
    # the last two do (soft_prob 0: every caption samples).
    args = ["--model.decoder.attention", "hard", "--model.objective.soft_warmup", "2"]
    args += ["--model.decoder.soft_prob", "0.0"]
    cli = caption_train_cli(["fit", "--config", CONFIG, *args, "--model.export_path", str(tmp_path / "m.pt")])
    assert cli.trainer.global_step == 4
    assert int(cli.model.objective.baseline.updates) == 2  # updated only by the two batches after the warm-up


@pytest.mark.slow
def test_collapse_watch_starts_when_sampling_does(tmp_path, capsys):
    # Soft attention in a warm-up is spread on purpose; the watch counts steps from the end of the warm-up. 4 steps,
    # warm-up 2, ratio 0 (any entropy counts as near uniform): after 1 sampling step (global step 3) it warns.
    args = ["--model.decoder.attention", "hard", "--model.objective.soft_warmup", "2"]
    args += ["--model.objective.collapse_warmup", "1"]
    args += ["--model.objective.collapse_ratio", "0.0", "--model.export_path", str(tmp_path / "m.pt")]
    caption_train_cli(["fit", "--config", CONFIG, *args])
    assert "almost uniform after 1 steps of sampling" in capsys.readouterr().err
    # A watch that would start after the run ends never warns.
    args[5] = "3"
    caption_train_cli(["fit", "--config", CONFIG, *args])
    assert "almost uniform" not in capsys.readouterr().err


SHIPPED = sorted((Path(__file__).parents[2] / "configs" / "caption").glob("*.yaml"))


def test_the_shipped_configs_are_found():
    assert {"shapes_soft.yaml", "shapes_hard.yaml", "coco_resnet101_hard.yaml"} <= {p.name for p in SHIPPED}


# a config that tests/cli/test_shipped_configs.py fits under -m long (CI runs it) fails that fit on a stale key
# already: its parse runs with -m slow (each parse costs ~0.7 s)
@pytest.mark.parametrize(
    "config",
    [pytest.param(c, marks=[pytest.mark.slow] if fitted_by_default(c) else []) for c in SHIPPED],
    ids=lambda p: p.name,
)
def test_shipped_configs_parse(config, capsys):
    # --print_config checks every key against CaptionModule / the data module and exits 0; a stale or misspelt
    # option exits 2 with one line.
    with pytest.raises(SystemExit) as exc:
        train_main(["fit", "--config", str(config), "--print_config"])
    assert exc.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["decoder"]["attention"] in ("soft", "hard")
    assert printed["model"]["encoder"]["backbone"] in ("resnet101", *LITE)  # the paper's, or an offline EfficientNet
