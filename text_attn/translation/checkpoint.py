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
    if isinstance(data, dict) and "format" in data:
        return check_model_data(src, data, KIND), "model file"  # names a wrong kind (e.g. a caption model)
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
    where = [
        f"{name} {data[k]}" for k, name in (("epoch", "epoch"), ("global_step", "step")) if type(data.get(k)) is int
    ]
    what = "checkpoint" + (f" ({', '.join(where)})" if where else "")
    return {**meta, "state_dict": state}, what
