"""What every family's LightningModule does the same way: evaluation outputs gathered across DDP ranks (and the
evaluation loss pooled from them over the whole split), a cheap NaN/inf check, random state in checkpoints, a fresh
``max_time`` budget on resume, the best checkpoint at export, option checks and config blocks (``as_config``).

Lightning is not imported here: these helpers take the trainer / module they are given.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from text_attn.core.errors import WriteError, one_line
from text_attn.core.modelfile import file_name
from text_attn.core.ranks import say


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message is one line naming the step."""


def gather_outputs(outputs: list[dict], key: str = "index") -> list[dict]:
    """Every rank's evaluation outputs, on every rank, once per ``key``, ordered by it.

    Under DDP each rank decodes its share of the split (Lightning's DistributedSampler pads the shares to equal size by
    repeating a few items, hence the de-duplication); all ranks then score the same, whole list, so every rank logs the
    same metric and a 2-process run reports exactly what a 1-process run does. In one process this only sorts.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        parts: list[list[dict] | None] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(parts, outputs)
        outputs = [o for part in parts for o in (part or [])]
    unique = {o[key]: o for o in outputs}
    return [unique[k] for k in sorted(unique)]


def row_sums(parts: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> list[dict[str, tuple[float, float]]]:
    """An evaluation batch's loss parts, each given as (summed loss (B,), count (B,)) per row (a caption's summed
    token cross-entropy and its tokens, ...) -> per row {part: (sum, count)}, to keep in that row's output."""
    names = list(parts)
    columns = [(parts[n][0].double().tolist(), parts[n][1].double().tolist()) for n in names]
    rows = len(columns[0][0]) if columns else 0
    return [{n: (sums[b], counts[b]) for n, (sums, counts) in zip(names, columns, strict=True)} for b in range(rows)]


def pooled_means(outputs: list[dict], key: str = "sums") -> dict[str, float]:
    """Each loss part over the whole split (``outputs``, gathered: :func:`gather_outputs`): its rows' summed loss over
    their summed count (``output[key]``: :func:`row_sums`' row), 0 where the count is 0 (no supervised step). A
    checkpoint's loss is then the same whatever the batches; Lightning's epoch value, the mean of each batch's mean
    weighed by its rows, moved with data.batch_size (a batch's mean is over its tokens, and batches of long sentences
    hold more)."""
    totals: dict[str, list[float]] = {}
    for out in outputs:
        for name, (value, count) in out[key].items():
            total = totals.setdefault(name, [0.0, 0.0])
            total[0] += value
            total[1] += count
    return {name: value / count if count else 0.0 for name, (value, count) in totals.items()}


def check_finite(loss: torch.Tensor, step: int) -> None:
    """Stop with one line when the loss is NaN/inf (one scalar check per step: far cheaper than detect_anomaly)."""
    if not bool(torch.isfinite(loss.detach())):
        raise TrainingDiverged(
            f"the training loss is {loss.item()} at step {step}: training stopped (lower model.lr, set "
            "trainer.gradient_clip_val, or resume from an earlier checkpoint)"
        )


def random_state() -> dict[str, Any]:
    """Python, torch (and CUDA) random states now, as :func:`restore_random_state` sets them."""
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def save_random_state(checkpoint: dict[str, Any]) -> None:
    """The random states in ``checkpoint``, so dropout and sampling continue as if never interrupted."""
    checkpoint["random_state"] = random_state()


def weights_digest(module: Any) -> str:
    """A digest of ``module``'s weights (start_scores: the start's weights scored and those put back), its floating
    ones as bfloat16: the same file's weights read at another ``trainer.precision`` (bf16-true, then 32 on a resume)
    round to the same bits there (bit for bit in their own dtype, they differed: the start was said replaced)."""
    digest = hashlib.sha256()
    for key, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu()
        t = t.to(torch.bfloat16) if t.is_floating_point() else t
        digest.update(key.encode())
        digest.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


def _same_held_out(trainer: Any, checkpoint: dict[str, Any]) -> bool:
    """Whether the data module's val items are those its state in ``checkpoint`` recorded (batching.ResumableBatches:
    a digest of them; of val and test together in a checkpoint of before, where another data.test_size tells them
    apart too); True where either cannot say."""
    data = getattr(trainer, "datamodule", None)
    digest = getattr(data, "_held_out_digest", None)
    saved = checkpoint.get(type(data).__qualname__) if data is not None else None
    if not callable(digest) or not isinstance(saved, dict) or not saved.get("held_out"):
        return True
    now = digest("val") if saved.get("val_items") else digest()
    return now is None or now == (saved.get("val_items") or saved["held_out"])


def restore_random_state(state: dict[str, Any] | None) -> None:
    """Set the states :func:`save_random_state` stored. Call it at the start of training (``on_train_start``), not
    when the checkpoint loads: creating the train loader's iterator draws from torch's generator in between, as it
    did in the interrupted run before the state was saved (mid-epoch; at an epoch's end, :func:`replay_epoch_start`)."""
    if not state:
        return
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def replay_epoch_start(trainer) -> None:
    """After :func:`restore_random_state`, for a run resumed from a checkpoint written at an epoch's last batch: the
    draws an uninterrupted run makes after that save, when the next epoch's loader iterator is made (a DataLoader
    without its own generator draws its base seed from torch's, one number). The resumed run made its iterator
    before the state was restored, so without them dropout and sampling ran one number behind the uninterrupted run.
    Mid-epoch the iterator was made before the save in both runs: nothing to replay. A loader with persistent
    workers makes no new iterator at an epoch's start: nothing either."""
    loop = getattr(trainer, "fit_loop", None)
    batches = getattr(trainer, "num_training_batches", 0)
    done = loop.epoch_loop.batch_progress.current.ready if loop is not None else 0
    if not isinstance(batches, int) or batches <= 0 or done < batches:
        return
    for loader in _train_loaders(trainer):
        if not isinstance(loader, torch.utils.data.DataLoader) or loader.generator is not None:
            continue
        if loader.persistent_workers and loader.num_workers > 0:
            continue
        torch.empty((), dtype=torch.int64).random_()  # what _BaseDataLoaderIter draws for its base seed


