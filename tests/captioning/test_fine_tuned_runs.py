"""A fine-tuning run's files (``model.encoder.fine_tune: last``): its model file checks the domain on the trained
encoder and says which stage was fine-tuned (--model-info, /info); its own checkpoint joins its model file in
caption-export (--ensemble, --encoder-of), and a checkpoint exported alone says it has no feature check (the model file
exported again does not); a frozen file put on its encoder (--encoder-of) says which stage was tuned; a file recording
an unknown stage is refused in one line; a resume with another fine_tune is refused by name; a start whose weights do
not fit names the options that differ. One tiny fit (resnet18, 32 shapes scenes, 4 steps) serves them all."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from captioning.commands.caption import caption_main
from captioning.commands.export import export_main
from captioning.commands.train import caption_train_cli
from captioning.model.captioner import Captioner
from captioning.model.decoder import DecoderConfig
from captioning.model.encoder import EncoderConfig
from captioning.model.network import CaptionModel
from captioning.photos.domain import domain_check
from captioning.photos.preprocess import prepared

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")
# resnet18 cut after layer3 (stride 16): its files a quarter the size
TUNED = ["--config", CONFIG, "--model.encoder.stride", "16", "--model.encoder.fine_tune", "last"]
TUNED += ["--trainer.limit_val_batches", "0"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(folder, CLI) of the fit: 20 val scenes, enough to set a domain check's threshold; its checkpoint kept."""
    tmp = tmp_path_factory.mktemp("tuned")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        cli = caption_train_cli(["fit", *TUNED, "--trainer.default_root_dir", "run", "--data.val_size", "20",
                                 "--trainer.enable_checkpointing", "true",
                                 "--model.export_path", "run/model.pt"])  # fmt: skip
    return tmp, cli


def _ckpt(tmp: Path) -> Path:
    (ckpt,) = (tmp / "run").rglob("*.ckpt")
    return ckpt


@pytest.mark.long
def test_the_model_file_checks_the_domain_on_the_trained_encoder(run):
    """The stored frozen maps through the trained last stage: the check a frozen run makes from its features (before,
    none: a fine-tuned model never flagged a photo)."""
    tmp, cli = run
    check = Captioner.load(tmp / "run/model.pt").domain_check
    assert check is not None and "prototypes" in check
    model, dm = cli.model.model.eval(), cli.datamodule
    with torch.no_grad():  # the whole trained encoder on the photos themselves
        feats = [model.encode(torch.stack([prepared(im, dm.preprocess) for im in dm.splits[s].images]))
                 for s in ("train", "val")]  # fmt: skip
    mine = domain_check(*feats)
    # the maps are stored in float16: equal to that rounding
    torch.testing.assert_close(check["prototypes"].float(), mine["prototypes"].float(), atol=5e-3, rtol=0)
    assert check["threshold"] == pytest.approx(mine["threshold"], abs=5e-3)


def test_the_model_file_says_which_stage_was_fine_tuned(run, capsys):
    from attention_serve.models import load_caption

    path = run[0] / "run/model.pt"
    data = torch.load(path, weights_only=True)
    assert data["encoder"]["fine_tune"] == "none" and data["encoder_fine_tuned"] == "last"  # frozen at inference
    assert caption_main(["--model", str(path), "--model-info"]) == 0
    said = "encoder:        resnet18 (weights in the file, its last stage fine-tuned on captions), 64 px"
    assert said in capsys.readouterr().out
    assert load_caption(path).info["encoder"].startswith("resnet18 (weights in the file, its last stage fine-tuned")


@pytest.mark.long
def test_the_runs_checkpoint_joins_its_model_file_and_alone_says_it_has_no_feature_check(run, capsys):
    """The checkpoint says fine_tune last, the model file none (frozen at inference): the same model (they were
    refused as "another vocabulary or other settings")."""
    tmp, ckpt = run[0], str(_ckpt(run[0]))
    model = str(tmp / "run/model.pt")
    assert export_main([model, str(tmp / "ens.pt"), "--ensemble", ckpt]) == 0
    assert export_main([ckpt, str(tmp / "enc.pt"), "--encoder-of", model]) == 0  # either way round
    assert len(Captioner.load(tmp / "ens.pt").decoders) == 2
    assert Captioner.load(tmp / "enc.pt").fine_tuned == "last"  # the encoder's record came with it
    capsys.readouterr()
    assert export_main([ckpt, str(tmp / "alone.pt")]) == 0  # checkpoints keep no feature check: the model file has it
    note = "caption-export: note: its encoder was fine-tuned, and it holds no check of where its training photos'"
    assert capsys.readouterr().err.startswith(note)
    assert Captioner.load(tmp / "alone.pt").fine_tuned == "last"


