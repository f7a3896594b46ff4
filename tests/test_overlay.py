"""captioning.overlay: attention maps placed through the encoder's crop box (hand-computed cells), their scale,
and the PNG layout (sizes from the documented rule, panel contents, word labels, hard-attention marks)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from captioning.overlay import (
    DIM,
    FOCUS,
    GAP,
    LABEL_H,
    attention_map,
    draw_overlay,
    draw_word_panels,
    word_filename,
)
from captioning.preprocess import Preprocess

COFFEE = Path(__file__).parent / "fixtures" / "images" / "coffee.png"  # 256 x 171


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
def _alphas(grid: int, cells: list[tuple[int, int]]) -> torch.Tensor:
    return torch.stack([one_hot(grid, r, c) for r, c in cells])  # (T, L)


@pytest.mark.parametrize(
    ("n_words", "cols", "size"),
    [
        # panels 224 x 150 (171 * 224 / 256 = 149.6); width = cols * 224 + (cols + 1) * 4,
        # height = rows * (22 + 150) + (rows + 1) * 4
        (3, None, (916, 180)),  # 4 panels, one row of 4
        (7, None, (1144, 356)),  # 8 panels: 5 per row by default, 2 rows
        (2, 3, (688, 180)),
        (0, None, (232, 180)),  # the image alone
    ],
)
def test_overlay_size_follows_the_layout_rule(tmp_path, n_words, cols, size):
    words = [f"w{i}" for i in range(n_words)]
    cells = [(i % 4, (i * 3) % 4) for i in range(n_words)]
    alphas = _alphas(4, cells) if n_words else torch.zeros(0, 16)
    path = draw_overlay(Image.open(COFFEE), words, alphas, 4, (42.5, 0, 213.5, 171), tmp_path / "o.png", cols=cols)
    assert path == tmp_path / "o.png"
    assert Image.open(path).size == size


def test_overlay_panels_show_image_attention_and_words(tmp_path):
    image = Image.open(COFFEE).convert("RGB")
    box = (42.5, 0, 213.5, 171)
    path = draw_overlay(image, ["cup", "saucer"], _alphas(4, [(1, 2), (3, 0)]), 4, box, tmp_path / "o.png")
    out = np.asarray(Image.open(path), dtype=np.int16)
    pw, ph = 224, 150
    top = GAP + LABEL_H

    def panel(k: int) -> np.ndarray:
        x = GAP + k * (pw + GAP)
        return out[top : top + ph, x : x + pw]

    base = np.asarray(image.resize((pw, ph), Image.Resampling.BICUBIC), dtype=np.int16)
    np.testing.assert_array_equal(panel(0), base)  # first panel: the image itself
    assert (out[GAP:top, GAP : GAP + pw] == 255).all()  # ... with a blank label band
    assert (out[GAP:top, 2 * GAP + pw : 2 * GAP + 2 * pw] < 128).any()  # the word is written above panel 1
    # crop box in panel pixels: x in [37.2, 186.8); outside it the image is only dimmed
    np.testing.assert_allclose(panel(1)[:, :36], DIM * base[:, :36], atol=1)
    np.testing.assert_allclose(panel(2)[:, 188:], DIM * base[:, 188:], atol=1)
    # the colour change is largest in the attended cell: (1, 2) -> x in [112, 149.4), y in [37.5, 75)
    change = np.abs(panel(1) - base).sum(-1)
    y, x = np.unravel_index(change[:, 37:187].argmax(), change[:, 37:187].shape)
    assert 112 <= x + 37 < 150 and 37 <= y < 75


def test_chosen_region_is_outlined(tmp_path):
    image, box = Image.open(COFFEE), (42.5, 0, 213.5, 171)
    alphas = _alphas(4, [(0, 0), (2, 3)])
    plain = np.asarray(Image.open(draw_overlay(image, ["a", "b"], alphas, 4, box, tmp_path / "p.png")))
    marked = np.asarray(Image.open(draw_overlay(image, ["a", "b"], alphas, 4, box, tmp_path / "m.png", [None, 9])))
    ys, xs = np.nonzero((plain != marked).any(-1))
    assert len(ys) > 50  # something was drawn ...
    # ... only around region 9 = (row 2, col 1) of panel 2: crop x in [37.2, 186.8) -> cell x in [74.6, 112),
    # y in [75, 112.5) of the panel, whose top-left corner is (2 * 228 + 4, 26) in the PNG
    x0, y0 = 2 * (224 + GAP) + GAP, GAP + LABEL_H
    assert xs.min() >= x0 + 74 and xs.max() < x0 + 113 and ys.min() >= y0 + 75 and ys.max() < y0 + 113
    assert xs.max() - xs.min() > 30 and ys.max() - ys.min() > 30  # the whole cell outline, not a dot
    with pytest.raises(ValueError, match="outside"):
        draw_overlay(image, ["a", "b"], alphas, 4, box, tmp_path / "x.png", [None, 16])
    with pytest.raises(ValueError, match="chosen"):
        draw_overlay(image, ["a", "b"], alphas, 4, box, tmp_path / "x.png", [1])


def test_shape_mismatch_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="2 words x 16 regions"):
        draw_overlay(Image.open(COFFEE), ["a", "b"], torch.zeros(3, 16), 4, (0, 0, 256, 171), tmp_path / "x.png")


def test_word_panels(tmp_path):
    words = ["a", "<unk>", "circle"]
    paths = draw_word_panels(
        Image.open(COFFEE), words, _alphas(4, [(0, 0), (1, 1), (2, 2)]), 4, (0, 0, 256, 171), tmp_path / "w", "cup"
    )
    assert [p.name for p in paths] == ["cup-01-a.png", "cup-02-unk.png", "cup-03-circle.png"]
    assert sorted(Path(tmp_path / "w").iterdir()) == sorted(paths)
    for p in paths:
        assert Image.open(p).size == (224 + 2 * GAP, LABEL_H + 150 + 2 * GAP)
    assert word_filename("x", 12, "a/b c") == "x-12-a_b_c.png"
