"""Command-line entry point ``text-export``: a text-train Lightning checkpoint (or a text model file: re-export, halve)
-> the self-contained model file that ``translate --model`` reads.

A checkpoint holds what a model file needs besides the weights under "model_metadata" (written by
``TranslationModule.on_save_checkpoint``: arch, config, vocabularies, tokenizer, lower) and the network's weights in
its state_dict under ``net.``. Checkpoints written before that metadata existed cannot be exported.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from text_attn.core import startup_gc
from text_attn.core.fast_exit import leaving
from text_attn.core.info_file import add_info_option, merged_info, read_info
from text_attn.core.modelfile import (
    ModelFileError,
    add_weights_option,
    check_shares,
    export_command,
    file_name,
    float16_note,
    mean_weights,
    shares_said,
    weights_said,
    wrote_line,
)
from text_attn.core.safe_files import atomic_output, inert_output
from text_attn.translation.bundled import caption_model_named, model_path
from text_attn.translation.checkpoint import read_source


def write_model_file(content: dict[str, Any], dst: str | Path, half: bool = False, src: str | Path = "") -> Path:
    """Write ``content`` (metadata + "state_dict") as a text model file at ``dst``; return its path.

    The weights are first loaded into a freshly built network (so they are checked to fit its settings, and
    float16 ones come back as float32); half: its parameters are stored as float16 (buffers stay as they are).
    The file is written next to dst and read back before it replaces dst (which may be the input)."""
    from text_attn.translation.translator import Translator

    what = "text model file" if "format" in content else "text-train checkpoint"
    translator = Translator.from_data(content, src or dst, what)
    out = Path(dst)
    # a fresh file beside dst (never a predictable name), renamed when it loads; a SIGTERM removes it
    with atomic_output(out) as tmp:
        translator.save(tmp, half=half)
        Translator.load(tmp)  # what translate will do
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal metadata, tensors included (a subword model travels as a uint8 tensor)."""
    import torch  # here: text-export --help needs no torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _as_first(meta: dict[str, Any], other: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``other``'s metadata with what may differ between models that average taken from ``meta`` (the first's), so
    that the rest is compared; and whether meta's vocabularies extend other's. What may differ: the source check
    (what the training corpus looked like: the first's is kept) and vocabularies that meta's extend (each of other's
    vocabularies the first pieces of meta's, at the same ids: text-train's ``model.init_vocab: extend``, e.g.
    your_pairs.yaml's fit and the bundled model it started from), with their sizes."""

    def lines(vocab: Any) -> list[str] | None:
        text = vocab.get("lines") if isinstance(vocab, dict) else None
        return text.split("\n") if isinstance(text, str) else None

    other = {k: v for k, v in other.items() if k != "source_check"}
    if "source_check" in meta:
        other["source_check"] = meta["source_check"]
    extends = [(key, lines(meta.get(key)), lines(other.get(key))) for key in ("src_vocab", "tgt_vocab")]
    if not all(mine is not None and theirs is not None and mine[: len(theirs)] == theirs for _, mine, theirs in
               extends):  # fmt: skip
        return other, False
    grown = any(len(mine) > len(theirs) for _, mine, theirs in extends)
    if grown and isinstance(meta.get("config"), dict) and isinstance(other.get("config"), dict):
        other.update({key: meta[key] for key, _, _ in extends})
        sizes = {k: meta["config"][k] for k in ("src_vocab_size", "tgt_vocab_size") if k in meta["config"]}
        other["config"] = {**other["config"], **sizes}
    return other, grown


def _filled(meta: dict[str, Any]) -> dict[str, Any]:
    """Metadata whose network config holds every setting, a default where the file left one unsaid (the bundled GRU
    records no ``dot_projection``, a re-export of it does: the two were "other settings")."""
    from text_attn.translation.networks import as_saved, config_dict, make_config

    arch, config = meta.get("arch"), meta.get("config")
    if not (isinstance(arch, str) and isinstance(config, dict)):
        return meta
    try:
        return {**meta, "config": config_dict(make_config(arch, as_saved(arch, config)))}
    except (ValueError, TypeError):  # a damaged config: compared as it is (and named where it differs)
        return meta


def _difference(meta: dict[str, Any], theirs: dict[str, Any], first: str) -> str:
    """What tells another source's metadata from the first's, in words: the first network setting that differs
    ("its network's dropout is 0.1, a.pt's 0.3"), its vocabularies, or else the first key."""
    mine, other = meta.get("config"), theirs.get("config")
    if meta.get("arch") != theirs.get("arch"):  # before the settings: a Transformer's against a GRU's differed first in
        # one only one of them has ("its network's attention is 'bahdanau', a.pt's None")
        names = {"rnn": "an RNN encoder-decoder", "transformer": "a Transformer"}
        theirs_is, mine_is = (names.get(m.get("arch"), repr(m.get("arch"))) for m in (theirs, meta))
        return f"it is {theirs_is}, {first} {mine_is}"
    if isinstance(mine, dict) and isinstance(other, dict) and not _same(mine, other):
        key = next(k for k in dict.fromkeys([*mine, *other]) if not _same(mine.get(k), other.get(k)))
        return f"its network's {key} is {other.get(key)!r}, {first}'s {mine.get(key)!r}"
    for key in dict.fromkeys([*meta, *theirs]):
        if not _same(meta.get(key), theirs.get(key)):
            return "other vocabularies" if key.endswith("vocab") else f"its {key} differs"
    return "other settings"


def average_sources(
    content: dict[str, Any], src: str | Path, others: list[str], shares: list[float] | None = None
) -> dict[str, Any]:
    """``content`` (read from src) with each weight replaced by its mean over src and ``others``
    (:func:`~text_attn.core.modelfile.mean_weights`; ``shares``: each one's weight in it, src's first, None: equal),
    and its info that of a new model (:func:`averaged_info`). Every other source must be the same model: the same
    settings and vocabularies (its metadata equal to src's, bar ``info``), or vocabularies src's extends (the added
    pieces' rows then come from src), and the same weight names and shapes; else :class:`ModelFileError` names it."""
    # the file's own tags (format, version: a model file has them, a checkpoint's metadata not) are no setting
    skip = ("state_dict", "info", "format", "version")
    meta = _filled({k: v for k, v in content.items() if k not in skip})
    states, infos, grown = [content["state_dict"]], [content.get("info") or {}], False
    for other in others:
        try:  # a bundled model by name too, as CHECKPOINT is (named as typed)
            data, _ = read_source(model_path(other))
        except ModelFileError as err:  # named after the option, as caption-export's are
            raise ModelFileError(f"--average {err}") from None
        theirs, extended = _as_first(meta, _filled({k: v for k, v in data.items() if k not in skip}))
        if not _same(theirs, meta):
            why = _difference(meta, theirs, file_name(src))
            if _as_first(theirs, meta)[1]:  # the larger vocabulary second: its added pieces' rows would be lost
                why = f"its vocabulary extends {file_name(src)}'s: give it first, as CHECKPOINT"
            raise ModelFileError(f"--average {other}: not the same model as {src} ({why})")
        grown = grown or extended
        states.append(data["state_dict"])
        infos.append(data.get("info") or {})
    sources = [str(src), *others]
    weights = mean_weights(states, sources, shares, grown=grown)
    return {**content, "info": averaged_info(infos, sources, shares), "state_dict": weights}


def averaged_info(infos: list[dict[str, Any]], sources: list[str], shares: list[float] | None = None) -> dict[str, Any]:
    """The info of the mean of the weights of ``sources`` (``infos``: theirs, the first's kept): a new model. Its
    first source's test scores are not its own: dropped (as caption-export --ensemble drops its first file's).
    ``averaged`` records what was averaged, by file name (no machine's folders in a model file, as
    text_attn.core.training.started_from). Another source's data and their terms are added: the mean learned from them
    too. The decoding the first recorded is kept and marked ``chosen_for`` that file, not dropped: beam width
    and length penalty belong to the task and the run more than to one epoch's weights, so the mean of one run's last
    epochs decodes better with them than greedy (the default without a choice); a tuner (benchmarks/
    tune_translation_decoding.py --write) chooses again on val and replaces the mark."""

    first = infos[0]
    scores = [k for k in first if k.startswith("test_scores")]  # test_scores_default_decoding too
    info = {k: v for k, v in first.items() if k not in scores}
    for key in ("training_data", "terms"):
        said = list(dict.fromkeys(i[key] for i in infos if isinstance(i.get(key), str) and i[key]))
        if said and said != [first.get(key)]:
            info[key] = "; ".join(said)
    names = [file_name(s) for s in sources]
    record = f"the mean of the weights of {len(names)} files by text-export --average: {', '.join(names)}"
    record += shares_said(shares)
    if scores:
        record += f"; {names[0]}'s test scores were not measured on this mean: left out"
    if first.get("averaged"):
        record += f"; {names[0]} was itself {first['averaged']}"
    info["averaged"] = record
    if isinstance(info.get("decoding"), dict) and "chosen_for" not in info["decoding"]:
        # what it was chosen for, as caption-export marks it; how it was chosen stays as recorded (a decoding typed
        # by hand was said to be "chosen on val")
        info["decoding"] = {**info["decoding"], "chosen_for": f"{names[0]}, before text-export --average"}
    return info


def export_checkpoint(src: str | Path, dst: str | Path, half: bool = False) -> Path:
    """Turn a text-train checkpoint (or a text model file) into a text model file at dst; return its path.
    Raises :class:`ModelFileError` (one line) for an input that cannot be exported, OSError when dst cannot be
    written."""
    content, _ = read_source(src)
    return write_model_file(content, dst, half=half, src=src)


def _target_words(content: dict[str, Any]) -> int | None:
    """The size of the model's output vocabulary (the widest beam a recorded decoding may ask for); None where it
    cannot be read: write_model_file then names the damage."""
    from text_attn.core.vocab import Vocabulary

    try:
        return len(Vocabulary.from_dict(content["tgt_vocab"]))
    except (KeyError, TypeError, AttributeError, ValueError):
        return None


def _options(p) -> None:
    add_info_option(p, "translate --model OUT")
    p.add_argument(
        "--average",
        nargs="+",
        metavar="CHECKPOINT",
        help="checkpoint averaging: the model file holds the mean of the weights of CHECKPOINT and these (e.g. the "
        "last epochs' checkpoints of one run; same settings and vocabularies; a bundled model by name too). A model "
        "whose vocabulary CHECKPOINT's extends (a fit with model.init_vocab: extend, as configs/text/your_pairs.yaml, "
        "and the model it started from) averages too: the added pieces' rows are CHECKPOINT's",
    )
    add_weights_option(
        p,
        "Blending a fine-tuned model back towards the one it started from keeps more of what that one knew: "
        "text-export runs/your_pairs/model.pt blended.pt --average transformer --weights 0.5 0.5",
    )


@inert_output
def export_main(argv: list[str] | None = None) -> int:
    """``text-export CHECKPOINT.ckpt|MODEL.pt OUT.pt [--half] [--info FILE] [--average CHECKPOINT ... [--weights W
    ...]]``; returns the exit code (errors: one line, exit 2)."""

    def convert(
        src: str, dst: str, half: bool, info: str | None, average: list[str] | None, weights: list[float] | None
    ) -> str:
        check_shares(weights, average)  # before anything is read
        extra = read_info(info) if info else {}  # before the source is read: a bad --info is said at once
        if isinstance(extra.get("decoding"), dict) and "hard_inference" in extra["decoding"]:  # stored, never read
            raise ModelFileError(f'--info {info}: its "decoding" sets hard_inference, which a hard-attention captioner '
                                 "reads; a text model has no such setting")  # fmt: skip
        content, what = read_source(src)
        startup_gc.release()  # the imports and the source are in: the collector as usual (text_attn.core.startup_gc)
        tensors = {(v.data_ptr(), tuple(v.shape)): v for v in content["state_dict"].values()}  # tied weights once
        n = sum(v.numel() for v in tensors.values())
        source, read = src, content  # the file itself (src says what has been made of it), and what it holds
        if average:
            content = average_sources(content, src, average, weights)
            src = f"{src} averaged with {' '.join(average)}"
            if weights:
                src += f" (weights {weights_said(weights)})"
        if extra or content.get("info"):  # merged over what the input (or the mean) records, its decoding checked
            facts = merged_info(content.get("info") or {}, extra, _target_words(content), info, source)
            content = {**content, "info": facts}
        # the file read, not the mean (a float32 mean of --half files said nothing of its doubled size)
        note = float16_note(read, source, half, dst, mean=bool(average)) if what == "model file" else None
        out = write_model_file(content, dst, half=half, src=src)
        if note:
            print(f"text-export: note: {note}", file=sys.stderr)
        return wrote_line(out, what, src, n, half)

    return export_command(
        "text-export",
        "Turn a text-train Lightning checkpoint (or a text model file: re-export, halve) into a "
        "self-contained model file for `translate --model`. Example: "
        "text-export runs/x/checkpoints/last.ckpt model.pt; averaging the last three epochs: "
        "text-export epoch-epoch=12.ckpt model.pt --average epoch-epoch=11.ckpt epoch-epoch=10.ckpt",
        "a text-train .ckpt file, or a text model file (a bundled one by name: multi30k_de_en, also called "
        "transformer, or bahdanau)",
        "model file to write (e.g. model.pt); may be the input",
        convert,
        argv,
        _options,
        named=lambda name: str(model_path(name)),
        other_family=lambda name: caption_model_named(name, "a bundled caption model: caption-export {name} OUT"),
    )


# the console script; the teardown it skips is 0.5-0.9 s once torch is loaded
main = leaving(export_main)
