"""A training photo that cannot be read (a truncated JPEG, an empty file) is left out with one counted line, cached or
decoded batch by batch; data.strict refuses it. It ended fit when the encoder reached it, after the model was built and
hundreds of photos encoded, with nothing cached."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch
from helpers.scene_corpus import write_folder

from captioning.photos.preprocess import ImageReadError, Preprocess, load_photo
from captioning.training.data import CaptionDataModule
from captioning.training.feature_cache import UNREADABLE_BATCH
from captioning.training.module import CaptionModule
from captioning.training.readers import CaptionDataError

PRE = Preprocess(image_size=32, crop=False)


def _encoder(calls: list[int]):
    """(B, 3, H, W) -> (B, 4, 3): per-quadrant channel means; records how many photos it saw."""

    def encode(images: torch.Tensor) -> torch.Tensor:
        calls.append(images.size(0))
        b, c, h, w = images.shape
        return images.reshape(b, c, 2, h // 2, 2, w // 2).mean(dim=(3, 5)).flatten(2).transpose(1, 2)

    return encode


def _module(folder: Path, tsv: Path, **kw) -> CaptionDataModule:
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), val_size=2, test_size=2,
                           batch_size=8, **kw)  # fmt: skip
    dm.setup("fit")
    dm.set_preprocess(PRE)
    return dm


def _damage(photos: list[Path]) -> list[Path]:
    """The first photo emptied (0 bytes), the others cut in half: what a failed copy leaves."""
    photos[0].write_bytes(b"")
    for photo in photos[1:]:
        photo.write_bytes(photo.read_bytes()[: photo.stat().st_size // 2])
    return photos


@pytest.fixture
def corpus(tmp_path) -> tuple[Path, Path]:
    return write_folder(tmp_path / "data", 20)  # 16 train photos, 2 val, 2 test; 3 captions each


def test_cached_features_leave_an_unreadable_photo_out_and_remember_it(corpus, tmp_path, capsys):
    dm = _module(*corpus, cache_features=True)
    train = list(dm.splits["train"].images)
    references = list(dm.splits["train"].references)
    bad = _damage([train[3], train[9]])
    cache = {"cache_dir": tmp_path / "cache", "fingerprint": "f", "progress": False}
    calls: list[int] = []
    assert dm.fill_feature_cache(_encoder(calls), PRE, ["train", "val"], **cache) == ["train", "val"]
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (f"caption data: skipped 2 of 16 train photos that cannot be read (first: {bad[0]}: an empty file "
                    "(0 bytes), not a photo): 14 train photos are trained or scored on, as the model file records; "
                    "data.strict refuses them")  # fmt: skip
    kept = [k for k in range(16) if k not in (3, 9)]
    assert dm.splits["train"].images == [train[k] for k in kept]
    assert dm.splits["train"].references == [references[k] for k in kept]
    assert dm.features["train"].shape == (14, 4, 3) and not dm.features["train"].isnan().any()
    seen = torch.cat([b["image_index"] for b in dm.train_dataloader()])
    assert torch.bincount(seen).tolist() == [3] * 14  # every kept photo's 3 captions, once an epoch
    assert sum(calls) == 14 + 2  # the readable photos encoded, once each

    # the next run reads the cache (the same bytes: the same key) and leaves the same photos out, said again
    again, calls = _module(*corpus, cache_features=True), []
    assert again.fill_feature_cache(_encoder(calls), PRE, ["train", "val"], **cache) == [] and calls == []
    assert capsys.readouterr().err.strip() == line.replace(f"{bad[0]}: an empty file (0 bytes), not a photo",
                                                           str(bad[0]))  # fmt: skip
    assert again.splits["train"].images == dm.splits["train"].images
    torch.testing.assert_close(again.features["train"], dm.features["train"])

    # data.strict refuses it, read from the cache or as it is encoded
    strict = _module(*corpus, cache_features=True, strict=True)
    with pytest.raises(CaptionDataError, match=f"^{bad[0]}: could not be read when .*data.strict"):
        strict.fill_feature_cache(_encoder([]), PRE, ["train"], **cache)
    fresh = {**cache, "cache_dir": tmp_path / "fresh"}
    with pytest.raises(CaptionDataError, match=rf"^{bad[0]}: an empty file \(0 bytes\), not a photo \(data.strict"):
        _module(*corpus, cache_features=True, strict=True).fill_feature_cache(_encoder([]), PRE, ["train"], **fresh)
    with pytest.raises(ImageReadError, match="an empty file"):
        load_photo(bad[0])


def test_strict_keeps_the_splits_encoded_before_the_photo_it_refuses(corpus, tmp_path):
    dm = _module(*corpus, cache_features=True, strict=True)
    _damage([dm.splits["val"].images[1]])
    with pytest.raises(CaptionDataError, match="an empty file"):
        dm.fill_feature_cache(_encoder([]), PRE, ["train", "val"], cache_dir=tmp_path / "cache", fingerprint="f")
    assert [p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()] == ["train"]  # the next run reads it


def test_batches_that_decode_their_photos_leave_an_unreadable_one_out(corpus, capsys):
    dm = _module(*corpus)
    train, val = dm.splits["train"].images, dm.splits["val"].images
    _damage([train[5], val[0]])
    seen = torch.cat([b["image_index"] for b in dm.train_dataloader()])
    assert 5 not in seen.tolist() and len(seen) == 15 * 3  # the other photos' captions, every one
    (batch,) = list(dm.val_dataloader())
    assert batch["image_index"].tolist() == [1] and batch["images"].shape == (1, 3, 32, 32)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"caption data: a train photo cannot be read and is left out of its batches: {train[5]}: an empty file "
        "(0 bytes), not a photo",
        f"caption data: a val photo cannot be read and is left out of its batches: {val[0]}: cannot read image "
        "(Truncated File Read)",
    ]  # said once, though its three captions are in three batches
    with pytest.raises(CaptionDataError, match="data.strict"):
        next(iter(_module(*corpus, strict=True).val_dataloader()))


def test_a_batch_of_only_unreadable_photos_is_skipped_and_the_rest_scored(tmp_path, capsys, one_thread):
    """Photos decoded as batches are drawn (no feature cache), data.strict off: a batch whose only photo cannot be read
    ended the run ("none of the 1 photos of a val batch can be read"). Now every step skips it: the training step
    changes no weight, and validation scores each other val photo once."""
    folder, tsv = write_folder(tmp_path / "data", 9)  # 4 train photos, 3 val, 2 test
    # a training batch is one photo with its 3 captions (photo_batches, about 2 captions); val's 3 photos in batches
    # of 2 and 1: the photos emptied below are a train batch and a val batch of their own
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), val_size=3, test_size=2,
                           batch_size=2, photo_batches=True)  # fmt: skip
    dm.setup("fit")
    bad = _damage([dm.splits["train"].images[2]]) + _damage([dm.splits["val"].images[2]])
    skipped, scored = [], []

    class Watch(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.before = [p.detach().clone() for p in pl_module.model.decoder.parameters()]

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if UNREADABLE_BATCH in batch:
                after = list(pl_module.model.decoder.parameters())
                skipped.append(all(torch.equal(a, b) for a, b in zip(self.before, after, strict=True)))

        def on_validation_epoch_end(self, trainer, pl_module):  # before the module's, which clears its outputs
            scored.append(sorted(o["index"] for o in pl_module._outputs))

    module = CaptionModule(encoder={"backbone": "resnet18", "weights": None, "grid": 2, "stride": 32, "image_size": 32,
                                    "crop": False}, decoder={"embed_dim": 8, "hidden_dim": 16, "attn_dim": 8},
                           val_meteor=False, val_max_len=4, export_path=str(tmp_path / "model.pt"))  # fmt: skip
    trainer = pl.Trainer(max_epochs=1, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Watch()])  # fmt: skip
    trainer.fit(module, dm)
    assert skipped == [True]  # the one batch of the emptied train photo: no step taken
    assert scored == [[0, 1]]  # the other val photos, each once
    assert "val_CIDEr" in trainer.callback_metrics
    err = capsys.readouterr().err
    assert [line.split(": ")[-2] for line in err.splitlines() if "cannot be read" in line] == list(map(str, bad))

    # under DDP Lightning refuses a skipped step (every rank joins the all-reduce): a zero loss, zero gradients
    module.trainer = SimpleNamespace(world_size=2)
    loss = module.training_step({UNREADABLE_BATCH: 2}, 0)
    loss.backward()
    assert float(loss.detach()) == 0.0
    trained = [p for p in module.parameters() if p.requires_grad]
    assert trained and all(p.grad is not None and not p.grad.any() for p in trained)


def test_loader_workers_name_an_unreadable_photo_once_a_run_and_decode_it_once(corpus, capfd):
    """With data.num_workers, each worker of each epoch said the line again (2 workers, 3 epochs: 6 lines) and decoded
    the photo again. The photos found unreadable are flags in shared memory: one line a run, and the photo is not
    read again (here, mended after the first epoch, it stays out for the run)."""
    dm = _module(*corpus, num_workers=2, photo_batches=True)  # a photo's captions in one batch: one worker meets it
    (bad,) = _damage([dm.splits["train"].images[5]])
    good = dm.splits["train"].images[6].read_bytes()
    captions = []
    for _ in range(3):
        captions.append(sum(len(b["image_index"]) for b in dm.train_dataloader()))
        bad.write_bytes(good)  # mended after the first epoch
    assert captions == [15 * 3] * 3
    err = capfd.readouterr().err
    assert err.count("cannot be read") == 1, err


@pytest.mark.long
def test_a_val_split_left_one_photo_by_the_feature_cache_gets_the_one_photo_note(tmp_path, capsys, one_thread):
    """Two val photos, one that cannot be read: the cache leaves it out as fit starts, after setup's check saw two, and
    val CIDEr-D over the one left was 0 at every epoch with nothing said (fit's end: "training did not beat the
    start"). The note comes once training starts."""
    from pytorch_lightning.callbacks import ModelCheckpoint

    folder, tsv = write_folder(tmp_path / "data", 20)
    dm = CaptionDataModule(source="folder", image_dir=str(folder), captions_tsv=str(tsv), val_size=2, test_size=2,
                           batch_size=8, cache_features=True)  # fmt: skip
    dm.setup("fit")
    _damage([dm.splits["val"].images[0]])
    module = CaptionModule(encoder={"backbone": "resnet18", "weights": None, "grid": 2, "stride": 32, "image_size": 32,
                                    "crop": False}, decoder={"embed_dim": 8, "hidden_dim": 16, "attn_dim": 8},
                           val_meteor=False, val_max_len=4, export_path=str(tmp_path / "model.pt"))  # fmt: skip
    best = ModelCheckpoint(dirpath=str(tmp_path / "ck"), monitor="val_CIDEr", mode="max")
    trainer = pl.Trainer(
        max_steps=1,
        num_sanity_val_steps=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path / "run"),
        callbacks=[best],
    )
    trainer.fit(module, dm)
    assert len(dm.splits["val"].images) == 1
    notes = [line for line in capsys.readouterr().err.splitlines() if "val photo is 0 whatever" in line]
    assert notes == ["caption-train: val_CIDEr over 1 val photo is 0 whatever the captions (CIDEr weighs words by how "
                     "few photos' references hold them): it cannot rank checkpoints; give data.val_size 2 or more (the "
                     "val photos that cannot be read were left out)"]  # fmt: skip


def test_an_empty_photo_path_is_said_so():
    """It was ": no such file", naming nothing."""
    from captioning.photos.preprocess import load_image

    with pytest.raises(ImageReadError, match="^an empty file name: no such file$"):
        load_image("")
