"""``translate --html``: one self-contained page, one section per sentence: the source and the output as words, linked
by attention (hover an output word: the source words light up by its weights; hover a source word: the output words
that looked at it, the strongest outlined), and the alignment grid as a scrollable table (output words down, source
words across, darker = more weight). For the Transformer a layer and head selector (or the heads' average) applies
to every section. With ``--evidence`` a third line repeats the source words, lit for the hovered output word by what
drives it (what masking each source word at its step costs it, relative to the costliest), with the word's agreement
(Kendall tau between the attention drawn, of the layer and head chosen, and that cost). From the keyboard: the left
and right arrows step a row's words, the up and down arrows switch between the output and source rows; an info line
(read out by a screen reader) names the word each looked at most. The source words carry the model's source language
(``lang``). The page skeleton is text_attn/core/html_page.py.

Size in the file per sentence: layers x heads x T x S bytes of weights as base64 (x 4/3; an RNN: T x S) plus the
words; a 30 x 30 sentence: 1.2 KB for an RNN, 38 KB for a 3-layer, 8-head Transformer (with --evidence: + 1.2 KB of
costs, and a tau per word for each layer and head: + 0.5 KB for an RNN, + 6 KB for that Transformer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from text_attn.core.arrays import to_numpy
from text_attn.core.faithfulness import rounded_taus, span_taus
from text_attn.core.html_page import HtmlPage, alternatives, data_script, escape, quantise
from text_attn.core.token_labels import token_labels
from text_attn.core.unsure import UNSURE, unsure_line
from text_attn.translation.alignments import unsure_tokens

ALIGNMENT_CSS = """
.note { color: #92400e; font-size: 13px; margin: 0 0 6px; }
.pair p { margin: 2px 0; display: flex; align-items: baseline; line-height: 2; }
.pair .label { flex: none; }
.w.best { border-color: var(--accent); }
.grid-box { display: inline-block; overflow: auto; max-height: 460px; max-width: 100%; margin-top: 8px;
            border: 1px solid var(--line); }
table.grid { border-collapse: collapse; font-size: 12px; }
table.grid th { background: #fff; font-weight: normal; color: var(--muted); padding: 2px 4px; white-space: nowrap; }
table.grid thead th { position: sticky; top: 0; z-index: 2; vertical-align: bottom; }
table.grid thead th span { writing-mode: vertical-rl; transform: rotate(180deg); display: inline-block; }
table.grid tbody th { position: sticky; left: 0; z-index: 1; text-align: right; }
table.grid td { width: 20px; min-width: 20px; height: 20px; border: 1px solid #eef0f3; padding: 0; }
table.grid tr.on th, table.grid th.on { color: var(--accent); font-weight: 600; }
.pair p.drives .label { color: #92400e; }
p.translation { white-space: pre-line; margin: 6px 0 0; }
"""

ALIGNMENT_JS = r"""
const Align = {
  choice(id, fallback) { const s = document.getElementById(id); return s ? Number(s.value) : fallback; },
  // the (T, S) weights shown: the chosen layer, one head or the heads' mean
  weights(sec) {
    const c = sec.al, d = c.d, n = d.T * d.S, out = new Float32Array(n);
    const l = Math.min(d.L - 1, Align.choice("layer", d.L - 1)), h = Align.choice("head", -1);
    const heads = h >= 0 && h < d.H ? [h] : [...Array(d.H).keys()];
    for (const hh of heads) {
      const base = (l * d.H + hh) * n;
      for (let k = 0; k < n; k++) out[k] += c.a[base + k] / 255 / heads.length;
    }
    return out;
  },
  render(sec, d) {
    const src = [...sec.querySelectorAll(".w.src")], tgt = [...sec.querySelectorAll(".w.tgt")];
    const c = sec.al = { d, a: Report.bytes(d.a), src, tgt, t: -1, s: -1, cells: [],
                         e: d.e ? Report.bytes(d.e) : null, drv: [...sec.querySelectorAll(".w.drv")] };
    c.titles = new Map([...src, ...tgt, ...c.drv].map((w) => [w, w.title]));  // a read text's probabilities: kept
    Align.grid(sec);
    // far from view (Report.lazy): the grid's table is taken down (a 20 x 20 sentence's is ~500 nodes; Chromium
    // held every one of a long page read to the end) and built again on the way back, its box's size and scroll
    // kept, so nothing above the reader moves; the words, their shading and the word shown stay as they are
    const box = sec.querySelector(".grid-box");
    sec.sleep = () => {
      const table = box.querySelector("table.grid");
      if (!table) return;
      const r = box.getBoundingClientRect();
      c.scroll = [box.scrollLeft, box.scrollTop];
      box.style.width = `${r.width}px`; box.style.height = `${r.height}px`;
      table.remove(); c.cells = [];
    };
    sec.wake = () => {
      if (box.querySelector("table.grid")) return;
      Align.grid(sec);
      box.style.width = box.style.height = "";
      [box.scrollLeft, box.scrollTop] = c.scroll;
      Align.paint(sec);
    };
    tgt.forEach((w, t) => w.addEventListener("mouseenter", () => Align.fromTarget(sec, t, -1)));
    src.forEach((w, s) => w.addEventListener("mouseenter", () => Align.fromSource(sec, s)));
    // the arrow keys: left and right step along the row shown (the output words, or the source words once ArrowUp
    // went up to them, as hovering them does); up and down switch rows, landing on the word the shown one is linked
    // to most (the source word it looked at most, the output word that looked at it most)
    const clamp = (i, n) => Math.max(0, Math.min(n - 1, i));
    sec.step = (k) => {
      if (c.s >= 0) Align.fromSource(sec, clamp(c.s + k, src.length));
      else Align.fromTarget(sec, clamp(c.t + k, tgt.length), -1);
    };
    sec.rows = (k) => {  // -1: up to the source words, 1: down to the output words; false: already there
      const onSource = c.s >= 0;
      if (k < 0 && !onSource) {
        const row = c.t >= 0 ? [...c.w.subarray(c.t * d.S, (c.t + 1) * d.S)] : [0];
        Align.fromSource(sec, row.indexOf(Math.max(...row)));
        return true;
      }
      if (k > 0 && (onSource || c.t < 0)) {
        const col = onSource ? tgt.map((_, t) => c.w[t * d.S + c.s]) : [0];
        Align.fromTarget(sec, col.indexOf(Math.max(...col)), -1);
        return true;
      }
      return false;
    };
    Align.paint(sec);
  },
  // the grid as a table: output words down, source words across, a cell per weight (shaded by paint)
  grid(sec) {
    const c = sec.al, src = c.src, tgt = c.tgt;
    const table = document.createElement("table");
    table.className = "grid";
    const head = table.createTHead().insertRow(), corner = document.createElement("th");
    corner.textContent = "output \\ source";  // what the rows and the columns are, named for a screen reader
    corner.setAttribute("aria-label", "output words (rows), source words (columns)");
    head.appendChild(corner);
    const lang = src.length ? src[0].parentElement.lang : "";  // the source line's language, where the model knows it
    for (const w of src) {
      const th = document.createElement("th"), span = document.createElement("span");
      th.scope = "col"; if (lang) th.lang = lang;
      span.textContent = w.textContent; th.appendChild(span); head.appendChild(th);
    }
    const body = table.createTBody();
    c.cells = [];
    tgt.forEach((w, t) => {
      const row = body.insertRow(), th = document.createElement("th");
      th.scope = "row";  // an output word heads its row (without scope it was announced as a column's header)
      th.textContent = w.textContent; row.appendChild(th);
      src.forEach((_, s) => {
        const td = row.insertCell();
        td.addEventListener("mouseenter", () => Align.fromTarget(sec, t, s));
        c.cells.push(td);
      });
    });
    sec.querySelector(".grid-box").appendChild(table);
  },
  // the line a screen reader says as a word is shown (aria-live): the word and where it looked, or who looked at it
  say(sec, text) { const info = sec.querySelector(".info"); if (info) info.textContent = text; },
  paint(sec) {
    const c = sec.al, d = c.d, src = c.src, tgt = c.tgt;
    c.w = Align.weights(sec);
    c.cells.forEach((td, k) => {
      const t = Math.floor(k / d.S), s = k % d.S;
      td.style.background = Report.shade(c.w[k]);
      td.title = `${tgt[t].textContent} \u2190 ${src[s].textContent}: ${c.w[k].toFixed(3)}`;
    });
    if (c.s >= 0) Align.fromSource(sec, c.s); else if (c.t >= 0) Align.fromTarget(sec, c.t, -1);
  },
  // a grid row's or column's header marked as the word shown; none while the section sleeps (its grid taken down:
  // the arrow keys still step the section last hovered, and the selectors repaint every built one)
  mark(sec, selector, i) { const e = sec.querySelectorAll(selector)[i]; if (e) e.classList.add("on"); },
  clear(sec) {
    const c = sec.al;
    for (const w of [...c.src, ...c.tgt, ...c.drv]) {
      w.classList.remove("on", "best"); w.style.background = ""; w.title = c.titles.get(w) || "";
    }
    const agree = sec.querySelector(".agree");
    if (agree) agree.textContent = "";
    sec.querySelectorAll(".grid .on").forEach((e) => e.classList.remove("on"));
  },
  fromTarget(sec, t, s) {
    const c = sec.al, S = c.d.S;
    Align.clear(sec);
    c.t = t; c.s = -1;
    const row = c.w.subarray(t * S, (t + 1) * S), top = Math.max(...row) || 1;
    c.src.forEach((w, k) => { w.style.background = Report.shade(row[k] / top); w.title = row[k].toFixed(3); });
    c.tgt[t].classList.add("on");
    Align.mark(sec, ".grid tbody tr", t);
    if (s >= 0) { c.src[s].classList.add("on"); Align.mark(sec, ".grid thead th", s + 1); }
    if (c.e) {  // what drives the word: each source word's cost, relative to the costliest (already in the bytes)
      c.drv.forEach((w, k) => {
        const v = c.e[t * S + k] / 255;
        w.style.background = Report.shade(v); w.title = `${(100 * v).toFixed(0)}% of the costliest`;
      });
      // the tau of the weights drawn: [layer][0] the heads' mean, [layer][1 + h] head h (view_taus)
      const l = Math.min(c.d.L - 1, Align.choice("layer", c.d.L - 1)), h = Align.choice("head", -1);
      const taus = c.d.agree ? c.d.agree[l] || [] : [], pick = h >= 0 && h < c.d.H ? h + 1 : 0;
      // a page with the heads' mean's taus only (attention-serve's): a head's own is not there, the mean's is said
      const own = taus[pick] !== undefined, tau = (own ? taus[pick] : taus[0] || [])[t];
      let shown = tau == null ? "undefined (a flat ranking)" : `\u03c4 ${tau >= 0 ? "+" : ""}${tau.toFixed(2)}`;
      if (!own && pick > 0) shown += " (of the heads' mean: one head's is not computed here)";
      sec.querySelector(".agree").textContent =
        `\u201c${c.tgt[t].textContent}\u201d: agreement of its attention with what drives it: ${shown}`;
    }
    const k = row.indexOf(Math.max(...row));
    // its probability too, where the page has it (a text read, --unsure): on hover alone, a keyboard or a phone never
    // had it
    const p = (c.titles.get(c.tgt[t]) || "").startsWith("p = ") ? `; ${c.titles.get(c.tgt[t])}` : "";
    // "token": a subword model's are pieces ("output word 3 of 20, \u201c\u00b7st\u201d" counted pieces as words)
    Align.say(sec, `output token ${t + 1} of ${c.tgt.length}, \u201c${c.tgt[t].textContent}\u201d: looked most at ` +
      `source token ${k + 1}, \u201c${c.src[k].textContent}\u201d (weight ${row[k].toFixed(3)})${p}`);
    sec.dataset.shown = `t${t}`;
  },
  fromSource(sec, s) {
    const c = sec.al, S = c.d.S;
    Align.clear(sec);
    c.s = s;
    const col = c.tgt.map((_, t) => c.w[t * S + s]), top = Math.max(...col) || 1;
    c.tgt.forEach((w, t) => {
      const own = c.titles.get(w);
      w.style.background = Report.shade(col[t] / top); w.title = col[t].toFixed(3) + (own ? ` \u00b7 ${own}` : "");
    });
    const t = col.indexOf(Math.max(...col));  // the output word that looked at it most
    if (t >= 0) c.tgt[t].classList.add("best");
    c.src[s].classList.add("on");
    Align.mark(sec, ".grid thead th", s + 1);
    if (t >= 0) {
      Align.say(sec, `source token ${s + 1} of ${c.src.length}, \u201c${c.src[s].textContent}\u201d: looked at most ` +
        `by output token ${t + 1}, \u201c${c.tgt[t].textContent}\u201d (weight ${col[t].toFixed(3)})`);
    }
    sec.dataset.shown = `s${s}`;
  },
};
document.addEventListener("change", (ev) => {
  if (ev.target.id !== "layer" && ev.target.id !== "head") return;
  document.querySelectorAll("section.item[data-built]").forEach((sec) => { if (sec.al) Align.paint(sec); });
});
Report.lazy(Align.render);
"""


def open_alignment_page(path: Any, translator: Any, model: str) -> HtmlPage:
    """Start the page (raises OSError when ``path`` cannot be written); a Transformer gets the layer/head selector."""
    cfg = translator.net.cfg
    if _is_transformer(translator):
        what = f"Transformer, {cfg.dec_layers} decoder layers x {cfg.num_heads} heads"
    else:
        what = f"RNN, {cfg.attention} attention"
    header = f'<span class="meta">model {escape(model)} ({escape(what)})</span>'
    if _is_transformer(translator):
        shown = translator.net.plot_index  # --layer's, else the penultimate: the one that aligns best
        layers = "".join(
            f'<option value="{i}"{" selected" if i == shown else ""}>layer {i + 1}</option>'
            for i in range(cfg.dec_layers)
        )
        heads = "".join(f'<option value="{h}">head {h + 1}</option>' for h in range(cfg.num_heads))
        # one label a select: one wrapping both named the layer's by both texts, and the head's by none
        header += (
            f'<label>cross-attention of <select id="layer">{layers}</select></label> '
            f'<label>heads <select id="head"><option value="-1" selected>average of heads</option>{heads}</select>'
            "</label>"
        )
    header += (
        '<span class="hint">hover an output word (or step with <kbd>&larr;</kbd> <kbd>&rarr;</kbd>): its source '
        "words light up by weight (relative to the strongest); hover a source word (or go up to them with "
        "<kbd>&uarr;</kbd>, down again with <kbd>&darr;</kbd>): the output words that looked at it (the strongest "
        "outlined); grid: darker = more weight</span>"
    )
    return HtmlPage(path, "translate: attention report", header=header, css=ALIGNMENT_CSS, js=ALIGNMENT_JS)


def _is_transformer(translator: Any) -> bool:
    return translator.arch == "transformer"


@torch.no_grad()
def report_attention(translator: Any, translations: list[Any]) -> list[np.ndarray | None]:
    """Per translation its cross-attention as (layers, heads, T, S+1) (an RNN: (1, 1, T, S+1); None: no attention).

    The search returns one Transformer layer only, so for a Transformer every decoder layer's weights are computed
    again in one teacher-forced pass per layer over the words it output (eval mode: the same weights); a line
    translated sentence by sentence (``pieces``), for each sentence over its own source, joined as its attention is
    (text_attn.translation.sentences.join_grids)."""
    from text_attn.translation.sentences import join_grids

    if not translations or translations[0].attention is None:
        return [None] * len(translations)
    if not _is_transformer(translator):
        return [to_numpy(tr.attention)[None, None] for tr in translations]  # (1, 1, T, S+1)
    lines = [getattr(tr, "pieces", None) or [tr] for tr in translations]
    flat = _layer_weights(translator, [p for pieces in lines for p in pieces])
    out, at = [], 0
    for pieces in lines:
        part = flat[at : at + len(pieces)]
        at += len(pieces)
        if len(part) == 1:
            out.append(part[0])
        else:
            out.append(join_grids([torch.from_numpy(w) for w in part], [len(p.source) for p in pieces]).numpy())
    return out


def _layer_weights(translator: Any, translations: list[Any]) -> list[np.ndarray]:
    """Each translation's (layers, heads, T, S+1) cross-attention of a Transformer, teacher-forced over its source."""
    net, src_vocab, tgt_vocab = translator.net, translator.src_vocab, translator.tgt_vocab
    device = next(net.parameters()).device
    pad = torch.nn.utils.rnn.pad_sequence
    src_ids = [torch.tensor(src_vocab.encode(tr.source, eos=True)) for tr in translations]
    tgt_ids = [torch.tensor(tgt_vocab.encode(tr.tokens, bos=True, eos=False)) for tr in translations]
    src = pad(src_ids, batch_first=True, padding_value=src_vocab.pad_id).to(device)
    tgt_in = pad(tgt_ids, batch_first=True, padding_value=tgt_vocab.pad_id).to(device)  # (B, T) = bos + words
    lens = torch.tensor([len(i) for i in src_ids], device=device)
    was_training, plot_layer = net.training, net.plot_layer
    net.eval()
    try:
        state = net.encode(src, lens)
        layers = []
        for layer in range(len(net.decoder_layers)):
            net.plot_layer = layer
            layers.append(net.decode(tgt_in, state, need_weights=True)[1])  # (B, T, H, S)
    finally:
        net.plot_layer = plot_layer
        net.train(was_training)
    weights = torch.stack(layers, dim=1).transpose(2, 3).float().cpu().numpy()  # (B, layers, H, T, S)
    return [weights[b, :, :, : len(tr.tokens), : len(src_ids[b])] for b, tr in enumerate(translations)]


def failed_section(number: int, error: str) -> str:
    """The ``<section>`` of an input that was not translated (an empty line, not UTF-8, too long): its number and what
    is wrong, in its place among the others, as the caption page shows a photo it could not read."""
    error_line = f'<p class="error">{escape(error)}</p>'
    return f'<section class="item tr failed" id="s{number}"><h2>input {number}</h2>{error_line}</section>'


def sentence_section(
    number: int,
    translation: Any,
    attention: np.ndarray | None,
    note: str | None = None,
    evidence: Any = None,
    lang: str | None = None,
    unsure: float | None = UNSURE,
    readings: Any = (),
) -> str:
    """One ``<section>``: input number, source and output words, the grid's place, and the weights (quantised);
    ``note``: the model's note on an input unlike its training text (Translator.note), shown under the heading;
    ``evidence``: text_attn.translation.explain.Evidence of this translation, drawn as a third line; ``lang``: the
    source language's code (Translator.source_lang; None: unknown), so that a screen reader says the source words in
    their language, not the page's English; ``unsure``: a read translation's words under this probability are
    underlined (text_attn.core.unsure; None: none); ``readings``: several translations given (--given), its
    readings best first (each with ``text`` and ``score``): the others listed under the best."""
    source = [*translation.source, "<eos>"]

    def words(tokens: list[str], kind: str, key: str, tips: list[str] | None = None, marked=()) -> str:
        tips = tips or [""] * len(tokens)
        spans = enumerate(zip(token_labels(tokens), tips, strict=True))  # "▁Bü" "sche": Bü ·sche (the grid's too)
        return " ".join(f'<span class="w {kind}{" unsure" if i in marked else ""}" data-{key}="{i}"{tip}>'
                        f"{escape(w)}</span>" for i, (w, tip) in spans)  # fmt: skip

    probs = getattr(translation, "probs", None)  # a translation read (translate --given, --unsure)
    tips, marked = None, set()
    if probs:
        # 4 significant digits: an unlikely token is not p = 0.0000
        tips = [f' title="p = {p:.4g}"' for p in probs]
        found = unsure_tokens(translation, unsure) if unsure is not None else {}
        for i, (word, p) in found.items():
            tips[i] = f' title="p = {probs[i]:.4g} &middot; {escape(word)}: p = {p:.2g}, under {unsure:g}"'
        marked = set(found)
        if getattr(translation, "given", True):
            read = (f"the translation given, read by the model: mean log-probability {translation.score:.4f}, the "
                    f"end {translation.end_prob:.4g}; each output token's probability on hover")  # fmt: skip
        else:
            read = "each output token's probability on hover (the model's own translation)"
        if found:
            read += f"; underlined, {unsure_line(translation.unsure(unsure), unsure)}"
        note = f"{note}; {read}" if note else read

    # dir="auto" on each line of words: an Arabic or Hebrew sentence's words (inline blocks, which the bidi algorithm
    # orders by their line's direction) run right to left, where the page's left-to-right showed them reversed
    drives = ""
    src_lang = f' lang="{escape(lang)}"' if lang else ""
    if evidence is not None and translation.tokens:
        line = words(source, "drv", "s")
        drives = f'<p class="drives"><span class="label">drives</span><span dir="auto"{src_lang}>{line}</span></p>'
    output = words(translation.tokens, "tgt", "t", tips, marked)
    pair = (
        f'<div class="pair"><p><span class="label">source</span><span dir="auto"{src_lang}>'
        f"{words(source, 'src', 's')}</span></p>"
        f'<p><span class="label">output</span><span dir="auto">{output}</span></p>{drives}</div>'
    )
    text = getattr(translation, "laid_out", None) or getattr(translation, "text", None)  # as written, a page's line
    pair += f'<p class="translation">{escape(text)}</p>' if text else ""
    pair += alternatives((getattr(translation, "nbest", None) or [])[1:], "cut off at the length cap")  # --n-best
    others = [(r.text, r.score, False) for r in list(readings)[1:]]  # several --given: the others, best first
    pair += alternatives(others, "", "the other translations given, read")
    shown = f'<p class="note">{escape(note)}</p>' if note else ""
    cut = " &middot; cut off at the length cap" if getattr(translation, "truncated", False) else ""  # --max-len's
    head = f'<section class="item tr" id="s{number}" tabindex="0"><h2>input {number}{cut}</h2>{shown}{pair}'
    if attention is None or not translation.tokens:
        why = "this model has no attention" if attention is None else "the output is empty"
        return head + f'<p class="hint">no attention to show: {why}</p></section>'
    n_layers, n_heads, t, s = attention.shape
    if (t, s) != (len(translation.tokens), len(source)):
        raise ValueError(f"attention {attention.shape} does not match {len(translation.tokens)} x {len(source)} words")
    data = {"L": n_layers, "H": n_heads, "T": t, "S": s, "a": quantise(attention)}
    agree = ""
    if evidence is not None:
        from text_attn.translation.explain import row_spans

        data["e"] = quantise(cost_shares(evidence.evidence))
        data["agree"] = view_taus(attention, evidence.evidence, row_spans(translation))
        agree = '<p class="agree hint"></p>'
    # the info line: what a screen reader says as a word is shown; the grid's box: reached by Tab, its arrow keys
    # scroll it (a long sentence's grid is wider and taller than the box)
    info = '<p class="info hint" aria-live="polite">hover or step to a word</p>'
    box = f'<div class="grid-box" tabindex="0" role="region" aria-label="alignment grid of input {number}"></div>'
    return head + f"{agree}{info}{box}{data_script(data)}</section>"


def view_taus(attention: np.ndarray, evidence: Any, spans: list[tuple[int, int, int]] | None = None
              ) -> list[list[list[float | None]]]:  # fmt: skip
    """Each output word's agreement (Kendall tau) between what drives it (``evidence`` (T, S)) and each view of its
    attention the page's selectors can show: ``[layer][0]`` the layer's heads averaged, ``[layer][1 + h]`` head h
    (``attention``: (layers, heads, T, S)); the tau beside a word is then the one of the weights drawn. ``spans``
    (explain.row_spans: per sentence its rows, first column and columns shown): each row's tau over its own
    sentence's columns, as the records' agreement (over the whole line, the other sentences' zero columns counted,
    the page said 0.91 where the records said 0.6); None: every row over all columns."""
    cost = torch.as_tensor(to_numpy(evidence), dtype=torch.float64)  # (T, S)
    weights = torch.as_tensor(attention, dtype=torch.float64)
    views = torch.cat([weights.mean(dim=1, keepdim=True), weights], dim=1)  # (layers, 1 + heads, T, S)
    n_layers, n_views, t, s = views.shape
    taus = span_taus(views.reshape(-1, t, s), cost, spans or [(t, 0, s)])  # per view, every view at once
    return [[rounded_taus(taus[li * n_views + v]) for v in range(n_views)] for li in range(n_layers)]


def cost_shares(evidence: Any) -> np.ndarray:
    """(T, S) what masking each source token costs each output token -> its positive part relative to the row's
    costliest (1 = the costliest; a row nothing lowers: zeros)."""
    e = np.clip(to_numpy(evidence).astype(np.float64), 0.0, None)
    return e / np.maximum(e.max(-1, keepdims=True), 1e-12)
