"""``benchmarks/word_confidence.py``: the words of translations read by ``translate --given-file``, binned by the
probability the model gave each, with the share its reference does not hold. Hand-counted bins, translate's own
output read, and bad input as one line."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE, EN
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.translation.translate_cli import translate_main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import word_confidence  # noqa: E402
from _runs import run_main  # noqa: E402


def test_words_are_binned_by_probability_and_compared_with_their_own_reference(tmp_path, capsys):
    read = tmp_path / "read.txt"
    read.write_text("1\t-0.5\tA dog runs, fast.\t0.9 0.01 0.5 0.07 0.8\n"  # words, then the end's probability
                    "2\t-0.3\tTwo cats !\t0.99 0.15 0.3 0.9\n")  # fmt: skip
    refs = tmp_path / "refs.txt"
    refs.write_text("A dog is running quickly.\nTwo cats sleep.\n")
    assert word_confidence.main([str(read), str(refs), "--json", str(tmp_path / "o.json")]) == 0
    rows = {(r["from"], r["to"]): (r["words"], r["not_in_reference"]) for r in word_confidence.binned(
        word_confidence.readings(read), refs.read_text().splitlines())}  # fmt: skip
    # "dog" 0.01 (held), "fast." 0.07 ("fast" not held), "cats" 0.15 (held), "runs," 0.5 (not held), "A" 0.9, "Two"
    # 0.99 (held); "!" alone is punctuation: not counted
    assert rows == {(0, 0.05): (1, 0), (0.05, 0.1): (1, 1), (0.1, 0.2): (1, 0), (0.2, 0.5): (0, 0), (0.5, 1.0): (3, 1)}
    assert "| 0.05-0.1 | 1 | 16.7% | 100.0% |" in capsys.readouterr().out


def test_translate_given_files_own_output_is_read(tmp_path, monkeypatch):
    model = tiny_subword_model_file(tmp_path / "m")
    (tmp_path / "own.txt").write_text("".join(f"{e}\n" for e in EN[:3]))
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{d}\n" for d in DE[:3])))
    out = tmp_path / "read.txt"
    args = ["--model", str(model), "--given-file", str(tmp_path / "own.txt"), "--output", str(out)]
    assert translate_main(args) == 0
    read = word_confidence.readings(out)
    assert [(n, words) for n, words, _ in read] == [(n, EN[n - 1].split()) for n in (1, 2, 3)]
    rows = word_confidence.binned(read, EN[:3])  # the references themselves: every word held
    assert sum(r["words"] for r in rows) == sum(len(e.split()) for e in EN[:3])
    assert all(r["not_in_reference"] == 0 for r in rows)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1\t-0.5\tA dog.\n", "line 1 is not a translate --given-file line"),
        ("1\t-0.5\tA dog.\t0.5 0.5 0.5 0.5\n", "line 1 has 4 probabilities for 2 words and the end"),
        ("3\t-0.5\tA dog.\t0.5 0.5 0.5\n", "input 3 has no reference line (1 lines)"),
        ("", "read.txt: no lines"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, monkeypatch, text, said):
    monkeypatch.setattr(sys, "argv", ["word_confidence.py"])
    (tmp_path / "read.txt").write_text(text)
    (tmp_path / "refs.txt").write_text("A dog.\n")
    assert run_main(lambda: word_confidence.main([str(tmp_path / "read.txt"), str(tmp_path / "refs.txt")])) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("word_confidence.py: error:") and said in err and "\n" not in err
