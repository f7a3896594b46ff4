"""The LightningCLI every training command runs (``text-train``, ``caption-train``).

On top of Lightning's own CLI:
- options given on the command line or in the config win over a checkpoint's saved ones with ``--ckpt_path`` (Lightning
  overlays the checkpoint's hyper-parameters on everything, so ``--model.val_beam_size 3`` was silently dropped);
  the checkpoint only fills in what was left at its default. An option that changes the network's shape is refused
  in one line when the weights are loaded (``text_attn.core.training.check_weights_fit``);
- bad input (the ``errors`` given) becomes one line and exit code 2, never a traceback; so does what the parser
  refuses (an unknown option, a value of the wrong type: no 80 lines of usage, which ``--help`` prints), and a config
  file that is missing, not UTF-8 or not YAML (its line and column);
- Lightning's promotional tips and its tensorboardX notice are not printed on every run;
- a run whose stdout is no terminal draws no bar (carriage returns in a log file): a fit gets a line of news now and
  then on stderr instead (``text_attn.core.progress_lines``), validate and test their scores' table at the end; its
  stdout / stderr losing their reader does not end it (``text_attn.core.closed_outputs``);
- the default logger (``trainer.logger`` unset or true) writes both TensorBoard event files (watch a run with
  ``tensorboard --logdir <default_root_dir>``) and a ``metrics.csv`` (read by ``report RUN_DIR`` and the
  benchmarks), into the one folder ``<default_root_dir>/lightning_logs/version_N/`` that also holds the
  checkpoints. A ``trainer.logger`` given in a config or on the command line is used as it is;
- ``validate`` and ``test`` without weights to score (no ``--ckpt_path``, no ``model.init_from``) are refused, and so
  is ``fit`` told nothing of what to train on (no ``--config``, no data option, no checkpoint: :func:`refuse_defaults`);
  a fit notes a model file it would replace and, without ``model.cpu_threads``, cores other programs keep busy;
- a StochasticWeightAveraging callback averages the network (``lightning_parts.BuiltModuleSWA``), and a monitored
  validation metric no validation logs is one line before anything acts on it (``lightning_parts.MonitorCheck``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import inspect
import logging
import os
import re
import shlex
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from text_attn.core import ddp_sigterm, run_checkpoints, startup_gc, unused_runs
from text_attn.core.closed_outputs import is_terminal, survive_closed_outputs
from text_attn.core.errors import WriteError, fail, one_line, unrecognized
from text_attn.core.ranks import first_on_machine, first_process, say
from text_attn.core.run_checkpoints import CODE_REFUSED, CheckpointRefused, remote_message
from text_attn.core.safe_files import inert, inert_streams
from text_attn.core.sigterm import Terminated, sigterm_interrupts
from text_attn.core.unread_options import Unread, dotted, given_unread
from text_attn.core.version import add_version

# a family's rules: the parsed options of the run (nested dicts: model, data, ...) -> what its settings leave unread
UnreadRules = Callable[[dict], list[Unread]]


class _NoTips(logging.Filter):
    """Lightning's tips, and its "Seed set to N": the seed is in the run's config.yaml, and the line came before a bad
    option's one-line error (two lines where every command says one). Its "Detected KeyboardInterrupt, attempting
    graceful shutdown ...": the run's own line says where it stopped (Interrupted), a SIGTERM's too."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.getMessage())
        # its handler's stream is the one of when Lightning was imported, not the run's inert one: the path of a
        # checkpoint restored ("Restoring states from ...") is made inert here
        record.msg, record.args = inert(text, lines=True), None
        return "Tip:" not in text and not text.startswith(("Seed set to ", "\nDetected KeyboardInterrupt"))


# the notices that say nothing about this run (warnings' message patterns)
QUIET_WARNINGS = (
    ".*LeafSpec.*",
    ".*tensorboardX.*",
    # Our train loaders resume mid-epoch through the data module's state (text_attn.core.batching), which Lightning's
    # check for a stateful loader does not see.
    ".*your dataloader is not resumable.*",
    # A streamed train split (text_attn.core.streaming): LitData gives each loader worker its own share and length.
    ".*`IterableDataset` has `__len__` defined.*",
    # Evaluation metrics are computed from the outputs of all ranks (text_attn.core.training.gather_outputs): every rank
    # logs the same value, so there is nothing to synchronise.
    ".*when logging on epoch level in distributed setting.*",
    # A frozen encoder stays in eval mode (batch-norm statistics fixed) on purpose.
    ".*module\\(s\\) in eval mode.*",
    # A caption batch none of whose photos can be read is skipped on purpose (captioning.training.module; the data
    # module's line named the photo).
    ".*`training_step` returned `None`.*",
    # A small folder's epoch is a few batches: the logger still writes every log_every_n_steps steps, counted across
    # epochs, and the run's own progress lines give the loss as it goes.
    ".*is smaller than the logging interval.*",
    # A fit that ends before its first validation: the model file's line says so ("no best checkpoint was saved: the
    # run ended before its first validation"); a metric no validation logs is refused at the first one
    # (lightning_parts), so this "Did you call `log(...)`?" hint is never the news.
    ".*could not find the monitored key in the returned metrics.*",
)
# validate and test: scoring a checkpoint trains nothing, the training callbacks its state names (ModelCheckpoint, ...)
# are moot
SCORING_WARNING = ".*callbacks used to create the checkpoint need to be provided.*"
TIP_LOGGERS = ("pytorch_lightning", "pytorch_lightning.utilities.rank_zero", "lightning.pytorch",
               "lightning_fabric.utilities.seed")  # fmt: skip


@contextlib.contextmanager
def quiet_lightning(scoring: bool = False) -> Iterator[None]:
    """Drop the notices that say nothing about this run (``scoring``: a validate or test), for the run only: a
    notebook's or a script's later plain Lightning runs print what Lightning prints. What the run's imports add to
    the warnings filters (torch's, Lightning's own) stays, as after a plain import."""
    outside = warnings.filters  # the list catch_warnings puts back at its end
    with warnings.catch_warnings():
        before = list(warnings.filters)
        for message in (*QUIET_WARNINGS, *([SCORING_WARNING] if scoring else [])):
            warnings.filterwarnings("ignore", message=message)
        ours = [f for f in warnings.filters if f not in before]
        added = []
        for name in TIP_LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, _NoTips) for f in logger.filters):
                added.append((logger, _NoTips()))
                logger.addFilter(added[-1][1])
        try:
            yield
        finally:
            outside[:] = [f for f in warnings.filters if f not in ours]
            for logger, tips in added:
                logger.removeFilter(tips)


