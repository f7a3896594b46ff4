"""Plots: attention alignment grids (single and multi-head) and BLEU by sentence length.

Figures are built with matplotlib's object API (`matplotlib.figure.Figure`) and rendered by the Agg
backend straight to PNG. No pyplot: nothing is registered in a global figure list (so nothing leaks
and there is nothing to close), no window can open, and importing this module never switches the
caller's matplotlib backend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from text_attn.core.arrays import to_numpy

# Attention weights are probabilities, so a fixed 0..1 scale makes plots comparable across
# sentences and models. "gray": black = 0, white = 1, as in Bahdanau et al. (2015).
_CMAP = "gray"
_CELL_IN = 0.22  # inches per grid cell in a single alignment plot (60 cells -> ~13 in)
_HEAD_CELL_IN = 0.14  # smaller cells for the multi-head grid, which has several panels
_MAX_SIDE_IN = 40.0  # cap so huge inputs do not make a gigantic image
_DPI = 100


def _check_grid(w: np.ndarray, source_tokens: list[str], target_tokens: list[str]) -> None:
    expected = (len(target_tokens), len(source_tokens))
    if w.shape[-2:] != expected:
        raise ValueError(
            f"weights shape {tuple(w.shape)} does not match the tokens: expected (..., T, S) = "
            f"{expected} from {len(target_tokens)} target and {len(source_tokens)} source tokens"
        )


def _font_size(n_cells: int) -> float:
    # Tick labels must fit a cell: full size for short sentences, smaller for 60-word ones.
    return 10.0 if n_cells <= 20 else 8.0 if n_cells <= 40 else 6.5


def _draw_grid(ax: Any, w: np.ndarray, source_tokens: list[str], target_tokens: list[str]) -> Any:
    """Draw one (T, S) weight grid on `ax`: source words across the top, target words down."""
    image = ax.imshow(w, cmap=_CMAP, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    ax.xaxis.tick_top()
    ax.set_xticks(range(len(source_tokens)))
    ax.set_xticklabels(source_tokens, rotation=90, fontsize=_font_size(len(source_tokens)))
    ax.set_yticks(range(len(target_tokens)))
    ax.set_yticklabels(target_tokens, fontsize=_font_size(len(target_tokens)))
    ax.tick_params(length=0)
    return image


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)  # attach an Agg canvas explicitly, whatever the default backend is
    # "tight" grows the canvas to fit long rotated token labels instead of clipping them.
    fig.savefig(path, format="png", dpi=_DPI, bbox_inches="tight")
    return path


def plot_alignment(
    weights: Any,
    source_tokens: list[str],
    target_tokens: list[str],
    path: str | Path,
    title: str | None = None,
) -> Path:
    """Save a (T, S) attention grid as PNG: rows = target words (down), columns = source words."""
    w = to_numpy(weights)  # (T, S)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (T, S), got shape {tuple(w.shape)}")
    _check_grid(w, source_tokens, target_tokens)
    n_tgt, n_src = w.shape
    # Room for grid, labels and colour bar; cells keep a fixed size so 60x60 stays legible.
    width = min(_MAX_SIDE_IN, max(4.0, _CELL_IN * n_src + 2.0))
    height = min(_MAX_SIDE_IN, max(3.0, _CELL_IN * n_tgt + 1.5))
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    image = _draw_grid(ax, w, source_tokens, target_tokens)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    if title:
        ax.set_title(title)  # matplotlib lifts it above the top tick labels
    return _save(fig, path)


def plot_alignment_heads(
    weights: Any,
    source_tokens: list[str],
    target_tokens: list[str],
    path: str | Path,
    title: str | None = None,
) -> Path:
    """Save (H, T, S) attention as a grid of panels "head 1".."head H" plus their "mean"."""
    w = to_numpy(weights)  # (H, T, S)
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (H, T, S), got shape {tuple(w.shape)}")
    _check_grid(w, source_tokens, target_tokens)
    n_heads, n_tgt, n_src = w.shape
    if n_heads == 0:
        raise ValueError("weights has no heads (H = 0)")
    panels = [(f"head {h + 1}", w[h]) for h in range(n_heads)] + [("mean", w.mean(axis=0))]
    ncols = math.ceil(math.sqrt(len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    panel_w = max(2.5, _HEAD_CELL_IN * n_src + 1.2)
    panel_h = max(2.5, _HEAD_CELL_IN * n_tgt + 1.2)
    size = (min(_MAX_SIDE_IN, panel_w * ncols + 1.0), min(_MAX_SIDE_IN, panel_h * nrows))
    # Constrained layout keeps each panel's token labels and title clear of its neighbours.
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)  # (nrows, ncols)
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.set_axis_off()  # unused cells of the grid
            continue
        name, grid = panels[i]
        image = _draw_grid(ax, grid, source_tokens, target_tokens)
        ax.set_title(name)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_bleu_by_length(results: dict[str, dict[str, dict]], path: str | Path, title: str | None = None) -> Path:
    """Save BLEU per source-length bucket, one line per model (output of `bleu_by_length`).

    Buckets are plotted in the order they first appear; NaN (empty) buckets are gaps in the line.
    """
    if not results:
        raise ValueError("plot_bleu_by_length: results is empty (no models)")
    labels: list[str] = []
    for buckets in results.values():
        labels += [label for label in buckets if label not in labels]
    # Show the sentence count under each bucket when every model was scored on the same split.
    counts = {label: {b[label]["count"] for b in results.values() if label in b} for label in labels}
    if all(len(c) == 1 for c in counts.values()):
        ticks = [f"{label}\n(n={next(iter(counts[label]))})" for label in labels]
    else:
        ticks = labels

    fig = Figure(figsize=(max(6.0, 0.9 * len(labels) + 2.0), 4.5), layout="constrained")
    ax = fig.add_subplot()
    x = np.arange(len(labels))
    for model, buckets in results.items():
        y = [buckets.get(label, {}).get("bleu", math.nan) for label in labels]
        # Markers keep a lone bucket between two NaN gaps visible.
        ax.plot(x, np.asarray(y, dtype=np.float64), marker="o", label=model)
    ax.set_xticks(x)
    ax.set_xticklabels(ticks)
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU")
    ax.set_ylim(0.0, 1.0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return _save(fig, path)
