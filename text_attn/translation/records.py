"""A translation as one JSON-able record: what attention-serve's ``POST /translate`` answers for each sentence and
``translate --jsonl`` writes a line of, made in one place so that the two never drift apart.

A record holds the source and its tokens, the translation and its tokens, the attention (T, S + 1) over the source
tokens and their end (a Transformer's: the plotted layer's heads averaged, and ``heads`` (H, T, S + 1)), the score,
whether the output was cut off, and what is said about the input (``unknown``, ``unlike_source``, ``read_as``,
``lost_addresses``, ``unseen_words``, ``note``). Where the translation carries its probabilities (``probs=True``, or a
translation given and read): ``token_probs``, ``end_prob``, ``word_probs``, ``words`` and the words under a threshold
(``unsure``, ``unsure_tokens``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from text_attn.core.casing import changed_reading
from text_attn.core.json_numbers import json_score
from text_attn.core.unsure import UNSURE, probability_fields, unsure_pairs
from text_attn.core.vocab import lost_addresses
from text_attn.translation.sentences import laid_out, line_breaks


def rounded(matrix: Any, digits: int = 4) -> list:
    """A matrix as nested lists of numbers rounded to ``digits`` decimals (attention in a JSON answer)."""
    return np.round(np.asarray(matrix, dtype=np.float64), digits).tolist()


def translation_record(translator: Any, source: str, t: Any, keep_case: bool = False) -> dict[str, Any]:
    """The record of Translation ``t`` of the sentence ``source`` as typed (``keep_case``: read as typed, not
    recased; Translator.read_as)."""
    unlike = translator.unlike_source(source)
    # how the model read it (sentence by sentence where it was split); composed letters alone: the same
    reader = translator.read_line if getattr(t, "pieces", None) else translator.read_as
    read = reader(source, keep_case)
    attention = heads = None
    if t.attention is not None:
        a = t.attention.float().cpu().numpy()
        if a.ndim == 3:  # (T, H, S+1): a Transformer's heads
            heads = rounded(a.transpose(1, 0, 2))  # (H, T, S+1)
            a = a.mean(axis=1)
        attention = rounded(a)  # (T, S+1)
    return {
        "source": source,
        "translation": t.text,
        # with the source's line breaks (a heading's, a list item's line; a blank line between paragraphs)
        "laid_out": laid_out(t, line_breaks(source)),
        "source_tokens": [*t.source, "<eos>"],
        "tokens": t.tokens,
        "attention": attention,
        "heads": heads,
        "score": round(float(t.score), 6),
        "truncated": bool(t.truncated),
        "sentence_count": len(t.pieces) if getattr(t, "pieces", None) else 1,  # each translated on its own
        "unknown": t.unknown,
        "unknown_words": unknown_words(translator, t),  # the words holding them, as typed (an emoji's byte pieces)
        "unlike_source": unlike,
        "read_as": changed_reading(source, read),
        "lost_addresses": lost_addresses(source, t.text),  # typed in the sentence, missing from its translation
        "unseen_words": translator.unseen_words(source),  # never in its training text: a guess
        "note": translator.note() if unlike else None,  # the model's own, as `translate` prints it
    }


def unknown_words(translator: Any, t: Any) -> list[str]:
    """The source words of Translation ``t`` that hold a token the model does not know (read as <unk>), as the user
    wrote them (a subword model's pieces, e.g. "<0xF0>" of an emoji or "▁riding", joined back into their words), each
    once, in order: ``translate``'s note names them, the server's records and its page too."""
    if not t.unknown:
        return []
    from text_attn.translation.alignments import words_of

    words, word_of = words_of(translator, t.source)
    unknown = set(t.unknown)
    return list(dict.fromkeys(words[word_of[i]] for i, tok in enumerate(t.source) if tok in unknown))


def empty_record(source: str) -> dict[str, Any]:
    """The record of a sentence with nothing to translate (no token the model reads)."""
    return {"source": source, "translation": "", "laid_out": "", "source_tokens": ["<eos>"], "tokens": [],
            "attention": None, "heads": None, "score": 0.0, "truncated": False, "sentence_count": 0, "unknown": [],
            "unknown_words": [],
            "unlike_source": None, "read_as": None, "lost_addresses": [], "unseen_words": [],
            "note": "nothing to translate: the sentence has no tokens this model reads"}  # fmt: skip


def unsure_fields(translation: Any, below: float) -> dict[str, Any]:
    """A translation's words (those ``word_probs`` are of) and the ones the model gave a probability under ``below``
    (each [word, p], and ``unsure_tokens``, the indices of those words' tokens); {} for one without probabilities."""
    if getattr(translation, "word_probs", None) is None:
        return {}
    from text_attn.translation.alignments import unsure_tokens

    return {"words": list(translation.words), "unsure": unsure_pairs(translation, below),
            "unsure_tokens": sorted(unsure_tokens(translation, below))}  # fmt: skip


def n_best_fields(translation: Any) -> dict[str, Any]:
    """``n_best``: a translation's n best (Translation.nbest: ``--n-best``), each ``{"translation", "score",
    "truncated"}``, best first; without a list kept (n best 1), the translation itself, listed."""
    found = translation.nbest or [(translation.text, translation.score, translation.truncated)]
    return {"n_best": [{"translation": text, "score": json_score(score), "truncated": bool(cut)}
                       for text, score, cut in found]}  # fmt: skip


def evidence_fields(found: Any) -> dict[str, Any]:
    """What drives each output token (text_attn.translation.explain.Evidence ``found``): ``evidence`` (T, S + 1),
    each row the drop in the token's probability as each source token is masked, and ``agreement``, each token's
    Kendall tau between that row and its attention; {} for None."""
    if found is None:
        return {}
    from text_attn.core.faithfulness import rounded_evidence, rounded_taus

    return {"evidence": rounded_evidence(found.evidence), "agreement": rounded_taus(found.agreement)}


def _shown(text: str) -> str:
    """A line as UTF-8 can hold it: stdin's bytes that are not UTF-8 (read as lone surrogates) as ``\\xff`` escapes,
    as the command's messages show them."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate typed as such, not a byte read
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


def input_record(
    translator: Any,
    number: int,
    source: str,
    t: Any = None,
    *,
    keep_case: bool = False,
    below: float = UNSURE,
    ranked: list | None = None,
    error: str | None = None,
    evidence: Any = None,
    n_best: bool = False,
) -> dict[str, Any]:
    """``translate --jsonl``'s record of input ``number`` (1-based), typed as ``source``: ``{"input", "source",
    "error"}`` for an input that failed with ``error``; else its Translation ``t``'s record (:func:`translation_record`)
    with its probabilities where it has them (``--unsure``, or a translation given and read: the words under
    ``below`` in ``unsure``), ``n_best`` (``--n-best``: each ``{"translation", "score", "truncated"}``, best
    first; ``n_best`` True: listed even where the search kept no list, ``--n-best 1``),
    ``given`` (True: a translation given, read) and, with several translations given, ``ranked`` (each
    ``{"translation", "score"}``, best first: ``t`` is the first); ``evidence`` (``--evidence``): what drives each
    token, :func:`evidence_fields`."""
    source = _shown(source)
    if error is not None:
        return {"input": number, "source": source, "error": error}
    record = {"input": number} | translation_record(translator, source, t, keep_case)
    record["score"] = json_score(t.score)
    record |= probability_fields(t, "token_probs") | unsure_fields(t, below)
    if t.nbest is not None or n_best:
        record |= n_best_fields(t)
    if getattr(t, "given", False):
        record["given"] = True
    if ranked is not None and len(ranked) > 1:
        record["ranked"] = [{"translation": r.text, "score": json_score(r.score)} for r in ranked]
    return record | evidence_fields(evidence)