def _make_cli_class(prog: str, only: str | None = None, given: frozenset[str] = frozenset(),
                    one_batch: frozenset[str] = frozenset(), unread: UnreadRules | None = None,
                    start: StartFrom | None = None, typed: frozenset[str] = frozenset(),
                    follow_root: bool = False):  # fmt: skip
    """``only``: the subcommand this command line runs, when it names one first; the parsers of the others are not
    built (each takes ~0.1-0.3 s of signature reading: a third of a short run's start), so ``--help`` without one
    still lists all five. ``given``: the dotted options the command line and its config files set
    (:func:`_given_options`), which a checkpoint's saved hyper-parameters never replace, and which ``unread`` (the
    family's rules: text_attn.core.unread_options) refuses or notes where the run's settings read none of them.
    ``start``: the family's shipped config to start from, named where a fit is given neither a config nor a data
    option (:func:`refuse_defaults`; None: no such refusal). ``typed``: those of ``given`` the command line sets, given
    to ``unread`` whatever their value (a config file's at their default are not: it may be a ``--print_config``
    file). ``follow_root``: the model file goes in the run folder the command line gives
    (:func:`_export_follows_root`)."""
    given, typed = _without_subcommand(given), _without_subcommand(typed)
    import torch

    try:  # a private function (jsonargparse 4.27.4 on): where a release moves it, debug mode is read as off
        from jsonargparse._common import debug_mode_active
    except ImportError:  # the pinned versions have it

        def debug_mode_active() -> bool:
            return False

    from lightning_fabric.plugins.io.torch_io import TorchCheckpointIO
    from pytorch_lightning.cli import LightningArgumentParser, LightningCLI

    from text_attn.core.lightning_parts import (
        STAGES,
        AtomicCheckpointIO,
        BuiltModuleSWA,
        MonitorCheck,
        SafeSaveConfig,
        StageMarks,
    )
    from text_attn.core.modelfile import CHECKPOINT_FAMILIES, checkpoint_family

    class OneLineParser(LightningArgumentParser):
        """What the parser refuses is one line, ``prog: error: ...``, and exit code 2 (the usage only with --help)."""

        def error(self, message: str, ex: Exception | None = None):
            if not self.exit_on_error or debug_mode_active():  # jsonargparse trying a parse: it handles the error
                return super().error(message, ex)
            said = " ".join(str(message).split())
            if said.startswith("unrecognized arguments: "):  # as the other commands': the option likely meant
                said = unrecognized(said.split(" ")[2:], list(self._option_string_actions))
            fail(prog, _parser_message(said))

        # jsonargparse writes --print_config's metavar as "\b[=flags]", a backspace over argparse's space; the
        # commands print through the inert stream, which showed it as "--print_config \x08[=flags]"
        def format_help(self) -> str:
            return super().format_help().replace(" \b", "")

        def format_usage(self) -> str:
            return super().format_usage().replace(" \b", "")

    class ToolkitCLI(LightningCLI):
        @staticmethod  # as Lightning's: callable on the class too (``only`` comes from this closure)
        def subcommands() -> dict[str, set[str]]:
            # no `predict` subcommand: `caption` and `translate` are the commands that predict (the modules'
            # predict_step serves Trainer.predict from Python)
            every = {k: v for k, v in LightningCLI.subcommands().items() if k != "predict"}
            return {only: every[only]} if only in every else every

        def setup_parser(self, add_subcommands: bool, main_kwargs: dict, subparser_kwargs: dict) -> None:
            super().setup_parser(add_subcommands, main_kwargs, subparser_kwargs)
            add_version(self.parser)  # listed in --help; `PROG --version` alone is answered before Lightning's import

        def add_arguments_to_parser(self, parser) -> None:
            """Every parser (each subcommand's): a free-form mapping option (model.network, data.split_names) given
            again merges into what it held, key by key, as a typed block does (text_attn.core.mapping_blocks)."""
            from text_attn.core.mapping_blocks import merge_mapping_blocks  # jsonargparse: loaded with Lightning

            super().add_arguments_to_parser(parser)
            merge_mapping_blocks(parser)

        def _add_subcommands(self, parser, **kwargs) -> None:
            """Each subcommand's help line and description ours (Lightning's are its Trainer method's docstring, cut
            mid-sentence for test), and, in the help of the whole command, report and optimize listed with them: the
            command handles both before this parser is built (train_main), so they are shown here, never parsed."""
            for name in self.subcommands():
                kwargs[name] = {"description": SUBCOMMAND_HELP[name], **kwargs.get(name, {})}
            super()._add_subcommands(parser, **kwargs)
            action = parser._subcommands_action
            for choice in action._choices_actions:
                theirs, choice.help = choice.help, SUBCOMMAND_HELP.get(choice.dest, choice.help)
                # --ckpt_path: Lightning's help named "hpc" and "registry" (a file name here), and said that validate
                # without one used the current weights
                for option in self._subcommand_parsers[choice.dest]._actions:
                    if option.dest == "ckpt_path" and choice.dest in CKPT_PATH_HELP:
                        option.help = CKPT_PATH_HELP[choice.dest]
                for group in self._subcommand_parsers[choice.dest]._action_groups:  # the method's options were
                    if theirs and group.title.rstrip(".") == theirs.rstrip("."):  # titled with the same docstring
                        group.title = f"{choice.dest} options"
            if only is None:
                pseudo = type(action._choices_actions[0])  # argparse's _ChoicesPseudoAction: a line of the list
                action._choices_actions += [pseudo(name, (), SUBCOMMAND_HELP[name]) for name in HANDLED_FIRST]
                action.metavar = "{" + ",".join([*action.choices, *HANDLED_FIRST]) + "}"

        def parse_arguments(self, parser, args) -> None:
            """Called in-process with its own ``args`` (a notebook, a test, a benchmark), the process's argv is not
            this command line: a Jupyter kernel's ``-f kernel.json`` made Lightning warn that both were given. Its
            check reads ``sys.argv``, so it sees only the program name while these args are parsed."""
            if args is None:
                return super().parse_arguments(parser, args)
            argv = sys.argv
            sys.argv = argv[:1]
            try:
                return super().parse_arguments(parser, args)
            finally:
                sys.argv = argv

        def instantiate_trainer(self, **kwargs):
            smoke = self._get(self.config_init, "trainer", default={}).get("fast_dev_run")  # a batch or a few: kept
            if start is not None and self.subcommand == "fit" and not smoke:
                # a fit told nothing of what to train on (refuse_defaults): here, once the model's and the data's own
                # checks have said their one line, before the trainer prints its devices or a logger makes a folder
                refuse_defaults(start, given, self._resumes())
            trainer = self._get(self.config_init, "trainer", default={})
            for name in one_batch:  # given as the integer 1, parsed as 1.0 (_one_batch): one batch, as typed
                if trainer.get(name) == 1:
                    kwargs[name] = 1
            if "logger" not in kwargs and trainer.get("logger") in (None, True):
                kwargs["logger"] = default_loggers(trainer.get("default_root_dir"))
            from pytorch_lightning.callbacks import ProgressBar

            # output to a log file or a pipe: no bar redrawn with carriage returns, whatever the subcommand (validate
            # and test drew theirs into the log); fit says a line now and then instead, validate and test print their
            # scores' table at the end; not where the config names a bar of its own (Lightning refuses both)
            own_bar = any(isinstance(c, ProgressBar) for c in kwargs.get("callbacks") or trainer.get("callbacks") or [])
            # null typed on the command line is not given either (Lightning reads None as its default: the bar)
            unset = "trainer.enable_progress_bar" not in given or trainer.get("enable_progress_bar") is None
            barless = unset and not own_bar and not is_terminal(sys.stdout)
            lines = barless and self.subcommand == "fit"
            if barless:
                kwargs["enable_progress_bar"] = False
            made = super().instantiate_trainer(**kwargs)
            if lines:
                from text_attn.core.progress_lines import ProgressLines

                made.callbacks.append(ProgressLines(prog))
            BuiltModuleSWA.swap_in(made.callbacks)  # Lightning's own averaged a copy without the network: nothing
            made.callbacks.insert(0, MonitorCheck())  # first: before the callbacks that act on a monitored metric
            made.callbacks.insert(0, StageMarks())  # how far the run came: what an error or a SIGTERM then means
            return made

        def before_instantiate_classes(self) -> None:
            """Options given that the run's settings leave unread: refused in one line, or said in one note, before
            the data or the model is made (the checkpoint's options are in: ``--ckpt_path`` resumes its settings). A
            config file's option at its default is not given (a ``--print_config`` file and a run's config.yaml write
            them all); one typed on the command line is, whatever its value."""
            super().before_instantiate_classes()
            node = self.config[self.subcommand] if self.subcommand else self.config
            parser = self._subcommand_parsers[self.subcommand] if self.subcommand else self.parser
            if (wrong := not_a_block(node, parser)) is not None:
                fail(prog, wrong)
            root = node.get("trainer.default_root_dir") if follow_root else None
            if root:  # --trainer.default_root_dir D: the config's model file, in its run folder, goes in D
                node["model.export_path"] = str(Path(root) / "model.pt")
            if self.subcommand == "fit":
                _refuse_no_training(prog, node)
                _refuse_half_weights(prog, node)
                refusal = getattr(self.model_class, "refuse_fit", None)  # a family's own (CaptionModule.refuse_fit)
                if refusal is not None and (line := refusal(node)):
                    fail(prog, line)
            if unread is None:
                return
            config = node.as_dict()
            defaults = parser.get_defaults().as_dict()  # the dataclass blocks' fields too (model.objective.scst_bleu)
            refusal, note = given_unread(unread(config), given, functools.partial(dotted, config),
                                         functools.partial(dotted, defaults), typed)  # fmt: skip
            if refusal:
                fail(prog, refusal)
            if note:  # once, not by every process of a DDP run
                say(f"{prog}: note: {note}")

        def after_instantiate_classes(self) -> None:
            super().after_instantiate_classes()
            startup_gc.release()  # the imports, the model and the data are in: the collector as usual (startup_gc.py)
            ddp_sigterm.keep_collectives_out_of_the_handler()  # a SIGTERM under DDP hung both processes (1 in 5)
            strategy = getattr(self.trainer, "strategy", None)
            if strategy is not None and type(strategy.checkpoint_io) is TorchCheckpointIO:
                strategy.checkpoint_io = AtomicCheckpointIO()

        def _run_subcommand(self, subcommand: str) -> None:
            """Ctrl-C: Lightning shuts the run down and exits with code 1, saying nothing of where it stopped; here
            the run ends as every command's interrupted run does (Interrupted: one line, exit code 130). SIGTERM (a
            scheduler's time limit, a preemption, ``kill``): Lightning stops with SystemExit(None), exit code 0, as
            if the run had ended (``fit ... && export`` went on without a model); here the same line, exit code 143.
            Either during fit's training steps: last.ckpt saved at the step reached first (training.stop_asked). A
            SIGTERM once the model file is being written lets it be written: the fit ends as usual, exit code 0.
            Any error: the run folder it made and left unused is removed, and the folders it made left empty
            (unused_runs)."""
            refuse_other_launch(prog, self.trainer)
            made = unused_runs.made_by_run(self.trainer)
            export = getattr(getattr(self.model, "hparams", None), "export_path", None)
            folders = unused_runs.missing_folders(unused_runs.run_folders(self.trainer, self.datamodule, export))
            try:
                # a SIGTERM before Lightning's loop takes signals (the photos' features cached, minutes) ended the
                # process at once, exit 143 without a line: it stops the run as Ctrl-C does there. Once the loop
                # began, Lightning's handler acts (it calls this one too); after it (Lightning gives this one back
                # before on_fit_end) the model file is written and the fit ends as usual
                with sigterm_interrupts(active=lambda: not STAGES["loop"]):
                    super()._run_subcommand(subcommand)
            except BaseException as exc:
                self._give_back_export()
                unused_runs.remove_unused(made)
                unused_runs.remove_empty(folders)
                termed = isinstance(exc, SystemExit) and isinstance(exc.__context__, Terminated)  # Lightning's exit 1
                if termed or isinstance(exc, SystemExit) and getattr(self.trainer, "received_sigterm", False):
                    raise Interrupted(interrupted_line(self.trainer, subcommand), code=143) from None
                if isinstance(exc, SystemExit) and exc.code == 1 and getattr(self.trainer, "interrupted", False):
                    raise Interrupted(interrupted_line(self.trainer, subcommand)) from None
                if lost := lost_process(exc, self.trainer):  # another process of the run died (killed, its machine
                    # lost): a 95-line traceback of gloo's "Connection reset by peer", nothing of how to go on
                    line = interrupted_line(self.trainer, subcommand).replace("interrupted", f"stopped ({lost})", 1)
                    raise Interrupted(line, code=1, alone=True) from None
                raise
            self._give_back_export()

        def _give_back_export(self) -> None:
            """The model file's lock (:meth:`before_fit`) given back: the fit has written it, or ended."""
            held = getattr(self, "_held_export", None)
            if held is not None:
                held.release()
                self._held_export = None

        def _resumes(self) -> bool:
            """Whether this fit goes on from a checkpoint: ``--ckpt_path`` a file, or ``best`` / ``last`` of an
            earlier run found (none found: a fresh fit, as Lightning goes on)."""
            ckpt = self.config[self.subcommand].get("ckpt_path")
            if ckpt is not None and str(ckpt) in run_checkpoints.NAMES:
                ckpt = run_checkpoints.resolve(str(ckpt), _configured_trainer(self.config[self.subcommand]))
            return ckpt is not None

        def before_fit(self) -> None:
            """A model file fit could not write is said before training, not after it (its folder is made now, as
            the end of fit would make it), and one it would replace is noted; so are cores other programs keep busy
            where model.cpu_threads is not set (text_attn.core.cpu_load: the console script took the first reading).
            The module is told whether the fit resumes (``resuming``): its setup runs before Lightning names the
            checkpoint to the trainer."""
            resumes = self.model.resuming = self._resumes()  # ("last" / "best" resolved once: folders listed)
            hparams = getattr(self.model, "hparams", None)
            if self.trainer.is_global_zero and hparams is not None and "cpu_threads" in hparams:
                import torch

                from text_attn.core import cpu_load

                busy = cpu_load.fewer_threads_note(torch.get_num_threads(), "model.cpu_threads")  # the reading used
                if busy and not hparams.cpu_threads:
                    print(f"{prog}: note: {busy}", file=sys.stderr)
            path = getattr(hparams, "export_path", None)
            if path and self.trainer.is_global_zero and not self.trainer.fast_dev_run:  # a smoke test writes none
                refuse_export_path(str(path))
                # one fit writes the model file at a time: the shipped configs name one per config, and two fits of
                # a config each said they wrote it, the second's weights in it (held until the fit ends)
                from text_attn.core.safe_files import OutputRefused, hold_outputs

                try:
                    self._held_export = hold_outputs([("model.export_path", str(path))])
                except OutputRefused as err:
                    fail(prog, f"{err} (a fit of the same config? give --model.export_path, or "
                               "--trainer.default_root_dir for its run folder)")  # fmt: skip
                if not resumes:  # a resume replaces the model file of the run it goes on with
                    note = replaced_note(str(path))
                    if note:
                        print(f"{prog}: note: {note}", file=sys.stderr)

        def _prepare_subcommand_kwargs(self, subcommand: str) -> dict:
            """``--ckpt_path best`` / ``last``: the files an earlier run of this config wrote (run_checkpoints).
            ``validate`` and ``test`` with no checkpoint and no ``model.init_from`` are refused: they scored the
            freshly made weights, silently (``--ckpt_path null``, given, scores them on purpose)."""
            kwargs = super()._prepare_subcommand_kwargs(subcommand)
            limit = {"validate": "limit_val_batches", "test": "limit_test_batches"}.get(subcommand)
            if limit and getattr(self.trainer, limit, None) == 0:  # Lightning ran nothing, said nothing, exit 0
                raise CheckpointRefused(f"{subcommand} with trainer.{limit} 0 scores no batch: give a count or a "
                                        "fraction above 0 (default: 1.0, every batch)")  # fmt: skip
            name = kwargs.get("ckpt_path")
            start = getattr(getattr(self.model, "hparams", None), "init_from", None)
            if subcommand != "fit" and name is None and not start and "ckpt_path" not in given:
                raise CheckpointRefused(
                    f"{subcommand} without --ckpt_path would score weights nobody trained: give --ckpt_path best, "
                    "last or a .ckpt file (or model.init_from a model file; --ckpt_path null scores the untrained "
                    "weights)"
                )
            if isinstance(name, str) and name in run_checkpoints.NAMES:
                path = run_checkpoints.resolve(name, self.trainer)
                if path is not None:
                    say(f"{prog}: --ckpt_path {name}: {path}")  # once, not by every process of a DDP run
                    kwargs["ckpt_path"] = str(path)
                elif subcommand != "fit":
                    raise CheckpointRefused(run_checkpoints.not_found_message(name, self.trainer))
                else:  # a fresh start, said in our words (Lightning's warning pointed at save_last=True)
                    say(f"{prog}: note: {run_checkpoints.not_found_message(name, self.trainer, fit=True)}")
                    kwargs["ckpt_path"] = None
            if subcommand != "fit" and kwargs.get("ckpt_path"):  # the module reads text as it did (its setup comes
                self.model.scored_checkpoint = str(kwargs["ckpt_path"])  # before Lightning's trainer.ckpt_path is set)
            return kwargs

        def _parse_ckpt_path(self) -> None:
            """Fill options left at their default from the checkpoint; never override what the user gave."""
            sub = self.config.get("subcommand")
            if not sub:
                return
            ckpt_path = self.config[sub].get("ckpt_path")
            if ckpt_path and "://" in str(ckpt_path):
                raise CheckpointRefused(remote_message(ckpt_path))
            if not ckpt_path:
                return
            if str(ckpt_path) == "hpc":  # Lightning's file, checked here too: a strategy that reads checkpoints itself
                # (FSDP's) never calls AtomicCheckpointIO.load_checkpoint, and its reader unpickles any class
                ckpt_path = run_checkpoints.hpc_file(_configured_trainer(self.config[sub]).default_root_dir)
                if ckpt_path is None:
                    return  # none: Lightning says so
            if str(ckpt_path) in run_checkpoints.NAMES:  # the file _prepare_subcommand_kwargs will resolve it to
                ckpt_path = run_checkpoints.resolve(str(ckpt_path), _configured_trainer(self.config[sub]))
                if ckpt_path is None:
                    return  # fit starts afresh; validate and test are refused there, in one line
            if Path(ckpt_path).is_dir():
                raise ValueError(f"--ckpt_path {ckpt_path}: {FOLDER_SAID}")
            if not Path(ckpt_path).is_file():
                raise ValueError(f"--ckpt_path {ckpt_path}: no such file")
            try:
                ckpt = torch.load(ckpt_path, weights_only=True, map_location="cpu", mmap=True)
            except Exception as err:  # noqa: BLE001 - any unreadable file gets the same one line
                if run_checkpoints.holds_code(err, ckpt_path):  # as AtomicCheckpointIO says it
                    raise CheckpointRefused(f"{ckpt_path}: {CODE_REFUSED}") from None
                hint = " (cut off by a copy or a full disk? another checkpoint of the run, last or best, may be whole)"
                what = run_checkpoints.torch_unreadable(ckpt_path, hint)
                raise ValueError(f"--ckpt_path {ckpt_path}: not a training checkpoint: {what}") from None
            if not isinstance(ckpt, dict) or "pytorch-lightning_version" not in ckpt:
                raise ValueError(
                    f"--ckpt_path {ckpt_path}: not a training checkpoint (a model file? --ckpt_path takes the .ckpt "
                    "files a fit writes; to start from a model file use --model.init_from)"
                )
            # no weights at all was "the weights do not fit the network these options build": a wrong diagnosis
            if not isinstance(ckpt.get("state_dict"), dict):
                raise ValueError(f"--ckpt_path {ckpt_path}: a training checkpoint without its weights (no "
                                 "state_dict): damaged, or not written by a fit")  # fmt: skip
            family = checkpoint_family(ckpt)  # by its weights' names: the other command's settings broke the parse
            ours = next((k for k, (train, _, _) in CHECKPOINT_FAMILIES.items() if train == prog), None)
            if family is not None and ours is not None and family != ours:
                other = CHECKPOINT_FAMILIES[family][0]
                raise ValueError(f"--ckpt_path {ckpt_path}: a {other} checkpoint, not one of {prog}'s (continue it "
                                 f"with `{other} {sub} --ckpt_path ...`)")  # fmt: skip
            if not isinstance(ckpt.get("hyper_parameters") or {}, dict):
                raise ValueError(f"--ckpt_path {ckpt_path}: a damaged checkpoint (its hyper_parameters are not a "
                                 "mapping)")  # fmt: skip
            # the model's and the data's saved options (a resume with only --ckpt_path built other data from the
            # data options' defaults: "its source vocabulary differs")
            blocks = [("model", ckpt.get("hyper_parameters"), self.model_class)]
            if getattr(self, "datamodule_class", None) is not None and "data" in self.config[sub]:
                blocks.append(("data", ckpt.get("datamodule_hyper_parameters"), self.datamodule_class))
            for block, saved, cls in blocks:
                if isinstance(saved, dict):
                    _fill_unset(self.config[sub][block], block, dict(saved), cls, given)
            saved_arch = (ckpt.get("hyper_parameters") or {}).get("arch")
            arch = self.config[sub]["model"].get("arch") if "model" in self.config[sub] else None
            if sub == "fit" and saved_arch is not None and arch is not None and arch != saved_arch:
                # its network's keys came back from the checkpoint whatever was given, and the refusal said to clear
                # them with --model.network null, which had been given: the architecture is the checkpoint's
                raise ValueError(f"--ckpt_path {ckpt_path}: a model.arch {saved_arch} checkpoint; a resume goes on "
                                 f"with its weights and architecture: drop --model.arch {arch}, or start a new fit "
                                 "without --ckpt_path")  # fmt: skip

    ToolkitCLI.parser_class_ = OneLineParser
    ToolkitCLI.save_config_class_ = functools.partial(SafeSaveConfig, one_batch=one_batch)
    ToolkitCLI.checkpoint_io_class_ = AtomicCheckpointIO
    return ToolkitCLI


