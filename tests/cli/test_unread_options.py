"""Training options the run's own settings never read (text_attn.core.unread_options): two runs that differed only
in one trained the same model, and nothing said so (a folder of photos given beside the default source trained a
model of the shapes scenes). Refused in one line before anything is made, or, for the tuning knobs, listed in one
note; a default nobody typed is never refused (every shipped config fits as it is: tests/cli/test_shipped_configs.py).
No test here trains: each stops where the classes would be made, or is refused before."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers.one_line import refused
from helpers.shipped import fitted_by_default
from pytorch_lightning.cli import LightningCLI

from captioning.commands.train import train_main as caption_train
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.training.data import CaptionDataModule
from captioning.training.readers import CaptionDataError
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.train_cli import train_main as text_train

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ROOT = FIX.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # benchmarks/your_photos.py: its rows' options
CAPTION = ["fit", "--config", FIX / "captions/tiny_shapes.yaml"]  # soft attention, source shapes
TEXT = ["fit", "--config", FIX / "text/tiny_reorder.yaml"]  # task reorder, bahdanau


class Made(Exception):
    """The options passed every check: the data and the model would be made now."""


@pytest.fixture
def until_made(monkeypatch, cli_run_in_tmp):
    def made(self):
        raise Made

    monkeypatch.setattr(LightningCLI, "instantiate_classes", made)


@pytest.mark.parametrize(
    ("source", "option", "says"),
    [
        (
            "shapes",
            "image_dir",
            "source shapes reads no data.image_dir: set data.source folder (it reads data.image_dir and "
            "data.captions_tsv)",
        ),
        (
            "shapes",
            "karpathy_json",
            "source shapes reads no data.karpathy_json: set data.source karpathy (it reads "
            "data.karpathy_json and data.image_root)",
        ),
        ("folder", "image_root", "source folder reads no data.image_root: set data.source karpathy"),
        ("flickr8k", "captions_tsv", "source flickr8k reads no data.captions_tsv: set data.source folder"),
    ],
)
def test_a_caption_data_path_its_source_does_not_read_is_refused(source, option, says):
    with pytest.raises(CaptionDataError, match=f"^{re.escape(says)}"):
        CaptionDataModule(source=source, **{option: "photos"})
    CaptionDataModule(source="folder", image_dir="photos", captions_tsv="c.tsv")  # the source that reads them


@pytest.mark.parametrize(
    ("task", "option", "value", "says"),
    [
        (
            "reorder",
            "path",
            "pairs.tsv",
            "task reorder reads no data.path: set data.task tsv (it reads data.path, data.src_col, data.tgt_col)",
        ),
        ("dates", "src_path", "train.de", "task dates reads no data.src_path: set data.task parallel"),
        ("tsv", "tgt_path", "train.en", "task tsv reads no data.tgt_path: set data.task parallel"),
        ("reorder", "split_names", {"test": "test_2017"}, "task reorder reads no data.split_names: set data.task pair"),
    ],
)
def test_a_corpus_option_its_task_does_not_read_is_refused(task, option, value, says):
    with pytest.raises(ValueError, match=f"^{re.escape(says)}"):
        TranslationDataModule(task=task, **{option: value})


def test_the_audits_runs_are_refused_in_one_line(cli_run_in_tmp, capsys):
    """Both commands, as the audit ran them: a user's data beside the default synthetic data."""
    line = refused(caption_train, capsys, *CAPTION, "--data.image_dir", FIX / "images", "--data.captions_tsv", "c.tsv")
    assert line == ("caption-train: error: source shapes reads no data.image_dir: set data.source folder (it reads "
                    "data.image_dir and data.captions_tsv)")  # fmt: skip
    line = refused(text_train, capsys, *TEXT, "--data.path", FIX / "text/pairs.tsv")
    assert line.startswith("text-train: error: task reorder reads no data.path: set data.task tsv")


