"""Every command takes an option as typed, never completed from its first letters (argparse's default completed
``translate --json "Ein Kind lacht."`` to ``--jsonl``, before translate had a --json, which wrote an empty file named
after the sentence and then said "no input"; ``--out`` so to ``--output``); an unknown option is refused in one line
naming the option it likely meant."""

from __future__ import annotations

import pytest
from helpers.one_line import refused

from captioning.commands.caption import caption_main
from text_attn.core.errors import ArgumentParser, unrecognized
from text_attn.translation.translate_cli import translate_main


def test_translate_out_is_refused_pointing_at_output_and_writes_no_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    said = refused(translate_main, capsys, "--out", "Ein Kind lacht.")
    assert said == "translate: error: unrecognized arguments: --out (did you mean --output?) (see translate --help)"
    assert list(tmp_path.iterdir()) == []  # argparse's completion made ./"Ein Kind lacht." (empty) before


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--over", "attn", "--demo"], "--over (did you mean --overlay or --overlay-format?)"),
     (["--jsonn", "x.jpg"], "--jsonn (did you mean --json?)"),
     (["--beam_size=3", "x.jpg"], "--beam_size=3 (did you mean --beam-size?)")],
)  # fmt: skip
def test_caption_refuses_a_shortened_or_misspelt_option_naming_the_one_meant(args, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    said = f"caption: error: unrecognized arguments: {said} (see caption --help)"  # attn: a photo, left unread
    assert refused(caption_main, capsys, *args) == said
    assert list(tmp_path.iterdir()) == []


def test_the_guess_is_every_longer_option_or_the_closest_or_none():
    options = ["-h", "--help", "--jsonl", "--json-pretty", "--output", "--beam-size"]
    said = "unrecognized arguments: --json (did you mean --json-pretty or --jsonl?)"  # sorted
    assert unrecognized(["--json"], options) == said
    assert unrecognized(["--outptu=a", "b"], options) == "unrecognized arguments: --outptu=a (did you mean --output?) b"
    assert unrecognized(["--zzz", "-q"], options) == "unrecognized arguments: --zzz -q"  # nothing near: no guess


def test_a_parser_that_allows_completion_still_may():
    p = ArgumentParser(prog="x", allow_abbrev=True)
    p.add_argument("--overlay")
    assert p.parse_args(["--over", "d"]).overlay == "d"
    q = ArgumentParser(prog="x")
    q.add_argument("--overlay")
    assert q.parse_args(["--overlay", "d"]).overlay == "d"
    with pytest.raises(SystemExit):
        q.parse_args(["--over", "d"])
