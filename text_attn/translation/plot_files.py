"""``translate --plot``: the attention grids (and ``--evidence``'s pictures) drawn a batch at a time, as its
translations are written, not all after the last one from results kept in memory (300 sentences: 56 s, with every
result held; a Ctrl-C left no picture). One ``wrote`` line for a few files, one summary line for many; the notes on
what could not be drawn once, at the end."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from text_attn.core.arrays import signed2
from text_attn.core.errors import fail, one_line

FEW = 3  # up to this many pictures get a `wrote` line each; more, one line naming the first and the last


def draw(path: Path, tr, net) -> Path:
    """The attention grid of translation ``tr`` as the PNG ``path`` (a Transformer: one panel per head of the layer
    its attention comes from)."""
    from text_attn.translation.plots import plot_alignment, plot_alignment_heads

    src = [*tr.source, "<eos>"]
    attn = tr.attention
    if attn.dim() == 3:  # (T, H, S): one layer's heads
        # counted from 1 of how many, as the --html page's selector counts them ("layer 1 (from 0)" was the
        # penultimate of 3, the page's "layer 2"), and the --layer value that picks it
        n, i = len(net.decoder_layers), net.plot_index
        title = f"cross-attention, decoder layer {i + 1} of {n} (--layer {i})"
        return plot_alignment_heads(attn.transpose(0, 1), src, tr.tokens, path, title=title)
    return plot_alignment(attn, src, tr.tokens, path)


def draw_evidence(path: Path, found, tr) -> Path:
    """PNG-evidence.png: per output token, the share of what masking each source token costs it (its positive part,
    each row summing to 1), the row labelled with its Kendall tau against the attention."""
    from text_attn.core.arrays import evidence_shares
    from text_attn.core.token_labels import token_labels
    from text_attn.translation.plots import plot_alignment

    share = evidence_shares(found.evidence)  # (T, S)
    # labelled before the tau is added: a BPE piece's "@@" is no longer its label's end after it
    taus = ["–" if tau != tau else f"τ {signed2(tau)}" for tau in found.agreement]
    rows = [f"{tok} ({tau})" for tok, tau in zip(token_labels(tr.tokens), taus, strict=True)]
    out = path.with_name(f"{path.stem}-evidence.png")
    return plot_alignment(share, found.source, rows, out, title="what masking each source token costs the word",
                          label="share of the word's loss")  # fmt: skip


class PlotWriter:
    """The pictures of ``--plot PNG``, drawn as each batch is written (:meth:`add`), named by input number where the
    run has several inputs (a failed input leaves its number out, an empty translation is not drawn). Whether it has
    several is known once a second input is read or the input ends: until then a batch's results wait (only with
    --batch-size 1, one result). ``evidence_of(n, tr)``: --evidence's measure of input n (None: no --evidence)."""

    def __init__(self, png: str, net, evidence_of: Callable[[int, Any], Any] | None = None):
        self.base, self.net, self.evidence_of = Path(png), net, evidence_of
        self.waiting: list[tuple[int, Any]] = []
        self.chars: set[str] = set()  # characters no installed font has, over every picture
        self.empty: list[int] = []  # empty translations' numbers (the first five named)
        self.empties = 0
        self.translations = 0
        self.attention = True  # False: the model has none to draw (said once, at the end)
        self.wrote: list[Path] = []  # the first FEW pictures' paths
        self.count, self.last = 0, None

    def add(self, results: list[tuple[int, Any]], several: bool | None) -> None:
        """A written batch's (input number, Translation) pairs; ``several``: whether the run has more than one input
        (None: not known yet)."""
        if results and results[0][1].attention is None:
            self.attention = False
        if not self.attention:
            return
        self.waiting += results
        if several is not None:
            self._draw(several)

    def _draw(self, several: bool) -> None:
        from text_attn.core.fonts import GlyphWarning, uncovered
        from text_attn.core.token_labels import token_labels

        # the labels drawn, not the tokens: a character a vocabulary spells in bytes ("<0xF0>" "<0x9F>" ...) is drawn
        # as the character, and its box went unsaid
        for _, tr in self.waiting:
            self.chars |= set(uncovered([*token_labels(tr.source), *token_labels(tr.tokens)]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GlyphWarning)  # said once at the end, not once a picture
            while self.waiting:  # each taken off once drawn: a Ctrl-C mid-batch leaves the rest to finish()
                n, tr = self.waiting[0]  # (they were taken off first: 6 pictures for 8 lines written)
                if not tr.tokens:  # nothing to draw: a grid of no rows (plots refuses one)
                    self.empties += 1
                    self.empty += [n][: 5 - len(self.empty)]
                else:
                    path = self.base
                    if several:
                        path = self.base.with_name(f"{self.base.stem}-{n}{self.base.suffix or '.png'}")
                    try:
                        drawn = draw(path, tr, self.net)
                        shown = draw_evidence(path, self.evidence_of(n, tr), tr) if self.evidence_of else None
                    except OSError as err:
                        fail("translate", f"cannot write --plot {path}: {one_line(err)}")
                    self._wrote(drawn)
                    if shown is not None:
                        self._wrote(shown)
                self.translations += 1
                self.waiting.pop(0)

    def _wrote(self, path: Path) -> None:
        self.count += 1
        self.last = path
        if len(self.wrote) < FEW + 1:
            self.wrote.append(path)

    def finish(self, several: bool) -> None:
        """The results still waiting drawn, then the lines: what was written, and the notes on what was not."""
        from text_attn.core.fonts import glyph_message

        if self.waiting:
            self._draw(several)
        if not self.attention:
            print("translate: note: this model has no attention to plot", file=sys.stderr)
            return
        if self.chars:
            print(f"translate: note: --plot: {glyph_message(''.join(sorted(self.chars)))}", file=sys.stderr)
        if self.empties:
            shown = ", ".join(map(str, self.empty)) + (f" and {self.empties - 5} more" if self.empties > 5 else "")
            which = f"translation {shown} is" if self.empties == 1 else f"translations {shown} are"
            none = "; no picture written" if self.empties == self.translations else ""
            print(f"translate: note: --plot: {which} empty: nothing to plot{none}", file=sys.stderr)
        if self.count <= FEW:
            for path in self.wrote:
                print(f"wrote {path}", file=sys.stderr)
        elif self.count:
            print(f"wrote {self.count} plots {self.wrote[0]} ... {self.last}", file=sys.stderr)