@pytest.mark.parametrize(
    ("main", "args", "says"),
    [
        (
            caption_train,
            ["--model.decoder.soft_prob", "0.3"],
            "model.decoder.attention soft reads no model.decoder.soft_prob: set model.decoder.attention hard (options "
            "of hard attention)",
        ),
        (caption_train, ["--model.objective.entropy_lambda", "0.1"], "soft reads no model.objective.entropy_lambda"),
        (
            caption_train,
            ["--model.objective.scst_bleu", "1"],
            "a run without model.objective.scst reads no model.objective.scst_bleu: set model.objective.scst true",
        ),
        (
            caption_train,
            ["--model.init_vocab", "keep"],
            "a run without model.init_from reads no model.init_vocab: give model.init_from, or leave model.init_vocab "
            "out",
        ),
        (
            text_train,
            ["--model.init_vocab", "keep"],
            "a run without model.init_from reads no model.init_vocab: give model.init_from, or leave model.init_vocab "
            "out",
        ),
        (
            text_train,
            ["--model.objective.scst_samples", "4"],
            "without model.objective.scst reads no model.objective.scst_samples",
        ),
        (text_train, ["--data.src_col", "1"], "task reorder reads no data.src_col: set data.task tsv"),
        # the config's attn_dim, and an attention without a scoring layer for it
        (
            text_train,
            ["--model.network.attention", "luong-general"],
            "model.network.attention luong-general reads no model.network.attn_dim",
        ),
        (
            text_train,
            ["--model.network.dot_projection", "true"],
            "model.network.attention bahdanau reads no model.network.dot_projection",
        ),
        # word links with no weight to train on them: read, checked, and nothing learned, unsaid
        (
            text_train,
            ["--model.objective.attn_sup_layer", "0"],
            "model.objective.attn_sup_lambda 0 reads no model.objective.attn_sup_layer: set it above 0",
        ),
    ],
    ids=[
        "soft_prob",
        "entropy",
        "scst_bleu",
        "init_vocab",
        "text_init_vocab",
        "text_scst",
        "src_col",
        "attn_dim",
        "dot_projection",
        "attn_sup_layer",
    ],
)
def test_a_given_option_the_run_does_not_read_is_refused_before_anything_is_made(main, args, says, until_made, capsys):
    base = CAPTION if main is caption_train else TEXT
    line = refused(main, capsys, *base, *args)
    assert line.startswith(f"{'caption' if main is caption_train else 'text'}-train: error: ") and says in line


def _said(main, capsys, *args: str) -> list[str]:
    """What ``main`` said on stderr for options that pass every check (the data and the model would be made now)."""
    with pytest.raises(Made):
        main([str(a) for a in args])
    return capsys.readouterr().err.splitlines()


def test_tuning_options_are_noted_once_and_defaults_and_nulls_pass(until_made, capsys):
    for main, base in ((caption_train, CAPTION), (text_train, TEXT)):  # as configured: nothing said
        assert _said(main, capsys, *base, "--model.objective.scst_max_len", "null") == []  # a null is no value given
    assert _said(
        caption_train,
        capsys,
        *CAPTION,
        "--model.lr_factor",
        "0.3",
        "--model.encoder_lr",
        "0.001",
        "--data.attention_words",
        "all",
    ) == [  # fmt: skip
        "caption-train: note: options that change nothing in this run: model.lr_patience null reads no "
        "model.lr_factor; model.encoder.fine_tune none reads no model.encoder_lr; data.attention_targets false reads "
        "no data.attention_words"
    ]
    # the word reward has no baseline: its decay, typed, changed nothing unsaid (the shipped hard configs' comment
    # called it the paper's baseline)
    assert _said(
        caption_train,
        capsys,
        *CAPTION,
        "--model.decoder.attention",
        "hard",
        "--model.objective.rl_reward",
        "word",
        "--model.objective.baseline_decay",
        "0.5",
    ) == [  # fmt: skip
        "caption-train: note: options that change nothing in this run: model.objective.rl_reward word reads no "
        "model.objective.baseline_decay"
    ]
    assert _said(text_train, capsys, *TEXT, "--data.max_tokens", "100", "--data.subword_type", "unigram") == [
        "text-train: note: options that change nothing in this run: task reorder reads no data.max_tokens; "
        "data.tokenizer word reads no data.subword_type"
    ]