def mend_restart_at_epoch_end(trainer) -> None:
    """A fit resumed from a checkpoint saved at an epoch's last step: Lightning 2.6 counts that epoch done as it
    restarts (its fit loop's ``reset``), but its restart stage still says "mid-epoch", so the next epoch starts
    without being counted started (nor its ``on_train_epoch_start`` hooks called). Every checkpoint that run then
    wrote named the epoch before the one it was in (the data module's state too): a second resume trained an epoch
    over again, its steps past the end and its validations labelled one epoch low. The stage is cleared here, once
    the epoch is counted done, and the next epoch starts as in a run never stopped."""
    loop = getattr(trainer, "fit_loop", None)
    progress = getattr(loop, "epoch_progress", None)
    if progress is None or not getattr(loop, "restarted_mid_epoch", False):
        return
    done = progress.current
    if done.started == done.processed == done.completed:  # the restarted epoch counted done by Lightning's reset
        loop.reset_restart_stage()


def forget_elapsed_time(checkpoint: dict[str, Any]) -> None:
    """A resumed ``fit`` gets ``trainer.max_time`` of its own: drop the Timer's elapsed time from the checkpoint.

    Lightning would restore it, so a run stopped by max_time would resume, train 0 steps and exit.
    """
    callbacks = checkpoint.get("callbacks") or {}
    for name in [k for k in callbacks if str(k).startswith("Timer")]:
        del callbacks[name]


def check_same_rate(module, checkpoint: dict[str, Any]) -> None:
    """A fit resumed with another ``model.lr`` is refused in one line: Lightning restores the optimiser and the
    schedule, which go on at the checkpoint's rate, while the run's record (hparams, config.yaml) said the new one
    (the weights were those of the old rate to the bit). validate / test read no rate."""
    trainer = getattr(module, "_trainer", None)
    if getattr(getattr(trainer, "state", None), "fn", None) != "fit":  # a bare load: no trainer, or a stand-in's
        return
    for name in ("lr", "encoder_lr"):  # the caption family's encoder group has a rate of its own
        saved, now = (checkpoint.get("hyper_parameters") or {}).get(name), getattr(module, "hparams", {}).get(name)
        if saved is None or now is None or math.isclose(float(saved), float(now), rel_tol=1e-9):
            continue
        ckpt = getattr(trainer, "ckpt_path", None) or "CKPT"
        raise ValueError(f"model.{name} {now}: a resumed fit goes on with the checkpoint's optimiser and schedule, at "
                         f"its model.{name} {saved}: keep model.{name} {saved}, or start a new fit from its weights "
                         f"with --model.init_from {ckpt} (its steps and optimiser afresh, at the new "
                         "rate)")  # fmt: skip


def carry_best(trainer, checkpoint: dict[str, Any]) -> None:
    """A resumed fit keeps the best model and score its checkpoint callbacks had, though it writes into a new folder
    (run_checkpoints.carried_best; a validate or test, which load the callbacks' state too, without Lightning's notice
    that the folder changed). Called from ``on_load_checkpoint``, before Lightning loads the callbacks' state."""
    from text_attn.core.run_checkpoints import carried_best

    states = checkpoint.get("callbacks") or {}
    for cb in getattr(trainer, "checkpoint_callbacks", None) or []:
        key, dirpath = getattr(cb, "state_key", None), getattr(cb, "dirpath", None)
        if key in states and dirpath and isinstance(states[key], dict):
            resumed = getattr(trainer, "ckpt_path", None)  # the file resumed: where its recorded paths are found
            states[key] = carried_best(states[key], dirpath, checkpoint.get("global_step"),
                                       Path(resumed) if resumed else None)  # fmt: skip


def log_at_checkpoint_step(trainer, checkpoint: dict[str, Any]) -> int | None:
    """``validate`` / ``test`` of a checkpoint: their scores logged at the checkpoint's step, not at step 0 (Lightning
    restores the training loops for fit only, and logs a validation at the loop's count of steps): ``report`` said a
    checkpoint of step 30 was "best ... at step 1", and TensorBoard drew it at the run's start. Returns the count it
    replaced (:meth:`RunState.give_back` puts it back: a later fit on the same trainer counts as before); None where
    nothing was changed (fit, predict, a loop without Lightning 2.6's private counter)."""
    state = getattr(trainer, "state", None)
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    if getattr(state, "fn", None) not in ("validate", "test") or not hasattr(loop, "_batches_that_stepped"):
        return None
    step = checkpoint.get("global_step")
    if not isinstance(step, int):
        return None
    # a fit logs the validation after step N at N - 1 (its count before the step's own, which report reads as N): the
    # same here, whichever count the checkpoint's loop state holds (one more where it was saved at an epoch's end)
    before, loop._batches_that_stepped = loop._batches_that_stepped, max(step - 1, 0)
    return before


