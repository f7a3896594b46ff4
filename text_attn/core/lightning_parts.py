"""What the training commands' LightningCLI (``text_attn.core.lightning_cli``) puts into Lightning's trainer. At module
level, not in the function that builds the CLI: a strategy that starts its processes by pickling the trainer
(``ddp_spawn``) sends them by name (classes made inside a function cannot be pickled).

- :class:`AtomicCheckpointIO`: checkpoints written whole, and read as tensors and plain values only;
- :class:`SafeSaveConfig`: the run's config.yaml written through ``safe_files``, and where a logger writes outside the
  run folder, that folder recorded in it (``log_record``);
- :class:`BesideBoard`: the default loggers' metrics.csv, in the TensorBoard logger's version folder;
- :class:`BuiltModuleSWA`: Lightning's StochasticWeightAveraging for modules that build their network in ``setup``;
- :class:`MonitorCheck`: a monitored metric the run never logs (a typo) said in one line before anything acts on it;
- :class:`GiveBackOnException`: what a run took from the process given back where it raised or was interrupted (the
  families' modules add it, ``training.RunState.configure_callbacks``);
- :class:`FitStartCheck`: the module's checks of a fit that depend on whether it resumes (added the same way).
"""

from __future__ import annotations

import io
import pickle
import re
from copy import deepcopy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning_fabric.utilities.exceptions import MisconfigurationException
from pytorch_lightning.callbacks import (
    Callback,
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
    StochasticWeightAveraging,
)
from pytorch_lightning.cli import SaveConfigCallback
from pytorch_lightning.loggers import CSVLogger
from torch import nn

