"""ONNX Runtime runs the frozen EfficientNet-Lite encoder without gradients (captioning.model.onnx_encoder): the same
features as PyTorch's plain body, any batch size, one export per weights and input size (reused by later encoders
and processes), PyTorch where it is off, missing or failing, and the bundled model's captions unchanged by it."""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import pytest
import torch

from captioning.commands import caption as caption_cli
from captioning.model import onnx_encoder
from captioning.model.captioner import Captioner
from captioning.model.encoder import ImageEncoder
from captioning.photos.preprocess import load_image

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def onnx_on(tmp_path, monkeypatch):
    """ONNX Runtime on (the suite turns it off: tests/conftest.py), its graphs in a fresh cache folder."""
    monkeypatch.setenv("CAPTION_ONNX", "1")
    monkeypatch.setenv("TEXT_ATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(onnx_encoder, "_ran", False)
    return tmp_path / "cache" / "onnx"


def _random_encoder(backbone: str = "efficientnet_lite0", **kwargs) -> ImageEncoder:
    torch.manual_seed(0)
    enc = ImageEncoder(backbone, grid=3, weights=None, **kwargs).eval()
    for m in enc.modules():  # BatchNorm statistics far from identity: the exported graph must carry the fold
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.5, 0.5)
    return enc


def _plain(enc: ImageEncoder, x: torch.Tensor) -> torch.Tensor:
    """The reference: the unfolded body in PyTorch."""
    enc.fold_for_inference = False
    try:
        with torch.no_grad():
            return enc(x)
    finally:
        enc.fold_for_inference = True


def _in_a_new_process(enc: ImageEncoder, monkeypatch) -> None:
    """What another process has of this encoder: no graph loaded, no session; its graph comes from the cache file."""
    enc._onnx.clear()
    monkeypatch.setattr(onnx_encoder, "_sessions", {})


def _close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4 * expected.abs().max().item())


@pytest.mark.parametrize(
    "backbone, size, stride, multiscale",
    [
        ("efficientnet_lite0", 97, 32, False),  # odd: the strided layers' fixed "same" paddings are asymmetric
        ("efficientnet_lite0", 64, 8, True),  # the multiscale concatenation is in the graph too
        ("efficientnet_lite2", 66, 32, False),
    ],
)
def test_onnx_runtime_computes_the_plain_bodys_features_at_any_batch(onnx_on, backbone, size, stride, multiscale):
    enc = _random_encoder(backbone, stride=stride, multiscale=multiscale)
    x = torch.randn(3, 3, size, size)
    with torch.no_grad():
        fast = enc(x)
        single = enc(x[1:2])  # the batch is free in the graph
    assert onnx_encoder.status().startswith("ONNX Runtime")
    assert len(list(onnx_on.glob("encoder-*.onnx"))) == 1
    expected = _plain(enc, x)
    _close(fast, expected)
    _close(single, expected[1:2])


@pytest.mark.long
def test_one_export_per_weights_reused_by_a_second_encoder(onnx_on, monkeypatch):
    exports = []
    real_export = onnx_encoder._export
    monkeypatch.setattr(onnx_encoder, "_export", lambda *a: (exports.append(a[1]), real_export(*a)))
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
        enc(x)
        twin = copy.deepcopy(enc)
        twin._onnx.clear()
        twin._folded = None
        monkeypatch.setattr(onnx_encoder, "_sessions", {})  # as in another process: the graph comes from the file
        _close(twin(x), first)  # an encoder with the same weights loads the graph written before
        assert exports == [(64, 64)]
        enc(torch.randn(1, 3, 80, 80))  # another input size: another graph
        assert exports == [(64, 64), (80, 80)]
        for p in enc.body.parameters():  # new weights: a new graph, not the stale one
            p.mul_(1.1)
        changed = enc(x)
    assert exports == [(64, 64), (80, 80), (64, 64)] and len(list(onnx_on.glob("*.onnx"))) == 3
    _close(changed, _plain(enc, x))
    assert not torch.allclose(changed, first)
    assert not list(onnx_on.glob("*.part"))  # written whole, then renamed