def test_key_dims_and_layout_are_refused_as_their_siblings_are():
    """key_dims was replaced by what attend_on makes, silently (vocab_size and feature_dim were refused); a layout
    no Flickr8k copy has passed wherever source flickr8k was not chosen."""
    enc = EncoderConfig(backbone="resnet18", weights=None, grid=2, stride=32, image_size=64)
    with pytest.raises(ValueError, match=r"^decoder.key_dims is set from the encoder and decoder.attend_on; leave it "
                                         r"out \(got 5: attend_on all uses none\)$"):  # fmt: skip
        CaptionModel.build(10, enc, DecoderConfig(embed_dim=8, hidden_dim=8, attn_dim=8, key_dims=5))
    with pytest.raises(CaptionDataError, match="^unknown data.layout 'flat'; choose one of auto, original, kaggle$"):
        CaptionDataModule(layout="flat")


# options typed at their default, each read by nothing in the base config's run (soft attention, no SCST, no
# init_from; an RNN): with the line that refuses them
AT_DEFAULT = [
    pytest.param(caption_train, ["--model.decoder.soft_prob", "0.5"], "attention soft reads no model.decoder.soft_prob",
                 id="soft_prob"),
    pytest.param(caption_train, ["--model.objective.scst_bleu", "0.0"], "reads no model.objective.scst_bleu",
                 id="scst_bleu"),
    pytest.param(caption_train, ["--model.init_vocab", "extend"], "without model.init_from reads no model.init_vocab",
                 id="init_vocab"),
    pytest.param(caption_train, ["--model.objective.distil_weight", "0.5"], "model.objective.distil_from null reads "
                 "no model.objective.distil_weight: name a teacher with model.objective.distil_from",
                 id="distil_weight"),
    pytest.param(caption_train, ["--model.objective.distil_attention", "1.0"], "model.objective.distil_from null "
                 "reads no model.objective.distil_attention: name a teacher", id="distil_attention"),
    pytest.param(caption_train, ["--model.objective.distil_cache_gb", "4"], "model.objective.distil_from null "
                 "reads no model.objective.distil_cache_gb: name a teacher", id="distil_cache_gb"),
    pytest.param(text_train, ["--model.objective.scst_samples", "5"], "reads no model.objective.scst_samples",
                 id="text_scst_samples"),
    pytest.param(text_train, ["--model.init_vocab", "extend"], "without model.init_from reads no model.init_vocab",
                 id="text_init_vocab"),
    pytest.param(text_train, ["--model.objective", "{scst_baseline: greedy}"], "reads no model.objective.scst_baseline",
                 id="text_block"),
    # the RNN's own default attention beside the transformer: refused as another attention is
    *(pytest.param(text_train, ["--model.arch", "transformer", "--model.network", "null", "--model.network.attention",
                                attention], "model.arch transformer reads no model.network.attention: options of "
                   "model.arch rnn", id=f"arch_{attention}") for attention in ("bahdanau", "luong-dot")),
]  # fmt: skip


@pytest.mark.parametrize(("main", "args", "says"), AT_DEFAULT)
def test_an_option_typed_at_its_default_is_given(main, args, says, cli_run_in_tmp, capsys):
    """Typed on the command line, an option is given whatever its value: one the run never reads was refused at
    another value and passed silently at its default (the RNN's attention beside the transformer among them)."""
    base = CAPTION if main is caption_train else TEXT
    assert says in refused(main, capsys, *base, *args)


