"""What ``translate`` writes of each batch beside its plain lines, made before any of it is written (the command then
writes them together: text_attn.core.sigterm.interrupts_held): the --jsonl records, the --alignments lines, the
--html page's sections, and each input's evidence, computed once for all of them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from text_attn.core.safe_files import json_inert
from text_attn.core.unsure import UNSURE
from text_attn.translation.sentences import MARKS_NOTE
from text_attn.translation.source_check import unseen_words_line


def record_lines(translator, args, progress, chunk, by_number, typed_lines, errors, readings, blank) -> str:
    """--jsonl: the chunk's records (text_attn.translation.records.input_record), one a line in input order, each
    input's line as typed taken out of ``typed_lines``; ``readings``: by translated input's number, its readings best
    first (--given, --given-file; empty without); ``blank``: its blank lines (nothing translated, no
    error: records.empty_record)."""
    from text_attn.translation.records import empty_record, input_record

    lines = []
    # --evidence: computed once, kept for the --alignments by evidence, --html and --plot that take it after
    later = (args.align_by == "evidence" and args.alignments) or args.html or args.plot
    for n, _ in chunk:
        typed = typed_lines.pop(n, "")
        if n in blank:
            record = {"input": n} | empty_record(typed)
            if blank[n]:  # marks alone: written as typed
                record |= {"translation": blank[n], "laid_out": blank[n], "note": MARKS_NOTE}
        elif n not in by_number:
            record = input_record(translator, n, typed, error=errors.get(n, "not translated"))
        else:
            tr = by_number[n]
            found = None
            if args.evidence and tr.attention is not None and tr.tokens:
                found = evidence_of_input(translator, tr, progress, n, keep=bool(later))
            below = UNSURE if args.unsure is None else args.unsure  # a reading's unsure words: at 0.1 unless given
            record = input_record(translator, n, typed, tr, keep_case=args.keep_case, below=below,
                                  ranked=readings.get(n), evidence=found, n_best=args.n_best_given)  # fmt: skip
        lines.append(json_inert(json.dumps(record, ensure_ascii=False)) + "\n")  # JSON on an inert stdout too
    return "".join(lines)


def page_sections(translator, args, progress, chunk, good, outs, by_number, blank, errors, flagged, unseen,
                   readings_of) -> list[str]:  # fmt: skip
    """--html: the chunk's sections, in input order, a failed input's in its place (as its empty output line); a
    blank input has none (its blank line in the output keeps its place)."""
    from text_attn.translation.alignment_page import failed_section, report_attention, sentence_section

    drawn = dict(zip((n for n, _ in good), report_attention(translator, outs), strict=True))
    sections = []
    for n, _ in chunk:
        if n in blank:
            continue
        if n not in by_number:
            sections.append(failed_section(n, errors.get(n, "not translated")))
            continue
        tr = by_number[n]
        found = evidence_of_input(translator, tr, progress, n, keep=bool(args.plot)) if args.evidence else None
        note = translator.note() if n in flagged else unseen_words_line(unseen.get(n))
        sections.append(sentence_section(n, tr, drawn[n], note, found, translator.source_lang, args.unsure,
                                         readings=readings_of.get(n, ())))  # fmt: skip
    return sections


def evidence_of_input(translator, tr, progress: dict[str, Any], n: int, keep: bool = False):
    """Input ``n``'s text_attn.translation.explain.Evidence, computed once for --html and --plot (``keep``: kept in
    ``progress['evidence']`` until --plot draws that batch's pictures, after --html's sections, and takes it)."""
    from text_attn.translation.explain import evidence_of

    kept = progress.setdefault("evidence", {})
    found = kept.pop(n, None) or evidence_of(translator, tr)  # a line of several sentences: each one's, joined
    if keep:
        kept[n] = found
    return found


def alignment_line(translator, args: argparse.Namespace, progress: dict[str, Any], n: int, tr) -> str:
    """Input ``n``'s --alignments line: links by attention, or by evidence (--align-by; computed once: kept for
    --html and --plot when --evidence draws it too)."""
    from text_attn.translation.alignments import as_typed, links, pharaoh

    rows = None
    if args.align_by == "evidence":
        later = args.evidence and (args.html or args.plot)  # --evidence draws it after: kept for them
        rows = evidence_of_input(translator, tr, progress, n, keep=bool(later)).evidence  # (T, S + 1)
    return pharaoh(as_typed(translator, tr, links(translator, tr, rows))) + "\n"  # words as written: markers too
