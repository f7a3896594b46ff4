"""Training from LitData chunks (issue 59): ``optimize`` writes every layout both trainers read as chunks that give
back every sample (equal ids, bytes and captions, in the folder reader's order: with no shuffle the streaming reader
yields the folder reader's samples); ``fit --data.root DIR`` streams them and a run resumed from a mid-epoch
last.ckpt ends with the uninterrupted run's weights; frozen-encoder features stored in the chunks are the encoder's.
Slow: every optimize starts LitData's worker processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers.multi30k import write_corpus, write_unshared_pieces
from helpers.resumable import resumable_config
from helpers.scene_corpus import write_flickr8k, write_folder, write_karpathy

from captioning.commands.train import caption_train_cli
from captioning.commands.train import train_main as caption_main
from captioning.training.data import CaptionDataModule
from text_attn.core.streaming import read_all, shuffled_for_writing, split_dataset
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.train_cli import text_train_cli
from text_attn.translation.train_cli import train_main as text_main

pytestmark = pytest.mark.slow
FIX = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs in its own folder (tests/conftest.py)."""


def write_config(path: Path, base: Path, data: dict, model: dict | None = None) -> str:
    cfg = yaml.safe_load(base.read_text())
    cfg["data"] = data
    if model:
        cfg["model"]["encoder"].update(model)
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


# --- text ------------------------------------------------------------------------------------------------------------
def text_layout(layout: str, tmp: Path) -> dict:
    if layout == "pair":
        root = write_corpus(tmp / "m30k", {"train": 24, "val": 4, "test_2016_flickr": 4})
        return {"task": "pair", "root": str(root), "src_lang": "de", "tgt_lang": "en", "batch_size": 8}
    if layout == "tsv":
        return {"task": "tsv", "path": str(FIX / "text/pairs.tsv"), "val_size": 1, "test_size": 1, "batch_size": 2}
    if layout == "subword":
        root = write_corpus(tmp / "m30k", {"train": 24, "val": 4, "test_2016_flickr": 4})
        return {"task": "pair", "root": str(root), "src_lang": "de", "tgt_lang": "en", "tokenizer": "subword",
                "subword_vocab": 300, "batch_size": 8}  # fmt: skip
    return {"task": "reorder", "train_size": 40, "val_size": 8, "test_size": 8, "batch_size": 8, "max_len": 10}


@pytest.mark.parametrize("layout", ["pair", "tsv", "subword", "reorder"])
def test_text_chunks_give_back_every_pair_of_every_split(layout, tmp_path):
    data = text_layout(layout, tmp_path)
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "text/tiny_reorder.yaml", data)
    text_main(["optimize", "--config", cfg, "--out", "chunks"])
    folder = TranslationDataModule(**data)
    folder.setup()
    streamed = TranslationDataModule(**{**data, "root": "chunks"})
    streamed.setup()
    assert streamed.streams and not folder.streams
    assert streamed.src_vocab == folder.src_vocab and streamed.tgt_vocab == folder.tgt_vocab
    assert streamed.codec.metadata().keys() == folder.codec.metadata().keys()
    assert streamed.source_check == folder.source_check
    text = ["Ein Hund läuft.", "Zwei Kinder spielen im Park."]
    assert [streamed.codec.encode(t) for t in text] == [folder.codec.encode(t) for t in text]
    for split in ("val", "test"):  # read by index: the same examples and ids
        a, b = folder.splits[split], streamed.splits[split]
        assert b.examples == a.examples and [e.tgt_text for e in b.examples] == [e.tgt_text for e in a.examples]
        assert [t.tolist() for t in b.src] == [t.tolist() for t in a.src]
        assert [t.tolist() for t in b.tgt] == [t.tolist() for t in a.tgt]
    # the train split, streamed without shuffling: each of the folder reader's pairs once, equal, in the order
    # optimize wrote them (a permutation seeded by data.seed: each chunk a random sample of the split)
    train = folder.splits["train"]
    items = list(split_dataset("chunks", "train"))
    order = [int(it["index"]) for it in items]
    assert order == shuffled_for_writing(range(len(train)), folder.hparams.seed) and order != sorted(order)
    for it in items:
        pair = json.loads(it["pair"])
        assert (pair["src_ids"], pair["tgt_ids"]) == (train.src[int(it["index"])].tolist(),
                                                      train.tgt[int(it["index"])].tolist())  # fmt: skip
    batch = next(iter(streamed.train_dataloader()))
    assert batch["src"].dim() == 2 and batch["src"].size(0) == data["batch_size"]
    for row, i in enumerate(batch["index"].tolist()):  # a streamed batch holds those pairs' ids, padded
        n = int(batch["src_lens"][row])
        assert batch["src"][row, :n].tolist() == train.src[i].tolist()
        assert batch["tgt"][row, : len(train.tgt[i])].tolist() == train.tgt[i].tolist()


