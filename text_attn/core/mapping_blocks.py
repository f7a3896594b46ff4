"""The training commands' free-form mapping options (``model.network``, ``data.split_names``) merged block by block.

jsonargparse merges a typed block (a dataclass such as ``model.objective``) key by key, and one key of a mapping
given alone (``--model.network.dropout 0.2``), but a whole mapping given again (a second ``--config`` holding
``model.network:``, or ``--model.network '{dropout: 0.2}'`` after a config) replaced the one before: the keys given
earlier were dropped without a word. Here a later mapping merges into the earlier one, key by key (one level: the
values of these blocks are scalars), and a null clears it (``--model.network null`` before a new block).

jsonargparse has no public hook for this: a mapping-typed option is parsed by its private ``ActionTypeHint``, whose
``_check_type_`` sees the value parsed so far (``cfg``) for the command line and for each config file alike. So the
one subclass below overrides that method, and :func:`merge_mapping_blocks` swaps it in for the mapping options of a
parser (``LightningCLI.add_arguments_to_parser``, the public hook, hands each subcommand's parser over).
tests/cli/test_mapping_blocks.py fails where a jsonargparse release moves the class or stops calling the method; a
release without the class leaves the options as jsonargparse parses them (replaced), not the command broken.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

try:  # private: see the module's docstring
    from jsonargparse._typehints import ActionTypeHint
except ImportError:  # a release that moved it: blocks replace each other, as plain jsonargparse does
    ActionTypeHint = None

# what --help adds to each such option (its name for OPTION)
HELP = ("Given again (another config, the command line), a block merges into the block before, key by key; "
        "--OPTION null before a new block clears it.")  # fmt: skip

_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def is_mapping_type(hint: Any) -> bool:
    """Whether ``hint`` is a free-form mapping (``dict[str, Any]``, ``Mapping[...]``), alone or with None; not a union
    that also takes a scalar (the Trainer's ``max_time``: a text, a timedelta or a dict of its parts, each whole)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(kinds) == 1 and is_mapping_type(kinds[0])
    return hint in _MAPPINGS or typing.get_origin(hint) in _MAPPINGS


if ActionTypeHint is not None:

    class MergedMapping(ActionTypeHint):
        """A mapping option whose value merges into the value it had (from a default, a config, the command line)."""

        def _check_type_(self, value, **kwargs):
            before = kwargs.get("cfg")
            before = before.get(self.dest) if before is not None else None
            parsed = super()._check_type_(value, **kwargs)
            if isinstance(before, dict) and isinstance(parsed, dict):
                return {**before, **parsed}  # one level: the later value of a key wins
            return parsed  # None (null clears), or the first block


def merge_mapping_blocks(parser) -> list[str]:
    """Make the free-form mapping options of ``parser`` (a jsonargparse parser) merge block by block; their names."""
    if ActionTypeHint is None:
        return []
    merged = []
    for action in parser._actions:  # argparse's list of the parser's options (no public accessor)
        if type(action) is ActionTypeHint and is_mapping_type(getattr(action, "_typehint", None)):
            action.__class__ = MergedMapping  # the same object, no state added: every reference to it sees the change
            action.help = f"{action.help or ''} {HELP.replace('OPTION', action.dest)}".strip()
            merged.append(action.dest)
    return merged
