"""SIGTERM under DDP without a collective inside the signal handler.

Lightning 2.6's handler (``_SignalConnector._sigterm_notifier_fn``) calls ``torch.distributed.broadcast`` from
within the handler. Python runs a handler between bytecodes of whatever the main thread is doing: in rank 0's
``backward`` that broadcast met rank 1's gradient all-reduce, and both processes waited on each other for good (1 of 5
SIGTERMs to a 2-process ``text-train fit`` on the CPU hung, `timeout` unable to end it: its one TERM went to the same
handler). Without it each process that got the signal stops at the end of the step it is in: Lightning's launcher
passes a SIGTERM on to the processes it started (``launcher.kill``), a scheduler or torchrun's agent signals every
process, and each one's flag ends its step (``_TrainingEpochLoop.on_advance_end``; a validation batch's likewise),
all at the same step. A process that was not signalled (a ``kill`` of one torchrun process alone) goes on to its next
collective, which fails once the others have ended: it says "stopped (another process of this run was lost)" and
torchrun's agent ends it. Here the handler does the rest of what it did (the launcher's children told, the flag
set), less its "[rank: N] Received SIGTERM: 15" line of every process: the run's own line says where it stopped, once.
"""

from __future__ import annotations

_patched = False
lightnings = None  # Lightning's own handler, once replaced (tests call it to show what it did)


def _notify(self, signum, frame) -> None:  # noqa: ARG001 - a signal handler's signature
    """Lightning's handler, less its broadcast and its line: passed to the processes the launcher started, flagged."""
    if not self.received_sigterm:
        launcher = self.trainer.strategy.launcher
        if launcher is not None:
            launcher.kill(signum)
    self.received_sigterm = True


def keep_collectives_out_of_the_handler() -> None:
    """Lightning's SIGTERM handler replaced by :func:`_notify` for this process's fits (once; the class's handler is
    looked up when a fit registers it)."""
    global _patched, lightnings
    if _patched:
        return
    from pytorch_lightning.trainer.connectors.signal_connector import _SignalConnector

    lightnings = _SignalConnector._sigterm_notifier_fn
    _SignalConnector._sigterm_notifier_fn = _notify
    _patched = True