from text_attn.core.errors import WriteError, one_line
from text_attn.core.log_record import RECORD, record_logs
from text_attn.core.ranks import say
from text_attn.core.run_checkpoints import CODE_REFUSED, CheckpointRefused, damaged, holds_code, remote_message
from text_attn.core.safe_files import atomic_output, write_text


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write a checkpoint to a temporary file, then rename it: a process killed while saving leaves the previous
    ``last.ckpt`` whole, never a torn one. Read every checkpoint Lightning resumes from (a file, ``last``, ``best``,
    ``hpc``) with ``weights_only=True``: tensors and plain values only, never pickled code (Lightning's own reader
    loads a URL with ``weights_only=False``)."""

    def load_checkpoint(self, path, map_location=None, weights_only=None):
        if "://" in str(path):
            raise CheckpointRefused(remote_message(path))
        if problem := damaged(path, named=str(path)):  # resumed from silently, or said to be no checkpoint
            raise CheckpointRefused(problem)
        try:
            return torch.load(path, map_location=map_location or "cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            if not holds_code(err, path):  # not a checkpoint at all: Lightning's caller says so with the path
                raise
            raise CheckpointRefused(f"{path}: {CODE_REFUSED}") from None

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        if "://" in str(path):  # remote file systems: Lightning's own writer
            return super().save_checkpoint(checkpoint, path, storage_options)
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with atomic_output(path) as tmp:  # a fresh O_EXCL file: a planted link is never written through
                if storage_options is None:
                    # straight into it: Lightning's writer made the whole checkpoint in $TMPDIR first, so a small
                    # /tmp failed the save "no space" against a run folder that had room. Made in memory first, as
                    # Lightning's writer makes it: torch's own file writer says a full disk as "[enforce fail at
                    # inline_container.cc] unexpected pos", the write says "No space left on device"
                    buffer = io.BytesIO()
                    torch.save(checkpoint, buffer)
                    with open(tmp, "wb") as f:
                        f.write(buffer.getbuffer())
                else:
                    super().save_checkpoint(checkpoint, tmp, storage_options)
        except (OSError, RuntimeError) as err:  # disk full (torch reports it as a RuntimeError), permission lost
            raise WriteError(f"cannot write checkpoint {path}: {one_line(err)}") from None  # the old one is whole


class SafeSaveConfig(SaveConfigCallback):
    """The run's config.yaml written through safe_files.write_text (a fresh temporary file, renamed): a link planted
    at its name is refused, never written through (Lightning's own writer follows it). ``one_batch``: the Trainer's
    limit_*_batches given as the integer 1 (lightning_cli._one_batch), written as 1, not the parsed 1.0."""

    def __init__(self, *args, one_batch: frozenset[str] = frozenset(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.one_batch = one_batch
        self._text: str | None = None

    def config_text(self) -> str:
        if self._text is None:
            text = self.parser.dump(self.config, skip_none=False)
            for name in self.one_batch:  # the dump writes the Trainer's float-first type: 1 as 1.0
                text = re.sub(rf"(?m)^(\s*{name}): 1\.0$", r"\1: 1", text)
            self._text = text
        return self._text

    def __getstate__(self) -> dict[str, Any]:
        """Sent to a spawned process (ddp_spawn): the config as text, without the parser (the CLI's, with every
        subcommand's parsers behind it)."""
        state = dict(self.__dict__)
        state["_text"], state["parser"] = self.config_text(), None
        return state

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.already_saved:
            return
        log_dir = trainer.log_dir  # on every rank: it broadcasts
        if self.save_to_log_dir and trainer.is_global_zero and log_dir is not None:
            path = self._config_path(trainer, Path(log_dir))
            try:
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_text(path, self.config_text())
            except OSError as err:
                raise WriteError(f"cannot write {path}: {one_line(err)}") from None
        if trainer.is_global_zero:
            self._record_logs(trainer)
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    def _config_path(self, trainer, log_dir: Path) -> Path | None:
        """Where the run's config goes; None where nowhere is a run's folder, or it would replace what was read.
        Without a logger and a ``trainer.default_root_dir`` the log folder is the working folder: a stray
        config.yaml was dropped there by every validate of a config that logs nowhere, over the user's own
        ``config.yaml`` where ``--config config.yaml`` was run beside it."""
        if not trainer.loggers and not self.config.get("trainer.default_root_dir"):
            return None
        path = log_dir / self.config_filename
        read = {Path(getattr(c, "absolute", None) or str(c)).resolve() for c in self.config.get("config") or []}
        if path.resolve() in read:
            say(f"note: the run's {self.config_filename} is not written: {path} is the --config file read")
            return None
        return path

    def _record_logs(self, trainer) -> None:
        """A logger's folder outside the run folder (``trainer.default_root_dir`` as the config gives it; none: no
        run folder) recorded in ``RUN_DIR/logs.yaml``, for ``report RUN_DIR`` (text_attn.core.log_record)."""
        root = self.config.get("trainer.default_root_dir") if hasattr(self.config, "get") else None
        folders = [d for logger in trainer.loggers if (d := getattr(logger, "log_dir", None))]
        if root and folders:
            try:
                record_logs(root, folders)
            except OSError as err:
                raise WriteError(f"cannot write {Path(root) / RECORD}: {one_line(err)}") from None


class BesideBoard(CSVLogger):
    """metrics.csv in the TensorBoard logger ``board``'s version folder (its version, chosen once, lazily)."""

    def __init__(self, board) -> None:
        super().__init__(board.save_dir, name=board.name)
        self.board = board

    @property
    def version(self) -> int | str:
        return self.board.version


class BuiltModuleSWA(StochasticWeightAveraging):
    """Lightning's StochasticWeightAveraging (the CLI gives a given one this class: ``swap_in``), for modules that
    build their network in their own ``setup``. Lightning copies the module in the callback's ``setup``, which runs
    before the module's: the copy had no network, so nothing was averaged (0 parameters) and nothing put back. Here
    the copy is made at ``on_fit_start``, once the network exists (a resumed fit's saved average is loaded into it
    then). The BatchNorms whose statistics never train (a frozen image encoder's, kept in eval mode by its
    ``train()``) are not counted nor reset: Lightning's extra epoch recomputed every BatchNorm's statistics from
    scratch, and the frozen ones, in eval mode, were left at zero mean and unit variance. ``averaged_epochs``: (first
    epoch, last epoch, count) of the weights averaged, once the average has been put into the module."""

    averaged_epochs: tuple[int, int, int] | None = None
    _pending: dict | None = None  # a resumed fit's saved average, loaded once the copy exists
    _trained_norms: tuple[nn.Module, ...] = ()

    @classmethod
    def swap_in(cls, callbacks: list) -> None:
        """Every plain StochasticWeightAveraging of ``callbacks`` made one of this class (its options kept)."""
        for callback in callbacks:
            if type(callback) is StochasticWeightAveraging:
                callback.__class__ = cls

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)  # Lightning's checks; its copy has no network yet
        self._average_model = None

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("average_model_state")
        super().load_state_dict({**state_dict, "average_model_state": None})

    def on_fit_start(self, trainer, pl_module) -> None:
        self._average_model = deepcopy(pl_module)
        if self._pending is not None:
            self._average_model.load_state_dict(self._pending)
            self._pending = None
        self._trained_norms = tuple(_norms_that_train(pl_module))
        super().on_fit_start(trainer, pl_module)

    def pl_module_contains_batch_norm(self, pl_module) -> bool:  # Lightning's is static; it calls it on self
        return bool(self._trained_norms)

    def reset_batch_norm_and_save_state(self, pl_module) -> None:
        # Lightning's reset, given the BatchNorms that train their statistics alone (it reads modules() and device)
        super().reset_batch_norm_and_save_state(SimpleNamespace(modules=lambda: iter(self._trained_norms),
                                                                device=pl_module.device))  # fmt: skip

    def transfer_weights(self, src_pl_module, dst_pl_module) -> None:  # Lightning's is static; it calls it on self
        StochasticWeightAveraging.transfer_weights(src_pl_module, dst_pl_module)
        if src_pl_module is self._average_model and self.n_averaged is not None:
            count = int(self.n_averaged)
            self.averaged_epochs = (self._latest_update_epoch - count + 1, self._latest_update_epoch, count)


def _norms_that_train(module: nn.Module) -> list[nn.Module]:
    """The BatchNorms whose running statistics update while ``module`` trains: in train mode after ``module.train()``
    (each module's mode is put back)."""
    modes = [(m, m.training) for m in module.modules()]
    module.train()
    found = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training
             and m.track_running_stats]  # fmt: skip
    for m, mode in modes:
        m.training = mode
    return found


