"""A torch file whose bytes changed where its size did not (a flipped bit, a copy or a disk gone wrong) is refused in
one line naming it: torch.load never checks the CRC-32 its zip stores beside each part, so a damaged checkpoint was
exported (exit 0) and a damaged model file captioned every photo "A a a a ..." (run_checkpoints.damaged)."""

from __future__ import annotations

import pytest
import torch

from text_attn.core.lightning_parts import AtomicCheckpointIO
from text_attn.core.modelfile import ModelFileError, load_model_file, read_export_source, save_model_file
from text_attn.core.run_checkpoints import CheckpointRefused, damaged


def _flipped(path, out, count: int = 64):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2  # inside the one large tensor's bytes
    for i in range(middle, middle + count):
        data[i] ^= 0xFF
    out.write_bytes(bytes(data))
    return out


@pytest.fixture
def files(tmp_path):
    weights = {"w": torch.arange(100_000, dtype=torch.float32)}  # 400 KB: most of the file
    model = save_model_file(tmp_path / "m.pt", "test", {"state_dict": weights})
    ckpt = tmp_path / "last.ckpt"
    torch.save({"state_dict": weights, "epoch": 0, "global_step": 5, "pytorch-lightning_version": "2.6.0",
                "optimizer_states": [], "lr_schedulers": []}, ckpt)  # fmt: skip
    return model, ckpt, tmp_path


def test_whole_files_are_read_as_before(files):
    model, ckpt, _ = files
    assert damaged(model) is None and damaged(ckpt) is None
    assert load_model_file(model, "test")["state_dict"]["w"][-1] == 99_999
    assert read_export_source(ckpt)["global_step"] == 5
    assert AtomicCheckpointIO().load_checkpoint(ckpt)["epoch"] == 0


def test_a_damaged_model_file_or_checkpoint_is_refused_in_one_line(files):
    model, ckpt, folder = files
    bad_model, bad_ckpt = _flipped(model, folder / "bad.pt"), _flipped(ckpt, folder / "bad.ckpt")
    assert torch.load(bad_model, weights_only=True)["state_dict"]["w"].shape == (100_000,)  # torch reads it, unsaid
    says = r"damaged: its part '.*' does not match its checksum \(a copy or a disk gone wrong\): copy it again$"
    with pytest.raises(ModelFileError, match=f"^{bad_model}: {says}"):
        load_model_file(bad_model, "test")
    with pytest.raises(ModelFileError, match=f"^{bad_ckpt}: {says}"):
        read_export_source(bad_ckpt)  # caption-export, text-export, --average, model.init_from
    with pytest.raises(CheckpointRefused, match=f"^{bad_ckpt}: {says}"):
        AtomicCheckpointIO().load_checkpoint(bad_ckpt)  # fit --ckpt_path


def test_a_file_that_is_no_zip_is_left_to_torch_to_name(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    assert damaged(text) is None and damaged(tmp_path / "missing.pt") is None


def test_a_damaged_pickle_is_said_damaged_not_another_kind_of_file(files):
    """A byte changed in the file's pickle (data.pkl) makes torch fail: it was "not a model file" (and "cut off by a
    copy or a full disk?" of a file whole in size)."""
    import zipfile

    model, ckpt, folder = files
    for path, out in ((model, folder / "pkl.pt"), (ckpt, folder / "pkl.ckpt")):
        with zipfile.ZipFile(path) as archive:
            info = next(i for i in archive.infolist() if i.filename.endswith("data.pkl"))
        data = bytearray(path.read_bytes())
        at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.file_size // 2
        data[at] ^= 0x55
        out.write_bytes(bytes(data))
    says = r"damaged: its part '.*data.pkl' does not match its checksum"
    with pytest.raises(ModelFileError, match=says):
        load_model_file(folder / "pkl.pt", "test")
    with pytest.raises(ModelFileError, match=says):
        read_export_source(folder / "pkl.ckpt")
    with pytest.raises(CheckpointRefused, match=says):
        AtomicCheckpointIO().load_checkpoint(folder / "pkl.ckpt")