def test_chunks_of_before_read_val_and_test_as_translate_does(tmp_path, monkeypatch):
    """A folder optimize wrote before 2026-12-02 holds val and test read with the joint subword model ("gh", a piece
    only the English side knew, <unk> in a German source): fit reads them again from their text, each side from its
    own vocabulary's pieces, as the folder reader and translate read them."""
    import text_attn.translation.data as data_module

    data = {"task": "pair", "root": str(write_unshared_pieces(tmp_path / "c")), "src_lang": "de", "tgt_lang": "en",
            "tokenizer": "subword", "subword_vocab": 300, "batch_size": 8}  # fmt: skip
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "text/tiny_reorder.yaml", data)
    with monkeypatch.context() as m:  # optimize as it was: val and test as the joint model splits them
        m.setattr(data_module, "read_by_sides", lambda examples, *_: examples, raising=False)
        text_main(["optimize", "--config", cfg, "--out", "chunks"])
    stored = [json.loads(item["pair"]) for item in split_dataset("chunks", "val")]
    assert any("gh" in r["src"] and 3 in r["src_ids"] for r in stored)  # <unk> (id 3) in the folder
    folder = TranslationDataModule(**data)
    folder.setup()
    streamed = TranslationDataModule(**{**data, "root": "chunks"})
    streamed.setup()
    for split in ("val", "test"):
        a, b = folder.splits[split], streamed.splits[split]
        assert [e.src for e in b.examples] == [e.src for e in a.examples] and a.examples[0].src[-3:] == ["g", "h", "."]
        assert [e.tgt for e in b.examples] == [e.tgt for e in a.examples]
        assert [t.tolist() for t in b.src] == [t.tolist() for t in a.src]
        assert [t.tolist() for t in b.tgt] == [t.tolist() for t in a.tgt]