def _fill_unset(config, block: str, saved: dict, cls: type, given: frozenset[str]) -> None:
    """``config`` (the parsed ``block``: model or data) with each option at its default and not ``given`` taken from
    ``saved`` (a checkpoint's). A value given, equal to the default too, wins (--model.val_beam_size 1 after a fit at
    beam 3 means beam 1), and so does any other value (set by a whole block, --model FILE or JSON, which names no
    option one by one); a free-form mapping given (model.network) merges into the saved one, its keys winning."""
    params = inspect.signature(cls.__init__).parameters
    for key, value in saved.items():
        p = params.get(key)
        if p is None or p.default is inspect.Parameter.empty:
            continue
        if dataclasses.is_dataclass(p.default) and isinstance(value, dict):
            # a nested block (model.encoder, model.decoder): field by field
            for name, saved_value in value.items():
                default = getattr(p.default, name, None)
                if f"{block}.{key}.{name}" not in given and config.get(f"{key}.{name}") == default:
                    config[f"{key}.{name}"] = saved_value
        elif isinstance(value, dict) and isinstance(config.get(key), dict) and p.default in (None, {}):
            # a free-form mapping (model.network, data.split_names) given in part: the parts merge into the
            # checkpoint's block key by key, as a block given again does (mapping_blocks); --model.network.dropout 0.1
            # alone had replaced the block and built the defaults' network, which the weights do not fit
            config[key] = {**value, **config.get(key)}
        elif f"{block}.{key}" not in given and config.get(key) == p.default:
            config[key] = value


