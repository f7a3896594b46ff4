"""The page at ``/``: drop, pick or paste a photo, read its caption, hover or tap a word to see where the model looked;
a second tab translates the text model's source language (German, the bundled ones') and draws its alignment grid.

It is the ``--html`` reports' own drawing code, live: the shared skeleton's styles and script
(text_attn/core/html_page.py), the caption report's canvas painter (captioning/views/caption_page.py) and the alignment
report's grid (text_attn/translation/alignment_page.py); this file adds the forms and turns an API answer into the
data those painters read. Offline (no CDN, no external font); a Content-Security-Policy allows only this page's own
inline code, the photo the user picked (a blob: URL) and requests to this server. All text from the server is set
with ``textContent``, never parsed as HTML.
"""

from __future__ import annotations

from captioning.views.caption_page import CAPTION_CSS, CAPTION_JS, OPACITY
from captioning.views.overlay import FOCUS, MAX_ASPECT
from text_attn.core.html_page import CORE_CSS, CORE_JS, escape, script_json
from text_attn.core.unsure import CAPTION_UNSURE, UNSURE
from text_attn.translation.alignment_page import ALIGNMENT_CSS, ALIGNMENT_JS
from text_attn.translation.source_check import LANGUAGES

META_CSP = (  # in the page too, so a saved copy keeps it; frame-ancestors works only as a header
    "default-src 'none'; img-src data: blob:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; form-action 'none'; base-uri 'none'"
)
CSP = META_CSP + "; frame-ancestors 'none'"  # the header the server sends with the page
MAX_SIDE = 480  # the canvas's longest side, pixels
ALTERNATIVES = 4  # the beam's other captions listed under a caption (n_best asked: one more, at most the beam)

PAGE_CSS = """
nav.tabs { display: flex; gap: 4px; }
nav.tabs button { border: 1px solid var(--line); background: #fff; padding: 4px 14px; border-radius: 6px;
                  cursor: pointer; }
nav.tabs button.on { border-color: var(--accent); color: var(--accent); font-weight: 600; }
.panel[hidden] { display: none; }
.drop { border: 2px dashed #9aa6b5; border-radius: 8px; padding: 18px; text-align: center; background: #fff;
        margin-bottom: 12px; cursor: pointer; }
.drop.over { border-color: var(--accent); background: #fff7ed; }
.row { display: flex; gap: 10px; align-items: center; flex-wrap: wrap; margin: 8px 0; font-size: 13px; }
textarea { width: 100%; min-height: 5em; font: inherit; padding: 6px; }
.status { min-height: 1.4em; font-size: 13px; color: var(--muted); }
.status.error { color: #b91c1c; }
.note { color: #92400e; font-size: 13px; }
.read { color: var(--muted); font-size: 13px; }
.alts button.alt { border: none; background: none; padding: 0; color: var(--accent); cursor: pointer; font: inherit;
                   text-align: left; text-decoration: underline dotted; max-width: 100%; overflow-wrap: anywhere;
                   vertical-align: top; }  /* a beam's run-on word ("morningningning...") wraps in the card */
.given { max-width: 100%; }  /* its words above the field where a phone has no room beside it */
.given input { max-width: 100%; box-sizing: border-box; }
"""