def test_optimize_keeps_finished_splits_and_refuses_other_options(tmp_path, capsys):
    data = text_layout("reorder", tmp_path)
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "text/tiny_reorder.yaml", data)
    text_main(["optimize", "--config", cfg, "--out", "chunks"])
    first = {p.name: p.stat().st_mtime_ns for p in Path("chunks").rglob("*.bin")}
    capsys.readouterr()
    # a second run finds every split written, also with options that do not shape the samples
    text_main(["optimize", "--config", cfg, "--out", "chunks", "--data.batch_size", "3"])
    said = capsys.readouterr()  # the progress lines on stderr; stdout holds the one result line
    assert "written earlier: kept" in said.err and said.out.count("\n") == 1
    assert {p.name: p.stat().st_mtime_ns for p in Path("chunks").rglob("*.bin")} == first
    with pytest.raises(SystemExit) as exc:
        text_main(["optimize", "--config", cfg, "--out", "chunks", "--data.min_freq", "2"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "other data options" in err
    # a fit with other vocabulary options than the chunks were made with: one line
    with pytest.raises(SystemExit) as exc:
        text_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--data.min_freq", "2"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "data.min_freq=2" in err and "Traceback" not in err


def weights_of(root: str) -> dict:
    return torch.load(next(Path(root).rglob("last.ckpt")), weights_only=True)


def resume_case(family: str, tmp_path: Path) -> tuple[str, int, int]:
    """(config, steps of the interrupted run, steps of the whole run) for a streaming fit of a few epochs."""
    if family == "text":
        cfg = Path(resumable_config(tmp_path, "text", every=1))
        data = {**yaml.safe_load(cfg.read_text())["data"], "train_size": 100}  # 7 batches an epoch, the last short
        raw = write_config(tmp_path / "raw.yaml", cfg, data)
        text_main(["optimize", "--config", raw, "--out", "chunks"])
    else:
        images, tsv = write_folder(tmp_path / "photos", 40)  # 24 train images x 3 captions: 5 batches of 16
        cfg = Path(resumable_config(tmp_path, "caption", every=1))
        data = {"source": "folder", "image_dir": str(images), "captions_tsv": str(tsv), "val_size": 8, "test_size": 8,
                "batch_size": 16, "cache_features": True}  # fmt: skip
        raw = write_config(tmp_path / "raw.yaml", cfg, data)
        caption_main(["optimize", "--config", raw, "--out", "chunks"])
    return raw, 9, 14


@pytest.mark.parametrize(("family", "at"), [("text", "mid"), ("caption", "mid"), ("text", "end"), ("caption", "end")])
def test_a_streaming_fit_resumed_mid_epoch_ends_with_the_uninterrupted_weights(family, at, tmp_path):
    """Mid-epoch, and at an epoch's last step (its validation due first: the resumed run drew one number more before
    its first batch than the run that saved, whose chunk loader seeds itself, and the weights differed)."""
    cfg, cut, steps = resume_case(family, tmp_path)
    run = text_train_cli if family == "text" else caption_train_cli
    common = ["fit", "--config", cfg, "--data.root", "chunks"]
    full = run([*common, "--trainer.max_steps", str(steps), "--trainer.default_root_dir", "a"])
    if at == "end":
        cut = full.trainer.num_training_batches  # the first epoch's last step
    assert (0 < cut % full.trainer.num_training_batches) == (at == "mid")
    assert full.trainer.global_step == steps
    run([*common, "--trainer.max_steps", str(cut), "--trainer.default_root_dir", "b"])
    last = next(Path("b").rglob("last.ckpt"))
    resumed = run([*common, "--trainer.max_steps", str(steps), "--trainer.default_root_dir", "c", "--ckpt_path",
                   str(last)])  # fmt: skip
    assert resumed.trainer.global_step == steps
    a, b, c = weights_of("a"), torch.load(last, weights_only=True), weights_of("c")
    assert a["global_step"] == c["global_step"] == steps and b["global_step"] == cut
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(c["state_dict"][k], v, msg=k)
    assert any(not torch.allclose(b["state_dict"][k], v) for k, v in a["state_dict"].items())  # it has teeth


def test_a_resume_mid_epoch_from_chunks_written_again_in_other_chunks_is_refused(tmp_path, capsys):
    """The same samples written again in other chunks (optimize --num_workers 2, another --chunk_bytes) are shuffled
    otherwise: a resume mid-epoch trained 45-62 of 320 samples twice and as many never, exit 0. Refused in one line;
    the same folder resumes as before."""
    import shutil

    cfg, cut, steps = resume_case("text", tmp_path)
    common = ["fit", "--config", cfg, "--data.root", "chunks", "--trainer.default_root_dir", "b"]
    text_train_cli([*common, "--trainer.max_steps", str(cut)])
    text_main(["optimize", "--config", cfg, "--out", "small", "--chunk_bytes", "2KB"])
    shutil.move("chunks", "before")
    shutil.move("small", "chunks")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        text_train_cli([*common, "--trainer.max_steps", str(steps), "--ckpt_path", "last"])
    (err,) = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # one, after "last: ..."
    assert exc.value.code == 2 and "Traceback" not in err, err
    assert "error: data.root chunks: its train chunks were written again since the checkpoint" in err, err
    assert f"it stopped {cut % 7} batches into epoch {cut // 7}" in err and "--model.init_from" in err, err
    shutil.rmtree("chunks")
    shutil.move("before", "chunks")
    resumed = text_train_cli([*common, "--trainer.max_steps", str(steps), "--ckpt_path", "last"])
    assert resumed.trainer.global_step == steps


def test_a_streaming_fit_with_overfit_batches_trains_the_same_batches_every_epoch(tmp_path):
    # LitData shuffled the stream by itself: Lightning's "turning off the train dataloader shuffling" did not reach it
    cfg = str(FIX / "text/tiny_reorder.yaml")
    text_main(["optimize", "--config", cfg, "--out", "chunks"])
    probe = ["--trainer.callbacks+=helpers.ddp_probe.Probe", f"--trainer.callbacks.out={tmp_path / 'probe'}"]
    cli = text_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.overfit_batches", "2",
                          "--trainer.max_epochs", "3", "--trainer.max_steps", "-1", *probe])  # fmt: skip
    (seen,) = [c.seen for c in cli.trainer.callbacks if type(c).__name__ == "Probe"]
    assert len(seen) == 6 and seen[2:4] == seen[4:] == seen[:2] and seen[0] != seen[1]


