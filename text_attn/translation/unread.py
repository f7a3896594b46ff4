"""The options a text config's settings leave unread (text_attn.core.unread_options: the rule and its wording).

``text-train`` refuses those the user gave, or notes them (:func:`unread_options`, from the parsed config); the data
module refuses the corpus paths its task does not read by their value (:func:`unread_path`: their default is none,
so one set is one given, from Python too). No network is imported here: the data module reads it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from text_attn.core.self_critical import unread_without_scst
from text_attn.core.unread_options import Unread, from_chunks, read_by, without_init_from

# what names the user's corpus, and the task that reads it (data.root: the data module's own check)
TASK_OPTIONS = {"path": "tsv", "src_col": "tsv", "tgt_col": "tsv", "src_path": "parallel", "tgt_path": "parallel",
                "split_names": "pair"}  # fmt: skip
SYNTHETIC = ("reorder", "dates")
# what a fit from chunks does not read: the corpus and its cut are as optimize read them
CHUNKS_UNREAD = ("task", "path", "src_col", "tgt_col", "src_path", "tgt_path", "split_names", "train_size", "val_size",
                 "test_size", "min_len", "max_len")  # fmt: skip
# RNN attentions without a hidden scoring layer (attn_dim: bahdanau's and luong-concat's)
NO_ATTN_DIM = ("luong-dot", "luong-general", "none")


def unread_path(task: str, paths: dict[str, object]) -> str | None:
    """The refusal of the first corpus option set (``paths``: name -> value, None: not set) that ``task`` does not
    read, naming the task that reads it; None when it reads them all. Without it a corpus given beside the default
    task trained a model of the synthetic pairs."""
    for name, value in paths.items():
        if value is not None and TASK_OPTIONS[name] != task:
            return read_by("task", task, TASK_OPTIONS, (name,)).line()
    return None


def unread_options(config: dict, networks: Mapping[str, Collection[str]] | None = None) -> list[Unread]:
    """What the run's settings leave unread (``config``: the parsed options, nested: model, data); text-train keeps
    those the user gave. The first ones are refused; the last ones (tuning knobs) noted. ``networks``: arch -> the
    model.network options it reads (translation.networks.network_options; None: not checked here, the network's
    own config refuses them when it is built)."""
    model, data = config.get("model") or {}, config.get("data") or {}
    objective = model.get("objective") or {}
    found = unread_without_scst(objective)
    # word links without the weight that trains on them: read, checked, and nothing learned from them, unsaid
    if not objective.get("attn_sup_lambda"):
        found.append(Unread(("data.alignments", "model.objective.attn_sup_layer"), "model.objective.attn_sup_lambda 0",
                            "set it above 0 to train the attention on the links (the aligned configs: 1)"))  # fmt: skip
    found += from_chunks(data, CHUNKS_UNREAD)
    found += without_init_from(model)
    network = model.get("network") or {}
    found += other_arch_options(model.get("arch") or "rnn", network, networks or {})
    # the RNN's attention: the config's, or its default; with init_from and none given, the start's (not read here)
    attention = network.get("attention") or (None if model.get("init_from") else "bahdanau")
    if model.get("arch", "rnn") == "rnn" and attention in NO_ATTN_DIM:  # the shipped luong and none configs set it
        found.append(Unread(("model.network.attn_dim",), f"model.network.attention {attention}",
                            "it sizes the scoring layer of bahdanau and luong-concat; leave it out"))  # fmt: skip
    if model.get("arch", "rnn") == "rnn" and attention is not None and attention != "luong-dot":
        found.append(Unread(("model.network.dot_projection",), f"model.network.attention {attention}",
                            "it rebuilds the luong-dot files of before 2026-12-02; leave it out"))  # fmt: skip
    task = data.get("task") or "reorder"
    unread = tuple(n for n, reader in TASK_OPTIONS.items() if reader != task and n in ("src_col", "tgt_col"))
    if unread:
        found.append(read_by("task", task, TASK_OPTIONS, unread))
    if task in SYNTHETIC:  # made up here: no corpus to cut (data.lower is read: the model file's tokenizer keeps it)
        found.append(Unread(("data.max_tokens",), f"task {task}", refuse=False))
    if task != "reorder":
        found.append(Unread(("data.min_len", "data.max_len"), f"task {task}", refuse=False))
    if model.get("init_from"):  # the start's own reading is kept: "data.tokenizer word reads no data.subword_vocab"
        # was said to a run whose model, from a subword start, read subwords all the same
        found.append(Unread(("data.tokenizer", "data.lower", "data.subword_vocab", "data.subword_type"),
                            "model.init_from", "the start model reads text its own way: its tokenizer, casing and "
                            "subword model are kept", refuse=False))  # fmt: skip
    elif (data.get("tokenizer") or "word") == "word":
        found.append(Unread(("data.subword_vocab", "data.subword_type"), "data.tokenizer word", refuse=False))
    else:
        found.append(Unread(("data.lower",), "data.tokenizer subword", refuse=False))
    return found


def other_arch_options(arch: str, network: dict, networks: Mapping[str, Collection[str]]) -> list[Unread]:
    """The keys of the ``network`` block that ``arch`` does not read and another arch does (``networks``: arch -> its
    options), refused. A block merges into the one before it, so the RNN's keys of a config stay beside a transformer
    block given after it: the line says how to clear them. A key no arch reads is the network config's to refuse
    (its line lists the known ones)."""
    reads = networks.get(arch)
    others = {a: set(o) - set(reads) for a, o in networks.items() if a != arch} if reads is not None else {}
    for other, theirs in others.items():
        keys = tuple(f"model.network.{k}" for k in network if k in theirs)
        if keys:
            fix = (f"options of model.arch {other}; a model.network block merges into the one before it, key by key: "
                   "give --model.network null before the new block to clear the old one")  # fmt: skip
            return [Unread(keys, f"model.arch {arch}", fix)]
    return []
