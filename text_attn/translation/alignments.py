"""Word alignments read off attention: a translation's tokens and its source's grouped into words (subword pieces
joined back, as the text was split by spaces). Each output piece is linked to the source piece it attended most, none
where that is the source's end (the attention's sink: the word is left unaligned), and two words are linked where any
of their pieces are: the usual way from subword links to word links (Garg et al. 2019), so a word's trailing "." or a
long word's many pieces do not outweigh a short word. ``translate --alignments FILE`` writes them in the Pharaoh
format word aligners (fast_align, GIZA++) write and alignment scorers read: per sentence pair one line of ``i-j``
pairs, source word i and output word j, counted from 0.

Which attention aligns best was measured against 100 hand-aligned Multi30k val pairs (benchmarks/alignment_error.py):
a Transformer's penultimate decoder layer (``alignment_layer``), as Garg et al. (2019) found; its last layer's
alignment error is higher (docs/alignment.md). Gold files are read by
``read_gold``: a line a sentence pair, ``i-j`` a sure link and ``ipj`` a possible one (the format of the gold sets
SimAlign and awesome-align are scored on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from text_attn.core.safe_files import text_lines


def words_of(translator: Any, tokens: list[str]) -> tuple[list[str], list[int]]:
    """Tokens grouped into words: (the words, per token the index of its word). Subword pieces join until the next
    piece that starts a word ("▁"); other tokenizers' tokens are words already."""
    if translator.codec.mode != "subword":
        return list(tokens), list(range(len(tokens)))
    index = piece_words(tokens)
    words: list[list[str]] = [[] for _ in range(index[-1] + 1 if index else 0)]
    for t, w in zip(tokens, index, strict=True):
        words[w].append(t)
    return [translator.codec.decode(w) for w in words], index


def unsure_tokens(translation: Any, below: float) -> dict[int, tuple[str, float]]:
    """Per output token of a word the model was unsure of (its probability under ``below``; a read translation's
    ``words`` and ``word_probs``): that word and its probability; every piece of such a word is there. {} for a
    translation not read."""
    found, words = getattr(translation, "word_probs", None), getattr(translation, "words", None)
    if found is None or words is None:
        return {}
    tokens = translation.tokens
    index = list(range(len(tokens))) if len(words) == len(tokens) else piece_words(tokens)  # a word model's: itself
    return {i: (words[w], found[w]) for i, w in enumerate(index) if found[w] < below}


def piece_words(tokens: list[str]) -> list[int]:
    """Per subword piece the index of its word: a piece that starts with "▁" starts one (the first piece always
    does)."""
    index, word = [], -1
    for i, t in enumerate(tokens):
        word += t.startswith("▁") or i == 0
        index.append(word)
    return index


def word_attention(translator: Any, tr: Any) -> tuple[list[str], list[str], Any] | None:
    """(source words, output words, their attention (W_out, W_src)): a source word's weight is the sum over its
    pieces, an output word's row the mean over its pieces; a Transformer layer's heads averaged. None for a model
    without attention."""
    if tr.attention is None:
        return None
    import torch

    attn = _rows(tr)[:, : len(tr.source)]  # (T, S): the source's end left out
    src_words, src_of = words_of(translator, tr.source)
    out_words, out_of = words_of(translator, tr.tokens)
    if not src_words or not out_words:
        return src_words, out_words, torch.zeros(len(out_words), len(src_words))
    src = torch.zeros(len(tr.source), len(src_words)).index_put_(
        (torch.arange(len(tr.source)), torch.tensor(src_of)), torch.tensor(1.0)
    )  # (S, W_src): piece -> its word
    out = torch.zeros(len(out_words), len(tr.tokens)).index_put_(
        (torch.tensor(out_of), torch.arange(len(tr.tokens))), torch.tensor(1.0)
    )  # (W_out, T)
    out = out / out.sum(1, keepdim=True)  # a mean over each word's pieces
    return src_words, out_words, out @ attn @ src