# --- captions --------------------------------------------------------------------------------------------------------
def caption_layout(layout: str, tmp: Path) -> dict:
    if layout == "folder":
        images, tsv = write_folder(tmp / "photos", 20)
        return {"source": "folder", "image_dir": str(images), "captions_tsv": str(tsv), "val_size": 4, "test_size": 4}
    if layout == "karpathy":
        return {"source": "karpathy", "karpathy_json": str(write_karpathy(tmp / "k", 15)), "image_root": str(tmp / "k")}
    return {"source": "flickr8k", "root": str(write_flickr8k(tmp / "f8k", 15))}


@pytest.mark.parametrize("layout", ["folder", "karpathy", "flickr8k"])
def test_caption_chunks_give_back_every_photo_and_caption(layout, tmp_path):
    data = {**caption_layout(layout, tmp_path), "batch_size": 4, "captions_per_image": 2}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data)
    caption_main(["optimize", "--config", cfg, "--out", "chunks"])
    folder = CaptionDataModule(**data)
    folder.setup()
    # the chunk folder as root, without the layout's own paths (a source refuses a path it does not read)
    kept = {k: v for k, v in data.items() if k not in ("image_dir", "captions_tsv", "karpathy_json", "image_root")}
    streamed = CaptionDataModule(**{**kept, "root": "chunks", "source": "shapes" if layout == "folder" else "flickr8k"})
    streamed.setup()  # the folder is recognised whatever the source says
    assert streamed.vocab == folder.vocab and streamed.domain == folder.domain
    assert streamed.train_references == folder.train_references
    for split in ("val", "test"):
        a, b = folder.splits[split], streamed.splits[split]
        assert b.references == a.references
        assert [b.images[i] for i in range(len(b.images))] == [Path(p).read_bytes() for p in a.images]
    # the train split without shuffling: each of the folder reader's (image, caption) pairs once, with equal bytes, in
    # the order optimize wrote them (a permutation seeded by data.seed)
    train = folder.splits["train"]
    items = read_all("chunks", "train")
    assert len(items) == len(folder._train_pairs) == 2 * len(train.images)
    order = [int(it["index"]) for it in items]
    assert order == shuffled_for_writing(range(len(items)), folder.hparams.seed)
    for p, it in zip(order, items, strict=True):
        i, ids = folder._train_pairs[p]
        assert (int(it["index"]), int(it["image"])) == (p, i)
        assert bytes(it["jpeg"]) == Path(train.images[i]).read_bytes()
        assert folder.vocab.encode(json.loads(it["caption"])["tokens"], eos=False) == ids
    # a streamed batch is the folder reader's batch of those pairs (same pixels, captions, references)
    streamed.set_preprocess(folder.preprocess)
    batch = next(iter(streamed.train_dataloader()))
    again = folder._collate_train(batch["pair_index"].tolist())
    for key in ("images", "captions_in", "targets", "image_index"):
        torch.testing.assert_close(batch[key], again[key], msg=key)
    assert batch["references"] == again["references"]


def test_chunks_written_with_photos_mixed_in_stream_them_and_say_so(tmp_path):
    """optimize with data.mix_*: the photos mixed in are in the train chunks, and the facts the model files record
    of them are kept in the chunk folder (fit from it reads no data.mix_* option)."""
    from PIL import Image

    images, tsv = write_folder(tmp_path / "photos", 20)
    old = tmp_path / "old"
    old.mkdir()
    for k in range(3):
        Image.new("RGB", (32, 32), (0, 60 * k, 0)).save(old / f"o{k}.png")
    (tmp_path / "old.tsv").write_text("".join(f"o{k}.png\tan old photo {k}\n" for k in range(3)))
    data = {"source": "folder", "image_dir": str(images), "captions_tsv": str(tsv), "val_size": 4, "test_size": 4,
            "batch_size": 4, "mix_image_dir": str(old), "mix_captions_tsv": str(tmp_path / "old.tsv")}  # fmt: skip
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data)
    caption_main(["optimize", "--config", cfg, "--out", "chunks"])
    folder = CaptionDataModule(**data)
    folder.setup()
    paths = ("image_dir", "captions_tsv", "mix_image_dir", "mix_captions_tsv")  # fit from chunks reads none of them
    kept = {k: v for k, v in data.items() if k not in paths}
    streamed = CaptionDataModule(**{**kept, "root": "chunks", "source": "shapes"})
    streamed.setup()
    assert folder.mixed == 3 and streamed.train_references == folder.train_references
    assert ["an", "old", "photo", "2"] in [c for caps in streamed.train_references for c in caps]
    assert streamed.facts == folder.facts == {"mixed_in": "all 3 of the photos of old"}
    # the folder's own images, shape scenes, break the pixel rules for photographs: judged on them when written
    assert folder.photo_rules is False and streamed.chunk_state["photo_rules"] is False
    assert streamed.photo_rules is False


