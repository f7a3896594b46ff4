"""benchmarks/rehearse_flickr8k.py end to end, small: corpus -> fit -> test (beam 3) -> export -> caption."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "rehearse_flickr8k.py"


@pytest.mark.slow
def test_rehearsal_runs_every_stage(tmp_path):
    out, summary_file = tmp_path / "rehearsal", tmp_path / "summary.json"
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), "--images", "96", "--max-time", "00:00:00:45"]
    cmd += ["--samples", "4", "--json", str(summary_file)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    # The corpus is Flickr8k-shaped: Karpathy JSON (no "filepath"), 5 sentences per image, JPEGs in Flicker8k_Dataset.
    corpus = json.loads((out / "dataset_flickr8k.json").read_text())
    assert corpus["dataset"] == "flickr8k"
    images = corpus["images"]
    assert [sum(im["split"] == s for im in images) for s in ("train", "val", "test")] == [72, 12, 12]
    for im in images:
        assert "filepath" not in im and im["filename"].endswith(".jpg")
        assert len(im["sentences"]) == 5 and all(s["tokens"] and s["raw"] for s in im["sentences"])
        assert (out / "Flicker8k_Dataset" / im["filename"]).is_file()

    # Every stage ran, each printed as the command a user types.
    for command in ("caption-train fit --config", "caption-train test --config", "caption-export ", "caption "):
        assert command in done.stdout
    assert "| **total** |" in done.stdout

    summary = json.loads(summary_file.read_text())
    stages = summary["stages"]
    fit, test, export, caption = stages["fit"], stages["test"], stages["export"], stages["caption"]
    assert fit["steps"] > 0 and fit["validations"] >= 1 and Path(fit["best_checkpoint"]).name.startswith("best-")
    assert test["beam_size"] == 3
    bleu4 = test["metrics"]["Bleu_4"]
    assert isinstance(bleu4, float) and 0.0 <= bleu4 <= 1.0
    assert "CIDEr" in test["metrics"]

    from captioning.model.captioner import Captioner

    model = Captioner.load(export["file"]).model
    assert model.encoder.backbone == "efficientnet_lite0" and model.encoder.grid == 7
    assert (out / "run" / "model.pt").is_file()  # fit's own model file, too

    assert caption["images"] == caption["captioned"] == 4
    assert len(caption["examples"]) == 4 and all(ex["caption"] and ex["references"] for ex in caption["examples"])
    assert sorted(p.name for p in (out / "sample_images").iterdir()) == sorted(
        Path(ex["image"]).name for ex in caption["examples"]
    )


@pytest.mark.slow
def test_rehearsal_streams_feature_chunks(tmp_path):
    """--streaming: the corpus is written as LitData chunks of the frozen encoder's features, and fit and test
    stream them; the model trains and captions as on the folder path."""
    out, summary_file = tmp_path / "rehearsal", tmp_path / "summary.json"
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), "--images", "96", "--max-time", "00:00:00:45"]
    cmd += ["--samples", "4", "--json", str(summary_file), "--streaming", "--num-workers", "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "caption-train optimize --config" in done.stdout and "--data.root" in done.stdout
    stages = json.loads(summary_file.read_text())["stages"]
    chunks = Path(stages["optimize"]["chunks"])
    manifest = json.loads((chunks / "streaming.json").read_text())
    assert manifest["splits"] == {"train": {"items": 72 * 5}, "val": {"items": 12}, "test": {"items": 12}}
    assert manifest["options"]["features"] is True
    assert stages["fit"]["steps"] > 0 and stages["fit"]["validations"] >= 1
    assert stages["fit"]["features"] == "features streamed from the chunks"
    assert 0.0 <= stages["test"]["metrics"]["Bleu_4"] <= 1.0
    assert stages["caption"]["captioned"] == 4
