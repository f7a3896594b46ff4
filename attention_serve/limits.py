"""What a client may send, checked in the HTTP process before any work is queued: the decoding options and their
ranges, the size limits, and the one error type every refusal becomes (a JSON body ``{"error": ..., "status": ...}``
with a 4xx status; docs/serve.md lists them)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

INTEGER = re.compile(r"-?[0-9]{1,6}")
NUMBER = re.compile(r"-?[0-9]{1,6}(\.[0-9]{1,6})?")


def shown(value: Any, limit: int = 40) -> str:
    """A client's value for an error message and the log, as JSON writes it (``true``, ``null``, ``"2"``: the
    client's own notation, not Python's ``True``), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the log and the answer can carry it
        text = json.dumps(value)
    except (TypeError, ValueError):  # not a JSON value (bytes): Python's notation
        text = repr(value)
    return cut(text, limit)


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, "..." marking the cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ClientError(Exception):
    """A request refused: ``status`` (4xx, or 503 when the queue is full) and a one-line ``message`` naming the
    problem. ``headers``: extra response headers (Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class Option:
    """One decoding option: its type and inclusive range (the same ones ``caption`` / ``translate`` accept)."""

    kind: type  # int or float
    low: float
    high: float
    help: str

    def parse(self, name: str, value: Any) -> int | float:
        """A JSON value or a form / query string -> the option's value; ClientError(422) naming it otherwise. A
        string must be plain ASCII digits (``"2"``; a number ``"0.5"`` for a float option): no ``" 2 "``, ``"1_0"``
        or other scripts' digits, which Python's int() would take."""
        wrong = ClientError(422, f"{name} must be {self._what()}, got {shown(value)}")
        if isinstance(value, str):
            if not (INTEGER if self.kind is int else NUMBER).fullmatch(value):
                raise wrong
            value = int(value) if self.kind is int else float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong
        if self.kind is int and (isinstance(value, float) and not value.is_integer()):
            raise wrong
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise wrong
        return int(value) if self.kind is int else float(value)

    def _what(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        return f"{kind} from {self.low:g} to {self.high:g}"


CAPTION_OPTIONS = {
    "beam_size": Option(int, 1, 20, "beams (default: the model file's recorded choice; the bundled model: 5)"),
    "max_len": Option(int, 1, 100, "longest caption in words (default 30)"),
    "length_penalty": Option(float, 0, 5, "score / length**penalty, beams ranked so (default: the model file's)"),
    "no_repeat_ngram": Option(int, 0, 10, "no n-gram of this size twice (0: off; default: the model file's)"),
    "evidence": Option(
        int,
        0,
        1,
        "1: also what drives each word (leave-one-out at its step) and its agreement with "
        "the attention (Kendall tau): 'evidence' and 'agreement' in the answer; one more decoder step "
        "of L regions + 1 rows a word (default 0)",
    ),
}
TRANSLATE_OPTIONS = {
    "beam_size": Option(int, 1, 20, "beams (default: the model file's recorded choice)"),
    "max_len": Option(
        int, 1, 512, "longest translation in tokens (default: 2 x (source tokens + 1) + 10, at most 512)"
    ),
    "length_penalty": Option(float, 0, 5, "score / length**penalty, beams ranked so (default: the model file's)"),
    "no_repeat_ngram": Option(int, 0, 10, "no n-gram of this size twice (0: off; default: the model file's)"),
    "evidence": Option(
        int,
        0,
        1,
        "1: also what drives each word (leave-one-out at its step) and its agreement with "
        "the attention (Kendall tau): 'evidence' and 'agreement' in the answer; one more decoder step "
        "of S source tokens + 1 rows a word (default 0)",
    ),
}


# "given": a caption or translation for the model to read instead of writing its own (caption / translate --given)
GIVEN_HELP = (
    "a text for the model to read instead of writing its own: the answer is that text, with each word's (token's) "
    "probability after the ones before it and where the model looked for each; the score is the mean "
    "log-probability of the words and the end (higher: fits better). The search's options are refused beside it"
)
SEARCH = ("beam_size", "max_len", "length_penalty", "no_repeat_ngram")  # what --given refuses beside it


def parse_given(value: Any, max_chars: int) -> str:
    """The "given" option: a text of at most ``max_chars`` characters holding a word; ClientError otherwise."""
    if not isinstance(value, str) or not any(ch.isalnum() for ch in value):
        raise ClientError(422, f"given must be a text with a word in it, got {shown(value)}")
    if len(value) > max_chars:
        raise ClientError(413, f"given has {len(value)} characters; at most {max_chars}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ClientError(422, "given is not valid Unicode (a lone surrogate)") from None
    return value.strip()


def parse_options(
    given: dict[str, Any], specs: dict[str, Option], defaults: dict[str, Any], max_chars: int = 1000
) -> dict[str, Any]:
    """``defaults`` overlaid with the ``given`` options, each checked; an unknown name is a ClientError(422). The
    text option "given" (:func:`parse_given`) is refused beside an option of the search."""
    out = dict(defaults)
    for name, value in given.items():
        if name == "given":
            out[name] = parse_given(value, max_chars)
            continue
        if name not in specs:
            raise ClientError(422, f"unknown option {shown(name)} (options: {', '.join([*specs, 'given'])})")
        out[name] = specs[name].parse(name, value)
    searched = [name for name in SEARCH if name in given]
    if "given" in given and searched:
        raise ClientError(422, f"given reads the text given; {searched[0]} is for the text the model writes: drop one")
    if "given" in given:  # the answer's options say what was used: no search, so none of its defaults
        out = {k: v for k, v in out.items() if k not in SEARCH}
    return out


@dataclass(frozen=True)
class Limits:
    """What one request may carry (``attention-serve`` options set them)."""

    max_upload_bytes: int = 20 << 20  # --max-upload-mb: a photo's bytes (413 above)
    max_pixels: int = 89_478_485  # Pillow's decompression-bomb guard (413 above): the same as `caption`'s
    max_sentences: int = 64  # sentences in one /translate request (413 above)
    max_chars: int = 1000  # characters in one sentence (413 above)
    max_queue: int = 64  # checked requests waiting for a model worker in one HTTP process (503 with Retry-After above)
    read_timeout: float = (
        30.0  # seconds a request's body may take to arrive (408 after): a stalled upload frees its place
    )
    api_key: str | None = None  # --api-key: every API request must carry it
    # --max-search: a /translate request's source tokens together x its beam_size (413 above). A search's cost grows
    # with both (each output token is a step of every beam over the source), and the output may run to max_len: a
    # line of 1,000 characters read as 1,001 tokens searched 512 steps of 8 beams, ~18 s of one core, and 64 of them
    # were allowed. 8,192 (the default at --timeout 120, attention-serve scales it with --timeout) kept the worst
    # request to 20 s of one core (docs/serve.md)
    max_search: int = 8192
    # --max-evidence: the steps evidence=1 may take, each source token (and the end) x each output token, summed over
    # a request's sentences, the output counted as long as it may run (413 above). 200 characters of one letter
    # (201 tokens, 414 written) took 230 s of one core; 4,000 steps take ~5 s
    max_evidence: int = 4000


def beams(options: dict[str, Any]) -> int:
    """The beams a /translate request searches: its beam_size; a text given is read, not searched (one beam)."""
    return 1 if "given" in options else int(options.get("beam_size", 1))


def search_width(tokens: list[int], options: dict[str, Any]) -> int:
    """A /translate request's source tokens together (``tokens``: each sentence's, as the model reads it) x its
    :func:`beams`."""
    return sum(tokens) * beams(options)


def evidence_steps(tokens: list[int], options: dict[str, Any], longest: int) -> int:
    """The model steps evidence=1 may take over these sentences (each with the end: S + 1 rows a step), the output at
    its longest: the given text's characters + 1 (a token is at least a character), else max_len, else what the
    search caps it at (2 x (S + 1) + 10, at most ``longest``); 0 without evidence."""
    if not options.get("evidence"):
        return 0
    given = options.get("given")

    def output(s: int) -> int:
        if given is not None:
            return len(given) + 1
        return int(options["max_len"]) if "max_len" in options else min(2 * (s + 1) + 10, longest)

    return sum((s + 1) * output(s) for s in tokens)


def check_work(tokens: list[int], options: dict[str, Any], limits: Limits, longest: int) -> None:
    """ClientError(413) naming the limit when a /translate request would search wider than ``max_search`` or its
    evidence would take more than ``max_evidence`` steps (see :class:`Limits`): one request must not hold a worker
    for minutes while every other waits."""
    width = search_width(tokens, options)
    if width > limits.max_search:
        raise ClientError(413, f"{sum(tokens):,} source tokens x beam_size {beams(options)} = {width:,}; at most "
                          f"{limits.max_search:,} (--max-search): send fewer or shorter sentences, or a smaller "
                          "beam_size")  # fmt: skip
    steps = evidence_steps(tokens, options, longest)
    if steps > limits.max_evidence:
        raise ClientError(413, f"evidence=1 here may take {steps:,} model steps (each source token and the end x "
                          f"each output token); at most {limits.max_evidence:,} (--max-evidence): send fewer or "
                          "shorter sentences, or a smaller max_len")  # fmt: skip


def sentences_of(body: Any, limits: Limits) -> tuple[list[str], dict[str, Any]]:
    """A /translate JSON body -> (sentences, the options given). ``{"text": "..."}`` or ``{"sentences": [...]}``,
    plus options; ClientError for anything else (422), too many or too long sentences (413)."""
    if not isinstance(body, dict):
        raise ClientError(422, 'send a JSON object: {"text": "Ein Hund rennt."} or {"sentences": ["...", "..."]}')
    body = dict(body)
    if ("text" in body) == ("sentences" in body):
        raise ClientError(422, 'give "text" (one sentence) or "sentences" (a list), not both and not neither')
    sentences = [body.pop("text")] if "text" in body else body.pop("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise ClientError(422, '"sentences" must be a non-empty list of strings')
    if len(sentences) > limits.max_sentences:
        raise ClientError(413, f"{len(sentences)} sentences in one request; at most {limits.max_sentences}")
    for i, s in enumerate(sentences, 1):
        if not isinstance(s, str):
            raise ClientError(422, f"sentence {i} is not a string")
        if not s.strip():
            raise ClientError(422, f"sentence {i} is empty")
        if len(s) > limits.max_chars:
            raise ClientError(413, f"sentence {i} has {len(s)} characters; at most {limits.max_chars}")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): no text, and no answer could carry it
            raise ClientError(422, f"sentence {i} is not valid Unicode (a lone surrogate)") from None
    return [s.strip() for s in sentences], body
