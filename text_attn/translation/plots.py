"""Plots: attention alignment grids (single and multi-head) and BLEU by sentence length.

Figures are built with matplotlib's object API (`matplotlib.figure.Figure`) and rendered by the Agg
backend straight to PNG. No pyplot: nothing is registered in a global figure list (so nothing leaks
and there is nothing to close), no window can open, and importing this module never switches the
caller's matplotlib backend.

Long inputs stay readable and the PNG stays bounded (at most _MAX_W_IN x _MAX_H_IN inches, 100 dpi). A single
grid with more than _CHUNK source tokens is split into panels of consecutive source tokens, stacked top to bottom
("source tokens 41-80"), as even as possible, all on the one 0..1 colour scale, with a note in the title; past
_MAX_PANELS panels the panels hold more tokens instead. Where the output is long too, so that stacking would make
the cells smaller still, it stays one panel. Cells are _CELL_IN inches (a 40-token panel is ~11 in wide) and
shrink, with their labels, only when the bounds demand it, with a note in the title. Multi-head grids shrink their
cells to fit the bounds too, with the same note. Tokens are labelled as people read them (text_attn.core.token_labels:
"▁Bü" "sche" -> "Bü" "·sche").
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from text_attn.core.arrays import to_numpy
from text_attn.core.fonts import families, quiet_missing_glyphs, warn_uncovered
from text_attn.core.safe_files import atomic_output
from text_attn.core.token_labels import token_labels

# Attention weights are probabilities, so a fixed 0..1 scale makes plots comparable across
# sentences and models. "gray": black = 0, white = 1, as in Bahdanau et al. (2015).
_CMAP = "gray"
_CELL_IN = 0.22  # inches per grid cell in a single alignment plot (60 cells -> ~13 in)
_HEAD_CELL_IN = 0.14  # smaller cells for the multi-head grid, which has several panels
_MAX_W_IN, _MAX_H_IN = 16.0, 24.0  # bounds of an alignment figure, inches (1600 x 2400 px at _DPI)
_CHUNK = 40  # source tokens per panel at most in a single alignment plot; longer inputs are split into panels
_MAX_PANELS = 8  # ... into at most this many panels (past 320 tokens the panels hold more tokens each)
_PANEL_EXTRA_W_IN = 2.0  # room beside one panel's cells: target labels and the colour bar
_DPI = 100


def _check_grid(w: np.ndarray, source_tokens: list[str], target_tokens: list[str]) -> None:
    expected = (len(target_tokens), len(source_tokens))
    if w.shape[-2:] != expected:
        raise ValueError(
            f"weights shape {tuple(w.shape)} does not match the tokens: expected (..., T, S) = "
            f"{expected} from {len(target_tokens)} target and {len(source_tokens)} source tokens"
        )
    if 0 in expected:  # an empty translation: Matplotlib drew a grid of no rows and warned of a singular ylim
        raise ValueError(f"nothing to plot: no {'target' if not target_tokens else 'source'} tokens")


def _font_size(n_cells: int, cell_in: float = 1.0) -> float:
    # Tick labels must fit a cell: full size for short sentences, smaller for 60-word ones, and never taller than
    # a cell that was shrunk to keep the figure bounded (72 points per inch).
    size = 10.0 if n_cells <= 20 else 8.0 if n_cells <= 40 else 6.5
    return max(2.0, min(size, 0.8 * 72 * cell_in))


def source_chunks(n_src: int, size: int = _CHUNK, max_panels: int = _MAX_PANELS) -> list[range]:
    """Consecutive source-token ranges, one per panel: every token in exactly one, at most ``size`` tokens each
    (unless that would take more than ``max_panels`` panels), as even as possible (41 tokens: 21 + 20)."""
    if n_src <= size:
        return [range(n_src)]
    n = min(math.ceil(n_src / size), max_panels)
    bounds = [round(i * n_src / n) for i in range(n + 1)]
    return [range(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _draw_grid(ax: Any, w: np.ndarray, source_tokens: list[str], target_tokens: list[str], cell_in: float = 1.0):
    """Draw one (T, S) weight grid on `ax`: source words across the top, target words down, each in DejaVu Sans or
    an installed font that has its characters (text_attn.core.fonts)."""
    image = ax.imshow(w, cmap=_CMAP, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
    ax.xaxis.tick_top()
    family = families([*source_tokens, *target_tokens])
    ax.set_xticks(range(len(source_tokens)))
    ax.set_xticklabels(source_tokens, rotation=90, fontsize=_font_size(len(source_tokens), cell_in), fontfamily=family)
    ax.set_yticks(range(len(target_tokens)))
    ax.set_yticklabels(target_tokens, fontsize=_font_size(len(target_tokens), cell_in), fontfamily=family)
    ax.tick_params(length=0)
    return image


def _cell_size(across: int, down: int, panels_across: int, panels_down: int, extra: tuple[float, float]) -> float:
    """Inches per cell: _CELL_IN, or less where ``panels_across x panels_down`` panels of ``across x down`` cells
    (each with ``extra`` inches of labels) would pass the figure's bounds."""
    fit_w = (_MAX_W_IN - extra[0] * panels_across) / max(1, across * panels_across)
    fit_h = (_MAX_H_IN - 0.5 - extra[1] * panels_down) / max(1, down * panels_down)
    return max(0.02, min(_CELL_IN, fit_w, fit_h))


