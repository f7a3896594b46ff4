"""Batches of similar length that work in one process and under DDP, and resume mid-epoch.

``LengthBatchSampler`` is a torch ``BatchSampler``: it draws indices from the sampler it wraps, sorts them by length
within pools of 50 batches (little padding) and shuffles the batches. In one process it wraps an ``EpochShuffle`` (or
a ``SequentialSampler`` for evaluation). Under DDP, Lightning replaces that sampler with a ``DistributedSampler``
(``use_distributed_sampler``, on by default): each rank then batches only its own disjoint share of the indices, and
every rank gets the same number of batches. Both samplers shuffle with ``seed + epoch``, the epoch set by Lightning's
``set_epoch`` at the start of every epoch, so a run's batch order is a function of the seed alone.

Mid-epoch resume: ``skip = (epoch, n)`` drops the first ``n`` batches of that epoch (the ones a checkpoint already
trained on); ``ResumableBatches`` stores that in a data module's checkpoint state, with the batch size it counts in (a
resume with another ``data.batch_size`` is refused: its batches group the samples otherwise, and the skip would leave
out some not yet trained and repeat others). ``train_order``: the order a train loader draws its items in,
reshuffled every epoch, or fixed under ``--trainer.overfit_batches``. Nothing here imports Lightning.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler, SequentialSampler

from text_attn.core.ranks import say

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


def train_order(data: Sequence[Any], seed: int, trainer: Any = None) -> Sampler[int]:
    """The sampler a train loader's ``LengthBatchSampler`` wraps: ``EpochShuffle``, or the data's own order when the
    trainer overfits (``--trainer.overfit_batches N``: the same N batches, in the same order, every epoch).

    Lightning turns a train loader's shuffling off for overfit_batches by replacing ``DataLoader.sampler``, which a
    loader given a ``batch_sampler`` does not use: the shuffling inside it went on, a new N batches every epoch.
    Under DDP Lightning's DistributedSampler does not shuffle then either, so every rank batches its share in order.
    """
    return SequentialSampler(data) if overfits(trainer) else EpochShuffle(data, seed)


def overfits(trainer: Any) -> bool:
    """Whether ``trainer`` (a Lightning Trainer, or None) runs ``--trainer.overfit_batches`` (an int or a fraction)."""
    return bool(getattr(trainer, "overfit_batches", 0))


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
    With them: the batches the epoch runs (a checkpoint at the end of an epoch cut short by limit_train_batches or
    overfit_batches closed it; the resumed run starts the next one) and ``data.batch_size``, what the count is in (a
    fit resumed with another is refused in one line; a checkpoint of before, without it, resumes as it did) and the
    number of processes that trained it (likewise: each trained its share of the samples, counted per process).
    """

    _resume_skip: tuple[int, int] | None = None

    def held_out(self) -> list[str] | None:
        """What names this run's val and test items (their photos' file names, their sentences), for a resume to tell
        whether they are the checkpoint's run's; None: not told (made-up data, a streamed corpus)."""
        return None

    def drawn_split(self) -> bool:
        """Whether val and test are drawn from the data by its settings (data.val_size, data.test_size, data.seed: a
        file of pairs, a folder of photos), so that other settings hold out other items, some of them the run's
        training items; False for a corpus's own split files."""
        return False

    def train_order(self) -> str | None:
        """What fixes the order of an epoch's train samples besides the data settings: a chunk folder's train layout
        (its chunks' names and sizes, :func:`text_attn.core.streaming.train_layout`), None for other data. A folder
        written again with the same samples in other chunks (``optimize --num_workers 2``, another ``--chunk_bytes``)
        shuffles them otherwise: a resume mid-epoch trained 45-62 of 320 samples twice and as many never, unsaid."""
        if not getattr(self, "streams", False):
            return None
        if getattr(self, "_train_layout", None) is None:  # read once: every checkpoint saved asked for it again
            from text_attn.core.streaming import train_layout

            self._train_layout = train_layout(self.hparams.root)
        return self._train_layout

    def _held_out_digest(self, only: str | None = None) -> str | None:
        """A digest of :meth:`held_out`'s names (``only="val"``: the val items' alone, each named ``val:...``)."""
        names = self.held_out() if getattr(self, "splits", None) else None
        if names is not None and only is not None:
            names = [n for n in names if n.startswith(f"{only}:")]
        return None if names is None else hashlib.sha256("\n".join(names).encode("utf-8", "replace")).hexdigest()[:16]

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
        state = {
            "epoch": max(started - 1, 0) if started else int(trainer.current_epoch),
            "batches_done": int(loop.epoch_loop.batch_progress.current.processed),
            "batch_size": int(self.hparams.batch_size),
            "processes": int(getattr(trainer, "world_size", 1) or 1),
        }
        if isinstance(getattr(self.hparams, "seed", None), int):  # the batches' order: seed + epoch
            state["seed"] = int(self.hparams.seed)
        total = trainer.num_training_batches
        if isinstance(total, int) or (isinstance(total, float) and total.is_integer()):  # inf: a loader of no length
            state["epoch_batches"] = int(total)
        if (held := self._held_out_digest()) is not None:
            state["held_out"] = held
            state["val_items"] = self._held_out_digest("val")  # what the start's scores were of (training.py)
        if (order := self.train_order()) is not None:
            state["train_order"] = order
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "epoch" not in state or "batches_done" not in state:
            return
        epoch, done = int(state["epoch"]), int(state["batches_done"])
        saved, now = state.get("batch_size"), int(self.hparams.batch_size)
        trainer = getattr(self, "trainer", None)
        fitting = trainer is not None and trainer.state.fn == "fit"  # validate / test --ckpt_path: no train loader
        if fitting and state.get("held_out") and (held := self._held_out_digest()) and held != state["held_out"]:
            # a folder grown or changed since: photos moved between the splits (a test photo into train), unsaid
            ckpt = getattr(trainer, "ckpt_path", None) or "CKPT"
            say("data: note: this run's val and test are not those of the run the checkpoint comes from (its data, "
                "data.seed or split sizes changed since): the scores and the best checkpoint so far were of others, "
                "and some of them may now be trained on; to keep the data as it is now, start a new fit from its "
                f"weights: --model.init_from {ckpt}")  # fmt: skip
        elif not fitting and state.get("held_out") and self.drawn_split():
            if (held := self._held_out_digest()) and held != state["held_out"]:  # test with other sizes or seed: its
                # "test" pairs were the fit's training pairs (100 of 100), its score 12 sacreBLEU above the true one
                ckpt = getattr(trainer, "ckpt_path", None)
                # Lightning's layout (version_N/checkpoints/X.ckpt, config.yaml in version_N): a checkpoint copied
                # beside the config this run was given named that config
                layout = (
                    ckpt
                    and Path(ckpt).parent.name == "checkpoints"
                    and Path(ckpt).parent.parent.name.startswith("version_")
                )
                run = Path(ckpt).parent.parent / "config.yaml" if layout else None
                own = f"--config {run}" if run is not None and run.is_file() else "the run's data settings"
                say("data: note: these val and test items are not those the run the checkpoint comes from held out "
                    "(other data.val_size, data.test_size or data.seed, or the data changed): some of them may be "
                    f"items it trained on, and the scores are not its own; score with {own}")  # fmt: skip
        # Mid-epoch, batches of another size group the samples otherwise: the skip would leave out some not yet
        # trained and repeat others. At an epoch's end too: Lightning goes on counting the epoch's batches from the
        # checkpoint's count, so with more batches an epoch it ran the rest of the old epoch's count as the new epoch
        # (half of it, labelled with the old epoch's number) and the step totals were wrong. Another number of
        # processes likewise: each trained its share of the epoch's samples, counted per process (2 -> 1 left 19 of
        # 192 samples of that epoch untrained and trained 67 twice, 1 -> 2 trained 144 twice, unsaid, exit 0).
        ckpt = getattr(trainer, "ckpt_path", None) or "CKPT"
        processes, ran = int(getattr(trainer, "world_size", 1) or 1), state.get("processes")
        counted = (
            (saved, now, f"data.batch_size {now}: the checkpoint trained {done} batches of {saved} in epoch {epoch}, "
                         f"and a resume goes on counting in batches of {saved}: keep data.batch_size {saved}"),
            (ran, processes, f"{processes} process(es) (trainer.devices x trainer.num_nodes): the checkpoint trained "
                             f"{done} batches in epoch {epoch} on {ran}, each process its share of the samples, and a "
                             f"resume goes on from that count: resume on {ran}"),
        )  # fmt: skip
        for was, now_is, said in counted:
            if done and fitting and was is not None and int(was) != now_is:
                raise ValueError(f"{said}, or start a new fit from its weights with --model.init_from {ckpt} (its "
                                 "steps and optimiser afresh)")  # fmt: skip
        if "epoch_batches" in state and done >= int(state["epoch_batches"]):
            # its epoch closed: the next one from its start. (Compared with the loader's own length, as a checkpoint
            # of before has to be, the end of an epoch limit_train_batches or overfit_batches cut short read as
            # mid-epoch: the resumed run trained the rest of that epoch's batches, not the next epoch's.)
            epoch, done = epoch + 1, 0
        seed, seeded = getattr(self.hparams, "seed", None), state.get("seed")
        shuffled = not overfits(trainer)  # overfit_batches reads the samples in order: no seed orders them
        if done and fitting and shuffled and seeded is not None and isinstance(seed, int) and int(seeded) != seed:
            # another order of the same epoch's batches: the skip left out some samples and trained others twice
            # (an audit: 79 of 300 pairs untrained and 75 twice, unsaid); a new epoch is shuffled afresh: fine
            raise ValueError(f"data.seed {seed}: the checkpoint trained {done} batches of epoch {epoch} in data.seed "
                             f"{seeded}'s order, and a resume skips that many of this order's: keep data.seed "
                             f"{seeded}, or start a new fit from its weights with --model.init_from {ckpt} (its steps "
                             "and optimiser afresh)")  # fmt: skip
        order, was = (self.train_order(), state.get("train_order")) if done and fitting else (None, None)
        if order is not None and was is not None and order != was:  # an epoch begun afresh is shuffled afresh: fine
            raise ValueError(f"data.root {self.hparams.root}: its train chunks were written again since the "
                             f"checkpoint (other chunks: the same samples fall in another order), and it stopped "
                             f"{done} batches into epoch {epoch}: resuming there would train some samples twice and "
                             "others never. Resume from the chunks as they were, or start a new fit from its weights "
                             f"with --model.init_from {ckpt} (its steps and optimiser afresh)")  # fmt: skip
        self._resume_skip = (epoch, done)

    def take_resume_skip(self) -> tuple[int, int] | None:
        """The skip for the next train loader (once: a later loader, e.g. after reload, starts afresh)."""
        skip, self._resume_skip = self._resume_skip, None
        return skip
