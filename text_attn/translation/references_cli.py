"""``translate --references FILE [--scores OUT]``: the translations a run writes, scored against a reference
translation a line (line N for input N, as a corpus's two sides are): sacreBLEU, chrF and BLEU (tok.) on stderr, and
with ``--scores`` a JSON file with each sentence's sentence-level sacreBLEU and chrF, the lowest chrF first."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from text_attn.core.errors import fail, one_line
from text_attn.core.safe_files import inert
from text_attn.core.score_options import check_score_options, write_scores
from text_attn.translation.paragraphs import file_paragraphs, file_unit


def check_references(args: argparse.Namespace) -> None:
    """--references / --scores / --bleu-tokenize, before the model loads (text_attn.core.score_options): FILE's lines
    read (``args.reference_lines``); a tokenizer whose package is missing refused now, not after the run."""
    args.reference_lines = None
    if args.bleu_tokenize != "13a" and not args.references:
        fail("translate", "--bleu-tokenize is how the translations are scored against --references FILE: add it")
    if args.bleu_tokenize != "13a":
        from sacrebleu.metrics import BLEU

        try:
            BLEU(tokenize=args.bleu_tokenize)
        except (ImportError, RuntimeError) as err:  # ja-mecab / ko-mecab without their packages
            fail("translate", f"--bleu-tokenize {args.bleu_tokenize} cannot run here: {one_line(err)}")
    if check_score_options("translate", args, "sentence", "translations", "sentences", "translates its own"):
        from text_attn.translation.corpora import read_lines
        from text_attn.translation.pairs import TaskError

        try:
            args.reference_lines = read_lines(args.references)
            if getattr(args, "paragraphs", False):  # a paragraph an input, as the inputs are read
                args.reference_lines = file_paragraphs(args.reference_lines)
        except TaskError as err:
            fail("translate", f"--references: {err}")


def keep(
    args: argparse.Namespace, progress: dict[str, Any], number: int, source: str, text: str, extra: dict | None = None
) -> None:
    """Input ``number``'s translation, kept for scoring at the end (``progress["scored"]``); ``extra``: what its
    sentence's entry in --scores also holds (--unsure: its words under the threshold)."""
    if getattr(args, "reference_lines", None) is not None:
        progress.setdefault("scored", []).append((number, source, text))
        if extra:
            progress.setdefault("scored_extra", {})[number] = extra


def score_run(
    args: argparse.Namespace, progress: dict[str, Any], seen: int, lowercase: bool = False, interrupted: bool = False
) -> None:
    """The run's translations against --references: inputs whose line in FILE is missing or empty are counted in one
    note and not scored; the scores on stderr; --scores written. ``lowercase``: the model writes lowercase (a word
    model with data.lower): sacreBLEU and chrF case-insensitive, and the lines say so. ``interrupted``: a Ctrl-C
    ended the run: the translations written are scored, and the scores' line says they are only those."""
    lines = args.reference_lines
    if lines is None:
        return
    kept = progress.get("scored", [])
    pairs = [(n, src, hyp, lines[n - 1].strip()) for n, src, hyp in kept if n <= len(lines) and lines[n - 1].strip()]
    name = inert(args.references)
    if len(pairs) < len(kept):
        print(f"translate: note: --references {name} has no {file_unit(args)} (or an empty one) for "
              f"{len(kept) - len(pairs)} of the inputs translated: they are not scored", file=sys.stderr)  # fmt: skip
    if len(lines) > seen and not interrupted:  # interrupted: the rest were not reached, said in the scores' line
        print(f"translate: note: --references {name} has {len(lines)} {file_unit(args)}s for {seen} input(s): the "
              "rest were not used", file=sys.stderr)  # fmt: skip
    if not pairs:
        print("translate: note: no input translated has a line in --references: nothing scored", file=sys.stderr)
        return
    result = scores(pairs, args.bleu_tokenize, lowercase)
    extra = progress.get("scored_extra", {})
    for sentence in result["per_sentence"]:
        sentence.update(extra.get(sentence["input"], {}))
    text = "case-insensitive: the model writes lowercase" if lowercase else "on the text as written"
    part = " written before the interrupt" if interrupted else ""
    print(f"translate: scores against --references {name}: {len(pairs):,} input(s){part} (sacreBLEU and chrF "
          f"{text}; BLEU (tok.): lowercased, tokenized)", file=sys.stderr)  # fmt: skip
    print("translate: " + "  ".join(f"{k} {v:.2f}" for k, v in result["scores"].items()), file=sys.stderr)
    print(f"translate: signatures: {result['signature']}", file=sys.stderr)
    if args.scores:
        write_scores("translate", args.scores, result)


def scores(pairs: list[tuple[int, str, str, str]], tokenize: str = "13a", lowercase: bool = False) -> dict[str, Any]:
    """(input number, source, translation, reference) -> the corpus's sacreBLEU, chrF and BLEU (tok.) x 100, and
    each sentence's sentence-level sacreBLEU (effective order: a short sentence without 4-gram matches is not 0) and
    chrF, the lowest chrF first. ``tokenize``: sacreBLEU's tokenizer (--bleu-tokenize); ``lowercase``: sacreBLEU and
    chrF case-insensitive (signatures "case:lc"). Translations and references are scored, and kept, in the form the
    corpus scores read them (metrics.scored_form, NFC), so the sentences agree with the corpus (a translation equal
    to its NFD reference scored 100 in the corpus but 43.17 sacreBLEU and 82.84 chrF alone, and sorted as a bad one)."""
    from sacrebleu.metrics import BLEU, CHRF

    from text_attn.core.metrics import scored_form, text_scores

    pairs = [(n, src, scored_form(hyp), scored_form(ref)) for n, src, hyp, ref in pairs]
    refs, hyps = [p[3] for p in pairs], [p[2] for p in pairs]
    corpus = text_scores(refs, hyps, tokenize, lowercase)
    bleu, chrf = BLEU(effective_order=True, tokenize=tokenize, lowercase=lowercase), CHRF(lowercase=lowercase)
    sentences = [{"input": n, "source": src, "translation": hyp, "reference": ref,
                  "sacreBLEU": round(bleu.sentence_score(hyp, [ref]).score, 2),
                  "chrF": round(chrf.sentence_score(hyp, [ref]).score, 2)}
                 for n, src, hyp, ref in pairs]  # fmt: skip
    sentences.sort(key=lambda s: (s["chrF"], s["sacreBLEU"], s["input"]))
    return {
        "sentences": len(pairs),
        "scores": {
            "sacreBLEU": round(corpus["sacrebleu"], 2),
            "chrF": round(corpus["chrf"], 2),
            "BLEU (tok.)": round(corpus["bleu_tok"], 2),
        },  # fmt: skip
        "signature": corpus["signature"],
        "per_sentence": sentences,
    }
