"""Attention correctness on hand-built scenes and hand-computed attention grids."""

from __future__ import annotations

import math

import pytest
import torch
from PIL import Image

from captioning.training.grounding import cells_in_box, grounding, region_boxes
from captioning.training.shapes import Scene, SceneObject, make_scenes


def test_region_boxes_4x4():
    boxes = region_boxes((100, 100), (4, 4))
    assert boxes.shape == (16, 4)
    assert torch.equal(boxes[0], torch.tensor([0.0, 0.0, 25.0, 25.0]))
    assert torch.equal(boxes[6], torch.tensor([50.0, 25.0, 75.0, 50.0]))  # row 1, col 2
    assert torch.equal(boxes[15], torch.tensor([75.0, 75.0, 100.0, 100.0]))
    assert torch.equal(boxes[:4, 0], torch.tensor([0.0, 25.0, 50.0, 75.0]))  # row-major


def test_region_boxes_non_square():
    # image_size is (height, width), grid is (rows, cols)
    boxes = region_boxes((60, 120), (2, 3))
    assert boxes.shape == (6, 4)
    assert torch.equal(boxes[1], torch.tensor([40.0, 0.0, 80.0, 30.0]))  # row 0, col 1
    assert torch.equal(boxes[5], torch.tensor([80.0, 30.0, 120.0, 60.0]))


def test_cells_in_box():
    # box (0, 0, 50, 50) holds the centres (12.5|37.5, 12.5|37.5): cells 0, 1, 4, 5
    assert cells_in_box((0, 0, 50, 50), (100, 100), (4, 4)).nonzero().flatten().tolist() == [0, 1, 4, 5]
    # a box edge exactly at a centre: x0 inclusive, x1 exclusive -> centre 62.5 is in, 87.5 out: cell 10 only
    assert cells_in_box((62.5, 62.5, 87.5, 87.5), (100, 100), (4, 4)).nonzero().flatten().tolist() == [10]
    # ... and at the other corner: centre 62.5 is out, 37.5 in -> cell 5 only
    assert cells_in_box((37.5, 37.5, 62.5, 62.5), (100, 100), (4, 4)).nonzero().flatten().tolist() == [5]


def _scene() -> Scene:
    circle = SceneObject("circle", "red", "small", (0, 0, 40, 40))  # holds cell 0 (12.5, 12.5)
    square = SceneObject("square", "blue", "large", (60, 60, 100, 100))  # holds cell 15
    caption = "a small red circle left of a large blue square".split()
    return Scene(
        image=Image.new("RGB", (100, 100), "white"),
        objects=[circle, square],
        captions=[caption],
        word_objects=[[None, 0, 0, 0, None, None, None, 1, 1, 1]],
    )


def _alpha(cells: list[int], steps: int = 11) -> torch.Tensor:
    """(T, 16) attention with all mass of step t on cells[t]."""
    alpha = torch.zeros(steps, 16)
    alpha[torch.arange(len(cells)), torch.tensor(cells)] = 1.0
    return alpha


GEN = "a small red circle left of a large blue square".split()


def test_grounding_right_and_wrong_cells():
    scene = _scene()
    right = _alpha([3, 0, 0, 0, 3, 3, 3, 15, 15, 15])  # the extra step 10 (eos) is ignored
    res = grounding([scene], [GEN], [right], (4, 4))
    assert (res.accuracy, res.mass, res.words) == (1.0, 1.0, 2)
    res = grounding([scene], [GEN], [right], (4, 4), words="all")
    assert (res.accuracy, res.mass, res.words) == (1.0, 1.0, 6)
    wrong = _alpha([0, 15, 15, 15, 0, 0, 0, 0, 0, 0])  # each word looks at the other object
    res = grounding([scene], [GEN], [wrong], (4, 4), words="all")
    assert (res.accuracy, res.mass, res.words) == (0.0, 0.0, 6)
    # both captions together: half right
    res = grounding([scene, scene], [GEN, GEN], [right, wrong], (4, 4))
    assert (res.accuracy, res.mass, res.words) == (0.5, 0.5, 4)


def test_grounding_split_mass_and_skipped_words():
    scene = _scene()
    alpha = torch.zeros(10, 16)
    alpha[3, 0], alpha[3, 5] = 0.7, 0.3  # "circle": arg-max inside, mass 1 (both cells inside)
    alpha[9, 15], alpha[9, 0] = 0.4, 0.6  # "square": arg-max outside, mass 0.4
    res = grounding([scene], [GEN], [alpha], (4, 4))
    assert res.words == 2 and res.accuracy == 0.5
    assert res.mass == pytest.approx((1.0 + 0.4) / 2)  # cell 5's centre (37.5, 37.5) is inside
    # words that name no unique object are skipped: no green circle; "a circle" is fine (1 circle)
    gen = "a green circle left of a circle".split()
    res = grounding([scene], [gen], [_alpha([0] * 7, steps=7)], (4, 4), words="all")
    assert (res.accuracy, res.words) == (1.0, 1)
    res = grounding([scene], [["a", "green", "triangle"]], [torch.zeros(3, 16)], (4, 4))
    assert res.words == 0 and math.isnan(res.accuracy) and math.isnan(res.mass)


def test_grounding_bad_input():
    scene = _scene()
    with pytest.raises(ValueError, match="T >= 10"):
        grounding([scene], [GEN], [torch.zeros(9, 16)], (4, 4))
    with pytest.raises(ValueError, match="regions"):
        grounding([scene], [GEN], [torch.zeros(10, 9)], (4, 4))
    with pytest.raises(ValueError, match="words"):
        grounding([scene], [GEN], [torch.zeros(10, 16)], (4, 4), words="verbs")
    with pytest.raises(ValueError, match="length"):
        grounding([scene], [GEN, GEN], [torch.zeros(10, 16)], (4, 4))


def test_grounding_oracle_attention_on_generated_scenes():
    """Attention spread uniformly over each named object's cells scores accuracy 1 and mass 1;
    uniform attention scores mass = the box's share of cells, well below 1."""
    scenes = make_scenes(20, seed=5, size=128)
    grid = (8, 8)
    gens, oracle, uniform = [], [], []
    for s in scenes:
        tokens, owners = s.captions[0], s.word_objects[0]
        alpha = torch.full((len(tokens), 64), 1 / 64)  # (T, L)
        for t, o in enumerate(owners):
            if o is not None:
                inside = cells_in_box(s.objects[o].box, (128, 128), grid).float()  # (L,)
                assert inside.sum() > 0, "an 8x8 grid puts a cell centre in every object"
                alpha[t] = inside / inside.sum()
        gens.append(tokens)
        oracle.append(alpha)
        uniform.append(torch.full((len(tokens), 64), 1 / 64))
    res = grounding(scenes, gens, oracle, grid, words="all")
    assert res.words == sum(3 * len(s.objects) for s in scenes)
    assert res.accuracy == 1.0 and res.mass == pytest.approx(1.0)
    res = grounding(scenes, gens, uniform, grid)
    assert res.mass < 0.2
