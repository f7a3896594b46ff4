"""attention_serve/cores.py: the model workers lend each other the machine's cores by demand. A worker busy alone
computes on every core, busy workers share them (one that ended a batch, read a request or wrote an answer moments ago
still counts), the count follows the others' before every module call, the encoder takes a few photos a call while the
cores are lent, the arrays are shared with a worker process, and ``--threads`` turns it off."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest
import torch
from helpers.cores_child import busy_until_told
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from attention_serve import cores
from attention_serve.cli import _parser, build_server
from attention_serve.cores import LINGER, CoreShare, threads_for


@pytest.mark.parametrize(
    ("busy", "ended", "cores", "want"),
    [
        ([0, 0], [-1e9, -1e9], 2, 2),  # alone: every core
        ([0, 1], [-1e9, -1e9], 2, 1),  # the other computes: half
        ([0, 0], [-1e9, 100.0 - LINGER / 2], 2, 1),  # the other ended a batch moments ago: still half
        ([0, 0], [-1e9, 100.0 - 2 * LINGER], 2, 2),  # ...and long enough ago: all again
        ([1, 1], [-1e9, -1e9], 2, 1),  # its own flag is not another worker
        ([0, 1, 1], [-1e9] * 3, 2, 1),  # more workers busy than cores: at least one thread
        ([0, 1, 1], [-1e9] * 3, 16, 5),  # 16 cores among 3 busy workers
    ],
)
def test_threads_are_the_cores_divided_among_the_busy_workers(busy, ended, cores, want):
    assert threads_for(0, busy, ended, 100.0, cores) == want


class Probe(torch.nn.Module):
    """Records the torch threads its forward ran on."""

    seen: list[int]

    def forward(self, x):
        self.seen.append(torch.get_num_threads())
        return x


def test_a_worker_takes_the_cores_back_and_lends_them_before_each_module_call(monkeypatch):
    monkeypatch.setattr(cores, "RECHECK", 0.0)  # every call reads the arrays (the real 2 ms is tested below)
    before = torch.get_num_threads()
    share, probe = CoreShare(2, cores=4), Probe()
    probe.seen = []
    handle = share.join(0)
    try:
        torch.set_num_threads(1)
        probe(torch.zeros(1))  # outside a batch: nothing is changed
        with share.working():
            assert share.busy[0] == 1
            probe(torch.zeros(1))  # alone: all 4
            share.busy[1] = 1  # the other worker starts a batch mid-way through ours
            probe(torch.zeros(1))
            share.busy[1], share.ended[1] = 0, time.monotonic()  # ...and ends it: still counted for LINGER
            probe(torch.zeros(1))
            share.ended[1] = time.monotonic() - 2 * LINGER
            probe(torch.zeros(1))
        assert share.busy[0] == 0 and time.monotonic() - share.ended[0] < 1
        assert probe.seen == [1, 4, 2, 2, 4]
    finally:
        handle.remove()
        torch.set_num_threads(before)


def test_within_recheck_the_arrays_are_not_read_again(monkeypatch):
    """The hook runs before every module call (thousands in a Transformer's beam search): reading the arrays each
    time cost 5-15% of a batch, so a worker reads them once every RECHECK seconds, and at the start of each batch."""
    monkeypatch.setattr(cores, "RECHECK", 60.0)
    before = torch.get_num_threads()
    share, probe = CoreShare(2, cores=4), Probe()
    probe.seen = []
    handle = share.join(0)
    try:
        with share.working():
            probe(torch.zeros(1))
            share.busy[1] = 1
            probe(torch.zeros(1))  # read moments ago: not again
        with share.working():
            probe(torch.zeros(1))  # a new batch reads them at once
        assert probe.seen == [4, 4, 2]
    finally:
        handle.remove()
        torch.set_num_threads(before)


def test_a_worker_alone_from_its_first_batch_computes_on_every_core(monkeypatch):
    """Setup sets the fixed share for loading after join(); the first batch alone must still get every core (a
    version that remembered the count it last set, not the one torch has, stayed on one thread until the other model
    was first busy: for ever on a server only ever asked for captions)."""
    before = torch.get_num_threads()
    share, probe = CoreShare(2, cores=4), Probe()
    probe.seen = []
    torch.set_num_threads(4)
    handle = share.join(0)
    try:
        torch.set_num_threads(2)  # as setup does: the fixed share while the model loads
        with share.working():
            probe(torch.zeros(1))
        assert probe.seen == [4]
    finally:
        handle.remove()
        torch.set_num_threads(before)


@pytest.mark.long
def test_the_arrays_are_shared_with_a_worker_process():
    """What LitServe does with a LitAPI: the share goes to a process it starts (spawned, as the workers are)."""
    ctx = mp.get_context("spawn")
    share, started, release = CoreShare(2, cores=2), ctx.Event(), ctx.Event()
    child = ctx.Process(target=busy_until_told, args=(share, 1, started, release))
    child.start()
    try:
        assert started.wait(60), "the worker process did not start its batch"
        assert share.busy[1] == 1
        assert threads_for(0, list(share.busy), list(share.ended), time.monotonic(), 2) == 1
        release.set()
        child.join(30)
        assert child.exitcode == 0 and share.busy[1] == 0
        assert time.monotonic() - share.ended[1] < 30  # its end time, on the same clock as ours
    finally:
        release.set()
        child.join(5)
        if child.is_alive():
            child.kill()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[str, str]:
    """The tiny caption and text model files, written once (~0.2 s each): the servers built here only read them."""
    folder = tmp_path_factory.mktemp("models")
    return str(tiny_model_file(folder / "c.pt")), str(tiny_word_model_file(folder / "t.pt"))


def _apis(models, *flags):
    args = _parser().parse_args(["--caption-model", models[0], "--text-model", models[1], *flags])
    return list(build_server(args)[0].litapi_connector)


def test_by_default_every_worker_gets_the_same_share_and_threads_turns_it_off(models):
    caption, translate = _apis(models)
    assert caption.threads is None and caption.cores is translate.cores is not None
    assert len(caption.cores.busy) == 2  # one slot per worker: one worker per model here
    fixed = _apis(models, "--threads", "3")
    assert [(a.threads, a.cores) for a in fixed] == [(3, None), (3, None)]


def test_a_batch_is_computed_while_the_worker_is_marked_busy(models):
    caption, _ = _apis(models)
    share = caption.cores
    share.slot = 0  # as setup's join() would, without the hook
    seen = []
    caption.compute = lambda items: seen.append(share.busy[0]) or items
    assert caption.predict([{"x": 1}]) == [{"x": 1}]
    assert seen == [1] and share.busy[0] == 0 and share.ended[0] > 0


def test_reading_a_request_and_writing_an_answer_count_as_busy_for_the_linger(models):
    """A captioner reading its next 16 photos between two batches is working: the translator must not take its core."""
    caption, _ = _apis(models)
    share = caption.cores
    share.slot = 0
    other = threads_for(1, list(share.busy), list(share.ended), time.monotonic(), cores=2)
    assert other == 2  # the captioner idle: the translator may take both cores
    caption.decode = lambda request: request  # the photo's decoding itself is not what is tested here
    assert caption.decode_request({"x": 1}) == {"x": 1}
    assert share.busy[0] == 0 and time.monotonic() - share.ended[0] < LINGER
    assert threads_for(1, list(share.busy), list(share.ended), time.monotonic(), cores=2) == 1
    share.ended[0] = -1e9
    assert caption.encode_response({"caption": "a dog"}) == {"caption": "a dog"}
    assert threads_for(1, list(share.busy), list(share.ended), time.monotonic(), cores=2) == 1


def test_with_the_cores_lent_the_encoder_takes_a_few_photos_at_a_time_and_captions_the_same(models, monkeypatch):
    """An encoder pass keeps the thread count it starts with: lent, it runs ENCODER_CHUNK photos a call."""
    import base64

    from PIL import Image

    from attention_serve import apis
    from captioning.photos.photo_check import photo_stats

    caption, _ = _apis(models)
    caption.load("cpu")
    caption.cores.slot = 0  # as setup's join() does on the CPU (a worker on a GPU never joins: one call a batch)
    cap = caption.captioner
    options = {"beam_size": 2, "max_len": 6, "length_penalty": 0.0}
    items = []
    for i in range(6):
        image = Image.new("RGB", (40 + 5 * i, 32), (40 * i, 120, 200 - 30 * i))
        pixels = cap.preprocess.pixels(image)
        items.append(caption.decode({"pixels": base64.b64encode(pixels.tobytes()).decode(), "shape": list(pixels.shape),
                                     "size": list(image.size), "crop_box": list(cap.preprocess.crop_box(*image.size)),
                                     "stats": list(photo_stats(image)), "options": options}))  # fmt: skip
    calls, encode = [], cap.encode
    monkeypatch.setattr(cap, "encode", lambda images: calls.append(len(images)) or encode(images))
    lent = caption.compute(items)
    assert calls == [4, 2] and apis.ENCODER_CHUNK == 4
    calls.clear()
    caption.cores.slot = None  # on a GPU: the fixed share, one call for the whole batch
    assert caption.compute(items) == lent and calls == [6]
    calls.clear()
    caption.cores = None  # --threads N: the count never changes mid-batch, one call for the whole batch
    whole = caption.compute(items)
    assert calls == [6]
    assert [r["words"] for r in lent] == [r["words"] for r in whole]
    assert [r["attention"] for r in lent] == [r["attention"] for r in whole]


@pytest.mark.parametrize(("device", "joins"), [("cpu", True), ("cuda:0", False)])
def test_a_worker_on_the_cpu_joins_the_share_and_one_on_a_gpu_keeps_its_fixed_share(models, monkeypatch, device,
                                                                                     joins):  # fmt: skip
    import signal

    caption, _ = _apis(models)
    joined = []
    monkeypatch.setattr(caption.cores, "join", joined.append)
    monkeypatch.setattr(caption, "load", lambda device: None)  # the model itself is not what is tested here
    monkeypatch.setenv("LITSERVE_WORKER_ID", "0")
    before, sigint = torch.get_num_threads(), signal.getsignal(signal.SIGINT)
    sigterm = signal.getsignal(signal.SIGTERM)  # setup installs a worker's SIGTERM handler: left, a later test's
    try:  # SIGTERM to this process ran it and ended the test worker
        caption.setup(device)
        assert joined == ([0] if joins else [])
        assert torch.get_num_threads() == max(1, caption.cores.cores // 2)  # the fixed share: loading, or a GPU's
    finally:
        signal.signal(signal.SIGINT, sigint)
        signal.signal(signal.SIGTERM, sigterm)
        torch.set_num_threads(before)
