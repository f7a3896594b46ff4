"""text_attn.core.batching: length-homogeneous batches that reshuffle per epoch, resume mid-epoch and split disjointly
across ranks. (The translation data module's batches: tests/text/test_text_data.py.)"""

from types import SimpleNamespace

import pytest
from torch.utils.data import DistributedSampler

from text_attn.core.batching import EpochShuffle, LengthBatchSampler, ResumableBatches


def test_sampler_reshuffles_each_epoch_but_keeps_batches_sorted():
    s = LengthBatchSampler(EpochShuffle(range(100), seed=1), list(range(100)), batch_size=10)
    first = list(s)
    s.sampler.set_epoch(1)
    second = list(s)
    assert first != second
    assert all(b == sorted(b) for b in first)
    s.sampler.set_epoch(0)
    assert list(s) == first  # the order is a function of seed and epoch alone


def test_sampler_skip_resumes_mid_epoch_and_only_once():
    s = LengthBatchSampler(EpochShuffle(range(50), seed=3), [i % 7 for i in range(50)], batch_size=8)
    full = list(s)
    s.skip = (0, 3)
    assert list(s) == full[3:]
    assert list(s) == full  # the next pass (same epoch here) is whole again


def test_distributed_shares_are_disjoint_equal_and_cover_the_data():
    lengths = [i % 13 for i in range(96)]
    ranks = []
    for rank in range(2):
        dist = DistributedSampler(range(96), num_replicas=2, rank=rank, shuffle=True, seed=0)
        dist.set_epoch(4)
        ranks.append([i for b in LengthBatchSampler(dist, lengths, batch_size=8) for i in b])
    assert len(ranks[0]) == len(ranks[1]) == 48
    assert not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == list(range(96))


def test_pools_of_one_batch_keep_the_samplers_draw():
    # lengths 0..99 shuffled: a sorted pool of 10 batches makes batches of 10 neighbouring lengths; a pool of one batch
    # keeps the shuffled draw, each batch the sampler's next 10 indices, only ordered inside
    order = list(EpochShuffle(range(100), seed=2))
    sorted_pools = list(LengthBatchSampler(EpochShuffle(range(100), seed=2), list(range(100)), batch_size=10))
    assert all(b[-1] - b[0] == 9 for b in sorted_pools)
    drawn = list(LengthBatchSampler(EpochShuffle(range(100), seed=2), list(range(100)), 10, pool_batches=1))
    assert sorted(map(sorted, drawn)) == sorted(sorted(order[p : p + 10]) for p in range(0, 100, 10))
    assert max(b[-1] - b[0] for b in drawn) > 50


class Data(ResumableBatches):
    """A data module's resume state alone: its batch size and the trainer's stage."""

    def __init__(self, batch_size: int, fn: str = "fit", processes: int = 1, seed: int | None = None):
        seeded = {} if seed is None else {"seed": seed}
        self.hparams = SimpleNamespace(batch_size=batch_size, **seeded)
        self.trainer = SimpleNamespace(state=SimpleNamespace(fn=fn), ckpt_path="runs/last.ckpt", world_size=processes)


def test_a_resume_skips_in_the_batch_size_it_was_saved_with_and_refuses_another():
    saved = {"epoch": 1, "batches_done": 3, "batch_size": 16, "epoch_batches": 6}
    same = Data(16)
    same.load_state_dict(saved)
    assert same.take_resume_skip() == (1, 3) and same.take_resume_skip() is None
    with pytest.raises(ValueError) as err:
        Data(8).load_state_dict(saved)
    assert str(err.value) == (
        "data.batch_size 8: the checkpoint trained 3 batches of 16 in epoch 1, and a resume goes on counting in "
        "batches of 16: keep data.batch_size 16, or start a new fit from its weights with --model.init_from "
        "runs/last.ckpt (its steps and optimiser afresh)"
    )
    for fn in ("validate", "test"):  # no train loader: the weights are all they read
        Data(8, fn).load_state_dict(saved)
    old = {"epoch": 1, "batches_done": 3}  # a checkpoint of before: no batch size, no epoch length, resumed as it was
    data = Data(8)
    data.load_state_dict(old)
    assert data.take_resume_skip() == (1, 3)
    fresh = Data(8)
    fresh.load_state_dict({**saved, "batches_done": 0})  # nothing of its epoch trained: nothing to skip
    assert fresh.take_resume_skip() == (1, 0)


def test_a_resume_on_another_number_of_processes_is_refused():
    """Each DDP process trains its share of an epoch's samples, its batches counted per process: resumed on another
    number of processes, 2 -> 1 left 19 of an epoch's 192 samples untrained and trained 67 twice, 1 -> 2 trained 144
    twice, unsaid."""
    saved = {"epoch": 1, "batches_done": 3, "batch_size": 16, "epoch_batches": 6, "processes": 2}
    same = Data(16, processes=2)
    same.load_state_dict(saved)
    assert same.take_resume_skip() == (1, 3)
    for ran, now in ((2, 1), (1, 2)):
        with pytest.raises(ValueError) as err:
            Data(16, processes=now).load_state_dict({**saved, "processes": ran})
        assert str(err.value) == (
            f"{now} process(es) (trainer.devices x trainer.num_nodes): the checkpoint trained 3 batches in epoch 1 on "
            f"{ran}, each process its share of the samples, and a resume goes on from that count: resume on {ran}, or "
            "start a new fit from its weights with --model.init_from runs/last.ckpt (its steps and optimiser afresh)"
        )
    Data(16, "validate").load_state_dict(saved)  # no train loader: the weights are all it reads
    fresh = Data(16)
    fresh.load_state_dict({**saved, "batches_done": 0})  # nothing of its epoch trained: nothing to skip
    assert fresh.take_resume_skip() == (1, 0)
    older = Data(16)
    older.load_state_dict({k: v for k, v in saved.items() if k != "processes"})  # before it was recorded: as it was
    assert older.take_resume_skip() == (1, 3)


