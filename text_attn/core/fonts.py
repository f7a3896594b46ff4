"""Fonts that have a label's characters: alignment grids (matplotlib) and overlay PNGs (Pillow) draw a token with
matplotlib's bundled DejaVu Sans where it can, else with an installed font that has every character of it (Noto
CJK, Devanagari, Thai ...: DejaVu Sans has Latin, Greek, Cyrillic, Arabic and Hebrew, not those), so that a model
trained on Chinese or Hindi labels its pictures with its words, not with empty boxes. Characters no installed font
has are named once (:class:`GlyphWarning`), not one warning per character and picture.

Fonts are matplotlib's list (its bundled ones and the system's), read lazily: the first call for a text DejaVu
Sans lacks reads the other fonts' character maps, once each.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache, lru_cache

BASE = "DejaVu Sans"  # what every picture is drawn in first
# placeholder fonts: their "glyph" of any character is a box naming its block, no better than the box
_NOT_TEXT = ("Last Resort",)


class GlyphWarning(UserWarning):
    """Characters of a picture's labels that no installed font has: drawn as boxes."""


def _drawn(text: str) -> set[int]:
    """The code points a font must have to draw ``text``: not spaces, not format characters (ZWJ, ZWNJ, marks of
    direction), which no font needs to show."""
    return {ord(c) for c in text if not c.isspace() and unicodedata.category(c) != "Cf"}


@cache
def _charmap(path: str) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    try:
        return frozenset(FT2Font(path).get_charmap())
    except (OSError, RuntimeError, ValueError):  # a font file FreeType cannot read: it has nothing
        return frozenset()


@lru_cache(maxsize=2)
def _fonts(bold: bool) -> tuple[tuple[str, str], ...]:
    """(family, path) of every installed upright font of the weight, one per family: DejaVu Sans first, then sans
    families, then the rest, by name."""
    from matplotlib import font_manager

    weight = 700 if bold else 400
    best: dict[str, tuple[int, str]] = {}
    for f in font_manager.fontManager.ttflist:
        if f.style != "normal" or f.name.startswith(_NOT_TEXT):
            continue
        try:
            off = abs(int(f.weight) - weight)
        except (TypeError, ValueError):  # a named weight ("bold"): matplotlib's own table
            off = abs(font_manager.weight_dict.get(str(f.weight), 400) - weight)
        if f.name not in best or off < best[f.name][0]:
            best[f.name] = (off, f.fname)
    order = sorted(best, key=lambda n: (n != BASE, "Sans" not in n, n))
    return tuple((n, best[n][1]) for n in order)


def _rescan() -> bool:
    """Add the system's fonts that matplotlib's cached list (~/.cache/matplotlib) lacks, once a process: a font
    installed after matplotlib first ran is not in it. True where any were added."""
    global _rescanned
    if _rescanned:
        return False
    _rescanned = True
    from matplotlib import font_manager

    known = {f.fname for f in font_manager.fontManager.ttflist}
    added = False
    for path in font_manager.findSystemFonts():
        if path not in known:
            try:
                font_manager.fontManager.addfont(path)
                added = True
            except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read
                continue
    if added:
        _fonts.cache_clear()
    return added


_rescanned = False


def _fonts_or_none(bold: bool) -> tuple[tuple[str, str], ...]:
    try:
        return _fonts(bold)
    except ImportError:  # no matplotlib: Pillow's default font, no fallback
        return ()


def _first_with_all(need: set[int], bold: bool) -> tuple[str | None, int]:
    """The file of the first font that has every character of ``need`` (else the one with most) and how many of
    ``need`` it has."""
    best: tuple[str | None, int] = (None, -1)
    for _, path in _fonts_or_none(bold):
        have = len(need & _charmap(path))
        if have == len(need):
            return path, have
        if have > best[1]:
            best = (path, have)
    return best


def font_path(text: str, bold: bool = False) -> str | None:
    """The file of the first font (DejaVu Sans first) that has every character of ``text``; where none has them
    all, the one that has most; None where matplotlib lists no font."""
    need = _drawn(text)
    path, have = _first_with_all(need, bold)
    if have < len(need) and _rescan():
        path, have = _first_with_all(need, bold)
    return path


def _cover(need: set[int]) -> tuple[list[str], set[int]]:
    """The families, in order, each of which has a character of ``need`` the ones before it lack (DejaVu Sans
    always first), and the characters none has."""
    chosen, need = [BASE], set(need)
    for name, path in _fonts_or_none(False):
        if not need:
            break
        if found := need & _charmap(path):
            chosen += [name] if name != BASE else []
            need -= found
    return chosen, need


def _covered(texts: Iterable[str]) -> tuple[list[str], set[int]]:
    need = set().union(*map(_drawn, texts))
    chosen, left = _cover(need)
    if left and _rescan():
        chosen, left = _cover(need)
    return chosen, left


def families(texts: Iterable[str]) -> list[str]:
    """matplotlib's font family list for labels ``texts``: DejaVu Sans, then each installed family that has a
    character the ones before it lack (matplotlib falls back per glyph along the list)."""
    return _covered(texts)[0]


def uncovered(texts: Iterable[str]) -> str:
    """The characters of ``texts`` that no installed font has, each once, in code point order."""
    return "".join(map(chr, sorted(_covered(texts)[1])))


def glyph_message(chars: str) -> str:
    """One line naming the characters drawn as boxes and what to do."""
    shown = " ".join(chars[:20]) + (f" and {len(chars) - 20} more" if len(chars) > 20 else "")
    return (
        f"{len(chars)} character(s) of the labels are in no installed font and are drawn as boxes: {shown}; "
        "install a font that has them (e.g. Debian's fonts-noto-core, fonts-noto-cjk) and the pictures use it"
    )


def warn_uncovered(texts: Iterable[str], stacklevel: int = 3) -> None:
    """One :class:`GlyphWarning` naming the characters of ``texts`` that no installed font has (none if all are)."""
    if chars := uncovered(texts):
        warnings.warn(glyph_message(chars), GlyphWarning, stacklevel=stacklevel)


@contextmanager
def quiet_missing_glyphs() -> Iterator[None]:
    """A block in which matplotlib's one warning per missing character is not shown (:func:`warn_uncovered` says it
    once): ``with quiet_missing_glyphs(): fig.savefig(...)``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        yield