def _render(fig: Figure, target: Any, **kwargs: Any) -> None:
    """``fig.savefig(target, ...)`` with one GlyphWarning naming the labels' characters no installed font has, in
    place of matplotlib's one per character."""
    FigureCanvasAgg(fig)  # attach an Agg canvas explicitly, whatever the default backend is
    warn_uncovered((t.get_text() for t in fig.findobj(Text)), stacklevel=4)
    with quiet_missing_glyphs():
        fig.savefig(target, dpi=_DPI, bbox_inches="tight", **kwargs)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # "tight" grows the canvas to fit long rotated token labels instead of clipping them.
    with atomic_output(path) as tmp:  # a fresh file, renamed: a planted link or FIFO at path is never written
        _render(fig, tmp, format="png")
    return path


def plot_alignment(
    weights: Any,
    source_tokens: list[str],
    target_tokens: list[str],
    path: str | Path,
    title: str | None = None,
    label: str = "attention weight",
) -> Path:
    """Save a (T, S) attention grid as PNG (:func:`alignment_figure`); ``label``: what the colour bar's 0..1 is."""
    return _save(alignment_figure(weights, source_tokens, target_tokens, title, label), path)


def alignment_png(
    weights: Any, source_tokens: list[str], target_tokens: list[str], title: str | None = None, jpeg: bool = False
) -> bytes:
    """:func:`alignment_figure` as PNG bytes (nothing written: Jupyter's picture of a translation); ``jpeg``: JPEG
    bytes instead (quality 85: a notebook frame's still), rendered once, not from the PNG."""
    fig = alignment_figure(weights, source_tokens, target_tokens, title)
    buf = io.BytesIO()
    if jpeg:
        _render(fig, buf, format="jpeg", pil_kwargs={"quality": 85, "optimize": True})
    else:
        _render(fig, buf, format="png")
    return buf.getvalue()


def alignment_figure(
    weights: Any,
    source_tokens: list[str],
    target_tokens: list[str],
    title: str | None = None,
    label: str = "attention weight",
) -> Figure:
    """A (T, S) attention grid: rows = target words (down), columns = source words. More than _CHUNK source words:
    panels of consecutive source words stacked top to bottom, one colour scale (module doc)."""
    w = to_numpy(weights)  # (T, S)
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (T, S), got shape {tuple(w.shape)}")
    _check_grid(w, source_tokens, target_tokens)
    source_tokens, target_tokens = token_labels(source_tokens), token_labels(target_tokens)  # "▁Bü" "sche": Bü ·sche
    n_tgt, n_src = w.shape
    chunks = source_chunks(n_src)
    # room above a panel's cells: its title and the source labels, written upwards (~0.6 em a character)
    extra = (_PANEL_EXTRA_W_IN, 0.6 + max(map(len, source_tokens), default=1) * 0.6 * _font_size(min(n_src, 40)) / 72)
    cell = _cell_size(max(len(c) for c in chunks), n_tgt, 1, len(chunks), extra)
    whole = _cell_size(n_src, n_tgt, 1, 1, extra)
    if len(chunks) > 1 and whole > 1.25 * cell:  # many output words too: stacking would shrink the cells more
        chunks, cell = [range(n_src)], whole
    widest = max(len(c) for c in chunks)
    # Room for grid, labels and colour bar; cells keep a fixed size so 40 x 60 stays legible.
    width = min(_MAX_W_IN, max(4.0, cell * widest + extra[0]))
    height = min(_MAX_H_IN, max(3.0, len(chunks) * (cell * n_tgt + extra[1]) + 0.5 * (len(chunks) > 1)))
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(len(chunks), 1, squeeze=False)[:, 0]  # (panels,)
    for ax, c in zip(axes, chunks, strict=True):
        image = _draw_grid(ax, w[:, c.start : c.stop], source_tokens[c.start : c.stop], target_tokens, cell)
        if len(chunks) > 1:
            ax.set_title(f"source tokens {c.start + 1}-{c.stop}", fontsize=9, loc="left")
    fig.colorbar(image, ax=list(axes), fraction=0.046, pad=0.04, shrink=min(1.0, 3 / len(chunks) + 0.2),
                 label=label)  # fmt: skip
    notes = [f"{n_src} source tokens, split into {len(chunks)} panels of at most {widest}"] if len(chunks) > 1 else []
    if cell < _CELL_IN:
        notes.append(f"cells shrunk to fit {n_src} source x {n_tgt} output tokens")
    if notes:
        note = "; ".join(notes) + " (one colour scale)"
        fig.suptitle(f"{title}\n{note}" if title else note, fontsize=10)
    elif title:
        axes[0].set_title(title)  # matplotlib lifts it above the top tick labels
    return fig