# How far the command's run has come (reset as each starts: lightning_cli): "work", a loop begun (a process's own
# batches), before which every process met what the others did (options, data, checkpoints, the fit's start checks:
# a monitor's name, SCST without a start); "loop", Lightning's signal handling taken over (a loop began, or the fit
# ends: with its loop skipped and no sanity check, a resume of a finished run, nothing else marks it).
STAGES = {"work": False, "loop": False}


class StageMarks(Callback):
    """Sets :data:`STAGES` as the run reaches them (the CLI adds it to every trainer it makes)."""

    def _loop(self, *args: Any) -> None:
        STAGES["work"] = STAGES["loop"] = True

    on_sanity_check_start = on_train_start = on_validation_start = on_test_start = on_predict_start = _loop
    on_train_end = on_fit_end = _loop  # before the module's on_fit_end (callbacks first) writes the model file


class MonitorCheck(Callback):
    """The metric each EarlyStopping and ModelCheckpoint monitors, checked before it can cost a run (the CLI puts this
    callback first, before those that act on a monitored metric). A name no such run logs ends it in one line naming
    the callback and the names it does log, nothing saved: Lightning's EarlyStopping ended it in a 65-line traceback
    at the first validation, and its ModelCheckpoint a training metric's typo (``train_loss_typo``, ``loss``) only
    when it first saved, an epoch in.

    - a validation metric (``val*``): against what the run's validation logs as soon as one has run: at the sanity
      check's end (before training), else at the end of the fit's first validation;
    - any other name: as the fit starts (before the feature cache encodes a photo), against the names the module's
      training step may log (its ``training_logs()``: the objective's, under its options), Lightning's own
      ``epoch`` and ``step``, and, with a LearningRateMonitor, its ``lr-*``. Where the config adds a callback of its
      own (neither Lightning's nor the toolkit's), which may log names of its own, those are left to Lightning."""

    def __init__(self) -> None:
        self._checked = False

    def on_fit_start(self, trainer, pl_module) -> None:
        training_logs = getattr(pl_module, "training_logs", None)
        if training_logs is None or any(not type(cb).__module__.startswith(_KNOWN_LOGGERS) for cb in trainer.callbacks):
            return
        known = sorted(training_logs()) + ["epoch", "step"]  # Lightning's ModelCheckpoint offers epoch and step
        rates = any(isinstance(cb, LearningRateMonitor) for cb in trainer.callbacks)
        for callback, name in _monitored(trainer):
            if name.startswith("val") or name in known or (rates and name.startswith("lr-")):
                continue
            what = f"{', '.join(known)}" + (", lr-* (LearningRateMonitor)" if rates else "")
            raise MisconfigurationException(
                f"trainer.callbacks: {type(callback).__name__}(monitor={name!r}): this run logs no such metric (its "
                f"training: {what}; its validation: val_* names, such as val_loss); said before training, nothing "
                "was saved"
            )

    def on_sanity_check_end(self, trainer, pl_module) -> None:
        self._check(trainer, "sanity check")

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking and not self._checked and trainer.state.fn == "fit":
            self._check(trainer, "first validation")

    def _check(self, trainer, when: str) -> None:
        self._checked = True
        logged = [k for k in trainer.callback_metrics if k.startswith("val")]
        for callback, name in _monitored(trainer):
            if name.startswith("val") and name not in logged:
                raise MisconfigurationException(
                    f"trainer.callbacks: {type(callback).__name__}(monitor={name!r}): no validation logs such a metric "
                    f"(the run's: {', '.join(logged) or 'none'}); said at the {when}, nothing was saved"
                )