def _log_the_step(trainer) -> None:
    """Log the training step just done, as Lightning does after the module's ``on_train_batch_end``: a stop raised
    from that hook came before it, and a fit stopped at step 5 with log_every_n_steps 5 saved last.ckpt there but
    logged nothing of the step (Lightning 2.6's logger connector; one without its methods is left as it is)."""
    connector = getattr(trainer, "_logger_connector", None)
    if all(hasattr(connector, name) for name in ("on_batch_end", "update_train_step_metrics")):
        connector.on_batch_end()
        connector.update_train_step_metrics()  # at the steps log_every_n_steps names only, as Lightning's


def save_last_at_end(trainer, at_batch_end: bool = False) -> None:
    """A fit that ends between two periodic saves of last.ckpt (``every_n_train_steps``) saves it once more where it
    ended: Lightning's own end-of-fit save of last runs only where none was made, and a resume from the older one
    redid the steps since. Called from the module's ``on_train_batch_end`` at the step ``max_steps`` stops at
    (``at_batch_end``: the state a periodic save has there, which resumes exactly, at an epoch's last batch too), and
    from its ``on_train_end`` for the other stops (max_time, early stopping), only while their epoch is unfinished:
    once an epoch has ended Lightning's progress names the next one with the last one's batches done, and a run
    resumed from such a checkpoint skipped an epoch (the older last.ckpt then stays: resumed from it, the steps since
    are redone, exactly). On every rank: saving is a collective under DDP. Uses ModelCheckpoint's own save of last
    (its private methods: Lightning 2.6); one without them is left to Lightning."""
    if not at_batch_end:
        progress = getattr(getattr(trainer, "fit_loop", None), "epoch_progress", None)
        if progress is None or progress.current.completed >= progress.current.started:
            return
    for cb in getattr(trainer, "checkpoint_callbacks", []):
        private = ("_save_last_checkpoint", "_should_skip_saving_checkpoint", "_monitor_candidates")
        if not getattr(cb, "save_last", False) or not all(hasattr(cb, name) for name in private):
            continue
        if not cb._should_skip_saving_checkpoint(trainer):
            before = getattr(cb, "_last_global_step_saved", None)
            cb._save_last_checkpoint(trainer, cb._monitor_candidates(trainer))
            if at_batch_end and cb.monitor is not None and before is not None:
                # the step's validation follows: a monitored callback keeps its best there, which its "saved at
                # this step" mark would skip (the fit's last validation never became a best checkpoint)
                cb._last_global_step_saved = before


def _saves_last(trainer) -> bool:
    return any(getattr(cb, "save_last", False) for cb in getattr(trainer, "checkpoint_callbacks", None) or [])


def defer_ctrl_c(module, command: str) -> None:
    """From a fit's first training step to its end (``on_train_start`` to ``on_train_end``): Ctrl-C asks the run to
    stop where a save resumes exactly (:func:`stop_asked`): at the end of the training step in progress (or of the next
    one, where it came while a batch was read), or at the end of the validation in progress (which can take minutes:
    ``command`` says so on stderr at once); last.ckpt is saved there. Raising KeyboardInterrupt mid-step saved nothing
    that resumes exactly (the weights half updated), and mid-validation nothing at all (a save there would resume into
    a validation half scored). A second Ctrl-C raises at once. Only where the run keeps a last.ckpt (a ModelCheckpoint
    with save_last), in one process (under DDP the ranks would have to agree on the step: Lightning's own stop is
    kept), on the main thread, and where SIGINT is Python's own handler. :func:`undefer_ctrl_c` at the fit's end, or
    Lightning's signal connector after an exception, puts back the handler the run began with."""
    import signal
    import threading

    trainer = module.trainer
    own = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    main = threading.current_thread() is threading.main_thread()
    if not (own and main and getattr(trainer, "world_size", 1) == 1 and _saves_last(trainer)):
        return

    owner = os.getpid()

    def asked(number: int, frame: Any) -> None:
        if os.getpid() != owner:  # a loader worker forked while the fit trains: the fit's process decides, says once
            return
        if module._stop_asked == "SIGINT":  # the second Ctrl-C: at once
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        module._stop_asked = "SIGINT"
        # what is waited for (a validation may take minutes, a batch read from a slow disk too), and the way out
        where = "after this training step"
        if _epoch_ended(trainer):  # its validation first: a resume would skip it
            where = "after this epoch's validation and the next training step (or as the fit ends)"
        elif getattr(trainer, "validating", False):
            where = "once this validation ends"
        print(f"\n{command}: Ctrl-C: stopping {where}, saving last.ckpt there (Ctrl-C again stops now, saving "
              "nothing)", file=sys.stderr, flush=True)  # fmt: skip

    global _deferring
    _deferring = asked
    signal.signal(signal.SIGINT, asked)


_deferring: Any = None  # defer_ctrl_c's handler while a fit trains (not on the module: it stays picklable)


def undefer_ctrl_c() -> None:
    """Ctrl-C raises KeyboardInterrupt again (the fit has ended: its test, export or the caller's code may follow)."""
    import signal

    global _deferring
    if _deferring is not None and signal.getsignal(signal.SIGINT) is _deferring:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    _deferring = None


def stop_asked(module) -> str | None:
    """Why the run is to stop after the step or validation just done: "SIGINT" (Ctrl-C, :func:`defer_ctrl_c`),
    "SIGTERM" (Lightning's signal connector got one: a scheduler's time limit, a preemption, ``kill``) or None. Read
    at a step's end (``on_train_batch_end``) and a fit's validation's end (``on_validation_end``), where a save resumes
    exactly; one process only (see :func:`defer_ctrl_c`)."""
    trainer = module.trainer
    if getattr(trainer, "world_size", 1) > 1:
        return None
    if getattr(module, "_stop_asked", None):
        return module._stop_asked
    return "SIGTERM" if getattr(trainer, "received_sigterm", False) else None


