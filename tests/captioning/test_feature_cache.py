"""The feature cache persists on disk: a second fit and a test read it instead of encoding; a change of encoder
weights or of the image list encodes afresh; fast_dev_run encodes only the batches it runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from captioning.commands.train import caption_train_cli
from captioning.training import feature_cache
from captioning.training.data import CaptionDataModule

CONFIG = str(Path(__file__).parent.parent / "fixtures/captions/tiny_shapes.yaml")


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


@pytest.fixture
def encodings(monkeypatch):
    """Counts the images each fill_feature_cache call encodes (the split names it encoded)."""
    calls: list[list[str]] = []
    real = CaptionDataModule.fill_feature_cache

    def counting(self, *args, **kwargs):
        done = real(self, *args, **kwargs)
        calls.append(done)
        return done

    monkeypatch.setattr(CaptionDataModule, "fill_feature_cache", counting)
    return calls


@pytest.mark.slow
def test_the_disk_cache_is_read_by_later_runs_and_keyed_by_images_and_weights(encodings):
    first = caption_train_cli(["fit", "--config", CONFIG, "--trainer.default_root_dir", "run"])
    assert encodings == [["train", "val"]]
    files = sorted(p.name.split("-")[0] for p in Path("run/feature_cache").glob("*.pt"))
    assert files == ["train", "val"]
    second = caption_train_cli(["fit", "--config", CONFIG, "--trainer.default_root_dir", "run"])
    assert encodings[-1] == []  # nothing encoded: both splits came from disk
    for split in ("train", "val"):
        torch.testing.assert_close(second.datamodule.features[split], first.datamodule.features[split])
    for name, weight in first.model.state_dict().items():  # the same seed, encoded or read: the same training
        assert torch.equal(weight, second.model.state_dict()[name]), name
    caption_train_cli(["test", "--config", CONFIG, "--trainer.default_root_dir", "run", "--ckpt_path", "null"])
    assert encodings[-1] == ["test"]  # only the split never encoded before
    caption_train_cli(["fit", "--config", CONFIG, "--trainer.default_root_dir", "run", "--data.seed", "1"])
    assert encodings[-1] == ["train", "val"]  # other scenes
    caption_train_cli(["fit", "--config", CONFIG, "--trainer.default_root_dir", "run", "--seed_everything", "1"])
    assert encodings[-1] == ["train", "val"]  # other (random) encoder weights
    assert len(list(Path("run/feature_cache").glob("train-*.pt"))) == 3


@pytest.mark.long
def test_disk_cache_off_and_fast_dev_run(encodings):
    caption_train_cli(
        ["fit", "--config", CONFIG, "--trainer.default_root_dir", "run", "--data.feature_cache_dir", "null"]
    )
    assert encodings == [["train", "val"]] and not Path("run/feature_cache").exists()
    cli = caption_train_cli(
        ["fit", "--config", CONFIG, "--trainer.default_root_dir", "dev", "--trainer.fast_dev_run", "true"]
    )
    assert len(encodings) == 1 and not cli.datamodule.features  # no caching pass: batches carried images
    assert cli.trainer.global_step == 1


@pytest.mark.long
def test_the_same_seed_trains_the_same_weights_whether_the_features_were_on_disk_or_not(encodings):
    """An EfficientNet-Lite encoder (its folded inference copy is made at the first encode) and dropout: the first fit
    encodes the photos, the second reads them from disk; both draw the same dropout masks."""
    args = ["fit", "--config", CONFIG, "--trainer.default_root_dir", "run", "--model.encoder.backbone",
            "efficientnet_lite0", "--model.decoder.dropout", "0.5"]  # fmt: skip
    first = caption_train_cli(args)
    second = caption_train_cli(args)
    assert encodings == [["train", "val"], []]  # encoded, then read
    for name, weight in first.model.state_dict().items():
        assert torch.equal(weight, second.model.state_dict()[name]), name


@pytest.mark.long
def test_a_data_module_fit_again_with_another_encoder_encodes_its_photos_again(tmp_path, capsys):
    """One data module, fits of several encoders (a hyper-parameter loop): in memory a split's features are known by
    its name alone, and the second fit (another image size: the same shapes) trained on the first one's features."""
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import Callback

    from captioning.photos.preprocess import prepared
    from captioning.training.module import CaptionModule

    carried: list[set[str]] = []

    class Batches(Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            carried.append({k for k in ("features", "images") if k in batch})

    def fit(steps: int = 1, **encoder) -> CaptionModule:
        encoder = {"backbone": "resnet18", "weights": None, "grid": 4, "image_size": 64, "crop": False, **encoder}
        module = CaptionModule(encoder=encoder, decoder={"embed_dim": 8, "hidden_dim": 16, "attn_dim": 8},
                               val_meteor=False, export_path=str(tmp_path / "model.pt"))  # fmt: skip
        trainer = pl.Trainer(max_steps=steps, limit_val_batches=0, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, callbacks=[Batches()])  # fmt: skip
        trainer.fit(module, dm)
        return module

    dm = CaptionDataModule(source="shapes", train_size=8, val_size=4, test_size=4, scene_size=64, max_objects=2,
                           batch_size=8, cache_features=True, feature_cache_dir=None)  # fmt: skip
    fit()
    first = dm.features["train"]
    second = fit(image_size=96)
    assert dm.features["train"] is not first and carried[-1] == {"features"}
    photos = torch.stack([prepared(image, second.model.encoder.preprocess) for image in dm.splits["train"].images])
    with torch.no_grad():
        torch.testing.assert_close(
            dm.features["train"].float(), second.model.eval().encode(photos), rtol=2e-3, atol=2e-3
        )
    fit(grid=2)  # another grid: was a shape error in the decoder
    assert dm.features["train"].shape[1] == 4
    capsys.readouterr()
    fit(fine_tune="all")  # a trainable encoder: its batches carry photos, not the cached features of another
    assert carried[-1] == {"images"} and not dm.features
    # said: data.cache_features asked for was unused, unsaid, every step running the whole encoder
    assert ("note: data.cache_features stores nothing here: model.encoder.fine_tune all trains every stage, so each "
            "step runs the whole encoder on the photos") in capsys.readouterr().err  # fmt: skip


def test_encoding_draws_nothing_from_the_global_random_stream(tmp_path):
    """A run whose features were on disk drew other dropout masks than the same config's first run, which encoded
    them: the encoding loader's iterator took its base seed from torch's global stream."""
    from PIL import Image

    photos = []
    for i in range(5):
        photos.append(tmp_path / f"p{i}.png")
        Image.new("RGB", (20, 16), (40 * i, 90, 200 - 30 * i)).save(photos[-1])
    torch.manual_seed(3)
    before = torch.get_rng_state()
    features: dict[str, torch.Tensor] = {}
    done = feature_cache.fill_features(features, {"train": photos}, lambda b: b.flatten(2).transpose(1, 2),
                                       lambda img: torch.zeros(3, 4, 4), batch_size=2, progress=False)  # fmt: skip
    assert done == ["train"] and features["train"].shape == (5, 16, 3)
    assert torch.equal(torch.get_rng_state(), before)


def test_encoding_for_a_log_file_says_one_line_as_it_starts_and_one_as_it_ends(tmp_path):
    """A run whose output is no terminal (text_attn.core.progress_lines) gets lines, not a bar redrawn with carriage
    returns; a split found on disk is not encoded, and nothing is said of it."""
    from PIL import Image

    photos = []
    for i in range(3):
        photos.append(tmp_path / f"p{i}.png")
        Image.new("RGB", (20, 16), (40 * i, 90, 200)).save(photos[-1])
    said: list[str] = []
    features: dict[str, torch.Tensor] = {"val": torch.zeros(1, 16, 3)}
    feature_cache.fill_features(features, {"train": photos, "val": photos[:1]}, lambda b: b.flatten(2).transpose(1, 2),
                                lambda img: torch.zeros(3, 4, 4), batch_size=2, progress=said.append)  # fmt: skip
    assert said == ["caching image features: 3 images", "cached image features: 3 images in under a minute"]
    said.clear()
    feature_cache.fill_features(features, {"train": photos}, None, None, progress=said.append)
    assert said == []


def test_a_cache_the_disk_refused_is_not_said_cached(tmp_path, monkeypatch, capsys):
    """ "cannot write the feature cache ...; training on the features in memory", then "cached image features": the
    last line says the features are in memory only."""
    import errno

    from PIL import Image

    Image.new("RGB", (20, 16), (40, 90, 200)).save(tmp_path / "p.png")

    def full(path, features):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(feature_cache, "save_features", full)
    said: list[str] = []
    feature_cache.fill_features({}, {"train": [tmp_path / "p.png"]}, lambda b: b.flatten(2).transpose(1, 2),
                                lambda img: torch.zeros(3, 4, 4), progress=said.append, cache_dir=tmp_path / "cache",
                                fingerprint="f")  # fmt: skip
    assert "cannot write the feature cache" in capsys.readouterr().err
    assert said[-1] == "encoded image features (kept in memory only): 1 images in under a minute"


def test_a_torn_or_foreign_cache_file_is_not_trusted(tmp_path):
    path = tmp_path / "train-x.pt"
    path.write_bytes(b"not a tensor")
    assert feature_cache.load_features(path, 4) is None
    feature_cache.save_features(path, torch.zeros(3, 2, 5))
    assert feature_cache.load_features(path, 4) is None  # wrong number of images
    assert feature_cache.load_features(path, 3).shape == (3, 2, 5)


def test_the_key_follows_the_photos_bytes_not_their_folder_or_time(tmp_path):
    from PIL import Image

    first, second = tmp_path / "a", tmp_path / "copy"
    first.mkdir()
    for i, colour in enumerate(("red", "blue")):
        Image.new("RGB", (8, 8), colour).save(first / f"p{i}.bmp")
    shutil.copytree(first, second)  # another folder, new modification times
    os.utime(second / "p0.bmp", (1, 1))
    key = feature_cache.split_key("enc", sorted(first.iterdir()))
    assert feature_cache.split_key("enc", sorted(second.iterdir())) == key  # the same photos: the same features
    assert feature_cache.split_key("other-encoder", sorted(first.iterdir())) != key
    assert feature_cache.split_key("enc", sorted(first.iterdir())[::-1]) != key  # the order is the tensor's
    Image.new("RGB", (8, 8), "green").save(second / "p0.bmp")  # edited in place: same name and size (BMP: uncompressed)
    assert (second / "p0.bmp").stat().st_size == (first / "p0.bmp").stat().st_size
    assert feature_cache.split_key("enc", sorted(second.iterdir())) != key
    (second / "p1.bmp").unlink()
    assert feature_cache.split_key("enc", [second / "p0.bmp", second / "p1.bmp"]) != key  # a missing photo


@pytest.mark.long
def test_frozen_maps_are_keyed_by_the_frozen_stages_alone():
    """A resumed fine-tuning run reads the maps its first start stored: the trainable stage's weights (which changed)
    are not in the key; a frozen stage's weights, the settings and a frozen encoder's every weight are."""
    from captioning.model.encoder import ImageEncoder

    def enc(**kw):
        torch.manual_seed(0)
        return ImageEncoder("resnet18", weights=None, grid=2, image_size=32, **kw)

    base = feature_cache.cache_fingerprint(enc(fine_tune="last"))
    trained = enc(fine_tune="last")
    with torch.no_grad():
        trained.body.layer4[0].conv1.weight.add_(1.0)  # the trainable stage moved
    assert feature_cache.cache_fingerprint(trained) == base
    assert feature_cache.cache_fingerprint(enc(fine_tune="last", frozen_bn=False)) == base  # maps are the same
    other = enc(fine_tune="last")
    with torch.no_grad():
        other.body.layer3[0].conv1.weight.add_(1.0)  # a frozen stage moved: other maps
    assert feature_cache.cache_fingerprint(other) != base
    assert feature_cache.cache_fingerprint(enc(fine_tune="last2")) != base  # fewer stages stored: another map
    frozen = enc()
    key = feature_cache.cache_fingerprint(frozen)
    with torch.no_grad():
        frozen.body.layer4[0].conv1.weight.add_(1.0)
    assert feature_cache.cache_fingerprint(frozen) != key  # frozen: the features depend on every weight


@pytest.mark.long
def test_fine_tuning_trains_the_last_stage_from_stored_maps_once_per_photo(encodings, monkeypatch):
    """fine_tune last + photo_batches: the maps are stored once (a second fit reads them), every step runs the last
    stage once per photo of the batch, and its weights train while the frozen stages' stay as they were."""
    from captioning.model.encoder import ImageEncoder

    passes: list[int] = []
    first: dict[str, torch.Tensor] = {}
    real = ImageEncoder.from_frozen_map

    def counting(self, fmap):
        if not first:
            first.update({k: v.clone() for k, v in self.state_dict().items()})
        if self.training:  # a training step's (export runs the maps through it too, for the domain check)
            passes.append(fmap.size(0))
        return real(self, fmap)

    monkeypatch.setattr(ImageEncoder, "from_frozen_map", counting)
    args = ["fit", "--config", CONFIG, "--trainer.default_root_dir", "run", "--model.encoder.fine_tune", "last",
            "--data.photo_batches", "true", "--trainer.max_steps", "6", "--trainer.limit_val_batches", "0"]  # fmt: skip
    cli = caption_train_cli(args)
    assert encodings == [["train", "val"]]
    assert cli.datamodule.features["train"].shape[:2] == (32, 256)  # resnet18's layer3 maps, one per scene
    assert len(passes) == 6 and max(passes) <= cli.datamodule.photos_per_batch < 16  # photos, not 16 captions
    now = cli.model.model.encoder.state_dict()
    moved = {k.split(".")[1] for k in now if not torch.equal(now[k], first[k])}
    assert moved == {"layer4"}
    caption_train_cli([*args, "--trainer.max_steps", "1"])  # a step is enough to read the maps
    assert encodings[-1] == []  # the second fit read the stored maps


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1024 vs 960"), OSError(28, "No space")],
)
def test_a_full_disk_keeps_the_features_in_memory_and_leaves_no_file(monkeypatch, capsys, tmp_path, failure):
    def torn_save(obj, path):  # as torch's writer fails on a full disk: part of the file written, then the error
        Path(path).write_bytes(b"PK\x03\x04 half")
        raise failure

    monkeypatch.setattr(feature_cache.torch, "save", torn_save)
    dm = CaptionDataModule(source="shapes", train_size=4, val_size=4, test_size=4, scene_size=64, max_objects=1)
    dm.setup("fit")
    features: dict[str, torch.Tensor] = {}
    images = {s: dm.splits[s].images for s in ("train", "val")}
    done = feature_cache.fill_features(features, images, lambda x: x.mean(dim=(2, 3))[:, None], dm.preprocess,
                                       progress=False, cache_dir=tmp_path / "cache", fingerprint="f")  # fmt: skip
    assert done == ["train", "val"] and features["train"].shape == (4, 1, 3) and features["val"].shape == (4, 1, 3)
    assert list((tmp_path / "cache").iterdir()) == []  # no torn file to be read later
    err = capsys.readouterr().err
    assert err.count("cannot write the feature cache") == 1  # one note, the second split not tried
    assert "no space left on device; training on the features in memory" in err


def test_the_folders_a_caption_fit_makes_of_its_own_are_its_feature_cache():
    """What a refused run removes where it made it and left it empty (text_attn.core.unused_runs.run_folders): the
    feature cache, "auto" under the run's root folder, as the callback makes it (captioning.training.feature_cache)."""
    from captioning.training.data import CaptionDataModule
    from captioning.training.feature_cache import cache_folder

    assert CaptionDataModule().folders_made("runs/a") == [str(Path("runs/a", "feature_cache"))]
    assert CaptionDataModule(feature_cache_dir="/tmp/cache").folders_made("runs/a") == ["/tmp/cache"]
    assert CaptionDataModule(feature_cache_dir=None).folders_made("runs/a") == []
    assert cache_folder("auto", None) is None and cache_folder("", "runs/a") == ""
