"""``CaptionSplit``: one split of a caption corpus (images and their references), what the data module holds and
the chunk reader (captioning.training.streaming) fills: below both, which import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from captioning.training.attention_targets import TokenBoxes
from captioning.training.shapes import Scene


@dataclass
class CaptionSplit:
    """One split: images (files, or in-memory PIL images for shapes) with their references."""

    images: list[Path | Image.Image]
    references: list[list[list[str]]]  # per image, its captions as token lists
    scenes: list[Scene] | None = None  # shapes only: ground truth for grounding
    boxes: list[list[TokenBoxes]] | None = None  # karpathy with boxes: per image, per caption, its token boxes
    sizes: list[tuple[int, int] | None] | None = None  # per image (width, height) when known without opening it