def _epoch_ended(trainer) -> bool:
    """Whether the step just done was its epoch's last. A save at the end of a validation there resumed 0.04 off an
    uninterrupted run (the data module names the next epoch, while Lightning finishes this one): a stop waits for the
    next step's end, where a save resumes exactly; after the fit's last epoch the fit ends anyway, writing its model."""
    batches = getattr(trainer, "num_training_batches", None)
    done = trainer.fit_loop.epoch_loop.batch_progress.current.ready
    return isinstance(batches, int) and 0 < batches <= done


def _validates_this_epoch(trainer) -> bool:
    """Whether the fit validates at the end of the epoch running, and there only (validation on, once an epoch:
    ``val_check_interval`` 1.0, its epoch due by ``check_val_every_n_epoch``). Every N steps:
    :func:`_validation_follows`."""
    every = getattr(trainer, "check_val_every_n_epoch", 1)
    due = every is None or (trainer.current_epoch + 1) % every == 0
    interval = getattr(trainer, "val_check_interval", None)
    at_end = isinstance(interval, float) and interval == 1.0
    return bool(getattr(trainer, "enable_validation", False)) and due and at_end


def _validation_follows(trainer) -> bool:
    """Whether Lightning validates after the step just done, by its own test (2.6's training epoch loop), asked at the
    step's end as the loop asks it after: a fit validating every N steps (``val_check_interval`` a count, or a fraction
    of an epoch), mid-epoch or at an epoch's end. A time-based interval or an early stop is not one a resume can
    replay: False."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    should = getattr(loop, "_should_check_val_fx", None)
    if should is None or not getattr(trainer, "enable_validation", False):
        return False
    if getattr(trainer, "_val_check_time_interval", None) is not None or trainer.should_stop:
        return False
    # at a step's end (its on_train_batch_end hooks: Lightning counts the step completed after them), not after its
    # validation: a save as the fit ends (on_train_end) was marked too, and its resume validated again and never
    # trained another step (its loop ran epochs of no batch, forever)
    done = loop.batch_progress.current
    if done.completed != done.processed - 1:
        return False
    return bool(should(trainer.fit_loop._data_fetcher))


def _train_loaders(trainer) -> list[Any]:
    """The fit's train loaders, as Lightning's fit loop holds them (none before it has them)."""
    loop = getattr(trainer, "fit_loop", None)
    return getattr(getattr(loop, "_combined_loader", None), "flattened", None) or []


def _train_loader_seeds_itself(trainer) -> bool:
    """Whether the fit's train loader draws its seeds from a generator of its own (text_attn.core.streaming's), not
    from torch's (a DataLoader without one draws its base seed there as an epoch starts)."""
    loaders = _train_loaders(trainer)
    return bool(loaders) and all(getattr(loader, "generator", None) is not None for loader in loaders)


def run_due_validation(trainer) -> None:
    """A fit resumed from a checkpoint saved at an epoch's last step, before that epoch's validation (a periodic
    last.ckpt, ``every_n_train_steps``, falling there; the run then stopped, or is resumed from that file): the
    validation runs first, as in the run that saved it (its score was never logged in the resumed run, nor weighed for
    the best model: a crash between the save and the validation lost it). The loop's own validation call (Lightning
    2.6's training epoch loop: ``validating``, run, ``training`` again)."""
    val_loop = trainer.fit_loop.epoch_loop.val_loop
    # a validation the saved run never began: run whole, not on from the progress its last validation left in the
    # checkpoint (resumed at the fit's last step it counted those batches as fetched and ran 1 of 3, its score logged)
    val_loop.restarting = False
    trainer.validating = True
    val_loop.run()
    trainer.training = True


def best_checkpoint(trainer) -> str | None:
    """The best checkpoint of the first ModelCheckpoint that monitors a metric, if it saved one."""
    for cb in getattr(trainer, "checkpoint_callbacks", []):
        best = getattr(cb, "best_model_path", "")
        if getattr(cb, "monitor", None) and best and Path(best).is_file():
            return best
    return None


def export_target(module, export_path: str | None) -> str:
    """Where ``fit`` writes the model file: ``export_path``, else ``<log dir>/model.pt``.

    Call it on every rank: ``trainer.log_dir`` is a collective under DDP.
    """
    trainer = module.trainer
    if export_path:
        return export_path  # as given: `wrote model file:` prints what the user typed
    path = Path(trainer.log_dir or trainer.default_root_dir, "model.pt")
    # Lightning makes an unset default_root_dir the absolute working directory: a file under it is named from there
    # (lightning_logs/version_0/model.pt), as the user would type it
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


@contextmanager
def best_weights(module) -> Iterator[str | None]:
    """Within the block, ``module`` holds the best checkpoint's weights (by the monitored metric); yields its path, or
    None (the module as it was). After the block the module holds its own weights again, the last step's, as the
    trainer's step and the optimizer are: left in, the best weights went on into a further fit, validate or
    ``trainer.save_checkpoint`` from Python labelled as the last step. Only the tensors that differ are kept aside (a
    frozen encoder is the same in both)."""
    best = best_checkpoint(module.trainer)
    if best is None:
        yield None
        return
    state = torch.load(best, map_location=module.device, weights_only=True)["state_dict"]
    own = module.state_dict()
    last = {k: v.detach().clone() for k, v in own.items() if k not in state or not torch.equal(v, state[k])}
    module.load_state_dict(state)
    try:
        yield best
    finally:
        module.load_state_dict(last, strict=False)