PAGE_JS = r"""
const Live = {
  key() { const k = document.getElementById("key"); return k && k.value ? { "X-API-Key": k.value } : {}; },
  status(id, text, bad) {
    const s = document.getElementById(id);
    s.textContent = text; s.classList.toggle("error", !!bad);
  },
  async post(path, body, headers) {
    let r;
    try {
      r = await fetch(path, { method: "POST", body, headers: { ...Live.key(), ...headers } });
    } catch (e) {  // the browser's "Failed to fetch": no answer at all
      throw new Error("the server cannot be reached: is attention-serve still running?");  // failed() adds more
    }
    let data = null;
    try { data = await r.json(); } catch (e) { data = null; }
    if (!r.ok) throw new Error((data && (data.error || data.detail)) || `the server answered ${r.status}`);
    return data;
  },
  // an error's line; where a result is still shown under it, said to be the one before (it looked like this one's)
  failed(message, out) {
    return document.querySelector(`#${out} section`) ? `${message} (shown below: the one before)` : message;
  },
  b64(bytes) { let s = ""; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); },
  // each token's label, by text_attn.core.token_labels' rules ("\u2581B\u00fc" "sche" -> "B\u00fc" "\u00b7sche"):
  // the answer keeps the model's pieces, the page shows the words they spell (tests/serve/test_page_browser.py)
  // byte pieces that spell one UTF-8 character: the first's index -> it, the others' -> "" (token_labels._spelled)
  spelled(tokens) {
    const byte = (t) => { const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(t); return m ? parseInt(m[1], 16) : null; };
    const out = new Map();
    for (let i = 0; i < tokens.length;) {
      const first = byte(tokens[i]);
      if (first !== null) {
        const n = first >= 0xC0 && first < 0xE0 ? 2 : first >= 0xE0 && first < 0xF0 ? 3
          : first >= 0xF0 && first < 0xF8 ? 4 : 1;
        const run = tokens.slice(i, i + n).map(byte);
        if (run.length === n && run.every((b) => b !== null)) {
          let char = "";
          try { char = new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(run)); } catch (e) { char = ""; }
          if (char && !/^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Zl}\p{Zp}\p{Zs}]/u.test(char) || char === " ") {
            out.set(i, char);
            for (let j = i + 1; j < i + n; j++) out.set(j, "");
            i += n;
            continue;
          }
        }
      }
      i += 1;
    }
    return out;
  },
  shown(tokens) {
    const special = (t) => t.length > 2 && t.startsWith("<") && t.endsWith(">");
    const spelled = Live.spelled(tokens);
    const sp = spelled.size > 0 || tokens.some((t) => t.startsWith("\u2581") && t.length > 1 && !special(t));
    const bpe = !sp && tokens.some((t) => t.endsWith("@@") && t.length > 2);
    if (!sp && !bpe) return tokens.slice();
    return tokens.map((t, i) => {
      if (spelled.has(i)) return spelled.get(i) || "\u00b7";
      if (special(t)) return t;
      let starts, text;
      if (sp) {
        starts = t.startsWith("\u2581"); text = starts && t.length > 1 ? t.slice(1) : t;
      } else {
        starts = i === 0 || !tokens[i - 1].endsWith("@@") || special(tokens[i - 1]);
        text = t.endsWith("@@") && t.length > 2 ? t.slice(0, -2) : t;
      }
      return !starts && i > 0 && /^[\p{L}\p{N}]/u.test(text) ? "\u00b7" + text : text;
    });
  },
  el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  },
  tab(name) {
    // the selected tab said to assistive technology, and the only one in the Tab order (the arrow keys move along)
    document.querySelectorAll("nav.tabs button").forEach((b) => {
      const on = b.dataset.tab === name;
      b.classList.toggle("on", on); b.setAttribute("aria-selected", String(on)); b.tabIndex = on ? 0 : -1;
    });
    document.querySelectorAll(".panel").forEach((p) => { p.hidden = p.id !== name; });
    // the arrow keys step the shown tab's result, not the one last built on the other (now hidden) tab
    const shown = document.querySelector(`#${name} section.item`);
    if (shown) Report.activate(shown);
    else if (Report.active) { Report.active.classList.remove("active"); Report.active = null; }
  },
  // one word's map at grid resolution, as the report draws it: alpha / max(max alpha, FOCUS / L), clipped, one byte
  maps(attention) {
    const out = [];
    for (const row of attention) {
      const L = row.length, scale = Math.max(Math.max(...row), CFG.focus / L);
      for (const v of row) out.push(Math.round(255 * Math.min(1, Math.max(0, v / scale))));
    }
    return out;
  },
  // chosen: one of the beam's other captions, clicked (read against the photo; the box stays as the user left it)
  async caption(file, chosen) {
    if (!file) return;
    if (!CFG.caption) { Live.status("cap-status", "this server does not caption photos", true); return; }
    let url = URL.createObjectURL(file);
    Live.status("cap-status", `captioning ${file.name || "the pasted image"}\u2026`);
    const form = new FormData();
    form.append("image", file, file.name || "pasted.png");
    // a caption to read instead of writing one
    const given = chosen || document.getElementById("cap-given").value.trim();
    const beam = Number(document.getElementById("beam").value);
    if (given) form.append("given", given); else form.append("beam_size", String(beam));
    // the other captions the beam kept, listed under the caption (no time that can be measured: the beam holds them)
    if (!given && Live.nBest(beam)) form.append("n_best", String(Live.nBest(beam)));
    Live.photo = file;  // an alternative clicked is read against this photo
    if (document.getElementById("cap-evidence").checked) form.append("evidence", "1");
    // each word's probability: the unsure words marked (a caption given is read anyway)
    if (!given && document.getElementById("cap-unsure").checked) form.append("probs", "1");
    let rec;
    const ask = Live.asked = (Live.asked || 0) + 1;  // photos picked while one is captioned: the last one's shown
    try { rec = await Live.post("/caption", form, {}); }
    catch (e) {
      URL.revokeObjectURL(url);
      if (ask !== Live.asked) return;
      Live.status("cap-status", Live.failed(`${file.name || "the pasted image"}: ${e.message}`, "cap-out"), true);
      return;
    }
    if (ask !== Live.asked) { URL.revokeObjectURL(url); return; }  // a photo picked after this one: its answer
    // said by a screen reader (the status is role=status): the result arrived, and what it is
    Live.status("cap-status", `${given ? "read" : "captioned"}: ${rec.caption || rec.words.join(" ")}`);
    if (rec.preview) { URL.revokeObjectURL(url); url = "data:image/jpeg;base64," + rec.preview; }  // HEIC, TIFF
    Live.showCaption(rec, url, file.name || "pasted image", Boolean(given), Boolean(chosen));
  },
  // given: the caption is one the user typed, read (else the model's own, its probabilities where it has word_probs)
  // chosen: the caption read is one of the beam's, clicked: a button goes back to the model's own
  showCaption(rec, url, name, given, chosen) {
    const out = document.getElementById("cap-out");
    out.textContent = "";
    const [W, H] = rec.size, scale = CFG.side / Math.max(W, H);
    const sec = Live.el("section", "item cap"); sec.tabIndex = 0;
    sec.appendChild(Live.el("h2", "", `${name} \u00b7 ${W} \u00d7 ${H} px \u00b7 ${rec.model}`));
    const view = Live.el("div", "cap-view"), side = Live.el("div", "cap-side");
    const caption = rec.caption || rec.words.join(" ");
    const canvas = (cls, label) => {  // an image to assistive technology, named by the caption (as the report's)
      const cv = Live.el("canvas", cls);
      // a panorama stretched to 1:CFG.aspect at most, as the report's and the overlay PNG's (a 6000 x 400 photo was
      // 480 x 32: its map unreadable)
      const low = Math.ceil(CFG.side / CFG.aspect);
      cv.width = Math.max(low, Math.round(W * scale)); cv.height = Math.max(low, Math.round(H * scale));
      cv.setAttribute("role", "img"); cv.setAttribute("aria-label", `photo: ${caption}${label ? ", " + label : ""}`);
      return cv;
    };
    const figure = (cls, label) => {
      const f = Live.el("figure"); f.append(canvas(cls, label), Live.el("figcaption", "", label)); return f;
    };
    const shown = rec.evidence ? [figure("att", "where it looked (attention)"),
                                  figure("ev", "what drives the word (removing a region lowers it)")] : [canvas("")];
    const words = Live.el("p", "words caption");
    words.dir = "auto";  // a right-to-left caption's words from the right, as the report page's
    const unsure = new Set(rec.unsure_words || []);  // the words under CFG.unsure.caption: underlined
    rec.words.forEach((w, t) => {
      const s = Live.el("span", `w${unsure.has(t) ? " unsure" : ""}`, w);
      if (rec.word_probs) s.title = `p = ${rec.word_probs[t].toPrecision(4)}`;  // a caption read
      s.dataset.t = String(t); words.appendChild(s); words.append(" ");
    });
    const controls = Live.el("div", "controls");
    const prev = Live.el("button", "prev", "\u25c0"), next = Live.el("button", "next", "\u25b6");
    prev.setAttribute("aria-label", "previous word"); next.setAttribute("aria-label", "next word");
    const label = Live.el("label", "", "attention "), range = Live.el("input", "opacity");
    range.type = "range"; range.min = "0"; range.max = "100"; range.value = String(CFG.opacity);
    label.appendChild(range); controls.append(prev, next, label);
    const info = Live.el("p", "info hint", "the photo as captioned; hover or tap a word");
    info.setAttribute("aria-live", "polite");  // each word's line said as it is stepped to
    side.append(words, controls, info);
    if (rec.word_probs) {
      const line = Live.readLine(rec, given, "word", CFG.unsure.caption);  // a clicked one: the beam's, not typed
      side.appendChild(Live.el("p", "read", chosen ? line.replace("the text given", "the beam's caption") : line));
    }
    if (rec.note) side.appendChild(Live.el("p", "note", rec.note));
    if (rec.truncated) side.appendChild(Live.el("p", "note", "the caption reached max_len and is cut off"));
    if (rec.n_best && rec.n_best.length > 1) {
      side.appendChild(Live.alternatives(rec.n_best.slice(1), "caption", (text) => Live.caption(Live.photo, text)));
    }
    if (chosen) side.appendChild(Live.back("caption", () => Live.caption(Live.photo)));
    view.append(...shown, side); sec.appendChild(view); out.appendChild(sec);
    const b = rec.crop_box;
    const d = { img: url, box: [b[0] / W, b[1] / H, b[2] / W, b[3] / H], g: rec.grid[0],
                a: Live.b64(Live.maps(rec.attention)), peak: rec.attention.map((r) => Math.max(...r)),
                chosen: rec.chosen };
    if (rec.evidence) {  // its positive part as a distribution, then drawn as attention is (the overlay's way)
      d.e = Live.b64(Live.maps(rec.evidence.map((row) => {
        const pos = row.map((v) => Math.max(0, v)), sum = pos.reduce((a, b) => a + b, 0) || 1;
        return pos.map((v) => v / sum);
      })));
      d.agree = rec.agreement;
    }
    sec.dataset.built = "1";
    sec.addEventListener("mouseenter", () => Report.activate(sec));
    sec.addEventListener("focusin", () => Report.activate(sec));
    Caption.render(sec, d);
    Report.activate(sec);
  },
  // the beam's other captions (translations), best first, each a button: clicked, ``pick(text)`` has the model
  // read it against the same photo (sentence): its words' probabilities, and where it would look for each
  alternatives(others, key, pick) {
    const box = Live.el("div", "alts");
    box.appendChild(Live.el("p", "", "the beam also kept (click one to see where the model would look for it):"));
    const list = Live.el("ol");
    for (const h of others) {
      const b = Live.el("button", "alt", h[key]);
      b.type = "button"; b.dir = "auto";
      b.title = `score ${h.score === null ? "none" : h.score.toFixed(4)}${h.truncated ? ", cut off at max_len" : ""}`;
      b.addEventListener("click", () => pick(h[key]));
      const item = Live.el("li"); item.appendChild(b); list.appendChild(item);
    }
    box.appendChild(list);
    return box;
  },
  // a button back to the model's own output after one of the beam's was read
  back(what, again) {
    const b = Live.el("button", "alt", `\u2190 back to the model's own ${what}`);
    b.type = "button"; b.addEventListener("click", again);
    const line = Live.el("p", "alts"); line.appendChild(b); return line;
  },
  // how many outputs to ask the beam for: the best and up to CFG.alternatives others (none at beam 1)
  nBest(beam) { return beam > 1 ? Math.min(beam, CFG.alternatives + 1) : 0; },
  // the line under a text read: whose it is, and the words under ``below`` (as text_attn.core.unsure.unsure_line)
  readLine(rec, given, unit, below) {
    const what = unit === "word" ? "caption" : "translation";
    let said = given ? Live.read(rec.score, rec.end_prob, unit)
      : `each ${unit === "word" ? "word" : "output token"}'s probability on hover (the model's own ${what})`;
    if (rec.unsure && rec.unsure.length) {
      const shown = (q) => { const s = Number(q.toPrecision(2)); return s < below ? s : Number(q.toPrecision(4)); };
      said += `; underlined, the model was unsure of (p < ${below}): ` +
        rec.unsure.map(([w, q]) => `${w} (${shown(q)})`).join(", ");
    }
    return said;
  },
  read(score, end, unit) {
    return `the text given, read by the model: mean log-probability ${score.toFixed(4)}, ` +
      `the end ${end.toPrecision(4)}; each ${unit}'s probability on hover`;
  },
  async translate() {
    const text = document.getElementById("src").value.trim();
    const language = CFG.language ? CFG.language + " " : "";  // the model's source language, where named
    if (!text) { Live.status("tr-status", `type a ${language}sentence first`, true); return; }
    if (!CFG.text) { Live.status("tr-status", "this server does not translate", true); return; }
    // wrapped text: a paragraph a text (blank lines between), its lines joined by the server; else a line a text
    const paragraphs = document.getElementById("tr-paragraphs").checked ? 1 : 0;
    const sentences = text.split(paragraphs ? /\n\s*\n/ : /\n+/).map((s) => s.trim()).filter((s) => s);
    Live.status("tr-status", "translating\u2026");
    const go = document.getElementById("go");
    go.disabled = true;  // a double click sent the request twice
    let res, read = false;
    try {
      const evidence = document.getElementById("tr-evidence").checked ? 1 : 0;
      const given = document.getElementById("tr-given").value.trim();  // a translation to read instead
      const probs = document.getElementById("tr-unsure").checked ? 1 : 0;  // each token's p: the unsure words marked
      read = Boolean(given);
      const beam = Number(document.getElementById("tr-beam").value), others = Live.nBest(beam);
      const body = given ? { sentences, given, evidence, paragraphs }
        : { sentences, beam_size: beam, evidence, probs, paragraphs, ...(others ? { n_best: others } : {}) };
      res = await Live.post("/translate", JSON.stringify(body), { "Content-Type": "application/json" });
    } catch (e) { Live.status("tr-status", Live.failed(e.message, "tr-out"), true); return; }
    finally { go.disabled = false; }
    const noted = (res.notes || []).length ? ` (note: ${res.notes.join("; ")})` : "";  // e.g. lines that break off
    const said = read ? "read" : "translated";  // a translation typed is read by the model, not written
    Live.status("tr-status", `${said}: ${res.translations.map((t) => t.translation).join(" / ")}${noted}`);
    const out = document.getElementById("tr-out");
    out.textContent = "";
    res.translations.forEach((tr, k) => out.appendChild(Live.sentence(tr, k + 1, res.model, read)));
  },
  // one sentence again, in place of its section ``sec``: ``chosen``, one of the beam's translations, read; else
  // translated as the form says (back to the model's own)
  async again(sec, source, number, chosen) {
    const evidence = document.getElementById("tr-evidence").checked ? 1 : 0;
    const beam = Number(document.getElementById("tr-beam").value), others = Live.nBest(beam);
    const probs = document.getElementById("tr-unsure").checked ? 1 : 0;
    const body = chosen ? { sentences: [source], given: chosen, evidence }
      : { sentences: [source], beam_size: beam, evidence, probs, ...(others ? { n_best: others } : {}) };
    let res;
    try { res = await Live.post("/translate", JSON.stringify(body), { "Content-Type": "application/json" }); }
    catch (e) { Live.status("tr-status", Live.failed(e.message, "tr-out"), true); return; }
    const tr = res.translations[0];
    Live.status("tr-status", `${chosen ? "read" : "translated"}: ${tr.translation}`);
    sec.replaceWith(Live.sentence(tr, number, res.model, Boolean(chosen), Boolean(chosen)));
  },
  // given: the translation is one the user typed, read (else the model's own, its probabilities if token_probs);
  // chosen: one of the beam's, clicked (a button goes back to the model's own)
  sentence(tr, number, model, given, chosen) {
    const sec = Live.el("section", "item tr"); sec.tabIndex = 0;
    sec.appendChild(Live.el("h2", "", `sentence ${number} \u00b7 ${model}`));
    const pair = Live.el("div", "pair");
    const unsure = new Set(tr.unsure_tokens || []);  // the pieces of the words under CFG.unsure.text: underlined
    const line = (label, tokens, kind, key, probs, lang) => {
      const p = Live.el("p"), span = Live.el("span");
      if (lang) span.lang = lang;  // the source words said in their language (CFG.lang: the model's, where known)
      p.appendChild(Live.el("span", "label", label));
      Live.shown(tokens).forEach((w, i) => {
        const s = Live.el("span", `w ${kind}${probs && unsure.has(i) ? " unsure" : ""}`, w);
        if (probs) s.title = `p = ${probs[i].toPrecision(4)}`;  // a translation read
        s.dataset[key] = String(i); span.appendChild(s); span.append(" ");
      });
      p.appendChild(span); return p;
    };
    pair.append(line("source", tr.source_tokens, "src", "s", null, CFG.lang),
                line("output", tr.tokens, "tgt", "t", tr.token_probs));
    if (tr.evidence && tr.tokens.length) {
      const drives = line("drives", tr.source_tokens, "drv", "s", null, CFG.lang);
      drives.className = "drives"; pair.appendChild(drives);
    }
    sec.appendChild(pair);
    sec.appendChild(Live.el("p", "translation", tr.laid_out || tr.translation));  // a list's items a line each
    if (tr.token_probs) {
      const said = Live.readLine(tr, given, "token", CFG.unsure.text);  // a clicked one: the beam's, not typed
      sec.appendChild(Live.el("p", "read", chosen ? said.replace("the text given", "the beam's translation") : said));
    }
    if (tr.n_best && tr.n_best.length > 1) {
      sec.appendChild(Live.alternatives(tr.n_best.slice(1), "translation",
                                        (text) => Live.again(sec, tr.source, number, text)));
    }
    if (chosen) sec.appendChild(Live.back("translation", () => Live.again(sec, tr.source, number, null)));
    if (tr.note) sec.appendChild(Live.el("p", "note", tr.note));
    if (tr.lost_addresses && tr.lost_addresses.length) {
      sec.appendChild(Live.el("p", "note", "missing from the translation (the model does not copy addresses), " +
                              "put back by hand: " + tr.lost_addresses.join(" ")));
    }
    if (tr.unknown_words && tr.unknown_words.length) {  // as translate notes them: the model reads them as <unk>
      sec.appendChild(Live.el("p", "note", "the model does not know " + tr.unknown_words.join(", ") +
                              ": read as <unk>"));
    }
    if (!tr.note && tr.unseen_words && tr.unseen_words.length) {  // an input unlike the training text: said above
      const its = tr.unseen_words.length === 1 ? "its" : "their";
      sec.appendChild(Live.el("p", "note", "not in the text the model learned from, translated from " + its +
                              " pieces (a guess): " + tr.unseen_words.join(", ")));
    }
    if (!tr.attention || !tr.tokens.length) {
      sec.appendChild(Live.el("p", "hint", "no attention to show")); return sec;
    }
    if (tr.evidence) sec.appendChild(Live.el("p", "agree hint"));
    const info = Live.el("p", "info hint", "hover or step to a word"), box = Live.el("div", "grid-box");
    info.setAttribute("aria-live", "polite");
    box.tabIndex = 0; box.setAttribute("role", "region");
    box.setAttribute("aria-label", `alignment grid of sentence ${number}`);
    sec.append(info, box);
    const heads = tr.heads || [tr.attention], T = tr.tokens.length, S = tr.source_tokens.length, bytes = [];
    for (const h of heads) {
      for (const row of h) for (const v of row) bytes.push(Math.round(255 * Math.min(1, Math.max(0, v))));
    }
    const d = { L: 1, H: heads.length, T, S, a: Live.b64(bytes) };
    if (tr.evidence) {  // each source token's cost relative to the costliest, as translate --html draws it
      const cost = [];
      for (const row of tr.evidence) {
        const top = Math.max(...row.map((v) => Math.max(0, v))) || 1;
        for (const v of row) cost.push(Math.round(255 * Math.max(0, v) / top));
      }
      // the page shows one layer's heads averaged: its taus are the agree[layer 0][the heads' mean] of view_taus
      d.e = Live.b64(cost); d.agree = [[tr.agreement]];
    }
    sec.dataset.built = "1";
    sec.addEventListener("mouseenter", () => Report.activate(sec));
    sec.addEventListener("focusin", () => Report.activate(sec));
    setTimeout(() => { Align.render(sec, d); Report.activate(sec); }, 0);
    return sec;
  },
};
document.addEventListener("DOMContentLoaded", () => {
  const tabs = [...document.querySelectorAll("nav.tabs button")];
  tabs.forEach((b, i) => {
    b.addEventListener("click", () => Live.tab(b.dataset.tab));
    b.addEventListener("keydown", (e) => {  // a tab list's keys: the arrows, Home and End choose a tab
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (to === undefined) return;
      const t = tabs[(to + tabs.length) % tabs.length];
      Live.tab(t.dataset.tab); t.focus(); e.preventDefault();
    });
  });
  const drop = document.getElementById("drop"), pick = document.getElementById("pick");
  // the hidden input's own click bubbles up to the zone: without the check each click opened the chooser twice
  drop.addEventListener("click", (e) => { if (e.target !== pick) pick.click(); });
  drop.addEventListener("keydown", (e) => {  // as a button's: Space does not scroll the page too
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick.click(); }
  });
  // emptied once read: the same photo picked again (with a caption typed, or other options) is sent again
  pick.addEventListener("change", () => { const f = pick.files[0]; pick.value = ""; Live.caption(f); });
  // a caption typed (Enter), or another option, applies to the photo shown: it did nothing until one was picked again
  document.getElementById("cap-given").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && Live.photo) { e.preventDefault(); Live.caption(Live.photo); }
  });
  document.getElementById("tr-given").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); Live.translate(); }
  });
  for (const id of ["beam", "cap-evidence", "cap-unsure"]) {
    document.getElementById(id).addEventListener("change", () => { if (Live.photo) Live.caption(Live.photo); });
  }
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault(); drop.classList.remove("over"); Live.caption(e.dataTransfer.files[0]);
  });
  document.addEventListener("paste", (e) => {
    if (document.getElementById("caption").hidden) return;
    const item = [...(e.clipboardData || {}).items || []].find((i) => i.type.startsWith("image/"));
    if (item) Live.caption(item.getAsFile());
  });
  document.getElementById("go").addEventListener("click", () => Live.translate());
  Live.tab(CFG.caption || !CFG.text ? "caption" : "translate");
});
"""


