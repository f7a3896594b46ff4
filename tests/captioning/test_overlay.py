"""captioning.views.overlay: attention maps placed through the encoder's crop box (hand-computed cells), their scale,
and the PNGs: sizes from the documented layout rule, attention as brightness (the attended part bright, the rest
dimmed, a neutral veil on dark images: no colour map), the caption title and the brightness key, long captions in
bounded rows, word labels and hard-attention marks."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from captioning.photos.preprocess import Preprocess
from captioning.views.overlay import (
    FLOOR,
    FOCUS,
    GAP,
    GLOW,
    LABEL_H,
    MAX_WORDS,
    attention_map,
    draw_overlay,
    draw_word_panels,
    grid_layout,
    word_filename,
    word_png_size,
)
from captioning.views.overlay_layout import BAR, KEY_H, MARGIN, TITLE_LINE, draw_label, key_top

COFFEE = Path(__file__).parent.parent / "fixtures" / "images" / "coffee.png"  # 256 x 171


def one_hot(grid: int, r: int, c: int) -> torch.Tensor:
    a = torch.zeros(grid * grid)
    a[r * grid + c] = 1.0
    return a


# --- attention_map ------------------------------------------------------------------------------------------------
def test_one_hot_peaks_in_its_cell_of_the_centre_crop():
    box = Preprocess(64, crop=True).crop_box(256, 171)
    assert box == (42.5, 0.0, 213.5, 171.0)  # centre square of side 171
    m = attention_map(one_hot(4, 1, 2), 4, (256, 171), box)
    assert m.shape == (171, 256)
    # cell (1, 2): x in [42.5 + 2 * 42.75, 42.5 + 3 * 42.75) = [128, 170.75), y in [42.75, 85.5); centre
    # (149.375, 64.125). The nearest pixel centres are x = 149.5 (pixel 149) and y = 64.5 (pixel 64).
    y, x = np.unravel_index(m.argmax(), m.shape)
    assert (y, x) == (64, 149)
    assert m.max() == pytest.approx(1.0, abs=0.01)
    # Keys' kernel is 0.5625 half a cell from a centre: above 0.6 lies strictly inside the cell
    hot_y, hot_x = np.nonzero(m > 0.6)
    assert 128 <= hot_x.min() + 0.5 and hot_x.max() + 0.5 < 170.75  # the bright part stays inside the cell
    assert 42.75 <= hot_y.min() + 0.5 and hot_y.max() + 0.5 < 85.5
    # outside the crop box (pixel centres < 42.5 or >= 213.5) the network saw nothing: 0
    assert m[:, :42].max() == 0.0 and m[:, 213:].max() == 0.0
    assert m[:, 42:213].max() > 0
    # the bicubic kernel reaches two cells at most: cell (3, 0) is untouched
    assert m[int(3.5 * 42.75), int(42.5 + 0.5 * 42.75)] == 0.0
    assert m.min() >= 0.0


def test_one_hot_without_crop_covers_the_whole_image():
    m = attention_map(one_hot(4, 2, 1), 4, (256, 171), Preprocess(64, crop=False).crop_box(256, 171))
    # cell (2, 1): x in [64, 128), y in [85.5, 128.25); centre (96, 106.875): pixel centres 95.5 and 96.5 tie in x,
    # 106.5 is nearest in y
    y, x = np.unravel_index(m.argmax(), m.shape)
    assert y == 106 and x in (95, 96)
    assert m[106, 95] == pytest.approx(m[106, 96])
    hot_y, hot_x = np.nonzero(m > 0.6)
    assert 64 <= hot_x.min() and hot_x.max() < 128 and 85 <= hot_y.min() and hot_y.max() < 129
    corner = attention_map(one_hot(4, 0, 0), 4, (256, 171), (0, 0, 256, 171))
    assert corner[0, 0] > 0.95  # edge cells extend to the border (clamped), no fade to 0 at the image edge


def test_scale_uniform_and_focused():
    g, L = 4, 16
    flat = attention_map(torch.full((L,), 1 / L), g, (256, 171), (42.5, 0, 213.5, 171))
    # uniform attention is a faint even tint, 1 / FOCUS, on the crop and 0 outside
    np.testing.assert_allclose(flat[:, 43:213], 1 / FOCUS, atol=1e-9)
    assert flat[:, :42].max() == 0.0 and flat[:, 214:].max() == 0.0
    # attention spread evenly over the top-left quadrant (4 of 16 cells: FOCUS times uniform) reaches 1 there
    quad = torch.zeros(g, g)
    quad[:2, :2] = 0.25
    m = attention_map(quad.flatten(), g, (200, 200), (0, 0, 200, 200))
    np.testing.assert_allclose(m[:60, :60], 1.0, atol=1e-9)  # well inside the quadrant: flat at full scale
    assert m[150:, 150:].max() < 0.01  # only the product of two small negative bicubic lobes reaches here
    # the map does not depend on the overall scale of α once it is focused
    np.testing.assert_allclose(attention_map(3 * quad.flatten(), g, (200, 200), (0, 0, 200, 200)), m)
    with pytest.raises(ValueError, match="grid"):
        attention_map(torch.ones(15), 4, (10, 10), (0, 0, 10, 10))


# --- PNGs ---------------------------------------------------------------------------------------------------------
BOX = (42.5, 0, 213.5, 171)  # the centre crop of coffee.png
PW, PH = 224, 150  # a grid panel of coffee.png: 171 * 224 / 256 = 149.6
HEADER = 74  # one caption line: MARGIN 12 + line 24 + gap 6 + key row 20 + MARGIN 12


def _alphas(grid: int, cells: list[tuple[int, int]]) -> torch.Tensor:
    return torch.stack([one_hot(grid, r, c) for r, c in cells])  # (T, L)


def _png(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)


@pytest.mark.parametrize(
    ("n_words", "cols", "size"),
    [
        # width = max(cols * 224 + (cols + 1) * 4, 320); height = 74 + rows * (24 + 150) + (rows + 1) * 4
        (3, None, (916, 256)),  # 4 panels, one row of 4
        (7, None, (916, 434)),  # 8 panels: 2 rows (at most 6 per row), filled evenly: 4 + 4
        (11, None, (1372, 434)),  # 12 panels: 6 + 6
        (2, 3, (688, 256)),
        (0, None, (320, 256)),  # the image alone, on the key's minimum width
    ],
)
def test_overlay_size_follows_the_layout_rule(tmp_path, n_words, cols, size):
    words = [f"w{i}" for i in range(n_words)]
    cells = [(i % 4, (i * 3) % 4) for i in range(n_words)]
    alphas = _alphas(4, cells) if n_words else torch.zeros(0, 16)
    path = draw_overlay(Image.open(COFFEE), words, alphas, 4, BOX, tmp_path / "o.png", cols=cols)
    assert path == tmp_path / "o.png"
    assert Image.open(path).size == size == grid_layout((256, 171), words, cols).size


def test_attention_is_brightness_over_the_image_with_its_own_colours(tmp_path):
    image = Image.open(COFFEE).convert("RGB")
    path = draw_overlay(image, ["cup", "saucer"], _alphas(4, [(1, 2), (3, 0)]), 4, BOX, tmp_path / "o.png")
    out = _png(path)
    top = HEADER + GAP + LABEL_H

    def panel(k: int) -> np.ndarray:
        x = GAP + k * (PW + GAP)
        return out[top : top + PH, x : x + PW]

    base = np.asarray(image.resize((PW, PH), Image.Resampling.BICUBIC), dtype=np.float64)
    np.testing.assert_array_equal(panel(0), base)  # first panel: the image itself
    # inside the crop box (panel x in [37.2, 186.8), pixels 37-186) every pixel is the image times one brightness
    # factor, FLOOR + (1 - FLOOR) * map, plus a neutral veil where it looked, as strong as the image is dark: no
    # colour map is blended in
    amap = attention_map(one_hot(4, 1, 2), 4, (PW, PH), (37.2, 0, 186.8, PH))[..., None]
    glow = GLOW * (1 - (base[:, 37:187] / 255 @ np.array([0.299, 0.587, 0.114])).mean())
    assert 0.1 < glow < 0.25  # a mid-dark photo
    lit = base * (FLOOR + (1 - FLOOR) * amap)
    expected = lit + glow * amap * (255 - lit)
    np.testing.assert_allclose(panel(1)[:, 37:187], expected[:, 37:187], atol=1)
    # the attended cell (1, 2) -> x in [112, 149.4), y in [37.5, 75) is bright: at its centre (130.7, 56.25) the
    # image at full brightness under the veil; the far cells are dimmed to FLOOR
    centre = base[55:58, 129:132]
    np.testing.assert_allclose(panel(1)[55:58, 129:132], centre + glow * (255 - centre), atol=3)
    hot, cold = panel(1)[45:68, 120:142], panel(1)[100:150, 40:100]
    np.testing.assert_allclose(cold, FLOOR * base[100:150, 40:100], atol=2)  # (bicubic lobes: a trace of veil)
    assert hot.sum() / base[45:68, 120:142].sum() > 0.8 > 0.3 > cold.sum() / base[100:150, 40:100].sum()
    white = _png(draw_overlay(Image.new("RGB", (64, 64), "white"), ["a"], one_hot(4, 0, 0)[None], 4, (0, 0, 64, 64),
                              tmp_path / "w.png"))  # fmt: skip
    assert white[HEADER + GAP + LABEL_H + 20, GAP + PW + GAP + 20].tolist() == [255] * 3  # no veil: nothing to lift
    # outside the crop box the network saw nothing: grey (R = G = B), at FLOOR
    outside = panel(2)[:, :36]
    luma = base[:, :36] @ np.array([0.299, 0.587, 0.114])
    np.testing.assert_allclose(outside, np.repeat(FLOOR * luma[..., None], 3, -1), atol=1)


def test_the_caption_is_the_title_and_the_key_shows_the_brightness_scale(tmp_path):
    words = ["a", "cup", "of", "coffee"]
    out = _png(draw_overlay(Image.open(COFFEE), words, _alphas(4, [(0, 0)] * 4), 4, BOX, tmp_path / "o.png"))
    title = out[MARGIN : MARGIN + TITLE_LINE, MARGIN:400]
    assert (title < 100).any() and (out[:MARGIN] == 255).all()  # the caption is written above everything
    untitled = _png(draw_overlay(Image.open(COFFEE), [], torch.zeros(0, 16), 4, BOX, tmp_path / "e.png"))
    assert (untitled[MARGIN : MARGIN + TITLE_LINE] == 255).all()  # no caption, no ink: the ink above is the words
    # the key row holds the bar: grey from FLOOR (no attention) to white (the word's peak), left to right
    row = out[key_top([[0]]) + KEY_H // 2, :, 0]
    ramp = np.round(255 * (FLOOR + (1 - FLOOR) * np.linspace(0, 1, BAR[0])))
    starts = [x for x in range(len(row) - BAR[0]) if np.array_equal(row[x : x + BAR[0]], ramp)]
    assert len(starts) == 1


def test_a_caption_in_another_script_is_drawn_in_its_letters_and_boxes_are_named_once(tmp_path, monkeypatch):
    """A word DejaVu Sans lacks is drawn in a font that has it (the title and its panel's label: the pixels differ
    from the missing-glyph box); a character no font has gets one GlyphWarning a process, not one a photo."""
    import warnings

    from captioning.views import overlay_layout
    from text_attn.core import fonts

    circled, nowhere = "Ⓐ", "\u0378"  # in matplotlib's bundled STIXGeneral / in no font
    assert overlay_layout.font(18, text=circled).path == fonts.font_path(circled) != fonts.font_path("a")
    assert overlay_layout.font(18, text="cup").path == fonts.font_path("a")

    def title(word: str) -> np.ndarray:
        out = _png(draw_overlay(Image.open(COFFEE), [word], _alphas(4, [(0, 0)]), 4, BOX, tmp_path / "t.png"))
        return out[MARGIN : MARGIN + TITLE_LINE, MARGIN : MARGIN + 40]

    monkeypatch.setattr(overlay_layout, "_boxes_said", False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        drawn, box = title(circled), title(nowhere)
        assert np.array_equal(title(nowhere), box)  # a second photo's caption: nothing said again
    assert (box < 100).any() and not np.array_equal(drawn, box)
    assert [type(w.message) for w in seen] == [fonts.GlyphWarning] and nowhere in str(seen[0].message)


def test_words_are_placed_in_the_order_the_unicode_bidirectional_algorithm_reads_them():
    from captioning.views.overlay_layout import place_line, right_to_left

    assert place_line([10, 20, 30], ["L", "L", "L"], 12, 5, rtl=False) == ([12, 27, 52], 87)
    assert place_line([10, 20, 30], ["R", "R", "R"], 100, 5, rtl=True) == ([90, 65, 30], 25)  # from the right
    # Hebrew, two Latin words, Hebrew: the Latin pair keeps its order inside its block (right to left: 0, 1 2, 3)
    assert place_line([10, 20, 30, 40], ["R", "L", "L", "R"], 200, 5, rtl=True) == ([190, 130, 155, 85], 80)
    # English with an Arabic word and a number after it: the pair reads right to left (0, 2 1, 3)
    assert place_line([10, 20, 30, 40], ["L", "R", None, "L"], 0, 5, rtl=False) == ([0, 50, 15, 75], 120)
    assert right_to_left(["12", "كلب", "dog"]) and not right_to_left(["12", "dog", "كلب"])
    assert not right_to_left(["12", ","])


@pytest.mark.parametrize("words", [["a", "dog"], ["كلب", "أسود"]])
def test_an_arabic_caption_starts_at_the_right_margin(tmp_path, words):
    out = _png(draw_overlay(Image.open(COFFEE), words, _alphas(4, [(0, 0)] * 2), 4, BOX, tmp_path / "t.png"))
    ink = (out[MARGIN : MARGIN + TITLE_LINE].min(axis=(0, 2)) < 100).nonzero()[0]  # columns with dark title ink
    width = out.shape[1]
    if words[0] == "a":
        assert ink.min() < MARGIN + 3 and ink.max() < width / 2
    else:
        assert ink.max() > width - MARGIN - 3 and ink.min() > width / 2


def test_a_long_caption_is_drawn_in_bounded_rows(tmp_path):
    words = [f"word{i}" for i in range(55)]
    alphas = torch.softmax(torch.randn(55, 16, generator=torch.Generator().manual_seed(0)), -1)
    lay = grid_layout((256, 171), words)
    assert lay.shown == MAX_WORDS == 40 and lay.cols == 6 and lay.rows == 7  # 41 panels, 6 per row
    assert 2 <= len(lay.lines) <= 4  # the 55-word caption wraps in the title
    path = draw_overlay(Image.open(COFFEE), words, alphas, 4, BOX, tmp_path / "long.png")
    width, height = Image.open(path).size
    assert (width, height) == lay.size and width <= 1400 and height <= 1500
    out = _png(path)
    # the note "first 40 of 55 words drawn" sits at the right of the key row; the bottom row holds panels 37-41
    key = out[key_top(lay.lines) : key_top(lay.lines) + KEY_H, width // 2 : width - MARGIN]
    assert (key < 100).any()
    last_row = lay.header + GAP + 6 * (LABEL_H + PH + GAP) + LABEL_H
    x_last = lay.left + GAP + 4 * (PW + GAP)  # panel 41 = column 5 of row 7
    assert (out[last_row + 10, x_last + 10] != 255).any() and (out[last_row + 10, x_last + PW + 20] == 255).all()


def test_chosen_region_is_outlined(tmp_path):
    image = Image.open(COFFEE)
    alphas = _alphas(4, [(0, 0), (2, 3)])
    plain = np.asarray(Image.open(draw_overlay(image, ["a", "b"], alphas, 4, BOX, tmp_path / "p.png")))
    marked = np.asarray(Image.open(draw_overlay(image, ["a", "b"], alphas, 4, BOX, tmp_path / "m.png", [None, 9])))
    ys, xs = np.nonzero((plain != marked).any(-1))
    assert len(ys) > 50  # something was drawn ...
    # ... only around region 9 = (row 2, col 1) of panel 2: crop x in [37.2, 186.8) -> cell x in [74.6, 112),
    # y in [75, 112.5) of the panel, whose top-left corner is (2 * 228 + 4, 74 + 4 + 24) in the PNG
    x0, y0 = 2 * (PW + GAP) + GAP, HEADER + GAP + LABEL_H
    assert xs.min() >= x0 + 74 and xs.max() < x0 + 113 and ys.min() >= y0 + 75 and ys.max() < y0 + 113
    assert xs.max() - xs.min() > 30 and ys.max() - ys.min() > 30  # the whole cell outline, not a dot
    with pytest.raises(ValueError, match="outside"):
        draw_overlay(image, ["a", "b"], alphas, 4, BOX, tmp_path / "x.png", [None, 16])
    with pytest.raises(ValueError, match="chosen"):
        draw_overlay(image, ["a", "b"], alphas, 4, BOX, tmp_path / "x.png", [1])


def test_shape_mismatch_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="2 words x 16 regions"):
        draw_overlay(Image.open(COFFEE), ["a", "b"], torch.zeros(3, 16), 4, (0, 0, 256, 171), tmp_path / "x.png")


def test_word_panels(tmp_path):
    words = ["a", "<unk>", "circle"]
    image = Image.open(COFFEE)
    paths = draw_word_panels(image, words, _alphas(4, [(0, 0), (1, 1), (2, 2)]), 4, (0, 0, 256, 171), tmp_path, "cup")
    assert [p.name for p in paths] == ["cup-01-a.png", "cup-02-unk.png", "cup-03-circle.png"]
    assert sorted(Path(tmp_path).iterdir()) == sorted(paths)
    # a useful size: the panel's longer side is 512 px (171 * 2 = 342 high), under the caption and the key
    assert word_png_size((256, 171), words) == (512 + 2 * GAP, HEADER + 342 + GAP)
    for p in paths:
        assert Image.open(p).size == (520, 420)
    out = _png(paths[2])
    base = np.asarray(image.convert("RGB").resize((512, 342), Image.Resampling.BICUBIC), dtype=np.float64)
    # its word's cell (2, 2): x in [256, 384), y in [171, 256.5), at full brightness in its centre (320, 213.75)
    glow = GLOW * (1 - (base / 255 @ np.array([0.299, 0.587, 0.114])).mean())
    centre = base[212:215, 319:322]
    np.testing.assert_allclose(out[HEADER + 212 : HEADER + 215, GAP + 319 : GAP + 322], centre + glow * (255 - centre),
                               atol=3)  # fmt: skip
    corner = out[HEADER + 10 : HEADER + 60, GAP + 10 : GAP + 60]  # cell (0, 0), far from it: dimmed
    np.testing.assert_allclose(corner, FLOOR * base[10:60, 10:60], atol=1)
    assert word_filename("x", 12, "a/b c") == "x-12-a_b_c.png"
    # never a photo's overlay name: p.png's first word "attention" was written over p-01.png's overlay
    assert word_filename("p", 1, "Attention") == "p-01-Attention_.png" != "p-01" + "-attention.png"


@pytest.mark.parametrize("size", [(1, 1000), (1000, 1), (40, 1000)])
def test_a_sliver_of_an_image_gets_panels_wide_enough_for_their_words(tmp_path, size):
    """A 1 x 1000 strip once gave 1-pixel panels whose word labels were drawn on top of each other: panels are
    stretched to at most 4:1, so each is at least 56 pixels on its shorter side."""
    image = Image.open(COFFEE).convert("RGB").resize(size)
    words = ["a", "man", "is", "standing"]
    alphas = _alphas(4, [(0, 0), (1, 1), (2, 2), (3, 3)])
    box = (0.0, 0.0, float(size[0]), float(size[1]))
    lay = grid_layout(size, words)
    assert min(lay.panel) == 56 and max(lay.panel) == 224
    path = draw_overlay(image, words, alphas, 4, box, tmp_path / "o.png")
    assert Image.open(path).size == lay.size


@pytest.mark.parametrize(
    "size, box, grid", [((3000, 300), (1350, 0, 1650, 300), 8), ((2000, 500), (0, 0, 2000, 500), 28)]
)
def test_a_chosen_cell_a_few_pixels_small_is_marked_not_a_crash(tmp_path, size, box, grid):
    # a cropped 10:1 panorama's cells are 2.8 px wide in its panel, a 4:1 photo's on a 28 x 28 grid 2 px high: the
    # inset outline came out inverted, Pillow raised, and the whole `caption` run ended with 0 captions written
    image = Image.new("RGB", size, (128, 128, 128))
    alphas = torch.full((1, grid * grid), 1.0 / (grid * grid))
    plain = np.asarray(Image.open(draw_overlay(image, ["a"], alphas, grid, box, tmp_path / "p.png")))

    def marked_box(region: int) -> tuple[int, int, int, int]:  # the changed pixels' (y0, y1, x0, x1)
        marked = np.asarray(Image.open(draw_overlay(image, ["a"], alphas, grid, box, tmp_path / "m.png", [region])))
        ys, xs = np.nonzero((plain != marked).any(-1))
        assert len(ys) > 0  # the cell is marked, however small
        return ys.min(), ys.max(), xs.min(), xs.max()

    first, last = marked_box(0), marked_box(grid * grid - 1)
    # where its cell is: the last one right of and below the first (any change anywhere passed), each a small mark
    assert last[0] > first[1] and last[2] > first[3], (first, last)
    assert all(b[1] - b[0] < 12 and b[3] - b[2] < 12 for b in (first, last)), (first, last)


def test_a_caption_s_overlay_is_the_picture_draw_overlay_writes(tmp_path):
    """Caption.overlay (the public way to the picture in Python: notebooks used the private _repr_png_) gives the
    pixels draw_overlay writes for the same photo, words, attention and crop box; a panel side of its own scales it;
    a caption without its photo, or a side out of range, is one ValueError."""
    from captioning import DEMO_PHOTOS, Captioner, load_image

    captioner = Captioner.load("shapes")
    cap = captioner.caption_images([DEMO_PHOTOS[0]], beam_size=1, max_len=6)[0]
    image = load_image(DEMO_PHOTOS[0])
    box = captioner.preprocess.crop_box(*image.size)
    written = draw_overlay(image, cap.words, cap.alphas, captioner.grid, box, tmp_path / "o.png")
    assert np.array_equal(np.asarray(cap.overlay()), np.asarray(Image.open(written).convert("RGB")))
    assert cap.overlay(160).width < cap.overlay().width
    with pytest.raises(ValueError, match="panel_side must be an integer from 32 to 2048 pixels, got 10"):
        cap.overlay(10)
    features = captioner.encode(captioner.preprocess(image)[None])
    with pytest.raises(ValueError, match="this caption has no photo to draw over"):
        captioner.caption_features(features)[0].overlay()


def test_a_label_too_wide_for_its_panel_even_at_the_smallest_size_is_cut_not_drawn_over_the_next():
    """A 2 x 500 photo's panels are 56 pixels wide: "standing τ +0.45" ran over the position number and into the
    next panel."""
    canvas = Image.new("RGB", (200, 30), "white")
    draw_label(canvas, "standing τ +0.45", 20, 0, 56, 30, 4)
    ink = np.asarray(canvas.convert("L")) < 250  # (H, W): where anything was drawn
    columns = np.nonzero(ink.any(axis=0))[0]
    assert columns.min() >= 20 and columns.max() < 20 + 56, (columns.min(), columns.max())
    wide = Image.new("RGB", (400, 30), "white")
    draw_label(wide, "standing", 0, 0, 400, 30, 4)  # room enough: drawn whole, as before
    assert (np.asarray(wide.convert("L")) < 250).any(axis=0).sum() > 40