def not_a_block(node, parser) -> str | None:
    """The line for a block of options (``trainer``, ``model``, ``data``, and the blocks jsonargparse builds a class
    of: ``model.objective``, ``model.encoder``, ...) that a config file gave as something else: ``objective:`` left
    with every line under it commented out (null), ``objective: 5``, ``data: []``. They ended in a traceback (a
    mapping expected by jsonargparse, or by the checks of unread options). None where every block is a mapping."""
    from jsonargparse import Namespace

    blocks = ["trainer", *(g.dest for g in parser._action_groups if getattr(g, "group_class", None) is not None)]
    for dest in sorted(dict.fromkeys(blocks), key=lambda d: d.count(".")):  # a block before the blocks inside it
        try:
            value = node.get(dest, Namespace())
        except (KeyError, TypeError, AttributeError):  # inside a block already said (it returned first)
            continue
        if not isinstance(value, (Namespace, dict)):
            got = "null (nothing under it: its lines commented out?)" if value is None else repr(value)
            return (f"{dest} is a block of options (key: value lines under it), got {got}: give its options, or "
                    "leave it out for its defaults")  # fmt: skip
    return None


def _configured_trainer(config) -> SimpleNamespace:
    """What run_checkpoints reads of a trainer, from a parsed config (before the trainer exists): its
    default_root_dir, the checkpoint callbacks' own dirpath, and the save_dir and name of each logger it gives."""
    trainer = config.get("trainer") or {}
    callbacks, loggers = [], []
    for callback in trainer.get("callbacks") or []:
        init = callback.get("init_args") if hasattr(callback, "get") else None
        dirpath = init.get("dirpath") if hasattr(init, "get") else None
        if dirpath and "ModelCheckpoint" in str(callback.get("class_path")):
            callbacks.append(SimpleNamespace(dirpath=str(dirpath)))
    given = trainer.get("logger")
    for logger in given if isinstance(given, list) else [given]:
        init = logger.get("init_args") if hasattr(logger, "get") else None
        if hasattr(init, "get") and init.get("save_dir"):  # CSVLogger's and TensorBoardLogger's default name
            loggers.append(SimpleNamespace(save_dir=str(init.get("save_dir")), name=init.get("name", "lightning_logs")))
    return SimpleNamespace(default_root_dir=trainer.get("default_root_dir"), checkpoint_callbacks=callbacks,
                           loggers=loggers)  # fmt: skip