def test_the_model_file_exported_again_keeps_its_feature_check_and_has_no_note(run, tmp_path, capsys):
    """The fit's model file holds the check made on the trained encoder's features (prototypes): the note for a
    fine-tuned file without one is not said of it."""
    assert export_main([str(run[0] / "run/model.pt"), str(tmp_path / "again.pt")]) == 0
    assert "holds no check" not in capsys.readouterr().err
    assert "prototypes" in Captioner.load(tmp_path / "again.pt").domain_check


def test_a_frozen_decoder_over_the_fine_tuned_encoder_says_which_stage_was_tuned(run, tmp_path, capsys):
    """--encoder-of a fine-tuned run's file: the encoder's record of its tuned stage comes with its weights (a frozen
    file's decoder over it said only "weights in the file")."""
    data = torch.load(run[0] / "run/model.pt", weights_only=True)
    del data["encoder_fine_tuned"]  # as a frozen run's file is: no stage recorded
    torch.save(data, tmp_path / "frozen.pt")
    assert Captioner.load(tmp_path / "frozen.pt").fine_tuned is None
    moved = tmp_path / "moved.pt"
    assert export_main([str(tmp_path / "frozen.pt"), str(moved), "--encoder-of", str(run[0] / "run/model.pt")]) == 0
    capsys.readouterr()
    assert caption_main(["--model", str(moved), "--model-info"]) == 0
    assert "(weights in the file, its last stage fine-tuned on captions)" in capsys.readouterr().out


def test_a_model_file_recording_no_known_fine_tuned_stage_is_refused_in_one_line(run, tmp_path, capsys):
    data = torch.load(run[0] / "run/model.pt", weights_only=True)
    data["encoder_fine_tuned"] = "everything"
    torch.save(data, tmp_path / "bogus.pt")
    with pytest.raises(SystemExit) as exc:
        caption_main(["--model", str(tmp_path / "bogus.pt"), "--model-info"])
    got = capsys.readouterr()
    why = "its encoder_fine_tuned must be one of none, last, last2, all, got 'everything'"
    assert exc.value.code == 2 and got.err.strip().splitlines() == [
        f"caption: error: {tmp_path / 'bogus.pt'}: broken caption model file ({why})"
    ]
    assert got.out == ""


def test_a_resume_with_another_fine_tune_is_refused_by_name(run, capsys, monkeypatch):
    """torch's "loaded state dict has a different number of parameter groups" named no option."""
    monkeypatch.chdir(run[0])
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", *TUNED, "--model.encoder.fine_tune", "none", "--ckpt_path", str(_ckpt(run[0])),
                           "--trainer.default_root_dir", "again", "--trainer.max_steps", "8"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err[-1] == (
        "caption-train: error: the checkpoint trained with model.encoder.fine_tune last, not none: resume with it, or "
        "start a new run from it with --model.init_from"
    )


def test_a_start_that_does_not_fit_names_the_options_that_differ(run):
    """The checkpoint's settings against this config's: the option named beside the weight (the weight alone, before);
    a setting that shapes no weight (dropout) is not named."""
    start = Captioner.read_start(_ckpt(run[0]))
    assert start.tuned == "last" and start.decoder["hidden_dim"] == 32
    enc = EncoderConfig(**{**start.encoder, "weights": None})
    dec = DecoderConfig(**{k: start.decoder[k] for k in ("embed_dim", "attn_dim")}, hidden_dim=24, dropout=0.3)
    model = CaptionModel.build(len(start.vocab), enc, dec)
    with pytest.raises(ValueError) as exc:
        Captioner.start_weights(start, model, start.vocab)
    said = str(exc.value)
    assert said.startswith(f"model.init_from: {start.name} does not fit this config's network: model.decoder."
                           "hidden_dim 24 here, 32 in the file: give the file's values (decoder.")  # fmt: skip
    assert "dropout" not in said


def test_a_frozen_stage_started_from_the_fine_tuned_model_still_says_so(run, monkeypatch):
    """The recipe's SCST stage (flickr8k_lite2_finetune_scst.yaml): the encoder frozen, its weights the fine-tuned
    start's; the stage's file and checkpoint say which stage was fine-tuned, as the start's did."""
    monkeypatch.chdir(run[0])
    caption_train_cli(["fit", *TUNED, "--model.encoder.fine_tune", "none", "--model.init_from", "run/model.pt",
                       "--trainer.max_steps", "1",
                       "--trainer.default_root_dir", "stage2", "--trainer.limit_val_batches", "0",
                       "--trainer.enable_checkpointing", "true", "--model.export_path", "stage2/model.pt"])  # fmt: skip
    assert Captioner.load("stage2/model.pt").fine_tuned == "last"
    (ckpt,) = Path("stage2").rglob("*.ckpt")
    assert export_main([str(ckpt), "stage2/exported.pt"]) == 0
    assert Captioner.load("stage2/exported.pt").fine_tuned == "last"


