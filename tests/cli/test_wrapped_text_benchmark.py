"""benchmarks/wrapped_text.py: its wrapper against hand-wrapped text (a word that does not fit broken by a hyphen only
where both halves keep 3 characters, a hyphenated word at its own hyphen), every wrapped paragraph joined back as
typed; end to end on a tiny model and corpus (-m long), a bad --width refused in one line. No score asserted (the
measured table is docs/text.md's, from the full command)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE, write_corpus

from text_attn.translation.paragraphs import join_wrapped

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "wrapped_text.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from wrapped_text import wrapped  # noqa: E402 - benchmarks/ on the path first


def test_words_are_broken_by_a_hyphen_only_where_both_halves_keep_three_characters():
    text = "Ein kleiner Junge spielt mit einem Fußballspieler auf der Wiederholungsstraße neben dem schwarz-weißen Hund"
    lines, broken = wrapped(text, 20)
    assert lines == ["Ein kleiner Junge", "spielt mit einem", "Fußballspieler auf", "der Wiederholungsst-",
                     "raße neben dem schw-", "arz-weißen Hund"]  # fmt: skip
    assert broken == 2 and all(len(line) <= 20 for line in lines)
    lines, broken = wrapped("Ein schwarz-weißer Hund", 16)  # its own hyphen, where it fits
    assert (lines, broken) == (["Ein schwarz-", "weißer Hund"], 1)
    # broken once where it fits; what is left, longer than a line, stays whole on its own line
    assert wrapped("Ein Donaudampfschifffahrtskapitän", 10) == (["Ein Donau-", "dampfschifffahrtskapitän"], 1)
    assert wrapped("", 10) == ([], 0)


def test_every_paragraph_of_the_helpers_corpus_is_joined_back_as_typed():
    for width in (12, 20, 35):
        for k in (1, 3):
            text = " ".join(DE[:k])
            assert join_wrapped(wrapped(text, width)[0]) == text


@pytest.mark.long
def test_the_benchmark_translates_each_paragraph_three_ways(tmp_path):
    from helpers.tiny_translator import tiny_subword_model_file

    model = tiny_subword_model_file(tmp_path / "m")
    write_corpus(tmp_path, {"test_2016_flickr": 4}, gz=False)  # the first 4 of DE and EN
    out = tmp_path / "w.json"
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(tmp_path), "--models", str(model), "--per-paragraph", "2",
           "--width", "20", "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["models"][str(model)]
    assert row["paragraph_count"] == 2 and row["wrapped_lines"] > 2
    assert row["same_as_typed"] == {"with_model": 2, "without": 2}
    assert all(0 <= row[way]["sacrebleu"] <= 100 for way in ("lines", "paragraphs", "unwrapped"))
    bad = subprocess.run([*cmd[:-2], "--width", "5"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith("got 5")


def test_any_text_wrapped_at_any_width_is_joined_back_when_the_model_knows_its_words():
    """Random texts of the helpers' words and long compounds (with and without hyphens), wrapped at random widths
    with words broken anywhere a typesetter may: joined back exactly as typed when ``word_logp`` knows each typed word
    (as a model's word profile knows its training text's); the line breaks and hyphens added leave no trace, and no
    break is kept as a heading's or a list's (paragraphs.kept_break: a wrapper never leaves room for the next word)."""
    import math
    import random

    from helpers.multi30k import FR

    words = " ".join(DE + FR).split() + ["schwarz-weißen", "Fußballspieler", "Donaudampfschiff", "vierjähriger",
                                         "T-Shirt", "1990-1995", "Straßenbahnhaltestelle", "und", "oder"]  # fmt: skip
    rng, broken = random.Random(0), 0
    for _ in range(300):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 40)))
        known = {w.lower().strip(".,"): 0.0 for w in text.split()}  # each typed word's log-probability
        lines, b = wrapped(text, rng.randint(8, 50))
        assert join_wrapped(lines, lambda w, k=known: k.get(w.lower(), -math.inf)) == text, lines
        broken += b
    assert broken > 200  # words really broken, at their own hyphens and between letters