def test_a_resume_mid_epoch_with_another_seed_is_refused():
    """The skip counts batches of the checkpoint's order; another data.seed orders the epoch otherwise: an audit's
    resume left 79 of 300 pairs of that epoch untrained and trained 75 twice, unsaid, exit 0."""
    saved = {"epoch": 1, "batches_done": 3, "batch_size": 16, "epoch_batches": 6, "processes": 1, "seed": 0}
    same = Data(16, seed=0)
    same.load_state_dict(saved)
    assert same.take_resume_skip() == (1, 3)
    with pytest.raises(ValueError) as err:
        Data(16, seed=5).load_state_dict(saved)
    assert str(err.value) == (
        "data.seed 5: the checkpoint trained 3 batches of epoch 1 in data.seed 0's order, and a resume skips that many "
        "of this order's: keep data.seed 0, or start a new fit from its weights with --model.init_from runs/last.ckpt "
        "(its steps and optimiser afresh)"
    )
    for state in ({**saved, "batches_done": 6}, {**saved, "batches_done": 0}):  # its epoch closed, or not begun:
        fresh = Data(16, seed=5)  # the next is shuffled afresh
        fresh.load_state_dict(state)
        assert fresh.take_resume_skip()[1] == 0
    Data(16, "test", seed=5).load_state_dict(saved)  # no train loader
    overfit = Data(16, seed=5)
    overfit.trainer.overfit_batches = 2  # the samples read in order: no seed orders them (review: it was refused)
    overfit.load_state_dict(saved)
    assert overfit.take_resume_skip() == (1, 3)
    older = Data(16, seed=5)
    older.load_state_dict({k: v for k, v in saved.items() if k != "seed"})  # before it was recorded: as it was
    assert older.take_resume_skip() == (1, 3)
    running = Data(16, seed=3)
    current = SimpleNamespace(started=2, processed=4)
    progress = SimpleNamespace(current=current)
    running.trainer.fit_loop = SimpleNamespace(
        epoch_progress=progress, epoch_loop=SimpleNamespace(batch_progress=progress)
    )
    running.trainer.num_training_batches, running.trainer.current_epoch = 6, 1
    assert running.state_dict() == {"epoch": 1, "batches_done": 4, "batch_size": 16, "processes": 1, "seed": 3,
                                    "epoch_batches": 6}  # fmt: skip


def test_a_test_of_a_drawn_split_with_other_held_out_items_is_noted(capsys, tmp_path):
    """text-train test of a TSV model with other data.val_size / test_size than its fit's: its "test" pairs were the
    fit's training pairs (100 of 100), scored 12 sacreBLEU above the true split's, unsaid."""

    class Drawn(Data):
        def __init__(self, names: list[str], fn: str, drawn: bool = True):
            super().__init__(16, fn)
            self.splits, self._names, self._drawn = {"val": 1}, names, drawn
            self.trainer.ckpt_path = str(tmp_path / "version_0" / "checkpoints" / "best.ckpt")

        def held_out(self):
            return self._names

        def drawn_split(self):
            return self._drawn

    held = Drawn(["val:a", "test:b"], "fit")._held_out_digest()
    fit = {"epoch": 1, "batches_done": 0, "batch_size": 16, "held_out": held}
    (tmp_path / "version_0").mkdir()
    (tmp_path / "version_0" / "config.yaml").write_text("data: {}\n")
    for fn in ("test", "validate"):
        Drawn(["val:a", "test:b"], fn).load_state_dict(fit)  # the same items: nothing to say
        assert capsys.readouterr().err == ""
        Drawn(["val:a", "test:c"], fn, drawn=False).load_state_dict(fit)  # a corpus's own split files: not drawn
        assert capsys.readouterr().err == ""
        Drawn(["val:a", "test:c"], fn).load_state_dict(fit)
        assert capsys.readouterr().err == (
            "data: note: these val and test items are not those the run the checkpoint comes from held out (other "
            "data.val_size, data.test_size or data.seed, or the data changed): some of them may be items it trained "
            f"on, and the scores are not its own; score with --config {tmp_path / 'version_0' / 'config.yaml'}\n"
        )
    copied = Drawn(["val:a", "test:c"], "test")  # a checkpoint copied beside a config: not the run's config.yaml
    copied.trainer.ckpt_path = str(tmp_path / "version_0" / "best.ckpt")
    (tmp_path / "config.yaml").write_text("data: {}\n")
    copied.load_state_dict(fit)
    assert capsys.readouterr().err.endswith("the scores are not its own; score with the run's data settings\n")
    copied.trainer.ckpt_path = str(tmp_path / "checkpoints" / "best.ckpt")  # a callback's own dirpath beside it
    copied.load_state_dict(fit)
    assert capsys.readouterr().err.endswith("the scores are not its own; score with the run's data settings\n")


def test_an_epoch_cut_short_by_a_limit_resumes_with_the_next_epoch():
    # limit_train_batches / overfit_batches 4 of the loader's 6: 4 done closed the epoch (the loader's length said not)
    data = Data(16)
    data.load_state_dict({"epoch": 2, "batches_done": 4, "batch_size": 16, "epoch_batches": 4})
    assert data.take_resume_skip() == (3, 0)
