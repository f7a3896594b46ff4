"""Tests for text_attn.translation.plots: PNGs are written, grids are oriented right, bad shapes are refused."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from text_attn.translation import plots
from text_attn.translation.plots import plot_alignment, plot_alignment_heads, plot_bleu_by_length


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


def test_alignment_size_grows_with_grid(tmp_path):
    small = png_size(plot_alignment(random_weights(4, 5), words("s", 5), words("t", 4), tmp_path / "s.png"))
    wide = png_size(plot_alignment(random_weights(4, 40), words("s", 40), words("t", 4), tmp_path / "w.png"))
    big = png_size(plot_alignment(random_weights(40, 40), words("s", 40), words("t", 40), tmp_path / "b.png"))
    assert wide[0] > small[0]  # more source words -> wider
    assert big[0] > small[0] and big[1] > wide[1]  # more target words -> taller


def test_alignment_shape_mismatch_names_both_shapes(tmp_path):
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        plot_alignment(random_weights(3, 4), words("s", 3), words("t", 4), tmp_path / "x.png")
    with pytest.raises(ValueError, match="2-D"):
        plot_alignment(random_weights(2, 3, 4), words("s", 4), words("t", 3), tmp_path / "x.png")
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
    assert y[0] == pytest.approx(0.35) and math.isnan(y[1]) and y[2] == pytest.approx(0.1)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert [t.split("\n")[0] for t in ticks] == ["5-10", "10-20", "20-30"]  # bucket order kept
    assert ax.get_ylim() == (0.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        plot_bleu_by_length({}, tmp_path / "none.png")
