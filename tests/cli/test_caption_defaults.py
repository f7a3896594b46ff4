"""``caption``'s --batch-size and --workers when not given: the CPU's defaults as before; with --device cuda, fitted
to the GPU's memory and the machine's cores (issue 65: the defaults ran at half the tuned rate on an H200)."""

from __future__ import annotations

import argparse

import pytest

from captioning.commands.caption_parser import BATCH, _parser, fill_machine_defaults, machine_defaults

GIB = 2**30


@pytest.mark.parametrize(
    ("device", "processes", "cores", "gpu", "expected"),
    [
        ("cpu", 1, 2, None, (BATCH, 2)),
        ("cpu", 1, 64, None, (BATCH, 2)),  # on the CPU the model is the cost: more workers would take its cores
        ("cuda", 1, 16, 139 * GIB, (128, 14)),  # the H200 machine: the tuned run's batch 128 and 14 workers
        ("cuda:1", 2, 16, 80 * GIB, (128, 7)),  # two processes share the cores
        ("cuda", 1, 8, 24 * GIB, (64, 6)),
        ("cuda", 4, 8, 8 * GIB, (32, 2)),  # at least 2 workers each
        ("cuda", 1, 2, None, (32, 2)),  # no GPU to ask (the run then says it cannot use cuda)
    ],
)
def test_the_defaults_fit_the_machine(device, processes, cores, gpu, expected):
    assert machine_defaults(device, processes, cores, gpu) == expected


@pytest.fixture(autouse=True)
def _roomy(monkeypatch):
    """A machine with memory to spare, whatever this one has free (a test that wants less says so)."""
    monkeypatch.setattr("text_attn.core.memory_room.memory_room", lambda: 64 * GIB)


def test_values_given_are_kept_and_the_cpu_defaults_are_unchanged():
    args = _parser().parse_args(["x.jpg", "--batch-size", "5", "--device", "cuda", "--workers", "0"])
    fill_machine_defaults(args)
    assert (args.batch_size, args.workers) == (5, 0)
    args = _parser().parse_args(["x.jpg"])
    assert (args.batch_size, args.workers) == (None, None)  # not given: filled when the run starts
    fill_machine_defaults(args)
    assert (args.batch_size, args.workers) == (16, 2)
    args = argparse.Namespace(batch_size=None, workers=3, device="cpu", devices=None)
    fill_machine_defaults(args)
    assert (args.batch_size, args.workers) == (16, 3)


def test_device_auto_is_the_default_and_chooses_the_gpu_where_there_is_one(monkeypatch):
    """caption and translate default to --device auto (issue 71): the CPU here, a GPU where torch sees one; the batch
    and workers then follow the device chosen."""
    import torch

    from text_attn.core.devices import resolve_device
    from text_attn.translation.translate_parser import translate_parser

    assert _parser().parse_args(["x.jpg"]).device == "auto" and translate_parser().parse_args(["x"]).device == "auto"
    assert resolve_device("cpu") == "cpu" and resolve_device("cuda:1") == "cuda:1"  # a named device as given
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = _parser().parse_args(["x.jpg"])
    fill_machine_defaults(args)
    assert (args.device, args.batch_size, args.workers) == ("cpu", BATCH, 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    class H200:
        total_memory = 139 * GIB

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: H200)
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    args = _parser().parse_args(["x.jpg"])
    fill_machine_defaults(args)
    assert (args.device, args.batch_size, args.workers) == ("cuda", 128, 14)


MIB = 2**20


@pytest.mark.parametrize(
    ("room", "batch"),
    [(None, BATCH), (20 * GIB, BATCH), (1.5 * GIB, BATCH), (900 * MIB, 6), (768 * MIB, 1), (200 * MIB, 1)],
)
def test_on_the_cpu_the_batch_fits_the_memory_this_process_may_use(room, batch):
    """A 768-900 MB container: the default batch of 16 (928 MB at its peak) was ended by the OOM killer, 0 captions,
    where --batch-size 4 ran in ~700 MB; the batch now fits 90% of the room beside the model."""
    assert machine_defaults("cpu", 1, 2, None, room) == (batch, 2)
    assert machine_defaults("cuda", 1, 16, 139 * GIB, 100 * MIB) == (128, 14)  # a GPU's batch is by its own memory


def test_a_small_room_is_said_and_a_batch_given_is_kept(monkeypatch, capsys):
    monkeypatch.setattr("text_attn.core.memory_room.memory_room", lambda: 900 * MIB)
    args = _parser().parse_args(["x.jpg", "--device", "cpu"])
    fill_machine_defaults(args)
    assert args.batch_size == 6
    assert capsys.readouterr().err == (
        "caption: note: --batch-size 6, not 16: this process may use 0.88 GiB of memory (a container's limit, or "
        "what the machine has free), and a batch of 16 would not fit beside the model; give --batch-size to choose\n"
    )
    args = _parser().parse_args(["x.jpg", "--device", "cpu", "--batch-size", "16"])
    fill_machine_defaults(args)
    assert args.batch_size == 16 and capsys.readouterr().err == ""


@pytest.mark.parametrize("version", [1, 2])
def test_the_memory_room_is_a_cgroups_limit_less_its_use(tmp_path, version, monkeypatch):
    from text_attn.core.memory_room import _cgroup_room

    own = tmp_path / "self_cgroup"
    if version == 2:
        own.write_text("0::/box\n")
        (tmp_path / "box").mkdir()
        (tmp_path / "box/memory.max").write_text(f"{900 * MIB}\n")
        (tmp_path / "box/memory.current").write_text(f"{100 * MIB}\n")
    else:
        own.write_text("9:pids:/\n4:memory:/box\n1:name=systemd:/\n")
        (tmp_path / "memory/box").mkdir(parents=True)
        (tmp_path / "memory/box/memory.limit_in_bytes").write_text(f"{900 * MIB}\n")
        (tmp_path / "memory/box/memory.usage_in_bytes").write_text(f"{100 * MIB}\n")
    monkeypatch.setattr("text_attn.core.memory_room.own_resident", lambda: 60 * MIB)  # of the 100 used
    assert _cgroup_room(tmp_path, own) == 860 * MIB  # the limit less what the others use
    unlimited = "max" if version == 2 else "9223372036854771712"
    limit = tmp_path / ("box/memory.max" if version == 2 else "memory/box/memory.limit_in_bytes")
    limit.write_text(unlimited + "\n")
    assert _cgroup_room(tmp_path, own) is None  # no limit: the machine's MemAvailable alone


def test_own_resident_memory_is_statms_resident_pages_in_bytes(tmp_path):
    import os

    from text_attn.core.memory_room import own_resident

    statm = tmp_path / "statm"
    statm.write_text("52000 3000 800 100 0 9000 0\n")  # size, resident, shared, ... (pages)
    assert own_resident(statm) == 3000 * os.sysconf("SC_PAGE_SIZE")
    statm.write_text("garbage\n")
    assert own_resident(statm) == 0 and own_resident(tmp_path / "none") == 0  # unreadable: 0, never an error
    assert 0 < own_resident() < 2**40  # this process, read from /proc/self/statm
