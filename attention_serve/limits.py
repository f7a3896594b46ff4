"""What a client may send, checked in the HTTP process before any work is queued: the decoding options and their
ranges, the size limits, and the one error type every refusal becomes (a JSON body ``{"error": ..., "status": ...}``
with a 4xx status; docs/serve.md lists them)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from text_attn.core.search_options import length_penalty_note

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
        # the range first: a JSON integer of 400 digits made isfinite's float() raise OverflowError, a 500
        if not self.low <= value <= self.high or not math.isfinite(value):
            raise wrong
        return int(value) if self.kind is int else float(value)

    def _what(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        return f"{kind} from {self.low:g} to {self.high:g}"


CAPTION_OPTIONS = {
    "beam_size": Option(int, 1, 20, "beams (default: the model file's recorded choice; the bundled model: 5)"),
    "max_len": Option(int, 1, 100, "longest caption in words, its end not counted (default 30)"),
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
    "probs": Option(
        int,
        0,
        1,
        "1: each word's probability, kept by the search: 'word_probs' and 'end_prob' in the answer, and 'unsure', "
        "its words the model gave a probability under 0.2 (each [word, p]; 'unsure_words': their indices), as "
        "caption --unsure names them; no time that can be measured (default 0)",
    ),
    "n_best": Option(
        int,
        1,
        20,
        "the beam's n best captions, best first, in 'n_best' (each {'caption', 'score', 'truncated'}; the first is "
        "the answer's caption), as caption --n-best lists them; at most beam_size (default: no list)",
    ),
}
TRANSLATE_OPTIONS = {
    "beam_size": Option(int, 1, 20, "beams (default: the model file's recorded choice)"),
    "max_len": Option(
        int,
        1,
        512,
        "longest translation in tokens, its end not counted (default: 2 x (source tokens + 1) + 10 "
        "steps, the end counted, at most 512)",
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
    "probs": Option(
        int,
        0,
        1,
        "1: each token's and word's probability, kept by the search: 'token_probs', 'words', 'word_probs' and "
        "'end_prob' in the answer, and 'unsure', its words the model gave a probability under 0.1 (each [word, p]; "
        "'unsure_tokens': their tokens), as translate --unsure names them; no time that can be measured (default 0)",
    ),
    "n_best": Option(
        int,
        1,
        20,
        "the beam's n best translations of each sentence, best first, in its 'n_best' (each {'translation', "
        "'score', 'truncated'}; the first is its translation), as translate --n-best lists them; a text of several "
        "sentences: its sentences' k-th best joined; at most beam_size (default: no list)",
    ),
    "keep_case": Option(
        int,
        0,
        1,
        "1: a sentence typed without capitals (or all in capitals) read as typed, as translate --keep-case reads "
        "it (default 0: read with the capitals of the text the model learned from, where its file knows them)",
    ),
    "split": Option(
        int,
        0,
        1,
        "0: a text of several sentences translated whole, as translate --no-split does (the model, which learned "
        "from single sentences, then drops all but about the first); default 1: each sentence on its own, the "
        "translations joined",
    ),
    "paragraphs": Option(
        int,
        0,
        1,
        "1: each text is a paragraph wrapped over lines (copied from a PDF, an e-mail), its lines joined into one "
        "before it is read, a word a hyphen breaks at a line's end made whole, as translate --paragraphs joins them "
        "(the answer's 'source' is the text joined); default 0: a line break ends a sentence",
    ),
}


# "given": a caption or translation for the model to read instead of writing its own (caption / translate --given)
GIVEN_HELP = (
    "a text for the model to read instead of writing its own: the answer is that text, with each word's (token's) "
    "probability after the ones before it and where the model looked for each; the score is the mean "
    "log-probability of the words and the end (higher: fits better). The search's options are refused beside it"
)
SEARCH = ("beam_size", "max_len", "length_penalty", "no_repeat_ngram", "n_best")  # what --given refuses beside it


def parse_given(value: Any, max_chars: int) -> str:
    """The "given" option: a text of at most ``max_chars`` characters holding a word; ClientError otherwise."""
    if not isinstance(value, str) or not any(ch.isalnum() for ch in value):
        raise ClientError(422, f"given must be a text with a word in it, got {shown(value)}")
    text = value.strip()  # the text read: the spaces around it are not counted (as a sentence's)
    if len(text) > max_chars:
        raise ClientError(413, f"given has {len(text)} characters; at most {max_chars}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ClientError(422, "given is not valid Unicode (a lone surrogate)") from None
    return text


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
    if out.get("n_best", 1) > out.get("beam_size", 1):  # the search keeps beam_size hypotheses: n_best of them
        whose = "" if "beam_size" in given else " (the model file's; send beam_size too, at least as large)"
        raise ClientError(422, f"n_best {out['n_best']} is more than beam_size {out.get('beam_size', 1)}{whose}: "
                          "the beam holds only that many")  # fmt: skip
    return out


def check_beam(options: dict[str, Any], words: int) -> None:
    """ClientError(422) for a beam wider than the model's ``words`` (a small model, the shapes captioner's 19): the
    worker refused it, and LitServe answered its whole batch, the good requests in it too, with a 500."""
    if options.get("beam_size", 1) > words:
        raise ClientError(422, f"beam_size {options['beam_size']} is more than the model's {words} words: at most "
                          f"{words}")  # fmt: skip


def search_notes(given: dict[str, Any], options: dict[str, Any]) -> list[str]:
    """The answer's ``notes`` for the options ``given`` (the request's own, before the defaults) as ``options`` (with
    the model file's defaults) use them: a length_penalty beside beam_size 1, the request's or the model's, changes
    no output (translate and caption note it alike); [] where there is nothing to say."""
    if "length_penalty" in given and options.get("beam_size") == 1:
        return [length_penalty_note("length_penalty", "beam_size 1 keeps")]
    return []


# The names a browser's page on this machine reaches a loopback server by. A server bound to 127.0.0.1 answers only
# requests whose Host header is one of them (or an --allowed-host): a web page whose own name an attacker points at
# 127.0.0.1 (DNS rebinding) then sends its own name as Host, and is refused.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})


def host_name(value: str) -> str:
    """A Host header's (or --allowed-host's) name, without its port, in lower case: ``LocalHost:8000`` -> ``localhost``,
    ``[::1]:8000`` -> ``[::1]``; a final dot dropped (``localhost.`` is the same name)."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 address: its colons are not a port's
        name, bracket, _ = value.partition("]")
        return name + bracket
    name, colon, port = value.rpartition(":")
    name = name if colon and (port.isdigit() or not port) else value
    return name[:-1] if name.endswith(".") else name


