"""Attention correctness: when the decoder names an object, does its attention lie on that object?

The encoder resizes the WHOLE image to its input (no crop), so its gh x gw feature grid tiles the
image evenly; attention weights α over L = gh * gw regions are in row-major order
(region r = row * gw + col). A cell counts as inside an object's box when the cell's centre does.

Scores over the object-naming words of generated captions (the object found by
`shapes.resolve_object`; words naming no unique object are skipped):
  accuracy -- fraction of words whose arg-max cell lies in the named object's box,
  mass     -- mean α mass on cells inside that box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from captioning.training.shapes import COLOURS, SHAPES, SIZES, Scene, resolve_object

Box = Sequence[float]  # (x0, y0, x1, y1) in pixels, x1/y1 exclusive


def region_boxes(image_size: tuple[int, int], grid: tuple[int, int]) -> torch.Tensor:
    """Pixel boxes (x0, y0, x1, y1) of the grid cells, row-major.  # (L, 4)

    `image_size` is (height, width) and `grid` is (gh, gw) -- rows first in both.
    """
    height, width = image_size
    gh, gw = grid
    ys = torch.arange(gh + 1, dtype=torch.float32) * (height / gh)  # (gh + 1,) row edges
    xs = torch.arange(gw + 1, dtype=torch.float32) * (width / gw)  # (gw + 1,) column edges
    y0, x0 = torch.meshgrid(ys[:-1], xs[:-1], indexing="ij")  # (gh, gw) each
    y1, x1 = torch.meshgrid(ys[1:], xs[1:], indexing="ij")
    return torch.stack([x0, y0, x1, y1], dim=-1).reshape(gh * gw, 4)


def cells_in_box(box: Box, image_size: tuple[int, int], grid: tuple[int, int]) -> torch.Tensor:
    """Bool mask of the cells whose centre lies inside `box` (x1/y1 exclusive).  # (L,)"""
    cells = region_boxes(image_size, grid)  # (L, 4)
    cx = (cells[:, 0] + cells[:, 2]) / 2
    cy = (cells[:, 1] + cells[:, 3]) / 2
    x0, y0, x1, y1 = (float(v) for v in box)
    return (cx >= x0) & (cx < x1) & (cy >= y0) & (cy < y1)


def _check_alpha(alpha: torch.Tensor, grid: tuple[int, int]) -> None:
    if alpha.shape[-1] != grid[0] * grid[1]:
        raise ValueError(
            f"alpha has {alpha.shape[-1]} regions in its last dim, but grid {tuple(grid)} has {grid[0] * grid[1]}"
        )


@dataclass
class GroundingResult:
    accuracy: float  # fraction of scored words whose arg-max cell centre is inside the named box
    mass: float  # mean α mass inside the named box over the same words
    words: int  # how many words were scored (accuracy and mass are nan when 0)


def grounding(
    scenes: list[Scene],
    generated: list[list[str]],
    alphas: list[torch.Tensor],
    grid: tuple[int, int],
    words: str = "nouns",
) -> GroundingResult:
    """Score attention on the objects that generated captions name.

    alphas[i] is (T_i, L), the attention at each decoding step of caption i, T_i >= len(generated[i]);
    step t produced token t. words="nouns" scores shape words only, "all" size/colour/shape words.
    """
    if words == "nouns":
        scored = frozenset(SHAPES)
    elif words == "all":
        scored = frozenset(SHAPES + COLOURS + SIZES)
    else:
        raise ValueError(f"words must be 'nouns' or 'all', got {words!r}")
    if not len(scenes) == len(generated) == len(alphas):
        raise ValueError(
            f"scenes, generated and alphas differ in length: {len(scenes)}, {len(generated)}, {len(alphas)}"
        )
    hits, masses = 0, 0.0
    count = 0
    for i, (scene, tokens, alpha) in enumerate(zip(scenes, generated, alphas, strict=True)):
        _check_alpha(alpha, grid)
        if alpha.dim() != 2 or alpha.shape[0] < len(tokens):
            raise ValueError(
                f"alphas[{i}] must be (T, L) with T >= {len(tokens)} tokens, got shape {tuple(alpha.shape)}"
            )
        width, height = scene.image.size
        for t, word in enumerate(tokens):
            if word not in scored:
                continue
            obj = resolve_object(tokens, t, scene.objects)
            if obj is None:
                continue
            inside = cells_in_box(scene.objects[obj].box, (height, width), grid)  # (L,)
            a = alpha[t].detach().float().cpu()  # (L,)
            hits += int(inside[a.argmax()])
            masses += float(a[inside].sum())
            count += 1
    if count == 0:
        return GroundingResult(accuracy=math.nan, mass=math.nan, words=0)
    return GroundingResult(accuracy=hits / count, mass=masses / count, words=count)
