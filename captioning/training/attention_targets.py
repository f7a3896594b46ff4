"""Ground-truth attention for caption words that name a boxed region: the targets of attention supervision.

A caption carries "token boxes": (token index, box) pairs, a box (x0, y0, x1, y1) in pixels of the image as
``load_image`` returns it (x1/y1 exclusive, as in captioning.training.shapes). A token may have several boxes (Flickr30k
Entities: "two dogs" -> two boxes); its target is their union. Shapes scenes give them for the words that name an
object (``scene_token_boxes``); the Karpathy reader reads them from the JSON (captioning.training.readers).

A box becomes grid cells the way the grounding metric counts them (captioning.training.grounding.cells_in_box): the
encoder sees the preprocessing's crop box of the image (the whole image when ``crop`` is off) resized to its input, and
its gh x gw grid tiles that crop evenly, row-major; a cell belongs to the box when its centre lies inside. The box is
first clipped to the crop; a box outside the crop has no cells (no target); a box too small to hold a cell centre
gets the one cell that holds its own centre. The target of a token is uniform over its cells. ``caption_cells``
puts these together for one caption of an image (the data module's ``attn_targets``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from PIL import Image

from captioning.photos.preprocess import ImageReadError
from captioning.training.grounding import Box, cells_in_box
from captioning.training.shapes import COLOURS, SHAPES, SIZES, Scene

TokenBoxes = list[tuple[int, tuple[float, float, float, float]]]  # (token index, (x0, y0, x1, y1) pixels)
# Which words of a shapes caption get a target. "every" also gives one to the words that name no object ("a", the
# relation words, "there is"): the object the caption names next. A relation word depends on where that next object
# lies against the last one, so looking at it while saying "left of" is what the words need (and what an
# unsupervised decoder finds late, if at all: most of its wrong captions have a wrong relation word).
TARGET_WORDS = {"nouns": frozenset(SHAPES), "all": frozenset(SHAPES + COLOURS + SIZES), "every": None}


# EXIF orientations 5..8 turn the stored pixels by 90 degrees: load_image's image has width and height swapped.
_TRANSPOSED = frozenset({5, 6, 7, 8})


def image_size(image: str | Path | Image.Image) -> tuple[int, int]:
    """(width, height) of an image as ``load_image`` returns it (EXIF orientation applied), from the file header."""
    if isinstance(image, Image.Image):
        return image.size
    try:
        with Image.open(image) as img:
            width, height = img.size
            orientation = img.getexif().get(0x0112, 1)
    except Exception as err:  # noqa: BLE001 - Pillow raises many types for damaged files
        raise ImageReadError(f"{image}: cannot read the image size ({type(err).__name__})") from None
    return (height, width) if orientation in _TRANSPOSED else (width, height)


def box_cells(
    box: Box,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    crop_box: Sequence[float] | None = None,
) -> torch.Tensor:
    """Bool mask of the grid cells that ``box`` covers.  # (L,), L = gh * gw

    ``image_size`` is (height, width) of the image; ``grid`` (gh, gw); ``crop_box`` (x0, y0, x1, y1) the part of the
    image the grid tiles (``Preprocess.crop_box``; default: the whole image).
    """
    height, width = image_size
    gh, gw = grid
    cx0, cy0, cx1, cy1 = (float(v) for v in (crop_box if crop_box is not None else (0, 0, width, height)))
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, y0, x1, y1 = max(x0, cx0), max(y0, cy0), min(x1, cx1), min(y1, cy1)  # clipped to the crop
    if x1 <= x0 or y1 <= y0:
        return torch.zeros(gh * gw, dtype=torch.bool)
    crop_h, crop_w = cy1 - cy0, cx1 - cx0
    inside = cells_in_box((x0 - cx0, y0 - cy0, x1 - cx0, y1 - cy0), (crop_h, crop_w), grid)  # (L,)
    if not inside.any():  # a small box between cell centres: the cell holding its centre
        row = min(gh - 1, int(((y0 + y1) / 2 - cy0) / (crop_h / gh)))
        col = min(gw - 1, int(((x0 + x1) / 2 - cx0) / (crop_w / gw)))
        inside[row * gw + col] = True
    return inside


def token_cells(
    token_boxes: TokenBoxes,
    image_size: tuple[int, int],
    grid: tuple[int, int],
    crop_box: Sequence[float] | None = None,
) -> list[tuple[int, list[int]]]:
    """(token index, the cells of the union of its boxes), in token order; tokens whose boxes cover no cell dropped.

    The sparse form ``text_attn.core.attention_supervision.dense_targets`` turns into (target, mask).
    """
    cells: dict[int, torch.Tensor] = {}
    for t, box in token_boxes:
        covered = box_cells(box, image_size, grid, crop_box)
        cells[t] = cells[t] | covered if t in cells else covered
    return [(t, m.nonzero().flatten().tolist()) for t, m in sorted(cells.items()) if m.any()]


def caption_cells(
    token_boxes: TokenBoxes,
    n_tokens: int,
    image: str | Path | Image.Image,
    size: tuple[int, int] | None,
    grid: tuple[int, int],
    preprocess: Callable | None = None,
) -> list[tuple[int, list[int]]]:
    """The sparse attention targets of one caption of ``image``: the ``token_cells`` of its token boxes on its first
    ``n_tokens`` tokens (training truncates captions), on the grid that tiles the crop ``preprocess`` takes (its
    ``crop_box``; none: the whole image). ``size``: the image's (width, height) when known without opening it, else
    it is read from the file's header (``image_size``), and only when a box is left."""
    boxes = [(t, box) for t, box in token_boxes if t < n_tokens]
    width, height = (size if size is not None else image_size(image)) if boxes else (1, 1)
    crop = getattr(preprocess, "crop_box", None)
    return token_cells(boxes, (height, width), grid, crop(width, height) if crop else None)


def scene_token_boxes(scene: Scene, caption_index: int, words: str = "nouns") -> TokenBoxes:
    """Token boxes of reference caption ``caption_index`` of a shapes scene: each word that names an object (the
    scene's own word -> object map), with that object's box. words: ``nouns`` (shape words, what the grounding metric
    scores), ``all`` (size, colour and shape words) or ``every`` (every token: the object it names, else the object
    the caption names next; a caption always ends with a shape word, so every token has one)."""
    if words not in TARGET_WORDS:
        raise ValueError(f"attention target words must be one of {sorted(TARGET_WORDS)}, got {words!r}")
    tokens, owners = scene.captions[caption_index], scene.word_objects[caption_index]
    if words == "every":
        owners = list(owners)
        for t in range(len(owners) - 2, -1, -1):  # right to left: a word without an object takes the next one's
            if owners[t] is None:
                owners[t] = owners[t + 1]
        return [(t, tuple(scene.objects[o].box)) for t, o in enumerate(owners) if o is not None]
    scored = TARGET_WORDS[words]
    return [
        (t, tuple(scene.objects[o].box))
        for t, (word, o) in enumerate(zip(tokens, owners, strict=True))
        if o is not None and word in scored
    ]
