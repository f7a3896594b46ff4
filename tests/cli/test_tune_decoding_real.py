"""The decoding tuners on real validation data (../shared/data, never in the repository): each chooses a beam and a
length penalty on val, prints its table, records the choice in a copy of the bundled model, and the command-line
tools then use it. Slow; skipped with the reason when the data is not there (CI has it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"

pytestmark = pytest.mark.slow


def _run(script: str, *args: str) -> str:
    cmd = [sys.executable, str(ROOT / "benchmarks" / script), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not (DATA / "flickr8k" / "Flickr8k_text").is_dir(), reason="real Flickr8k not found")
def test_caption_tuner_records_a_val_choice_that_caption_uses(tmp_path, capsys):
    from captioning.commands.caption import caption_main

    model = tmp_path / "model.pt"
    shutil.copy(ROOT / "captioning" / "assets" / "flickr8k_soft.pt", model)
    report = tmp_path / "tune.json"
    grid = ["--beams", "1", "2", "--length-penalties", "0", "2", "--no-repeat-ngrams", "0", "3"]
    out = _run("tune_caption_decoding.py", "--data-root", str(DATA / "flickr8k"), "--model", str(model), "--limit",
               "40", *grid, "--json", str(report), "--write", "--unmatched", "5")  # fmt: skip
    assert "| beam | length penalty | no-repeat n-gram | Bleu-1 |" in out
    after = out.split("| share of all words |\n|---|---|---|---|---|\n")[1].splitlines()
    words = after[: next((i for i, line in enumerate(after) if not line.startswith("|")), len(after))]
    assert len(words) == 5  # --unmatched 5: the five words the references most often lack
    assert out.count("chosen") == 2  # the rule line and one row
    rows = json.loads(report.read_text())["rows"]
    settings = [(1, 0.0), (2, 0.0), (2, 2.0)]
    assert [(r["beam"], r["length_penalty"], r["no_repeat_ngram"]) for r in rows] == [
        (*s, n) for n in (0, 3) for s in settings
    ]
    assert all(r["repeats"] == 0 for r in rows[3:])  # trigram blocking leaves no repeated trigram
    columns = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr")  # the goal's table, summed
    best = max(rows, key=lambda r: sum(r[m] for m in columns))
    decoding = torch.load(model, weights_only=True)["info"]["decoding"]
    assert (decoding["beam_size"], decoding["length_penalty"], decoding["no_repeat_ngram"]) == (
        best["beam"],
        best["length_penalty"],
        best["no_repeat_ngram"],
    )
    # a longer caption under a length penalty: the tuner's rows say so
    assert rows[2]["words"] >= rows[1]["words"]
    assert caption_main(["--model-info", "--model", str(model)]) == 0
    shown = f"beam_size {best['beam']}, length_penalty {best['length_penalty']}, no_repeat_ngram"
    assert shown in capsys.readouterr().out


@pytest.mark.skipif(not (DATA / "multi30k" / "val.de.gz").is_file(), reason="real Multi30k not found")
def test_translation_tuner_records_a_val_choice_that_translate_uses(tmp_path):
    from text_attn.translation.translate_cli import translate_main

    model = tmp_path / "model.pt"
    shutil.copy(ROOT / "text_attn" / "translation" / "assets" / "multi30k_de_en_bahdanau.pt", model)
    report = tmp_path / "tune.json"
    out = _run("tune_translation_decoding.py", "--data-root", str(DATA / "multi30k"), "--model", str(model),
               "--limit", "100", "--beams", "1", "3", "--length-penalties", "0", "1", "--json", str(report),
               "--write")  # fmt: skip
    assert "| beam | length penalty | no-repeat n-gram | BLEU (tok.) |" in out
    rows = json.loads(report.read_text())["rows"]
    best = max(rows, key=lambda r: r["bleu_tok"])
    assert best["bleu_tok"] > 20  # the bundled model on 100 real val sentences
    decoding = torch.load(model, weights_only=True)["info"]["decoding"]
    assert (decoding["beam_size"], decoding["length_penalty"]) == (best["beam"], best["length_penalty"])
    sentence = "Ein Mann fährt Fahrrad."
    outputs = {}
    for name, flags in (("default", []), ("explicit", ["--beam-size", str(best["beam"]), "--length-penalty",
                                                        str(best["length_penalty"])])):  # fmt: skip
        path = tmp_path / f"{name}.txt"
        assert translate_main(["--model", str(model), "--output", str(path), *flags, sentence]) == 0
        outputs[name] = path.read_text()
    assert outputs["default"] == outputs["explicit"] and outputs["default"].strip()