class StartFrom(NamedTuple):
    """What a family's fit trains when it is told nothing, and where to start instead (:func:`refuse_defaults`)."""

    defaults: str  # the built-in defaults, in words: "the synthetic reorder task"
    config: str  # a shipped config to start from: "reorder_bahdanau"
    docs: str  # the guide that lists the configs: "docs/text.md"


def refuse_defaults(start: StartFrom, given: frozenset[str], resumes: bool) -> None:
    """CheckpointRefused (one line, as validate's without --ckpt_path) for a fit of no ``--config`` and no
    ``fast_dev_run`` (the caller's checks: a smoke test of a batch or a few writes no model file) given no data
    option and not resuming a checkpoint (``resumes``: one found, whose data options the run takes): nothing says
    what to train on, and the library's defaults trained for Lightning's 1,000 epochs ("step 1 of 313,000 ... about
    135 h left") or reached for ImageNet weights that are not there. ``given``: the dotted options the command line
    sets (a subcommand's ``fit.`` prefix dropped)."""
    if resumes or any(g == "data" or g.startswith("data.") for g in given):
        return
    raise CheckpointRefused(
        f"fit without --config or a data option would train the built-in defaults ({start.defaults}): give "
        f"--config {start.config} or another shipped config (--help lists them; {start.docs}), or the data options "
        "(--data.*)"
    )


def replaced_note(path: str) -> str | None:
    """The note for a fit whose model file ``path`` (model.export_path) already exists: this run writes over it as it
    ends (a shipped config's path is fixed, its logs go to version_0, version_1, ...). None where there is none."""
    import datetime

    try:
        written = datetime.datetime.fromtimestamp(Path(path).stat().st_mtime)
    except OSError:
        return None
    return (f"{path} exists (written {written:%Y-%m-%d %H:%M}): this run replaces it when it ends; give "
            "another --model.export_path to keep both")  # fmt: skip


def refuse_other_launch(prog: str, trainer) -> None:
    """One line where torchrun started another number of processes than the trainer's devices x num_nodes: with
    ``--trainer.devices 1`` each of torchrun's 2 processes ran a whole fit of its own, side by side, each writing its
    own version folder and model file, exit 0 (a DDP strategy's mismatch Lightning refuses itself; caption refuses it
    as --devices)."""
    from lightning_fabric.plugins.environments import TorchElasticEnvironment

    if not TorchElasticEnvironment.detect():
        return
    started, per_node = int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0)
    ours = int(getattr(trainer, "world_size", 1) or 1)
    if started != ours:
        fit = (f": give --trainer.devices {per_node} --trainer.num_nodes {started // per_node}"
               if per_node and started % per_node == 0 else "")  # fmt: skip
        if not first_process():  # every process refuses alike: said once, by the first
            raise SystemExit(2)
        fail(prog, f"trainer.devices x trainer.num_nodes is {ours} process(es), and torchrun started {started} "
                   f"(WORLD_SIZE): each would run a training of its own{fit}")  # fmt: skip


def refuse_export_path(path: str) -> None:
    """WriteError (one line) where model.export_path cannot be written: a link, a folder, a FIFO; a folder that cannot
    be made or written into."""
    from text_attn.core.safe_files import check_output, probe_writable

    try:
        check_output(path)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        probe_writable(Path(path).parent)
    except OSError as err:
        raise WriteError(f"cannot write the model file model.export_path {path}: {err.strerror or err} (said before "
                         "training; nothing was trained)") from None  # fmt: skip


class Interrupted(Exception):
    """A run stopped by Ctrl-C (``code`` 130) or SIGTERM (143); the message says where it stopped and how to go on.
    ``alone``: a stop this process met alone (another process lost), said by it whatever its rank; the others are said
    by the run's first process only (every process stops alike)."""

    def __init__(self, message: str, code: int = 130, alone: bool = False):
        super().__init__(message)
        self.code, self.alone = code, alone


def lost_process(exc: BaseException, trainer) -> str | None:
    """What to say where ``exc`` is a collective's error because another process of a multi-process run ended (its
    peer's connection gone); None for any other error."""
    if int(getattr(trainer, "world_size", 1) or 1) < 2 or not isinstance(exc, RuntimeError):
        return None

    # the peer's end gone, by the words of gloo's and NCCL's errors: not any DistError (a port in use at the start, a
    # rendezvous timeout, a CUDA error are errors of their own, said as they are)
    text = str(exc)
    gone = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL communicator was aborted")
    return "another process of this run was lost" if any(g in text for g in gone) else None


def interrupted_line(trainer, subcommand: str) -> str:
    if subcommand != "fit":
        return f"interrupted ({subcommand}): nothing was scored"
    step = trainer.global_step
    if not any(getattr(cb, "save_last", False) for cb in getattr(trainer, "checkpoint_callbacks", None) or []):
        return f"interrupted at step {step}; this run keeps no last.ckpt (no ModelCheckpoint with save_last)"
    last = run_checkpoints.resolve("last", trainer)
    if last is None:
        return f"interrupted at step {step}; no last.ckpt was written yet"
    saved = _saved_step(last)
    # a stop during fit's training saves where a resume is exact (training.defer_ctrl_c); a second Ctrl-C, or one
    # where no handler of the run's own is set (DDP), stops at once: the newest save stays, and says so
    when = ("saved at this step" if saved == step else
            f"from step {saved}: the steps since are redone" if saved is not None else "")  # fmt: skip
    return (
        f"interrupted at step {step}; the newest last.ckpt is {last}{f' ({when})' if when else ''}: --ckpt_path "
        "last resumes from it"
    )


def _saved_step(path: Path) -> int | None:
    """The step a checkpoint was saved at (memory-mapped: its weights are not read); None where it cannot be read."""
    import torch

    try:
        step = torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step")
    except Exception:  # noqa: BLE001 - the line names the file all the same
        return None
    return step if isinstance(step, int) else None


def _parser_message(message: str) -> str:
    """jsonargparse's message in one line: 'Parser key "model.lr": Expected a <class 'float'>. Got value: abc' reads
    'model.lr: expected a float, got abc'; other messages keep their words, whitespace collapsed."""
    text = " ".join(str(message).split())
    # a class given by class_path (a callback in trainer.callbacks, ...) with a bad option: its own key and value,
    # not the outer list's "expected null, got [the whole list]"
    m = re.search(r'Parser key "([^"]+)": .*?Problem with given class_path \'([^\']+)\': (.*?) - (?:Not a valid '
                  r"subclass|Problem with given class_path)", text)  # fmt: skip
    if m:
        outer, cls, inner = m.group(1), m.group(2).rsplit(".", 1)[-1], m.group(3)
        unknown = re.match(r"Option '([^']+)' is not accepted", inner)
        if unknown:
            return f"--{outer}: {cls}: option {unknown.group(1)!r} is not accepted (a typo?)"
        said = _parser_message(inner) if inner.startswith("Parser key") else inner
        return f"--{outer}: {cls}: {said.removeprefix('--')}"
    # a class given by class_path that refused its options when made (Lightning's own checks): the class and its
    # words, not the whole list of callbacks ("Given value: [<...ModelCheckpoint object at 0x7f...>, ...]")
    m = re.match(r"Does not validate against any of the Union subtypes Subtypes: \[(.*?)\] Errors: - (.*?) - "
                 r".*Given value: .*?Namespace\(class_path='([^']+)'", text)  # fmt: skip
    if m:
        kinds = {"callbacks.callback.Callback": "trainer.callbacks", "loggers.logger.Logger": "trainer.logger"}
        outer = next((f"--{key}: " for kind, key in kinds.items() if kind in m.group(1)), "")
        return f"{outer}{m.group(3).rsplit('.', 1)[-1]}: {m.group(2)}"
    m = re.search(r'Parser key "([^"]+)": .*?Expected a <class \'(\w+)\'>\. Got value: (.*)', text)
    if m and "Union subtypes" not in text:
        return f"--{m.group(1)}: expected {'an' if m.group(2)[0] in 'aeiou' else 'a'} {m.group(2)}, got {m.group(3)}"
    m = re.search(r'Parser key "([^"]+)": Does not validate against any of the Union subtypes.*Given value: (.*)', text)
    if m:  # e.g. int | None: "expected int or null"
        kinds = [k.replace("NoneType", "null") for k in re.findall(r"Expected a <class '(\w+)'>", text)]
        return f"--{m.group(1)}: expected {' or '.join(dict.fromkeys(kinds)) or 'another value'}, got {m.group(2)}"
    # the subcommands LightningCLI knows, and the two each command handles before it (report, optimize)
    if text.startswith('expected "subcommand" to be one of') and "not provided" in text:
        return f"a subcommand is needed: {ALL_SUBCOMMANDS} (--help says more)"
    # argparse names the argument by its metavar: the list --help shows (ToolkitCLI._add_subcommands)
    m = re.match(r"argument (?:subcommand|\{[\w,]*\}): invalid choice: '(.*)' \(choose from", text)
    if m:
        return f"unknown subcommand {m.group(1)!r}: {ALL_SUBCOMMANDS}"
    return text


