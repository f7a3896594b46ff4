"""SIGTERM under DDP: the handler flags the stop and tells the launcher's processes, and runs no collective
(text_attn.core.ddp_sigterm): a broadcast inside the handler met another rank's gradient all-reduce and both processes
hung."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import torch
from pytorch_lightning.trainer.connectors.signal_connector import _SignalConnector

from text_attn.core import ddp_sigterm


def test_the_sigterm_handler_runs_no_collective(monkeypatch, caplog):
    # Lightning's own, though an earlier fit in this process replaced it (the commands replace it once a process)
    lightnings = ddp_sigterm.lightnings or _SignalConnector._sigterm_notifier_fn
    monkeypatch.setattr(_SignalConnector, "_sigterm_notifier_fn", lightnings)
    monkeypatch.setattr(ddp_sigterm, "_patched", False)
    broadcasts, killed = [], []
    monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "broadcast", lambda tensor, src: broadcasts.append((tensor.tolist(), src)))
    launcher = SimpleNamespace(kill=killed.append)
    strategy = SimpleNamespace(launcher=launcher, root_device=torch.device("cpu"))
    trainer = SimpleNamespace(local_rank=0, world_size=2, strategy=strategy)
    unpatched = SimpleNamespace(trainer=trainer, received_sigterm=False)
    _SignalConnector._sigterm_notifier_fn(unpatched, signal.SIGTERM, None)
    assert broadcasts == [([1], 0)] and unpatched.received_sigterm  # Lightning's own: a collective in the handler
    broadcasts.clear()
    killed.clear()
    ddp_sigterm.keep_collectives_out_of_the_handler()
    connector = SimpleNamespace(trainer=trainer, received_sigterm=False)
    caplog.clear()  # Lightning's own said it
    with caplog.at_level("INFO"):
        for _ in range(2):  # a second TERM: flagged already, the processes not told again
            _SignalConnector._sigterm_notifier_fn(connector, signal.SIGTERM, None)
    assert broadcasts == [] and killed == [signal.SIGTERM] and connector.received_sigterm
    assert "Received SIGTERM" not in caplog.text  # "[rank: N] Received SIGTERM: 15" of every process: the run's line


def test_a_lost_process_is_told_from_other_errors():
    """Another process of a multi-process fit killed: the survivor's collective failed with gloo's "Connection reset
    by peer" in a 95-line traceback; it is one line now (lightning_cli.lost_process names it)."""
    import torch.distributed as dist

    from text_attn.core.lightning_cli import lost_process

    two, one = SimpleNamespace(world_size=2), SimpleNamespace(world_size=1)
    reset = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [127.0.0.1]:4242: "
                         "Connection reset by peer")  # fmt: skip
    assert lost_process(reset, two) == "another process of this run was lost"
    aborted = dist.DistBackendError("NCCL error: remote process exited or there was a network error, NCCL "
                                    "communicator was aborted on rank 1.")  # fmt: skip
    assert lost_process(aborted, two) == "another process of this run was lost"
    # errors of their own, said as they are (a port in use at the start was said to be a lost process)
    assert (
        lost_process(
            dist.DistNetworkError(
                "The server socket has failed to listen on any local network address. "
                "port: 29667, useIpv6: false, code: -98, name: EADDRINUSE"
            ),
            two,
        )
        is None
    )
    assert lost_process(dist.DistBackendError("NCCL error: unhandled cuda error"), two) is None
    assert lost_process(reset, one) is None  # one process: no peer to lose
    assert lost_process(RuntimeError("mat1 and mat2 shapes cannot be multiplied"), two) is None
    assert lost_process(ValueError("Connection reset by peer"), two) is None
