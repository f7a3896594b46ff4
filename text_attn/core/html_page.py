"""Self-contained interactive HTML reports of attention (``caption --html``, ``translate --html``): the page skeleton,
its CSS and JavaScript, safe embedding of words and data, and compact attention arrays. Each family adds its sections
(captioning/views/caption_page.py, text_attn/translation/alignment_page.py). Imports no application and no torch.

The page needs no network: images are data: URIs, data are JSON inside ``<script type="application/json">``, there
are no external scripts, styles or fonts, and a Content-Security-Policy forbids every fetch. It is written a section
at a time (:class:`HtmlPage`), so memory stays bounded whatever the number of sections, and a browser builds and
paints a section only when it scrolls into view, so hundreds of sections open fast.

Attention arrays travel as base64 of uint8 (:func:`quantise`): v in [0, 1] -> round(255 v), within 1/510 of v,
about 1.33 bytes per weight in the file.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from text_attn.core.arrays import to_numpy
from text_attn.core.safe_files import atomic_output, readable

# Everything the page may load comes from itself: inline styles and scripts, data: images; no fetch of any kind.
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

CORE_CSS = """
:root { --ink: #1d232b; --muted: #5d6672; --line: #d9dee5; --accent: #c2410c; --hue: 37, 99, 235; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       background: #f4f5f7; }
header { position: sticky; top: 0; z-index: 5; background: #fff; border-bottom: 1px solid var(--line);
         padding: 8px 20px; display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: baseline; }
header h1 { font-size: 17px; margin: 0; }
header .meta, header label, footer { color: var(--muted); font-size: 13px; }
header .hint { flex-basis: 100%; }
main { max-width: 1100px; margin: 0 auto; padding: 14px 20px; }
footer { text-align: center; padding: 10px 0 24px; }
section.item { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px;
               margin: 0 0 14px; outline: none; }
section.item:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
section.item.active { border-color: #9aa6b5; }
section.item h2 { font-size: 13px; font-weight: 600; margin: 0 0 8px; color: var(--muted); overflow-wrap: anywhere; }
.words { margin: 6px 0; line-height: 2.1; }
/* black, not the ink: on Report.shade's strongest blue (rgba(37, 99, 235, 0.85) over white) the ink reads at
   3.97:1, black at 5.2:1 (WCAG asks 4.5:1), and at every lighter shade more */
.w { display: inline-block; padding: 0 5px; margin: 0 1px; border-radius: 4px; cursor: pointer; color: #000;
     border: 1px solid transparent; line-height: 1.6; max-width: 100%; overflow-wrap: anywhere; }
.w:hover { border-color: #9aa6b5; }
.w.on { border-color: var(--accent); box-shadow: 0 0 0 1px var(--accent); }
.w.unsure { text-decoration: underline wavy #b45309; text-underline-offset: 4px; }  /* a word under p (unsure.py) */
.label { display: inline-block; min-width: 58px; color: var(--muted); font-size: 12px; }
.error { color: #b91c1c; }
.hint { color: var(--muted); font-size: 12px; }
.alts { font-size: 13px; color: var(--muted); margin: 6px 0; }  /* --n-best: the beam's other outputs (alternatives) */
.alts ol { margin: 4px 0 0; padding-left: 22px; }
/* a run-on word (a model's "extennionernern...", a URL in a reference) wraps in its card, not the page sideways */
.note, .alts li, .refs li, p.translation, .read { overflow-wrap: anywhere; }
button, select { font: inherit; font-size: 13px; }
kbd { border: 1px solid var(--line); border-radius: 3px; padding: 0 3px; font-size: 11px; }
/* a page its run did not finish (HtmlPage.close's partial): the note, moved into the header by CORE_JS; 7.3:1 */
.partial { flex-basis: 100%; margin: 0; color: #9a3412; font-weight: 600; }
/* a narrow window or a page zoomed in (320 px wide at 400%): a sticky header covered most of what is left */
@media (max-width: 600px), (max-height: 500px) { header { position: static; } }
"""

# Shared script: base64 -> bytes, the active section and arrow keys, lazy building of sections as they come in view.
CORE_JS = r"""
"use strict";
const Report = {
  bytes(b64) { const s = atob(b64), a = new Uint8Array(s.length);
               for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); return a; },
  // a weight's background (a word's, a grid cell's); a word's text on it is black (.w in CORE_CSS): >= 5.2:1
  shade(v) { return v > 0 ? `rgba(var(--hue), ${(0.85 * Math.min(1, v)).toFixed(3)})` : ""; },
  active: null,
  activate(sec) {
    if (Report.active && Report.active !== sec) Report.active.classList.remove("active");
    Report.active = sec; sec.classList.add("active");
  },
  // Build each section (render(sec, data) once) when it first comes near the viewport; waits for the page. A built
  // section far from view again is put to sleep (sec.sleep, where its family gives one: its pixels given back) and
  // woken as it comes back (sec.wake): a page read to the end held every section it had built.
  lazy(render) {
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", () => Report.lazy(render)); return;
    }
    const build = (sec) => {
      if (sec.dataset.built) return;
      sec.dataset.built = "1";
      const node = sec.querySelector("script.data");
      if (node) render(sec, JSON.parse(node.textContent));
      sec.addEventListener("mouseenter", () => Report.activate(sec));
      sec.addEventListener("focusin", () => Report.activate(sec));
    };
    const secs = document.querySelectorAll("section.item");
    // printed or saved as PDF: every section drawn, those never near the view and those asleep alike (a print held
    // the two sections on screen; the others were grey boxes)
    window.addEventListener("beforeprint", () => secs.forEach((s) => { build(s); if (s.wake) s.wake(); }));
    if (!("IntersectionObserver" in window)) { secs.forEach(build); return; }
    const io = new IntersectionObserver((entries) => entries.forEach((e) => {
      const sec = e.target;
      if (e.isIntersecting) { build(sec); if (sec.wake) sec.wake(); }
      else if (sec.sleep && !sec.contains(document.activeElement)) sec.sleep();
    }), { rootMargin: "600px 0px" });
    secs.forEach((s) => io.observe(s));
  },
};
// A partial page's note (HtmlPage.close) is written last, in the footer: shown in the sticky header instead, first.
document.addEventListener("DOMContentLoaded", () => {
  const note = document.querySelector("footer .partial"), header = document.querySelector("header");
  if (note && header) header.append(note);
});
// The arrow keys step the section that holds the keyboard's focus, else the active (last hovered) one: the mouse
// resting on another section no longer takes the keys from the focused one. ArrowUp / ArrowDown switch a section's
// rows (sec.rows: the translate page's source and output words), only with the focus in it: for a section merely
// hovered they scroll the page. Form controls, scroll boxes (role region) and tab lists keep their own keys.
document.addEventListener("keydown", (ev) => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey || !ev.target.closest) return;
  if (ev.target.closest("input, select, textarea, [role=region], [role=tablist]")) return;
  const focused = ev.target.closest("section.item");
  const sec = focused && focused.step ? focused : Report.active;
  if (!sec || !sec.step) return;
  if (ev.key === "ArrowRight") { sec.step(1); ev.preventDefault(); }
  if (ev.key === "ArrowLeft") { sec.step(-1); ev.preventDefault(); }
  const up = ev.key === "ArrowUp", down = ev.key === "ArrowDown";
  if ((up || down) && sec === focused && sec.rows && sec.rows(up ? -1 : 1)) ev.preventDefault();
});
"""


def escape(text: Any) -> str:
    """Text for HTML content and quoted attributes (``<``, ``>``, ``&``, quotes escaped; a file name's byte that is
    not UTF-8 shown as ``\\xff``: a lone surrogate cannot be written in a UTF-8 page)."""
    return html.escape(readable(text), quote=True)


def alternatives(others: list[tuple[str, float | None, bool]], cut: str, kept: str = "the beam also kept") -> str:
    """``--n-best``'s other outputs under the best (each (text, score, truncated), best first) as an open list, each
    with its score (``cut``: how one the length cap stopped is said; ``kept``: the list's title, "the other captions
    given" for several --given); "" for none."""
    if not others:
        return ""

    def said(score: float | None, truncated: bool) -> str:
        shown = "no score" if score is None or not math.isfinite(score) else f"{score:.4f}"
        return shown + (f", {cut}" if truncated else "")

    items = "".join(f'<li dir="auto">{escape(text)} <span class="hint">({said(score, truncated)})</span></li>'
                    for text, score, truncated in others)  # fmt: skip
    return f'<details class="alts" open><summary>{escape(kept)} ({len(others)})</summary><ol>{items}</ol></details>'


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` appear literally
    (so neither ``</script>`` nor ``<!--`` can end or change the script), nor U+2028 / U+2029."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def data_script(data: Any) -> str:
    """The section's data block, read by ``Report.lazy`` when the section comes into view."""
    return f'<script type="application/json" class="data">{script_json(data)}</script>'


def quantise(values: Any) -> str:
    """Values in [0, 1] (any shape; clipped) -> base64 of uint8 round(255 v), row-major."""
    v = np.clip(to_numpy(values), 0.0, 1.0)
    return base64.b64encode(np.round(v * 255).astype(np.uint8).tobytes()).decode("ascii")


def dequantise(text: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Inverse of :func:`quantise`: float64 values in [0, 1], within 1/510 of what was quantised."""
    q = np.frombuffer(base64.b64decode(text), dtype=np.uint8).astype(np.float64) / 255.0
    return q if shape is None else q.reshape(shape)


class HtmlPage:
    """One report page, written as it grows: the head (styles, scripts, a header) when opened, then each section as
    it is added, then a footer on :meth:`close`. Opening raises OSError when ``path`` cannot be written (its parent
    folders are created). Family code passes its own CSS and JS; its JS calls ``Report.lazy(render)``.

    The page grows in a fresh temporary file beside ``path`` (safe_files.atomic_output) that becomes ``path`` on
    :meth:`close` (an interrupted run's page too: closed with what it holds and a note saying it is partial). A write
    that fails (a full disk) removes it and re-raises: ``path``'s old page stays whole instead of being cut off
    mid-picture."""

    def __init__(self, path: str | Path | None, title: str, *, header: str = "", css: str = "", js: str = ""):
        """``path`` None: the page is kept in memory (:meth:`text`), for Jupyter (:func:`notebook_frame`)."""
        self.path = None if path is None else Path(path)
        self.sections = 0
        self._text = ""
        self._stack: contextlib.ExitStack | None = None  # holds the temporary file until close renames it
        if self.path is None:
            self._out: Any = io.StringIO()
        else:
            if self.path.is_dir():
                raise IsADirectoryError(f"{self.path} is a directory")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._stack = contextlib.ExitStack()
            tmp = self._stack.enter_context(atomic_output(self.path))  # a link, FIFO or device is refused
            # backslashreplace: text no family code made readable (a lone surrogate) still writes, never ends the page
            self._out = open(tmp, "w", encoding="utf-8", errors="backslashreplace")  # noqa: SIM115 - closed below
        self._write(
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(title)}</title>\n<style>{CORE_CSS}{css}</style>\n"
            f"<script>{CORE_JS}{js}</script>\n</head>\n<body>\n"
            f"<header><h1>{escape(title)}</h1>{header}</header>\n<main>\n"
        )

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
        except BaseException:
            self.discard()
            raise

    def add(self, section: str) -> None:
        """One ``<section class="item">`` (its data in a :func:`data_script` block inside it)."""
        self._write(section + "\n")
        self.sections += 1

    def discard(self) -> None:
        """Give up the page: its temporary file removed, ``path`` as it was before (nothing for an in-memory page)."""
        if self._stack is not None:
            with contextlib.suppress(OSError):  # the buffer's last flush fails on the full disk that ends the page
                self._out.close()
            self._stack.__exit__(OSError, OSError("discarded"), None)  # the exception path: unlink, no rename
            self._stack = None
            self.path = None  # nothing was written there

    def close(self, footer: str = "", partial: str | None = None) -> Path | None:
        """End the page and put it at ``path`` (its path; None where it was given up). ``partial``: why the run did
        not finish it (interrupted, an error), said in a note the page shows first (plain text: escaped here); the
        sections written are whole, so the page is kept rather than lost with the run."""
        if not self._out.closed:
            note = f'<p class="partial" role="note">Partial page: {escape(partial)}</p>' if partial else ""
            self._write(f"</main>\n<footer>{note}{footer}</footer>\n</body>\n</html>\n")
            if self.path is None:
                self._text = self._out.getvalue()
            try:
                self._out.close()
            except BaseException:
                self.discard()
                raise
            if self._stack is not None:
                self._stack.close()  # the temporary file becomes the page
                self._stack = None
        return self.path

    def text(self) -> str:
        """The whole page of an in-memory page (closed first)."""
        self.close()
        return self._text

    def __enter__(self) -> HtmlPage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PageList(list):
    """Results that Jupyter shows as one page: a list whose ``_repr_html_`` is its family's display of all its items
    (``_page``, given by the subclass); a slice stays one (``results[:3]`` shows as a page too), as do two joined."""

    def _page(self, items: list) -> str | None:
        raise NotImplementedError

    def _repr_html_(self) -> str | None:
        return self._page(list(self))

    def __getitem__(self, index):
        got = super().__getitem__(index)
        return type(self)(got) if isinstance(index, slice) else got

    def __add__(self, other):  # two results' lists joined stay one page (list's + gave a plain list); anything
        joined = super().__add__(other)  # else joined is a plain list (a page of strings failed to draw: review)
        return type(self)(joined) if isinstance(other, type(self)) else joined


def notebook_view(
    sections: list[str], header: str, css: str, js: str, height: int, still: bytes | None, alt: str = ""
) -> str:
    """A report of ``sections`` (a family's page code: its CSS and JS) built in memory and framed for a notebook
    (:func:`notebook_frame`, ``alt`` the still's text): what a result's ``_repr_html_`` returns."""
    page = HtmlPage(None, "where the model looked", header=header, css=css, js=js)
    for section in sections:
        page.add(section)
    return notebook_frame(page.text(), height, still, alt)


def notebook_frame(page: str, height: int, fallback: bytes | None = None, alt: str = "") -> str:
    """An HTML fragment that shows a whole report page (``page``, self-contained) inside a notebook: an ``<iframe>``
    holding the page (its styles and scripts cannot meet the notebook's), grown to the page's height once shown.
    ``fallback``: a JPEG shown where the frame is not (a viewer that strips frames and scripts, like a repository's
    web page); the frame removes it once it has loaded; ``alt``: what it shows, in words (the caption, the
    translation), its text for a reader who cannot see it. ``height``: the frame's first height, in pixels."""
    # named by the content, not at random: a notebook re-run with the same results stores the same output
    tag = "attn-" + hashlib.sha1(page.encode("utf-8")).hexdigest()[:12]
    still = ""
    if fallback is not None:
        uri = "data:image/jpeg;base64," + base64.b64encode(fallback).decode("ascii")
        text = escape(alt or "where the model looked (a still picture)")
        still = f'<img id="{tag}" src="{uri}" alt="{text}" style="max-width:100%">'
    fit = (
        "const f=this,fit=()=>{try{f.style.height=(f.contentDocument.documentElement.scrollHeight+4)+'px'}catch(e){}};"
        f"fit();setTimeout(fit,400);setTimeout(fit,1500);const s=document.getElementById('{tag}');if(s)s.remove();"
    )
    return (
        f'<div>{still}<iframe srcdoc="{escape(page)}" onload="{escape(fit)}" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #d9dee5;border-radius:6px" '
        'title="attention report"></iframe></div>'
    )