def test_a_fit_from_photo_chunks_whose_encoder_reads_them_whole_gets_a_feature_check(tmp_path, capsys):
    """Photo chunks stream train (no list of files): a fit whose encoder read the photos whole (no feature cache, or
    fine_tune all) wrote a model file with the pixel rules alone, and caption never said a photo was unlike the
    training ones. Its train samples are read by index from the chunks, as val's are, and encoded at export."""
    import random

    from PIL import Image

    from captioning.model.bundled import DEMO_PHOTOS
    from captioning.model.captioner import Captioner

    images, tsv = write_folder(tmp_path / "photos", 56)
    pick = random.Random(0)
    for k, path in enumerate(sorted(images.iterdir())):  # photographs (crops of the demo photos), not scenes
        photo = Image.open(DEMO_PHOTOS[k % len(DEMO_PHOTOS)]).convert("RGB")
        side = pick.randint(min(photo.size) // 3, min(photo.size))
        x, y = pick.randint(0, photo.width - side), pick.randint(0, photo.height - side)
        photo.crop((x, y, x + side, y + side)).resize((64, 64)).save(path, quality=90)
    data = {"source": "folder", "image_dir": str(images), "captions_tsv": str(tsv), "val_size": 24, "test_size": 4,
            "batch_size": 8, "cache_features": False, "captions_per_image": 2}  # fmt: skip
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data)
    caption_main(["optimize", "--config", cfg, "--out", "chunks"])
    capsys.readouterr()
    caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", "1",
                       "--trainer.limit_val_batches", "0", "--model.export_path", "model.pt"])  # fmt: skip
    check = Captioner.load("model.pt").domain_check
    assert "prototypes" in check and check["photos"]  # the feature check beside the pixel rules
    assert torch.load("chunks/data_state.pt", weights_only=False)["photo_rules"] is True
    said = [line for line in capsys.readouterr().err.splitlines() if "domain check" in line or "holds no check" in line]
    # 28 train photos stored twice each (56 samples) and 24 val photos
    assert len(said) == 1 and said[0].startswith("caption-train: the domain check (caption's note on photos unlike the "
                                                 "training ones): 80 train and val photos encoded in ")  # fmt: skip


def test_boxed_chunks_give_the_folder_readers_attention_targets(tmp_path, capsys):
    from captioning.photos.preprocess import Preprocess

    path = write_karpathy(tmp_path / "k", 15)
    corpus = json.loads(path.read_text())
    for image in corpus["images"]:  # 64 x 64 scenes: word 1 of a sentence boxed, left half or bottom right quarter
        for s, sentence in enumerate(image["sentences"]):
            sentence["boxes"] = [[1, 0, 0, 32, 64]] if s % 2 == 0 else [[1, 32, 32, 64, 64], [2, 0, 0, 64, 64]]
    path.write_text(json.dumps(corpus))
    data = {"source": "karpathy", "karpathy_json": str(path), "image_root": str(tmp_path / "k"), "batch_size": 16,
            "captions_per_image": 3, "attention_targets": True}  # fmt: skip
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data)
    caption_main(["optimize", "--config", cfg, "--out", "chunks"])
    folder, streamed = CaptionDataModule(**data), CaptionDataModule(**{**data, "root": "chunks"})
    for dm in (folder, streamed):
        dm.setup()
        dm.set_preprocess(Preprocess(image_size=32, crop=False))
        dm.set_grid(2)
    batch = next(iter(streamed.train_dataloader()))
    again = folder._collate_train(batch["pair_index"].tolist())
    assert batch["attn_targets_mask"].any()
    for key in ("attn_targets", "attn_targets_mask"):
        torch.testing.assert_close(batch[key], again[key], msg=key)
    for split in ("val", "test"):  # evaluation: the first sentence's targets, as from the folder
        a, b = (next(iter(getattr(dm, f"{split}_dataloader")())) for dm in (folder, streamed))
        assert a["attn_targets_mask"].any()
        for key in ("attn_targets", "attn_targets_mask"):
            torch.testing.assert_close(b[key], a[key], msg=f"{split} {key}")
    # attention-supervised training streams them
    cli = caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", "2",
                             "--model.objective.attn_sup_lambda", "1.0"])  # fmt: skip
    assert cli.trainer.global_step == 2
    # chunks written without boxes, a fit that asks for targets: one line
    unboxed = {**data, "attention_targets": False}
    plain = write_config(tmp_path / "plain.yaml", FIX / "captions/tiny_shapes.yaml", unboxed)
    caption_main(["optimize", "--config", plain, "--out", "plain"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", cfg, "--data.root", "plain", "--trainer.max_steps", "1"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "holds no boxes" in err and len(err.splitlines()) == 1
    # the photos' JPEG step, read when the chunks were written, is settled as fit settles it from files: a value
    # given by hand that they contradict is refused in one line; left auto, it is recorded
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--model.encoder.source_side", "64",
                           "--model.encoder.jpeg_quality", "null", "--model.encoder.jpeg_subsampling", "null",
                           "--trainer.max_steps", "1"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "say none, but the training photos are 64 x 64 JPEG files of quality 90, 4:2:0" in err
    cli = caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--model.encoder.source_side", "64",
                             "--trainer.max_steps", "1"])  # fmt: skip
    assert (cli.model.encoder_config.jpeg_quality, cli.model.encoder_config.jpeg_subsampling) == (90, "4:2:0")
    assert "the training photos are 64 x 64 JPEG files of quality 90, 4:2:0" in capsys.readouterr().err


