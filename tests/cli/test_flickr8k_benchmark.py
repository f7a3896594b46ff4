"""``benchmarks/flickr8k.py`` end to end on a 4-photo copy of Flickr8k's layout written by the test: all six stages
(soft, its SCST; hard, its SCST; the encoder's last stage fine-tuned from soft, its SCST) as the console scripts a
user types, each exported and its test photo captioned and scored, the table and JSON written, each second stage
started from its own first stage's model file. The fits are tiny (2 steps, 16-wide decoder), so the scores mean
nothing; what is checked is the plumbing. Slow: a dozen subprocesses. The refusal of a second stage without its first
is fast."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.flickr8k import write_kaggle, write_original

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "flickr8k.py"
TINY = ["--data.min_freq", "1", "--data.batch_size", "2", "--model.decoder.embed_dim", "16", "--trainer.max_steps", "2"]
TINY += ["--model.decoder.hidden_dim", "16", "--model.decoder.attn_dim", "16"]  # every stage reads these


@pytest.mark.slow
def test_every_stage_trains_exports_and_scores_from_its_own_first_stage(tmp_path):
    data, out, report = write_original(tmp_path / "flickr8k", copies=True), tmp_path / "runs", tmp_path / "f8k.json"
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(data), "--out", str(out), "--quick", "--beams", "1"]
    cmd += ["--json", str(report), "--", *TINY]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=2400, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    rows = [ln.split(" | ")[0] for ln in done.stdout.splitlines() if ln.startswith("| ours, ")]
    stages = ["soft", "scst", "hard", "hard_scst", "finetune", "finetune_scst"]
    assert rows == [f"| ours, {stage}" for stage in stages]
    numbers = json.loads(report.read_text())
    assert list(numbers["results"]) == stages
    assert all(0 <= numbers["results"][s]["1"]["Bleu_4"] <= 100 for s in numbers["results"])
    assert all(numbers["minutes"][s] > 0 for s in numbers["results"])
    # each second stage starts from its own first stage and keeps its network
    hard_scst = next((out / "hard_scst").rglob("config.yaml")).read_text()
    assert f"init_from: {out / 'hard' / 'model.pt'}" in hard_scst and "attention: hard" in hard_scst
    assert "scst: true" in hard_scst
    assert f"init_from: {out / 'soft' / 'model.pt'}" in next((out / "scst").rglob("config.yaml")).read_text()
    finetune = next((out / "finetune").rglob("config.yaml")).read_text()
    assert f"init_from: {out / 'soft' / 'model.pt'}" in finetune and "fine_tune: last" in finetune
    finetune_scst = next((out / "finetune_scst").rglob("config.yaml")).read_text()
    assert f"init_from: {out / 'finetune' / 'model.pt'}" in finetune_scst and "scst: true" in finetune_scst
    # the model file a user gets names both stages' minutes
    from text_attn.core.modelfile import load_model_file

    info = load_model_file(out / "hard_scst" / "final.pt", "caption-model")["info"]
    assert info["training"].startswith("hard_scst (hard then hard_scst)")


def test_a_second_stage_without_its_first_is_refused(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--data-root", str(tmp_path), "--out", str(tmp_path), "--stages", "hard_scst"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "hard_scst starts from hard's model file, which is neither there nor in --stages" in done.stderr


def test_recorded_reads_the_decoding_the_model_file_records_or_refuses(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import flickr8k
    from _runs import StageError

    from captioning.model.captioner import Captioner
    from tests.helpers.tiny_captioner import tiny_model_file

    model = tiny_model_file(tmp_path / "m.pt")
    with pytest.raises(StageError, match="records no decoding chosen on val; use --tune"):
        flickr8k.recorded(model)
    captioner = Captioner.load(model)
    captioner.info["decoding"] = {"beam_size": 5, "length_penalty": 1.5, "no_repeat_ngram": 3, "chosen_by": "val"}
    captioner.save(model)
    assert flickr8k.recorded(model) == {"beam": 5, "length_penalty": 1.5, "no_repeat_ngram": 3}
    # kept by caption-export --average / --ensemble from another file: not chosen for this model, refused
    captioner.info["decoding"]["chosen_for"] = "a.pt, before caption-export --average"
    captioner.save(model)
    with pytest.raises(StageError, match="chosen for a.pt, before caption-export --average, not for this model"):
        flickr8k.recorded(model)


def test_a_file_with_a_data_note_is_not_said_to_have_learned_five_captions_a_photo():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import flickr8k

    plain = flickr8k.model_info("scst", {"scst": 9.0}, None)["training_data"]
    noted = flickr8k.model_info("scst", {"scst": 9.0}, None, noted=True)["training_data"]
    assert "6,000 train photos x 5 captions" in plain
    assert "6,000 train photos, their captions as the data note says" in noted and "x 5" not in noted


def test_a_copy_without_the_standard_split_files_is_refused_before_any_training(tmp_path):
    """A Kaggle copy's random test photos are mostly standard train photos: the bundled model (--recorded) scored
    CIDEr-D 179 on them, printed beside published rows measured on the standard test photos."""
    import argparse

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import flickr8k

    from captioning.training.readers import CaptionDataError

    root = write_kaggle(tmp_path / "kaggle")
    with pytest.raises(CaptionDataError, match=r"kaggle: no standard split files \(Flickr_8k.trainImages.txt, "):
        flickr8k.test_split(argparse.Namespace(data_root=root, quick=False))
    flickr8k.test_split(argparse.Namespace(data_root=write_original(tmp_path / "f8k"), quick=False))  # standard
