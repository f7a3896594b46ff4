"""Options a run is given that its own settings never read: a data path beside the synthetic data, a hard-attention
option on a soft model, an SCST option without SCST. Two runs that differed only in one trained the same model, and
nothing said so (a user's photos "trained on" while the shapes scenes were).

One rule for both training commands: an option the user gave that the run's settings leave unread is refused in one
line, ``<setting> reads no <option>: <what reads it>``, before anything loads or trains. Where refusing would be out
of proportion (an option that only tunes, a knob a shipped config keeps for when its setting changes) the run goes
on and one note lists every such option. "Given" is what the command line and its config files set
(lightning_cli._given_options), by presence: a default nobody typed is never refused, and an option typed on the
command line is given whatever its value, its default's too (``--model.objective.scst_samples 5`` without SCST is
refused as ``4`` is). A config file's option at its default is not given: a ``--print_config`` file and a run's own
config.yaml write every option so, and go back in as they are (a free-form block such as ``model.network`` has no
defaults to write: its keys are given by presence there too). Options whose default is none (the data's paths) are
refused by their value where the data module is made, so from Python too (each family's ``unread.py``: its table of
who reads what). The commands that use a model say the same of their flags where a mode reads none of them
(``--model-info``: :func:`flags_given`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Unread:
    """Options one setting of the run leaves unread."""

    options: tuple[str, ...]  # dotted, as the command line names them: model.objective.scst_samples
    setting: str  # what leaves them unread, as the line names it: "model.decoder.attention soft"
    fix: str = ""  # what would read them: "set model.decoder.attention hard"
    refuse: bool = True  # False: said in the run's one note, the run goes on
    typed_only: bool = False  # only where typed on the command line (a config's are the ones optimize read too)

    def line(self) -> str:
        return f"{self.setting} reads no {', '.join(self.options)}" + (f": {self.fix}" if self.fix else "")


def read_by(kind: str, chosen: str, readers: dict[str, str], names: Iterable[str], sep: str = ", ") -> Unread:
    """The data options ``names`` that the ``kind`` chosen (``data.source shapes``, ``data.task reorder``) leaves
    unread, naming the one that reads them (``readers``: option -> the source or task that reads it; the first name's
    reader) and all it reads, joined by ``sep``."""
    names = tuple(names)
    reader = readers[names[0]]
    what = sep.join(f"data.{n}" for n, r in readers.items() if r == reader)
    return Unread(tuple(f"data.{n}" for n in names), f"{kind} {chosen}", f"set data.{kind} {reader} (it reads {what})")


def from_chunks(data: dict, unread: Iterable[str]) -> list[Unread]:
    """The data options a fit from a chunk folder (``data.root``, ``optimize``'s) does not read, noted where typed on
    the command line: the chunks hold the corpus as optimize read it (``--data.val_size 2`` or another
    ``--data.image_dir`` beside them changed nothing, unsaid). A config's are not noted: the same config serves
    optimize and fit."""
    from text_attn.core.streaming import is_chunk_folder

    root = data.get("root")
    if not root or not is_chunk_folder(root):
        return []
    return [Unread(tuple(f"data.{n}" for n in unread), "a fit from the chunks of data.root", refuse=False,
                   typed_only=True)]  # fmt: skip


def without_init_from(model: dict) -> list[Unread]:
    """model.init_vocab in a run that starts from no model (``model``: the parsed model options), as both training
    commands refuse it (model.init_member is refused without it too)."""
    if model.get("init_from"):
        return []
    return [Unread(("model.init_vocab",), "a run without model.init_from",
                   "give model.init_from, or leave model.init_vocab out")]  # fmt: skip


def given_unread(
    unread: Iterable[Unread],
    given: Iterable[str],
    value: Callable[[str], Any],
    default: Callable[[str], Any] = lambda _: None,
    typed: Iterable[str] = (),
) -> tuple[str | None, str | None]:
    """(the refusal line, the note line) for the options of ``unread`` that were ``given`` with a value (``value``: an
    option's parsed value; a null given is no value, the option stays at its default): those ``typed`` on the command
    line whatever the value, the others (a config file's) at a value other than their ``default``. None where there is
    none. The first refusal is the line (a run refused says one thing); the note lists every option noted."""
    given, typed = set(given), set(typed)

    def counts(option: str) -> bool:
        return option in given and value(option) is not None and (option in typed or value(option) != default(option))

    notes = []
    for found in unread:
        named = tuple(o for o in found.options if counts(o) and (o in typed or not found.typed_only))
        if not named:
            continue
        if found.refuse:
            return Unread(named, found.setting, found.fix).line(), None
        notes.append(Unread(named, found.setting).line())
    return None, f"options that change nothing in this run: {'; '.join(notes)}" if notes else None


def dotted(config: dict, name: str) -> Any:
    """The value of a dotted option (``model.decoder.attention``) in nested dicts; None where a level is missing."""
    node: Any = config
    for part in name.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def flags_given(parser: argparse.ArgumentParser, args: argparse.Namespace, keep: Iterable[str] = ()) -> list[str]:
    """The flags of ``parser`` that ``args`` (as parsed, before any is filled in) holds at a value other than their
    default, by their longest name; positional arguments and the destinations in ``keep`` aside."""
    keep = set(keep)
    return [
        max(a.option_strings, key=len)
        for a in parser._actions
        if a.option_strings and a.dest not in keep and a.default != argparse.SUPPRESS
        and getattr(args, a.dest, a.default) != a.default
    ]  # fmt: skip