def _option_values(args: list[str], flag: str, short: str | None = None) -> list[str]:
    """Every value the command line gives ``flag`` (``--flag VALUE``, ``--flag=VALUE``, or ``short VALUE``)."""
    values = []
    for i, arg in enumerate(args):
        if arg in (flag, short) and i + 1 < len(args):
            values.append(args[i + 1])
        elif arg.startswith(f"{flag}="):
            values.append(arg.split("=", 1)[1])
    return values


def shipped_configs(*folders: Path) -> Path | None:
    """The first of ``folders`` that exists: a training command's shipped configs are ``PACKAGE/configs`` once
    installed from a wheel (pyproject maps configs/caption and configs/text there) and the checkout's
    ``configs/FAMILY`` in a clone or an editable install; None where neither is."""
    return next((f for f in folders if f.is_dir()), None)


def config_names(folder: Path | None) -> list[str]:
    """The shipped configs' names (file stems), sorted."""
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder is not None else []


def named_configs(prog: str, args: list[str], folder: Path | None) -> list[str]:
    """``args`` with each ``--config NAME`` (or ``-c``, ``--config=``) that names no file here and has no folder part
    replaced by the shipped config of that name (NAME or NAME.yaml in ``folder``): an installed toolkit has no
    configs/ folder to give a path into. A bare name that is neither ends the run in one line listing the names."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg in ("--config", "-c") and i + 1 < len(out):
            out[i + 1] = _shipped(prog, out[i + 1], folder)
        elif arg.startswith("--config="):
            out[i] = "--config=" + _shipped(prog, arg.split("=", 1)[1], folder)
    return out


def _shipped(prog: str, value: str, folder: Path | None) -> str:
    stem = Path(value).name.removesuffix(".yaml")
    if (
        not Path(value).exists()
        and ("/" in value or os.sep in value)
        and folder is not None
        and (folder / f"{stem}.yaml").is_file()
    ):  # the docs' configs/caption/NAME.yaml, run outside a checkout
        fail(prog, f"--config {value}: no such file; the shipped config of that name is --config {stem}")
    if Path(value).is_file() or "/" in value or os.sep in value or value.startswith("-"):  # a folder: no config
        return value
    if folder is not None and (folder / f"{stem}.yaml").is_file():
        return str(folder / f"{stem}.yaml")
    if value.endswith((".yaml", ".yml")) or Path(value).exists():  # a file name, a folder: as read_config_files says
        return value
    names = config_names(folder)  # a bare name: the names it could have been
    fail(prog, f"--config {value}: no such file, nor a shipped config" + (f" (those: {', '.join(names)})" if names
                                                                          else ""))  # fmt: skip


# --ckpt_path a run's folder: where its checkpoints are
FOLDER_SAID = (
    "a folder, not a checkpoint file (a run's .ckpt files are in lightning_logs/version_N/checkpoints/; "
    "--ckpt_path best or last finds them)"
)


def refuse_missing_files(prog: str, args: list[str]) -> None:
    """The command line's ``--config`` files (read and parsed: missing, not UTF-8, not YAML) and its ``--ckpt_path``
    file, checked before Lightning is imported: the training commands take ~10 s to import it, and a mistyped path is
    answered at once instead, in the words the run would say it in. The run checks them again (a config file given in
    a config, or a ``ckpt_path`` set in one, is checked there only)."""
    read_config_files(prog, args)
    for name in _option_values(args, "--ckpt_path"):
        # Lightning's own names, remote paths and YAML's null (no checkpoint) are the run's to resolve
        # (_parse_ckpt_path)
        kept = ("", "~", "best", "last", "hpc")
        if name not in kept and name.lower() != "null" and "://" not in name and not Path(name).is_file():
            fail(prog, f"--ckpt_path {name}: {FOLDER_SAID if Path(name).is_dir() else 'no such file'}")


def read_config_files(prog: str, args: list[str]) -> list:
    """The contents of each ``--config FILE`` (parsed here; :func:`refuse_missing_files` parses them once before, to
    say a bad one before Lightning's import); one that cannot be read or is not a YAML mapping ends the run with one
    line naming it (and the line and column)."""
    import yaml

    nodes = []
    for name in _option_values(args, "--config", "-c"):
        path = Path(name)
        if not path.is_file():
            fail(prog, f"--config {name}: {'is a directory' if path.is_dir() else 'no such file'}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            fail(prog, f"--config {name}: not UTF-8 text (byte {err.start})")
        except OSError as err:
            fail(prog, f"--config {name}: cannot read it: {err.strerror or err}")
        try:
            node = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
            what = " ".join(p for p in (getattr(err, "problem", None), getattr(err, "context", None)) if p)
            fail(prog, f"--config {name}: not valid YAML: {where}{what or err}")
        if node is None:  # jsonargparse said "Unexpected config:" and the file's text
            fail(prog, f"--config {name}: no options in it (an empty file, or comments only): give the options "
                       "(key: value), or a shipped config's name")  # fmt: skip
        if not isinstance(node, dict):
            fail(prog, f"--config {name}: expected a YAML mapping of options (key: value), got a {type(node).__name__}")
        nodes.append(node)
    return nodes


def default_loggers(root: str | Path | None) -> list:
    """[CSVLogger, TensorBoardLogger] writing into the same ``<root>/lightning_logs/version_N`` (N: TensorBoard's next
    free version). The CSV logger comes first: it creates the folder, so neither warns that it found the other's
    files there; both give the same ``log_dir``, where Lightning puts the checkpoints. Without tensorboard installed
    (it is a dependency, but an environment may lack it): the CSV logger alone."""
    from pytorch_lightning.loggers import CSVLogger, TensorBoardLogger

    from text_attn.core.lightning_parts import BesideBoard

    try:
        board = TensorBoardLogger(str(root or os.getcwd()), name="lightning_logs", default_hp_metric=False)
    except ModuleNotFoundError:
        return [CSVLogger(str(root or os.getcwd()), name="lightning_logs")]
    return [BesideBoard(board), board]


def _given_options(args: list[str], configs: list, nulls: bool = True) -> set[str]:
    """Dotted option names given on the command line and in the ``--config`` files' contents ``configs``
    (``data.image_size``, ...). ``nulls`` False: a config's null is no value given, the option is left at its
    default (a ``--print_config`` file, a run's config.yaml, write every unset option so: the bar their
    ``enable_progress_bar: null`` kept drew its carriage returns into log files). A block given as a YAML mapping
    (``--model.objective '{scst_samples: 3}'``) gives its options as a config file does: each one is named (the
    unread-option rule passed them by, where ``--model.objective.scst_samples 3`` was refused)."""
    import yaml

    found: set[str] = set()

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if nulls or value is not None:
                    found.add(f"{prefix}{key}")
                walk(value, f"{prefix}{key}.")

    for i, arg in enumerate(args):
        if arg.startswith("--") and arg not in ("--config", "-c"):
            name, eq, value = arg[2:].partition("=")
            found.add(name)
            value = value if eq else args[i + 1] if i + 1 < len(args) else ""
            if value.lstrip().startswith("{"):  # a flow mapping; a bad one is the parser's to refuse
                with contextlib.suppress(yaml.YAMLError):
                    walk(yaml.safe_load(value), f"{name}.")
    for node in configs:
        walk(node, "")
    return found


def run_lightning_cli(
    prog: str,
    module_cls: type,
    datamodule_cls: type,
    args: list[str] | None,
    errors: tuple,
    description: str = "",
    renamed: dict[str, str] | None = None,
    outdated: Callable[[set[str]], str | None] | None = None,
    configs: Path | None = None,
    unread: UnreadRules | None = None,
    start: StartFrom | None = None,
):
    """A LightningCLI over ``module_cls`` / ``datamodule_cls``; the ``errors`` of bad input become one line.

    ``renamed``: old option name -> what to write instead; an old config or command line gets one line saying so.
    ``outdated``: given the dotted option names of the command line and its config files, a line saying how to
    update them (None: nothing outdated). ``configs``: the shipped configs' folder, for ``--config NAME``
    (:func:`named_configs`: a notebook's ``text_train_cli(["fit", "--config", "reorder_bahdanau"])`` too, not only
    the console script). ``unread``: given the run's parsed options, what its settings leave unread
    (text_attn.core.unread_options: the options of it the user gave are refused, or noted). ``start``: the family's
    defaults and a shipped config to start from, for the line refusing a fit given no config, no data option and no
    checkpoint (:func:`refuse_defaults`). Lightning's notices are quiet for this call only (:func:`quiet_lightning`).
    """
    argv = named_configs(prog, _argument_list(prog, sys.argv[1:] if args is None else args), configs)
    with quiet_lightning(scoring=bool(argv) and argv[0] in ("validate", "test")):
        return _run_cli(prog, module_cls, datamodule_cls, argv, errors, description, renamed, outdated, unread, start)


def _argument_list(prog: str, args: Any) -> list[str]:
    """A Python caller's ``args`` as the command line's list of strings; TypeError where it is one string (read a
    character an argument: "unknown subcommand 'f'") or holds another value (an int: "'int' object has no attribute
    'startswith'" from the config reader)."""
    name = f"{prog.replace('-', '_')}_cli"
    if isinstance(args, str):
        try:
            split = f"give {shlex.split(args)!r}"
        except ValueError:  # an unclosed quote
            split = "one string an argument"
        raise TypeError(f"{name} takes a list of arguments, as the command line splits them: {split}")
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"{name} takes a list of arguments (strings), got {type(args).__name__}")
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            raise TypeError(f"{name}: argument {i} must be a string, as on the command line: give {str(arg)!r}, "
                            f"got {type(arg).__name__} {arg!r}")  # fmt: skip
    return list(args)


def _run_cli(prog: str, module_cls: type, datamodule_cls: type, argv: list[str], errors: tuple, description: str,
             renamed: dict[str, str] | None, outdated: Callable[[set[str]], str | None] | None,
             unread: UnreadRules | None = None, start: StartFrom | None = None):  # fmt: skip
    """:func:`run_lightning_cli`'s run, its config names resolved, within its :func:`quiet_lightning`."""
    from lightning_fabric.utilities.exceptions import MisconfigurationException  # a Trainer option out of range

    from text_attn.core.lightning_parts import STAGES
    from text_attn.core.training import TrainingDiverged  # torch: not at the top (refuse_missing_files runs without)

    STAGES.update(work=False, loop=False)  # this run's (a notebook or a test runs several in one process)
    nodes = read_config_files(prog, argv)
    named = _given_options(argv, nodes)  # an old option's name, even set to null
    for old, new in (renamed or {}).items():
        if old in named or any(g.endswith(f".{old}") for g in named):
            fail(prog, f"option {old} was renamed: use {new}")
    message = outdated(named) if outdated is not None else None
    if message:
        fail(prog, message)
    given = frozenset(_given_options(argv, nodes, nulls=False))
    typed = frozenset(_given_options(argv, []))  # the command line's own: given whatever their value
    configured = bool(_option_values(argv, "--config", "-c"))  # a config chosen: it says what to train on
    cli_cls = _make_cli_class(prog, argv[0] if argv and argv[0] in SUBCOMMANDS else None, given,
                              _one_batch(argv, nodes), unread, None if configured else start, typed,
                              _export_follows_root(nodes, typed))  # fmt: skip
    restore = survive_closed_outputs()  # a reader of stdout / stderr that goes away does not end the run
    # what reaches the terminal is inert: a run folder's name or a config's value holding escape sequences was printed
    # as it was (a cleared screen, a window title set); the bars' cursor-up is kept
    shown = inert_streams(bars=True)
    shown.__enter__()
    hook = threading.excepthook
    threading.excepthook = functools.partial(_full_disk_in_thread, prog, hook)
    try:
        return cli_cls(
            module_cls,
            datamodule_cls,
            parser_class=cli_cls.parser_class_,
            save_config_callback=cli_cls.save_config_class_,
            args=argv,
            seed_everything_default=0,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": prog, "description": description, "allow_abbrev": False},
        )
    except (*errors, TrainingDiverged, WriteError, CheckpointRefused, MisconfigurationException) as exc:
        alike = (*errors, CheckpointRefused, MisconfigurationException)
        if not first_on_machine() and not STAGES["work"] and isinstance(exc, alike):
            # the options, data and checkpoints every process of a machine reads alike, before its own work (its
            # first says it): under DDP each line was said once a process. After (a damaged chunk only this process
            # streams, a diverged loss, a failed write), this process's own: said (review)
            raise SystemExit(2) from None
        fail(prog, _parser_message(str(exc)))  # a class that refused its options when made reads as the parser's
    except RuntimeError as exc:  # a monitor no validation ran to log (lightning_parts.MonitorCheck says the others)
        if not str(exc).startswith("Early stopping conditioned on metric"):
            raise
        fail(prog, one_line(exc))
    except OSError as exc:  # a full disk where the loggers write (hparams.yaml, events): it was 2-3 tracebacks
        if exc.errno not in FULL:
            raise
        where = f" {exc.filename}" if exc.filename else " the run folder"
        other_disk = "--trainer.default_root_dir on another disk"
        fixes = {errno.EROFS: f"a read-only file system: give {other_disk}", errno.EFBIG: "a limit on file sizes: "
                 "see ulimit -f"}  # fmt: skip
        fix = fixes.get(exc.errno, f"free some space, or give {other_disk}")
        fail(prog, f"cannot write{where}: {exc.strerror or one_line(exc)} ({fix})")
    except Interrupted as exc:  # what was written stays (checkpoints are written whole: AtomicCheckpointIO)
        if exc.alone:
            print(f"{prog}: {exc}", file=sys.stderr)
        else:
            say(f"{prog}: {exc}")  # every process of a DDP run stops at the same step: said once, by the first
        raise SystemExit(exc.code) from None
    except KeyboardInterrupt:  # before Lightning's loop began (the imports, the data, the model)
        print(f"{prog}: interrupted before training began: nothing was written", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        threading.excepthook = hook
        shown.__exit__(None, None, None)
        restore()


def _full_disk_in_thread(prog: str, hook: Callable, args: Any) -> None:
    """A logger's writer thread (TensorBoard's events) that found the disk full: one line, not its traceback beside
    the run's own line (the run stops where it writes next, and says so); any other error as Python shows it."""
    if isinstance(args.exc_value, OSError) and args.exc_value.errno in FULL:
        where = f" {args.exc_value.filename}" if args.exc_value.filename else ""
        print(f"{prog}: note: a log writer stopped: it could not write{where}: {args.exc_value.strerror}",
              file=sys.stderr)  # fmt: skip
        return
    hook(args)


SUBCOMMANDS = ("fit", "validate", "test", "predict")
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS)  # errors of a disk that takes no more (said in one line)


def _export_follows_root(nodes: list, typed: frozenset[str]) -> bool:
    """Whether the model file goes in the run folder the command line gives (``--trainer.default_root_dir D``, without
    ``--model.export_path``): where the config files write it in their own run folder, ``model.export_path``
    ``<trainer.default_root_dir>/model.pt``, as every shipped config does. Else a second run given another folder
    wrote its model file over the first's (``runs/your_photos/model.pt``), its checkpoints and logs in the folder
    given."""
    from text_attn.core.unread_options import dotted

    typed = _without_subcommand(typed)
    if "trainer.default_root_dir" not in typed or "model.export_path" in typed:
        return False
    root = export = None
    for node in nodes:  # the last config that sets each wins, as the parser reads them
        root = dotted(node or {}, "trainer.default_root_dir") or root
        export = dotted(node or {}, "model.export_path") or export
    return bool(root and export) and Path(str(export)) == Path(str(root)) / "model.pt"


LIMITS = ("limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches")


def _refuse_no_training(prog: str, node: Any) -> None:
    """A fit that would train no step (max_epochs 0, max_steps 0, limit_train_batches 0) refused in one line: it
    ended with exit code 0 and wrote the untrained weights as the model file, over the one there."""
    for name in ("max_epochs", "max_steps", "limit_train_batches"):
        value = node.get(f"trainer.{name}")
        if not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0:
            fail(prog, f"--trainer.{name} 0: fit would train no step and write the untrained weights as the "
                       "model file; give a positive value (validate or test scores a checkpoint without "
                       "training)")  # fmt: skip
    limit = node.get("trainer.max_time")
    seconds = _duration_seconds(prog, limit)
    if seconds is not None and seconds <= 0:  # "Time limit reached" at once: the trained model file replaced, exit 0
        fail(prog, f"--trainer.max_time {limit}: fit would train no step and write the untrained weights as the "
                   "model file; give a positive duration (DD:HH:MM:SS, or {hours: 1})")  # fmt: skip


def _duration_seconds(prog: str, value: Any) -> float | None:
    """``trainer.max_time`` in seconds, where it is one Lightning's Timer reads ("DD:HH:MM:SS", a mapping of
    timedelta's names); None for none, or a form Lightning refuses itself in one line. A mapping of another name
    ({minute: 1}) refused in one line (Lightning's Timer raised timedelta's TypeError as a traceback)."""
    import datetime

    said = "give DD:HH:MM:SS, or a mapping of days, hours, minutes, seconds"
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, str):
        found = re.fullmatch(r"([0-9]+):([0-9]{2}):([0-9]{2}):([0-9]{2})", value.strip())  # Lightning's Timer's form
        if found is None:
            return None  # refused by Lightning's Timer in one line
        days, hours, minutes, secs = (int(p) for p in found.groups())
        if days > datetime.timedelta.max.days:  # Lightning's Timer: an OverflowError traceback
            fail(prog, f"--trainer.max_time {value}: longer than a duration can be ({datetime.timedelta.max.days:,} "
                       "days at most)")  # fmt: skip
        return ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if hasattr(value, "items"):
        try:
            return datetime.timedelta(**dict(value.items())).total_seconds()
        except (TypeError, ValueError, OverflowError) as err:  # {minute: 1}, {days: 10**9}
            fail(prog, f"--trainer.max_time {dict(value.items())}: not a duration ({err}): {said}")
    return None


