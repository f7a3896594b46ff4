"""Captions that draw themselves in Jupyter (``Caption._repr_html_`` / ``_repr_png_``, ``Captions._repr_html_``):
the interactive view of ``caption --html`` (hover a word, see where the model looked) built in memory by the same page
code (captioning/views/caption_page.py) and shown in a frame (text_attn.core.html_page.notebook_frame), with the overlay
picture of ``caption --overlay`` as its still fallback. Nothing is written to disk and nothing is fetched."""

from __future__ import annotations

import io
from typing import Any

from captioning.views.caption_page import CAPTION_CSS, CAPTION_JS, image_section
from captioning.views.overlay import PANEL_SIDE, overlay_image
from text_attn.core.html_page import notebook_view
from text_attn.core.unsure import CAPTION_UNSURE

FALLBACK_SIDE = 900  # the still fallback's longest side, pixels: small enough to keep a stored notebook light
PNG_PANEL = 160  # the PNG picture's panel side, pixels (``caption --overlay``: 224)
SECTION_HEIGHT = 470  # a section's height on the page, pixels (the canvas is at most 384): the frame's first height


def _shown(caption: Any) -> bool:
    return caption.photo is not None and caption.grid is not None and caption.crop_box is not None


def _record(caption: Any, index: int) -> dict[str, Any]:
    """The JSON record ``caption`` writes for this caption (the fields the page reads)."""
    return {
        "image": caption.name or f"image {index}",
        "caption": " ".join(caption.words),
        "words": list(caption.words),
        "attention": caption.alphas.float().tolist(),  # (T, L)
        "grid": [caption.grid, caption.grid],
        "size": list(caption.photo.size),
        "crop_box": list(caption.crop_box),
        "chosen": caption.chosen,
        "truncated": caption.truncated,
        "out_of_domain": caption.unfamiliar,
        "note": caption.note,
        "error": None,
        # a caption with its probabilities (given and read, or its own: caption_images(probs=True)): each word's
        **(
            {
                "word_probs": list(caption.probs),
                "end_prob": caption.end_prob,
                "score": caption.score,
                "given": caption.given,
            }
            if caption.probs is not None
            else {}
        ),  # fmt: skip
        # caption_images(n_best=N): the beam's other captions, listed under it (as caption --n-best --html)
        **({"n_best": caption.n_best_records()} if caption.nbest else {}),
    }


def captions_html(captions: list[Any]) -> str | None:
    """One self-contained page of captions over their photos, as an HTML fragment for a notebook; None when none of
    them carries its photo (a caption made by ``caption_features``, say)."""
    shown = [c for c in captions if _shown(c)]
    if not shown:
        return None
    grid = shown[0].grid
    header = (
        f'<span class="meta">{len(shown)} caption(s), {grid} &times; {grid} regions</span>'
        '<span class="hint">hover a word, or click one and step with <kbd>&larr;</kbd> <kbd>&rarr;</kbd>: '
        "bright = where the model looked for that word</span>"
    )
    sections = [image_section(i, _record(c, i), c.photo, CAPTION_UNSURE) for i, c in enumerate(shown, 1)]
    still = _jpeg(overlay_picture(shown[0], PNG_PANEL))  # the first caption's: a still for viewers without frames
    alt = f"photo: {' '.join(shown[0].words)} (where the model looked for each word)"
    height = 90 + SECTION_HEIGHT * min(len(shown), 3)
    return notebook_view(sections, header, CAPTION_CSS, CAPTION_JS, height, still, alt)


def overlay_picture(caption: Any, panel_side: int = PANEL_SIDE) -> Any:
    """The overlay picture of ``caption --overlay`` for one caption (PIL RGB)."""
    return overlay_image(caption.photo, list(caption.words), caption.alphas.float(), caption.grid, caption.crop_box,
                         caption.chosen, panel_side=panel_side)  # fmt: skip


def caption_png(caption: Any) -> bytes | None:
    """The overlay picture as PNG bytes (panels of PNG_PANEL pixels, 256 colours: a stored notebook stays light);
    None for a caption without its photo."""
    if not _shown(caption):
        return None
    buf = io.BytesIO()
    overlay_picture(caption, PNG_PANEL).quantize(256).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def _jpeg(image: Any) -> bytes:
    small = image.copy()
    small.thumbnail((FALLBACK_SIDE, FALLBACK_SIDE))
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=80, optimize=True)
    return buf.getvalue()