def host_allowed(headers: list[tuple[bytes, bytes]], allowed: frozenset[str] | None) -> bool:
    """Whether a request's Host headers (ASGI ``headers``) all name one of ``allowed`` (None: any name). A request
    without one (HTTP/1.0) passes: browsers always send it, and the check is against pages in a browser."""
    if allowed is None:
        return True
    return all(host_name(v.decode("latin-1")) in allowed for k, v in headers if k == b"host")


@dataclass(frozen=True)
class Limits:
    """What one request may carry (``attention-serve`` options set them)."""

    max_upload_bytes: int = 20 << 20  # --max-upload-mb: a photo's bytes (413 above)
    max_pixels: int = 89_478_485  # Pillow's decompression-bomb threshold (413 above): `caption` notes above it
    max_sentences: int = 64  # sentences in one /translate request (413 above)
    max_chars: int = 1000  # characters in one sentence (413 above)
    max_queue: int = 64  # checked requests waiting for a model worker in one HTTP process (503 with Retry-After above)
    read_timeout: float = (
        30.0  # seconds a request's body may take to arrive (408 after): a stalled upload frees its place
    )
    api_key: str | None = None  # --api-key: every API request must carry it
    # the Host header's names answered (host_allowed; None: any): bound to 127.0.0.1, LOOPBACK_NAMES and --allowed-host
    allowed_hosts: frozenset[str] | None = None
    # --max-search: the steps a /translate request's decoding may take (search_steps; 413 above): the encoder's S x S
    # and beams x T x (S + T), T the output at its longest. Counting only source tokens x beam_size let 30 words at
    # beam 20 with max_len 512 (216 bytes) hold a worker for minutes. 2,500,000 (the default at --timeout 120,
    # attention-serve scales it with --timeout) allows 64 Multi30k sentences at beam 8 and a 1,000-character
    # sentence; the costliest request it allows took ~24 s of one core (docs/serve.md)
    max_search: int = 2_500_000
    # --max-evidence: the model steps evidence=1 may take (413 above): /translate, each source token (and the end) x
    # each output token, summed over its sentences, the output counted as long as it may run; /caption, each region
    # (and none) x each word. 200 characters of one letter (201 tokens, 414 written) took 230 s of one core; 4,000
    # steps take ~5 s
    max_evidence: int = 4000

    @property
    def json_values(self) -> int:
        """Values (object members and array items) a request's JSON may hold (413 above): a few options and the
        sentences, with room to spare, so that too many sentences are still told as such."""
        return max(1024, 4 * self.max_sentences)


