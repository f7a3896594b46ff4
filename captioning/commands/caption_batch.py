"""The per-batch work of ``caption``, one code path for one process (captioning.commands.caption_loop) and for many
(captioning.commands.caption_scale): a batch of prepared photos captioned into JSON-able records (the record is
described in captioning.commands.caption's docstring), overlays drawn, the ``--html`` page added to, and the closing
notes."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from captioning.commands.caption_given import given_record, no_given_caption, photo_key, read_given
from captioning.commands.caption_parser import OVERLAY_FORMATS
from captioning.model.bundled import BUNDLED_MODEL
from captioning.views.file_names import fitted
from text_attn.core.errors import and_more, fail, one_line
from text_attn.core.json_numbers import json_score
from text_attn.core.os_text import utf8_name
from text_attn.core.safe_files import inert
from text_attn.core.search_options import n_best_ending
from text_attn.core.unsure_options import NAMED, unsure_note

OVERLAY = "-attention.png"  # NAME-attention.png: a photo's overlay in --overlay DIR (--overlay-format png)


def _unique_stem(name: str, used: set[str], tail: str = OVERLAY) -> str:
    """The overlay's NAME (``NAME-attention.png``, ``tail``: its end, :func:`overlay_tail`) for a photo named ``name``:
    cut to fit a file name (fitted). ``used``: the names taken, casefolded (macOS's and Windows' file systems ignore
    case: Dog.jpg's overlay and dog.jpg's were one file there)."""
    stem, k = fitted(name, tail), 1
    while stem.casefold() in used:  # a/x.png and b/x.png in one call must not overwrite each other's overlay
        k += 1
        stem = f"{fitted(name, f'-{k}{tail}')}-{k}"
    used.add(stem.casefold())
    return stem


def _before(args: argparse.Namespace) -> frozenset[str]:
    """The file names --overlay DIR held before this run drew into it, listed once a run (each photo listed the whole
    folder: quadratic in a run of thousands of photos, and this run's own files were counted as earlier ones)."""
    if getattr(args, "overlay_before", None) is None:
        try:
            with os.scandir(args.overlay) as entries:
                args.overlay_before = frozenset(e.name for e in entries)
        except OSError:  # not made yet
            args.overlay_before = frozenset()
    return args.overlay_before


def _older_word_files(before: frozenset[str], stem: str, suffix: str, drawn: list[Path]) -> int:
    """How many per-word files named as this photo's (``STEM-NN-WORD.SUFFIX``) the overlay folder held ``before``
    this run beside those just ``drawn``: an earlier run's caption of other words (a rerun with --given), which
    nothing told apart."""
    kept = {p.name for p in drawn}
    # not another photo's: "STEM-01"'s own files ("STEM-01-01-a"), its overlay ("STEM-01-attention": no word's name)
    pattern = re.compile(rf"{re.escape(stem)}-\d\d-(?!\d\d-)(?!attention{re.escape(suffix)}$)[A-Za-z0-9_-]+"
                         f"{re.escape(suffix)}")  # fmt: skip
    return sum(1 for name in before if pattern.fullmatch(name) and name not in kept)


def _record(name: str, error: str | None = None, item: dict[str, Any] | None = None) -> dict[str, Any]:
    """A record's fields, empty; a shard member's ``item`` adds its img2dataset key and the shard's caption."""
    keys = ("caption", "score", "truncated", "out_of_domain", "note", "grid", "size", "crop_box", "chosen", "overlay")
    member = {"key": item["key"], "reference": item["reference"]} if item is not None and "key" in item else {}
    # the name's bytes as UTF-8 whatever the locale (LC_ALL=C wrote "M\udcc3\udca4dchen.jpg"): --resume finds it
    return {"image": utf8_name(name), **member, **dict.fromkeys(keys), "words": [], "attention": [], "error": error}


def _mode_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The fields the run's options add to each record, empty: a failed photo's record has the keys its run's other
    records have (it had none of them: a script reading rec["n_best"] stopped at the first failed photo)."""
    out: dict[str, Any] = {}
    if getattr(args, "n_best_given", False):
        out["n_best"] = []
    if getattr(args, "given", None) or getattr(args, "given_by_name", None) is not None:
        out.update(given=[], log_prob=None, word_probs=[], end_prob=None)
    if getattr(args, "unsure", None) is not None:
        out.update(word_probs=[], end_prob=None, unsure=[])
    if getattr(args, "evidence", False):
        out.update(evidence=[], agreement=[])
    return out


def caption_items(
    captioner,
    items: list[dict[str, Any]],
    args: argparse.Namespace,
    options: dict[str, Any],
    used: set[str] | None = None,
    stacked: Any = None,
) -> list[dict[str, Any]]:
    """Caption preprocessed images (captioning.photos.collection items: name, tensor, size, image) as one batch; per
    image a JSON-able record (see the module doc), with its overlay written when args.overlay is set. ``options``: the
    decoding options of the run (search_options). ``used``: overlay names taken so far in this run. ``stacked``:
    the items' tensors already stacked (n, 3, S, S) (photo_stream.pack), or None."""
    import torch

    from captioning.photos.photo_check import photo_stats
    from captioning.views.overlay import draw_overlay, draw_word_panels
    from text_attn.core.decoding import text_key

    if args.overlay and getattr(args, "per_word", False):
        _before(args)  # what DIR held before this run drew anything (its files are this run's, not earlier ones)

    g = captioner.grid
    used = set() if used is None else used
    images = stacked if stacked is not None else torch.stack([it["tensor"] for it in items])  # (B, 3, S, S)
    features = captioner.encode(images)  # (B, L, D)
    readings = read_given(captioner, features, items, args)  # --given / --given-file: the captions given, read
    if readings is not None:  # each photo's best fitting one first, not the model's own
        results = [ranked[0] for ranked in readings]
    else:
        if options.get("sampling") is not None:
            # each photo's draws keyed by its record name (what --resume matches): the same caption whatever batch,
            # process (--devices, --workers) or resumed run it is drawn in
            keys = torch.tensor([text_key(utf8_name(it["name"])) for it in items])  # (B,) int64
            options = {**options, "keys": keys}
        probs = getattr(args, "unsure", None) is not None  # --unsure: each word's probability, kept by the search
        results = captioner.caption_features(features, args.beam_size, args.max_len, args.length_penalty, probs,
                                             **options)  # fmt: skip
    attention = rounded_rows([r.alphas for r in results])  # per image (T, L), to 6 decimals, the batch at once
    stats = [it.get("photo_stats") or photo_stats(it["image"]) for it in items]
    far = captioner.out_of_domain(features, stats) or [None] * len(items)
    out = []
    for item, result, unfamiliar, rows in zip(items, results, far, attention, strict=True):
        words, alphas, score, truncated = result.words, result.alphas, result.score, result.truncated
        name = item["name"]
        box = captioner.preprocess.crop_box(*item["size"])
        rec = _record(name, item=item)
        rec.update(caption=" ".join(words), words=words, grid=[g, g], size=list(item["size"]), crop_box=list(box))
        rec.update(score=json_score(score), truncated=truncated, out_of_domain=unfamiliar)
        rec["note"] = captioner.note(given=readings is not None) if unfamiliar else None
        if result.nbest is not None or getattr(args, "n_best_given", False):  # --n-best 1: a list of one, as asked
            rec["n_best"] = result.n_best_records()
        if readings is not None:
            rec["given"] = [given_record(r) for r in readings[len(out)]]
            rec.update({k: rec["given"][0][k] for k in ("log_prob", "word_probs", "end_prob")})
        if getattr(args, "unsure", None) is not None:  # the best caption given, or its own with its probabilities
            rec.update(unsure_record(result, args.unsure))
        rec["attention"] = rows  # (T, L), each rounded to 6 decimals
        rec["chosen"] = chosen = captioner.chosen_regions(alphas)  # hard attention's region per word, else None
        shown = {}
        if getattr(args, "evidence", False):  # what drives each word (captioning.model.explain)
            found = captioner.evidence(features[len(out) : len(out) + 1], words)
            from text_attn.core.faithfulness import rounded_evidence, rounded_taus

            rec["evidence"] = rounded_evidence(found.evidence)
            rec["agreement"] = rounded_taus(found.agreement)
            shown = {"evidence": found.evidence, "agreement": found.agreement}
        if args.overlay:
            tail = overlay_tail(args)
            stem = item.get("stem") or _unique_stem(Path(name).stem or "image", used, tail)
            image = item["image"]
            try:
                picture = Path(args.overlay) / f"{stem}{tail}"
                seen = captioner.preprocess.crop_box(*image.size)  # the box in the decoded image's pixels
                path = draw_overlay(image, words, alphas, g, seen, picture, chosen=chosen, probs=result.probs, **shown)
                extra = ""
                if args.per_word:
                    drawn = draw_word_panels(image, words, alphas, g, seen, args.overlay, stem, chosen=chosen,
                                             probs=result.probs, suffix=picture.suffix)  # fmt: skip
                    extra = f" (+ {len(drawn)} per-word {picture.suffix[1:].upper()}s)"
                    if older := _older_word_files(_before(args), stem, picture.suffix, drawn):
                        extra += f"; {older} per-word file(s) of an earlier caption of this name left beside them"
            except OSError as err:
                rec["error"] = f"{name}: cannot write its overlay ({one_line(err)})"
                print(f"caption: error: {inert(rec['error'])}", file=sys.stderr)  # a name's line break escaped
            else:
                rec["overlay"] = utf8_name(str(path))  # as "image": the same text under every locale
                print(f"wrote {inert(path)}{extra}", file=sys.stderr)
        out.append(rec)
    return out


def unsure_record(caption: Any, below: float) -> dict[str, Any]:
    """--unsure's part of a record: each word's and the end's probability, and the words under ``below``, each
    [word, p] (6 significant digits), as attention-serve answers them."""
    from text_attn.core.unsure import probability_fields, unsure_pairs

    return probability_fields(caption, "word_probs") | {"unsure": unsure_pairs(caption, below)}


def plain_lines(rec: dict[str, Any], several: bool) -> list[str]:
    """A record's lines of plain output: its caption (``path<TAB>`` first when ``several``); with --n-best, per
    hypothesis, best first, ``score<TAB>caption<TAB>ended`` (or ``cut``: --max-len stopped it), as translate writes
    them; with --given, per caption read, best first, ``score<TAB>caption<TAB>`` each word's probability then the
    end's (4 significant digits)."""
    lead = f"{inert(rec['image'])}\t" if several else ""
    if "given" not in rec and "n_best" in rec:
        return [f"{lead}{h['score']:.4f}\t{inert(h['caption'])}\t{n_best_ending(h['truncated'])}"
                for h in rec["n_best"]]  # fmt: skip
    if "given" not in rec:
        return [lead + inert(rec["caption"])]
    lines = []
    for g in rec["given"]:
        probs = " ".join(f"{p:.4g}" for p in [*g["word_probs"], g["end_prob"]])  # 4 digits: 0.9938, 1.2e-05
        lines.append(f"{lead}{g['score']:.4f}\t{inert(g['caption'])}\t{probs}")
    return lines


def stdout_lines(rec: dict[str, Any], several: bool, args: argparse.Namespace) -> list[str]:
    """What a record puts on stdout: with ``--jsonl -`` its JSON Lines line (a failed photo's too, as in a FILE),
    else its plain lines (:func:`plain_lines`; none for a failed photo: its error is on stderr)."""
    if getattr(args, "jsonl_stdout", False):
        return [record_line(rec)]
    return plain_lines(rec, several) if rec["caption"] is not None else []


def rounded_rows(alphas: list[Any]) -> list[RoundedRows]:
    """Each caption's attention (T, L) rounded to 6 decimals, as its record holds it, for a batch in one numpy call
    (round(float(v), 6) per value cost ~1 ms a photo of the main process; numpy's rounding gives the same floats)."""
    import numpy as np
    import torch

    if not alphas:
        return []
    ks = np.rint(torch.cat([a.detach().float().cpu() for a in alphas]).numpy().astype(np.float64) * 1e6)  # (sum T, L)
    values = (ks / 1e6).tolist()
    out, start = [], 0
    for a in alphas:
        out.append(RoundedRows(values[start : start + len(a)], ks[start : start + len(a)]))
        start += len(a)
    return out


class RoundedRows(list):
    """A record's attention (a list of rows of floats, rounded to 6 decimals) that also keeps the integers k of its
    values k / 10**6 (``ks``), so :func:`record_line` writes its JSON text in one numpy pass."""

    def __init__(self, rows: list[list[float]], ks: Any):
        super().__init__(rows)
        self.ks = ks


_ATTENTION = "\x00attention"  # stands for the attention in json.dumps' text until it is put in (never a record's value)
_DIGITS = (10**5, 10**4, 10**3, 10**2, 10, 1)  # the six decimals of k / 10**6


def attention_text(ks: Any) -> str:
    """JSON text of rows of values k / 10**6 (ks (T, L), integers 0..10**6): "[[0.058395, 0.000012, ...], ...]". Each
    value is written with its six decimals, so it reads back as the same float as round(v, 6); written with numpy for
    the whole grid (json.dumps takes ~0.2 microseconds a float: ~0.2 ms a photo of the main process)."""
    import numpy as np

    ks = np.asarray(ks, dtype=np.int64)
    if ks.size == 0:
        return "[" + ", ".join("[]" for _ in range(len(ks))) + "]"
    t, n = ks.shape
    chars = np.empty((t, n, 10), dtype=np.uint8)  # "0.dddddd, "
    chars[..., 0] = np.where(ks >= 10**6, ord("1"), ord("0"))
    chars[..., 1] = ord(".")
    chars[..., 2:8] = (ks[..., None] // np.array(_DIGITS)) % 10 + ord("0")
    chars[..., 8], chars[..., 9] = ord(","), ord(" ")
    text = chars.tobytes().decode("ascii")
    width = 10 * n
    return "[" + ", ".join(f"[{text[r * width : (r + 1) * width - 2]}]" for r in range(t)) + "]"


def record_line(rec: dict[str, Any]) -> str:
    """One record as its JSON Lines line (no newline): json.dumps, with a RoundedRows attention written by
    :func:`attention_text`."""
    rows = rec.get("attention")
    if not isinstance(rows, RoundedRows) or not len(rows):
        return json.dumps(rec)
    return json.dumps({**rec, "attention": _ATTENTION}).replace(json.dumps(_ATTENTION), attention_text(rows.ks), 1)


def overlay_tail(args: argparse.Namespace) -> str:
    """The end of this run's overlay names: ``-attention.png``, ``.jpg`` or ``.webp`` (--overlay-format)."""
    return f"-attention.{getattr(args, 'overlay_format', None) or 'png'}"


def drawn_overlays(args: argparse.Namespace) -> frozenset[str]:
    """:func:`_drawn_overlays`, found once a run (the run's outputs are checked with them, then its photos named: a
    resumed --jsonl FILE of a million records was read for each)."""
    asked = tuple(getattr(args, name, None) for name in ("overlay", "jsonl", "html", "resume"))
    found = getattr(args, "overlays_taken", None)
    if found is None or found[0] != asked:
        found = args.overlays_taken = asked, frozenset(_drawn_overlays(args))
    return found[1]


def _drawn_overlays(args: argparse.Namespace) -> set[str]:
    """With ``--resume``, the names of the overlays the --jsonl FILE's records name in --overlay DIR (NAME-attention.png
    -> NAME, in any of the formats), which a resumed run's new photos are named apart from: its input list may have
    grown, and a new x/P.jpg sorted before the y/P.jpg an earlier run drew as P-attention.png would otherwise be named
    P and draw over it. An overlay no record names (drawn just before the run was stopped, its record not written) is
    its photo's, captioned again: drawn over under its own name, not beside it as P-2 (a fresh run draws over what
    DIR holds too). And, resumed or not, the names this run's own --jsonl / --html files take in --overlay DIR
    (``--jsonl DIR/camera-attention.png``: camera's overlay was written over the records). Else nothing."""
    if not args.overlay:
        return set()
    tails = [f"-attention.{f}" for f in OVERLAY_FORMATS]
    ours = set()
    for path in (getattr(args, "jsonl", None), getattr(args, "html", None)):
        if path and path != "-" and Path(path).parent.resolve() == Path(args.overlay).resolve():
            ours |= {Path(path).name[: -len(t)] for t in tails if Path(path).name.endswith(t)}
    if not getattr(args, "resume", False):
        return ours
    claimed = _claimed(args)
    if claimed is not None:
        return ours | {name[: -len(t)] for name in claimed for t in tails if name.endswith(t)}
    try:  # records that cannot say (not caption's, or from before overlays were recorded): every file there
        with os.scandir(args.overlay) as found:
            return ours | {e.name[: -len(t)] for e in found for t in tails if e.name.endswith(t)}
    except OSError:  # not made yet
        return ours


def _claimed(args: argparse.Namespace) -> set[str] | None:
    """The file names of the overlays in --overlay DIR that the --jsonl FILE's records name; None where FILE's
    records cannot say (no FILE, ``-``, a file that is not caption's, a record without the ``overlay`` field, a
    ``--devices`` run's parts folder beside it)."""
    from captioning.photos.collection import ResumeError, captioned_lines
    from text_attn.core.os_text import os_name

    jsonl = getattr(args, "jsonl", None)
    if not jsonl or jsonl == "-" or Path(f"{jsonl}.parts").exists():  # --devices' parts hold records too
        return None
    try:
        held = captioned_lines(Path(jsonl))
        records = [json.loads(line) for _, line in held]
    except (OSError, ValueError, ResumeError):
        return None
    if any("overlay" not in rec for rec in records):
        return None
    folder = Path(args.overlay).resolve()
    named = [Path(os_name(rec["overlay"])) for rec in records if isinstance(rec.get("overlay"), str)]
    return {path.name for path in named if path.parent.resolve() == folder}


class OverlayNames:
    """The overlay names of a run, the same whichever process draws a photo: a file's from the whole input list (in
    order, as :func:`_outputs` checks them), a shard member's from its image member, made unique against them and
    against ``taken`` (:func:`drawn_overlays`)."""

    def __init__(
        self,
        sources: Sequence[str],
        taken: set[str] = frozenset(),
        by_shard: bool = False,
        tail: str = OVERLAY,
        done: set[str] = frozenset(),
    ):
        """``by_shard`` (``--devices``): a shard member's overlay is named ``SHARD-KEY`` (the shard file's stem first):
        each process makes names unique only against its own, so two shards' members of one key, drawn by two
        processes, were both ``KEY`` and one overwrote the other. ``tail``: the names' end (:func:`overlay_tail`).
        ``done``: the image keys of the photos a resumed FILE holds, which are not drawn and take no name (x.png's
        own earlier overlay made the new y/x.png x-3, x-2 reserved for the x.png skipped)."""
        from captioning.photos.collection import image_key
        from captioning.photos.shards import is_shard

        self.used: set[str] = {t.casefold() for t in taken}  # as _unique_stem keeps them
        self.by_shard, self.tail = by_shard, tail
        self.files = {s: _unique_stem(Path(n).stem or "image", self.used, tail) for s, n in enumerate(sources) if not
                      is_shard(n) and not (done and image_key(n) in done)}  # fmt: skip

    def stem(self, item: dict[str, Any]) -> str:
        if item["id"][0] in self.files:
            return self.files[item["id"][0]]
        name = Path(item["name"])
        base = f"{name.parent.stem}-{name.stem}" if self.by_shard else name.stem
        return _unique_stem(base or "image", self.used, self.tail)


def caption_batch(
    captioner,
    items: list[dict[str, Any]],
    args: argparse.Namespace,
    options: dict[str, Any],
    names: OverlayNames,
    stacked: Any = None,
) -> list[dict[str, Any]]:
    """The per-batch work of a run, one function for one process and for many (caption_scale's predict_step calls
    it too): each item's error or note as one line on stderr, the readable photos captioned (:func:`caption_items`:
    encode, search, record, overlays) and every item's record, in item order. ``items``: a batch of
    captioning.photos.photo_stream items (read and prepared in the loader's workers); ``stacked``: their tensors stacked
    (default: the batch's own, photo_stream.PhotoBatch.tensor)."""
    stacked = getattr(items, "tensor", None) if stacked is None else stacked
    for it in items:
        if it["error"] is None:
            it["error"] = no_given_caption(it["name"], args)  # --given-file holds none for it: an error, not read
        if it["error"] is not None:
            print(f"caption: error: {inert(it['error'])}", file=sys.stderr)  # one line: a name's line break escaped
        elif it["note"] is not None:
            print(f"caption: note: {inert(it['note'])}", file=sys.stderr)
    good = [it for it in items if it["error"] is None]
    if args.overlay:
        for it in good:
            it["stem"] = names.stem(it)
    if stacked is not None and len(stacked) != len(good):  # not the photos to caption: each is stacked again
        stacked = None
    if any(it.get("jpeg") is not None for it in good):  # --decode-on-device: JPEGs decoded and prepared there
        from captioning.photos.device_prepare import prepare_items

        stacked = prepare_items(good, captioner.preprocess, next(captioner.model.parameters()).device)
    captioned = iter(caption_items(captioner, good, args, options, names.used, stacked) if good else [])
    records = [next(captioned) if it["error"] is None else _record(it["name"], it["error"], it) | _mode_fields(args)
               for it in items]  # fmt: skip
    by_name = getattr(args, "references_by_name", None)
    for rec in records if by_name is not None else ():  # --references: each photo's, in the record and on the page
        rec["references"] = by_name.get(photo_key(rec["image"]), [])
    return records


def _open_html(captioner, args: argparse.Namespace):
    """The --html page, started (None without --html); an unwritable FILE ends the run here, before any work."""
    if not args.html:
        return None
    from captioning.views.caption_page import open_caption_page

    try:
        return open_caption_page(args.html, str(args.model or f"bundled ({BUNDLED_MODEL.name})"), captioner.grid)
    except OSError as err:
        fail("caption", f"cannot write --html {args.html}: {one_line(err)}")


def _add_html(report, items: list[dict[str, Any]], records: list[dict[str, Any]], unsure: float | None = None):
    """Each record's section; ``unsure``: --unsure's threshold, its words underlined (None: none)."""
    for section in html_sections(report, items, records, unsure):
        report.add(section)


def html_sections(report, items: list[dict[str, Any]], records: list[dict[str, Any]], unsure: float | None = None
                  ) -> list[str]:  # fmt: skip
    """The sections :func:`_add_html` adds, made (a photo's thumbnail encoded) but not yet written: a batch's page
    sections and its records are then written together."""
    from captioning.views.caption_page import image_section

    return [image_section(report.sections + k, rec, item.get("image"), unsure)
            for k, (item, rec) in enumerate(zip(items, records, strict=True), 1)]  # fmt: skip


def _close_html(report, failed: int, partial: str | None = None) -> None:
    """The --html page ended; ``partial``: why the run stopped before its last image (the page says so first)."""
    bad = f", {failed} failed" if failed else ""
    path = report.close(f"{report.sections} image(s){bad}", partial)
    if path is not None:  # None: the page was given up (its error said so), nothing was written
        print(f"wrote {inert(path)}", file=sys.stderr)


def tally(counts: dict[str, Any], kind: str, name: str) -> None:
    """Count image ``name`` under ``kind`` ("cut": its caption reached --max-len; "far": out of the model's domain),
    keeping the first NAMED names for the closing note."""
    counts[kind] = counts.get(kind, 0) + 1
    first = counts.setdefault(f"{kind}_first", [])
    if len(first) < NAMED:
        first.append(name)


def _which(counts: dict[str, Any], kind: str, field: str) -> str:
    """The images a note is about: "a.jpg, b.jpg and 3 more" (the first NAMED names, escaped); where no names were
    kept (several processes each counted their own), the records' ``field`` that says which."""
    count, first = counts.get(kind, 0), counts.get(f"{kind}_first")
    if not first:
        return f"their records' '{field}' says which"
    return and_more([inert(name) for name in first], count)  # a photo's name with a line break: escaped


def _closing_notes(captioner, args: argparse.Namespace, counts: dict[str, Any], unsure: dict | None = None) -> None:
    """The notes on the captions written: ``counts["cut"]`` reached --max-len, ``counts["far"]`` are out of the
    model's domain (each with the first ones' names in ``counts["cut_first"]``, ``counts["far_first"]``: :func:`tally`;
    without them, counts alone), and ``unsure`` (--unsure: caption_unsure.count_unsure's counts) hold words the model
    was unsure of."""
    if cut := counts.get("cut"):
        which = _which(counts, "cut", "truncated")
        print(f"caption: note: {cut} caption(s) reached --max-len {args.max_len} and are cut off: {which}",
              file=sys.stderr)  # fmt: skip
    if counts.get("far"):
        print(f"caption: note: {_domain_note(captioner, args, counts)}", file=sys.stderr)
    if getattr(args, "unsure", None) is not None and (note := unsure_note(unsure or {}, args.unsure, "caption(s)")):
        print(f"caption: note: {inert(note)}", file=sys.stderr)  # a photo's name with a line break: escaped


def _domain_note(captioner, args: argparse.Namespace, counts: dict[str, Any]) -> str:
    given = getattr(args, "given", None) or getattr(args, "given_file", None)
    what = "the scores of the captions given may mean little" if given else "their captions may be wrong"
    which = _which(counts, "far", "out_of_domain")
    note = f"{counts['far']} image(s) look unlike {captioner.known()}: {what} ({which})"
    if args.model is None:
        note += (
            "; for other images train a model with caption-train (docs/captioning.md: Train a captioner) and pass it "
            "with --model"
        )
    return note
