"""Caption data: Karpathy JSON and folder + TSV readers (missing files, bad input), EXIF orientation, and
CaptionDataModule batches (cached features vs images, one eval entry per image, vocabulary from train only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from captioning.photos.preprocess import ImageReadError, Preprocess, load_image
from captioning.training.data import CaptionDataModule
from captioning.training.readers import CaptionDataError, read_folder, read_karpathy
from text_attn.core.batching import EpochShuffle

FIX = Path(__file__).parent.parent / "fixtures"
CAPS = FIX / "captions"
IMAGES = FIX / "images"
PRE = Preprocess(image_size=32, crop=False)


def test_shapes_with_val_size_0_is_refused_as_the_other_sources_are():
    """data.val_size 0 on the synthetic shapes made an empty val split and went on to fit (a fit with nothing to
    validate, its monitored metric never logged); flickr8k, karpathy and folder refuse it by name."""
    dm = CaptionDataModule(source="shapes", val_size=0, train_size=4, test_size=2, scene_size=64)
    with pytest.raises(CaptionDataError, match="^data.val_size is 0: nothing to validate on$"):
        dm.setup("fit")
    assert dm.splits == {}  # refused before a scene was drawn


# --- readers ---------------------------------------------------------------------------------------------------------
def test_karpathy_reader_splits_tokens_and_counted_skip(capsys):
    splits = read_karpathy(CAPS / "karpathy.json", IMAGES)
    assert [it.path.name for it in splits["train"]] == ["coffee.png", "chelsea.png"]  # restval joins train
    assert [it.path.name for it in splits["val"]] == ["rocket.jpg"]
    assert [it.path.name for it in splits["test"]] == ["astronaut.png"]
    coffee, chelsea = splits["train"]
    assert coffee.path == IMAGES / "coffee.png"
    assert coffee.captions[1] == ["coffee", "in", "a", "white", "cup"]  # tokens lowercased
    assert chelsea.captions == [["a", "tabby", "cat", "looks", "to", "the", "side"]]  # from "raw", its "." no word
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "skipped 1 of 5 images" in err[0] and "missing_photo.jpg" in err[0]


def test_karpathy_reader_strict_and_bad_files(tmp_path):
    with pytest.raises(CaptionDataError, match=r"1 of 5 image files are missing .*missing_photo\.jpg"):
        read_karpathy(CAPS / "karpathy.json", IMAGES, strict=True)
    cases = [
        (CAPS / "bad.json", "is not valid JSON"),
        (CAPS / "no_images.json", "has no 'images' list"),
        (tmp_path / "none.json", "does not exist"),
    ]
    for path, msg in cases:
        with pytest.raises(CaptionDataError) as exc:
            read_karpathy(path, IMAGES)
        assert msg in str(exc.value) and "\n" not in str(exc.value)
    bad_split = tmp_path / "split.json"
    bad_split.write_text('{"images": [{"filename": "coffee.png", "split": "dev", "sentences": []}]}')
    with pytest.raises(CaptionDataError, match=r"images\[0\] has split 'dev'"):
        read_karpathy(bad_split, IMAGES)


def test_folder_reader_groups_lines_per_image(capsys, tmp_path):
    items = read_folder(IMAGES, CAPS / "captions.tsv")
    assert [it.path.name for it in items] == ["coffee.png", "chelsea.png", "rocket.jpg"]  # first appearance
    assert items[0].captions == [  # "A cup of coffee on a saucer.": lowercased words, the full stop dropped
        ["a", "cup", "of", "coffee", "on", "a", "saucer"],
        ["coffee", "in", "a", "white", "cup"],
    ]
    err = capsys.readouterr().err
    assert "skipped 1 of 4 images" in err and "not_there.png" in err
    with pytest.raises(CaptionDataError, match="not_there.png"):
        read_folder(IMAGES, CAPS / "captions.tsv", strict=True)
    no_tab = tmp_path / "no_tab.tsv"
    no_tab.write_text("coffee.png\tfine\ncoffee.png a caption without a tab\n")
    with pytest.raises(CaptionDataError, match="line 2: expected 'filename<TAB>caption'"):
        read_folder(IMAGES, no_tab)
    empty = tmp_path / "empty_caption.tsv"  # the line's shape is right: what is wrong is its caption
    empty.write_text("coffee.png\tfine\ncoffee.png\t . , !\n")
    with pytest.raises(CaptionDataError, match="line 2: the caption of 'coffee.png' has no words"):
        read_folder(IMAGES, empty)
    empty.write_text("coffee.png\tfine\ncoffee.png\t\ta cup\n")  # two tabs: "has no words" of a caption that is there
    with pytest.raises(CaptionDataError, match=r"line 2: the caption of 'coffee.png' is empty, and the next column "
                                               r"holds words \(two tabs between them\?\)$"):  # fmt: skip
        read_folder(IMAGES, empty)
    csv = tmp_path / "captions.csv"  # read as CSV: its two commas
    csv.write_text("coffee.png,fine\ncoffee.png,,a cup\n")
    with pytest.raises(CaptionDataError, match=r"line 2: .* holds words \(two commas between them\?\)$"):
        read_folder(IMAGES, csv)
    # a line separator other than a line feed inside a caption (U+2028, NEL, a form feed) is part of its line: the
    # next lines keep their numbers (they were split there, and line 3's error was named line 4)
    odd = tmp_path / "odd.tsv"
    odd.write_bytes("coffee.png\ta cup\u2028of coffee\r\nchelsea.png\ta cat\x0c\nrocket.jpg\t\u0085 . ,\n".encode())
    with pytest.raises(CaptionDataError, match="line 3: the caption of 'rocket.jpg' has no words"):
        read_folder(IMAGES, odd)
    odd.write_bytes("coffee.png\ta cup\u2028of coffee\r\nchelsea.png\ta cat\x0c\n".encode())
    assert [it.captions for it in read_folder(IMAGES, odd)] == [[["a", "cup", "of", "coffee"]], [["a", "cat"]]]
    # Flickr8k's token file as it is ("photo.jpg#0"): the photos by their names
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("coffee.png#0\tA cup of coffee .\ncoffee.png#1\tCoffee .\nchelsea.png#0\tA cat .\n")
    assert [(it.path.name, len(it.captions)) for it in read_folder(IMAGES, tokens)] == [("coffee.png", 2),
                                                                                       ("chelsea.png", 1)]  # fmt: skip
    # no photo it names is in the folder: said so (the wrong folder, or another layout), not "too few for val_size"
    with pytest.raises(CaptionDataError, match=r"none of the 2 photos it names is in .*tmp.* \(first: coffee.png\): "
                       "check data.image_dir"):  # fmt: skip
        read_folder(tmp_path, tokens)
    with pytest.raises(CaptionDataError, match="captions file .* is a folder"):
        read_folder(IMAGES, tmp_path)
    with pytest.raises(CaptionDataError, match="image folder .* is a file"):
        read_folder(empty, empty)


def test_files_saved_with_a_byte_order_mark_read_as_without_and_other_bytes_name_the_line(tmp_path):
    """Notepad and Excel's "UTF-8" write a byte-order mark first: it was read as part of the first photo's name, which
    then counted as missing without a visible reason (and a Karpathy JSON was refused)."""
    tsv = (CAPS / "captions.tsv").read_text(encoding="utf-8")
    (tmp_path / "bom.tsv").write_bytes(b"\xef\xbb\xbf" + tsv.replace("\n", "\r\n").encode())
    plain, marked = read_folder(IMAGES, CAPS / "captions.tsv"), read_folder(IMAGES, tmp_path / "bom.tsv")
    assert [(it.path, it.captions) for it in marked] == [(it.path, it.captions) for it in plain]
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + (CAPS / "karpathy.json").read_bytes())
    assert read_karpathy(tmp_path / "bom.json", IMAGES) == read_karpathy(CAPS / "karpathy.json", IMAGES)
    (tmp_path / "latin1.tsv").write_bytes("coffee.png\tfine\nrocket.jpg\tun caf\u00e9\n".encode("latin-1"))
    with pytest.raises(CaptionDataError) as exc:
        read_folder(IMAGES, tmp_path / "latin1.tsv")
    assert str(exc.value) == f"{tmp_path / 'latin1.tsv'}: line 2: not UTF-8 text (captions file)"
    (tmp_path / "latin1.json").write_bytes('{"images": [], "x": "caf\u00e9"}'.encode("latin-1"))
    with pytest.raises(CaptionDataError, match=r"latin1\.json: line 1: not UTF-8 text"):
        read_karpathy(tmp_path / "latin1.json", IMAGES)


def test_load_image_respects_exif_orientation(tmp_path):
    img = Image.new("RGB", (40, 20), (255, 0, 0))
    img.paste((0, 0, 255), (0, 0, 8, 8))  # a blue block at the top left
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    path = tmp_path / "rotated.jpg"
    img.save(path, exif=exif, quality=100)
    out = load_image(path)
    assert out.mode == "RGB" and out.size == (20, 40)
    r, g, b = out.getpixel((16, 3))  # the top-left block ends up top-right after a clockwise turn
    assert b > 150 and r < 100
    assert out.getpixel((3, 3))[0] > 150  # top-left is red now
    with pytest.raises(ImageReadError, match="not an image file in a photo format"):
        load_image(CAPS / "captions.tsv")


# --- data module -----------------------------------------------------------------------------------------------------
def _shapes(**kw) -> CaptionDataModule:
    args = dict(source="shapes", train_size=12, val_size=4, test_size=4, scene_size=64, max_objects=2, batch_size=4)
    dm = CaptionDataModule(**{**args, **kw})
    dm.setup("fit")
    return dm


def _fake_encoder(calls: list[int]):
    """(B, 3, H, W) -> (B, 4, 3): per-quadrant channel means. Records how many images it saw."""

    def encode(images: torch.Tensor) -> torch.Tensor:
        calls.append(images.size(0))
        b, c, h, w = images.shape
        quads = images.reshape(b, c, 2, h // 2, 2, w // 2).mean(dim=(3, 5))  # (B, 3, 2, 2)
        return quads.flatten(2).transpose(1, 2)  # (B, 4, 3)

    return encode


def test_cached_features_batches_and_each_image_encoded_once():
    dm = _shapes(cache_features=True)
    calls: list[int] = []
    dm.fill_feature_cache(_fake_encoder(calls), PRE, splits=["train", "val"], progress=False)
    dm.fill_feature_cache(_fake_encoder(calls), PRE, splits=["train", "val", "test"], progress=False)
    assert sum(calls) == 12 + 4 + 4  # the second call only encodes the missing test split
    assert dm.features["train"].shape == (12, 4, 3) and dm.features["train"].dtype == torch.float16

    batch = next(iter(dm.train_dataloader()))
    assert "images" not in batch and batch["features"].shape == (4, 4, 3)
    assert batch["features"].dtype == torch.float32
    idx = batch["image_index"]
    expect = _fake_encoder([])(torch.stack([PRE(dm.splits["train"].images[i]) for i in idx.tolist()]))
    torch.testing.assert_close(batch["features"], expect, atol=2e-3, rtol=1e-3)
    # captions_in = bos + words, targets = words + eos: the same words shifted by one
    cin, tgt = batch["captions_in"], batch["targets"]
    v = dm.vocab
    assert (cin[:, 0] == v.bos_id).all()
    for row in range(cin.size(0)):
        n = int((tgt[row] != v.pad_id).sum())
        assert tgt[row, n - 1] == v.eos_id
        assert torch.equal(cin[row, 1:n], tgt[row, : n - 1])

    ev = next(iter(dm.val_dataloader()))  # one entry per image, all its references
    assert ev["features"].shape == (4, 4, 3) and ev["image_index"].tolist() == [0, 1, 2, 3]
    assert ev["references"] == [s.captions for s in dm.scenes["val"]]
    assert all(len(r) >= 3 for r in ev["references"])


def test_without_cache_batches_carry_preprocessed_images():
    dm = _shapes()
    dm.set_preprocess(PRE)
    batch = next(iter(dm.test_dataloader()))
    assert "features" not in batch and batch["images"].shape == (4, 3, 32, 32)
    torch.testing.assert_close(batch["images"][2], PRE(dm.scenes["test"][2].image))


def test_every_pair_once_per_epoch_and_truncation():
    dm = _shapes(max_caption_len=3)
    n_pairs = sum(len(s.captions) for s in dm.scenes["train"])
    seen = torch.cat([b["image_index"] for b in dm.train_dataloader()])
    assert len(seen) == n_pairs  # every (image, caption) pair, once per epoch
    assert torch.bincount(seen, minlength=12).tolist() == [len(s.captions) for s in dm.scenes["train"]]
    batch = next(iter(dm.train_dataloader()))
    assert batch["targets"].size(1) <= 4  # 3 words + eos
    one = _shapes(captions_per_image=1)
    assert sum(b["targets"].size(0) for b in one.train_dataloader()) == 12


def test_vocabulary_from_train_captions_only():
    dm = CaptionDataModule(source="karpathy", karpathy_json=str(CAPS / "karpathy.json"), image_root=str(IMAGES))
    dm.setup("fit")
    v = dm.vocab
    assert "coffee" in v and "tabby" in v
    assert "rocket" not in v and "astronaut" not in v  # val / test words
    assert v.itos[4] == "a"  # the most frequent train word
    freq2 = CaptionDataModule(
        source="karpathy", karpathy_json=str(CAPS / "karpathy.json"), image_root=str(IMAGES), min_freq=2
    )
    freq2.setup("fit")
    assert freq2.vocab.itos[4:] == ["a", "coffee", "cup"]
    dm.set_preprocess(PRE)
    ev = next(iter(dm.val_dataloader()))
    assert ev["images"].shape == (1, 3, 32, 32)
    assert ev["references"] == [[["a", "rocket", "launch", "at", "night"]]]


def test_folder_split_and_bad_source():
    dm = CaptionDataModule(
        source="folder", image_dir=str(IMAGES), captions_tsv=str(CAPS / "captions.tsv"), val_size=1, test_size=1
    )
    dm.setup()
    names = {s: [p.name for p in dm.splits[s].images] for s in ("train", "val", "test")}
    assert sorted(sum(names.values(), [])) == ["chelsea.png", "coffee.png", "rocket.jpg"]
    assert all(len(v) == 1 for v in names.values())
    with pytest.raises(CaptionDataError, match="unknown caption source 'coco'"):
        CaptionDataModule(source="coco")
    with pytest.raises(CaptionDataError, match="needs data.karpathy_json"):
        CaptionDataModule(source="karpathy").setup()


def test_sort_by_length_false_draws_train_batches_at_random():
    sorted_dm, plain_dm = _shapes(), _shapes(sort_by_length=False)
    n = len(plain_dm._train_pairs)
    order = list(EpochShuffle(range(n), seed=0))  # epoch 0's draw of the (image, caption) pairs, as both samplers draw
    pools = list(sorted_dm.train_dataloader().batch_sampler)  # default: the draw sorted by caption length, then cut
    lengths = [len(c) for _, c in sorted_dm._train_pairs]
    assert sorted(lengths[i] for b in pools for i in b) == sorted(lengths)
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in pools)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # batches of neighbouring lengths
    plain = list(plain_dm.train_dataloader().batch_sampler)  # the draw cut into batches of 4, only ordered inside
    assert sorted(map(sorted, plain)) == sorted(sorted(order[p : p + 4]) for p in range(0, n, 4))


def test_photo_batches_hold_whole_photos_once_each_per_epoch():
    dm = _shapes(photo_batches=True, batch_size=8)
    counts = [len(s.captions) for s in dm.scenes["train"]]
    assert dm.photos_per_batch == max(1, round(8 / (sum(counts) / len(counts))))
    dm.set_preprocess(PRE)
    batches = list(dm.train_dataloader())
    seen = torch.cat([b["image_index"] for b in batches])
    assert torch.bincount(seen, minlength=12).tolist() == counts  # every pair once an epoch
    for b in batches:
        photos = b["image_index"].unique()
        assert len(photos) <= dm.photos_per_batch
        for p in photos.tolist():  # a photo's captions all in the same batch
            assert int((b["image_index"] == p).sum()) == counts[p]
        # the images once per photo; photo_of maps every caption back to its photo's row
        assert b["images"].shape == (len(photos), 3, 32, 32)
        assert torch.equal(photos[b["photo_of"]], b["image_index"])
    other = list(_shapes(photo_batches=True, batch_size=8, seed=1).train_dataloader())  # the draw follows the seed
    assert [b["image_index"].tolist() for b in other] != [b["image_index"].tolist() for b in batches]


def test_stored_frozen_maps_come_once_per_photo():
    dm = _shapes(photo_batches=True, batch_size=8, cache_features=True)

    def frozen_map(images: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, 3, 2, 2): quadrant means
        b, c, h, w = images.shape
        return images.reshape(b, c, 2, h // 2, 2, w // 2).mean(dim=(3, 5))

    dm.fill_feature_cache(frozen_map, PRE, splits=["train", "val"], progress=False)
    assert dm.features["train"].shape == (12, 3, 2, 2)
    assert dm.domain_check is None  # a frozen map is not what the model attends: no domain check from it
    batch = next(iter(dm.train_dataloader()))
    photos = batch["image_index"].unique()
    assert "features" not in batch and "images" not in batch
    expect = frozen_map(torch.stack([PRE(dm.splits["train"].images[i]) for i in photos.tolist()]))
    torch.testing.assert_close(batch["frozen_maps"], expect, atol=2e-3, rtol=1e-3)
    assert torch.equal(photos[batch["photo_of"]], batch["image_index"])
    ev = next(iter(dm.val_dataloader()))  # one entry per photo: no photo_of needed
    assert ev["frozen_maps"].shape == (4, 3, 2, 2) and "photo_of" not in ev


def test_training_captions_cut_to_max_caption_len_are_counted_in_one_note(capsys):
    dm = _shapes(max_caption_len=4)  # shapes captions run to ~10 words
    err = capsys.readouterr().err.strip().splitlines()
    cut = [line for line in err if "longer than data.max_caption_len=4 words are cut to it" in line]
    assert len(cut) == 1 and cut[0].startswith("caption data: ")
    assert all(len(ids) <= 4 for _, ids in dm._train_pairs)
    _shapes()  # the default, 50 words: nothing cut, nothing said
    assert "max_caption_len" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, value, says",
    [("scene_size", 32, "at least 64"), ("scene_size", 600, "at most 512"), ("max_objects", 5, "at most 4")],
)
def test_a_scene_the_scene_maker_cannot_draw_is_refused_in_the_options_name(option, value, says):
    # make_scene draws 64-512 pixel canvases of 1-4 objects: outside that the fit ended in a ValueError traceback
    with pytest.raises(CaptionDataError, match=rf"^data\.{option} must be {says}, got {value}$"):
        CaptionDataModule(source="shapes", train_size=4, val_size=2, test_size=2, **{option: value})
    dm = CaptionDataModule(source="shapes", train_size=4, val_size=2, test_size=2, scene_size=64, max_objects=4)
    dm.setup("fit")  # the bounds themselves are drawn
    assert len(dm.scenes["train"]) == 4


def test_a_captions_file_as_spreadsheets_and_old_editors_save_it_is_read_as_meant(tmp_path, capsys):
    """Found by the user-data audit of 2026-12-06, each read wrong and unsaid before: a photo named by its absolute
    path and by its name was two photos (in train and in val or test), a quoted CSV cell's line break glued its two
    words, a third TSV column was read into the caption (and an unquoted comma cut a CSV one), and a file of
    carriage returns alone was one line."""
    whole = f"{IMAGES.resolve() / 'coffee.png'}"
    (tmp_path / "two_names.tsv").write_text(f"coffee.png\ta cup\n{whole}\ta saucer\nchelsea.png\ta cat\n")
    items = read_folder(IMAGES, tmp_path / "two_names.tsv")
    assert [(it.path.name, it.captions) for it in items] == [("coffee.png", [["a", "cup"], ["a", "saucer"]]),
                                                             ("chelsea.png", [["a", "cat"]])]  # fmt: skip
    (tmp_path / "cells.csv").write_text('filename,caption\ncoffee.png,"a cup\nof coffee, hot"\nchelsea.png,a cat\n')
    assert [it.captions for it in read_folder(IMAGES, tmp_path / "cells.csv")] == [
        [["a", "cup", "of", "coffee", "hot"]], [["a", "cat"]]]  # fmt: skip
    capsys.readouterr()
    (tmp_path / "three.tsv").write_text("filename\tcaption\tphotographer\ncoffee.png\ta cup\tAnna\n"
                                        "chelsea.png\ta cat\tBen Miller\n")  # fmt: skip
    assert [it.captions for it in read_folder(IMAGES, tmp_path / "three.tsv")] == [[["a", "cup"]], [["a", "cat"]]]
    err = capsys.readouterr().err
    assert "line 1 read as a header" in err and "2 line(s) have more than two columns (first: line 2)" in err
    assert "a tab typed inside a caption splits it" in err
    (tmp_path / "comma.csv").write_text("coffee.png,a cup, on a saucer\n")
    assert [it.captions for it in read_folder(IMAGES, tmp_path / "comma.csv")] == [[["a", "cup"]]]
    assert "a comma outside quotes splits it" in capsys.readouterr().err
    (tmp_path / "mac.tsv").write_bytes(b"coffee.png\ta cup\rchelsea.png\ta cat\r")
    assert [it.captions for it in read_folder(IMAGES, tmp_path / "mac.tsv")] == [[["a", "cup"]], [["a", "cat"]]]


def test_utf16_and_semicolon_files_are_named_for_what_they_are(tmp_path):
    """Excel's "Unicode Text" (UTF-16) was "line 1: not UTF-8 text", and its semicolon CSV (some languages' default)
    "expected 'filename,caption'": both said what was wrong, not what the file was."""
    (tmp_path / "u16.tsv").write_bytes("coffee.png\ta cup\n".encode("utf-16"))
    with pytest.raises(CaptionDataError, match=r'u16\.tsv: UTF-16 text \(Windows\' "Unicode", .*save it as UTF-8'):
        read_folder(IMAGES, tmp_path / "u16.tsv")
    (tmp_path / "semi.csv").write_text("coffee.png;a cup\n")
    with pytest.raises(CaptionDataError, match=r"got 'coffee.png;a cup' \(semicolons between them"):
        read_folder(IMAGES, tmp_path / "semi.csv")
