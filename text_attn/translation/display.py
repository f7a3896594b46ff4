"""Translations that draw themselves in Jupyter (``Translation._repr_html_`` / ``_repr_png_``,
``Translations._repr_html_``): the interactive view of ``translate --html`` (hover an output word, its source words
light up; the alignment grid) built in memory by the same page code (text_attn/translation/alignment_page.py) and
shown in a frame (text_attn.core.html_page.notebook_frame), with the alignment grid picture of ``translate --plot`` as
its still fallback. A Transformer's translation carries one decoder layer's cross-attention per head (its plot layer:
the penultimate, which aligns best, unless ``net.set_plot_layer`` chose another): the view shows the heads' mean.
Nothing is written to disk and nothing is fetched."""

from __future__ import annotations

from typing import Any

import numpy as np

from text_attn.core.html_page import notebook_view
from text_attn.translation.alignment_page import ALIGNMENT_CSS, ALIGNMENT_JS, sentence_section
from text_attn.translation.source_check import unseen_words_line

SECTION_HEIGHT = 260  # a section's first height on the page, pixels (it grows with the grid)


def layered(translation: Any) -> np.ndarray | None:
    """The translation's attention as the page wants it, (layers 1, heads, T, S+1): a recurrent model's (T, S+1)
    has one head; a Transformer's (T, heads, S+1) is its plot layer's heads. None without attention."""
    a = translation.attention
    if a is None:
        return None
    a = a.float().numpy()
    return a[None, None] if a.ndim == 2 else a.transpose(1, 0, 2)[None]


def grid(translation: Any) -> np.ndarray | None:
    """The (T, S+1) grid drawn in the picture: the weights, or the mean of a Transformer's heads."""
    a = layered(translation)
    return None if a is None else a[0].mean(axis=0)


def translations_html(translations: list[Any]) -> str | None:
    """One self-contained page of translations with their alignments, as an HTML fragment for a notebook; None when
    the list is empty."""
    if not translations:
        return None
    header = (
        f'<span class="meta">{len(translations)} translation(s)</span><span class="hint">hover an output word (or '
        "step with <kbd>&larr;</kbd> <kbd>&rarr;</kbd>): its source words light up by weight; hover a source word (or "
        "go up to them with <kbd>&uarr;</kbd>): the output words that looked at it; grid: darker = more weight (a "
        "Transformer: one decoder layer, mean of the heads)</span>"
    )
    sections = [sentence_section(i, t, layered(t) if t.tokens else None, t.note or unseen_words_line(t.unseen_words))
                for i, t in enumerate(translations, 1)]  # fmt: skip
    height = sum(SECTION_HEIGHT + 18 * len(t.tokens) for t in translations[:3]) + 90
    alt = f"alignment grid of the translation: {translations[0].text}"
    still = translation_png(translations[0], True)
    return notebook_view(sections, header, ALIGNMENT_CSS, ALIGNMENT_JS, height, still, alt)


def translation_png(translation: Any, jpeg: bool = False) -> bytes | None:
    """The alignment grid picture (``translate --plot``) as PNG bytes (``jpeg``: JPEG, the frame's still); None for a
    translation without attention or without output words."""
    from text_attn.translation.plots import alignment_png

    g = grid(translation)
    if g is None or not translation.tokens:
        return None
    return alignment_png(g, [*translation.source, "<eos>"], list(translation.tokens), jpeg=jpeg)