def _refuse_half_weights(prog: str, node: Any) -> None:
    """A fit with float16 weights (``trainer.precision 16-true``) refused in one line: Adam's statistics are float16
    too, a gradient under about 2e-4 squares to 0 there, and its steps then grow unbounded (a caption fine-tune's
    val CIDEr 0.63 fell to 0 at its second step, exit 0, its model file captioning "crowd crowd crowd ..."). bfloat16
    has float32's range; mixed precision keeps float32 weights. Validation and test in float16 stay."""
    if str(node.get("trainer.precision")) == "16-true":
        fail(prog, "--trainer.precision 16-true trains float16 weights with Adam's statistics in float16 too: a "
                   "gradient under about 2e-4 squares to 0 there, and the steps grow unbounded (a fine-tune's val "
                   "CIDEr fell to 0 at its second step); train with bf16-true, bf16-mixed or 16-mixed (a model file "
                   "is stored in float16 after: the export's --half)")  # fmt: skip


def _one_batch(args: list[str], nodes: list) -> frozenset[str]:
    """The Trainer's limit_*_batches given as the integer 1 (a config's ``limit_val_batches: 1``, a command line's
    ``--trainer.limit_val_batches 1``): Lightning's "one batch". The Trainer annotates them ``Union[float, int,
    None]`` and jsonargparse takes the first type that fits, so 1 reached it as 1.0, "all of them" (a float 1.0 given
    as such stays so). Other integers are not affected: Lightning reads 5.0 as 5 batches. Read as jsonargparse reads
    them: the command line left to right, each ``--config`` (``nodes``, in their order) where it stands, a config's
    top level and the section of the subcommand that runs."""
    sub = args[0] if args and args[0] in SUBCOMMANDS else None
    configs, ones = iter(nodes), {}

    def from_config(node: object) -> None:
        for tree in (node, node.get(sub) if sub and isinstance(node, dict) else None):
            trainer = tree.get("trainer") if isinstance(tree, dict) else None
            for name in LIMITS if isinstance(trainer, dict) else ():
                if name in trainer:
                    ones[name] = type(trainer[name]) is int and trainer[name] == 1

    for i, arg in enumerate(args):
        if arg in ("--config", "-c") and i + 1 < len(args) or arg.startswith("--config="):
            from_config(next(configs, None))
            continue
        name, _, value = arg.removeprefix("--trainer.").partition("=")
        if arg.startswith("--trainer.") and name in LIMITS:
            value = value if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            ones[name] = value.strip() in ("1", "+1")
    return frozenset(k for k, one in ones.items() if one)