@pytest.mark.parametrize("options", [["--model.encoder.fine_tune", "all"], ["--data.cache_features", "false"]],
                         ids=["fine_tune-all", "no-feature-cache"])  # fmt: skip
@pytest.mark.long
def test_an_encoder_that_read_the_photos_whole_still_gets_a_feature_check(options, tmp_path, monkeypatch, capsys):
    """fine_tune all (and any run without the feature cache) stored neither features nor frozen maps: its model file
    held the pixel rules alone, and caption never said a photo was unlike the training ones. The photos themselves
    (up to 500 of train and of val) go through the exported encoder once, at export, and a line says what it cost."""
    monkeypatch.chdir(tmp_path)
    cli = caption_train_cli(["fit", "--config", CONFIG, "--trainer.limit_val_batches", "0", "--data.val_size", "20",
                             *options, "--model.export_path", "model.pt"])  # fmt: skip
    check = Captioner.load(tmp_path / "model.pt").domain_check
    assert check is not None and "prototypes" in check and "photos" not in check  # shapes: no pixel rules
    model, dm = cli.model.model.eval(), cli.datamodule
    with torch.no_grad():
        feats = [model.encode(torch.stack([prepared(im, dm.preprocess) for im in dm.splits[s].images]))
                 for s in ("train", "val")]  # fmt: skip
    mine = domain_check(*feats)
    torch.testing.assert_close(check["prototypes"].float(), mine["prototypes"].float(), atol=2e-3, rtol=0)
    assert check["threshold"] == pytest.approx(mine["threshold"], abs=2e-3)
    said = [line for line in capsys.readouterr().err.splitlines() if "domain check" in line]
    assert len(said) == 1 and said[0].startswith("caption-train: the domain check (caption's note on photos unlike the "
                                                 "training ones): 52 train and val photos encoded in ")  # fmt: skip


def test_a_model_file_missing_an_entry_names_it(run, tmp_path):
    """A model file without its vocabulary was "broken caption model file ('vocab')": a bare key."""
    from text_attn.core.modelfile import ModelFileError

    data = torch.load(run[0] / "run/model.pt", weights_only=True)
    del data["vocab"]
    torch.save(data, tmp_path / "novocab.pt")
    with pytest.raises(ModelFileError) as err:
        Captioner.load(tmp_path / "novocab.pt")
    assert str(err.value) == f"{tmp_path / 'novocab.pt'}: broken caption model file (it has no 'vocab')"


def test_a_weight_that_does_not_fit_is_said_whole(run, tmp_path):
    """torch's load_state_dict error, cut at 160 characters, ended mid-sentence ("broken caption model file (Error(s)
    in loading state_dict for CaptionModel: While copying the parameter named ..."): its first problem, whole."""
    from text_attn.core.modelfile import ModelFileError

    data = torch.load(run[0] / "run/model.pt", weights_only=True)
    name = next(k for k in data["state_dict"] if k.startswith("decoder."))
    data["state_dict"][name] = torch.zeros(3, 3)
    torch.save(data, tmp_path / "odd.pt")
    with pytest.raises(ModelFileError) as err:
        Captioner.load(tmp_path / "odd.pt")
    said = str(err.value)
    assert said.startswith(
        f"{tmp_path / 'odd.pt'}: broken caption model file (a weight that does not fit the network "
        f"it describes: size mismatch for {name}: copying a param with shape torch.Size([3, 3])"
    )
    shape = list(torch.load(run[0] / "run/model.pt", weights_only=True)["state_dict"][name].shape)
    assert said.endswith(f"the shape in current model is torch.Size({shape}).)"), said
    assert "Error(s) in loading" not in said and "..." not in said


def test_the_no_feature_check_note_is_of_checkpoints_alone():
    """A model file re-exported holds what its fit made: the note blamed checkpoints for a frozen run's file (its
    photos too few for a feature check) whose encoder a stage before had fine-tuned."""
    from types import SimpleNamespace

    from captioning.commands.export import _no_check_note

    tuned = SimpleNamespace(fine_tuned="last", domain_check={"photos": True})
    assert _no_check_note(tuned, "model file") is None
    assert "a checkpoint keeps only the photos' pixel rules" in _no_check_note(tuned, "checkpoint")
    assert _no_check_note(SimpleNamespace(fine_tuned=None, domain_check={}), "checkpoint") is None
    assert _no_check_note(SimpleNamespace(fine_tuned="last", domain_check={"prototypes": 1}), "checkpoint") is None