def beams(options: dict[str, Any]) -> int:
    """The beams a /translate request searches: its beam_size; a text given is read, not searched (one beam)."""
    return 1 if "given" in options else int(options.get("beam_size", 1))


def outputs(source: int, options: dict[str, Any], longest: int, given: int | None = None) -> int:
    """The output steps one sentence of ``source`` tokens may take, its end counted: the ``given`` text's tokens and
    the end (read, not searched), else max_len tokens and the end, else the search's own cap, 2 x (source + 1) + 10
    and at most ``longest``."""
    if given is not None:
        return given + 1
    return int(options["max_len"]) + 1 if "max_len" in options else min(2 * (source + 1) + 10, longest)


def source_lengths(extra: dict[str, Any], sentences: list[str], keep_case: bool, whole: bool) -> list[int]:
    """A /translate request's source lengths as the worker reads them (``extra``: the served model's
    ``sentence_tokens``): a text of several sentences is searched sentence by sentence
    (Translator.sentence_tokens), each sentence's tokens counted on their own; ``whole`` (split=0, or a ``given``
    text: read sentence by sentence only where it has as many sentences, so counted at the most it may cost): the
    whole text's. A text with no tokens counts 0."""
    return [len(t) for s in sentences for t in extra["sentence_tokens"](s, keep_case, not whole) or [[]]]


# What a sentence costs whatever its length, in steps: its tokens through every layer, its record, its notes. A text
# of 249 "Ja. " split into 249 sentences counted 19 steps each; 64 of them (15,936 sentences, 64 KB) at max_len 1 were
# 190,000 steps of the 2,500,000 allowed and held the worker 110 s. Measured (2 shared cores, one torch thread, the
# bundled Transformer): ~2.6 ms a one-word sentence at max_len 1, ~10 us a counted step: 250 steps
SENTENCE_STEPS = 250


def search_steps(tokens: list[int], options: dict[str, Any], longest: int, given: int | None = None) -> int:
    """What a /translate request's decoding may cost, in steps of one position over another, summed over its
    sentences (``tokens``: each one's source tokens S, as the model reads them): S x S for the encoder (each source
    token over every other) and :func:`beams` x T x (S + T) for the decoding, T its :func:`outputs` (each output step
    of each beam looks at the source and at the output so far), and SENTENCE_STEPS (a sentence's own cost; none for a
    sentence with nothing to translate, S = 0). The output's length is counted at its longest: a client picks it
    (max_len, or text that never ends: "Hund Hund ..."), and the time follows it, not the source."""
    k = beams(options)
    return sum(
        s * s + k * t * (s + t) + SENTENCE_STEPS for s in tokens if s for t in (outputs(s, options, longest, given),)
    )


def evidence_steps(tokens: list[int], options: dict[str, Any], longest: int, given: int | None = None) -> int:
    """The model steps evidence=1 may take over these sentences (each with the end: S + 1 rows a step), the output at
    its longest (:func:`outputs`); 0 without evidence."""
    if not options.get("evidence"):
        return 0
    return sum((s + 1) * outputs(s, options, longest, given) for s in tokens)


def check_work(tokens: list[int], options: dict[str, Any], limits: Limits, longest: int,
               given: int | None = None, positions: int | None = None) -> None:  # fmt: skip
    """ClientError(413) naming the limit when a /translate request's decoding may take more than ``max_search``
    steps (:func:`search_steps`), its evidence more than ``max_evidence`` (see :class:`Limits`), or its ``given``
    text (its tokens as the model writes them) is longer than a translation may be (``longest`` tokens, max_len's
    ceiling, and its end): one request must not hold a worker for minutes while every other waits. ``positions``: a
    Transformer's learned position table (Translator.position_limit; None: any length): a sentence or a given text
    that with its end takes more rows (413), or a max_len that does (422), is refused here, not a worker's 500."""
    if given is not None and given > longest:
        raise ClientError(413, f"given has {given:,} tokens as the model writes them; at most {longest:,} (a "
                          "translation's longest, max_len's ceiling)")  # fmt: skip
    if positions is not None:
        check_positions(tokens, options, positions, given)
    steps = search_steps(tokens, options, longest, given)
    if steps > limits.max_search:
        longest_out = max(outputs(s, options, longest, given) for s in tokens)
        how = "given read" if given is not None else f"beam_size {beams(options)}"
        raise ClientError(413, f"{len(tokens):,} sentence{'s' * (len(tokens) > 1)} of {sum(tokens):,} source tokens, "
                          f"{how}, up to {longest_out} output tokens (the end counted): {steps:,} steps (source x "
                          f"source + beams x output x (source + output) + {SENTENCE_STEPS} a sentence); at most "
                          f"{limits.max_search:,} (--max-search): send fewer or shorter sentences, a smaller beam_size "
                          "or max_len")  # fmt: skip
    steps = evidence_steps(tokens, options, longest, given)
    if steps > limits.max_evidence:
        raise ClientError(413, f"evidence=1 here may take {steps:,} model steps (each source token and the end x "
                          f"each output token); at most {limits.max_evidence:,} (--max-evidence): send fewer or "
                          "shorter sentences, or a smaller max_len")  # fmt: skip