def _beam_select(element_id: str, default: int) -> str:
    options = "".join(
        f'<option value="{b}"{" selected" if b == default else ""}>{b}</option>' for b in (1, 2, 3, 4, 5, 8, 10)
    )
    return f'<label>beam size <select id="{element_id}">{options}</select></label>'


def _evidence_box(element_id: str, units: str, off: bool = False) -> str:
    """The box asking for what drives each word; ``off``: shown unticked and disabled, saying why (an ensemble: the
    measure is one model's)."""
    if off:
        return (f'<label title="what drives each word is measured for one model; this server translates with an '
                f'ensemble (--text-ensemble)"><input type="checkbox" id="{element_id}" disabled> '
                "also what drives each word (one model only)</label>")  # fmt: skip
    return (
        f"<label title=\"the {units} whose removal at each word's step lowers its probability most, beside its "
        f'attention; one more decoder step per {units[:-1]} and word"><input type="checkbox" id="{element_id}"> '
        "also what drives each word</label>"
    )


def _unsure_box(element_id: str, below: float = UNSURE, what: str = "translation") -> str:
    return (
        f"<label title=\"each word's probability, kept as the model writes the {what}: on hover, and the words it "
        f'gave a probability under {below:g} underlined"><input type="checkbox" '
        f'id="{element_id}"> mark unsure words</label>'
    )


