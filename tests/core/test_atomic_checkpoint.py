"""lightning_parts.AtomicCheckpointIO writes a checkpoint straight into its temporary file beside it: Lightning's own
writer made the whole checkpoint in $TMPDIR first, and a small /tmp failed the save "no space left" against a run
folder that had room (an audit: the run lost, its message naming the roomy folder)."""

from __future__ import annotations

import tempfile

import torch

from text_attn.core.lightning_parts import AtomicCheckpointIO


def test_a_checkpoint_needs_no_room_in_the_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-tmp"))  # $TMPDIR gone (or full)
    path = tmp_path / "run" / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.arange(3.0)}, "global_step": 7}, path)
    saved = torch.load(path, weights_only=True)
    assert saved["global_step"] == 7 and torch.equal(saved["state_dict"]["w"], torch.arange(3.0))
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no temporary file left
