"""``benchmarks/ensemble_choice.py`` on a Flickr8k-shaped folder written by the test and tiny random captioners of one
encoder: every model alone and every pair scored on val with coco-caption, the highest six-column sum chosen and
written as one ensemble model file; a test split, one model, or models that cannot be one ensemble are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from captioning.model.captioner import Captioner
from tests.helpers.flickr8k import write_original
from tests.helpers.tiny_captioner import separate_run
from text_attn.core.vocab import Vocabulary

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("choice")
    data = write_original(tmp / "flickr8k", copies=True)
    words = "a photo of the up close rocket coffee chelsea astronaut".split()
    vocab = Vocabulary.build([words])
    models = [tmp / f"m{s}.pt" for s in (1, 2, 3)]
    for seed, path in zip((1, 2, 3), models, strict=True):
        separate_run(vocab, seed, path)
    return data, models, vocab, tmp


@pytest.mark.slow
def test_every_model_and_pair_is_scored_on_val_and_the_best_written(setup, tmp_path, capsys):
    from ensemble_choice import main

    data, models, _, _ = setup
    report, out = tmp_path / "choice.json", tmp_path / "chosen.pt"
    args = ["--data-root", str(data), "--models", *map(str, models), "--beam-size", "2", "--json", str(report)]
    assert main([*args, "--write", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = json.loads(report.read_text())["rows"]
    assert [len(r["models"]) for r in rows] == [1, 1, 1, 2, 2, 2]  # each alone, then each pair (--max-members 2)
    assert [r["models"] for r in rows[3:]] == [[str(a), str(b)] for a, b in ((models[0], models[1]),
                                               (models[0], models[2]), (models[1], models[2]))]  # fmt: skip
    for r in rows:
        parts = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr")
        assert r["chosen_by"] == pytest.approx(sum(r[m] for m in parts))
    best = max(rows, key=lambda r: r["chosen_by"])
    assert json.loads(report.read_text())["chosen"] == best["models"] and printed.count("**") == 2
    written = Captioner.load(out)
    assert written.ensemble == (len(best["models"]) > 1)


@pytest.mark.long
def test_what_cannot_be_chosen_is_refused(setup, tmp_path, capsys):
    from ensemble_choice import main

    data, models, vocab, tmp = setup
    base = ["--data-root", str(data)]
    refused = [([*base, "--models", str(models[0])], "at least 2 model files")]
    refused.append(([*base, "--models", *map(str, models), "--split", "test"], "never on a test split"))
    # an output that cannot be written: refused before the minutes of scoring, not after them
    refused.append(([*base, "--models", *map(str, models), "--write", str(tmp_path / "no" / "both.pt")], "no folder"))
    refused.append(([*base, "--models", *map(str, models), "--json", str(tmp_path)], "is a folder; give a file name"))
    for argv, says in refused:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and says in capsys.readouterr().err
    other = tmp_path / "wide.pt"
    separate_run(vocab, 4, other, hidden_dim=24)  # another decoder size: not one ensemble
    assert main([*base, "--models", str(models[0]), str(other)]) == 1
    err = capsys.readouterr().err  # the data reader's notes, then one line: before any model was scored
    assert (
        err.splitlines()[-1].startswith("ensemble_choice: error: ") and f"--models {other}: not the same model" in err
    )
    assert "Traceback" not in err and "PTBTokenizer" not in err
