"""``translate --ensemble MODEL``: --model and MODEL translate as one (the mean of their next-token probabilities),
with --model's attention, notes and decoding; its refusals, its --model-info, and its run record (a --resume without
the same ensemble is refused). On small subword models built here (random weights: the tests check the plumbing; the
ensemble's arithmetic: tests/text/test_translation_ensemble.py)."""

from __future__ import annotations

import json

import pytest
from helpers.multi30k import DE
from helpers.tiny_translator import tiny_word_model_file, two_subword_model_files
from helpers.translate_run import run_translate

from text_attn.translation.ensemble import EnsembleTranslator
from text_attn.translation.translator import Translator


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two subword models of one vocabulary (the second's weights drawn again) and a word model."""
    folder = tmp_path_factory.mktemp("m")
    first, second = two_subword_model_files(folder)
    return str(first), str(second), str(tiny_word_model_file(folder / "w.pt"))


def test_the_cli_translates_as_the_ensemble_does_in_python(models, capsys, monkeypatch):
    first, second, _ = models
    code, out, err = run_translate(["--model", first, "--ensemble", second, "--beam-size", "3", *DE], capsys,
                                   monkeypatch)  # fmt: skip
    assert code == 0, err
    both = EnsembleTranslator([Translator.load(first), Translator.load(second)])
    assert out.splitlines() == [t.text for t in both.translate(DE, beam_size=3)]
    alone = run_translate(["--model", first, "--beam-size", "3", *DE], capsys, monkeypatch)[1]
    twin = run_translate(["--model", first, "--ensemble", first, "--beam-size", "3", *DE], capsys, monkeypatch)[1]
    assert twin == alone  # the mean of one model's probabilities with themselves: the model alone
    assert out != alone  # here the second model's sharper distributions decide most words


def test_the_records_carry_the_first_models_attention(models, capsys, monkeypatch, tmp_path):
    first, second, _ = models
    out = tmp_path / "r.jsonl"
    code, _, err = run_translate(["--model", first, "--ensemble", second, "--unsure", "--jsonl", str(out), *DE],
                                 capsys, monkeypatch)  # fmt: skip
    assert code == 0, err
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len(DE)
    for r in records:  # a row per output token over --model's source tokens, each a distribution
        assert len(r["attention"]) == len(r["tokens"]) and all(
            len(a) == len(r["source_tokens"]) for a in r["attention"]
        )
        assert all(abs(sum(a) - 1) < 1e-3 for a in r["attention"])
        assert "word_probs" in r  # the ensemble's probabilities (--unsure)


def test_a_resume_needs_the_same_ensemble(models, capsys, monkeypatch, tmp_path):
    first, second, _ = models
    out = tmp_path / "o.txt"
    args = ["--model", first, "--output", str(out), *DE]
    assert run_translate([*args, "--ensemble", second], capsys, monkeypatch)[0] == 0
    record = json.loads((tmp_path / "o.txt.run.json").read_text())
    (recorded,) = record["options"]["--ensemble"]
    assert recorded.startswith(f"{second} (SHA-256 ")
    written = out.read_text()
    out.write_text("".join(written.splitlines(keepends=True)[:1]))
    code, _, err = run_translate([*args, "--resume"], capsys, monkeypatch)
    assert code == 2 and err.startswith("translate: error: --resume: ") and "--ensemble" in err
    code, _, err = run_translate([*args, "--ensemble", second, "--resume"], capsys, monkeypatch)
    assert code == 0 and out.read_text() == written, err


def test_what_an_ensemble_cannot_do_is_one_line(models, capsys, monkeypatch, tmp_path):
    first, second, word = models
    none = tmp_path / "none.pt"
    cases = [
        (["--ensemble", str(none), "Ein Hund."], f"--ensemble {none}: model file not found"),
        (["--ensemble", str(tmp_path), "Ein Hund."], f"--ensemble {tmp_path}: a folder, not a model file"),
        (["--ensemble", second, "--evidence", "--jsonl", "-", "Ein"], "--evidence measures what drives one model"),
        (["--ensemble", second, "--alignments", "a.txt", "--align-by", "evidence", "Ein Hund."],
         "--align-by evidence measures what drives one model"),
        (["--ensemble", word, "Ein Hund."], f"--ensemble {word} reads text as word tokens"),
    ]  # fmt: skip
    for extra, said in cases:
        code, out, err = run_translate(["--model", first, *extra], capsys, monkeypatch)
        assert code == 2 and not out and err.startswith(f"translate: error: {said}"), (extra, err)
        assert len(err.splitlines()) == 1


def test_model_info_describes_each_model(models, capsys, monkeypatch):
    first, second, _ = models
    code, out, err = run_translate(["--model", first, "--ensemble", second, "--model-info"], capsys, monkeypatch)
    assert code == 0, err
    assert out.splitlines()[0] == f"model:          {first}"
    assert f"\n--ensemble {second}: translates with the model above" in out
    assert f"\nmodel:          {second}\n" in out