def test_feature_chunks_of_an_encoder_of_random_weights_are_refused_in_one_line(tmp_path, capsys):
    # fit draws a random encoder from its own seeded stream, not this process's: its features would be another's
    data = {**caption_layout("folder", tmp_path), "batch_size": 8, "cache_features": True}
    random = {"backbone": "efficientnet_lite0", "weights": None, "image_size": 96, "grid": 3, "crop": False}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data, random)
    with pytest.raises(SystemExit) as exc:
        caption_main(["optimize", "--config", cfg, "--out", "chunks", "--features", "true"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "model.encoder.weights is null" in err
    assert not Path("chunks").exists()


def test_feature_chunks_hold_the_frozen_encoders_features(tmp_path, capsys):
    data = {**caption_layout("folder", tmp_path), "batch_size": 8, "cache_features": True}
    lite = {"backbone": "efficientnet_lite0", "weights": "imagenet", "image_size": 96, "grid": 3, "crop": False}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data, lite)
    caption_main(["optimize", "--config", cfg, "--out", "chunks", "--features", "true"])
    # the features the feature cache computes for the same photos with the same encoder
    from captioning.model.encoder import EncoderConfig
    from captioning.training.streaming import frozen_encoder

    encoder, _ = frozen_encoder(EncoderConfig(**yaml.safe_load(Path(cfg).read_text())["model"]["encoder"]))
    folder = CaptionDataModule(**data)
    folder.setup()
    with torch.no_grad():
        folder.fill_feature_cache(encoder, encoder.preprocess, progress=False)
    streamed = CaptionDataModule(**{**data, "root": "chunks"})
    streamed.setup()
    for split in ("val", "test"):
        torch.testing.assert_close(streamed.features[split], folder.features[split], rtol=0, atol=0)
    # where the training features lie (model files note photos unlike them): the feature cache's, from the chunks
    # (these few photos set no threshold: none from either, captioning.photos.domain.MIN_HELD_OUT)
    assert (streamed.domain_check is None) == (folder.domain_check is None)
    for key, value in (folder.domain_check or {}).items():
        assert torch.equal(torch.as_tensor(streamed.domain_check[key]), torch.as_tensor(value)), key
    items = read_all("chunks", "train")
    for it in items:
        i, _ = folder._train_pairs[int(it["index"])]
        assert torch.equal(torch.from_numpy(it["features"]), folder.features["train"][i])
    cli = caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", "2"])
    assert cli.trainer.global_step == 2
    # another encoder than the one that made the features: one line
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--model.encoder.grid", "1",
                           "--trainer.max_steps", "1"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "features of another encoder" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as exc:  # it trained nothing of the encoder and recorded "all"
        caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--model.encoder.fine_tune", "all",
                           "--trainer.max_steps", "1"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "model.encoder.fine_tune is 'all', but chunks holds a frozen encoder's" in err[-1]


def test_feature_chunks_of_a_config_starting_from_a_model_hold_its_encoders_features(tmp_path, capsys):
    """your_photos.yaml starts from the bundled model, whose encoder's last stage learned from captions: optimize
    encoded with the package's weights alone, and no fit of the config could read the chunks ("the features of
    another encoder: optimize again with this config", which did the same). A start whose encoder was fine-tuned."""
    data = {**caption_layout("folder", tmp_path), "batch_size": 8, "cache_features": True}
    lite = {"backbone": "efficientnet_lite0", "weights": "imagenet", "image_size": 96, "grid": 3, "crop": False}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data, {**lite, "fine_tune": "last"})
    caption_train_cli(["fit", "--config", cfg, "--trainer.max_steps", "2", "--model.encoder_lr", "0.01",
                       "--data.cache_features", "false", "--model.export_path", "start.pt"])  # fmt: skip
    frozen = write_config(tmp_path / "frozen.yaml", FIX / "captions/tiny_shapes.yaml", data, lite)
    caption_main(["optimize", "--config", frozen, "--out", "package", "--features", "true"])  # the package's encoder
    start = ["--model.init_from", "start.pt"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # that folder is not the start's features: not kept as "written earlier"
        caption_main(["optimize", "--config", frozen, *start, "--out", "package", "--features", "true"])
    assert exc.value.code == 2 and "holds chunks made with other data options" in capsys.readouterr().err
    caption_main(["optimize", "--config", frozen, *start, "--out", "chunks", "--features", "true"])
    cli = caption_train_cli(["fit", "--config", frozen, *start, "--data.root", "chunks", "--trainer.max_steps", "1"])
    assert cli.trainer.global_step == 1
    # the start trained again at the same path: its features are others (review: the folder was kept, and refused)
    caption_train_cli(["fit", "--config", cfg, "--trainer.max_steps", "3", "--model.encoder_lr", "0.01",
                       "--data.cache_features", "false", "--model.export_path", "start.pt"])  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        caption_main(["optimize", "--config", frozen, *start, "--out", "chunks", "--features", "true"])
    assert exc.value.code == 2 and "holds chunks made with other data options" in capsys.readouterr().err


def test_feature_chunks_leave_out_photos_that_cannot_be_read(tmp_path, capsys):
    """optimize --features true said "skipped 2 of 64 train photos that cannot be read" and wrote them with their
    NaN rows all the same (128 samples of 64 photos), which fit then trained on. Left out, as fit leaves them out."""
    data = {**caption_layout("folder", tmp_path), "batch_size": 8, "cache_features": True}
    lite = {"backbone": "efficientnet_lite0", "weights": "imagenet", "image_size": 96, "grid": 3, "crop": False}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data, lite)
    folder = CaptionDataModule(**data)
    folder.setup()
    train = folder.splits["train"]
    Path(train.images[1]).write_bytes(b"")  # an empty file among the train photos
    caption_main(["optimize", "--config", cfg, "--out", "chunks", "--features", "true"])
    assert "skipped 1 of" in capsys.readouterr().err
    items = read_all("chunks", "train")
    kept = sum(len(refs) for k, refs in enumerate(train.references) if k != 1)
    assert len(items) == len(folder._train_pairs) - len(train.references[1]) == kept
    assert not any(np.isnan(np.asarray(it["features"], dtype=np.float32)).any() for it in items)
    assert json.loads(Path("chunks/streaming.json").read_text())["splits"]["train"] == {"items": kept}


