"""Per-word attention maps drawn over the image (Show-Attend-Tell, Xu et al. 2015, figs. 2-5).

The decoder attends over ``grid x grid`` regions (row-major) of the square the network sees. That square is the
encoder's crop box of the ORIGINAL image (``Preprocess.crop_box``): the centre square when crop=True, the whole
image (squeezed) when crop=False. :func:`attention_map` therefore upsamples the grid to the crop box only, smoothly
(bicubic, Keys a = -0.5, edges clamped), in the image's own pixel size and aspect ratio; pixels outside the box get 0
and are drawn dimmed, uncoloured.

Upsampling is separable: map = Wy @ A @ Wx.T, where row i of Wx holds the bicubic weights of pixel column i over
the grid columns. Pixel i covers [i, i + 1) and is sampled at its centre i + 0.5, and grid cell c covers
[x0 + c w/g, x0 + (c + 1) w/g) of the box, with its value at the cell centre. The kernel interpolates (a cell
centre gets exactly its cell's value) and its weights sum to 1, so a uniform α gives a flat map.

Scale: map = α / max(max α, FOCUS / L). A focused step peaks at 1 (full colour = where it looked most); a flat
one is not blown up into fake focus: uniform α (1 / L everywhere) draws as 1 / FOCUS, a faint even tint. Full
colour therefore means "at least FOCUS times the uniform share". With FOCUS = 4: attention spread evenly over a
quarter of the image or less still reaches 1.

Drawing uses Pillow for the pixels (exact sizes, no pyplot state) and a matplotlib colormap for the colours, with
matplotlib's bundled DejaVu Sans for the words. Layout of the grid PNG, ``cols`` panels per row (default
``min(panels, DEFAULT_COLS)``), panels = 1 (the image) + one per word:
    panel size  (pw, ph) = the image scaled so its longer side is ``panel_side`` (aspect ratio kept)
    PNG width   = cols * pw + (cols + 1) * GAP
    PNG height  = rows * (LABEL_H + ph) + (rows + 1) * GAP,   rows = ceil(panels / cols)
each panel has its word in a LABEL_H band above it (blank for the image).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from captioning.preprocess import to_rgb
from text_attn.core.arrays import to_numpy

Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) in pixels

PANEL_SIDE = 224  # longer side of a panel, pixels
GAP = 4  # white space around and between panels, pixels
LABEL_H = 22  # height of the word band above each panel, pixels
DEFAULT_COLS = 5
CMAP = "turbo"  # a perceptually smoothed jet: blue = little attention, red = most
BLEND = (0.15, 0.6)  # colour opacity = BLEND[0] + BLEND[1] * map: the whole crop is tinted, the focus strongly
FOCUS = 4.0  # full colour at FOCUS times the uniform weight 1 / L or more (see the module doc)
DIM = 0.35  # brightness kept outside the crop box, which the network never saw
MARK = (255, 255, 255)  # outline of a hard-attention model's chosen cell (with a black edge for contrast)
_CUBIC_A = -0.5  # Keys' bicubic parameter (as in Pillow / OpenCV / PyTorch bicubic)


def _cubic(x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel: 1 at 0, 0 at the other integers, support (-2, 2)."""
    x = np.abs(x)
    a = _CUBIC_A
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _axis_weights(n: int, lo: float, hi: float, grid: int) -> np.ndarray:
    """(n, grid) bicubic weights of n pixels over grid cells spanning [lo, hi); rows of pixels outside are 0."""
    centres = np.arange(n) + 0.5  # (n,)
    inside = (centres >= lo) & (centres < hi)
    u = (centres - lo) / max(hi - lo, 1e-9) * grid - 0.5  # position in cell units, cell c centred at c
    base = np.floor(u).astype(np.int64)
    weights = np.zeros((n, grid))
    rows = np.arange(n)
    for k in (-1, 0, 1, 2):
        idx = base + k
        w = _cubic(u - idx) * inside
        np.add.at(weights, (rows, np.clip(idx, 0, grid - 1)), w)  # clamp: edge cells extend outwards
    return weights


