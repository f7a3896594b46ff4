"""``translate --references FILE [--scores OUT]``: the translations written, scored against line N of FILE for input
N (sacreBLEU and chrF from sacrebleu itself, BLEU (tok.) as benchmarks/multi30k.py computes it), each sentence's
scores worst first; inputs without a reference line and extra lines in notes; refusals in one line."""

import io
import json
import os
import threading
import unicodedata

import pytest
from sacrebleu.metrics import BLEU, CHRF

from text_attn.core.metrics import corpus_bleu
from text_attn.core.vocab import tokenize
from text_attn.translation.translate_cli import translate_main

pytestmark = pytest.mark.usefixtures("one_thread")

SOURCES = ["Ein Mann fährt Fahrrad.", "Eine Frau schwimmt in einem See.", "Zwei Hunde spielen im Schnee."]
REFERENCES = ["A man is riding a bicycle.", "A woman swims in a lake.", "Two dogs play in the snow."]


def _scores_line(err: str) -> dict[str, float]:
    line = next(x for x in err.splitlines() if x.startswith("translate: sacreBLEU "))
    parts = line.removeprefix("translate: ").split("  ")
    return {p.rsplit(" ", 1)[0]: float(p.rsplit(" ", 1)[1]) for p in parts}


def test_the_scores_are_sacrebleus_of_the_lines_written(capsys, tmp_path, monkeypatch):
    refs = tmp_path / "refs.en"
    refs.write_text("\n".join(REFERENCES) + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SOURCES) + "\n"))
    code = translate_main(["--model", "bahdanau", "--references", str(refs), "--scores", str(tmp_path / "s.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    hyps = out.splitlines()
    assert len(hyps) == 3
    shown = _scores_line(err)
    assert shown["sacreBLEU"] == pytest.approx(BLEU().corpus_score(hyps, [REFERENCES]).score, abs=0.006)
    assert shown["chrF"] == pytest.approx(CHRF().corpus_score(hyps, [REFERENCES]).score, abs=0.006)
    tok = corpus_bleu([[tokenize(r)] for r in REFERENCES], [tokenize(h) for h in hyps])["bleu4"]
    assert shown["BLEU (tok.)"] == pytest.approx(100 * tok, abs=0.006)
    assert f"scores against --references {refs}: 3 input(s)" in err and "signatures: BLEU nrefs:1" in err
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["sentences"] == 3 and saved["scores"] == shown
    per = saved["per_sentence"]
    assert [s["chrF"] for s in per] == sorted(s["chrF"] for s in per)  # worst first
    for s in per:
        assert (s["source"], s["translation"], s["reference"]) == (SOURCES[s["input"] - 1], hyps[s["input"] - 1],
                                                                   REFERENCES[s["input"] - 1])  # fmt: skip
        assert s["chrF"] == pytest.approx(CHRF().sentence_score(s["translation"], [s["reference"]]).score, abs=0.006)


def test_one_translation_scored_against_itself_is_100(capsys, tmp_path):
    code = translate_main(["Ein Mann fährt Fahrrad.", "--model", "bahdanau"])
    own = tmp_path / "own.en"
    own.write_text(capsys.readouterr().out)
    code = translate_main(["Ein Mann fährt Fahrrad.", "--model", "bahdanau", "--references", str(own)])
    err = capsys.readouterr().err
    assert code == 0 and _scores_line(err) == {"sacreBLEU": 100.0, "chrF": 100.0, "BLEU (tok.)": 100.0}, err


def test_a_sentence_scores_as_the_corpus_does_against_a_reference_with_accents_apart():
    # the corpus scores read both sides in NFC; the sentence scores did not: a translation equal to its NFD
    # reference scored 100 in the corpus but 43.17 sacreBLEU / 82.84 chrF alone, and was sorted as the worst
    from text_attn.translation.references_cli import scores

    same, other = "Muž v modré košili jede na kole.", "Žena plave v jezeře u lesa."
    pairs = [(1, "a", same, unicodedata.normalize("NFD", same)), (2, "b", other, "Žena plave v rybníce u lesa.")]
    result = scores(pairs)
    assert result["scores"]["sacreBLEU"] < 100 and [s["input"] for s in result["per_sentence"]] == [2, 1]
    best = result["per_sentence"][-1]
    assert (best["sacreBLEU"], best["chrF"]) == (100.0, 100.0)
    assert best["reference"] == same  # kept as scored, composed


def test_inputs_without_a_reference_line_and_extra_lines_are_noted(capsys, tmp_path, monkeypatch):
    refs = tmp_path / "refs.en"
    refs.write_text(f"{REFERENCES[0]}\n\n")  # input 2's line is empty, input 3 has none
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(SOURCES) + "\n"))
    code = translate_main(["--model", "bahdanau", "--references", str(refs)])
    out, err = capsys.readouterr()
    assert code == 0 and len(out.splitlines()) == 3, err  # every input translated
    assert f"--references {refs} has no line (or an empty one) for 2 of the inputs translated" in err
    assert "1 input(s)" in err
    more = tmp_path / "more.en"
    more.write_text("\n".join(REFERENCES + ["extra"]) + "\n")
    code = translate_main([SOURCES[0], "--model", "bahdanau", "--references", str(more)])
    assert f"--references {more} has 4 lines for 1 input(s): the rest were not used" in capsys.readouterr().err


def test_bleu_tokenize_scores_with_sacrebleus_tokenizer(capsys, tmp_path):
    """--bleu-tokenize zh: sacreBLEU's zh tokenizer on both sides, the corpus and each sentence (the signature says
    tok:zh): a Chinese translation close to its reference scores what sacrebleu's zh gives, where 13a read each
    sentence as one word (0)."""
    from text_attn.translation.references_cli import scores

    hyp, ref = "一个男人在骑自行车。", "一个男人骑自行车。"
    zh, plain = scores([(1, "Ein Mann fährt Fahrrad.", hyp, ref)], "zh"), scores([(1, "", hyp, ref)])
    assert zh["scores"]["sacreBLEU"] == pytest.approx(BLEU(tokenize="zh").corpus_score([hyp], [[ref]]).score, abs=0.006)
    assert zh["scores"]["sacreBLEU"] > 30 and plain["scores"]["sacreBLEU"] == 0.0
    each = BLEU(tokenize="zh", effective_order=True).sentence_score(hyp, [ref]).score
    assert zh["per_sentence"][0]["sacreBLEU"] == pytest.approx(each, abs=0.006) and "tok:zh" in zh["signature"]
    refs = tmp_path / "refs.txt"
    refs.write_text(f"{ref}\n")
    code = translate_main(["--model", "bahdanau", SOURCES[0], "--references", str(refs), "--bleu-tokenize", "zh"])
    err = capsys.readouterr().err
    assert code == 0 and "|tok:zh|" in err, err


def test_bleu_tokenize_without_its_package_is_refused_in_one_line(capsys, monkeypatch, tmp_path):
    import sacrebleu.metrics

    class NoMecab(BLEU):  # sacrebleu's BLEU where mecab-python3 is not installed
        def __init__(self, *args, tokenize=None, **kwargs):
            if tokenize == "ja-mecab":
                raise ImportError("Japanese tokenization requires extra dependencies")
            super().__init__(*args, tokenize=tokenize, **kwargs)

    monkeypatch.setattr(sacrebleu.metrics, "BLEU", NoMecab)
    (tmp_path / "r.txt").write_text("x\n")
    with pytest.raises(SystemExit) as exc:
        translate_main([SOURCES[0], "--references", str(tmp_path / "r.txt"), "--bleu-tokenize", "ja-mecab"])
    out, err = capsys.readouterr()
    why = "--bleu-tokenize ja-mecab cannot run here: Japanese tokenization requires extra dependencies"
    assert exc.value.code == 2 and out == "" and err.strip().splitlines() == [f"translate: error: {why}"]


@pytest.mark.parametrize(
    ("args", "why"),
    [(["--scores", "s.json"], "--scores writes each sentence's scores against --references FILE: add it"),
     (["--references", "nope.en"], "--references: nope.en: file not found"),
     (["--references", "/dev/zero"], "--references: /dev/zero: not a regular file or a pipe: not read"),
     (["--references", "r.en", "--given", "A man."], "--references scores the translations the model writes; --given"),
     (["--references", "r.en", "--scores", "no/s.json"], "cannot write --scores no/s.json: the folder no does not"),
     (["--references", "r.en", "--demo"], "--demo translates its own"),
     (["--references", "r.en", "--output", "r.en"], "--output r.en is also an input"),
     (["--references", "r.en", "--scores", "r.en"], "--scores r.en is also an input"),
     (["--bleu-tokenize", "zh"], "--bleu-tokenize is how the translations are scored against --references FILE"),
     (["--references", "r.en", "--bleu-tokenize", "spm"], "argument --bleu-tokenize: invalid choice: 'spm'")],
)  # fmt: skip
def test_refusals_in_one_line(capsys, tmp_path, monkeypatch, args, why):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.en").write_text("A man.\n")
    with pytest.raises(SystemExit) as exc:
        translate_main([*(() if "--demo" in args else ["Ein Mann."]), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err


def test_references_on_stdin_or_a_pipe_score_as_the_file(capsys, tmp_path, monkeypatch):
    """``--references -`` reads stdin (the sentences being arguments), and a pipe (``<(zcat refs.gz)``, a path that
    is no regular file) is read as a file is: the same scores as the file's."""
    refs = tmp_path / "refs.en"
    refs.write_text("\n".join(REFERENCES) + "\n")
    code = translate_main([*SOURCES, "--model", "bahdanau", "--references", str(refs)])
    from_file = _scores_line(capsys.readouterr().err)
    monkeypatch.setattr("sys.stdin", io.StringIO(refs.read_text()))
    code = translate_main([*SOURCES, "--model", "bahdanau", "--references", "-"])
    err = capsys.readouterr().err
    assert code == 0 and _scores_line(err) == from_file and "scores against --references -: 3 input(s)" in err
    fifo = tmp_path / "refs.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(refs.read_text(),))
    writer.start()
    code = translate_main([*SOURCES, "--model", "bahdanau", "--references", str(fifo)])
    writer.join()
    assert code == 0 and _scores_line(capsys.readouterr().err) == from_file


@pytest.mark.parametrize(
    ("argv", "why"),
    [(["--references", "-"], "--references -: stdin holds the sentences to translate; give --references a file"),
     (["--given-file", "-"], "--given-file -: stdin holds the sentences to translate; give --given-file a file"),
     (["Ein Mann.", "--references", "-", "--given-file", "-"], "--given-file - and --references -: stdin is read")],
)  # fmt: skip
def test_stdin_is_read_for_one_input_only(capsys, monkeypatch, argv, why):
    monkeypatch.setattr("sys.stdin", io.StringIO("A man.\n"))
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", "bahdanau", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and why in err[0], err
