"""Word links of a corpus's train pairs as attention targets (guided alignment, Garg et al. 2019): ``data.alignments``
names a file of a line per train pair in the Pharaoh format word aligners write (``i-j``: source word i, target word
j, words split at spaces, counted from 0; benchmarks/word_align.py's or fast_align's). Each target token of a linked
word gets as its target the tokens of the source words that word is linked to (uniform over them: dense_targets);
the tokens of unlinked words, and the eos step, get none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from text_attn.translation.corpora import read_lines
from text_attn.translation.pairs import Example, TaskError


def word_of_tokens(text: str, tokens: list[str], encode: Callable[[str], list[str]]) -> list[int] | None:
    """Per token of ``tokens`` (``encode(text)``) the index of the space-separated word of ``text`` it spells; None
    where encoding the words one by one does not give the same tokens."""
    index: list[int] = []
    spelled: list[str] = []
    for w, word in enumerate(text.split()):
        pieces = encode(word)
        spelled += pieces
        index += [w] * len(pieces)
    return index if spelled == tokens else None


def link_examples(examples: list[Example], path: str | Path, encode: Callable[[str], list[str]], why: str = "") -> None:
    """Set each example's ``links`` from line k of ``path`` for example k (the train pairs as the corpus reader read
    them). A file of another length, a link that is not ``i-j`` or names a word past a sentence's end, or a pair
    whose tokens do not spell its words: a TaskError naming the file and line (``why``: what may have cut the pairs,
    said with a file of another length)."""
    lines = read_lines(path)
    if len(lines) != len(examples):
        raise TaskError(f"data.alignments {path}: {len(lines):,} lines for {len(examples):,} train pairs; give a "
                        f"line of links per pair, in the corpus's order{why}")  # fmt: skip
    for n, (ex, line) in enumerate(zip(examples, lines, strict=True), 1):
        src_of = word_of_tokens(ex.src_text or "", ex.src, encode)
        tgt_of = word_of_tokens(ex.tgt_text or "", ex.tgt, encode)
        if src_of is None or tgt_of is None:
            raise TaskError(f"data.alignments {path}, line {n}: the pair's tokens do not spell its words one by one")
        n_src, n_tgt = len(ex.src_text.split()), len(ex.tgt_text.split())
        sources_of: dict[int, set[int]] = {}  # target word -> the source words linked to it
        for link in line.split():
            i, sep, j = link.partition("-")
            if not (sep and i.isdigit() and j.isdigit()):
                raise TaskError(f"data.alignments {path}, line {n}: {link!r} is not a link i-j")
            if int(i) >= n_src or int(j) >= n_tgt:
                raise TaskError(f"data.alignments {path}, line {n}: {link} links past the pair's {n_src} source / "
                                f"{n_tgt} target words")  # fmt: skip
            sources_of.setdefault(int(j), set()).add(int(i))
        tokens_of: dict[int, list[int]] = {}
        for k, w in enumerate(src_of):
            tokens_of.setdefault(w, []).append(k)
        ex.links = [(t, sorted(k for w in sources_of[word] for k in tokens_of[w]))
                    for t, word in enumerate(tgt_of) if word in sources_of]  # fmt: skip
