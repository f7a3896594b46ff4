"""``translate --unsure``: each token's probability, kept by the search, and the words the model gave one under a
threshold (``--unsure-below``, default 0.1) named in one closing note and underlined on the --html page
(text_attn.core.unsure_options holds what ``caption --unsure`` shares)."""

from __future__ import annotations

import argparse

from text_attn.core.unsure import UNSURE
from text_attn.core.unsure_options import add_unsure_options

HELP = (
    f"keep each token's probability as the search writes the translation (the best one, with --n-best) and name the "
    f"words the model gave a probability under {UNSURE:g} (--unsure-below), given the words before them: one note at "
    "the end, on stderr, and with --html those "
    "words underlined, each token's probability on hover. The bundled Transformer on Multi30k val: 89%% of its words "
    "under 0.1 (2.3%% of its words) are not in the reference, against 18%% of those of 0.5 and more "
    "(benchmarks/word_confidence.py). Keeping the probabilities costs no time the runs can tell from "
    "their noise (0.98-1.04x; Multi30k val, the bundled models; benchmarks/unsure_cost.py). With "
    "--scores: each sentence's words under it too. With --given / --given-file: the words of the translation given"
)


def add_unsure_option(p: argparse.ArgumentParser) -> None:
    add_unsure_options(p, HELP, UNSURE)
