"""``caption --unsure``: each caption word's probability, kept by the search; the words the model gave one under a
threshold (``--unsure-below``, default text_attn.core.unsure.CAPTION_UNSURE) in the record (``word_probs``,
``end_prob``, ``unsure``), named in one closing note and underlined on the --html page
(text_attn.core.unsure_options holds what ``translate --unsure`` shares)."""

from __future__ import annotations

import argparse

from text_attn.core.unsure import CAPTION_UNSURE
from text_attn.core.unsure_options import add_unsure_options

HELP = (
    f"keep each caption word's probability as the search writes it (the best caption, with --n-best) and name the "
    f"words the model gave a probability under {CAPTION_UNSURE:g} (--unsure-below), given the words before them: "
    "one note at the end, on stderr; in the --json "
    "/ --jsonl records as 'word_probs', 'end_prob' and 'unsure' ([word, p] each); with --html those words underlined, "
    "each word's probability on hover. The bundled captioner on Flickr8k test: 75%% of its words of 0.1-0.2 are in "
    "none of the photo's five references, against 25%% of those of 0.5 and more; 1.0%% of its words are under 0.2; "
    "keeping the probabilities costs no time that can be measured (benchmarks/caption_unsure.py). With --given / "
    "--given-file: the words of the best caption given"
)


def add_caption_unsure_options(p: argparse.ArgumentParser) -> None:
    add_unsure_options(p, HELP, CAPTION_UNSURE)