def links(translator: Any, tr: Any, rows: Any = None) -> list[tuple[int, int]]:
    """(source word, output word) pairs, sorted, each once: an output piece's arg-max over the source pieces and the
    end links its word to that piece's word, or to none at the end; [] for a model without attention. What is
    maximised: ``rows`` (T, S + 1) when given (e.g. explain.translation_evidence's leave-one-out ``evidence``), else
    the attention (a Transformer layer's heads averaged)."""
    if tr.attention is None or not tr.source:
        return []
    rows = _rows(tr) if rows is None else rows.float()[: len(tr.tokens)]
    best = rows[:, : len(tr.source) + 1].argmax(1).tolist()  # per output piece; len(source): the end
    _, src_of = words_of(translator, tr.source)
    _, out_of = words_of(translator, tr.tokens)
    return sorted({(src_of[b], out_of[t]) for t, b in enumerate(best) if b < len(tr.source)})


def as_typed(translator: Any, tr: Any, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """:func:`links`' ``pairs`` (word indexes of the tokens the model read and wrote) counted in the input and the
    translation as written, where list item markers were left unread and put back (``tr.marks``: "- Ein Hund" ->
    "- A dog"; text_attn.translation.sentences.put_marks): each marker one word, linked to its own, and the words of
    its sentence after it."""
    marks = getattr(tr, "marks", None)
    if not marks:
        return pairs
    src_shift: list[int] = []  # per word of the tokens, the markers before it in the text
    out_shift: list[int] = []
    added, before = [], 0
    for mark, piece in zip(marks, tr.pieces or [tr], strict=True):
        if mark:  # the marker: the word before its sentence's first, in both texts
            added.append((len(src_shift) + before, len(out_shift) + before))
            before += 1
        src_shift += [before] * len(words_of(translator, piece.source)[0])
        out_shift += [before] * len(words_of(translator, piece.tokens)[0])
    return sorted({(i + src_shift[i], j + out_shift[j]) for i, j in pairs} | set(added))


def _rows(tr: Any) -> Any:
    """A translation's attention as one row per output token (T, S + 1): the source's tokens, then its end; a
    Transformer layer's heads (T, H, S + 1) averaged."""
    attn = tr.attention.float()
    if attn.dim() == 3:
        attn = attn.mean(1)
    return attn[: len(tr.tokens)]


def pharaoh(pairs: list[tuple[int, int]]) -> str:
    """Pairs in the Pharaoh format: ``i-j`` (source word i, output word j), by source then output word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(pairs))


def alignment_layer(net: Any) -> int | None:
    """The decoder layer whose cross-attention ``translate --alignments`` reads by default: a Transformer's
    penultimate (its only one when it has one); None for an RNN (one attention)."""
    layers = getattr(net, "decoder_layers", None)
    if layers is None:
        return None
    return max(len(layers) - 2, 0)


def read_gold(path: str | Path) -> list[tuple[set[tuple[int, int]], set[tuple[int, int]]]]:
    """Gold alignments: per line (sentence pair) its sure links (``i-j``) and possible ones (``ipj``), each a set of
    (source word, target word) counted from 0. Blank lines are pairs without links; lines starting with ``#`` are
    comments. A link that is neither, or not two numbers: ValueError naming the line."""
    out = []
    for n, line in enumerate(text_lines(Path(path).read_text(encoding="utf-8")), 1):
        if line.startswith("#"):
            continue
        sure: set[tuple[int, int]] = set()
        possible: set[tuple[int, int]] = set()
        for link in line.split():
            sep = "-" if "-" in link else "p"
            i, _, j = link.partition(sep)
            if not (i.isdigit() and j.isdigit()):
                raise ValueError(f"{path}, line {n}: {link!r} is not a link (i-j sure, ipj possible)")
            (sure if sep == "-" else possible).add((int(i), int(j)))
        out.append((sure, possible))
    return out
