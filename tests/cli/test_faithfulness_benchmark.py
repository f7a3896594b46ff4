"""benchmarks/faithfulness.py (issue 73) on shapes scenes: the soft bundled model and a hard-attention model file,
the latter measured in both of its decodings; the tables, the plausibility table and the JSON agree with each other,
and the hard model's argmax rows are what one region a word implies. Bad flags are one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.scripts import run_main

from captioning.commands.caption import SHAPES_MODEL

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "faithfulness.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def hard_model(tmp_path_factory) -> Path:
    """The bundled shapes model's weights as a hard-attention model (the same scorer under its hard-attention name)."""
    data = torch.load(SHAPES_MODEL, weights_only=True)
    data["decoder"]["attention"] = "hard"
    old, new = "decoder.attention.", "decoder.attention.scorer."
    data["state_dict"] = {new + k[len(old) :] if k.startswith(old) else k: v for k, v in data["state_dict"].items()}
    path = tmp_path_factory.mktemp("hard") / "hard.pt"
    torch.save(data, path)
    return path


@pytest.mark.slow  # the benchmark on two scenes, three models (~7 s); its parts are tested in tests/core and captioning
def test_shapes_soft_and_hard_rows(tmp_path, hard_model):
    out = tmp_path / "f.json"
    run = _run("--families", "shapes", "hard", "--shapes-hard", str(hard_model), "--scenes", "2", "--draws", "2",
               "--threads", "1", "--json", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(out.read_text())
    names = [f["name"] for f in report["families"]]
    assert names == ["shapes captioner (soft)", "shapes captioner (hard, one region a word)",
                     "shapes captioner (hard, the expected context)"]  # fmt: skip
    for family in report["families"]:
        assert f"### {family['name']}: feature space, 2 test scenes" in run.stdout
        methods = {r["method"] for r in family["summary"]["rankings"]}
        assert {"attention", "random", "leave_one_out"} <= methods
        loo = [r for r in family["summary"]["rankings"] if r["method"] == "leave_one_out" and r["kind"] == "all"]
        rand = [r for r in family["summary"]["rankings"] if r["method"] == "random" and r["kind"] == "all"]
        # the reference ranking removes what lowers the word most first: never above random's area on average
        assert loo[0]["deletion_area"] <= rand[0]["deletion_area"] + 1e-9
    soft, argmax, expect = report["families"]
    # the soft model and the hard model's expected context are the same network here: the same words, same numbers
    assert [w["word"] for w in soft["words"]] == [w["word"] for w in expect["words"]]
    assert [w["p_full"] for w in soft["words"]] == pytest.approx([w["p_full"] for w in expect["words"]], abs=1e-5)
    plausible = report["shapes_plausibility"]
    assert list(plausible) == ["soft", "hard, one region a word", "hard, the expected context"]
    assert plausible["soft"] == plausible["hard, the expected context"]
    assert "### shapes: plausibility" in run.stdout and run.stdout.count("| hard, ") == 2
    # the argmax rows decode with one region a word: other captions, or the same words at other probabilities
    pairs = [(w["word"], round(w["p_full"], 4)) for w in argmax["words"]]
    assert pairs != [(w["word"], round(w["p_full"], 4)) for w in expect["words"]]


@pytest.mark.parametrize("flag", ["--shapes-hard", "--caption-model"])
def test_a_missing_model_is_one_line(tmp_path, capsys, flag):
    code, _, err = run_main(SCRIPT, capsys, "--families", "hard", flag, tmp_path / "nope.pt")
    assert code == 2 and flag in err and "no such model file" in err
    assert "Traceback" not in err


def test_bad_counts_families_and_a_soft_model_for_the_hard_rows_are_refused_before_any_table(capsys):
    for args, says in (
        (["--photos", "0"], "--photos must be at least 1, got 0"),  # measured nothing and exited 0
        (["--families", "text", "bogus"], "invalid choice: 'bogus'"),  # was dropped unsaid
        (["--families", "hard", "--shapes-hard", SHAPES_MODEL], "a soft-attention model; the hard rows need"),
    ):
        code, out, err = run_main(SCRIPT, capsys, *args)
        assert code == 2 and says in err and out == "", err
        assert "Traceback" not in err


@pytest.mark.long
def test_the_flickr8k_hard_rows_run_alone(tmp_path, capsys, monkeypatch):
    """--families hard --flickr8k-hard measured nothing ("nothing to measure") unless flickr8k or pixel was listed
    too, which measured the soft captioner as well."""
    from helpers.flickr8k import write_original
    from helpers.tiny_captioner import separate_run

    from text_attn.core.vocab import Vocabulary

    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    data = write_original(tmp_path / "f8k", copies=True)
    separate_run(Vocabulary.build(["a photo of the rocket coffee".split()]), 1, tmp_path / "soft.pt")
    model = torch.load(tmp_path / "soft.pt", weights_only=True)
    model["decoder"]["attention"] = "hard"
    old, new = "decoder.attention.", "decoder.attention.scorer."
    model["state_dict"] = {new + k[len(old) :] if k.startswith(old) else k: v for k, v in model["state_dict"].items()}
    torch.save(model, tmp_path / "hard.pt")
    out = tmp_path / "f.json"
    args = ["--flickr8k-root", data, "--families", "hard", "--flickr8k-hard", tmp_path / "hard.pt", "--photos", "1",
            "--draws", "1", "--threads", "1", "--json", out]  # fmt: skip
    code, _, err = run_main(SCRIPT, capsys, *args)
    assert code == 0, err[-2000:]
    names = [f["name"] for f in json.loads(out.read_text())["families"]]
    assert names == ["Flickr8k captioner (hard, one region a word)", "Flickr8k captioner (hard, the expected context)"]


def test_a_missing_text_model_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # the script's folder, as running it puts it first
    (tmp_path / "test_2016_flickr.de").write_text("Ein Mann fährt Fahrrad.\n")
    (tmp_path / "test_2016_flickr.en").write_text("A man rides a bike.\n")
    args = ["--families", "text", "--multi30k-root", tmp_path, "--text-models", tmp_path / "nope.pt"]
    code, _, err = run_main(SCRIPT, capsys, *args)
    assert code == 2 and "--text-models" in err and "nope.pt" in err
    assert "Traceback" not in err


def test_a_text_model_without_attention_is_refused_before_any_table(tmp_path, capsys, monkeypatch):
    """A model of attention 'none' beside a bundled one: the bundled one's table was measured, then a traceback at
    the second's, no table printed and no --json written. Refused in one line before any measuring."""
    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.translator import Translator

    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    (tmp_path / "test_2016_flickr.de").write_text("Ein Mann fährt Fahrrad.\n")
    (tmp_path / "test_2016_flickr.en").write_text("A man rides a bike.\n")
    vocab = Vocabulary.build([["ein", "mann", "a", "man"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8,
                        dec_hidden=8, attn_dim=8, attention="none")  # fmt: skip
    plain = Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(tmp_path / "plain.pt")
    args = ["--families", "text", "--multi30k-root", tmp_path, "--text-models", "bahdanau", plain,
            "--json", tmp_path / "f.json"]  # fmt: skip
    code, _, err = run_main(SCRIPT, capsys, *args)
    assert code == 2 and f"--text-models {plain}: this model has no attention to explain" in err, err[-2000:]
    assert "Traceback" not in err and "words," not in err and not (tmp_path / "f.json").exists()


@pytest.mark.long
def test_caption_model_measures_the_file_given_and_each_decoder_of_an_ensemble(tmp_path, capsys, monkeypatch):
    """--caption-model: a one-decoder file is one table; an ensemble of it and another is three, and its decoder 1
    alone is that file's network: the same words at the same probabilities."""
    from helpers.flickr8k import write_original
    from helpers.tiny_captioner import separate_run

    from captioning.commands.export import export_main
    from text_attn.core.vocab import Vocabulary

    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    data = write_original(tmp_path / "f8k", copies=True)
    vocab = Vocabulary.build(["a photo of the up close rocket coffee chelsea astronaut".split()])
    separate_run(vocab, 1, tmp_path / "a.pt")
    separate_run(vocab, 2, tmp_path / "b.pt")
    assert export_main([str(tmp_path / "a.pt"), str(tmp_path / "both.pt"), "--ensemble", str(tmp_path / "b.pt")]) == 0
    reports = {}
    for name in ("a.pt", "both.pt"):
        out = tmp_path / f"{name}.json"
        args = ["--flickr8k-root", data, "--families", "flickr8k", "pixel", "--caption-model", tmp_path / name,
                "--photos", "2", "--pixel-photos", "1", "--draws", "1", "--threads", "1", "--json", out]  # fmt: skip
        code, _, err = run_main(SCRIPT, capsys, *args)
        assert code == 0, err[-2000:]
        families = json.loads(out.read_text())["families"]
        pixel = families.pop()  # the tiny model's 4 x 4 grid: 2 x 2 blocks of 2 x 2 regions, one photo
        assert pixel["removal"] == "pixel space (2 x 2 blocks greyed), 1 test photos" and pixel["words"], pixel
        first = families[0]["words"][: len(pixel["words"])]  # the same photo's caption, nothing removed yet
        assert [w["word"] for w in pixel["words"]] == [w["word"] for w in first]
        assert [w["p_full"] for w in pixel["words"]] == pytest.approx([w["p_full"] for w in first], abs=1e-5)
        reports[name] = {f["name"]: f["words"] for f in families}
        for words in [pixel["words"], *reports[name].values()]:  # each word names its photo; each caption ends <eos>
            ends_before = [sum(w["word"] == "<eos>" for w in words[:i]) for i in range(len(words))]
            assert [w["item"] for w in words] == ends_before and words[-1]["word"] == "<eos>"
    assert list(reports["a.pt"]) == ["Flickr8k captioner"]
    assert list(reports["both.pt"]) == ["Flickr8k captioner (ensemble of 2)", "Flickr8k captioner, decoder 1 alone",
                                        "Flickr8k captioner, decoder 2 alone"]  # fmt: skip
    alone, first = reports["a.pt"]["Flickr8k captioner"], reports["both.pt"]["Flickr8k captioner, decoder 1 alone"]
    assert alone and [w["word"] for w in alone] == [w["word"] for w in first]
    assert [w["p_full"] for w in alone] == pytest.approx([w["p_full"] for w in first], abs=1e-6)


def test_pixel_blocks_tile_the_grid_in_at_most_3_x_3(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from faithfulness import pixel_block

    assert {g: g // pixel_block(g) for g in (3, 4, 6, 8, 9, 12, 14)} == {3: 3, 4: 2, 6: 3, 8: 2, 9: 3, 12: 3, 14: 2}
    for grid in (1, 7, 11):  # one unit would measure nothing
        with pytest.raises(ValueError, match=f"no block tiles the {grid} x {grid} grid"):
            pixel_block(grid)


def test_a_word_no_single_removal_lowers_has_no_leave_one_out_peak(monkeypatch):
    """The plausibility table's "leave-one-out's in box": a word whose drops are all 0 or below (hard attention, one
    region a word) has no peak, not the first region, which would count as in the box of an object in that corner."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    from faithfulness import leave_one_out_peak

    assert leave_one_out_peak([0.0, 0.0, 0.0, 0.0]) is None
    assert leave_one_out_peak([0.0, -0.2, 0.0]) is None
    assert leave_one_out_peak([0.0, 0.1, 0.3, 0.3]) == 2  # the first of equal drops
