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
    from text_attn.translation.translate_cli import _parser as translate_parser

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
