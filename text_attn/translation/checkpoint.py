"""What ``text-export`` and ``model.init_from`` read: a text-train checkpoint or a text model file -> the content of
a model file (metadata + "state_dict"). Below both text_attn.translation.export and the Translator, which import it
and not each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from text_attn.core.modelfile import (
    ModelFileError,
    check_model_data,
    checkpoint_family,
    checkpoint_message,
    is_lightning_checkpoint,
    read_export_source,
)

KIND = "text-model"
PREFIX = "net."  # TranslationModule.net: the network's weights in a checkpoint's state_dict


def read_source(src: str | Path) -> tuple[dict[str, Any], str]:
    """(content of a model file: metadata + "state_dict", what it was read from) for a text-train checkpoint or a
    text model file; anything else raises :class:`ModelFileError` with one line."""
    data = read_export_source(src)
    if isinstance(data, dict) and "format" in data:  # names a wrong kind (e.g. a caption model)
        return check_parts(src, check_model_data(src, data, KIND), "text model file"), "model file"
    if not is_lightning_checkpoint(data):
        raise ModelFileError(f"{src}: neither a text-train checkpoint nor a text model file")
    family = checkpoint_family(data)
    if family not in (None, KIND):  # e.g. a caption-train checkpoint: say which command exports it
        raise ModelFileError(checkpoint_message(src, data, KIND))
    state = {k[len(PREFIX) :]: v for k, v in data["state_dict"].items() if k.startswith(PREFIX)}
    meta = data.get("model_metadata")
    if not isinstance(meta, dict):
        if state:
            raise ModelFileError(
                f"{src}: this checkpoint was written by an older version of text-train, without the vocabularies and "
                "settings a model file needs, so it cannot be exported (use the model file its fit run wrote, "
                "or train again)"
            )
        raise ModelFileError(f"{src}: not a text-train checkpoint (no model metadata, no '{PREFIX}*' weights)")
    if not state:
        raise ModelFileError(f"{src}: not a text-train checkpoint (no '{PREFIX}*' weights in its state_dict)")
    where = [f"{name} {n}" for name, n in (("epoch", trained_epoch(data)), ("step", data.get("global_step")))
             if type(n) is int]  # fmt: skip
    what = "checkpoint" + (f" ({', '.join(where)})" if where else "")
    return check_parts(src, {**meta, "state_dict": state}, "text-train checkpoint", PREFIX), what


def trained_epoch(data: dict[str, Any]) -> int | None:
    """The epoch whose training made a checkpoint's weights, counted from 0 as the run's lines and the checkpoints'
    names count it (``best-epoch=1``, "validated at step 4 (epoch 1)"): the epochs its fit loop started, less one.
    Lightning's own ``epoch`` is that one in a save within or at the end of an epoch, and one more in the last.ckpt
    written as the fit ends (text-export said "epoch 2" of epoch 1's weights)."""
    try:
        started = data["loops"]["fit_loop"]["epoch_progress"]["current"]["started"]
    except (KeyError, TypeError):
        started = None
    if type(started) is int and started >= 1:
        return started - 1
    return data.get("epoch") if type(data.get("epoch")) is int else None


def check_parts(src: str | Path, content: dict[str, Any], what: str, prefix: str = "") -> dict[str, Any]:
    """``content`` (a model file's, or a checkpoint's metadata and weights) if its weights are a mapping of names to
    tensors and its ``info`` (if any) a mapping of names to facts; else :class:`ModelFileError`, "SRC: damaged WHAT:
    why" (a weight named as the file names it: ``prefix`` + its name). Checked as the file is read: text-export counts
    and averages the weights, and translate, --model-info and model.init_from read the info, before the network is
    built (a string there was a traceback far from the file)."""
    import torch  # here: the module is imported by commands whose --help needs no torch

    state = content.get("state_dict")
    if not isinstance(state, dict):
        why = "no weights (state_dict)" if state is None else f"its state_dict is a {type(state).__name__}, not weights"
        raise ModelFileError(f"{src}: damaged {what}: {why}")
    for name, value in state.items():
        if not isinstance(name, str):
            raise ModelFileError(f"{src}: damaged {what}: a weight's name is {name!r}, not text")
        if not isinstance(value, torch.Tensor):
            kind = type(value).__name__
            kind = f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"  # "is a int"
            raise ModelFileError(f"{src}: damaged {what}: its weight {prefix + name!r} is {kind}, not a tensor")
    info = content.get("info")
    if info is not None and not isinstance(info, dict):
        raise ModelFileError(f"{src}: damaged {what}: its info (the model's facts) is a {type(info).__name__}, not a "
                             "mapping")  # fmt: skip
    if info is not None and not all(isinstance(k, str) for k in info):
        raise ModelFileError(f"{src}: damaged {what}: its info (the model's facts) has names that are not text")
    return content
