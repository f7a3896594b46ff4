"""Tests for text_attn.translation.plots: PNGs are written, grids are oriented right, bad shapes are refused, and
long inputs are split into panels (every source token in exactly one) inside a bounded PNG."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from text_attn.translation import plots
from text_attn.translation.plots import plot_alignment, plot_alignment_heads, plot_bleu_by_length, source_chunks


def random_weights(*shape: int, seed: int = 0) -> np.ndarray:
    """Row-stochastic weights over the last axis, like softmaxed attention."""
    x = np.random.default_rng(seed).random(shape)
    return x / x.sum(-1, keepdims=True)


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


@pytest.fixture
def captured(monkeypatch):
    """Record each figure handed to _save (and still write it), so tests can inspect it."""
    figures = []
    real_save = plots._save

    def save(fig, path):
        figures.append(fig)
        return real_save(fig, path)

    monkeypatch.setattr(plots, "_save", save)
    return figures


def png_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as im:
        assert im.format == "PNG"
        im.verify()  # a truncated or corrupt file raises here
        return im.size


def test_alignment_png_orientation_and_labels(tmp_path, captured):
    w = torch.tensor(random_weights(3, 4), requires_grad=True)  # (T=3, S=4), with grad on purpose
    src, tgt = words("s", 4), words("t", 3)
    out = plot_alignment(w, src, tgt, tmp_path / "sub" / "a.png", title="demo")
    assert out == tmp_path / "sub" / "a.png" and out.exists()  # parent folder created
    png_size(out)
    ax = captured[0].axes[0]
    # Rows are target words (down), columns are source words (across, labels on top).
    np.testing.assert_allclose(ax.images[0].get_array(), w.detach().numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == src
    assert [t.get_text() for t in ax.get_yticklabels()] == tgt
    assert ax.xaxis.get_ticks_position() == "top"
    assert ax.get_title() == "demo"
    assert len(captured[0].axes) == 2  # the grid and its colour bar


@pytest.mark.long
def test_alignment_size_grows_with_grid(tmp_path):
    small = png_size(plot_alignment(random_weights(4, 5), words("s", 5), words("t", 4), tmp_path / "s.png"))
    wide = png_size(plot_alignment(random_weights(4, 40), words("s", 40), words("t", 4), tmp_path / "w.png"))
    big = png_size(plot_alignment(random_weights(40, 40), words("s", 40), words("t", 40), tmp_path / "b.png"))
    assert wide[0] > small[0]  # more source words -> wider
    assert big[0] > small[0] and big[1] > wide[1]  # more target words -> taller


@pytest.mark.parametrize("n", [0, 1, 40, 41, 80, 81, 200, 333, 1000])
def test_source_chunks_cover_every_token_exactly_once(n):
    chunks = source_chunks(n)
    assert [i for c in chunks for i in c] == list(range(n))  # in order, none twice, none missing
    sizes = [len(c) for c in chunks]
    assert max(sizes) - min(sizes) <= 1 and len(chunks) <= 8  # even panels, a bounded number of them
    assert max(sizes) <= 40 or len(chunks) == 8  # at most 40 tokens a panel, until 8 panels are not enough
    assert len(chunks) == (1 if n <= 40 else min(8, -(-n // 40)))


BOUND = (1700, 2500)  # 16 x 24 inches at 100 dpi, plus what "tight" saving may add around the edges


@pytest.mark.long
def test_a_long_input_is_split_into_stacked_panels_in_a_bounded_png(tmp_path, captured):
    src, tgt = words("s", 200), words("t", 5)
    w = random_weights(5, 200)
    size = png_size(plot_alignment(w, src, tgt, tmp_path / "long.png"))
    assert size[0] <= BOUND[0] and size[1] <= BOUND[1] and size[1] > size[0] / 2  # not a 4005 x 311 strip
    fig = captured[0]
    grids = [ax for ax in fig.axes if ax.images and ax.get_xticklabels()]
    assert [ax.get_title(loc="left") for ax in grids] == [f"source tokens {a}-{a + 39}" for a in range(1, 200, 40)]
    shown = [t.get_text() for ax in grids for t in ax.get_xticklabels()]
    assert shown == src  # every source token labelled once, in order
    np.testing.assert_allclose(np.hstack([ax.images[0].get_array() for ax in grids]), w)
    assert {ax.images[0].get_clim() for ax in grids} == {(0.0, 1.0)}  # one colour scale
    assert all([t.get_text() for t in ax.get_yticklabels()] == tgt for ax in grids)
    assert "200 source tokens, split into 5 panels of at most 40" in fig.get_suptitle()


@pytest.mark.slow
def test_long_input_and_output_stay_bounded_with_a_note(tmp_path, captured):
    # 70 x 70: two stacked panels would shrink the cells more than one square grid does
    size = png_size(plot_alignment(random_weights(70, 70), words("s", 70), words("t", 70), tmp_path / "sq.png"))
    assert size[0] <= BOUND[0] and size[1] <= BOUND[1]
    assert len([ax for ax in captured[0].axes if ax.images]) == 1  # one grid, not three panels
    assert "cells shrunk to fit 70 source x 70 output tokens" in captured[0].get_suptitle()
    heads = random_weights(2, 60, 90)  # 2 heads + mean, stacked: shrunk even so
    size = png_size(plot_alignment_heads(heads, words("s", 90), words("t", 60), tmp_path / "h.png", title="x"))
    assert size[0] <= BOUND[0] and size[1] <= BOUND[1]
    assert captured[1].get_suptitle().startswith("x\n90 source x 60 output tokens: cells shrunk to fit")
    heads = random_weights(2, 8, 50)  # 50 x 8 fits at full size once stacked (two across shrank it)
    plot_alignment_heads(heads, words("s", 50), words("t", 8), tmp_path / "h2.png", title="x")
    assert captured[2].get_suptitle() == "x"


def test_alignment_shape_mismatch_names_both_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        plot_alignment(random_weights(3, 4), words("s", 3), words("t", 4), tmp_path / "x.png")
    with pytest.raises(ValueError, match="2-D"):
        plot_alignment(random_weights(2, 3, 4), words("s", 4), words("t", 3), tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_an_empty_translation_is_refused_not_drawn_as_a_grid_of_no_rows(tmp_path):
    """Matplotlib drew a grid of no rows and warned of identical low and high ylims (a raw UserWarning)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no Matplotlib warning on the way to the refusal
        with pytest.raises(ValueError, match="nothing to plot: no target tokens"):
            plot_alignment(np.zeros((0, 3)), words("s", 3), [], tmp_path / "x.png")
        with pytest.raises(ValueError, match="nothing to plot: no target tokens"):
            plot_alignment_heads(np.zeros((2, 0, 3)), words("s", 3), [], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_alignment_heads_panels_and_mean(tmp_path, captured):
    w = random_weights(3, 5, 6)  # (H=3, T=5, S=6)
    out = plot_alignment_heads(w, words("s", 6), words("t", 5), tmp_path / "h.png", title="heads")
    png_size(out)
    fig = captured[0]
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert list(panels) == ["head 1", "head 2", "head 3", "mean"]
    np.testing.assert_allclose(panels["head 2"].images[0].get_array(), w[1])
    np.testing.assert_allclose(panels["mean"].images[0].get_array(), w.mean(axis=0))
    assert fig.get_suptitle() == "heads"
    assert panels["head 1"].get_xlabel() == panels["head 1"].get_ylabel() == ""  # no axis names unless asked


def test_alignment_heads_axis_names(tmp_path, captured):
    w = random_weights(2, 5, 6)  # (H=2, T=5, S=6)
    plot_alignment_heads(w, words("s", 6), words("t", 5), tmp_path / "h.png", source_label="src", target_label="out")
    panels = [ax for ax in captured[0].axes if ax.get_title()]  # the heads and the mean, not the colour bar
    assert len(panels) == 3
    assert all(ax.get_xlabel() == "src" and ax.get_ylabel() == "out" for ax in panels)
    assert all(ax.xaxis.get_label_position() == "top" for ax in panels)


def test_alignment_heads_rejects_bad_shapes(tmp_path):
    with pytest.raises(ValueError, match="3-D"):
        plot_alignment_heads(random_weights(5, 6), words("s", 6), words("t", 5), tmp_path / "h.png")
    with pytest.raises(ValueError, match=r"\(2, 5, 6\)"):
        plot_alignment_heads(random_weights(2, 5, 6), words("s", 5), words("t", 5), tmp_path / "h.png")


def test_bleu_by_length_plot(tmp_path, captured):
    nan = math.nan
    results = {
        "rnnsearch": {
            "5-10": {"bleu": 0.4, "count": 3},
            "10-20": {"bleu": nan, "count": 0},
            "20-30": {"bleu": 0.3, "count": 2},
        },
        "rnnenc": {
            "5-10": {"bleu": 0.35, "count": 3},
            "10-20": {"bleu": nan, "count": 0},
            "20-30": {"bleu": 0.1, "count": 2},
        },
    }
    out = plot_bleu_by_length(results, tmp_path / "bleu.png", title="BLEU by length")
    png_size(out)
    ax = captured[0].axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["rnnsearch", "rnnenc"]
    y = lines[1].get_ydata()
    assert y[0] == pytest.approx(35) and math.isnan(y[1]) and y[2] == pytest.approx(10)  # 0-100, as tables print
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == ["5-10", "10-20", "20-30"]  # bucket order kept
    assert ax.get_ylim() == (0.0, 100.0) and ax.get_ylabel() == "BLEU (0-100)"
    with pytest.raises(ValueError, match="empty"):
        plot_bleu_by_length({}, tmp_path / "none.png")


def test_an_alignment_grid_falls_back_per_glyph_and_warns_once_for_what_no_font_has(tmp_path):
    """The circled A is in matplotlib's bundled STIXGeneral, not in DejaVu Sans; U+0378 is in no font."""
    import warnings

    from text_attn.core.fonts import GlyphWarning
    from text_attn.translation.plots import alignment_png, plot_alignment

    w = np.full((2, 3), 1 / 3)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        plot_alignment(w, ["der", "Ⓐ", "Hund"], ["the", "dog"], tmp_path / "a.png")
    assert seen == []  # matplotlib found the circled A in the fallback family: no "Glyph ... missing"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        alignment_png(w, ["\u0378", "b\u0378", "c"], ["the", "dog"])
    assert [type(s.message) for s in seen] == [GlyphWarning]
    assert "\u0378" in str(seen[0].message)


def test_the_grids_axes_carry_the_labels_and_the_records_keep_the_pieces(monkeypatch):
    """Subword pieces labelled as the words they spell (text_attn.core.token_labels) on both kinds of grid."""
    from text_attn.translation.plots import alignment_figure

    src, tgt = ["▁Die", "▁Bü", "sche", "<eos>"], ["▁The", "▁bush", "es"]
    weights = np.full((3, 4), 0.25)
    (ax, *_) = alignment_figure(weights, src, tgt).axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["Die", "Bü", "·sche", "<eos>"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["The", "bush", "·es"]
    assert src == ["▁Die", "▁Bü", "sche", "<eos>"]  # the caller's tokens untouched
    monkeypatch.setattr(plots, "_save", lambda fig, path: fig)  # the heads' figure itself, not its PNG
    heads = plot_alignment_heads(np.full((2, 3, 4), 0.25), src, tgt, "heads.png")
    panels = [ax for ax in heads.axes if ax.get_title()]  # head 1, head 2, mean
    assert len(panels) == 3 and {tuple(t.get_text() for t in ax.get_xticklabels()) for ax in panels} == {
        ("Die", "Bü", "·sche", "<eos>")
    }


def test_a_transformers_heads_are_titled_with_their_layer_as_the_page_counts_it(monkeypatch, tmp_path):
    """translate --plot's title: the layer counted from 1 of how many, as the --html page's selector counts them, and
    the --layer value that picks it ("decoder layer 1 (from 0)" was the page's "layer 2")."""
    from text_attn.translation.plot_files import draw
    from text_attn.translation.translator import Translator

    titles = []
    monkeypatch.setattr(plots, "plot_alignment_heads", lambda *a, title=None, **k: titles.append(title))
    translator = Translator.load()  # the bundled Transformer: 3 decoder layers, the penultimate drawn
    (tr,) = translator.translate(["Ein Hund."])
    draw(tmp_path / "g.png", tr, translator.net)
    translator.net.set_plot_layer(-1)
    draw(tmp_path / "g.png", tr, translator.net)
    assert titles == [
        "cross-attention, decoder layer 2 of 3 (--layer 1)",
        "cross-attention, decoder layer 3 of 3 (--layer 2)",
    ]


def test_a_long_sources_heads_are_stacked_where_their_cells_are_larger():
    """A 75-token source's five panels (4 heads and their mean) were laid three across: cells of 0.06 in, the labels
    2 px high. The arrangement with the largest cells is taken; a short sentence keeps its near-square grid."""
    from text_attn.translation.plots import _HEAD_CELL_IN, _head_layout

    cols, rows, cell = _head_layout(5, 75, 32)
    assert (cols, rows) == (1, 5) and cell > 0.1
    assert _head_layout(5, 8, 7) == (3, 2, _HEAD_CELL_IN)  # at full size: as before
    assert _head_layout(9, 10, 10) == (3, 3, _HEAD_CELL_IN)


def test_a_long_sources_heads_plot_is_tall_not_wide(tmp_path):
    from text_attn.translation.plots import plot_alignment_heads

    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(75), size=(4, 32))  # (H, T, S)
    path = plot_alignment_heads(w, [f"s{i}" for i in range(75)], [f"t{i}" for i in range(32)], tmp_path / "h.png")
    with Image.open(path) as im:
        assert im.height > im.width  # stacked: one panel a row
