"""The options a caption config's settings leave unread (text_attn.core.unread_options: the rule and its wording).

``caption-train`` refuses those the user gave, or notes them (:func:`unread_options`, from the parsed config);
the data module refuses the data paths its source does not read by their value (:func:`unread_path`: a path's
default is none, so a path set is a path given, from Python too). No model is imported here: the data module reads it.
"""

from __future__ import annotations

from text_attn.core.self_critical import unread_without_scst
from text_attn.core.unread_options import Unread, dotted, from_chunks, read_by, without_init_from

# the paths that name the user's data, and the source that reads them (data.root: the data module's own check)
SOURCE_PATHS = {"karpathy_json": "karpathy", "image_root": "karpathy", "image_dir": "folder", "captions_tsv": "folder"}

# the options of some sources only, and the sources that read them (strict: whatever reads photo files)
SOURCE_OPTIONS = {"scene_size": ("shapes",), "max_objects": ("shapes",), "layout": ("flickr8k",),
                  "strict": ("karpathy", "flickr8k", "folder")}  # fmt: skip

# what a fit from chunks does not read: the photos, captions and splits are as optimize read them
CHUNKS_UNREAD = ("image_dir", "captions_tsv", "karpathy_json", "image_root", "layout", "train_size", "val_size",
                 "test_size", "scene_size", "max_objects", "mix_root", "mix_size", "mix_image_dir",
                 "mix_captions_tsv")  # fmt: skip

# the options only hard attention reads: its REINFORCE objective and its sampling
HARD_OBJECTIVE = ("soft_warmup", "rl_lambda", "rl_reward", "entropy_lambda", "baseline_decay", "collapse_warmup",
                  "collapse_ratio")  # fmt: skip
HARD_OPTIONS = (*(f"model.objective.{n}" for n in HARD_OBJECTIVE), "model.decoder.hard_inference",
                "model.decoder.soft_prob")  # fmt: skip


def unread_path(source: str, paths: dict[str, str | None]) -> str | None:
    """The refusal of the first data path set (``paths``: option name -> value) that ``source`` does not read, naming
    the source that reads it; None when it reads them all. Without it a folder of photos given beside the default
    source trained a model of the synthetic scenes."""
    for name, value in paths.items():
        reader = SOURCE_PATHS.get(name)
        if value is not None and reader is not None and reader != source:
            return read_by("source", source, SOURCE_PATHS, (name,), sep=" and ").line()
    return None


def unread_options(config: dict) -> list[Unread]:
    """What the run's settings leave unread (``config``: the parsed options, nested: model, data); caption-train
    keeps those the user gave. The first ones are refused (the user set them for an effect they cannot have); the
    last ones are noted (tuning knobs, which shipped configs may keep for when their setting changes)."""
    model, data = config.get("model") or {}, config.get("data") or {}
    found = unread_without_scst(dotted(model, "objective") or {}, extra=("scst_bleu", "scst_meteor"))
    found += from_chunks(data, CHUNKS_UNREAD)
    attention = dotted(model, "decoder.attention") or "soft"
    # an attention of neither kind: the decoder refuses it by name (here its hard options were "read by no
    # model.decoder.attention stochastic", which never said the value was wrong)
    if attention == "soft":
        found.append(Unread(HARD_OPTIONS, f"model.decoder.attention {attention}",
                            "set model.decoder.attention hard (options of hard attention)"))  # fmt: skip
    elif (dotted(model, "objective.rl_reward") or "caption") == "word":  # each region its own word's log-probability
        found.append(Unread(("model.objective.baseline_decay",), "model.objective.rl_reward word", refuse=False))
    found += without_init_from(model)
    if not dotted(model, "objective.distil_from"):
        found.append(Unread(("model.objective.distil_weight", "model.objective.distil_attention",
                             "model.objective.distil_cache_gb"),
                            "model.objective.distil_from null",
                            "name a teacher with model.objective.distil_from"))  # fmt: skip
    tuned = dotted(model, "encoder.fine_tune") or "none"
    if model.get("lr_schedule") == "budget":
        found.append(Unread(("model.lr_patience", "model.lr_factor"), "model.lr_schedule budget", refuse=False))
    elif model.get("lr_patience") is None:
        found.append(Unread(("model.lr_factor",), "model.lr_patience null", refuse=False))
    if tuned == "none":
        found.append(Unread(("model.encoder_lr", "model.encoder.frozen_bn"), "model.encoder.fine_tune none",
                            refuse=False))  # fmt: skip
    source = data.get("source") or "shapes"
    unread = [f"data.{n}" for n, sources in SOURCE_OPTIONS.items() if source not in sources]
    if unread:
        found.append(Unread(tuple(unread), f"source {source}", refuse=False))
    if not data.get("attention_targets"):
        found.append(Unread(("data.attention_words",), "data.attention_targets false", refuse=False))
    if not data.get("cache_features"):
        found.append(Unread(("data.feature_cache_dir",), "data.cache_features false", refuse=False))
    if data.get("photo_batches"):
        found.append(Unread(("data.sort_by_length",), "data.photo_batches true", refuse=False))
    return found