@contextmanager
def weights_kept(module) -> Iterator[None]:
    """Within the block the module's weights may be replaced (a fit's start, for its export: RunState.export_best);
    after it they are its own again, the last step's (as :func:`best_weights` leaves them)."""
    own = {k: v.detach().clone() for k, v in module.state_dict().items()}
    try:
        yield
    finally:
        module.load_state_dict(own)


def _dotted(options: dict[str, Any], prefix: str) -> dict[str, Any]:
    """{"decoder": {"hidden_dim": 32}} -> {"model.decoder.hidden_dim": 32}: nested blocks by their option names."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, dict) and value:
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def weight_misfit(own: dict[str, Any], saved: dict[str, Any]) -> str | None:
    """The first weight that differs between a network's state dict and saved weights, described ("NAME: (32,) in
    the file, (48,) here", "NAME: only in the file", "NAME: not in the file"); None when all fit. A missing or extra
    name comes first (sorted), then a shape, in the network's order (its first layer first)."""
    bad = sorted(set(saved) ^ set(own)) + [k for k in own if k in saved and saved[k].shape != own[k].shape]
    if not bad:
        return None
    k = bad[0]
    if k in own and k in saved:
        return f"{k}: {tuple(saved[k].shape)} in the file, {tuple(own[k].shape)} here"
    return f"{k}: {'only in the file' if k in saved else 'not in the file'}"


INIT_VOCAB = ("extend", "keep")  # model.init_vocab, both families: what a run started from a model does with new words


def started_from(name: str, info: dict[str, Any]) -> dict[str, str]:
    """The facts a model trained from ``name`` (``model.init_from``; ``info``: that file's facts) records in its own
    file: where it started, where that start started (``earlier_starts``, newest first: a second stage's file said only
    "started from: model.pt", the bundled model the first began from lost), and the terms of the data that start was
    trained on, which apply to it too (the bundled models': Flickr8k's, Multi30k's)."""
    # a bundled corpus's, or the user's own (its name; a captioner's photos: "my_photos: 150 train photos ...")
    what = info.get("training_data") or info.get("trained_on") or info.get("photos")
    shown = file_name(name)
    out = {"started_from": shown + (f", trained on {what}" if what else "")}
    earlier = [str(info[key]) for key in ("started_from", "earlier_starts") if info.get(key)]
    if earlier:
        out["earlier_starts"] = "; ".join(earlier)
    if info.get("terms"):
        out["terms"] = info["terms"]
    return out


def grow_rows(own: dict[str, Any], saved: dict[str, Any], old_rows: int, new_rows: int) -> dict[str, Any]:
    """``saved`` with the rows of its vocabulary-sized weights grown from ``old_rows`` to ``new_rows`` to fit ``own``
    (a network built for a vocabulary that :meth:`Vocabulary.extended` grew): the embedding, the output layer and its
    bias. A weight grows when its first dimension is ``old_rows`` in the file and ``new_rows`` here, the rest equal.

    A new row is the mean of the old rows (Hewitt 2021, "Initializing new word embeddings"): a new word's embedding is
    an average word's, and its logit the mean of the old words' logits in every context, so the model's captions do not
    change until training teaches it when to say the word (a row of zeros would give every new word a logit of 0,
    above most words' logits in a trained model: it would be said everywhere)."""
    if new_rows == old_rows:
        return saved
    out = dict(saved)
    for name, value in saved.items():
        mine = own.get(name)
        if mine is None or value.ndim == 0 or value.shape[0] != old_rows or mine.shape[0] != new_rows:
            continue
        if tuple(value.shape[1:]) != tuple(mine.shape[1:]):
            continue
        mean = value.float().mean(dim=0, keepdim=True).to(value.dtype)
        out[name] = torch.cat([value, mean.expand(new_rows - old_rows, *value.shape[1:])], dim=0)
    return out


def check_weights_fit(module, checkpoint: dict[str, Any]) -> None:
    """Refuse, in one line, a checkpoint whose weights do not fit the network built from the options given.

    Options on the command line win over a checkpoint's (so ``--model.val_beam_size 3`` with ``--ckpt_path`` is
    honoured); an option that changes the network's shape cannot, and is named here instead of a size-mismatch trace.
    """
    misfit = weight_misfit(module.state_dict(), checkpoint.get("state_dict", {}))
    if misfit is None:
        return
    old = _dotted(checkpoint.get("hyper_parameters", {}), "model.")
    new = _dotted(dict(module.hparams), "model.")
    changed = [f"{k}={new.get(k)!r} (checkpoint: {old.get(k)!r})" for k in sorted(old) if old.get(k) != new.get(k)]
    hint = "; ".join(changed) if changed else f"first differing weight: {misfit}"
    raise ValueError(
        f"the checkpoint's weights do not fit the network these options build ({hint}): "
        "leave the network's options as they were trained, or start a new run"
    )


