"""What every sentence-pair task and corpus reader returns (``Example``) or raises (``TaskError``): below both
text_attn.translation.tasks and text_attn.translation.corpora, which import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass, field


class TaskError(ValueError):
    """Bad corpus input; the message names the file (and line) and what is wrong."""


@dataclass
class Example:
    src: list[str]  # source tokens
    tgt: list[str]  # target tokens
    alignment: list[int] | None = None  # alignment[j]: source index that tgt[j] translates
    # a real corpus's sentences as written (the references of sacreBLEU and chrF); not part of equality
    src_text: str | None = field(default=None, compare=False)
    tgt_text: str | None = field(default=None, compare=False)
    # word links read from data.alignments, as attention targets: (target token j, the source tokens it comes from)
    links: list[tuple[int, list[int]]] | None = field(default=None, compare=False)
