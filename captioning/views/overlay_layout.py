"""Text and bands of the attention overlay PNGs (captioning.views.overlay): fonts, the caption as a wrapped title, and
the key that says what brightness means.

The header of every overlay PNG, top to bottom (pixels):
    MARGIN
    the caption, wrapped to the PNG's width less 2 * MARGIN: TITLE_SIZE type, TITLE_LINE per line, at most
        TITLE_LINES lines (the last one ends in "..." when the caption is longer); a per-word PNG shows its word in
        bold black and the others in grey
    KEY_GAP, then the key row (KEY_H): "attention 0 [bar] max", the bar going from the darkest a panel gets to full
        brightness, then what that means and, right-aligned, a note (e.g. words left out) where there is room
    MARGIN
Text is matplotlib's bundled DejaVu Sans, or an installed font that has a word's characters where DejaVu Sans
lacks them, drawn with Pillow (exact sizes, no pyplot state).
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from text_attn.core import fonts

MARGIN = 12  # around the header text, pixels
TITLE_SIZE = 18  # caption type size, pixels
TITLE_LINE = 24  # caption line height, pixels
TITLE_LINES = 4  # the caption is cut to this many lines (a 40-word caption fits in 2-3 on a 6-panel-wide PNG)
KEY_GAP = 6  # between the caption and the key row, pixels
KEY_H = 20  # the key row, pixels
KEY_SIZE = 13  # key type size, pixels
BAR = (140, 12)  # the brightness bar, pixels (width, height)
INK, GREY = (20, 20, 20), (120, 120, 120)  # text colours
# the longest that fits: a word's map is scaled to max(its peak, 4 x the uniform share) (overlay.attention_map)
EXPLAIN = (
    "bright = where it looked (scaled to each word's peak, or to 4x the uniform share if larger)",
    "bright = where it looked (to its peak, or 4x uniform if larger)",
    "bright = where it looked",
)
Font = ImageFont.ImageFont | ImageFont.FreeTypeFont


def font(size: int, bold: bool = False, text: str = "") -> Font:
    """DejaVu Sans at ``size`` pixels, or, for a ``text`` it lacks characters of, an installed font that has them
    (text_attn.core.fonts: a caption in Chinese or Hindi is drawn in its letters, not as boxes)."""
    return _font(size, bold, fonts.font_path(text, bold) if text else None)


@lru_cache(maxsize=32)
def _font(size: int, bold: bool, path: str | None) -> Font:
    try:
        if path is None:
            from matplotlib import font_manager

            weight = "bold" if bold else 400
            path = font_manager.findfont(font_manager.FontProperties(family=fonts.BASE, weight=weight))
        return ImageFont.truetype(path, size)
    except (OSError, ImportError, ValueError):
        return ImageFont.load_default()


_boxes_said = False  # the characters no font has are named once a process (a folder's overlays share them)


def _say_boxes(words: Sequence[str]) -> None:
    global _boxes_said
    if not _boxes_said and (chars := fonts.uncovered(words)):
        _boxes_said = True
        warnings.warn(fonts.glyph_message(chars), fonts.GlyphWarning, stacklevel=3)


def _width(text: str, fnt: Font) -> float:
    return ImageDraw.Draw(Image.new("RGB", (1, 1))).textlength(text, font=fnt)


def wrap(words: Sequence[str], width: float) -> list[list[int]]:
    """Greedy word wrap of the caption at TITLE_SIZE (bold width, so a highlighted word never overflows): lines
    of word indices, at most TITLE_LINES (the rest is cut; :func:`draw_title` ends the last line with "...")."""
    space = _width(" ", font(TITLE_SIZE, bold=True))
    lines: list[list[int]] = []
    used = 0.0
    for i, word in enumerate(words):
        w = _width(word, font(TITLE_SIZE, bold=True, text=word))
        if lines and used + space + w <= width:
            lines[-1].append(i)
            used += space + w
        else:
            lines.append([i])
            used = w
    return lines[:TITLE_LINES] if words else [[]]


def key_top(lines: list[list[int]]) -> int:
    """y of the key row under a caption of these lines."""
    return MARGIN + len(lines) * TITLE_LINE + KEY_GAP


def header_height(lines: list[list[int]]) -> int:
    return key_top(lines) + KEY_H + MARGIN


def _direction(word: str) -> str | None:
    """ "R" where the word's first letter with a strong direction is Arabic or Hebrew, "L" where it is another
    script's, None where it has none (numbers, punctuation)."""
    for char in word:
        if (kind := unicodedata.bidirectional(char)) in ("L", "R", "AL"):
            return "L" if kind == "L" else "R"
    return None


def right_to_left(words: Sequence[str]) -> bool:
    """Whether a caption reads right to left: its first word with a strong direction is Arabic or Hebrew (Unicode's
    rule for a paragraph's direction, UAX #9 P2-P3, as a browser's dir="auto" applies it)."""
    return next((d for d in map(_direction, words) if d), "L") == "R"


