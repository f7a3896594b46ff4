"""``translate``'s command line: its arguments and options with their help, and the ones that only describe the
model (--model-info's). The command itself: text_attn/translation/translate_cli.py."""

from __future__ import annotations

import argparse

from text_attn.core.devices import add_device_options
from text_attn.core.errors import ArgumentParser
from text_attn.core.score_options import BLEU_TOKENIZERS
from text_attn.core.search_options import add_search_options
from text_attn.core.version import add_version
from text_attn.translation.unsure_cli import add_unsure_option


def translate_parser() -> argparse.ArgumentParser:
    """``translate``'s options, each with its help (``translate --help``)."""
    p = ArgumentParser(
        prog="translate",
        description="Translate sentences with a text model file written by `text-train fit` or `text-export`. "
        "Sentences come from the arguments, or one per line from stdin.",
    )
    p.add_argument("sentences", nargs="*", help="sentences to translate (default, or '-': read lines from stdin)")
    p.add_argument(
        "--model",
        help="model file (model.pt written at the end of `text-train fit`, or by `text-export` from a checkpoint); "
        "or a bundled model's name: multi30k_de_en (also called transformer: the default, German -> English, a "
        "Transformer trained on Multi30k) or bahdanau (the same data, a GRU with Bahdanau attention: faster)",
    )
    p.add_argument(
        "--ensemble",
        action="append",
        metavar="MODEL",
        help="translate with --model and MODEL as one (repeat it for more): at each step the mean of their next-token "
        "probabilities (a model file or a bundled name; every target token it writes must be one of --model's). The "
        "bundled Transformer with bahdanau: +0.7 sacreBLEU on Multi30k test at half the speed (docs/results.md). "
        "The attention, notes and recorded decoding are --model's; not with --evidence or --align-by evidence",
    )
    p.add_argument("--model-info", action="store_true", help="print what the model is and was trained on, and exit")
    add_version(p)
    p.add_argument(
        "--demo",
        action="store_true",
        help="translate a few German sentences and show which words each output looked at",
    )
    p.add_argument(
        "--beam-size", type=int, help="beam width; 1 = greedy (default: the model file's choice, else 1; --sample: 1)"
    )
    p.add_argument(
        "--length-penalty",
        type=float,
        help="rank beams by score / length**this (default: the model file's choice, chosen on validation data, else 0)",
    )
    p.add_argument(
        "--max-len",
        type=int,
        default=None,
        help="longest output in tokens of each sentence (a line of several: each sentence's), its end not counted "
        "(default: 2 x (source tokens + 1) + 10, the end counted; for a source longer than any the model learned "
        "from, at most 2 x its longest training target + 10)",
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="write the attention grid (source across, output down) as a PNG; with several sentences, PNG gets the "
        "input's number: -1, -2, ...",
    )
    p.add_argument(
        "--evidence",
        action="store_true",
        help="with --plot: also PNG-evidence.png, what drives each output token: the source tokens whose masking at "
        "its step lowers its probability most (leave-one-out: one step of S + 1 rows a token), each row labelled "
        "with its agreement with the attention (Kendall tau); with --html: the same as a third line of words lit on "
        "hover; with --json / --jsonl: each record's 'evidence' (T, S + 1) and 'agreement', as attention-serve's. "
        "Measured on the bundled models (benchmarks/evidence_cost.py, 1 thread): +0.1 to 0.2 s a sentence, 1.45 to "
        "1.74x the time of translating it",
    )
    p.add_argument(
        "--layer",
        type=int,
        default=None,
        help="Transformer: decoder layer whose cross-attention --plot draws (per head), --alignments, --demo, "
        "--html and the --json / --jsonl records' 'attention' read (0-based, -1: the last; default: the "
        "penultimate, which aligns best: on 100 hand-aligned Multi30k val pairs, AER 33.2 against the last layer's "
        "37.7, and 18.2 for the bundled model, taught to align, against 36.6; benchmarks/alignment_error.py)",
    )
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write FILE: one self-contained interactive page linking output and source words by attention "
        "(Transformer: every layer and head)",
    )
    p.add_argument(
        "--no-split",
        action="store_true",
        help="translate a line of several sentences whole; by default each sentence is translated on its own and the "
        "translations joined on the line's output line (a model that learned from single sentences translates a line "
        "of several as one: about the first, the rest dropped)",
    )
    p.add_argument(
        "--paragraphs",
        action="store_true",
        help="read text wrapped over lines (copied from a PDF, an e-mail): the lines up to a blank line are one "
        "input, joined into one (a word a hyphen breaks at a line's end made whole: 'Wieder-' 'holung' -> "
        "'Wiederholung'; 'T-' 'Shirt' and 'Ein-' 'und Ausgang' keep theirs; a heading's and a list item's line "
        "break kept; an e-mail quote's '> ' put once before it), its sentences translated each on its own and "
        "written on one output line; --references and --given-file are read alike, a paragraph an input. "
        "Arguments: each one a paragraph. By default each line is an input, and a sentence wrapped over two lines is "
        "translated as two halves: the bundled Transformer on Multi30k's test sentences four to a paragraph wrapped at "
        "60 columns, sacreBLEU 31.20 a line at a time, 44.91 with --paragraphs (as unwrapped; "
        "benchmarks/wrapped_text.py)",
    )
    p.add_argument(
        "--keep-layout",
        action="store_true",
        help="with --paragraphs: write each paragraph's translation laid out as its text was, a heading, a list item "
        "or an e-mail quote on a line of its own, and a blank line between paragraphs (a document or an e-mail "
        "translated reads as it did); by default a paragraph's translation is one output line. Not beside --resume, "
        "--n-best or --given/--given-file, which count output lines as inputs",
    )
    p.add_argument(
        "--keep-case",
        action="store_true",
        help="translate a line typed without capitals (or all in capitals) as typed; by default it is read with the "
        "capitals of the text the model learned from ('ein mann' -> 'Ein Mann'), where the model file knows them: "
        "the bundled Transformer on Multi30k's test sentences lowercased, sacreBLEU 18.09 as typed, 42.05 read so",
    )
    p.add_argument(
        "--given",
        action="append",
        metavar="TRANSLATION",
        help="read this translation instead of writing one: per sentence, each word's probability given the words "
        "before it and where the model looked for each token (--plot, --html); repeat it to rank several, best "
        "first. Output lines: N<TAB>score<TAB>translation<TAB>each space-separated word's probability (the product "
        "of its tokens'), then the end's (N: the input's number; score: the mean log-probability of the tokens and "
        "the end, higher fits better; the tokens are the model's, subword pieces for the bundled models, as --plot "
        "and --html show them)",
    )
    p.add_argument(
        "--probs-per",
        choices=["word", "piece"],
        help="with --given / --given-file: a probability per space-separated word of the translation (default: the "
        "product of its pieces') or per token the model reads (piece: subword pieces for the bundled models, as "
        "--plot and --html label them)",
    )
    p.add_argument(
        "--given-file",
        metavar="FILE",
        help="as --given, with line N of FILE the translation read for input N (a reference file: the forced "
        "alignment of a whole corpus; gzipped or not; -: stdin, when the sentences are arguments)",
    )
    add_unsure_option(p)
    p.add_argument(
        "--references",
        metavar="FILE",
        help="score the translations written against references: line N of FILE is input N's (a corpus's other "
        "side; gzipped or not; -: stdin, when the sentences are arguments). At the end, on stderr: sacreBLEU and "
        "chrF (the text as written, in NFC, with sacrebleu's signatures; case-insensitive, case:lc, for a model that "
        "writes lowercase) and BLEU (tok.) (lowercased, tokenized: the "
        "PyTorch seq2seq tutorials' measure)",
    )
    p.add_argument(
        "--bleu-tokenize",
        default="13a",
        choices=BLEU_TOKENIZERS,
        help="with --references: sacreBLEU's tokenizer (default 13a, sacreBLEU's own; zh for Chinese, ja-mecab for "
        "Japanese, ko-mecab for Korean, which need their packages: 13a reads a sentence written without spaces as "
        "one word; intl splits off Unicode punctuation; char: characters). The signature names it",
    )
    p.add_argument(
        "--scores",
        metavar="OUT",
        help="with --references: also write OUT, a JSON file of the scores and each sentence's source, translation, "
        "reference, sentence sacreBLEU and chrF, the lowest chrF first",
    )
    p.add_argument(
        "--alignments",
        metavar="FILE",
        help="also write FILE: per input a line of word alignments read off attention, in the Pharaoh format word "
        "aligners write (i-j: source word i, output word j, from 0; words split at spaces, a model's subword pieces "
        "joined; a word-tokenizer model's tokens, punctuation apart): each output piece linked to the source piece "
        "it attends most, none where that is the source's end, "
        "and two words linked where any of their pieces are (a Transformer: the --layer's heads averaged). With "
        "--given / --given-file: the translation given (forced alignment). A failed input: an empty line",
    )
    p.add_argument(
        "--align-by",
        choices=["attention", "evidence"],
        default="attention",
        help="with --alignments: what links an output piece to a source piece: its attention's peak (default), or "
        "the source piece whose masking lowers its probability most (leave-one-out, --evidence's measure: one step "
        "of S + 1 rows a piece), at about 4x the time. On 100 hand-aligned Multi30k val pairs "
        "(benchmarks/alignment_error.py), alignment error of the bundled models, both taught to align: the "
        "Transformer 18.2 by attention, 18.0 by evidence (no clear winner); the GRU (--model bahdanau) 31.3 and 24.9",
    )
    p.add_argument("--output", metavar="FILE", help="write the translations to FILE instead of stdout (- : stdout; "
                   "./- for a file named -)")  # fmt: skip
    p.add_argument(
        "--jsonl",
        metavar="FILE",
        help="also write FILE: one JSON record a line per input, in input order, as the inputs are done (- : to "
        "stdout, in place of the plain lines, unless --output names their file; ./- for a file named -): the "
        "fields of attention-serve's /translate answer (source and tokens, translation and tokens, attention, "
        "heads, score, truncated, sentence_count, laid_out, the notes on the input) and 'input', its number; with "
        "--unsure or --given(-file), 'token_probs', 'word_probs', 'end_prob', 'words', 'unsure' and 'unsure_tokens' "
        "(a translation given: 'given' true); with --n-best, 'n_best'; with several --given, 'ranked'; with "
        "--evidence, 'evidence' and 'agreement'; a failed input: 'error' (docs/text.md lists each field). Records "
        "are written as the plain lines are, so a run stopped "
        "early keeps the records of what it wrote, and --resume continues them (FILE.run.json beside FILE records "
        "the model and the options that shape a record)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the records --jsonl writes as one JSON list on stdout (a record a line, in input order, as the "
        "inputs are done), in place of the plain lines unless --output names their file; a run stopped early "
        "(Ctrl-C) ends the list after the inputs done",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --output FILE (and/or --jsonl FILE) that an interrupted run of the same command wrote: skip the "
        "inputs its complete lines hold (a last line cut off mid-write is written again; where one file is ahead of "
        "the other, both go on after the fewer) and append the rest, so FILE ends as one run writes it; refused "
        "beside --html, --plot, --alignments, --references, --n-best, --given(-file) and --demo, and where "
        "FILE.run.json (written beside every --output and --jsonl FILE) records another model or options, or "
        "other inputs",
    )
    p.add_argument("--batch-size", type=int, default=64, help="sentences translated together (default: 64)")
    add_device_options(p, "translate")
    add_search_options(p)
    return p