def _paragraphs_box(element_id: str) -> str:
    return (
        '<label title="text wrapped over lines (copied from a PDF, an e-mail): the lines up to a blank line are one '
        "paragraph, joined before it is translated (a word a hyphen breaks at a line's end made whole); unchecked, "
        f'each line is translated on its own"><input type="checkbox" id="{element_id}"> wrapped text</label>'
    )


def _given_box(element_id: str, label: str, placeholder: str) -> str:
    """A text for the model to read instead of writing its own, its ``label`` shown beside it (the placeholder alone
    went as the user typed)."""
    return (
        '<label class="given" title="the model reads this text instead of writing its own: each word\'s probability '
        'on hover, and where it looked for it (the beam size is then not used); Enter reads it">'
        f'{label} <input id="{element_id}" size="34" placeholder="{placeholder}"></label>'
    )


def render(caption: dict | None, text: dict | None, api_key: bool, source_lang: str | None = None) -> bytes:
    """The page's HTML for the served models (``caption`` / ``text``: their /info entries, None: not served);
    ``source_lang``: the code of the language the text model reads (None: unknown), set on the text typed and on
    the source words, so that a screen reader says them in it; the tab, the empty input's status and the sample
    sentence say the language (a German sample for German alone: a Czech model's page said "Translate German")."""
    language = LANGUAGES.get(source_lang or "")  # None: a language the table does not name, or none known
    cfg = {"caption": caption is not None, "text": text is not None, "focus": FOCUS, "side": MAX_SIDE,
           "aspect": MAX_ASPECT, "opacity": OPACITY, "lang": source_lang, "language": language,
           "alternatives": ALTERNATIVES,
           "unsure": {"caption": CAPTION_UNSURE, "text": UNSURE}}  # the answers' thresholds (unsure.py)  # fmt: skip
    lang = f' lang="{escape(source_lang)}"' if source_lang else ""
    tab = f"Translate {language}" if language else "Translate"
    # the textarea's placeholder and first text: sentences in the model's language; the bundled models' German alone
    german = ("Ein Hund rennt über eine grüne Wiese.", "Zwei Männer spielen Fußball auf einer Wiese.")
    hint, first = german if source_lang == "de" else ("", "")
    placeholder = f' placeholder="{hint}"' if hint else ""
    cap_beam = (caption or {}).get("decoding", {}).get("beam_size", 3)
    tr_beam = (text or {}).get("decoding", {}).get("beam_size", 1)
    heads = ""
    if text is not None and "Transformer" in str(text.get("network", "")):
        count = text.get("network", "").split(" heads")[0].split()[-1]
        n = int(count) if count.isdigit() else 0
        options = "".join(f'<option value="{h}">head {h + 1}</option>' for h in range(n))
        heads = (
            '<label>cross-attention <select id="head"><option value="-1" selected>average of heads</option>'
            f"{options}</select></label>"
        )
    key = '<label>API key <input id="key" type="password" autocomplete="off"></label>' if api_key else ""
    models = " &middot; ".join(escape(m["model"]) for m in (caption, text) if m)
    body = f"""
<nav class="tabs" role="tablist" aria-label="what to do">
<button role="tab" id="tab-caption" data-tab="caption" aria-controls="caption">Caption a photo</button>
<button role="tab" id="tab-translate" data-tab="translate" aria-controls="translate">{tab}</button></nav>
{key}<span class="meta">{models}</span>
<span class="hint">hover or tap a word: bright = where the model looked for it; arrow keys step through the words
(a sentence's <kbd>&uarr;</kbd> <kbd>&darr;</kbd>: its source words, its output words)</span>
</header>
<main>
<div class="panel" id="caption" role="tabpanel" aria-labelledby="tab-caption">
  <div class="drop" id="drop" tabindex="0" role="button">Drop a photo here, click to pick one, or paste one (Ctrl+V)
    <input type="file" id="pick" accept="image/*" hidden></div>
  <div class="row">{_beam_select("beam", cap_beam)}{_evidence_box("cap-evidence", "regions")}
    {_unsure_box("cap-unsure", CAPTION_UNSURE, "caption")}
    {_given_box("cap-given", "or read a caption:", "a caption for the model to read")}</div>
  <p class="status" id="cap-status" role="status"></p>
  <div id="cap-out"></div>
</div>
<div class="panel" id="translate" role="tabpanel" aria-labelledby="tab-translate" hidden>
  <label for="src" class="hint">sentences to translate, one or more a line (wrapped text: a paragraph between blank
    lines)</label>
  <textarea id="src"{lang}{placeholder}>{first}</textarea>
  <div class="row"><button id="go">Translate</button>{_beam_select("tr-beam", tr_beam)}{heads}
    {_evidence_box("tr-evidence", "source words", bool((text or {}).get("ensemble")))}{_unsure_box("tr-unsure")}
    {_paragraphs_box("tr-paragraphs")}
    {_given_box("tr-given", "or read a translation:", "a translation for the model to read")}</div>
  <p class="status" id="tr-status" role="status"></p>
  <div id="tr-out"></div>
</div>
</main>"""
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{META_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>attention-serve</title>\n"
        f"<style>{CORE_CSS}{CAPTION_CSS}{ALIGNMENT_CSS}{PAGE_CSS}</style>\n"
        f"<script>const CFG = {script_json(cfg)};\n{CORE_JS}{CAPTION_JS}{ALIGNMENT_JS}{PAGE_JS}</script>\n"
        "</head>\n<body>\n<header><h1>attention-serve</h1>"
        f"{body}\n</body>\n</html>\n"
    ).encode()