def test_img2dataset_shards_become_chunks_and_a_damaged_sample_is_one_line(tmp_path, capsys):
    from helpers.shards import write_shard

    (tmp_path / "s").mkdir()
    write_shard(tmp_path / "s/train-0.tar", 0, 10)
    write_shard(tmp_path / "s/train-1.tar", 10, 10, extra={"000000099.json": b"not json"})
    write_shard(tmp_path / "s/val-0.tar", 100, 4)
    write_shard(tmp_path / "s/test-0.tar", 200, 4)
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", {"batch_size": 4})
    shards = ["--shards_train", str(tmp_path / "s/train-{0..1}.tar"), "--shards_val", str(tmp_path / "s/val-0.tar"),
              "--shards_test", str(tmp_path / "s/test-0.tar")]  # fmt: skip
    caption_main(["optimize", "--config", cfg, "--out", "chunks", *shards])
    err = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert len(err) == 1 and "train-1.tar/000000099.json" in err[0]  # one line names it; the others are all there
    from helpers.shards import photo_bytes

    items = read_all("chunks", "train")
    assert [int(it["index"]) for it in items] == list(range(20))
    for i, it in enumerate(items):  # the members' bytes and captions, in the shards' order
        assert (
            bytes(it["jpeg"]) == photo_bytes(i) and json.loads(it["caption"])["tokens"] == f"a photo number {i}".split()
        )
    streamed = CaptionDataModule(batch_size=4, root="chunks")
    streamed.setup()
    assert streamed.splits["val"].references == [[f"a photo number {i}".split()] for i in range(100, 104)]
    assert streamed.splits["test"].images[3] == photo_bytes(203)
    cli = caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", "2"])
    assert cli.trainer.global_step == 2


