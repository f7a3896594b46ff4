"""text_attn.core.fonts: a label's characters drawn in a font that has them (matplotlib's bundled STIXGeneral has
the circled letters DejaVu Sans lacks, on every machine), fonts installed after matplotlib cached its list found,
and the characters no font has named (the pictures' use of it: tests/text/test_plots.py, test_overlay.py)."""

import numpy as np
from matplotlib import font_manager

from text_attn.core import fonts

CIRCLED = "Ⓐ"  # in STIXGeneral, not in DejaVu Sans
NOWHERE = "\u0378"  # unassigned: in no font


def _has(path: str, char: str) -> bool:
    return ord(char) in fonts._charmap(path)


def test_dejavu_first_then_a_font_that_has_the_characters():
    plain, bold = fonts.font_path("Hund"), fonts.font_path("Hund", bold=True)
    assert plain.endswith("DejaVuSans.ttf") and bold.endswith("DejaVuSans-Bold.ttf")
    other = fonts.font_path(f"a{CIRCLED}")
    assert not other.endswith("DejaVuSans.ttf") and _has(other, CIRCLED) and _has(other, "a")
    chosen = fonts.families(["Hund", CIRCLED])
    assert chosen[0] == "DejaVu Sans" and len(chosen) == 2
    assert fonts.families(["Hund", "Straße", "собака", "كلب"]) == ["DejaVu Sans"]  # DejaVu has these scripts


def test_spaces_and_joiners_need_no_glyph_and_unassigned_characters_are_named_once():
    assert fonts.uncovered(["a b\u200dc\u200e", "\t"]) == ""
    assert fonts.uncovered([f"x{NOWHERE}", NOWHERE, CIRCLED]) == NOWHERE
    message = fonts.glyph_message("".join(chr(0x378 + k) for k in range(25)))
    assert message.startswith("25 character(s)") and "and 5 more" in message


def test_a_font_installed_after_matplotlib_cached_its_list_is_found(monkeypatch):
    stix = fonts.font_path(CIRCLED)
    kept = [f for f in font_manager.fontManager.ttflist if not _has(f.fname, CIRCLED)]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", kept)  # the cached list, without any font that has it
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda: [stix])  # ... which the system has
    monkeypatch.setattr(fonts, "_rescanned", False)
    fonts._fonts.cache_clear()
    try:
        assert fonts.font_path(CIRCLED) == stix and fonts.uncovered([CIRCLED]) == ""
        assert not fonts._rescan()  # once a process
    finally:
        fonts._fonts.cache_clear()


def test_the_fallback_draws_the_character_not_the_missing_glyph_box():
    """DejaVu Sans draws every character it lacks as one box (its .notdef): the circled A and an unassigned code
    point look the same in it; the font chosen for the circled A draws something else."""
    from PIL import Image, ImageDraw, ImageFont

    def drawn(char: str, path: str) -> np.ndarray:
        canvas = Image.new("L", (60, 60), 0)
        ImageDraw.Draw(canvas).text((5, 5), char, fill=255, font=ImageFont.truetype(path, 40))
        return np.asarray(canvas)

    dejavu = fonts.font_path("a")
    box = drawn(NOWHERE, dejavu)
    assert box.any() and np.array_equal(drawn(CIRCLED, dejavu), box)
    assert not np.array_equal(drawn(CIRCLED, fonts.font_path(CIRCLED)), box)
