"""``--trainer.overfit_batches N`` trains the same N batches, in the same order, every epoch, in both families (the
batch sampler shuffled by itself, out of reach of Lightning's "turning off shuffling": a new N batches an epoch), and
a run resumed at such an epoch's end goes on with them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.resumable import resumable_config

from captioning.commands.train import caption_train_cli
from text_attn.translation.train_cli import text_train_cli

FIX = Path(__file__).parent.parent / "fixtures"
CONFIGS = {"text": FIX / "text/tiny_reorder.yaml", "caption": FIX / "captions/tiny_shapes.yaml"}


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    """Each test runs a training CLI in its own folder (tests/conftest.py)."""


def run(family: str, args: list[str]):
    return (text_train_cli if family == "text" else caption_train_cli)(args)


def trained(cli) -> list[list[int]]:
    """The items (text pairs, caption (image, caption) pairs) of each batch trained, in order."""
    (probe,) = [c for c in cli.trainer.callbacks if type(c).__name__ == "Probe"]
    return probe.seen


def probed(tmp_path: Path) -> list[str]:
    return ["--trainer.callbacks+=helpers.ddp_probe.Probe", f"--trainer.callbacks.out={tmp_path / 'probe'}"]


# caption with whole photos a batch (data.photo_batches): its own batch sampler over photos
@pytest.mark.parametrize("family, more", [("text", []), ("caption", []), ("caption", ["--data.photo_batches", "true"])])
def test_overfit_batches_trains_the_same_batches_in_the_same_order_every_epoch(family, more, tmp_path):
    cli = run(family, ["fit", "--config", str(CONFIGS[family]), "--trainer.overfit_batches", "2",
                       "--trainer.max_epochs", "3", "--trainer.max_steps", "-1", *more, *probed(tmp_path)])  # fmt: skip
    seen = trained(cli)
    epochs = [seen[e * 2 : e * 2 + 2] for e in range(3)]
    assert len(seen) == 6 and epochs[1] == epochs[0] and epochs[2] == epochs[0], epochs
    assert seen[0] != seen[1]  # two batches, not one twice


@pytest.mark.long
def test_a_resume_at_an_overfit_epochs_end_goes_on_with_the_same_batches_and_weights(tmp_path):
    # last.ckpt at step 2, the end of the first overfit epoch: the resumed run read it as "2 of the loader's 6 batches
    # done" and trained batches 3 and 4 of the whole set, not the overfit two (its weights off)
    cfg = str(resumable_config(tmp_path, "text", every=2))
    common = ["fit", "--config", cfg, "--trainer.overfit_batches", "2", "--trainer.max_epochs", "-1", *probed(tmp_path)]
    whole = run("text", [*common, "--trainer.max_steps", "4", "--trainer.default_root_dir", "a"])
    run("text", [*common, "--trainer.max_steps", "2", "--trainer.default_root_dir", "b"])
    resumed = run("text", [*common, "--trainer.max_steps", "4", "--trainer.default_root_dir", "b", "--ckpt_path",
                           "last"])  # fmt: skip
    assert trained(resumed) == trained(whole)[2:] == trained(whole)[:2]
    a, b = (torch.load(sorted(Path(r).rglob("last.ckpt"))[-1], weights_only=True) for r in ("a", "b"))
    assert a["global_step"] == b["global_step"] == 4
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, msg=k)