# what both training commands take first: LightningCLI's three (predict is caption's and translate's job), then the two
# each command handles before LightningCLI parses (train_main)
ALL_SUBCOMMANDS = "fit, validate, test, report RUN_DIR or optimize"
HANDLED_FIRST = ("report", "optimize")
SUBCOMMAND_HELP = {  # each subcommand's line in --help
    "fit": "train a model from a config; its end writes the model file (--model.export_path)",
    "validate": "score a model on the validation split (--ckpt_path: a checkpoint, best or last)",
    "test": "score a model on the test split, once its settings are chosen (--ckpt_path: a checkpoint, best or last)",
    "report": "report RUN_DIR [--out PNG]: a run's logged loss and validation scores drawn as one PNG",
    "optimize": "optimize --config C.yaml --out DIR: the corpus written as LitData chunks, for fit to stream",
}

_SCORED = (
    "the weights to score: best or last (the run's best or newest last.ckpt under trainer.default_root_dir), or "
    "a .ckpt file a fit wrote; needed unless model.init_from names a model file (null: the untrained weights)"
)
CKPT_PATH_HELP = {  # each subcommand's --ckpt_path help
    "fit": (
        "resume a fit: last or best (the run's newest last.ckpt or best checkpoint under "
        "trainer.default_root_dir), or a .ckpt file a fit wrote (null: a fresh fit)"
    ),
    "validate": _SCORED,
    "test": _SCORED,
}


def _without_subcommand(options) -> frozenset[str]:
    """Dotted option names with a subcommand's prefix dropped (``fit.model.network`` -> ``model.network``)."""
    return frozenset(o.split(".", 1)[1] if o.split(".", 1)[0] in SUBCOMMANDS else o for o in options)


def nested_options_message(given: set[str], blocks: list[tuple[str, tuple[str, ...]]], example: str) -> str | None:
    """One line for a config or command line that still sets, directly under ``model``, options that now live in a
    ``model.<block>`` (``blocks``: each block's option names), saying where each one goes; None when none does.
    ``given``: the dotted option names (a subcommand prefix such as ``fit.`` is ignored)."""
    flat = _without_subcommand(given)
    found = [(block, [n for n in names if f"model.{n}" in flat]) for block, names in blocks]
    found = [(block, names) for block, names in found if names]
    if not found:
        return None
    moves = " and ".join(f"{', '.join(names)} under model.{block}" for block, names in found)
    block, names = found[0]
    return (
        f"the model options are nested now: put {moves} (e.g. model.{names[0]} -> model.{block}.{names[0]}; "
        f"see {example})"
    )
