"""Per-word attention maps drawn over the image (Show-Attend-Tell, Xu et al. 2015, figs. 2-5), made to be read at a
glance.

The decoder attends over ``grid x grid`` regions (row-major) of the square the network sees. That square is the
encoder's crop box of the ORIGINAL image (``Preprocess.crop_box``): the centre square when crop=True, the whole
image (squeezed) when crop=False. :func:`attention_map` therefore upsamples the grid to the crop box only, smoothly
(bicubic, Keys a = -0.5, edges clamped), in the image's own pixel size and aspect ratio; pixels outside the box get 0.

Upsampling is separable: map = Wy @ A @ Wx.T, where row i of Wx holds the bicubic weights of pixel column i over
the grid columns. Pixel i covers [i, i + 1) and is sampled at its centre i + 0.5, and grid cell c covers
[x0 + c w/g, x0 + (c + 1) w/g) of the box, with its value at the cell centre. The kernel interpolates (a cell
centre gets exactly its cell's value) and its weights sum to 1, so a uniform α gives a flat map.

Scale: map = α / max(max α, FOCUS / L). A focused step peaks at 1 (full brightness = where it looked most); a flat
one is not blown up into fake focus: uniform α (1 / L everywhere) draws as 1 / FOCUS, evenly dim. Full brightness
therefore means "at least FOCUS times the uniform share". With FOCUS = 4: attention spread evenly over a quarter of
the image or less still reaches 1.

Look: attention is brightness, no colour map. A word's panel is the image darkened where the word's attention is
low, ``lit = image * (FLOOR + (1 - FLOOR) * map)``: the attended part keeps its own colours at full brightness and
the rest fades towards black, so nothing competes with the image's own colours (a jet or turbo map over red and blue
objects makes a blue object look "cold" whatever its weight). On a dark photo, full brightness is still dark, so a
neutral (white, hue-free) veil is added where it looked, as strong as the image is dark:
``pixel = lit + glow * map * (1 - lit)``, ``glow = GLOW * (1 - mean luminance of the seen part)``: a white-background
scene gets almost none (its colours stay as they are), a night scene about GLOW. Outside the crop box (never seen by
the network) the image is grey, at FLOOR. A hard-attention model's chosen cell is outlined (white on black).

Layout of the grid PNG (pixels): the header of captioning.views.overlay_layout (the caption as a wrapped title, then the
key: a brightness bar 0..max and what it means), then the panels, ``cols`` per row (default: the fewest rows of at
most MAX_COLS, filled evenly: ``ceil(panels / ceil(panels / MAX_COLS))``); panels = 1 (the image) + one per word,
at most MAX_WORDS words (a longer caption is drawn up to there and the key says so):
    panel size  (pw, ph) = the image scaled so its longer side is ``panel_side`` (aspect ratio kept up to
                MAX_ASPECT: a thinner image is stretched to a shorter side of panel_side / MAX_ASPECT)
    PNG width   W = max(cols * pw + (cols + 1) * GAP, MIN_WIDTH), the panels centred
    PNG height  = header + rows * (LABEL_H + ph) + (rows + 1) * GAP,   rows = ceil(panels / cols)
each panel has its word (and its position, in grey) in a LABEL_H band above it; :func:`grid_layout` computes it.
A per-word PNG is the same header (its word bold in the caption, "word t of T" in the key) over one panel whose
longer side is WORD_SIDE.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from captioning.photos.preprocess import to_rgb
from captioning.views.file_names import fitted
from captioning.views.overlay_layout import MARGIN, draw_key, draw_label, draw_title, header_height, key_top, wrap
from text_attn.core.arrays import evidence_shares, signed2, to_numpy
from text_attn.core.safe_files import atomic_output

Box = tuple[float, float, float, float]  # (x0, y0, x1, y1) in pixels

PANEL_SIDE = 224  # longer side of a grid panel, pixels
MAX_ASPECT = 4  # a panel's longer side over its shorter one, at most (a panorama of 4:1 is drawn as it is)
WORD_SIDE = 512  # longer side of a per-word PNG's panel, pixels
GAP = 4  # white space around and between panels, pixels
LABEL_H = 24  # height of the word band above each panel, pixels
MAX_COLS = 6  # panels per row at most (by default)
MAX_WORDS = 40  # words drawn at most; a longer caption is cut there, with a note
MIN_WIDTH = 320  # the key row needs this much, pixels
FLOOR = 0.25  # brightness where a word has no attention (and outside the crop box, in grey)
GLOW = 0.3  # strength of the white veil where it looked, on an all-black image (scaled by the image's darkness)
FOCUS = 4.0  # full brightness at FOCUS times the uniform weight 1 / L or more (see the module doc)
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


def panel_size(image_size: tuple[int, int], panel_side: int) -> tuple[int, int]:
    """(width, height) of a picture of ``image_size`` drawn with its longer side ``panel_side``, the shorter at least
    ``panel_side / MAX_ASPECT``: the overlay's panels and the --html report's canvas (caption_page.thumbnail)."""
    width, height = image_size
    scale = panel_side / max(width, height)
    # a sliver (a 1 x 1000 strip) is stretched to 1:MAX_ASPECT: a 1-pixel panel shows nothing and its labels overlap
    low = math.ceil(panel_side / MAX_ASPECT)
    return max(low, round(width * scale)), max(low, round(height * scale))


def _check_given(words: Any, crop_box: Any) -> None:
    """TypeError for a caption given as its text (its characters were counted as words: "does not match 31 words"),
    and for a crop box that is none (None failed as "'NoneType' object is not iterable"). There is no default box: a
    model that crops sees the centre square, not the whole image."""
    if isinstance(words, str):
        raise TypeError(f"words must be the caption's words, a list of str (caption.words), got the text {words!r}: "
                        "give text.split()")  # fmt: skip
    if isinstance(crop_box, (str, bytes)) or not hasattr(crop_box, "__len__"):  # a tuple, list, array or tensor
        raise TypeError(f"crop_box must be the part of the image the model saw, (x0, y0, x1, y1) in pixels: "
                        f"captioner.preprocess.crop_box(*image.size), or a caption's crop_box; got "
                        f"{type(crop_box).__name__}")  # fmt: skip
    if len(crop_box) != 4:
        raise ValueError(f"crop_box must be 4 numbers, (x0, y0, x1, y1) in pixels, got {len(crop_box)}")


def _check(words: Sequence[str], alphas: np.ndarray, grid: int, chosen: Sequence[int | None] | None) -> None:
    if alphas.ndim != 2 or alphas.shape != (len(words), grid * grid):
        raise ValueError(f"alphas shape {alphas.shape} does not match {len(words)} words x {grid * grid} regions")
    if chosen is not None and len(chosen) != len(words):
        raise ValueError(f"chosen has {len(chosen)} entries for {len(words)} words")


class _Painter:
    """The image scaled to one panel, its crop box in panel pixels, and how to draw one step on it."""

    def __init__(self, image: Image.Image, grid: int, crop_box: Sequence[float], panel_side: int):
        rgb = to_rgb(image)
        self.size = panel_size(rgb.size, panel_side)  # (pw, ph)
        sx, sy = self.size[0] / rgb.size[0], self.size[1] / rgb.size[1]
        x0, y0, x1, y1 = (float(v) for v in crop_box)
        self.box: Box = (x0 * sx, y0 * sy, x1 * sx, y1 * sy)  # crop box in panel pixels
        self.base = rgb.resize(self.size, Image.Resampling.BICUBIC)
        self.pixels = np.asarray(self.base, dtype=np.float64) / 255.0  # (ph, pw, 3)
        luma = self.pixels @ np.array([0.299, 0.587, 0.114])  # (ph, pw)
        self.unseen = FLOOR * np.repeat(luma[..., None], 3, axis=-1)  # outside the crop box: grey, dim
        self.inside = _inside(self.size, self.box)[..., None]  # (ph, pw, 1)
        seen = luma[self.inside[..., 0]]
        self.glow = GLOW * (1.0 - float(seen.mean() if seen.size else luma.mean()))  # dark image: more veil
        self.grid = grid

    def step(self, alpha: np.ndarray, chosen: int | None = None) -> Image.Image:
        amap = attention_map(alpha, self.grid, self.size, self.box)  # (ph, pw) in [0, 1]
        amap = amap[..., None]  # (ph, pw, 1)
        lit = self.pixels * (FLOOR + (1 - FLOOR) * amap)  # dimmed where it did not look
        lit += self.glow * amap * (1 - lit)  # a neutral veil where it did, visible on dark images too
        out = np.where(self.inside, lit, self.unseen)
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
        left, top = round(x0 + col * cw), round(y0 + row * ch)
        # whole pixels, at least one: a cropped panorama's cells are under 3 px wide (a 4:1 photo's on a 28 x 28 grid
        # 2 px high), where the inset outline came out inverted and Pillow's error ended the whole `caption` run
        cell = [left, top, max(left, round(x0 + (col + 1) * cw) - 1), max(top, round(y0 + (row + 1) * ch) - 1)]
        draw = ImageDraw.Draw(panel)
        draw.rectangle(cell, outline=(0, 0, 0), width=3)
        if cell[2] - cell[0] >= 2 and cell[3] - cell[1] >= 2:  # room inside the black for the coloured line
            draw.rectangle([cell[0] + 1, cell[1] + 1, cell[2] - 1, cell[3] - 1], outline=MARK, width=1)


@dataclass(frozen=True)
class GridLayout:
    """Where everything of a grid PNG goes (pixels; see the module doc)."""

    panel: tuple[int, int]  # (pw, ph)
    cols: int
    rows: int
    shown: int  # words drawn: min(len(words), MAX_WORDS)
    lines: list[list[int]]  # the caption's title lines, word indices
    header: int  # height of the title and key bands
    left: int  # x of the first panel column (the panels are centred)
    size: tuple[int, int]  # the PNG, (W, H)


def grid_layout(
    image_size: tuple[int, int],
    words: Sequence[str],
    cols: int | None = None,
    panel_side: int = PANEL_SIDE,
    sections: int = 1,
) -> GridLayout:
    """``sections``: how many times the image and its word panels are drawn, each starting a row (2: attention,
    then what drives each word)."""
    shown = min(len(words), MAX_WORDS)
    panels = shown + 1
    if cols is None:  # as few rows as MAX_COLS allows, then as few columns as that many rows need (balanced rows)
        cols = math.ceil(panels / math.ceil(panels / MAX_COLS))
    cols = max(1, int(cols))
    rows = math.ceil(panels / cols) * sections
    pw, ph = panel_size(image_size, panel_side)
    grid_w = cols * pw + (cols + 1) * GAP
    width = max(grid_w, MIN_WIDTH)
    lines = wrap(words, width - 2 * MARGIN)
    header = header_height(lines)
    height = header + rows * (LABEL_H + ph) + (rows + 1) * GAP
    return GridLayout((pw, ph), cols, rows, shown, lines, header, (width - grid_w) // 2, (width, height))


# The picture's format by the path's suffix. An overlay is photographs (the image once per word): PNG keeps every
# pixel, at 0.6-1.2 MB a Flickr8k photo's; JPEG (quality 90, colour at full resolution: the words' text and the
# outlines stay sharp) is 4.2x smaller, WebP (quality 90) 6.6x (50 Flickr8k photos: docs/captioning.md).
FORMATS = {".png": ("PNG", {}), ".jpg": ("JPEG", {"quality": 90, "subsampling": 0}),
           ".jpeg": ("JPEG", {"quality": 90, "subsampling": 0}), ".webp": ("WEBP", {"quality": 90})}  # fmt: skip


def _format(suffix: str, what: str) -> tuple[str, dict]:
    """The format and save options of a picture whose name ends in ``suffix``; another suffix (".gif", none) is a
    ValueError naming ``what`` and the suffixes written (it got PNG bytes under its name, silently)."""
    if suffix.lower() not in FORMATS:
        got = repr(suffix) if suffix else "no suffix"
        raise ValueError(f"{what} must end in one of {', '.join(FORMATS)} (the formats an overlay is written in), "
                         f"got {got}")  # fmt: skip
    return FORMATS[suffix.lower()]


def _save(canvas: Image.Image, path: Path) -> Path:
    fmt, options = _format(path.suffix, f"{path.name}: the picture's name")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path) as tmp:  # a fresh file, renamed: a planted link or FIFO at path is never written
        canvas.save(tmp, format=fmt, **options)
    return path


def overlay_image(
    image: Image.Image,
    words: list[str],
    alphas: Any,
    grid: int,
    crop_box: Sequence[float],
    chosen: Sequence[int | None] | None = None,
    cols: int | None = None,
    *,
    panel_side: int = PANEL_SIDE,
    evidence: Any = None,
    agreement: Sequence[float] | None = None,
    probs: Sequence[float] | None = None,
) -> Image.Image:
    """The grid picture (RGB): the caption and the key, then the image and one panel per word (the first MAX_WORDS)
    with that step's attention.

    alphas (T, L) with T = len(words); crop_box from ``Preprocess.crop_box`` of this image's size. ``chosen``: per
    word the region a hard-attention model sampled (or None), outlined on its panel. ``evidence`` (T, L): per word,
    how much removing each region lowers its probability (captioning.model.explain.word_evidence); drawn as a second
    section of panels below the attention, the same way (its positive part as a distribution), each labelled with
    ``agreement``, the word's Kendall tau between its attention and its evidence. ``probs``: per word of a caption
    read (``caption --given``, or its own with ``--unsure``), the model's probability of it, written after the
    word on its panel.
    """
    _check_given(words, crop_box)
    a = to_numpy(alphas)
    _check(words, a, grid, chosen)
    painter = _Painter(image, grid, crop_box, panel_side)
    sections = 1 if evidence is None else 2
    lay = grid_layout(to_rgb(image).size, words, cols, panel_side, sections)
    canvas = Image.new("RGB", lay.size, "white")
    draw_title(canvas, words, lay.lines)
    note = f"first {lay.shown} of {len(words)} words drawn" if lay.shown < len(words) else ""
    if evidence is not None:
        note = "; ".join(n for n in (note, "below: what removing each region costs the word (tau: agreement)") if n)
    if probs is not None:
        note = "; ".join(n for n in (note, "p: the model's probability of the word after the ones before it") if n)
    draw_key(canvas, key_top(lay.lines), FLOOR, note)
    pw, ph = lay.panel
    panels: list[tuple[Image.Image, str, int | None] | None] = [(painter.base, "image", None)]
    labels = list(words) if probs is None else [f"{w} p {_prob(p)}" for w, p in zip(words, probs, strict=True)]
    panels += [(painter.step(a[t], None if chosen is None else chosen[t]), labels[t], t + 1) for t in range(lay.shown)]
    if evidence is not None:
        e = evidence_shares(evidence)  # (T, L): what lowers the word, as shares
        panels += [None] * ((-len(panels)) % lay.cols)  # the rest of the row empty: the section starts a new one
        panels.append((painter.base, "removal", None))
        for t in range(lay.shown):
            tau = "" if agreement is None or agreement[t] != agreement[t] else f" τ {signed2(agreement[t])}"
            panels.append((painter.step(e[t]), f"{words[t]}{tau}", t + 1))
    for k, item in enumerate(panels):
        if item is None:
            continue
        panel, text, index = item
        row, col = divmod(k, lay.cols)
        x, y = lay.left + GAP + col * (pw + GAP), lay.header + GAP + row * (LABEL_H + ph + GAP)
        draw_label(canvas, text, x, y, pw, LABEL_H, index)
        canvas.paste(panel, (x, y + LABEL_H))
    return canvas


def _prob(p: float) -> str:
    """A probability in a panel's label, short: ".62", ".004", "1.0"."""
    if p >= 0.995:
        return "1.0"
    text = f"{p:.2f}" if p >= 0.01 else f"{p:.0e}" if p < 0.001 else f"{p:.3f}"
    return text.removeprefix("0")


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
    evidence: Any = None,
    agreement: Sequence[float] | None = None,
    probs: Sequence[float] | None = None,
) -> Path:
    """Write :func:`overlay_image` at ``path``, a PNG, or a JPEG or WebP where its suffix says so (``.jpg``,
    ``.jpeg``, ``.webp``: several times smaller, see :data:`FORMATS`); returns the path."""
    if not isinstance(image, Image.Image):  # a path drew nothing: PIL's "'PosixPath' object has no attribute 'mode'"
        raise TypeError(f"draw_overlay: image must be a PIL image (load_image(path) opens a photo as the captioner "
                        f"saw it), got {type(image).__name__}")  # fmt: skip
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"draw_overlay: path must be a file path, got {type(path).__name__}")
    _format(Path(path).suffix, "draw_overlay: path")  # before drawing: a picture in no format it writes is refused
    canvas = overlay_image(image, words, alphas, grid, crop_box, chosen, cols, panel_side=panel_side,
                           evidence=evidence, agreement=agreement, probs=probs)  # fmt: skip
    return _save(canvas, Path(path))