def place_line(widths: Sequence[float], kinds: Sequence[str | None], start: float, space: float, rtl: bool):
    """Left x of each word of a line, in the caption's order, and where the line ends (the "..."'s anchor): the
    words advance from ``start`` in the caption's direction; a run of words of the other direction (a Latin name in
    an Arabic caption) keeps its own order inside its block, as the Unicode bidirectional algorithm orders them. A
    word with no direction of its own (a number) joins the run before it."""
    step = -1 if rtl else 1
    runs: list[tuple[str, list[int]]] = []
    for i, kind in enumerate(kinds):
        kind = kind or (runs[-1][0] if runs else ("R" if rtl else "L"))
        if runs and runs[-1][0] == kind:
            runs[-1][1].append(i)
        else:
            runs.append((kind, [i]))
    lefts = [0.0] * len(widths)
    x = start
    for kind, run in runs:
        block = sum(widths[i] for i in run) + space * (len(run) - 1)
        # a run advances in its own direction from its block's start edge
        own = -1 if kind == "R" else 1
        edge = min(x, x + step * block) if own > 0 else max(x, x + step * block)
        for i in run:
            lefts[i] = edge if own > 0 else edge - widths[i]
            edge += own * (widths[i] + space)
        x += step * (block + space)
    return lefts, x


def draw_title(canvas: Image.Image, words: Sequence[str], lines: list[list[int]], highlight: int | None = None) -> None:
    """The caption at the top of ``canvas``, as laid out by :func:`wrap`; word ``highlight`` bold, the rest grey. A
    right-to-left caption (Arabic, Hebrew) starts at the right margin and runs leftwards, its "..." at the left."""
    _say_boxes(words)
    draw = ImageDraw.Draw(canvas)
    regular = font(TITLE_SIZE)
    space = _width(" ", regular)
    cut = bool(lines[-1]) and lines[-1][-1] < len(words) - 1
    rtl = right_to_left(words)
    for row, line in enumerate(lines):
        y = MARGIN + row * TITLE_LINE + TITLE_LINE // 2
        fonts_ = [font(TITLE_SIZE, bold=i == highlight, text=words[i]) for i in line]
        widths = [_width(words[i], f) for i, f in zip(line, fonts_, strict=True)]
        start = canvas.width - MARGIN if rtl else MARGIN
        lefts, end = place_line(widths, [_direction(words[i]) for i in line], start, space, rtl)
        for i, fnt, left in zip(line, fonts_, lefts, strict=True):
            strong = highlight is None or i == highlight
            draw.text((left, y), words[i], fill=INK if strong else GREY, font=fnt, anchor="lm")
        if cut and row == len(lines) - 1:
            draw.text((end, y), "...", fill=GREY, font=regular, anchor="rm" if rtl else "lm")


def draw_key(canvas: Image.Image, y: int, floor: float, note: str = "") -> None:
    """The key row at height ``y``: a bar from brightness ``floor`` (no attention) to 1 (the word's peak) over a
    white field, labelled 0 and max; then the longest EXPLAIN that fits, and ``note`` right-aligned where it fits."""
    draw = ImageDraw.Draw(canvas)
    fnt = font(KEY_SIZE)
    mid = y + KEY_H // 2
    x = MARGIN
    for text in ("attention", "0"):
        draw.text((x, mid), text, fill=INK, font=fnt, anchor="lm")
        x += round(_width(text, fnt)) + 6
    bar_w, bar_h = BAR
    ramp = np.round(255 * (floor + (1 - floor) * np.linspace(0.0, 1.0, bar_w)))  # (bar_w,)
    strip = np.broadcast_to(ramp[None, :, None], (bar_h, bar_w, 3)).astype(np.uint8)
    top = mid - bar_h // 2
    canvas.paste(Image.fromarray(np.ascontiguousarray(strip), mode="RGB"), (x, top))
    draw.rectangle([x - 1, top - 1, x + bar_w, top + bar_h], outline=GREY, width=1)
    x += bar_w + 6
    draw.text((x, mid), "max", fill=INK, font=fnt, anchor="lm")
    x += round(_width("max", fnt)) + 14
    right = canvas.width - MARGIN
    if note:
        note_w = _width(note, fnt)
        if x + note_w <= right:
            draw.text((right - note_w, mid), note, fill=INK, font=fnt, anchor="lm")
            right -= round(note_w) + 14
    explain = next((text for text in EXPLAIN if x + _width(text, fnt) <= right), None)
    if explain:
        draw.text((x, mid), explain, fill=GREY, font=fnt, anchor="lm")


def draw_label(canvas: Image.Image, text: str, x: int, y: int, width: int, height: int, index: int | None) -> None:
    """A panel's word centred in the band (x, y, width, height), shrunk until it fits; its 1-based position in grey
    at the band's left (words repeat: "a" ... "a")."""
    draw = ImageDraw.Draw(canvas)
    mid = y + height / 2
    lead = 0
    if index is not None:
        num = str(index)
        draw.text((x + 2, mid), num, fill=GREY, font=font(11), anchor="lm")
        lead = round(_width(num, font(11))) + 6
    room = width - 2 * lead
    for size in (15, 13, 11, 9):  # shrink long words until they fit the panel
        fnt = font(size, bold=True, text=text)
        if _width(text, fnt) <= room:
            break
    else:  # not even at 9 points (a 2 x 500 photo's 56-pixel panels): cut, as "standi…", not over the next panel
        while len(text) > 1 and _width(text + "…", fnt) > room:
            text = text[:-1]
        text = text + "…" if _width(text + "…", fnt) <= room else text[:1]
    draw.text((x + width / 2, mid), text, fill=INK if index is not None else GREY, font=fnt, anchor="mm")
