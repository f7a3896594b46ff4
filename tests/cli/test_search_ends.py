"""Where caption's and translate's searches stop, as their users see it: --max-len counts words (caption) or tokens
(translate), so an output of exactly that many ends and is not flagged cut off; n-best lists in strict JSON, each
hypothesis saying whether it ended; a Transformer with learned positions capped and refused in one line, never a
traceback. (The search itself: tests/core/test_search_end.py.)"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

SHAPES = Path(__file__).resolve().parents[2] / "captioning" / "assets" / "shapes_soft.pt"


def _strict(text: str):
    """JSON as a browser's JSON.parse reads it: -Infinity, Infinity and NaN are no JSON."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))


def test_caption_max_len_counts_words_and_n_best_is_strict_json(tmp_path, capsys):
    from captioning import Captioner
    from captioning.commands.caption import caption_main
    from captioning.training.shapes import make_scenes

    photo = tmp_path / "scene.png"
    make_scenes(1, seed=5)[0].image.save(photo)
    captioner = Captioner.load(SHAPES)  # what caption runs (caption_features), for three lengths in one load
    for beam in (1, 3):
        (free,) = captioner.caption_images([photo], beam_size=beam)
        n = len(free.words)
        assert n > 2 and not free.truncated
        (exact,) = captioner.caption_images([photo], beam_size=beam, max_len=n)  # was cut off, with another score
        assert (exact.words, exact.truncated, exact.score) == (free.words, False, free.score)
        (short,) = captioner.caption_images([photo], beam_size=beam, max_len=n - 1)
        assert len(short.words) == n - 1 and short.truncated
    # a beam wider than the words the first step can choose from (the shapes model knows ~20): the list held
    # -Infinity scores, copies and banned tokens; now the hypotheses found, each saying whether it ended
    assert caption_main([str(photo), "--model", str(SHAPES), "--json", "--beam-size", "19", "--n-best", "19",
                         "--max-len", "1"]) == 0  # fmt: skip
    wide = _strict(capsys.readouterr().out)[0]
    alts = wide["n_best"]
    assert 1 < len(alts) < 19 and alts[0]["caption"] == wide["caption"]
    assert all(math.isfinite(a["score"]) and isinstance(a["truncated"], bool) for a in alts)
    assert len({(a["caption"], a["truncated"]) for a in alts}) == len(alts)
    assert not {"<pad>", "<bos>", "<unk>"} & {w for a in alts for w in a["caption"].split()}
    assert {a["truncated"] for a in alts} == {True, False}  # one word, then the end or more words
    # the same list as plain lines (translate's way), the path first with several photos; it was refused without --json
    again = tmp_path / "again.png"  # the same photo under another name (one named twice is captioned once)
    again.write_bytes(photo.read_bytes())
    assert caption_main([str(photo), str(again), "--model", str(SHAPES), "--beam-size", "19", "--n-best", "19",
                         "--max-len", "1"]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    mine = [f"{{}}\t{a['score']:.4f}\t{a['caption']}\t{'cut' if a['truncated'] else 'ended'}" for a in alts]
    assert lines == [line.format(photo) for line in mine] + [line.format(again) for line in mine]
    assert caption_main([str(photo), "--model", str(SHAPES), "--n-best", "2"]) == 0  # one photo: no path
    best, second = (line.split("\t") for line in capsys.readouterr().out.splitlines())
    assert len(best) == len(second) == 3 and float(best[0]) >= float(second[0]) and best[2] == "ended"
    # Python's caption_images(n_best=) gives the same list as the command
    (mine,) = captioner.caption_images([photo], beam_size=19, max_len=1, n_best=19)
    assert [(" ".join(w), round(sc, 4), cut) for w, sc, cut in mine.nbest] == [
        (a["caption"], round(a["score"], 4), a["truncated"]) for a in alts
    ]
    for bad in (0, 20, 2.0, True):  # from 1 to the beam, an integer
        with pytest.raises(ValueError, match=r"n_best must be an integer from 1 to the beam size \(19\)"):
            captioner.caption_images([photo], beam_size=19, n_best=bad)


def test_translate_max_len_counts_tokens_and_n_best_lines_say_ended_or_cut(capsys):
    from text_attn.translation.translate_cli import translate_main
    from text_attn.translation.translator import Translator

    sentence = "Zwei Kinder spielen im Sand."  # "Two children are playing in the sand.": 8 tokens
    tr = Translator.load()  # the bundled model, as translate runs it (translate_tokens)
    (exact,) = tr.translate([sentence], beam_size=1, max_len=8)  # was flagged cut off, with another score
    (free,) = tr.translate([sentence], beam_size=1)
    assert (exact.text, exact.truncated, exact.score) == ("Two children are playing in the sand.", False, free.score)
    (short,) = tr.translate([sentence], beam_size=1, max_len=7)
    assert short.tokens == exact.tokens[:7] and short.truncated
    assert translate_main(["--beam-size", "3", "--n-best", "3", "--max-len", "8", sentence]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert len(lines) <= 3 and all(len(line) == 4 and line[3] in ("ended", "cut") for line in lines)
    assert lines[0][2:] == ["Two children are playing in the sand.", "ended"]


def test_n_best_1_is_a_list_of_one_in_both_commands(tmp_path, capsys):
    """--n-best 1 lists the output itself, as any N does: caption printed the bare caption and neither command's
    JSON held the list (translate's plain lines did)."""
    from captioning.commands.caption import caption_main
    from captioning.training.shapes import make_scenes
    from text_attn.translation.translate_cli import translate_main

    photo = tmp_path / "scene.png"
    make_scenes(1, seed=5)[0].image.save(photo)
    assert caption_main([str(photo), "--model", str(SHAPES), "--json", "--n-best", "1"]) == 0
    rec = _strict(capsys.readouterr().out)[0]
    assert rec["n_best"] == [{"caption": rec["caption"], "score": rec["score"], "truncated": rec["truncated"]}]
    assert caption_main([str(photo), "--model", str(SHAPES), "--n-best", "1"]) == 0
    assert capsys.readouterr().out == f"{rec['score']:.4f}\t{rec['caption']}\tended\n"
    assert caption_main([str(photo), "--model", str(SHAPES), "--json"]) == 0
    assert "n_best" not in _strict(capsys.readouterr().out)[0]  # not asked: no list
    assert translate_main(["--n-best", "1", "--jsonl", "-", "Ein Hund rennt."]) == 0
    tr = json.loads(capsys.readouterr().out)
    assert tr["n_best"] == [{"translation": tr["translation"], "score": tr["score"], "truncated": tr["truncated"]}]
    assert translate_main(["--jsonl", "-", "Ein Hund rennt."]) == 0
    assert "n_best" not in json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """A random Transformer with a learned position table of 8 rows, as a model file."""
    from helpers.tiny_translator import learned_positions_model_file

    return learned_positions_model_file(tmp_path_factory.mktemp("lp") / "m.pt")


def test_learned_positions_cap_the_output_and_refuse_a_longer_source_in_one_line(learned, capsys):
    from text_attn.translation.module import TranslationModule
    from text_attn.translation.translate_cli import translate_main
    from text_attn.translation.translator import Translator

    tr = Translator.load(learned)
    assert tr.position_limit == 8
    (out,) = tr.translate(["ma mo pe"], beam_size=1)  # its own cap, 2 x 4 + 10, ran past the table: a traceback
    assert len(out.tokens) <= 8 and (out.truncated or len(out.tokens) < 8)
    with pytest.raises(ValueError, match=r"^sentence 0: 8 tokens: with its end more than the 8 positions"):
        tr.translate(["ma " * 8])
    with pytest.raises(ValueError, match="max_len 8: the model learned 8 positions, room for 7 output tokens"):
        tr.translate(["ma"], max_len=8)
    assert len(tr.translate(["ma"], beam_size=2, max_len=7)[0].tokens) <= 7
    assert translate_main(["--model", str(learned), "--beam-size", "1", "gake " * 7]) == 0  # its cap: the table's 8
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("cut off" not in err or "at most 8, the positions the model learned" in err)
    # the command: the long line failed in one line, the other translated; a --max-len past the table refused
    assert translate_main(["--model", str(learned), "ma mo", "ma " * 8]) == 1
    got = capsys.readouterr()
    assert got.out.count("\n") == 2 and got.out.endswith("\n\n")  # line 2: the failed input's, empty
    assert "translate: error: input 2: 8 tokens: with its end more than the 8 positions" in got.err
    assert "Traceback" not in got.err
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(learned), "--max-len", "8", "ma"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("translate: error: --max-len 8: the model learned 8 positions")
    # validation searches each source to its own cap, the table's rows at most
    v = tr.tgt_vocab
    module = SimpleNamespace(net=tr.net, source_check=None, tgt_vocab=v, codec=tr.codec,
                             hparams=SimpleNamespace(val_beam_size=1))  # fmt: skip
    src = torch.tensor([v.encode(["ma", "mo", "pe", "gake", "soru", "ma"], eos=True)])  # 7 positions
    result = TranslationModule._decode(module, {"src": src, "src_lens": torch.tensor([7])})
    assert int(result.lengths[0]) <= 8


def test_learned_positions_refuse_a_longer_given_translation_in_one_line(learned, tmp_path, capsys):
    """translate --given of a text longer than the table ended in a traceback ("sequence of 13 positions is longer than
    the learned max_len 12"); attention-serve's worker answered 500. Now one line names the table, per input for a
    --given-file line, and the server refuses the request (413; a max_len past it 422) before a worker sees it."""
    from attention_serve.limits import ClientError, Limits, check_work
    from attention_serve.models import load_text
    from text_attn.translation.translate_cli import translate_main
    from text_attn.translation.translator import Translator

    tr, fits, long = Translator.load(learned), "ma " * 7, "ma " * 8  # 7 tokens and the end: the table's 8 rows
    assert len(tr.read(["mo pe"], fits)[0].probs) == 7
    said = "8 tokens as the model writes them: with its end more than the 8 positions the model learned"
    with pytest.raises(ValueError, match=f"^'ma ma .*': {said}"):
        tr.read(["mo pe"], long)
    with pytest.raises(SystemExit) as exc:
        translate_main(["--model", str(learned), "--given", long, "mo pe"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "8 positions the model learned" in err
    given = tmp_path / "given.txt"
    given.write_text(f"{fits}\n{long}\n")
    assert translate_main(["--model", str(learned), "--given-file", str(given), "mo pe", "pe mo"]) == 1
    got = capsys.readouterr()
    assert got.out.startswith("1\t") and "\n2\t" not in got.out  # the first input read, the second failed
    assert f"translate: error: input 2: line 2 of --given-file {given}: 8 tokens as the model writes them" in got.err
    assert "Traceback" not in got.err

    served, limits = load_text(learned), Limits()
    positions = served.extra["positions"]
    assert positions == 8
    check_work([2], {"given": fits}, limits, 512, 7, positions)  # fits: passes
    # the server's refusals in the Translator's words, word for word: one helper says both
    for options, sources, read, status, said in (
        ({"given": long}, [2], 8, 413, f"given: {tr.length_error(given=8)}"),
        ({}, [2, 8], None, 413, f"sentence 2: {tr.length_error(8)}"),
        ({}, [8], None, 413, f"the sentence: {tr.length_error(8)}"),
        ({"max_len": 8}, [2], None, 422, tr.length_error(max_len=8)),
    ):
        with pytest.raises(ClientError) as refused:
            check_work(sources, options, limits, 512, read, positions)
        assert refused.value.status == status and refused.value.message == said
    learned = "with its end more than the 8 positions the model learned (positions: learned)"
    assert tr.length_error(given=8) == f"8 tokens as the model writes them: {learned}, room for 7"
    assert tr.length_error(8) == f"8 tokens: {learned}; split it"