def test_a_config_files_value_at_its_default_is_no_option_given(until_made, capsys):
    """It changes nothing, set or not: not refused where a config file sets it (a config that writes every option, as
    --print_config's and a run's config.yaml do, sets the SCST options beside scst: false and init_vocab without
    init_from). The same values typed: test_an_option_typed_at_its_default_is_given."""
    caption = "model:\n  decoder: {soft_prob: 0.5}\n  objective: {scst_bleu: 0.0}\n  init_vocab: extend\n"
    text = "model:\n  objective: {scst_samples: 5, scst_baseline: greedy}\n  init_vocab: extend\n"
    for main, base, written in ((caption_train, CAPTION, caption), (text_train, TEXT, text)):
        Path("defaults.yaml").write_text(written)
        with pytest.raises(Made):
            main([*map(str, base), "--config", "defaults.yaml"])
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "config",
    [
        # one parse and one print each (~0.4 s): the configs the default run fits, one per code path; the rest slow
        pytest.param(c, id=f"{c.parent.name}/{c.stem}", marks=[] if fitted_by_default(c) else [pytest.mark.slow])
        for c in sorted((ROOT / "configs").rglob("*.yaml"))
    ],
)
def test_a_print_config_file_goes_back_into_fit(config, until_made, capsys):
    """--print_config writes every option, those the config's settings leave unread at their defaults: its file fits
    as the config does (a run's own config.yaml: tests/cli/test_shipped_configs.py)."""
    main = text_train if config.parent.name == "text" else caption_train
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", str(config), "--print_config"])
    assert exc.value.code == 0
    Path("printed.yaml").write_text(capsys.readouterr().out)
    with pytest.raises(Made):
        main(["fit", "--config", "printed.yaml"])
    assert "error" not in capsys.readouterr().err


def test_a_run_from_scratch_of_a_config_that_starts_from_a_model_parses(until_made, capsys):
    """your_photos.yaml and your_pairs.yaml set init_vocab: extend, its default, beside init_from: a run from
    scratch (benchmarks/your_photos.py's scratch row) gives init_from null and was refused for the init_vocab."""
    import your_photos

    _, _, config, options = next(row for row in your_photos.ROWS if row[0] == "scratch")
    folder = ["--data.image_dir", str(FIX / "images"), "--data.captions_tsv", str(FIX / "captions/captions.tsv")]
    with pytest.raises(Made):
        caption_train(["fit", "--config", str(config), *folder, *options])
    with pytest.raises(Made):
        text_train(["fit", "--config", str(ROOT / "configs/text/your_pairs.yaml"), "--data.path",
                    str(FIX / "text/pairs.tsv"), "--model.init_from", "null"])  # fmt: skip
    assert "error" not in capsys.readouterr().err


def test_the_reading_options_beside_a_start_model_are_noted_as_its_own(until_made, capsys):
    """The start model's tokenizer, casing and subword model are kept: the note said "data.tokenizer word reads no
    data.subword_vocab" to a run whose model, started from the bundled subword Transformer, read subwords."""
    with pytest.raises(Made):
        text_train(["fit", "--config", str(ROOT / "configs/text/your_pairs.yaml"), "--data.path",
                    str(FIX / "text/pairs.tsv"), "--data.tokenizer", "word", "--data.lower", "true",
                    "--data.subword_vocab", "4000"])  # fmt: skip
    assert capsys.readouterr().err.splitlines() == [
        "text-train: note: options that change nothing in this run: model.init_from reads no data.tokenizer, "
        "data.lower, data.subword_vocab"
    ]


def test_options_given_as_a_yaml_block_are_given_one_by_one(until_made, capsys):
    """A dataclass block given as a mapping keeps its other fields (jsonargparse merges it): its options are given
    as the dotted ones are, in either spelling of the flag."""
    line = refused(caption_train, capsys, *CAPTION, "--model.objective", "{scst_samples: 3}")
    assert "a run without model.objective.scst reads no model.objective.scst_samples" in line
    line = refused(text_train, capsys, *TEXT, "--model.objective={scst_baseline: leave_one_out, label_smoothing: 0.1}")
    assert "a run without model.objective.scst reads no model.objective.scst_baseline:" in line


def test_an_unknown_attention_is_said_as_unknown_not_as_reading_no_hard_options(until_made, capsys):
    """``--model.decoder.attention stochastic`` beside the hard options was refused as "model.decoder.attention
    stochastic reads no model.objective.soft_warmup, ...", never saying the value was wrong."""
    with pytest.raises(Made):  # past the unread options' check: the decoder, made next, refuses it by name
        caption_train([*map(str, CAPTION), "--model.decoder.attention", "stochastic", "--model.objective.soft_warmup",
                       "5"])  # fmt: skip
    assert capsys.readouterr().err == ""
    from captioning.model.decoder import DecoderConfig

    with pytest.raises(ValueError, match=r"^unknown attention 'stochastic'; choose one of \('soft', 'hard'\)$"):
        DecoderConfig(attention="stochastic")
