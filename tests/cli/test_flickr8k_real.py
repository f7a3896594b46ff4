"""The real Flickr8k (../shared/data/flickr8k, never in the repository) through the shipped soft-attention config:
fit on 200 training photos, then test on 100 test photos. Slow (~3 min: the photos are encoded by Lite2); skipped
with its reason when the data is not there (CI has it)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from captioning.commands.train import caption_train_cli
from captioning.model.captioner import Captioner

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "flickr8k"
CONFIG = ROOT / "configs" / "caption" / "flickr8k_lite2_soft.yaml"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "Flickr8k_text").is_dir(), reason=f"real Flickr8k not found at {DATA}"),
]


def test_shipped_config_fits_and_tests_on_200_real_photos(cli_run_in_tmp, capsys):
    tmp = cli_run_in_tmp
    common = ["--config", str(CONFIG), "--data.root", str(DATA), "--data.feature_cache_dir", str(tmp / "cache")]
    common += ["--data.train_size", "200", "--data.val_size", "50", "--data.test_size", "100"]
    common += ["--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(tmp)]
    fit = caption_train_cli(["fit", *common, "--trainer.max_epochs", "8", "--model.export_path", str(tmp / "model.pt")])
    metrics = fit.trainer.callback_metrics
    assert fit.trainer.current_epoch == 8
    out = capsys.readouterr()
    assert "skipped 505 of 40960 lines" in out.err  # the real token file's junk, counted in one line
    captioner = Captioner.load(tmp / "model.pt")
    # the training loss came down: it starts near ln |vocabulary| (uniform over ~500 words: ~6.2)
    assert float(metrics["train_ce"]) < 0.75 * math.log(len(captioner.vocab)), metrics
    assert captioner.domain == "Flickr8k" and "<unk>" in captioner.vocab and len(captioner.vocab) > 300
    test = caption_train_cli(["test", *common, "--ckpt_path", str(_best_checkpoint(tmp)), "--model.val_beam_size", "3"])
    scores = test.trainer.callback_metrics
    # 200 photos x 5 captions for a few minutes: far from the full model, far above chance (BLEU-4 ~0 for random words)
    assert float(scores["test_Bleu_1"]) > 0.4 and float(scores["test_Bleu_4"]) > 0.05, scores
    assert float(scores["test_CIDEr"]) > 0.1, scores


def _best_checkpoint(run: Path) -> Path:
    """The checkpoint the shipped config's ModelCheckpoint kept as best (a new `test` process cannot say "best")."""
    (best,) = run.rglob("best-*.ckpt")
    return best