def check_positions(tokens: list[int], options: dict[str, Any], positions: int, given: int | None) -> None:
    """ClientError for what a model with ``positions`` learned positions cannot read or write (each with its end): a
    sentence or the given text longer (413), a max_len larger (422), in Translator.length_error's words (one helper,
    text_attn.translation.position_limit: no torch in the HTTP process)."""
    from text_attn.translation.position_limit import position_error

    if error := position_error(positions, given=given):
        raise ClientError(413, f"given: {error}")
    for k, n in enumerate(tokens):
        if error := position_error(positions, n_tokens=n):
            raise ClientError(413, f"{f'sentence {k + 1}' if len(tokens) > 1 else 'the sentence'}: {error}")
    if "max_len" in options and (error := position_error(positions, max_len=int(options["max_len"]))):
        raise ClientError(422, error)


def check_caption_work(options: dict[str, Any], limits: Limits, regions: int, longest: int,
                       given: int | None = None) -> None:  # fmt: skip
    """ClientError(413) naming the limit when a /caption request's ``given`` caption has more words than a caption
    may (``longest``: max_len's ceiling), or its evidence=1 may take more than ``max_evidence`` model steps: each
    word's step over every region left out in turn, and the whole photo (``regions`` + 1 rows), the caption at its
    longest (the given words, else max_len). 499 given words with evidence ran past --timeout."""
    if given is not None and given > longest:
        raise ClientError(413, f"given has {given:,} words; at most {longest} (a caption's longest, max_len's "
                          "ceiling)")  # fmt: skip
    if not options.get("evidence"):
        return
    words = given if given is not None else int(options.get("max_len", longest))
    steps = (regions + 1) * words
    if steps > limits.max_evidence:
        raise ClientError(413, f"evidence=1 here may take {steps:,} model steps ({regions + 1} rows: each region "
                          f"left out and none, x {words} words); at most {limits.max_evidence:,} (--max-evidence): "
                          f"{'a shorter given' if given is not None else 'a smaller max_len'}")  # fmt: skip


def sentences_of(body: Any, limits: Limits) -> tuple[list[str], dict[str, Any]]:
    """A /translate JSON body -> (sentences, the options given). ``{"text": "..."}`` or ``{"sentences": [...]}``,
    plus options; ClientError for anything else (422), too many or too long sentences (413)."""
    if not isinstance(body, dict):
        raise ClientError(422, 'send a JSON object: {"text": "Ein Hund rennt."} or {"sentences": ["...", "..."]}')
    body = dict(body)
    if ("text" in body) == ("sentences" in body):
        # neither: name what came instead ({"texts": [...]}, {"sentence": ...}), which would otherwise be read as an
        # unknown option only after this
        got = f" (got {', '.join(json.dumps(k) for k in body)})" if body and "text" not in body else ""
        raise ClientError(422, f'give "text" (one sentence) or "sentences" (a list), not both and not neither{got}')
    sentences = [body.pop("text")] if "text" in body else body.pop("sentences")
    if not isinstance(sentences, list) or not sentences:
        raise ClientError(422, '"sentences" must be a non-empty list of strings')
    if len(sentences) > limits.max_sentences:
        raise ClientError(413, f"{len(sentences)} sentences in one request; at most {limits.max_sentences}")
    texts = []
    for i, s in enumerate(sentences, 1):
        if not isinstance(s, str):
            raise ClientError(422, f"sentence {i} is not a string")
        text = s.strip()  # what is translated: the spaces around it are not counted
        if not text:
            raise ClientError(422, f"sentence {i} is empty")
        if len(text) > limits.max_chars:
            raise ClientError(413, f"sentence {i} has {len(text)} characters; at most {limits.max_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (JSON's "\ud800"): no text, and no answer could carry it
            raise ClientError(422, f"sentence {i} is not valid Unicode (a lone surrogate)") from None
        texts.append(text)
    return texts, body
