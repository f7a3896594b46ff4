"""Measured numbers that `--help` quotes are the measurements the docs keep.

A help text states what a benchmark measured (how often an unsure caption word is wrong, what `--evidence` costs); a
model bundled anew and measured again leaves the help quoting the model before it (found so on 2026-12-06: the
`--unsure` shares were the previous captioner's). Each number is computed here from the JSON the benchmark wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

from captioning.commands.caption_unsure import HELP as UNSURE_HELP
from text_attn.translation.translate_parser import translate_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _help_of(parser, flag: str) -> str:
    return next(a.help for a in parser._actions if flag in a.option_strings)


def test_caption_unsure_help_quotes_the_bundled_captioner_s_measurement():
    record = json.loads((DOCS / "caption_unsure.json").read_text())
    rows = {(r["from"], r["to"]): r for r in record["rows"]}
    mid, high = rows[(0.1, 0.2)], rows[(0.5, 1.0)]
    under = sum(r["words"] for r in record["rows"] if r["to"] <= record["below"])
    text = UNSURE_HELP % ()  # argparse's %% as printed
    assert f"{mid['not_in_reference'] / mid['words']:.0%} of its words of 0.1-0.2" in text
    assert f"against {high['not_in_reference'] / high['words']:.0%} of those of 0.5 and more" in text
    assert f"{under / record['summary']['words']:.1%} of its words are under {record['below']:g}" in text


def test_translate_evidence_help_quotes_evidence_cost_json():
    rows = json.loads((DOCS / "evidence_cost.json").read_text())["rows"]
    text = [rows[k] for k in rows if k.startswith("translate")]
    ratios = sorted(r["ratio"] for r in text)
    seconds = sorted(r["evidence_ms"] / 1000 for r in text)
    said = _help_of(translate_parser(), "--evidence")
    assert f"{ratios[0]:.2f} to {ratios[-1]:.2f}x the time of translating it" in said
    low, high = int(seconds[0] * 10) / 10, int(seconds[-1] * 10 + 1) / 10  # the range around the measured seconds
    assert f"+{low:.1f} to {high:.1f} s a sentence" in said