_KNOWN_LOGGERS = ("pytorch_lightning.", "lightning.", "text_attn.", "captioning.")  # callbacks whose logs are known


def _monitored(trainer) -> list[tuple[Callback, str]]:
    """(callback, metric) of each EarlyStopping and ModelCheckpoint that monitors one and stops the run where it is
    missing (an EarlyStopping with ``strict: false`` only warns: left to Lightning)."""
    return [(cb, cb.monitor) for cb in trainer.callbacks if isinstance(cb, (EarlyStopping, ModelCheckpoint))
            and getattr(cb, "strict", True) and cb.monitor]  # fmt: skip


class GiveBackOnException(Callback):
    """A fit, validate or test that raised or was interrupted (an error, Ctrl-C): the module gives the process back
    what the run took (``training.RunState.give_back``: torch's CPU threads, the Ctrl-C handler), as its ``teardown``
    does after a run that ends. Lightning (2.6) calls no teardown hook on those paths, only the callbacks'
    ``on_exception``; a notebook or a script that fits went on at ``model.cpu_threads``."""

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        give_back = getattr(pl_module, "give_back", None)
        if give_back is not None:
            give_back()


class FitStartCheck(Callback):
    """The module's ``check_fit_start(from_checkpoint)`` (``training.RunState``) as a fit starts: ``from_checkpoint``
    when the module holds a checkpoint's weights (a resume with ``--ckpt_path``, or ``load_from_checkpoint``). Here,
    not in the module's ``setup``: Lightning loads a resumed fit's checkpoint only after setup; and before the
    callbacks after this one start their work (the captioner's feature cache encodes every photo at its
    ``on_fit_start``), so a refused fit has cost no minutes."""

    def on_fit_start(self, trainer, pl_module) -> None:
        check = getattr(pl_module, "check_fit_start", None)
        if check is not None:
            check(from_checkpoint=bool(trainer.ckpt_path) or getattr(pl_module, "_from_checkpoint", False))
