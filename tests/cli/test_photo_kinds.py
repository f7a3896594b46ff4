"""The shipped Flickr8k configs train on the photos people have, given only their data path: the shared copies
(224 x 224, JPEG quality 90, 4:2:0), Flickr8k as it is downloaded (full-size photos of many sizes and JPEG qualities,
a PNG among them) and full-size photos Pillow saved with its defaults (quality 75). Fit and optimize read the JPEG
step from the training photos (captioning.photos.jpeg_step): the copies' step is recorded in the model file, full-size
photos of many sizes record none; a value given by hand that the photos contradict is refused in one line before
any work. Each SCST config starts from its first stage's model file; streaming chunks record what the files showed.

The COCO configs (no source_side: no squash, no step) train on the same three kinds. The lite2 soft config on the
originals runs by default (on the copies: tests/cli/test_shipped_configs.py); the other kinds and configs and the
chunks per kind are ``-m slow``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.flickr8k import write_original

from captioning.commands.train import caption_train_cli, train_main
from captioning.model.captioner import Captioner

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "caption"
KARPATHY = ROOT / "tests" / "fixtures" / "captions" / "karpathy.json"
# kind -> (the JPEG step the model file records, words of the line fit prints about the photos)
EXPECTED = {
    "copies": ((90, "4:2:0"), "224 x 224 JPEG files of quality 90, 4:2:0"),
    "originals": ((None, None), "not all JPEG files of the standard tables and of 2 sizes"),
    "pillow": ((None, None), "of 2 sizes"),
}
RUN = ["--trainer.max_steps", "2", "--trainer.limit_val_batches", "1", "--trainer.enable_progress_bar", "false",
       "--trainer.val_check_interval", "1.0", "--data.min_freq", "1", "--data.batch_size", "2"]  # fmt: skip
# what a test changes beyond the data path: ResNet-101's ImageNet weights cannot load offline; no METEOR (Java)
RESNET = ["--model.encoder.backbone", "resnet18", "--model.encoder.weights", "null", "--model.encoder.image_size",
          "224", "--model.val_meteor", "false"]  # fmt: skip


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> dict[str, Path]:
    """kind -> a Flickr8k folder of that kind of photos, written once for the module."""
    root = tmp_path_factory.mktemp("kinds")
    return {kind: write_original(root / kind, kind=kind) for kind in EXPECTED}


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


def _data(config: str, folder: Path) -> list[str]:
    if "resnet" in config:  # the Karpathy-split configs: the JSON names the same photos as the Flickr8k layout
        coco = ["--model.decoder.hidden_dim", "64"] if config.startswith("coco") else []  # the paper's 1,800: slow
        data = ["--data.karpathy_json", str(KARPATHY), "--data.image_root", str(folder / "Flicker8k_Dataset")]
        return [*data, *RESNET, *coco]
    return ["--data.root", str(folder)]


def _fit(config: str, data: list[str], out: Path, extra: list[str] = ()) -> Path:
    model = out / "model.pt"
    args = ["fit", "--config", str(CONFIGS / config), *data, *RUN, *extra]
    caption_train_cli([*args, "--trainer.default_root_dir", str(out), "--model.export_path", str(model)])
    return model


def _recorded(model: Path) -> tuple:
    pre = Captioner.load(model).preprocess
    return (pre.jpeg_quality, pre.jpeg_subsampling)


def _stage_before(config: str) -> str | None:
    """The config a later stage starts from (its model.init_from), None for a first stage."""
    if config == "flickr8k_lite2_finetune.yaml":
        return "flickr8k_lite2_soft.yaml"
    return config.replace("_scst", "") if config.endswith("_scst.yaml") else None


def _start(config: str, data: list[str], out: Path) -> list[str]:
    """model.init_from the model file of the stage before (fitted here, and the one before it), as a user would."""
    before = _stage_before(config)
    if before is None:
        return []
    return ["--model.init_from", str(_fit(before, data, out / before.removesuffix(".yaml"), _start(before, data, out)))]


def _trains(config: str, kind: str, photos, tmp_path, capsys) -> None:
    step, words = EXPECTED[kind]
    data = _data(config, photos[kind])
    extra = _start(config, data, tmp_path / "first")
    capsys.readouterr()
    model = _fit(config, data, tmp_path / "run", extra)
    err = capsys.readouterr().err
    if config.startswith("coco"):  # no source_side: photos go to the network as they come, no squash, no step
        assert _recorded(model) == (None, None) and "the training photos are" not in err, err
        return
    assert _recorded(model) == step
    assert f"caption-train: the training photos are {words}" in err, err


# -m long fits the originals here; the copies' fit is tests/cli/test_shipped_configs.py's (which checks what it
# records), and Pillow's full-size photos record nothing for the reason the originals do (two sizes): -m slow
@pytest.mark.parametrize("kind", [pytest.param("copies", marks=pytest.mark.slow), "originals",
                                  pytest.param("pillow", marks=pytest.mark.slow)])  # fmt: skip
@pytest.mark.long
def test_the_soft_config_trains_on_every_kind_of_photos(kind, photos, tmp_path, capsys):
    _trains("flickr8k_lite2_soft.yaml", kind, photos, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(EXPECTED))
@pytest.mark.parametrize(
    "config",
    ["flickr8k_lite2_hard.yaml", "flickr8k_lite2_soft_scst.yaml", "flickr8k_lite2_hard_scst.yaml",
     "flickr8k_lite2_finetune.yaml", "flickr8k_lite2_finetune_scst.yaml", "flickr8k_resnet101_soft.yaml",
     "coco_resnet101_soft.yaml", "coco_resnet101_hard.yaml",
     "coco_resnet101_soft_scst.yaml"],
)  # fmt: skip
def test_every_paper_config_trains_on_every_kind_of_photos(config, kind, photos, tmp_path, capsys):
    _trains(config, kind, photos, tmp_path, capsys)


def _chunks(config: str, folder: Path, out: Path, extra: list[str] = ()) -> None:
    train_main(["optimize", "--config", str(CONFIGS / config), "--out", str(out), "--data.root", str(folder),
                "--data.min_freq", "1", *extra])  # fmt: skip


@pytest.mark.long
@pytest.mark.parametrize("kind", [pytest.param("copies", marks=pytest.mark.slow), "originals"])
def test_chunks_record_what_the_files_show(kind, photos, tmp_path, capsys):
    _chunks("flickr8k_lite2_soft.yaml", photos[kind], tmp_path / "chunks")
    model = _fit("flickr8k_lite2_soft.yaml", ["--data.root", str(tmp_path / "chunks")], tmp_path / "run")
    assert _recorded(model) == EXPECTED[kind][0]
    assert f"caption-train: the training photos are {EXPECTED[kind][1]}" in capsys.readouterr().err


@pytest.mark.slow
def test_feature_chunks_encode_with_the_step_the_photos_show(photos, tmp_path, capsys):
    _chunks("flickr8k_lite2_soft.yaml", photos["copies"], tmp_path / "chunks", ["--features", "true"])
    assert "caption-train optimize: the training photos are 224 x 224" in capsys.readouterr().err
    model = _fit("flickr8k_lite2_soft.yaml", ["--data.root", str(tmp_path / "chunks")], tmp_path / "run")
    assert _recorded(model) == (90, "4:2:0")  # the same encoder as the chunks' (fit refuses another one)


GIVEN = ["--model.encoder.jpeg_quality", "96", "--model.encoder.jpeg_subsampling", "4:4:4"]


def test_a_value_the_photos_contradict_is_refused_before_any_work(photos, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        _fit("flickr8k_lite2_soft.yaml", ["--data.root", str(photos["originals"])], out, GIVEN)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exc.value.code == 2 and len([ln for ln in lines if "error" in ln]) == 1
    assert lines[-1] == (
        "caption-train: error: model.encoder.jpeg_quality / jpeg_subsampling say 96, 4:4:4, but the training photos "
        "are not all JPEG files of the standard tables and of 2 sizes (500 x 375, 375 x 500, ...), so they went "
        "through no JPEG step at 224 x 224: leave both auto (the default: read from the photos)"
    )
    assert "Total params" not in captured.out + captured.err  # before the model summary
    assert not (out / "feature_cache").exists()  # and before any photo is encoded
    with pytest.raises(SystemExit) as exc:  # the copies: their own step, named
        _fit("flickr8k_lite2_soft.yaml", ["--data.root", str(photos["copies"])], out, ["--model.encoder.jpeg_quality",
             "null", "--model.encoder.jpeg_subsampling", "null"])  # fmt: skip
    assert exc.value.code == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .endswith(
            "say none, but the training photos are 224 x 224 JPEG files of quality 90, 4:2:0 (their quantization "
            "tables): leave both auto (the default: read from the photos), or set 90 and '4:2:0'"
        )
    )
    with pytest.raises(SystemExit) as exc:  # optimize: before it writes
        _chunks("flickr8k_lite2_soft.yaml", photos["pillow"], tmp_path / "chunks", GIVEN)
    assert exc.value.code == 2 and "say 96, 4:4:4, but the training photos are of 2 sizes" in capsys.readouterr().err
    assert not (tmp_path / "chunks").exists()


@pytest.mark.long
def test_a_value_the_photos_agree_with_is_kept_without_a_word(photos, tmp_path, capsys):
    given = ["--model.encoder.jpeg_quality", "90", "--model.encoder.jpeg_subsampling", "4:2:0"]
    model = _fit("flickr8k_lite2_soft.yaml", ["--data.root", str(photos["copies"])], tmp_path / "run", given)
    assert _recorded(model) == (90, "4:2:0") and "the training photos are" not in capsys.readouterr().err
