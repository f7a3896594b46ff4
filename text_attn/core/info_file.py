"""``--info FILE`` of both export commands (``caption-export``, ``text-export``): a JSON object of facts about a model
(its training data, their terms, test scores, a decoding chosen on val) read from a small regular file, checked, and
merged over what the model file holds; ``--model-info`` prints them (modelfile.info_lines)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from text_attn.core.errors import one_line
from text_attn.core.modelfile import ModelFileError

# --info is a few facts (data, terms, scores, a decoding): a file larger than this, or nested deeper, is not one (a
# mistaken path to a large file was read whole; 5,000 nested lists were a RecursionError in json, 900 one in torch.save)
INFO_BYTES = 1 << 20
INFO_DEPTH = 32


def add_info_option(p: argparse.ArgumentParser, shown_by: str) -> None:
    """The ``--info FILE`` option; ``shown_by``: the command whose ``--model-info`` prints the facts."""
    p.add_argument(
        "--info",
        metavar="FILE",
        help="a JSON object of facts to store in the model file (training data, its terms, test scores, a decoding "
        "chosen on val: beam_size, length_penalty, no_repeat_ngram); merged over what the input holds; "
        f"`{shown_by} --model-info` prints it. A regular file of at most {INFO_BYTES >> 20} MiB, nested at most "
        f"{INFO_DEPTH} deep",
    )


def _not_a_number(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number (give null, or a number)")


def _shape(value: object) -> tuple[int, bool]:
    """How deeply a JSON value nests (a number or text: 0; {"a": 1}: 1), and whether every number in it is finite
    (1e999 reads as infinity, which no JSON reader writes back: refused as NaN is); walked without recursion."""
    deepest, finite, todo = 0, True, [(value, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            todo += [(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)]
        elif isinstance(value, float):
            finite = finite and math.isfinite(value)
    return deepest, finite


# what a recorded decoding holds: what the commands read from it (a hard-attention captioner's hard_inference too),
# then the notes the tuning benchmarks and the exports write beside it
DECODING_KEYS = ("beam_size", "length_penalty", "no_repeat_ngram", "hard_inference", "chosen_by", "chosen_for")


def json_kind(value: object) -> str:
    """What a parsed JSON value is, in JSON's words ("got NoneType", "got list" named Python's types)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    kinds = ((dict, "an object"), (list, "an array"), (str, "a string"), ((int, float), "a number"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def decoding_fault(decoding: object, words: int | None = None) -> str | None:
    """What makes a recorded decoding (``info["decoding"]``) one the model's command cannot use, for a message; None
    where it can. Its beam_size a positive integer (at most ``words``, the model's output vocabulary), length_penalty
    a number >= 0, no_repeat_ngram an integer >= 0, each where given: a beam wider than the vocabulary made every run
    of the file fail (and attention-serve answer empty captions) though no one typed --beam-size."""
    from text_attn.core.api_args import check_decoding

    if decoding is None:  # none recorded (--info's null removes one)
        return None
    if not isinstance(decoding, dict):
        return f"it must be a JSON object, got {json_kind(decoding)}"
    try:
        check_decoding(decoding.get("beam_size"), decoding.get("length_penalty"), None,
                       decoding.get("no_repeat_ngram"), words)  # fmt: skip
    except (TypeError, ValueError) as err:
        return one_line(err)
    if "hard_inference" in decoding and decoding["hard_inference"] not in ("argmax", "expect"):
        return f"hard_inference must be argmax or expect, got {json.dumps(decoding['hard_inference'])}"
    return None


def read_info(path: str) -> dict:
    """--info FILE: a JSON object of facts about the model (its data, their terms, scores, a decoding), read from a
    regular file of at most INFO_BYTES, nested at most INFO_DEPTH deep."""
    import json

    from text_attn.core.safe_files import read_regular

    deep = f"--info {path}: nested more than {INFO_DEPTH} deep: not a JSON object of facts about a model"
    try:
        text = read_regular(path, INFO_BYTES).decode("utf-8-sig")  # a byte-order mark (Windows editors) dropped
        # NaN and Infinity, which Python's json takes and no JSON reader (attention-serve's /info) writes back, refused
        info = json.loads(text, parse_constant=_not_a_number)
    except FileNotFoundError:
        raise ModelFileError(f"--info {path}: no such file") from None
    except OSError as err:  # there, but unreadable (no permission): its reason
        raise ModelFileError(f"--info {path}: cannot read it ({(err.strerror or one_line(err)).lower()})") from None
    except RecursionError:  # thousands of levels: json's own limit, far past INFO_DEPTH
        raise ModelFileError(deep) from None
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as err:
        raise ModelFileError(f"--info {path}: cannot read a JSON object ({one_line(err)})") from None
    if not isinstance(info, dict):
        raise ModelFileError(f"--info {path}: expected a JSON object, got {json_kind(info)}")
    depth, finite = _shape(info)
    if depth > INFO_DEPTH:
        raise ModelFileError(deep)
    if not finite:
        raise ModelFileError(f"--info {path}: a number too large to store (it reads as Infinity, which is not a JSON "
                             "number): give null, or a number")  # fmt: skip
    if "decoding" in info and (fault := decoding_fault(info["decoding"])):  # the vocabulary is checked once loaded
        raise ModelFileError(f'--info {path}: its "decoding" cannot be used: {fault}')
    if isinstance(info.get("decoding"), dict) and (unknown := [k for k in info["decoding"] if k not in DECODING_KEYS]):
        # "beem_size" was stored and shown by --model-info, and no run read it: decoded greedily without a word
        import difflib

        said = [f"{k!r}" + "".join(f" ({m}?)" for m in difflib.get_close_matches(k, DECODING_KEYS, 1)) for k in unknown]
        raise ModelFileError(f'--info {path}: its "decoding" holds {", ".join(said)}, which no run reads (runs read '
                             "beam_size, length_penalty, no_repeat_ngram and a hard-attention captioner's "
                             "hard_inference; chosen_by and chosen_for are notes)")  # fmt: skip
    return info


def merged_info(
    info: dict[str, Any], extra: dict[str, Any], words: int | None, path: str | None, source: str
) -> dict[str, Any]:
    """A model's ``info`` with ``extra`` (read from ``--info path``) merged over it; a ``"decoding": null`` there
    removes the recorded one. Its decoding must suit the model (``words``: its output vocabulary; None where it cannot
    be read, as decoding_fault takes it: the beam is then not checked against it): one that does not
    raises :class:`ModelFileError`, naming --info where it came from, else ``source`` (the file it was recorded in)."""
    info = {**info, **extra}
    if info.get("decoding", {}) is None:  # --info's "decoding": null: none recorded
        del info["decoding"]
    if (fault := decoding_fault(info.get("decoding"), words)) is not None:
        # every run of the file would fail on it, though no one typed --beam-size
        if "decoding" in extra:
            raise ModelFileError(f'--info {path}: its "decoding" cannot be used with this model: {fault}')
        raise ModelFileError(f'{source}: its recorded "decoding" cannot be used: {fault} (--info FILE with a '
                             '"decoding" replaces it; null: none)')  # fmt: skip
    return info