class RunState:
    """Mixin for a family's LightningModule: what both families do the same way around checkpoints and export.

    The module calls :meth:`save_run_state` from ``on_save_checkpoint``, :meth:`load_run_state` from
    ``on_load_checkpoint`` and :meth:`export_best` from ``on_fit_end``; ``on_train_start``, ``teardown`` and
    ``configure_callbacks`` are provided here (a module with callbacks of its own adds them to this one's).
    """

    _random_state: dict[str, Any] | None = None
    command = "train"  # the family's training command, naming the lines a run prints (text-train, caption-train)
    _stop_asked: str | None = None  # "SIGINT": Ctrl-C during this fit (defer_ctrl_c), not yet acted on
    _threads_before: int | None = None  # torch's CPU threads before ``use_cpu_threads``, given back at teardown
    _steps_before: int | None = None  # the trainer's count of logged steps before a scored checkpoint's (give_back)
    _from_checkpoint = False  # a checkpoint's weights were loaded (a resume, load_from_checkpoint): check_fit_start

    def use_cpu_threads(self, threads: int | None) -> None:
        """``model.cpu_threads``: torch's CPU threads while this run lasts (call it from ``setup``). torch's count is
        the whole process's, so ``teardown`` gives the caller (a notebook, a test, a script that fits) its own back."""
        if threads and self._threads_before is None:
            self._threads_before = torch.get_num_threads()
            torch.set_num_threads(threads)

    def teardown(self, stage: str) -> None:
        self.give_back()

    def give_back(self) -> None:
        """What the run took from the process, given back: from ``teardown`` after a run that ends, and from
        ``on_exception`` (lightning_parts.GiveBackOnException) after one that raised or was interrupted, where
        Lightning calls no teardown hook."""
        undefer_ctrl_c()  # a fit that raised mid-training: Ctrl-C raises KeyboardInterrupt again, not deferred
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
            self._threads_before = None
        if self._steps_before is not None and self._trainer is not None:  # log_at_checkpoint_step's count
            self._trainer.fit_loop.epoch_loop._batches_that_stepped = self._steps_before
            self._steps_before = None

    def configure_callbacks(self) -> list:
        """:class:`~text_attn.core.lightning_parts.GiveBackOnException` and
        :class:`~text_attn.core.lightning_parts.FitStartCheck`, each unless the trainer has one (a second fit,
        validate or test on the same trainer: Lightning would print that the module's replaces it). A family's module
        that adds callbacks of its own puts them after these."""
        from text_attn.core.lightning_parts import FitStartCheck, GiveBackOnException

        have = getattr(self._trainer, "callbacks", None) or []
        kinds = (GiveBackOnException, FitStartCheck)
        return [kind() for kind in kinds if not any(isinstance(cb, kind) for cb in have)]

    def check_fit_start(self, from_checkpoint: bool) -> None:
        """A family's checks of a fit that need to know whether the module holds a checkpoint's weights
        (``from_checkpoint``: a resume with ``--ckpt_path``, or ``load_from_checkpoint``), one ValueError line each;
        called by :class:`~text_attn.core.lightning_parts.FitStartCheck`. None here."""

    def save_run_state(self, checkpoint: dict[str, Any]) -> None:
        save_random_state(checkpoint)
        start = getattr(self, "_start", None)  # model.init_from's val scores before the first step (start_scores)
        if start is not None and (kept := start.state()) is not None:
            checkpoint["start_scores"] = kept
        trainer = self._trainer
        fitting = getattr(getattr(trainer, "state", None), "fn", None) == "fit"  # not a stand-in trainer's
        if fitting and trainer.training and (_epoch_ended(trainer) and _validates_this_epoch(trainer)
                                             or _validation_follows(trainer)):  # fmt: skip
            # a save at a step that a validation follows (a periodic last.ckpt at an epoch's last step, or at one of
            # the every-N-steps checks) comes before that validation
            checkpoint["validation_due"] = True
        # Under DDP every rank's dropout has drawn its own numbers (its batches differ in shape): keep each rank's
        # state. Every rank builds the checkpoint (Lightning writes rank 0's), so the gather meets on all of them.
        world = getattr(self._trainer, "world_size", 1) if self._trainer is not None else 1
        if world > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            states: list[Any] = [None] * world
            torch.distributed.all_gather_object(states, checkpoint["random_state"])
            checkpoint["random_state_by_rank"] = states

    def load_run_state(self, checkpoint: dict[str, Any], network_built: bool) -> None:
        """Refuse weights that do not fit (once the network exists), keep the random state for ``on_train_start``
        (this rank's, when the checkpoint has one per rank of the same number), and give the resumed fit a
        ``max_time`` of its own."""
        if network_built:
            check_weights_fit(self, checkpoint)
        check_same_rate(self, checkpoint)
        self._from_checkpoint = True
        self._random_state = checkpoint.get("random_state")
        by_rank = checkpoint.get("random_state_by_rank")
        trainer = self._trainer
        if by_rank and trainer is not None and len(by_rank) == trainer.world_size:
            self._random_state = by_rank[trainer.global_rank]
        forget_elapsed_time(checkpoint)
        carry_best(trainer, checkpoint)
        self._steps_before = log_at_checkpoint_step(trainer, checkpoint)
        self._validation_due = bool(checkpoint.get("validation_due"))
        start = getattr(self, "_start", None)
        init_from = getattr(getattr(self, "hparams", None), "init_from", None)
        if start is not None and init_from and "start_scores" in checkpoint:  # a resumed fit compares with its start
            if _same_held_out(trainer, checkpoint):  # still (a resume without it: no start to write back)
                start.restore(checkpoint["start_scores"])
            else:  # scored on other val items: compared with this run's best, they chose the weights written
                say("model: note: model.init_from's scores before training were of other val items than this run's "
                    "(see the data's note): they are not compared with this run's best")  # fmt: skip

    def on_train_start(self) -> None:
        if getattr(self.trainer, "fast_dev_run", False):
            # a smoke test saves no checkpoint: Lightning's ModelCheckpoint saves last.ckpt at the fit's end without
            # asking (2.6), and `--ckpt_path last` then resumed the smoke test (`best`: refused, none recorded)
            for callback in self.trainer.checkpoint_callbacks:
                callback.save_last = False
        due, self._validation_due = getattr(self, "_validation_due", False), False
        mend_restart_at_epoch_end(self.trainer)
        if self._random_state is not None:
            restore_random_state(self._random_state)
            if due:  # its loader's draw is the one the replay stands in for (the run that saved it validated here)
                mid_epoch = not _epoch_ended(self.trainer)
                run_due_validation(self.trainer)
                if mid_epoch or _train_loader_seeds_itself(self.trainer):
                    # the first batch starts from the state the validation left, as in the run that saved: a loader
                    # with its own generator (a chunk folder's) draws nothing at the epoch's start there, and the
                    # resumed run draws a number before its first batch; mid-epoch, Lightning's restart of the loop
                    # draws one more (the validation it counts as done) (dropout ran one draw ahead, the weights
                    # differed)
                    self._state_at_first_batch = random_state()
            else:
                replay_epoch_start(self.trainer)
        elif due:
            run_due_validation(self.trainer)
        self._random_state = None
        self._stop_asked = None
        defer_ctrl_c(self, self.command)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if (state := getattr(self, "_state_at_first_batch", None)) is not None:
            restore_random_state(state)
            self._state_at_first_batch = None

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        trainer = self.trainer
        last = trainer.max_steps is not None and 0 < trainer.max_steps <= trainer.global_step  # the fit's last step
        # a stop waits for the optimizer's step: mid-accumulation (accumulate_grad_batches > 1) the gradient summed so
        # far would be lost, and the resume not exact; Ctrl-C stays deferred until then
        stepped = (batch_idx + 1) % max(1, int(getattr(trainer, "accumulate_grad_batches", 1) or 1)) == 0 or (
            batch_idx + 1 == getattr(trainer, "num_training_batches", None))  # fmt: skip
        stop = stop_asked(self) if stepped else None  # at the last step too: Lightning stops at the epoch's end anyway
        if stop and not last and _epoch_ended(trainer):
            # the epoch's last step: its validation is still to run, and a resume from here skipped it (that epoch's
            # score never logged nor weighed for the best model); the stop waits for the next step's end
            # (on_train_epoch_end keeps a SIGTERM for it), as one during that validation does
            stop = None
        if last or stop:
            save_last_at_end(trainer, at_batch_end=True)  # a stop: last.ckpt at the step reached, as at max_steps
        if stop:
            _log_the_step(trainer)  # the step last.ckpt holds is in the logs too (report draws up to it)
        self._stop_now(stop)

    def on_validation_end(self) -> None:
        """A stop asked during a fit's validation (Ctrl-C, SIGTERM): last.ckpt saved here, at its end, where the
        ModelCheckpoint callbacks have seen its scores (they run before the module's hook), then the run stops; a
        resume goes on with the next training step, this validation not run again. Not during the sanity check (no
        step yet: Ctrl-C stops at once), nor mid-accumulation (the stop waits for the optimizer's step), nor at an
        epoch's end (:func:`_epoch_ended`: the stop waits for the next step's end)."""
        trainer = self.trainer
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        epoch_loop = trainer.fit_loop.epoch_loop
        if getattr(epoch_loop, "_should_accumulate", lambda: False)() or _epoch_ended(trainer):
            return
        stop = stop_asked(self)
        if stop:
            save_last_at_end(trainer, at_batch_end=True)
        self._stop_now(stop)

    def on_train_epoch_end(self) -> None:
        """A SIGTERM at an epoch's end (during its validation, its hooks): Lightning stops as the epoch ends, where
        nothing saved resumes exactly (see :func:`_epoch_ended`), so this run takes it over and stops at the next
        step's end instead, saving last.ckpt there, as for Ctrl-C. One process only (see :func:`defer_ctrl_c`)."""
        trainer = self.trainer
        connector = getattr(trainer, "_signal_connector", None)
        if getattr(trainer, "world_size", 1) == 1 and getattr(connector, "received_sigterm", False):
            if _saves_last(trainer):
                self._stop_asked, connector.received_sigterm = "SIGTERM", False

    def _stop_now(self, stop: str | None) -> None:
        if stop == "SIGTERM":  # now, not after this step's validation: Lightning would stop there too, saving nothing
            from pytorch_lightning.utilities.exceptions import SIGTERMException

            connector = getattr(self.trainer, "_signal_connector", None)
            if connector is not None:  # taken over at an epoch's end (on_train_epoch_end): the command exits 143
                connector.received_sigterm = True
            raise SIGTERMException
        if stop == "SIGINT":
            raise KeyboardInterrupt

    def on_train_end(self) -> None:
        undefer_ctrl_c()  # Ctrl-C stops the fit's export, test or the caller's code at once again
        save_last_at_end(self.trainer)

    def export_against_start(self, save, start, name: str | None, examples: str, tool: str, scst: bool,
                             put_start) -> None:  # fmt: skip
        """End of fit, both families: the line comparing model.init_from (``name``) with the best checkpoint
        (``start``: the fit's start_scores.StartScores; ``examples``: what its val split holds), said as ``tool``,
        then :meth:`export_best`. A self-critical stage (``scst``) whose start scored better writes the start's
        weights, which ``put_start()`` puts back in the module (the last step's are restored after: weights_kept);
        a cross-entropy fit keeps its trained ones (start_scores: why SCST only)."""
        line, start_better = start.verdict(self.trainer, name, examples)
        if line and self.trainer.is_global_zero:
            print(f"{tool}: {line}", file=sys.stderr)
        if start_better and scst:  # the file read again must hold the weights that were scored
            why = None
            with weights_kept(self):
                try:
                    put_start()
                except (ValueError, OSError, RuntimeError) as err:  # gone, or another model's now (another
                    why = f"cannot be read as the start again ({one_line(err)})"  # vocabulary): no model file was
                else:
                    if start.weights and weights_digest(self) != start.weights:
                        why = "is not the file whose weights were scored before training (replaced since)"
            if why is not None:  # (a resume, a bundled model upgraded): it was written as the start
                start_better = False
                if self.trainer.is_global_zero:
                    print(f"{tool}: note: model.init_from {name} {why}: its weights are not written back; the trained "
                          "ones are", file=sys.stderr)  # fmt: skip

        @contextmanager
        def start_weights() -> Iterator[None]:
            with weights_kept(self):
                put_start()
                yield

        self.export_best(self.hparams.export_path, save, start_weights if start_better and scst else None)

    def export_best(self, export_path: str | None, save, start_weights=None) -> None:
        """End of fit: ``save(path)`` on rank 0 with the best checkpoint's weights in the module (:func:`best_weights`:
        the last ones back in it afterwards), else the last (the averaged ones where StochasticWeightAveraging put
        them in: lightning_parts.BuiltModuleSWA). ``start_weights``: where a self-critical stage's start
        (model.init_from) scored better on val than the best checkpoint (start_scores), a context within which the
        module holds the start's weights: those are saved instead. A ``fast_dev_run`` (a smoke test of one or a few
        batches) writes no model file: it would replace the run's."""
        trainer = self.trainer
        if trainer.fast_dev_run:
            if trainer.is_global_zero:
                print("fast_dev_run: no model file written", file=sys.stderr)
            return
        path = export_target(self, export_path)  # on every rank: a collective under DDP
        if not trainer.is_global_zero:
            return
        swa = [cb for cb in trainer.callbacks if hasattr(cb, "averaged_epochs")]
        averaged = next((cb.averaged_epochs for cb in swa if cb.averaged_epochs), None)
        start = start_weights is not None and not averaged  # the averaged weights were never validated
        with nullcontext() if averaged else start_weights() if start else best_weights(self) as best:
            try:
                save(path)
            except (OSError, RuntimeError) as err:  # disk full, folder gone: the checkpoints are still there
                raise WriteError(f"cannot write the model file {path}: {one_line(err)}") from None
        if start:
            trained = best_checkpoint(trainer)
            note = " (model.init_from's weights: they scored better on val than the best checkpoint"
            note += f", {trained}, which holds the trained ones)" if trained else ")"
        elif averaged:
            first, last, count = averaged
            note = (f" (StochasticWeightAveraging's mean of the weights at the start of epochs {first} to {last}, "
                    f"{count} of them)")  # fmt: skip
        elif best:
            note = f" (best checkpoint {best})"
        else:
            note = f" (the last weights: {_no_best_reason(trainer)})"
        if swa and not averaged:
            note += "; StochasticWeightAveraging's mean was not used: the fit stopped before trainer.max_epochs"
        print(f"wrote model file: {path}{note}", file=sys.stderr)  # on stderr, as every command's `wrote` line