def attention_map(alpha: Any, grid: int, image_size: tuple[int, int], crop_box: Sequence[float]) -> np.ndarray:
    """One step's α (L = grid * grid, row-major) -> (H, W) map in [0, 1] over an image of size (W, H).

    The grid covers ``crop_box`` (pixels of that image); the map is 0 outside it. Scaled by
    max(max α, FOCUS / L): a focused step peaks at 1, uniform α gives 1 / FOCUS inside the box.
    """
    a = to_numpy(alpha).reshape(-1)
    if a.size != grid * grid:
        raise ValueError(f"alpha has {a.size} values, expected grid * grid = {grid * grid}")
    width, height = image_size
    x0, y0, x1, y1 = (float(v) for v in crop_box)
    scale = max(float(a.max()), FOCUS / a.size)
    cells = a.reshape(grid, grid) / scale  # (g, g), in [0, 1] for weights that sum to 1
    wy = _axis_weights(height, y0, y1, grid)  # (H, g)
    wx = _axis_weights(width, x0, x1, grid)  # (W, g)
    return np.clip(wy @ cells @ wx.T, 0.0, 1.0)  # (H, W); bicubic overshoot clipped


def _inside(size: tuple[int, int], box: Box) -> np.ndarray:
    """(H, W) bool: pixel centres inside the box (the pixels the attention map covers)."""
    width, height = size
    xs, ys = np.arange(width) + 0.5, np.arange(height) + 0.5
    return ((ys >= box[1]) & (ys < box[3]))[:, None] & ((xs >= box[0]) & (xs < box[2]))[None, :]


@lru_cache(maxsize=4)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        from matplotlib import font_manager

        return ImageFont.truetype(font_manager.findfont("DejaVu Sans"), size)
    except (OSError, ImportError, ValueError):
        return ImageFont.load_default()


def _panel_size(image_size: tuple[int, int], panel_side: int) -> tuple[int, int]:
    width, height = image_size
    scale = panel_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _check(words: Sequence[str], alphas: np.ndarray, grid: int, chosen: Sequence[int | None] | None) -> None:
    if alphas.ndim != 2 or alphas.shape != (len(words), grid * grid):
        raise ValueError(f"alphas shape {alphas.shape} does not match {len(words)} words x {grid * grid} regions")
    if chosen is not None and len(chosen) != len(words):
        raise ValueError(f"chosen has {len(chosen)} entries for {len(words)} words")


class _Painter:
    """The image scaled to one panel, its crop box in panel pixels, and how to draw one step on it."""

    def __init__(self, image: Image.Image, grid: int, crop_box: Sequence[float], panel_side: int, cmap: str):
        import matplotlib

        rgb = to_rgb(image)
        self.size = _panel_size(rgb.size, panel_side)  # (pw, ph)
        sx, sy = self.size[0] / rgb.size[0], self.size[1] / rgb.size[1]
        x0, y0, x1, y1 = (float(v) for v in crop_box)
        self.box: Box = (x0 * sx, y0 * sy, x1 * sx, y1 * sy)  # crop box in panel pixels
        self.base = rgb.resize(self.size, Image.Resampling.BICUBIC)
        self.pixels = np.asarray(self.base, dtype=np.float64) / 255.0  # (ph, pw, 3)
        self.inside = _inside(self.size, self.box)[..., None]  # (ph, pw, 1)
        self.grid = grid
        self.cmap = matplotlib.colormaps[cmap]

    def step(self, alpha: np.ndarray, chosen: int | None = None) -> Image.Image:
        amap = attention_map(alpha, self.grid, self.size, self.box)  # (ph, pw)
        colour = self.cmap(amap)[..., :3]  # (ph, pw, 3)
        opacity = (BLEND[0] + BLEND[1] * amap)[..., None]
        blended = (1 - opacity) * self.pixels + opacity * colour
        out = np.where(self.inside, blended, DIM * self.pixels)
        panel = Image.fromarray(np.round(out * 255).astype(np.uint8), mode="RGB")
        if chosen is not None:
            self._mark(panel, int(chosen))
        return panel

    def _mark(self, panel: Image.Image, region: int) -> None:
        if not 0 <= region < self.grid * self.grid:
            raise ValueError(f"chosen region {region} is outside the {self.grid} x {self.grid} grid")
        row, col = divmod(region, self.grid)
        x0, y0, x1, y1 = self.box
        cw, ch = (x1 - x0) / self.grid, (y1 - y0) / self.grid
        cell = [x0 + col * cw, y0 + row * ch, x0 + (col + 1) * cw - 1, y0 + (row + 1) * ch - 1]
        draw = ImageDraw.Draw(panel)
        draw.rectangle(cell, outline=(0, 0, 0), width=3)
        draw.rectangle([cell[0] + 1, cell[1] + 1, cell[2] - 1, cell[3] - 1], outline=MARK, width=1)


