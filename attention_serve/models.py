"""Which model files the server serves (``--caption-model`` / ``--text-model``) and what the HTTP process needs of
them: their names, decoding defaults, ``/info`` and, for photos, the preprocessing. Loaded once in the main process,
so a bad file is one line before anything starts; the inference workers load their own copy (apis.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from text_attn.core.bundled_names import other_familys
from text_attn.core.errors import missing
from text_attn.core.json_numbers import json_safe
from text_attn.core.modelfile import ModelFileError


@dataclass
class Served:
    """One served model: its file, the name clients see, the decoding it defaults to and its /info entry."""

    path: Path
    name: str
    defaults: dict[str, Any]
    info: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)  # caption: preprocess, grid, domain; text: arch


def _details(lines: list[str]) -> dict[str, str]:
    """``--model-info``'s ``key:   value`` lines as a dict (the model file's own ``info`` is added whole); an indented
    line continues the key before it (``test scores default decoding:`` puts its value on the next line)."""
    out: dict[str, str] = {}
    last = None
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            last = key.strip().replace(" ", "_")
            out[last] = value.strip()
        elif last is not None and line.startswith(" ") and line.strip():
            out[last] = f"{out[last]} {line.strip()}".strip()
    return out


# a text model file's test scores name where and how they were measured in their first key ("test_2016_flickr beam 8,
# length penalty 1: sacreBLEU", benchmarks/multi30k.py); /info keys them by metric, as a caption model's are
MEASURED = re.compile(r"(?P<split>\S+) beam (?P<beam>\d+)(?:, length penalty (?P<penalty>\d+(?:\.\d+)?))?")


def scores_keyed(info: dict[str, Any]) -> dict[str, Any]:
    """A model file's ``info`` with each ``test_scores*`` table keyed by metric alone: a key "WHERE: METRIC" becomes
    METRIC, WHERE its own entries (``split``, ``beam``, ``length_penalty``, as a caption model's table has them; a WHERE
    of another form under ``measured``). Anything else as it is."""
    out = dict(info)
    for key, table in info.items():
        if not (key.startswith("test_scores") and isinstance(table, dict)):
            continue
        scores, where = {}, {}
        for name, value in table.items():
            measured, sep, metric = str(name).rpartition(": ")
            if not sep:
                scores[name] = value
                continue
            scores[metric] = value
            m = MEASURED.fullmatch(measured)
            if m is None:
                where = {"measured": measured}
                continue
            where = {"split": m["split"], "beam": int(m["beam"])}
            if m["penalty"] is not None:
                where["length_penalty"] = float(m["penalty"])
        out[key] = {**scores, **where}
    return out


def caption_path(value: str | None) -> Path | None:
    """``--caption-model``: ``none`` -> not served; else as ``caption --model`` resolves it (None: the bundled
    Flickr8k model; ``shapes`` / ``flickr8k``: that bundled model; else a file)."""
    from captioning.model.bundled import model_path

    return None if value == "none" else model_path(value)


def text_path(value: str | None) -> Path | None:
    """``--text-model``: ``none`` -> not served; else as ``translate --model`` resolves it (None: the bundled
    German -> English model; a bundled model's name; else a file)."""
    from text_attn.translation.bundled import model_path

    return None if value == "none" else model_path(value)


def load_caption(path: Path) -> Served:
    """The captioner's facts (raises ModelFileError with one line for a file that is not a caption model)."""
    from captioning.commands.caption import model_info
    from captioning.model.bundled import bundled_name
    from captioning.model.captioner import Captioner

    captioner = Captioner.load(path)
    defaults = {"max_len": 30, **captioner.decoding()}  # what `caption` and Captioner.caption_images use
    beam, words = defaults["beam_size"], len(captioner.vocab)
    if beam > words:  # a hand-written info's, as `caption` refuses it: every /caption was answered with an empty one
        raise ModelFileError(f"{path}: its recorded decoding's beam size {beam} is more than the model's {words} "
                             'words (caption-export --info with a "decoding" replaces it)')  # fmt: skip
    bundled = bundled_name(path)
    name = f"{bundled} (bundled)" if bundled else Path(path).name
    info = {
        "model": name,
        **_details(model_info(captioner, path)[1:6]),
        "decoding": defaults,
        "info": json_safe(scores_keyed(captioner.info)),
    }
    from captioning.model.reading import caption_tokens

    # the HTTP process bounds a request's evidence by the regions and the given caption's words, as the worker counts
    # them (limits.check_caption_work)
    extra = {"preprocess": captioner.preprocess, "grid": captioner.grid, "domain": captioner.domain, "bundled": bundled,
             "regions": captioner.grid**2, "words": lambda text: caption_tokens(text, lower=False),
             "vocab": words}  # fmt: skip
    return Served(Path(path), name, defaults, info, extra)


def load_text(path: Path, ensemble: list[Path] | None = None) -> Served:
    """The translator's facts (raises ModelFileError with one line for a file that is not a text model, or models
    that cannot translate as one). ``ensemble``: the other models' files (--text-ensemble)."""
    from text_attn.translation.bundled import bundled_name
    from text_attn.translation.translate_cli import model_info
    from text_attn.translation.translator import Translator

    translator = Translator.load(path)
    ensemble = list(ensemble or [])
    if ensemble:
        from text_attn.translation.ensemble import EnsembleTranslator

        names = [f"--text-model {path}", *(f"--text-ensemble {p}" for p in ensemble)]
        try:
            translator = EnsembleTranslator([translator, *(Translator.load(p) for p in ensemble)], names)
        except ModelFileError:
            raise
        except ValueError as err:  # models that cannot share one search
            raise ModelFileError(str(err)) from None
    defaults = translator.decoding()  # what `translate` and Translator.translate use (the first model's)

    def named(p: Path) -> str:
        bundled = bundled_name(p)
        return f"{bundled} (bundled)" if bundled else Path(p).name

    bundled = bundled_name(path)
    name = " + ".join(named(p) for p in [path, *ensemble])
    details = _details(model_info(translator, path)[1:])
    if "input_casing" in details:  # "(--keep-case: as typed)": the request's option here, not the command's flag
        details["input_casing"] = details["input_casing"].replace("--keep-case", "keep_case=1")
    info = {
        "model": name,
        **details,
        "decoding": defaults,
        "info": json_safe(scores_keyed(translator.info)),
    }
    if ensemble:  # said in /info: the words are the ensemble's, the attention and decoding the first model's
        info["ensemble"] = [named(p) for p in ensemble]
    # the HTTP process counts a request's source tokens as the worker will read them (limits.check_work): the
    # translator's text reading (codec, casing) is kept, its networks dropped (an ensemble's every member's), once
    # their learned positions are read
    positions = translator.position_limit
    vocab = len(translator.tgt_vocab)  # the widest beam it can search (an ensemble's words are its members' own)
    for member in {id(m): m for m in [translator, *getattr(translator, "members", [])]}.values():
        member.net = None
    extra = {"arch": translator.arch, "bundled": bundled, "tokenize": translator.tokenize,
             "sentence_tokens": translator.sentence_tokens, "read_paragraph": translator.read_paragraph,
             "target_tokens": lambda text: translator.target_tokens(text)[0],
             "lang": translator.source_lang, "positions": positions, "ensemble": ensemble, "vocab": vocab}  # fmt: skip
    return Served(Path(path), name, defaults, info, extra)


def ensemble_files(names: list[str] | None) -> list[Path]:
    """--text-ensemble's files (as --text-model resolves a name); ModelFileError (one line) for one that is missing."""
    paths = []
    for name in names or []:
        p = text_path(name)
        if p is None:  # "none"
            raise ModelFileError("--text-ensemble none: give a model file or a bundled text model's name")
        if not p.is_file():
            raise ModelFileError(f"--text-ensemble {missing(p, 'no such model file', name)}")
        paths.append(p)
    return paths


def check_files(caption: str | None, text: str | None) -> tuple[Path | None, Path | None]:
    """Both models' files (None: not served); ModelFileError (one line) for one that is missing. No torch: the
    command says a mistyped path before its imports."""
    from captioning.model import bundled as captions
    from text_attn.translation import bundled as texts

    cpath, tpath = caption_path(caption), text_path(text)
    # the other family's bundled name (`--text-model flickr8k`) said "no such model file", as if mistyped
    usage = "a bundled {} model: attention-serve --{}-model {{name}}"
    ours = "the bundled {} models are {}"
    swapped = {
        "--caption-model": other_familys(
            caption,
            captions.TEXT_NAMES,
            usage.format("text", "text"),
            ours.format("caption", ", ".join(captions.MODEL_NAMES)),
        ),
        "--text-model": other_familys(
            text,
            texts.CAPTION_NAMES,
            usage.format("caption", "caption"),
            ours.format("text", ", ".join(texts.MODEL_NAMES)),
        ),
    }
    for flag, p, typed in (("--caption-model", cpath, caption), ("--text-model", tpath, text)):
        if p is None or p.is_file():
            continue
        if p.is_dir():  # there, but not a file (it said "no such model file")
            raise ModelFileError(f"{flag} {typed}: a folder, not a model file")
        if p.exists():
            raise ModelFileError(f"{flag} {typed}: not a regular file (a FIFO, device or socket), not a model file")
        raise ModelFileError(f"{flag} {swapped[flag] or missing(p, 'no such model file', typed)}")
    return cpath, tpath


def load(
    caption: str | None, text: str | None, ensemble: list[str] | None = None
) -> tuple[Served | None, Served | None]:
    """Both models' facts; ModelFileError (one line) for a file that is missing or not that kind of model.
    ``ensemble``: --text-ensemble's models."""
    cpath, tpath = check_files(caption, text)
    others = ensemble_files(ensemble)
    return (load_caption(cpath) if cpath else None), (load_text(tpath, others) if tpath else None)