@pytest.mark.long
def test_changed_code_gets_a_new_graph_not_the_cached_one(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        enc(x)
        monkeypatch.setattr(onnx_encoder, "_code", lambda: "the toolkit, updated")
        enc._onnx.clear()
        _close(enc(x), _plain(enc, x))
    assert len(list(onnx_on.glob("*.onnx"))) == 2


def test_a_multiscale_body_and_a_plain_one_with_the_same_weights_get_their_own_graphs(onnx_on):
    plain = _random_encoder(stride=16)
    multi = _random_encoder(stride=8, multiscale=True)
    multi.body.load_state_dict(plain.body.state_dict())  # the same stages up to stride 16, the same weights
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        got_plain, got_multi = plain(x), multi(x)
    assert len(list(onnx_on.glob("*.onnx"))) == 2
    _close(got_plain, _plain(plain, x))
    _close(got_multi, _plain(multi, x))  # not the plain body's graph: the fine map is appended


def test_after_an_export_pytorch_still_computes_the_plain_features(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        enc(x)  # exports the folded body
        assert not any(m.training for m in enc._folded[1].modules())  # drop-connect stays off
        monkeypatch.setenv("CAPTION_ONNX", "0")
        _close(enc(x), _plain(enc, x))  # the same folded body, now in PyTorch


def test_pytorch_runs_with_gradients_when_off_and_without_onnxruntime(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    expected = _plain(enc, x)
    _close(enc(x).detach(), expected)  # gradients on: the plain body, nothing exported
    assert not onnx_on.exists()
    monkeypatch.setenv("CAPTION_ONNX", "0")
    with torch.no_grad():
        _close(enc(x), expected)
    assert onnx_encoder.status() == "PyTorch (CAPTION_ONNX=0)" and not onnx_on.exists()
    monkeypatch.setenv("CAPTION_ONNX", "1")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if it were not installed
    with torch.no_grad():
        _close(enc(x), expected)
    assert onnx_encoder.status() == "PyTorch (onnxruntime is not installed)" and not onnx_on.exists()


def test_a_failed_export_leaves_pytorch_running_and_no_file(onnx_on, monkeypatch):
    def broken(*args, **kwargs):
        open(args[2], "wb").write(b"half a graph")  # noqa: SIM115 - what an exporter dying midway leaves
        raise RuntimeError("this torch cannot trace that\nsecond line")

    monkeypatch.setattr(torch.onnx, "export", broken)
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        got = enc(x)
        enc(x)  # the failure is remembered for these weights and size: not tried at every batch
    _close(got, _plain(enc, x))
    assert onnx_encoder.status() == "PyTorch (the ONNX export failed: RuntimeError: this torch cannot trace that)"
    assert list(onnx_on.iterdir()) == []  # the partial file is gone


def test_a_deleted_file_and_a_new_thread_count_need_no_file(onnx_on):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
        for graph in onnx_on.glob("*.onnx"):
            graph.unlink()  # the user cleared the cache while this process runs
        threads = torch.get_num_threads()
        torch.set_num_threads(threads + 1)  # a new session: built from the graph kept in memory
        try:
            again = enc(x)
        finally:
            torch.set_num_threads(threads)
    assert onnx_encoder.status().startswith("ONNX Runtime")
    _close(again, first)


def test_a_failing_run_falls_back_to_pytorch_for_good(onnx_on, monkeypatch):
    calls = []

    def broken(self, images):
        calls.append(len(images))
        raise RuntimeError("bad allocation")

    monkeypatch.setattr(onnx_encoder.OnnxBody, "__call__", broken)
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        got = enc(x)
        enc(x)
    _close(got, _plain(enc, x))
    assert calls == [2]  # not tried again at the next batch
    assert onnx_encoder.status() == "PyTorch (ONNX Runtime failed: RuntimeError: bad allocation)"


@pytest.mark.long
def test_a_damaged_graph_file_is_exported_again(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
    (graph,) = onnx_on.glob("*.onnx")
    graph.write_bytes(b"not a graph")  # e.g. copied in half from another machine's cache
    twin = copy.deepcopy(enc)
    _in_a_new_process(twin, monkeypatch)
    with torch.no_grad():
        again = twin(x)
    assert onnx_encoder.status().startswith("ONNX Runtime") and graph.stat().st_size > 1000
    _close(again, first)


@pytest.mark.slow
def test_the_cache_keeps_the_most_recently_used_graphs(onnx_on, monkeypatch):
    monkeypatch.setattr(onnx_encoder, "KEEP", 2)
    enc = _random_encoder()
    sizes = {}
    with torch.no_grad():
        for side in (64, 80):
            before = set(onnx_on.glob("*.onnx"))
            enc(torch.randn(1, 3, side, side))
            (sizes[side],) = set(onnx_on.glob("*.onnx")) - before
        now = time.time()
        os.utime(sizes[64], (now - 300, now - 300))  # both written a while ago, the 64 one first
        os.utime(sizes[80], (now - 200, now - 200))
        _in_a_new_process(enc, monkeypatch)  # the 64 graph is loaded from its file, so it counts as used now
        enc(torch.randn(1, 3, 64, 64))
        got = enc(torch.randn(1, 3, 96, 96))  # a third graph: one too many, the least recently used goes
    left = set(onnx_on.glob("*.onnx"))
    assert len(left) == 2 and sizes[64] in left and sizes[80] not in left
    x = torch.randn(1, 3, 80, 80)
    with torch.no_grad():
        enc._onnx.clear()
        _close(enc(x), _plain(enc, x))  # exported again when asked for
    assert sizes[80].is_file() and len(list(onnx_on.glob("*.onnx"))) == 2
    assert got.shape[:2] == (1, 9) and onnx_encoder.status().startswith("ONNX Runtime")


@pytest.mark.long
def test_a_graph_removed_by_another_process_is_exported_again(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
        (graph,) = onnx_on.glob("*.onnx")
        # another process tidies the folder between this one's check and its read
        monkeypatch.setattr(onnx_encoder.os, "utime", lambda path: os.unlink(path))
        _in_a_new_process(enc, monkeypatch)
        again = enc(x)
    assert graph.is_file() and onnx_encoder.status().startswith("ONNX Runtime")
    _close(again, first)


@pytest.mark.long
def test_bundled_model_captions_the_same_with_onnx_runtime(onnx_on, monkeypatch):
    photos = [str(p) for p in caption_cli.DEMO_PHOTOS]
    captioner = Captioner.load(caption_cli.BUNDLED_MODEL)
    images = [captioner.preprocess(load_image(p, captioner.preprocess.decode_side)) for p in photos]
    pixels = torch.stack(images)
    monkeypatch.setenv("CAPTION_ONNX", "0")
    slow = captioner.encode(pixels)
    monkeypatch.setenv("CAPTION_ONNX", "1")
    fast = captioner.encode(pixels)
    assert onnx_encoder.status().startswith("ONNX Runtime")
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-4 * slow.abs().max().item())
    same = [c.words for c in captioner.caption_features(slow, 3, 30)]
    assert [c.words for c in captioner.caption_features(fast, 3, 30)] == same


def test_an_error_without_a_message_is_named_by_its_type(onnx_on, monkeypatch):
    def broken(self, images):
        raise MemoryError  # no message: the fallback's reason must not fail to take its first line

    monkeypatch.setattr(onnx_encoder.OnnxBody, "__call__", broken)
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        got = enc(x)
    _close(got, _plain(enc, x))
    assert onnx_encoder.status() == "PyTorch (ONNX Runtime failed: MemoryError)"


@pytest.mark.long
def test_a_read_only_cache_is_read_and_a_read_only_home_exports_into_a_private_folder(onnx_on, monkeypatch):
    enc = _random_encoder()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first = enc(x)
    exports = []
    real_export = onnx_encoder._export
    monkeypatch.setattr(onnx_encoder, "_export", lambda *a: (exports.append(a[2]), real_export(*a)))

    real_cache_path, utime = onnx_encoder.cache_path, os.utime

    def read_only(path, *args):  # a read-only mount: marking the graph used is refused with EROFS, not EACCES
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(onnx_encoder.os, "utime", read_only)
    _in_a_new_process(enc, monkeypatch)
    with torch.no_grad():
        _close(enc(x), first)
    assert exports == [] and onnx_encoder.status().startswith("ONNX Runtime")  # the cached graph, read

    def no_folder(folder, name, what):  # a read-only HOME: the cache folder cannot be made
        raise OSError(30, "Read-only file system", str(folder))

    monkeypatch.setattr(onnx_encoder, "cache_path", no_folder)
    y = torch.randn(1, 3, 80, 80)  # another size: a graph to export
    _in_a_new_process(enc, monkeypatch)
    monkeypatch.setattr(onnx_encoder, "_ran", False)
    with torch.no_grad():
        _close(enc(y), _plain(enc, y))
    assert onnx_encoder.status().startswith("ONNX Runtime") and onnx_on not in exports[-1].parents

    real_mkstemp = onnx_encoder.tempfile.mkstemp

    def unwritable(*args, dir=None, **kw):  # the cache folder is there but cannot be written
        if Path(dir) == onnx_on:
            raise OSError(30, "Read-only file system", dir)
        return real_mkstemp(*args, dir=dir, **kw)

    monkeypatch.setattr(onnx_encoder, "cache_path", real_cache_path)  # the cache folder is there again
    monkeypatch.setattr(onnx_encoder.os, "utime", utime)
    monkeypatch.setattr(onnx_encoder.tempfile, "mkstemp", unwritable)
    _in_a_new_process(enc, monkeypatch)
    monkeypatch.setattr(onnx_encoder, "_ran", False)
    with torch.no_grad():
        _close(enc(y), _plain(enc, y))
    assert onnx_encoder.status().startswith("ONNX Runtime") and onnx_on not in exports[-1].parents
    assert len(list(onnx_on.glob("*.onnx"))) == 1  # only the graph written before the folder became read-only


def test_a_failing_run_is_raised_without_onnx_runtimes_own_log_line(onnx_on, monkeypatch, capfd):
    """A run that fails (out of memory in the issue; here a Reshape to a size the input lacks) raises for the toolkit
    to say in its one line; ONNX Runtime's red, timestamped error line no longer comes before it."""
    import numpy as np
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [5])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["images", "shape"], ["features"])], "g",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, None)], [shape],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    monkeypatch.setattr(onnx_encoder, "_sessions", {})
    session = onnx_encoder._session(onnx_on / "reshape.onnx", model.SerializeToString(), 1)
    with pytest.raises(Exception, match="Reshape"):
        session.run(None, {"images": np.zeros(4, np.float32)})
    assert "onnxruntime" not in capfd.readouterr().err
