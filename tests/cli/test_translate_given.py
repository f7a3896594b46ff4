"""``translate --given TRANSLATION``: the translations given, read by the model (each word's or token's probability and
where it looked), numbered by input and ranked best first, with --plot and --html; refusals in one line."""

import math

import pytest
from PIL import Image

from text_attn.translation.translate_cli import translate_main
from text_attn.translation.translator import Translator

pytestmark = pytest.mark.usefixtures("one_thread")

RIGHT, WRONG = "A man rides a bike.", "A woman swims in a lake."


def test_lines_rank_the_fitting_translation_first(capsys):
    code = translate_main(["Ein Mann fährt Fahrrad.", "Eine Frau schwimmt in einem See.", "--given", RIGHT,
                           "--given", WRONG])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert [(n, text) for n, _, text, _ in lines] == [("1", RIGHT), ("1", WRONG), ("2", WRONG), ("2", RIGHT)]
    translator = Translator.load()
    for _, _, text, probs in lines:
        assert len(probs.split()) == len(text.split()) + 1  # each word's, then the end's
    (read,) = translator.read(["Ein Mann fährt Fahrrad."], RIGHT)
    assert float(lines[0][1]) == pytest.approx(read.score, abs=1e-4)
    # per piece: each token's probability, then the end's; the score is their mean log-probability
    assert translate_main(["Ein Mann fährt Fahrrad.", "--given", RIGHT, "--probs-per", "piece"]) == 0
    _, score, text, probs = capsys.readouterr().out.strip().split("\t")
    p = [float(x) for x in probs.split()]
    assert len(p) == len(translator.target_tokens(text)[0]) + 1 and p == pytest.approx(
        [*read.probs, read.end_prob], 1e-3
    )
    assert float(score) == pytest.approx(sum(math.log(x) for x in p) / len(p), abs=2e-3)


def test_a_words_probability_is_the_product_of_its_pieces():
    """A long word the bundled model spells in pieces and a word with its full stop get one number each: the chain
    rule over their pieces, in the words of the text as printed."""
    translator = Translator.load()
    text = "A velocipedist rides (slowly) to 12,000 bikes."
    (read,) = translator.read(["Ein Mann fährt Fahrrad."], text)
    assert len(read.tokens) > len(text.split()) and len(read.word_probs) == len(text.split())
    by_hand, k = [], 0
    for word in text.split():  # the pieces spelling each word, in order (each word's first starts with "▁")
        pieces = translator.codec.encode(word)
        assert read.tokens[k : k + len(pieces)] == pieces
        by_hand.append(math.prod(read.probs[k : k + len(pieces)]))
        k += len(pieces)
    assert k == len(read.tokens) and read.word_probs == pytest.approx(by_hand, rel=1e-4)


def test_plot_and_page_draw_the_given_translation(capsys, tmp_path):
    png, page = tmp_path / "grid.png", tmp_path / "p.html"
    code = translate_main(["Ein Mann fährt Fahrrad.", "--given", RIGHT, "--plot", str(png), "--html", str(page),
                           "--model", "bahdanau"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert Image.open(png).size[0] > 100
    html = page.read_text()
    tokens = Translator.load("bahdanau").target_tokens(RIGHT)[0]
    assert html.count('title="p = ') == len(tokens) and "the translation given, read by the model" in html


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--given", "  "], "--given holds 2 space(s) only: an empty translation"),  # "--given ' '" for two
     (["--given", " \t"], "--given holds 2 blank character(s) only: an empty translation"),
     (["--given", RIGHT, "--beam-size", "2"], "--beam-size is for the translations the model writes"),
     (["--given", RIGHT, "--max-len", "5"], "--max-len is for"),
     (["--given", RIGHT, "--n-best", "2", "--beam-size", "2"], "--beam-size is for"),
     (["--given", RIGHT, "--sample"], "--sample is for"),
     (["--probs-per", "piece"], "--probs-per says how a translation given is scored")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, args, why):
    with pytest.raises(SystemExit) as exc:
        translate_main(["Ein Mann.", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_demo_is_refused_with_given(capsys):
    with pytest.raises(SystemExit) as exc:
        translate_main(["--demo", "--given", RIGHT])
    assert exc.value.code == 2 and "--demo is for" in capsys.readouterr().err


def test_a_given_file_is_read_line_by_line_against_the_inputs(capsys, tmp_path, monkeypatch):
    import io

    refs = tmp_path / "refs.txt"
    refs.write_text(f"{RIGHT}\n{WRONG}\n\nextra line\n")
    sources = ["Ein Mann fährt Fahrrad.", "Eine Frau schwimmt in einem See.", "Ein Hund.", "Zwei Hunde."]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(sources[:3]) + "\n"))
    code = translate_main(["--given-file", str(refs), "--model", "bahdanau"])
    out, err = capsys.readouterr()
    assert code == 1  # input 3's line is empty: one error line, the others read
    lines = [line.split("\t") for line in out.splitlines()]
    assert [(n, text) for n, _, text, _ in lines] == [("1", RIGHT), ("2", WRONG)]
    translator = Translator.load("bahdanau")
    for (_, score, text, _), source in zip(lines, sources, strict=False):
        assert float(score) == pytest.approx(translator.read([source], text)[0].score, abs=1e-4)
    assert f"input 3: line 3 of --given-file {refs} is empty" in err
    assert f"--given-file {refs} has 4 lines for 3 input(s): the rest were not read" in err
    # a line holding a token the model does not know: the note names its line and the tokens, as --given's does
    refs.write_text("A man rides a bike \U0001f6b2 .\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(sources[0] + "\n"))
    assert translate_main(["--given-file", str(refs), "--model", "bahdanau"]) == 0
    err = capsys.readouterr().err
    assert (
        f"1 line(s) of --given-file {refs} hold tokens the model does not know, read as <unk> (the first: line 1, '"
        in err
    )


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--given-file", "nope.txt"], "--given-file: nope.txt: file not found"),
     (["--given-file", "x.txt", "--given", RIGHT], "not both"),
     (["--given-file", "x.txt", "--beam-size", "3"], "--given-file reads the translations given; --beam-size")],
)  # fmt: skip
def test_given_file_refusals_in_one_line(capsys, tmp_path, monkeypatch, args, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text(RIGHT + "\n")
    with pytest.raises(SystemExit) as exc:
        translate_main(["Ein Mann.", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err
