"""Batches of similar length that work in one process and under DDP, and resume mid-epoch.

``LengthBatchSampler`` is a torch ``BatchSampler``: it draws indices from the sampler it wraps, sorts them by length
within pools of 50 batches (little padding) and shuffles the batches. In one process it wraps an ``EpochShuffle`` (or
a ``SequentialSampler`` for evaluation). Under DDP, Lightning replaces that sampler with a ``DistributedSampler``
(``use_distributed_sampler``, on by default): each rank then batches only its own disjoint share of the indices, and
every rank gets the same number of batches. Both samplers shuffle with ``seed + epoch``, the epoch set by Lightning's
``set_epoch`` at the start of every epoch, so a run's batch order is a function of the seed alone.

Mid-epoch resume: ``skip = (epoch, n)`` drops the first ``n`` batches of that epoch (the ones a checkpoint already
trained on); ``ResumableBatches`` stores that in a data module's checkpoint state. Nothing here imports Lightning.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler

POOL_BATCHES = 50  # indices are sorted by length within pools of this many batches


class EpochShuffle(RandomSampler):
    """A random permutation of ``range(n)`` seeded by ``seed + epoch`` (Lightning calls ``set_epoch``).

    A ``RandomSampler`` subclass, so Lightning knows the loader shuffles and gives DDP a shuffling DistributedSampler.
    """

    def __init__(self, data_source: Sequence[Any], seed: int = 0):
        super().__init__(data_source)
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(len(self.data_source), generator=g).tolist())


def _shuffles(sampler: Sampler) -> bool:
    return isinstance(sampler, RandomSampler) or bool(getattr(sampler, "shuffle", False))


class LengthBatchSampler(BatchSampler):
    """Length-homogeneous batches over the indices ``sampler`` yields (see the module docstring).

    Args:
        sampler: yields dataset indices (``EpochShuffle``, ``SequentialSampler``, or Lightning's DistributedSampler).
        lengths: length of every dataset item (indexed like the dataset, not like the sampler's output).
        batch_size: items per batch. drop_last: drop a last, smaller batch.
        seed: seeds the order of the batches (with the sampler's epoch) when the sampler shuffles.
        skip: ``(epoch, n)``: in that epoch, leave out the first n batches (already trained before a resume).
        pool_batches: indices are sorted by length within pools of this many batches; 1: each batch holds the
            sampler's next indices (drawn at random when it shuffles), only ordered inside.
    """

    def __init__(
        self,
        sampler: Sampler[int],
        lengths: Sequence[int],
        batch_size: int,
        drop_last: bool = False,
        seed: int = 0,
        skip: tuple[int, int] | None = None,
        pool_batches: int = POOL_BATCHES,
    ):
        super().__init__(sampler, batch_size, drop_last)
        self.lengths, self.seed, self.skip = list(lengths), seed, skip
        self.pool_batches = max(1, int(pool_batches))
        self._own_epoch = 0  # used only when the sampler has no epoch of its own

    @property
    def epoch(self) -> int:
        return int(getattr(self.sampler, "epoch", self._own_epoch))

    def batches(self) -> list[list[int]]:
        """This epoch's batches, in order (before any skip)."""
        idx = list(self.sampler)
        shuffle = _shuffles(self.sampler)
        pool = self.batch_size * self.pool_batches
        batches = []
        for p in range(0, len(idx), pool):
            chunk = sorted(idx[p : p + pool], key=lambda i: self.lengths[i])  # stable: ties keep the sampler's order
            batches += [chunk[b : b + self.batch_size] for b in range(0, len(chunk), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        if shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        # A generator: with a single-process loader the batches are drawn at the first next(), after Lightning's
        # set_epoch. A resumed run's first loader iterator is made before set_epoch, so the skip names its epoch.
        skip = 0
        if self.skip is not None:
            epoch, skip = self.skip
            self.skip = None  # only the epoch that was interrupted
            if skip >= len(self):  # the checkpoint closed its epoch: the run goes on with the next one
                epoch, skip = epoch + 1, 0
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
        batches = self.batches()[skip:]
        if not hasattr(self.sampler, "epoch"):
            self._own_epoch += 1
        yield from batches


class ResumableBatches:
    """Mixin for a LightningDataModule whose train loader uses LengthBatchSampler: mid-epoch resume.

    Lightning saves a data module's ``state_dict()`` in every checkpoint and hands it back before it asks for the
    train loader again. The state is the epoch and how many of its batches the optimiser has stepped on; the
    resumed train loader skips exactly those, so the run continues with the batches an uninterrupted run would see.
    """

    _resume_skip: tuple[int, int] | None = None

    def state_dict(self) -> dict[str, Any]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return {}
        loop = trainer.fit_loop
        # "processed" counts the batches whose training step ran; a checkpoint taken at a batch's end includes it.
        # They are of the epoch last started: once an epoch has ended, current_epoch already counts the next one (a
        # checkpoint saved as the fit ends, on an epoch's last step, said "next epoch, 2 batches done", and the resumed
        # run skipped that whole epoch).
        started = int(loop.epoch_progress.current.started)
        return {
            "epoch": max(started - 1, 0) if started else int(trainer.current_epoch),
            "batches_done": int(loop.epoch_loop.batch_progress.current.processed),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "epoch" in state and "batches_done" in state:
            self._resume_skip = (int(state["epoch"]), int(state["batches_done"]))

    def take_resume_skip(self) -> tuple[int, int] | None:
        """The skip for the next train loader (once: a later loader, e.g. after reload, starts afresh)."""
        skip, self._resume_skip = self._resume_skip, None
        return skip
