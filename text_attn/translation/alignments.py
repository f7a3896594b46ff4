"""Word alignments read off attention: a translation's tokens and its source's grouped into words (subword pieces
joined back, as the text was split by spaces). Each output piece is linked to the source piece it attended most, none
where that is the source's end (the attention's sink: the word is left unaligned), and two words are linked where any
of their pieces are: the usual way from subword links to word links (Garg et al. 2019), so a word's trailing "." or a
long word's many pieces do not outweigh a short word. ``translate --alignments FILE`` writes them in the Pharaoh
format word aligners (fast_align, GIZA++) write and alignment scorers read: per sentence pair one line of ``i-j``
pairs, source word i and output word j, counted from 0."""

from __future__ import annotations

from typing import Any


def words_of(translator: Any, tokens: list[str]) -> tuple[list[str], list[int]]:
    """Tokens grouped into words: (the words, per token the index of its word). Subword pieces join until the next
    piece that starts a word ("▁"); other tokenizers' tokens are words already."""
    if translator.codec.mode != "subword":
        return list(tokens), list(range(len(tokens)))
    words: list[list[str]] = []
    index = []
    for t in tokens:
        if t.startswith("▁") or not words:
            words.append([])
        words[-1].append(t)
        index.append(len(words) - 1)
    return [translator.codec.decode(w) for w in words], index


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


def links(translator: Any, tr: Any) -> list[tuple[int, int]]:
    """(source word, output word) pairs, sorted, each once: an output piece's arg-max over the source pieces and the
    end (a Transformer layer's heads averaged) links its word to that piece's word, or to none at the end; [] for a
    model without attention."""
    if tr.attention is None or not tr.source:
        return []
    best = _rows(tr)[:, : len(tr.source) + 1].argmax(1).tolist()  # per output piece; len(source): the end
    _, src_of = words_of(translator, tr.source)
    _, out_of = words_of(translator, tr.tokens)
    return sorted({(src_of[b], out_of[t]) for t, b in enumerate(best) if b < len(tr.source)})


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