def test_img2dataset_shards_become_feature_chunks(tmp_path):
    from helpers.shards import photo_bytes, write_shard

    from captioning.model.encoder import EncoderConfig
    from captioning.photos.preprocess import prepared
    from captioning.training.streaming import ENCODE_BATCH, frozen_encoder

    (tmp_path / "s").mkdir()
    write_shard(tmp_path / "s/train-0.tar", 0, ENCODE_BATCH + 3)  # a full batch of photos and a part one
    write_shard(tmp_path / "s/val-0.tar", 100, 4)
    write_shard(tmp_path / "s/test-0.tar", 200, 4)
    lite = {"backbone": "efficientnet_lite0", "weights": "imagenet", "image_size": 64, "grid": 2, "crop": False}
    data = {"batch_size": 4, "cache_features": True}
    cfg = write_config(tmp_path / "cfg.yaml", FIX / "captions/tiny_shapes.yaml", data, lite)
    shards = ["--shards_train", str(tmp_path / "s/train-0.tar"), "--shards_val", str(tmp_path / "s/val-0.tar"),
              "--shards_test", str(tmp_path / "s/test-0.tar")]  # fmt: skip
    caption_main(["optimize", "--config", cfg, "--out", "chunks", "--features", "true", *shards])
    encoder, _ = frozen_encoder(EncoderConfig(**yaml.safe_load(Path(cfg).read_text())["model"]["encoder"]))
    items = read_all("chunks", "train")
    assert len(items) == ENCODE_BATCH + 3 and all("jpeg" not in it for it in items)
    with torch.no_grad():  # each photo's features, as the encoder gives them one by one
        for i in (0, ENCODE_BATCH - 1, ENCODE_BATCH + 2):
            alone = encoder(prepared(photo_bytes(i), encoder.preprocess)[None])[0].half()  # (L, D)
            torch.testing.assert_close(torch.from_numpy(items[i]["features"]).float(), alone.float(), atol=2e-3,
                                       rtol=1e-3)  # fmt: skip
    cli = caption_train_cli(["fit", "--config", cfg, "--data.root", "chunks", "--trainer.max_steps", "2"])
    assert cli.trainer.global_step == 2


def test_chunks_for_a_fit_from_a_model_hold_its_token_ids(tmp_path):
    """your_pairs (model.init_from: the bundled Transformer): optimize read the TSV with a tokenizer and vocabularies
    of its own, and fit from the chunks was refused ("holds token ids of its own tokenizer"). optimize now reads it the
    start's way, as fit from the TSV does; the model file names what the chunks were made of."""
    from text_attn.translation.translator import Translator

    data = ["--data.path", str(FIX / "text/pairs.tsv"), "--data.val_size", "1", "--data.test_size", "1",
            "--data.batch_size", "4", "--data.min_freq", "1"]  # fmt: skip
    text_main(["optimize", "--config", "your_pairs", *data, "--out", "chunks"])
    fit = ["fit", "--config", "your_pairs", "--trainer.max_steps", "1", "--trainer.default_root_dir", "run"]
    text_train_cli([*fit, "--data.root", "chunks", "--data.batch_size", "4", "--data.min_freq", "1"])
    streamed = Translator.load("run/model.pt")
    text_train_cli([*fit, *data, "--trainer.default_root_dir", "direct"])
    direct = Translator.load("direct/model.pt")
    assert streamed.src_vocab == direct.src_vocab and streamed.tgt_vocab == direct.tgt_vocab  # the start's ids
    corpus = TranslationDataModule(task="tsv", path=str(FIX / "text/pairs.tsv"), val_size=1, test_size=1)
    corpus.setup()
    pairs = len(corpus.splits["train"])  # its lines less val's and test's, and less a repeated pair
    assert direct.info["trained_on"] == f"pairs.tsv: {pairs} training pairs"
    assert streamed.info["trained_on"] == f"pairs.tsv (as the chunks chunks): {pairs} training pairs"
