"""``caption --html``: one self-contained page, one section per image: the image, its caption as words, and for the
word under the mouse (or stepped to with the buttons or the arrow keys) where the model looked, drawn on a canvas as
brightness: the image is darkened where the word's attention is low (an opacity slider sets how much), and a
hard-attention model's chosen region is outlined. With ``--evidence`` a second canvas beside it draws, for the same
word, what drives it: the regions whose removal at the word's step lowers its probability most (their positive part as
a distribution, drawn the same way), and the info line gives the word's agreement (Kendall tau between the two
rankings). The info line names, in words, the region the word looked at most, and a screen reader reads it out as it
changes (aria-live); each canvas is an image named by the caption. The page skeleton is text_attn/core/html_page.py.

Each word's map is :func:`captioning.views.overlay.attention_map` at grid resolution (the same scaling as the PNG
overlays: full brightness at FOCUS times the uniform share or more), quantised to one byte per region; the browser
upsamples it over the crop box (bilinear). Outside the crop box, which the network never saw, the image stays dark.

Size in the file per image (and in memory until it is written): the JPEG, longest side at most MAX_SIDE px at
JPEG_QUALITY (typically 10-50 KB, at most about 80 KB for pure noise), as base64 (x 4/3); plus the maps, one byte per
word per region as base64 (30 words on a 14 x 14 grid: 7.8 KB; twice that with --evidence); plus the words. So about
15-120 KB per image.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
from PIL import Image

from captioning.photos.preprocess import to_rgb
from captioning.views.overlay import attention_map, panel_size
from text_attn.core.arrays import evidence_shares
from text_attn.core.html_page import HtmlPage, alternatives, data_script, escape, quantise
from text_attn.core.unsure import unsure_line

MAX_SIDE = 384  # longest side of the embedded image and of its canvas, pixels
JPEG_QUALITY = 85
OPACITY = 80  # the slider's start, percent: least-attended parts keep 20% of their brightness

CAPTION_CSS = """
.cap-view { display: flex; flex-wrap: wrap; gap: 10px 18px; align-items: flex-start; }
.cap-view figure { margin: 0; }
.cap-view figcaption { font-size: 12px; color: var(--muted); }
.cap-view canvas { background: #e5e7eb; border-radius: 4px; max-width: 100%; height: auto; }
.cap-side { flex: 1 1 280px; min-width: 240px; }
.cap-side .words { font-size: 17px; margin-top: 0; }
.controls { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; font-size: 13px; color: var(--muted); }
.controls input[type=range] { width: 120px; vertical-align: middle; }
.info { min-height: 2.6em; }
.note { color: #92400e; font-size: 13px; margin: 0 0 8px; }
.refs { font-size: 13px; color: var(--muted); }
.refs ul { margin: 4px 0 0; padding-left: 18px; }
"""

CAPTION_JS = r"""
const Caption = {
  render(sec, d) {
    const words = sec.querySelectorAll(".w");
    const c = sec.cap = { d, a: Report.bytes(d.a), e: d.e ? Report.bytes(d.e) : null, t: -1, img: null, words };
    const img = sec.photo || new Image();  // sec.photo: loaded ahead for printing (Caption.preload)
    if (img.complete && img.naturalWidth) c.img = img;  // painted at once, below: a print laid out next holds it
    else { img.onload = () => { c.img = img; Caption.paint(sec); }; if (!sec.photo) img.src = d.img; }
    words.forEach((w, t) => {
      w.addEventListener("mouseenter", () => Caption.show(sec, t));
      w.addEventListener("click", () => Caption.show(sec, t));
    });
    sec.step = (k) => Caption.show(sec, Math.max(0, Math.min(words.length - 1, c.t + k)));
    sec.querySelector(".prev").addEventListener("click", () => sec.step(-1));
    sec.querySelector(".next").addEventListener("click", () => sec.step(1));
    sec.querySelector(".opacity").addEventListener("input", () => Caption.paint(sec));
    if (c.img) Caption.paint(sec);
    // far from view (Report.lazy): the canvases' pixels are given back (384 x 384 x 4 bytes each; Chromium held
    // 2.9 GB after a page of 1,500 photos was read to the end) and drawn again on the way back; their size on the
    // page is kept, so nothing above the reader moves
    const canvases = () => sec.querySelectorAll(".cap-view canvas");
    sec.sleep = () => canvases().forEach((cv) => {
      if (!cv.width) return;
      const r = cv.getBoundingClientRect();
      cv.style.width = `${r.width}px`; cv.style.height = `${r.height}px`;
      cv.dataset.w = cv.width; cv.dataset.h = cv.height; cv.width = cv.height = 0;
    });
    sec.wake = () => {
      let woke = false;
      canvases().forEach((cv) => {
        if (cv.width || !cv.dataset.w) return;
        cv.width = +cv.dataset.w; cv.height = +cv.dataset.h; cv.style.width = cv.style.height = ""; woke = true;
      });
      if (woke) Caption.paint(sec);
    };
  },
  show(sec, t) {
    const c = sec.cap;
    if (!c.words.length) return;
    c.t = t;
    c.words.forEach((w, k) => w.classList.toggle("on", k === t));
    Caption.paint(sec);
  },
  // one word's map (bytes at grid resolution) drawn on a canvas: the image, darkened where the map is low, and the
  // part outside the crop box (never seen by the network) dark; returns the crop box in canvas pixels
  draw(cv, img, d, map, t, s) {
    const ctx = cv.getContext("2d"), W = cv.width, H = cv.height;
    ctx.globalAlpha = 1;
    ctx.drawImage(img, 0, 0, W, H);
    // whole pixels: the dark outside and the map inside meet without a lighter seam
    const x0 = Math.round(d.box[0] * W), y0 = Math.round(d.box[1] * H);
    const bw = Math.round(d.box[2] * W) - x0, bh = Math.round(d.box[3] * H) - y0;
    if (t < 0) return [x0, y0, bw, bh];
    const g = d.g, n = g * g, m = document.createElement("canvas");
    m.width = m.height = g;
    const mc = m.getContext("2d"), px = mc.createImageData(g, g);
    for (let k = 0; k < n; k++) px.data[4 * k + 3] = 255 - map[t * n + k];  // black where the map is low
    mc.putImageData(px, 0, 0);
    ctx.globalAlpha = s;
    ctx.fillStyle = "#000";
    ctx.beginPath(); ctx.rect(0, 0, W, H); ctx.rect(x0, y0, bw, bh); ctx.fill("evenodd");  // outside the crop
    // bilinear ("low"): "high" filters the 9 x 9 map as it grows, and the most-attended region drew at 0.79
    ctx.imageSmoothingEnabled = true; ctx.imageSmoothingQuality = "low";
    ctx.drawImage(m, x0, y0, bw, bh);
    ctx.globalAlpha = 1;
    return [x0, y0, bw, bh];
  },
  paint(sec) {
    const c = sec.cap, d = c.d;
    if (!c.img) return;
    const canvases = sec.querySelectorAll(".cap-view canvas"), s = sec.querySelector(".opacity").value / 100;
    const [x0, y0, bw, bh] = Caption.draw(canvases[0], c.img, d, c.a, c.t, s);
    if (c.e && canvases[1]) Caption.draw(canvases[1], c.img, d, c.e, c.t, s);
    const info = sec.querySelector(".info");
    if (c.t >= 0) {
      const g = d.g, n = g * g;
      let where = "";
      if (d.chosen) {
        const ctx = canvases[0].getContext("2d");
        const r = Math.floor(d.chosen[c.t] / g), q = d.chosen[c.t] % g, cw = bw / g, ch = bh / g;
        ctx.lineWidth = 3; ctx.strokeStyle = "#000"; ctx.strokeRect(x0 + q * cw, y0 + r * ch, cw, ch);
        ctx.lineWidth = 1; ctx.strokeStyle = "#fff"; ctx.strokeRect(x0 + q * cw, y0 + r * ch, cw, ch);
        where = `; it looked at region row ${r + 1}, column ${q + 1} (outlined)`;
      }
      let agree = "";
      if (c.e) {
        const tau = d.agree ? d.agree[c.t] : null;
        agree = tau == null ? "; agreement with what drives it: undefined (a flat ranking)"
                            : `; agreement with what drives it: \u03c4 ${tau >= 0 ? "+" : ""}${tau.toFixed(2)}`;
      }
      // its probability too, where the page has it (a caption read, --unsure): the hover's title alone was out of
      // a keyboard's and a phone's reach
      const title = c.words[c.t].title || "", p = title.startsWith("p = ") ? `; ${title}` : "";
      info.textContent = `word ${c.t + 1} of ${c.words.length}, \u201c${c.words[c.t].textContent}\u201d: ` +
        `peak weight ${(100 * d.peak[c.t]).toFixed(1)}% (uniform ${(100 / n).toFixed(1)}%), ` +
        `${Caption.strongest(c.a, c.t, g)}${where}${agree}${p}`;
    }
    sec.dataset.shown = String(c.t);
  },
  // where word t's map (bytes, g x g per word) is strongest, in words for a reader who cannot see the canvas:
  // "strongest at row 2, column 6 of 7 x 7, upper right" (the third of the picture, each way, its centre lies in)
  strongest(map, t, g) {
    const n = g * g;
    let k = 0;
    for (let j = 1; j < n; j++) if (map[t * n + j] > map[t * n + k]) k = j;
    const r = Math.floor(k / g), q = k % g, third = (i) => Math.min(2, Math.floor((3 * (2 * i + 1)) / (2 * g)));
    const v = ["upper", "middle", "lower"][third(r)], h = ["left", "centre", "right"][third(q)];
    const place = v === "middle" && h === "centre" ? "centre" : `${v} ${h}`;
    return `strongest at row ${r + 1}, column ${q + 1} of ${g} \u00d7 ${g}, ${place}`;
  },
  // every section's photo loaded while the page is idle, a few at a time: a print draws every section at once
  // (Report.lazy's beforeprint), and a photo still loading then (an image loads asynchronously) printed as a grey box;
  // loaded, each is only its JPEG's bytes until drawn
  preload() {
    const secs = [...document.querySelectorAll("section.item")];
    const later = window.requestIdleCallback || ((f) => setTimeout(f, 50));
    const some = () => {
      for (const sec of secs.splice(0, 20)) {
        const node = sec.querySelector("script.data");
        if (sec.photo || sec.dataset.built || !node) continue;
        sec.photo = new Image(); sec.photo.src = JSON.parse(node.textContent).img;
      }
      if (secs.length) later(some);
    };
    later(some);
  },
};
Report.lazy(Caption.render);
if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", Caption.preload);
else Caption.preload();
"""


def open_caption_page(path: Any, model: str, grid: int) -> HtmlPage:
    """Start the page (raises OSError when ``path`` cannot be written)."""
    header = (
        f'<span class="meta">model {escape(model)}, {grid} &times; {grid} regions</span>'
        '<span class="hint">hover a word, or click one and step with <kbd>&larr;</kbd> <kbd>&rarr;</kbd>: '
        "bright = where the model looked for that word</span>"
    )
    return HtmlPage(path, "caption: attention report", header=header, css=CAPTION_CSS, js=CAPTION_JS)


def thumbnail(image: Image.Image) -> tuple[str, tuple[int, int]]:
    """The image as a JPEG data: URI, longest side at most MAX_SIDE; and the canvas size (longest side MAX_SIDE, the
    shorter at least MAX_SIDE / MAX_ASPECT: a panorama is stretched to 1:4, as the overlay PNG's panels are; a 6000 x
    400 one was drawn 384 x 26, its 9 x 9 map unreadable)."""
    rgb = to_rgb(image)
    width, height = rgb.size
    canvas = panel_size((width, height), MAX_SIDE)
    # stretched past its rounding (a panorama, a sliver): the picture is too (a 10000 x 50 one was sent 384 x 2, a
    # smear on its canvas); else the thumbnail as before (a 500 x 333 photo's canvas rounds its side up a pixel)
    if min(width, height) * MAX_SIDE + max(width, height) < min(canvas) * max(width, height):
        small = rgb.resize(canvas, Image.Resampling.LANCZOS, reducing_gap=3.0)
    else:
        small = rgb.copy()
        small.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    uri = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return uri, canvas


def section_data(record: dict[str, Any], image: Image.Image) -> dict[str, Any]:
    """What the page needs to draw one captioned image: the JPEG, the crop box as fractions of the image, the grid
    side, each word's map at grid resolution (quantised), each word's peak weight and the hard-attention regions."""
    g = record["grid"][0]
    alphas = np.asarray(record["attention"], dtype=np.float64).reshape(len(record["words"]), g * g)  # (T, L)
    maps = [attention_map(a, g, (g, g), (0, 0, g, g)) for a in alphas]  # (g, g) each, in [0, 1]
    uri, (cw, ch) = thumbnail(image)
    width, height = record["size"]
    x0, y0, x1, y1 = record["crop_box"]
    data = {
        "img": uri,
        "box": [round(x0 / width, 5), round(y0 / height, 5), round(x1 / width, 5), round(y1 / height, 5)],
        "g": g,
        "a": quantise(np.stack(maps)) if maps else "",
        "peak": [round(float(a.max()), 4) for a in alphas],
        "chosen": record.get("chosen"),
        "size": [cw, ch],
    }
    if record.get("evidence") is not None:  # caption --evidence: what drives each word, drawn as the overlay does
        data["e"] = quantise(np.stack(evidence_maps(record["evidence"], g))) if maps else ""
        data["agree"] = record.get("agreement")
    return data


def evidence_maps(evidence: Any, g: int) -> list[np.ndarray]:
    """Per word (T rows of L = g * g), what removing each region costs it: its positive part as a distribution (the
    PNG overlay's second section), scaled as attention is; (g, g) each in [0, 1]."""
    e = evidence_shares(np.reshape(evidence, (-1, g * g)))  # (T, L)
    return [attention_map(row, g, (g, g), (0, 0, g, g)) for row in e]


def image_section(index: int, record: dict[str, Any], image: Image.Image | None, unsure: float | None = None) -> str:
    """One ``<section>``: the image's name, its canvas, words and controls, and its data (a failed image: its error).
    ``unsure``: a read caption's words under this probability are underlined (text_attn.core.unsure; None: none)."""
    head = f"<h2>{index}. {escape(record['image'])}"
    if record.get("truncated"):
        head += " &middot; cut off at --max-len"
    head += "</h2>"
    if record.get("out_of_domain"):  # the model's own note: what it learned from
        note = record.get("note") or "this image looks unlike the model's training images"
        head += f'<p class="note">{escape(note)}</p>'
    error = f'<p class="error">{escape(record["error"])}</p>' if record.get("error") else ""
    if image is None or record.get("grid") is None:  # not captioned: the image could not be read
        return f'<section class="item cap" id="i{index}">{head}{error}</section>'
    data = section_data(record, image)
    cw, ch = data.pop("size")
    probs = record.get("word_probs")  # a caption read (caption --given, --unsure): each word's probability
    # 4 significant digits: an unlikely word is not p = 0.0000
    tips = [f' title="p = {p:.4g}"' for p in probs] if probs else [""] * len(record["words"])
    marked = {t for t, p in enumerate(probs or ()) if unsure is not None and p < unsure}
    for t in marked:
        tips[t] = f' title="p = {probs[t]:.4g}, under {unsure:g}"'
    spans = enumerate(zip(record["words"], tips, strict=True))
    words = " ".join(f'<span class="w{" unsure" if t in marked else ""}" data-t="{t}"{tip}>{escape(w)}</span>'
                     for t, (w, tip) in spans)  # fmt: skip
    # dir="auto": an Arabic or Hebrew caption's words (inline blocks) run right to left, first word at the right
    if probs:
        if record.get("given"):
            read = (f"the caption given, read by the model: mean log-probability {record['score']:.4f}, the end "
                    f"{record['end_prob']:.4g}; each word's probability on hover")  # fmt: skip
        else:
            read = "each word's probability on hover (the model's own caption)"
        if marked:
            found = [(record["words"][t], probs[t]) for t in sorted(marked)]
            read += f"; underlined, {unsure_line(found, unsure)}"
        head += f'<p class="note">{escape(read)}</p>'
    return (
        f'<section class="item cap" id="i{index}" tabindex="0">{head}{error}<div class="cap-view">'
        f'{canvases(cw, ch, "e" in data, " ".join(record["words"]))}<div class="cap-side">'
        f'<p class="words" dir="auto">{words}</p>'
        '<div class="controls"><button class="prev" title="previous word (&larr;)" aria-label="previous word">'
        '&#9664;</button><button class="next" title="next word (&rarr;)" aria-label="next word">&#9654;</button>'
        f'<label>attention <input type="range" class="opacity" min="0" max="100" value="{OPACITY}"></label></div>'
        # polite: a screen reader says each word's line as the word is stepped to
        '<p class="info hint" aria-live="polite">the image as captioned; hover a word</p>'
        f"{_alternatives(record)}{_references(record)}</div></div>"
        f"{data_script(data)}</section>"
    )


def _alternatives(record: dict[str, Any]) -> str:
    """caption --n-best: the beam's other captions under the controls (nothing without, or with one); several
    --given: the others read, best first (the page drew the best alone, as if it were the only one given)."""
    others = [(h["caption"], h["score"], h["truncated"]) for h in (record.get("n_best") or [])[1:]]
    given = record.get("given") if isinstance(record.get("given"), list) else []
    read = [(g["caption"], g["score"], False) for g in given[1:]]
    return alternatives(others, "cut off at --max-len") + alternatives(read, "", "the other captions given, read")


def _references(record: dict[str, Any]) -> str:
    """caption --references: the captions people wrote of the image, under its controls (nothing without)."""
    refs = record.get("references")
    if not refs:
        return ""
    items = "".join(f"<li>{escape(r)}</li>" for r in refs)
    return f'<details class="refs" open><summary>the references ({len(refs)})</summary><ul>{items}</ul></details>'


def canvases(width: int, height: int, evidence: bool, caption: str = "") -> str:
    """The attention canvas, and with ``evidence`` the second one (what drives the word) beside it, each labelled.
    Each is an image to assistive technology, named by the caption: a canvas is otherwise not there at all."""
    name = escape(f"photo: {caption}")
    if not evidence:
        return f'<canvas width="{width}" height="{height}" role="img" aria-label="{name}"></canvas>'
    return "".join(
        f'<figure><canvas class="{kind}" width="{width}" height="{height}" role="img" aria-label="{name}, {label}">'
        f"</canvas><figcaption>{label}</figcaption></figure>"
        for kind, label in (
            ("att", "where it looked (attention)"),
            ("ev", "what drives the word (removing a region lowers it)"),
        )  # fmt: skip
    )