def _head_layout(n_panels: int, n_src: int, n_tgt: int) -> tuple[int, int, float]:
    """(columns, rows, inches per cell) of the heads' panels: a near-square grid of panels where its cells keep their
    size, else the arrangement whose cells are largest (a 75-token source's five panels three across had cells of
    0.06 in, labels 2 px high; stacked in one column, twice that)."""
    square = math.ceil(math.sqrt(n_panels))

    def cell_of(ncols: int) -> float:
        return min(_HEAD_CELL_IN, _cell_size(n_src, n_tgt, ncols, math.ceil(n_panels / ncols), (1.2, 1.2)))

    ncols = max(range(1, n_panels + 1), key=lambda c: (round(cell_of(c), 4), -abs(c - square)))
    return ncols, math.ceil(n_panels / ncols), cell_of(ncols)


def plot_alignment_heads(
    weights: Any,
    source_tokens: list[str],
    target_tokens: list[str],
    path: str | Path,
    title: str | None = None,
    *,
    source_label: str | None = None,
    target_label: str | None = None,
) -> Path:
    """Save (H, T, S) attention as a grid of panels "head 1".."head H" plus their "mean". ``source_label`` and
    ``target_label``: each panel's axis names (the source tokens across the top, the output tokens down the side)."""
    w = to_numpy(weights)  # (H, T, S)
    if w.ndim != 3:
        raise ValueError(f"weights must be 3-D (H, T, S), got shape {tuple(w.shape)}")
    _check_grid(w, source_tokens, target_tokens)
    source_tokens, target_tokens = token_labels(source_tokens), token_labels(target_tokens)
    n_heads, n_tgt, n_src = w.shape
    if n_heads == 0:
        raise ValueError("weights has no heads (H = 0)")
    panels = [(f"head {h + 1}", w[h]) for h in range(n_heads)] + [("mean", w.mean(axis=0))]
    ncols, nrows, cell = _head_layout(len(panels), n_src, n_tgt)
    panel_w = max(2.5, cell * n_src + 1.2)
    panel_h = max(2.5, cell * n_tgt + 1.2)
    size = (min(_MAX_W_IN, panel_w * ncols + 1.0), min(_MAX_H_IN, panel_h * nrows))
    # Constrained layout keeps each panel's token labels and title clear of its neighbours.
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)  # (nrows, ncols)
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.set_axis_off()  # unused cells of the grid
            continue
        name, grid = panels[i]
        image = _draw_grid(ax, grid, source_tokens, target_tokens, cell)
        ax.set_title(name)
        if source_label:
            ax.xaxis.set_label_position("top")  # beside the source tokens, which _draw_grid puts on top
            ax.set_xlabel(source_label, fontsize=8)
        if target_label:
            ax.set_ylabel(target_label, fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6)
    if cell < _HEAD_CELL_IN:
        note = f"{n_src} source x {n_tgt} output tokens: cells shrunk to fit"
        title = f"{title}\n{note}" if title else note
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
        # 0-100, as every table prints BLEU (bleu_by_length gives fractions)
        y = [100.0 * buckets.get(label, {}).get("bleu", math.nan) for label in labels]
        # Markers keep a lone bucket between two NaN gaps visible.
        ax.plot(x, np.asarray(y, dtype=np.float64), marker="o", label=model)
    ax.set_xticks(x)
    ax.set_xticklabels(ticks)
    ax.set_xlabel("source sentence length (words)")
    ax.set_ylabel("BLEU (0-100)")
    ax.set_ylim(0.0, 100.0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return _save(fig, path)
