"""The text model families by name, so training, model files and `translate` build them the same way."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any

from torch import nn

from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig, saved_options
from text_attn.translation.transformer import Transformer, TransformerConfig

# arch name -> (config dataclass, network class); the network takes the config as its only argument.
NETWORKS: dict[str, tuple[type, type[nn.Module]]] = {
    "rnn": (Seq2SeqConfig, Seq2Seq),
    "transformer": (TransformerConfig, Transformer),
}


# what the data gives every network, never the user's model.network
SIZES = ("src_vocab_size", "tgt_vocab_size")


def network_options() -> dict[str, frozenset[str]]:
    """arch -> the model.network options it reads (its config's fields, less the data's sizes)."""
    return {arch: frozenset(f.name for f in fields(cls) if f.name not in SIZES) for arch, (cls, _) in NETWORKS.items()}


def make_config(arch: str, options: dict[str, Any], **sizes: int) -> Any:
    """Config dataclass for ``arch`` from user ``options`` plus the data-dependent ``sizes`` (vocab sizes, pad)."""
    if arch not in NETWORKS:
        raise ValueError(f"unknown arch {arch!r}; choose one of {sorted(NETWORKS)}")
    cls = NETWORKS[arch][0]
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown {arch} network option(s) {unknown}; known: {sorted(known - set(sizes))}")
    kinds = {f.name: f.type for f in fields(cls)}  # "int", "float", "bool", "str" (the configs' annotations)
    for name, value in options.items():
        _check_kind(name, value, kinds[name])
    for name, value in options.items():  # widths, layer and head counts: torch's own refusal named no option
        # by the field's type, not the value's: YAML reads a dropout of 0 as the integer 0
        if kinds[name] == "int" and name != "pad_id" and value < 1:
            raise ValueError(f"model.network.{name} must be at least 1, got {value}")
        if name in ("dropout", "attn_dropout") and not 0 <= value < 1:
            raise ValueError(f"model.network.{name} must be in [0, 1), got {value}")
    return cls(**{**options, **sizes})


def _check_kind(name: str, value: Any, kind: str) -> None:
    """The block is free-form (a dict): a value of the wrong type ended in a traceback from deep inside torch ("abc" as
    a width), or trained silently ("maybe" as a bool was true). One ValueError line naming it."""
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    elif kind == "str":
        ok = isinstance(value, str)
    else:
        return
    if not ok:
        what = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a text"}[kind]
        raise ValueError(f"model.network.{name} must be {what}, got {value}")


def as_saved(arch: str, options: dict[str, Any]) -> dict[str, Any]:
    """A network config as a model file or checkpoint saved it, with what a file of before a change left unsaid but
    was built with (an RNN's: seq2seq.saved_options); for make_config."""
    return saved_options(dict(options)) if arch == "rnn" else dict(options)


def build_network(arch: str, config: Any) -> nn.Module:
    return NETWORKS[arch][1](config)


def config_dict(config: Any) -> dict[str, Any]:
    return asdict(config)