def word_filename(stem: str, index: int, word: str, suffix: str = ".png") -> str:
    """``stem-03-circle.png``: 1-based position, the word reduced to safe file-name characters (never ending as an
    overlay's name does, ``-attention``); a long stem cut to fit (captioning.views.file_names); ``suffix``: the
    picture's format (:data:`FORMATS`)."""
    safe = (re.sub(r"[^A-Za-z0-9_-]+", "_", word).strip("_") or "word")[:64]
    if safe.lower() == "attention":  # "p-01-attention.png" is a photo p-01's overlay: p's first word "attention" was
        safe += "_"  # written over it
    tail = f"-{index:02d}-{safe}{suffix}"
    return f"{fitted(stem, tail)}{tail}"


def word_png_size(image_size: tuple[int, int], words: Sequence[str], panel_side: int = WORD_SIDE) -> tuple[int, int]:
    """(W, H) of a per-word PNG: the header over one panel, GAP below it."""
    pw, ph = panel_size(image_size, panel_side)
    width = max(pw + 2 * GAP, MIN_WIDTH)
    return width, header_height(wrap(words, width - 2 * MARGIN)) + ph + GAP


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
    panel_side: int = WORD_SIDE,
    probs: Sequence[float] | None = None,
    suffix: str = ".png",
) -> list[Path]:
    """Write one picture per word into out_dir as ``word_filename(stem, t, word, suffix)`` (``suffix``: its format,
    :data:`FORMATS`): the caption with that word in bold,
    the key, and the word's panel (longer side ``panel_side``). ``probs``: per word of a caption read (given, or
    its own with --unsure), the model's probability of it after the words before it, in the key's note ("word 2 of
    5, p = 0.135")."""
    _check_given(words, crop_box)
    _format(suffix, "draw_word_panels: suffix")
    a = to_numpy(alphas)
    _check(words, a, grid, chosen)
    painter = _Painter(image, grid, crop_box, panel_side)
    width, height = word_png_size(to_rgb(image).size, words, panel_side)
    lines = wrap(words, width - 2 * MARGIN)
    header = header_height(lines)
    shown = {i for line in lines for i in line}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t, word in enumerate(words):
        canvas = Image.new("RGB", (width, height), "white")
        draw_title(canvas, words, lines, highlight=t)
        note = f"word {t + 1} of {len(words)}" + ("" if t in shown else f": {word}")
        if probs is not None:  # short: a note that does not fit the key's row is left out
            note += f", p = {probs[t]:.3g}"
        draw_key(canvas, key_top(lines), FLOOR, note)
        panel = painter.step(a[t], None if chosen is None else chosen[t])
        canvas.paste(panel, ((width - panel.width) // 2, header))
        paths.append(_save(canvas, out_dir / word_filename(stem, t + 1, word, suffix)))
    return paths
