"""Every YAML under configs/ trains as shipped: `fit` for two steps through the real CLI, with only data paths and
sizes overridden (an epoch of two batches: two steps end with one validation), then the best checkpoint
becomes the model file. The paper configs also get a small backbone (ResNet-101 ImageNet weights cannot load
offline) and no METEOR (its Java start costs 9 s per validation). A config that parses but cannot fit can never
land again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers.flickr8k import write_original
from helpers.multi30k import write_corpus, write_sentences
from helpers.shipped import fitted_by_default
from pytorch_lightning.cli import LightningCLI

from captioning.commands.train import caption_train_cli
from captioning.model.bundled import MODEL_NAMES
from captioning.model.captioner import Captioner
from text_attn.translation.bundled import MODEL_NAMES as TEXT_MODEL_NAMES
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.translator import Translator

# -m long (out of the default run; CI runs it): every shipped config fitted through the real CLI (~40 s in all)
pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests/fixtures"
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))

# Per config: the data paths and sizes a user would change (fixtures instead of their download).
TEXT_DATA = ["--data.train_size", "32", "--data.val_size", "8", "--data.test_size", "8", "--data.batch_size", "16"]
TEXT_CORPUS = [
    "--data.src_path", str(FIX / "text/small.en"),
    "--data.tgt_path", str(FIX / "text/small.de"),
    "--data.val_size", "1",
    "--data.test_size", "1",
    "--trainer.val_check_interval", "1",  # the config validates every 5000 steps
]  # fmt: skip
# Multi30k's sizes decode an untrained network's 30 steps at ~10 ms each: small ones for what a test needs
SMALL_RNN = ["--model.network.embed_dim", "16", "--model.network.enc_hidden", "16", "--model.network.dec_hidden", "32"]
SMALL_SCORER = ["--model.network.attn_dim", "16"]  # Bahdanau's scoring layer (the luong and none configs refuse it)
SMALL_TRANSFORMER = ["--model.network.d_model", "32", "--model.network.ff_dim", "64"]
SHAPES_DATA = [
    "--data.train_size", "16",
    "--data.captions_per_image", "1",
    "--data.val_size", "4",
    "--data.test_size", "4",
    "--data.batch_size", "8",
    "--trainer.check_val_every_n_epoch", "1",  # shapes_soft validates every 2 epochs: these runs have 1
]  # fmt: skip
KARPATHY_DATA = [
    "--data.karpathy_json", str(FIX / "captions/karpathy.json"),
    "--data.image_root", str(FIX / "images"),
    "--data.min_freq", "1",
    "--data.num_workers", "0",
    "--data.batch_size", "8",
    "--model.encoder.backbone", "resnet18",
    "--model.encoder.weights", "null",
    "--model.encoder.image_size", "224",  # the configs' 448: 4x the pixels, for nothing a test needs
    "--model.decoder.hidden_dim", "64",  # the paper's COCO LSTM of 1800: seconds per step, for nothing a test needs
    "--model.val_meteor", "false",
]  # fmt: skip


# Flickr8k configs: a 4-photo copy in the dataset's layout (tests/helpers/flickr8k.py), written once per session.
FLICKR8K_DATA = [
    "--data.min_freq", "1",
    "--data.batch_size", "2",
    "--data.feature_cache_dir", "feature_cache",  # the configs share the first stage's cache under runs/
    "--trainer.val_check_interval", "1.0",  # the SCST config validates every 100 steps
]  # fmt: skip


# your_photos.yaml: a folder of four photos and its captions file (the data fixture's), starting from the bundled model
YOUR_PHOTOS_DATA = [
    "--data.val_size", "1",
    "--data.test_size", "1",
    "--data.min_freq", "1",
    "--data.batch_size", "2",
    "--data.feature_cache_dir", "feature_cache",
]  # fmt: skip


def _overrides(config: Path, data: Path) -> list[str]:
    if config.stem == "your_pairs":  # the bundled Transformer, taught the fixture's German -> English pairs
        return ["--data.path", str(FIX / "text/pairs.tsv"), "--data.val_size", "1", "--data.test_size", "1",
                "--data.batch_size", "4", "--data.min_freq", "1"]  # fmt: skip
    if config.stem.startswith("your_photos"):
        photos = ["--data.image_dir", str(data / "flickr8k" / "Flicker8k_Dataset"), "--data.captions_tsv"]
        return [*photos, str(data / "your_photos.tsv"), *YOUR_PHOTOS_DATA]
    if config.parent.name == "text" and config.stem.endswith(("_aligned", "_distilled")):  # links of 6 train pairs
        links = data / "multi30k-train-links.txt"
        links.write_text("0-0 1-1\n" * 6)
        return ["--data.root", str(data / "multi30k"), "--data.alignments", str(links), "--data.batch_size", "4"]
    if config.name.startswith("multi30k"):  # a 6-pair corpus in Multi30k's layout, fr beside de and en
        corpus = ["--data.root", str(data / "multi30k"), "--data.subword_vocab", "300", "--data.batch_size", "4"]
        if "transformer" in config.name:
            return corpus + SMALL_TRANSFORMER
        return corpus + SMALL_RNN + (SMALL_SCORER if "bahdanau" in config.name else [])
    if config.parent.name == "text":
        # transformer_base: the paper's 6 + 6 layers of 512 in bf16 on a CPU took ~20 s of a quiet core for 2 steps
        base = TEXT_CORPUS + SMALL_TRANSFORMER + ["--data.subword_vocab", "300"]  # 37,000: more than 5 lines give
        return TEXT_DATA + (base if "transformer_base" in config.name else [])
    if config.name.startswith("flickr8k_de"):  # German captions: the fixture photos' sentences (data's m30k_f8k)
        return ["--data.root", str(data / "flickr8k"), "--data.multi30k", str(data / "m30k_f8k"), *FLICKR8K_DATA]
    if config.name.startswith("flickr8k") and "resnet" not in config.name:
        return ["--data.root", str(data / "flickr8k"), *FLICKR8K_DATA]
    if config.name.startswith("flickr8k"):  # the paper's Karpathy-split config on the fixture photos (no JPEG step)
        return KARPATHY_DATA
    return SHAPES_DATA if config.name.startswith("shapes") else KARPATHY_DATA


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """DATA/flickr8k and DATA/multi30k, written once for the module."""
    root = tmp_path_factory.mktemp("data")
    write_original(root / "flickr8k", copies=True)  # as the shared copies (tests/cli/test_photo_kinds.py: others)
    photos = sorted(p.name for p in (root / "flickr8k" / "Flicker8k_Dataset").iterdir())
    # "zorblat": a word the bundled model does not know, in every caption (your_photos.yaml adds it to the vocabulary)
    lines = [f"{n}\tA zorblat photo of a {n.split('.')[0]}.\n{n}\tThe {n.split('.')[0]} up close!" for n in photos]
    (root / "your_photos.tsv").write_text("\n".join(lines) + "\n")  # a folder's captions file (your_photos.yaml)
    write_corpus(root / "multi30k", langs=("de", "en", "fr"))
    # German sentences of the Flickr8k fixture's train and val photos, as Multi30k holds translations of Flickr8k's
    german = {
        "train": [("A photo of coffee.", "Ein Foto von Kaffee."), ("The chelsea, up close!", "Die Katze Chelsea.")],
        "val": [("A photo of rocket.", "Ein Foto einer Rakete.")],
    }
    write_sentences(root / "m30k_f8k", german)
    return root


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


def test_every_config_is_covered():
    assert len(CONFIGS) >= 14 and {c.parent.name for c in CONFIGS} == {"text", "caption"}
    for config in CONFIGS:  # a later stage (init_from) names the config of the one before, <name>_scst -> <name>
        start = re.search(r"^\s*init_from:\s*(\S+)", config.read_text(), re.MULTILINE)
        if start and start.group(1) not in {*MODEL_NAMES, *TEXT_MODEL_NAMES}:  # a bundled model starts it as shipped
            assert _later_stage(config) and _first_stage_config(config).is_file(), config


# a later stage that is not <name>_scst: the config it starts from
STAGE_BEFORE = {"flickr8k_lite2_finetune": "flickr8k_lite2_soft"}


def _later_stage(config: Path) -> bool:
    return config.stem.endswith("_scst") or config.stem in STAGE_BEFORE


def _first_stage_config(config: Path) -> Path:
    stem = config.stem
    return config.with_name(STAGE_BEFORE.get(stem, stem.removesuffix("_scst")) + ".yaml")


def _fit(config: Path, root: Path, data: Path, extra: list[str] = ()):
    out = root / "model.pt"
    args = ["fit", "--config", str(config), *_overrides(config, data), *extra]
    args += ["--trainer.max_steps", "2", "--trainer.limit_val_batches", "1", "--trainer.enable_progress_bar", "false"]
    args += ["--trainer.default_root_dir", str(root), "--model.export_path", str(out)]
    return (text_train_cli if config.parent.name == "text" else caption_train_cli)(args), out


# first-stage config -> the model file its own test wrote this session (the configs run stage by stage, so a first
# stage runs before the stages that start from it; fitted again when run alone, e.g. with -k)
FIRST_STAGES: dict[Path, Path] = {}


def _depth(config: Path) -> int:
    """0 for a first stage, 1 for a stage that starts from one, and so on."""
    return 1 + _depth(_first_stage_config(config)) if _later_stage(config) else 0


STAGED = [
    pytest.param(c, id=f"{c.parent.name}/{c.stem}", marks=[] if fitted_by_default(c) else [pytest.mark.slow])
    for c in sorted(CONFIGS, key=lambda c: (_depth(c), c))
]


def test_every_code_path_fits_in_the_default_run():
    """What -m long fits: each network, objective and reader once (the slow ones repeat one of these)."""
    fast = {f"{c.parent.name}/{c.stem}" for c in CONFIGS if fitted_by_default(c)}
    assert {"caption/flickr8k_lite2_soft", "caption/shapes_hard", "caption/shapes_soft",
            "caption/shapes_soft_scst", "text/reorder_bahdanau", "text/reorder_bahdanau_scst",
            "text/reorder_bahdanau_supervised", "text/reorder_luong_general", "text/reorder_none",
            "text/multi30k_de_en_transformer", "text/transformer_base"} <= fast  # fmt: skip
    assert len(fast) < len(CONFIGS)


class _Parsed(Exception):
    """A command line passed every check: its classes would be made now."""


def _stop(cli) -> None:
    raise _Parsed


@pytest.mark.parametrize("config", STAGED)
def test_config_fits_as_shipped(config, tmp_path, capsys, data, monkeypatch):
    extra = []
    if _later_stage(config):  # a later stage: from the model file of the stage before (2 steps), as a user would
        first = FIRST_STAGES.get(_first_stage_config(config))
        if first is None or not first.is_file():
            _, first = _fit(_first_stage_config(config), tmp_path / "first", data)
        extra = ["--model.init_from", str(first)]
    cli, out = _fit(config, tmp_path, data, extra)
    FIRST_STAGES[config] = out
    assert cli.trainer.global_step == 2
    printed = capsys.readouterr()
    assert f"wrote model file: {out}" in printed.err
    # the shipped checkpoint callbacks ran: last.ckpt for resuming, and the best one by the monitored metric
    ckpts = {p.name for p in tmp_path.rglob("*.ckpt")}
    assert "last.ckpt" in ckpts and any(n.startswith("best") for n in ckpts), ckpts
    # the run's own config.yaml writes every option, those its settings leave unread at their defaults: it scores the
    # best checkpoint (parsed only: the checkpoint resolved and read, the unread-option rule passed)
    (saved,) = tmp_path.glob("lightning_logs/version_*/config.yaml")
    main = text_train_cli if config.parent.name == "text" else caption_train_cli
    with monkeypatch.context() as patched, pytest.raises(_Parsed):
        patched.setattr(LightningCLI, "instantiate_classes", _stop)
        main(["test", "--config", str(saved), "--ckpt_path", "best"])
    if config.parent.name == "text":
        translator = Translator.load(out)
        assert translator.net is not None
        if config.stem == "your_pairs":  # the bundled model's tokenizer and vocabulary, its pieces at their ids
            bundled = Translator.load(TEXT_MODEL_NAMES["transformer"])
            assert translator.src_vocab.itos[: len(bundled.src_vocab)] == bundled.src_vocab.itos
            assert torch.equal(translator.codec.metadata()["subword_model"], bundled.codec.metadata()["subword_model"])
            assert translator.info["terms"] == bundled.info["terms"]
        if config.name.startswith("multi30k"):  # a real corpus: the model file says what its source text looks like
            assert translator.source_check["lang"] == config.stem.split("_")[1]  # multi30k_de_en_... -> de
    else:
        captioner = Captioner.load(out)
        assert captioner.vocab == cli.datamodule.vocab
        if config.stem.startswith("your_photos"):  # the bundled model's first decoder: its words at their ids, then new
            bundled = Captioner.load(MODEL_NAMES["flickr8k"])
            assert captioner.vocab.itos[: len(bundled.vocab)] == bundled.vocab.itos
            added = captioner.vocab.itos[len(bundled.vocab) :]
            said = {w for caps in cli.datamodule.train_references for caption in caps for w in caption}
            assert "zorblat" in added and set(added) == said - set(bundled.vocab.itos), added
            assert captioner.info["terms"] == bundled.info["terms"]  # trained from Flickr8k's model: its data's terms
            # the first stage adds them; a later stage starts from its model, which holds them already (asserted only
            # here: a later stage that fitted its first stage itself printed both, one run after the other did not)
            said_so = "words of the train captions added" if not _later_stage(config) else "no new word"
            assert said_so in printed.err, printed.err
        if config.stem.startswith("flickr8k_de"):  # German words, written with the train sentences' capitals
            assert {"foto", "kaffee", "katze"} <= set(captioner.vocab.itos) and "photo" not in captioner.vocab.stoi
            assert set(captioner.casing["words"].split()) == {"Foto", "Kaffee", "Katze", "Chelsea"}
        if config.stem == "flickr8k_lite2_soft":  # the shared copies' JPEG step, read from the photos and recorded
            assert (captioner.preprocess.jpeg_quality, captioner.preprocess.jpeg_subsampling) == (90, "4:2:0")
            assert "the training photos are 224 x 224 JPEG files of quality 90, 4:2:0" in printed.err, printed.err
