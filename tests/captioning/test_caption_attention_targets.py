"""Attention supervision: the targets the caption data modules carry when asked -- shapes scenes and Karpathy boxes
as distributions over the encoder's grid cells (captioning.training.attention_targets). (The shared loss by hand:
tests/core/test_attention_supervision.py; reorder's alignment targets: tests/text/test_text_attention_targets.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from captioning.photos.preprocess import Preprocess
from captioning.training.attention_targets import box_cells, image_size, scene_token_boxes, token_cells
from captioning.training.data import CaptionDataModule
from captioning.training.grounding import cells_in_box
from captioning.training.readers import CaptionDataError, read_karpathy
from captioning.training.shapes import SHAPES, SceneObject, make_captions, resolve_object
from text_attn.core.attention_supervision import dense_targets

IMAGES = Path(__file__).parent.parent / "fixtures" / "images"
PRE = Preprocess(image_size=32, crop=False)


# --- boxes -> grid cells ---------------------------------------------------------------------------------------------
def test_box_cells_by_hand_with_and_without_crop():
    # 128 x 128 image, 4 x 4 grid: cell centres at 16, 48, 80, 112 on both axes
    cells = box_cells((40, 0, 90, 40), (128, 128), (4, 4))
    assert cells.nonzero().flatten().tolist() == [1, 2]  # row 0, columns 1 and 2
    assert torch.equal(cells, cells_in_box((40, 0, 90, 40), (128, 128), (4, 4)))  # the grounding metric's cells
    # 200 x 100 image, centre-cropped to x in [50, 150): a 2 x 2 grid of 50 px cells, centres x 75, 125 / y 25, 75
    crop = Preprocess(crop=True).crop_box(200, 100)
    assert crop == (50.0, 0.0, 150.0, 100.0)
    assert box_cells((100, 50, 200, 100), (100, 200), (2, 2), crop).nonzero().flatten().tolist() == [3]
    assert not box_cells((0, 0, 40, 100), (100, 200), (2, 2), crop).any()  # outside the crop: no target
    assert box_cells((60, 10, 70, 20), (100, 200), (2, 2), crop).nonzero().flatten().tolist() == [0]  # tiny: centre
    # two boxes for one token: the union; tokens in order
    got = token_cells([(3, (0, 0, 40, 40)), (1, (96, 96, 128, 128)), (3, (96, 0, 128, 32))], (128, 128), (4, 4))
    assert got == [(1, [15]), (3, [0, 3])]


def test_shapes_scene_targets_by_hand():
    objects = [
        SceneObject("circle", "red", "small", (0, 0, 60, 60)),
        SceneObject("square", "blue", "large", (64, 64, 128, 128)),
    ]
    captions, owners = make_captions(objects)
    assert captions[0] == ["a", "small", "red", "circle", "left", "of", "a", "large", "blue", "square"]

    class _Scene:  # the fields scene_token_boxes reads
        pass

    scene = _Scene()
    scene.objects, scene.captions, scene.word_objects = objects, captions, owners
    assert scene_token_boxes(scene, 0) == [(3, (0, 0, 60, 60)), (9, (64, 64, 128, 128))]
    assert [t for t, _ in scene_token_boxes(scene, 0, "all")] == [1, 2, 3, 7, 8, 9]
    # every: "a" and the relation words look at the object named next ("left of" -> the square)
    every = scene_token_boxes(scene, 0, "every")
    assert [t for t, _ in every] == list(range(10))
    assert [box for _, box in every] == [(0, 0, 60, 60)] * 4 + [(64, 64, 128, 128)] * 6
    there = captions.index(["there", "is", *captions[0]])
    assert [box for _, box in scene_token_boxes(scene, there, "every")][:2] == [(0, 0, 60, 60)] * 2
    cells = token_cells(scene_token_boxes(scene, 0), (128, 128), (4, 4))
    assert cells == [(3, [0, 1, 4, 5]), (9, [10, 11, 14, 15])]  # 4 x 4 grid of 32 px cells
    target, mask = dense_targets([cells], steps=11, positions=16)
    assert mask[0].nonzero().flatten().tolist() == [3, 9]
    assert target[0, 3, [0, 1, 4, 5]].tolist() == [0.25] * 4 and target[0, 3].sum() == 1.0


def test_shapes_batches_carry_targets_only_when_asked():
    args = dict(source="shapes", train_size=12, val_size=4, test_size=4, scene_size=64, max_objects=3, batch_size=6)
    plain = CaptionDataModule(**args)
    plain.setup("fit")
    plain.set_preprocess(PRE)
    assert "attn_targets" not in next(iter(plain.train_dataloader()))

    dm = CaptionDataModule(**args, attention_targets=True)
    dm.setup("fit")
    dm.set_preprocess(PRE)
    with pytest.raises(CaptionDataError, match="needs the encoder's grid"):
        next(iter(dm.train_dataloader()))
    dm.set_grid(4)
    v, scored, small = dm.vocab, 0, 0
    for batch in dm.train_dataloader():
        target, mask = batch["attn_targets"], batch["attn_targets_mask"]
        assert target.shape == (*batch["targets"].shape, 16) and mask.shape == batch["targets"].shape
        for row in range(mask.size(0)):
            scene = dm.scenes["train"][int(batch["image_index"][row])]
            words = v.decode(batch["targets"][row].tolist())
            # independent check: the grounding metric's way of finding the named object and its cells
            for t in range(mask.size(1)):
                obj = resolve_object(words, t, scene.objects) if t < len(words) and words[t] in SHAPES else None
                assert bool(mask[row, t]) == (obj is not None), (words, t)
                if obj is not None:
                    box = scene.objects[obj].box
                    inside = cells_in_box(box, (64, 64), (4, 4))
                    if not inside.any():  # a small object between cell centres: the cell holding its centre
                        small += 1
                        inside[int((box[1] + box[3]) / 2 // 16) * 4 + int((box[0] + box[2]) / 2 // 16)] = True
                    torch.testing.assert_close(target[row, t], inside.float() / inside.sum())
                    scored += 1
                else:
                    assert not target[row, t].any()
    assert scored >= 12 and scored > small  # every scene names at least one shape in each caption
    ev = next(iter(dm.val_dataloader()))  # evaluation: the first reference's targets
    first = scene_token_boxes(dm.scenes["val"][0], 0)
    assert ev["attn_targets_mask"][0].nonzero().flatten().tolist() == [t for t, _ in first]
    short = CaptionDataModule(**args, attention_targets=True, max_caption_len=3)  # "a size colour" -- no noun
    short.setup("fit")
    short.set_preprocess(PRE)
    short.set_grid(4)
    assert not any(b["attn_targets_mask"].any() for b in short.train_dataloader())  # and none on the eos step


# --- Karpathy boxes --------------------------------------------------------------------------------------------------
def _karpathy(tmp_path: Path, **edit) -> Path:
    data = {
        "images": [
            {
                "filename": "coffee.png",  # 256 x 171
                "split": "train",
                "sentences": [
                    {
                        "tokens": ["a", "cup", "of", "coffee", "on", "a", "saucer"],
                        "boxes": [
                            [1, 0, 0, 128, 171],
                            [6, 130, 90, 256, 171],
                            [3, 0, 0, 100, 80],
                            [3, 150, 100, 256, 171],
                        ],
                    },
                    {"tokens": ["coffee", "in", "a", "white", "cup"]},
                ],
            },
            {
                "filename": "chelsea.png",
                "split": "train",
                "width": 256,
                "height": 170,
                "sentences": [{"raw": "A tabby cat looks to the side.", "boxes": [[2, 0, 0, 256, 170]]}],
            },
            {"filename": "rocket.jpg", "split": "val", "sentences": [{"tokens": ["a", "rocket", "at", "n\u030cight"]}]},
            {"filename": "astronaut.png", "split": "test", "sentences": [{"tokens": ["an", "astronaut"]}]},
        ]
    }
    for path, value in edit.items():
        i, s = (int(x) for x in path.split("_")[1:3])
        data["images"][i]["sentences"][s]["boxes"] = value
    path = tmp_path / "boxes.json"
    path.write_text(json.dumps(data))
    return path


def test_karpathy_reader_reads_and_checks_boxes(tmp_path):
    splits = read_karpathy(_karpathy(tmp_path), IMAGES)
    coffee, chelsea = splits["train"]
    assert coffee.boxes[0][0] == (1, (0.0, 0.0, 128.0, 171.0)) and coffee.boxes[1] == [] and coffee.size is None
    assert chelsea.boxes == [[(2, (0.0, 0.0, 256.0, 170.0))]] and chelsea.size == (256, 170)
    assert splits["val"][0].boxes is None
    assert splits["val"][0].captions[0][-1] == "ňight"  # its tokens in NFC, as tokenize reads --given's text
    bad = [
        ([[7, 0, 0, 10, 10]], r"boxes\[0\] names token 7, but the sentence has 7 tokens"),
        ([[1, 0, 0, 10]], r"boxes\[0\] must be \[token_index, x0, y0, x1, y1\]"),
        ([[1, 10, 0, 10, 10]], r"boxes\[0\] is empty"),
        ({"1": [0, 0, 1, 1]}, "'boxes' must be a list"),
    ]
    for value, message in bad:
        with pytest.raises(CaptionDataError, match=r"images\[0\]\.sentences\[0\]: " + message):
            read_karpathy(_karpathy(tmp_path, s_0_0=value), IMAGES)


def test_image_size_is_that_of_the_loaded_image(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # stored 40 x 20, shown (and loaded) turned: 20 x 40
    Image.new("RGB", (40, 20)).save(tmp_path / "turned.jpg", exif=exif)
    assert image_size(tmp_path / "turned.jpg") == (20, 40)
    assert image_size(IMAGES / "coffee.png") == (256, 171)


def test_karpathy_batches_carry_box_targets(tmp_path):
    json_path = str(_karpathy(tmp_path))
    dm = CaptionDataModule(
        source="karpathy", karpathy_json=json_path, image_root=str(IMAGES), attention_targets=True, batch_size=8
    )
    dm.setup("fit")
    dm.set_preprocess(PRE)  # no crop: the 2 x 2 grid tiles the whole 256 x 171 image, centres x 64, 192 / y 43, 128
    dm.set_grid(2)
    batch = next(iter(dm.train_dataloader()))
    rows = {
        (int(i), dm._train_caption[int(p)]): r
        for r, (i, p) in enumerate(zip(batch["image_index"], batch["pair_index"], strict=True))
    }
    target, mask = batch["attn_targets"], batch["attn_targets_mask"]
    r = rows[(0, 0)]  # "a cup of coffee on a saucer"
    assert mask[r].nonzero().flatten().tolist() == [1, 3, 6]
    assert target[r, 1].tolist() == [0.5, 0.0, 0.5, 0.0]  # cup: the left half
    assert target[r, 3].tolist() == [0.5, 0.0, 0.0, 0.5]  # coffee: two boxes, top left and bottom right
    assert target[r, 6].tolist() == [0.0, 0.0, 0.0, 1.0]  # saucer: bottom right
    assert not mask[rows[(0, 1)]].any()  # a sentence without boxes
    assert target[rows[(1, 0)], 2].tolist() == [0.25] * 4  # "cat": the whole image
    assert not next(iter(dm.val_dataloader()))["attn_targets_mask"].any()  # val has no boxes
    # with the default centre crop, the grid tiles x in [42.5, 213.5): "cup" covers only the left column
    dm.set_preprocess(Preprocess(image_size=32, crop=True))
    batch = next(iter(dm.train_dataloader()))
    rows = {
        (int(i), dm._train_caption[int(p)]): r
        for r, (i, p) in enumerate(zip(batch["image_index"], batch["pair_index"], strict=True))
    }
    assert batch["attn_targets"][rows[(0, 0)], 1].tolist() == [0.5, 0.0, 0.5, 0.0]
    assert batch["attn_targets"][rows[(0, 0)], 6].tolist() == [0.0, 0.0, 0.0, 1.0]
    # no boxes anywhere, or a source without boxes: a clear error, not silently empty targets
    no_boxes = tmp_path / "plain.json"
    data = json.loads(Path(json_path).read_text())
    for image in data["images"]:
        for sent in image["sentences"]:
            sent.pop("boxes", None)
    no_boxes.write_text(json.dumps(data))
    with pytest.raises(CaptionDataError, match="needs sentence 'boxes'"):
        CaptionDataModule(
            source="karpathy", karpathy_json=str(no_boxes), image_root=str(IMAGES), attention_targets=True
        ).setup()
    with pytest.raises(CaptionDataError, match="attention_targets needs boxes"):
        CaptionDataModule(source="folder", attention_targets=True)