def _label(canvas: Image.Image, text: str, x: int, y: int, width: int) -> None:
    if not text:
        return
    draw = ImageDraw.Draw(canvas)
    for size in (14, 12, 10, 8):  # shrink long words until they fit the panel
        font = _font(size)
        if draw.textlength(text, font=font) <= width:
            break
    tw = draw.textlength(text, font=font)
    draw.text((x + (width - tw) / 2, y + LABEL_H / 2), text, fill=(0, 0, 0), font=font, anchor="lm")


def _labelled(panel: Image.Image, text: str) -> Image.Image:
    """One panel with its word band, GAP-padded like a 1 x 1 grid."""
    pw, ph = panel.size
    canvas = Image.new("RGB", (pw + 2 * GAP, LABEL_H + ph + 2 * GAP), (255, 255, 255))
    _label(canvas, text, GAP, GAP, pw)
    canvas.paste(panel, (GAP, GAP + LABEL_H))
    return canvas


def draw_overlay(
    image: Image.Image,
    words: list[str],
    alphas: Any,
    grid: int,
    crop_box: Sequence[float],
    path: str | Path,
    chosen: Sequence[int | None] | None = None,
    cols: int | None = None,
    *,
    panel_side: int = PANEL_SIDE,
    cmap: str = CMAP,
) -> Path:
    """Write the grid PNG: the image, then one panel per word with that step's attention; returns the path.

    alphas (T, L) with T = len(words); crop_box from ``Preprocess.crop_box`` of this image's size. ``chosen``: per
    word the region a hard-attention model sampled (or None), outlined on its panel.
    """
    a = to_numpy(alphas)
    _check(words, a, grid, chosen)
    painter = _Painter(image, grid, crop_box, panel_side, cmap)
    panels = [(painter.base, "")]
    panels += [(painter.step(a[t], None if chosen is None else chosen[t]), w) for t, w in enumerate(words)]
    cols = min(len(panels), DEFAULT_COLS) if cols is None else max(1, int(cols))
    rows = math.ceil(len(panels) / cols)
    pw, ph = painter.size
    canvas = Image.new("RGB", (cols * pw + (cols + 1) * GAP, rows * (LABEL_H + ph) + (rows + 1) * GAP), "white")
    for k, (panel, text) in enumerate(panels):
        row, col = divmod(k, cols)
        x, y = GAP + col * (pw + GAP), GAP + row * (LABEL_H + ph + GAP)
        _label(canvas, text, x, y, pw)
        canvas.paste(panel, (x, y + LABEL_H))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path, format="PNG")
    return path


def word_filename(stem: str, index: int, word: str) -> str:
    """``stem-03-circle.png``: 1-based position, the word reduced to safe file-name characters."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", word).strip("_") or "word"
    return f"{stem}-{index:02d}-{safe}.png"


def draw_word_panels(
    image: Image.Image,
    words: list[str],
    alphas: Any,
    grid: int,
    crop_box: Sequence[float],
    out_dir: str | Path,
    stem: str,
    chosen: Sequence[int | None] | None = None,
    *,
    panel_side: int = PANEL_SIDE,
    cmap: str = CMAP,
) -> list[Path]:
    """Write one PNG per word (its panel, word above it) into out_dir as ``word_filename(stem, t, word)``."""
    a = to_numpy(alphas)
    _check(words, a, grid, chosen)
    painter = _Painter(image, grid, crop_box, panel_side, cmap)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t, word in enumerate(words):
        panel = painter.step(a[t], None if chosen is None else chosen[t])
        path = out_dir / word_filename(stem, t + 1, word)
        _labelled(panel, word).save(path, format="PNG")
        paths.append(path)
    return paths