def _no_best_reason(trainer) -> str:
    """Why a fit that ends has no best checkpoint to export."""
    if not any(getattr(cb, "monitor", None) for cb in trainer.checkpoint_callbacks):
        return "no checkpoint monitors a metric"
    if not getattr(trainer, "limit_val_batches", 1):  # 0 or 0.0: Lightning runs no validation
        return "no best checkpoint was saved: validation is off (trainer.limit_val_batches 0)"
    return "no best checkpoint was saved: the run ended before its first validation"


def check_options(prefix: str = "model", **ranges: tuple[float | None, float, float]) -> None:
    """Rates, weights and widths out of range, refused up front by name: each keyword is (value, low, high), both
    bounds included (``high`` may be math.inf, which no value may be: ``entropy_lambda: .inf`` in a config file,
    which the command line refuses, made the loss -inf at step 0, and the line blamed the rate); a None value is not
    checked. One ValueError line."""
    for name, (value, low, high) in ranges.items():
        if value is not None and math.isinf(value):
            raise ValueError(f"{prefix}.{name} must be a finite number, got {value:g}")
        if value is not None and not low <= value <= high:
            span = f"at least {low:g}" if high == float("inf") else f"between {low:g} and {high:g}"
            raise ValueError(f"{prefix}.{name} must be {span}, got {value:g}")


def check_training_options(lr: float, val_beam_size: int, **more) -> None:
    """What both families' modules take: a positive learning rate, a beam of 1 or more, and ``more`` ranges for
    check_options. One ValueError line naming the option."""
    inf = float("inf")
    if not 0 < lr < inf:
        raise ValueError(f"model.lr must be a positive finite number, got {lr:g}")
    check_options(val_beam_size=(val_beam_size, 1, inf), **more)


def as_config(cls: type, value: Any, name: str) -> Any:
    """``value`` as the config dataclass ``cls``: itself, or built from a dict of its fields (checkpoints and
    ``load_from_checkpoint`` hold dicts); an unknown field is one clear error naming ``name``."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a {cls.__name__} or a dict of its fields, got {type(value).__name__}")
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ValueError(f"unknown {name} option(s) {unknown}; known: {known}")
    return cls(**value)
