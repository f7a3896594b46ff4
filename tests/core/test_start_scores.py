"""text_attn.core.start_scores: the fit's-end verdict on the start's val score against the best checkpoint's."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from text_attn.core.start_scores import StartScores


def _trainer(best: float, mode: str = "max") -> SimpleNamespace:
    callback = SimpleNamespace(monitor="val_CIDEr", best_model_score=torch.tensor(best), mode=mode)  # float32, kept
    return SimpleNamespace(checkpoint_callbacks=[callback])


def test_a_start_scoring_as_the_best_checkpoint_is_no_better_than_it():
    """The start's score (a float64) and the same score as the checkpoint kept it (float32) differed in their last
    digits: the start's weights were written back as having "scored better" on a tie."""
    start = 2.598512345678901
    scores = StartScores()
    scores.scores = {"val_CIDEr": start}
    line, better = scores.verdict(_trainer(start), "runs/b/model.pt", "val photos")
    assert not better and line.endswith("training did not beat the start on these val photos")
    line, better = scores.verdict(_trainer(start - 0.01), "runs/b/model.pt", "val photos")
    assert better  # a start scoring higher than every checkpoint is kept
    line, better = scores.verdict(_trainer(start + 0.01), "runs/b/model.pt", "val photos")
    assert not better and "did not beat" not in line


def test_the_start_scores_go_with_a_checkpoint_and_come_back_on_resume(tmp_path):
    """A resumed fit had no start score (only a fit's first sanity check records one): a self-critical stage resumed
    wrote trained weights worse than its start, unsaid. Kept as plain numbers: the checkpoint loads weights-only."""
    whole, part = StartScores(), StartScores()
    whole.scores = {"val_CIDEr": 0.8518, "val_loss": 3.25}
    part.partial = (2.0, float("inf"), frozenset({"val_CIDEr", "val_loss"}))
    path = tmp_path / "c.ckpt"
    torch.save({"a": whole.state(), "b": part.state(), "c": StartScores().state()}, path)
    saved = torch.load(path, weights_only=True)
    back, back_part, nothing = StartScores(), StartScores(), StartScores()
    back.restore(saved["a"])
    back_part.restore(saved["b"])
    nothing.restore(saved["c"])  # None: nothing recorded, nothing restored
    assert back.scores == whole.scores and back_part.partial == part.partial
    assert saved["c"] is None and nothing.scores == {} and nothing.partial is None
    line, better = back.verdict(_trainer(0.2567), "flickr8k", "val photos")
    assert better and line.startswith("val_CIDEr: 85.18 from model.init_from flickr8k before training, 25.67 at")
    back.restore({"scores": "odd"})  # a checkpoint of another shape: left as it is
    assert back.scores == whole.scores


def test_a_start_score_is_kept_on_a_resume_only_where_the_val_items_are_the_checkpoints():
    """A resume whose val split changed (another data.seed, a grown folder) compared the start's score on the old val
    items with its best on the new ones, and that comparison chose the weights written (training.load_run_state).
    Another data.test_size alone keeps the val items (review: the digest of val and test together dropped the
    start's scores with a false note)."""
    from text_attn.core.batching import ResumableBatches
    from text_attn.core.training import _same_held_out

    class Held(ResumableBatches):
        def __init__(self, val, test):
            self.splits, self.names = {"val": 1}, [*(f"val:{v}" for v in val), *(f"test:{t}" for t in test)]

        def held_out(self):
            return self.names

    def state(data):
        return {"held_out": data._held_out_digest(), "val_items": data._held_out_digest("val")}

    key = Held.__qualname__  # Lightning's key for a data module's state
    saved = {key: state(Held(["a", "b"], ["c"]))}
    assert _same_held_out(SimpleNamespace(datamodule=Held(["a", "b"], ["c"])), saved)
    assert _same_held_out(SimpleNamespace(datamodule=Held(["a", "b"], ["c", "d"])), saved)  # another test_size
    assert not _same_held_out(SimpleNamespace(datamodule=Held(["a", "x"], ["c"])), saved)  # other val items
    before = {key: {"held_out": saved[key]["held_out"]}}  # a checkpoint of before: val and test together
    assert _same_held_out(SimpleNamespace(datamodule=Held(["a", "b"], ["c"])), before)
    assert not _same_held_out(SimpleNamespace(datamodule=Held(["a", "b"], ["c", "d"])), before)
    trainer = SimpleNamespace(datamodule=Held(["a"], []))
    assert _same_held_out(trainer, {key: {}}) and _same_held_out(trainer, {})  # nothing recorded
    assert _same_held_out(SimpleNamespace(), saved)  # no data module


def test_the_weights_digest_is_the_same_for_one_files_weights_at_any_precision():
    """A self-critical fit resumed at another trainer.precision (bf16-true, then 32) read the unchanged start as
    replaced: its weights were hashed in their own dtype (review)."""
    import copy

    import torch

    from text_attn.core.training import weights_digest

    torch.manual_seed(0)
    full = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 3))
    half = copy.deepcopy(full).to(torch.bfloat16)  # the same file read at bf16-true
    assert weights_digest(half) == weights_digest(full)
    other = copy.deepcopy(full)
    with torch.no_grad():
        other[1].weight[0, 0] += 0.5  # another file
    assert weights_digest(other) != weights_digest(full)


def test_a_start_that_cannot_be_read_again_or_was_replaced_is_not_written_back(capsys):
    """The start put back at the fit's end: gone, or now another model's, it ended the fit with no model file; replaced
    by one of the same shapes, it was written as the start that scored better (RunState.export_against_start)."""
    import torch

    from text_attn.core.start_scores import StartScores
    from text_attn.core.training import RunState, weights_digest

    class Module(RunState, torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2)
            self.trainer = SimpleNamespace(is_global_zero=True, checkpoint_callbacks=[])
            self.hparams = SimpleNamespace(export_path="m.pt")
            self.exported = []

        def export_best(self, path, save, start_weights=None):
            self.exported.append(start_weights is not None)  # the start's weights written, or the trained ones

    module = Module()
    start = StartScores()
    start.weights = weights_digest(module)
    start.verdict = lambda *args: ("val_loss: ...", True)  # the start scored better

    def gone():
        raise ValueError("model.init_from: start.pt: no such file")

    def replaced():
        with torch.no_grad():
            module.layer.weight.add_(1.0)

    for put_start, said in ((gone, "cannot be read as the start again (model.init_from: start.pt: no such file)"),
                            (replaced, "is not the file whose weights were scored before training (replaced since)"),
                            (lambda: None, None)):  # fmt: skip
        RunState.export_against_start(module, None, start, "start.pt", "val items", "tool", True, put_start)
        err = capsys.readouterr().err
        if said is None:
            assert module.exported[-1] is True and "note" not in err  # the same weights: the start written back
        else:
            assert module.exported[-1] is False and f"tool: note: model.init_from start.pt {said}" in err, err
