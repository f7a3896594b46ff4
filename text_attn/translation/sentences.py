"""A line of several sentences, translated sentence by sentence and joined back into one translation.

A model that learned from single sentences (Multi30k's) translates a line of several as one: about the first, the rest
dropped ("Ein Hund läuft über die Wiese. Eine Katze schläft auf dem Sofa." -> "A dog runs across the grassy field.").
:func:`split_sentences` finds the sentence ends of a line (German, English, French, Czech punctuation); the
translator translates each sentence in one batch with the rest, and :func:`joined` makes the line's one Translation
of its sentences' (``Translation.pieces``), so that every reader of a translation (the text, its attention grid, its
words' probabilities, its n-best list) sees one line, as before.

The end of a sentence is ``.``, ``!``, ``?`` or ``…`` (closing quotes and brackets after it kept with it), then
white space, then a capital or a digit (after any opening quote or bracket: "... Platz. 2 Mädchen sitzen."). A period
after an abbreviation ("z.B.", "ca.", "Dr.", "St.", "Hauptstr."), an initial ("J."), an ordinal number ("am 3. Mai") or
a word with periods inside ("E.S.E.", "3.10") ends nothing: such a line stays whole rather than be cut in the wrong
place; a web address's, a number of thousands' or a dated year's period ("www.example.de.", "1.000.") may end one. A
line without any capital ends a sentence before any letter.

A line break inside a text ends a sentence too: ``translate --paragraphs`` keeps one where a heading or a list item
ends (text_attn.translation.paragraphs). A list item's marker at a sentence's start ("- ", "• ", "1. ", "b) "; a
Markdown heading's "# ", an e-mail's quote's "> ") is not translated: a model of sentences reads "•" as an unknown
word and "- Ein Hund" as "A shaggy dog". :func:`item_marks` names each sentence's, and :func:`put_marks` puts them
back before the sentences' translations ("- A dog").

Emphasis and links as e-mails and Markdown write them (``*rot*``, ``**rot**``, ``_rot_``, `` `rot` ``,
``[Sand](http://...)``) are read without their marks (:func:`plain`): the bundled models learned from text without
them, and read "**roten**" as unknown pieces, the word lost ("A man with a bunk of red belly hat"). The translation
has no emphasis; a link's address is reported missing from it, as any address is.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from text_attn.core.os_text import lone_surrogate

if TYPE_CHECKING:  # torch is imported where a grid is joined: the commands split lines before torch loads
    from torch import Tensor

# a word ending in one of these and then white space may end a sentence; closers after the mark stay with it: English
# and French quotes' closing marks, and German's („…“, »…«, ‚…‘, ›…‹), whose closing marks open a quote elsewhere (after
# a mark, before white space, they can only close one)
_CLOSERS = "\"'»”’“«‘‹›)]"
_END = re.compile(rf"(?:[.!?]+|…)[{re.escape(_CLOSERS)}]*(?=\s)")
_OPENERS = "\"'„“«‚‘(["
# a list item's marker at a sentence's start, white space after it: a bullet or a dash, a number or a letter with a
# bracket ("2)", "(b)"), a number with a period ("1."; "am 3. Mai" starts no sentence), a Markdown heading's "#"s, an
# e-mail's quote marks ("> ", ">> "), or several ("> - "): the marks are not translated
_MARK = r"(?:[-–—•·‣◦▪▫●○■□►▸➢➤✓✔*]|#{1,6}|>(?:[ \t]?>)*|\(?(?:\d{1,3}|[A-Za-z])\)|\d{1,3}\.)"
_ITEM = re.compile(rf"(?:{_MARK}\s+)+(?=\S)")
# emphasis around words, a code span, a link: the marks, not the words, are left out (``plain``). An opening mark has
# no word character (or mark) before it and a non-space after it, a closing one the reverse: "2*3*4", "snake_case",
# "5 * 3" and a bullet's "* " are left as typed
_MARKUP = [
    (re.compile(r"(?<![\w*])\*\*(?=\S)(.+?)(?<=\S)\*\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w_])__(?=\S)(.+?)(?<=\S)__(?![\w_])"), r"\1"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=\S)\*(?![\w*])"), r"\1"),
    (re.compile(r"(?<![\w_])_(?=[^\s_])([^_]+?)(?<=\S)_(?![\w_])"), r"\1"),
    (re.compile(r"`([^`\n]+)`"), r"\1"),
    (re.compile(r"\[([^\]\n]+)\]\((?:[a-z][a-z0-9+.-]*:|www\.|/|#)[^)\s]*\)"), r"\1"),  # a link: its text
]
# lowercase, without their final period: a period after them is the abbreviation's, not a sentence end
# a number with a period is an ordinal or a list's number ("am 3. Mai", "der 2. Platz", "Er wurde 2. Sieger.", "1. Ein
# Mann läuft. 2. Eine Frau ...") unless a word that takes a count comes before it ("Nummer 7. Eine Frau ...", "Abb. 3.
# Dann ...") or it is a year ("Das war 2024. Im Jahr ..."): there its period may end a sentence (every "N." was an
# ordinal, and the next sentence was merged into this one and mostly lost)
CARDINAL_BEFORE = frozenset(
    "nummer nr no haus hausnummer zimmer raum seite s kapitel kap abb abbildung tabelle tab gleis linie bus tor "
    "punkt punkte grad prozent euro dollar uhr jahr jahre jahren größe platz number page chapter room"
    .split()
)  # fmt: skip
# words a sentence starts with (articles, pronouns, conjunctions, adverbs; German, English, French, Czech): after a
# number's period, one of them starts a sentence ("Der Junge ist 12. Er spielt ...", "The boy is 12. He plays ..."),
# where a noun or an adjective follows an ordinal ("als 3. Läufer", "wurde 2. Sieger", "zum 100. Mal")
STARTERS = frozenset(
    "er sie es wir ihr ich du man der die das den dem des ein eine einen einem einer eines dann danach später heute "
    "morgen gestern jetzt nun hier dort da im am auf in mit zu nach vor bei aus um aber und oder doch so auch noch "
    "dies diese dieser dieses mein meine sein seine unser unsere wer was wie wo warum wenn als ob "
    "he she it they we i you the a an then this that these those there his her their its my our your what who when "
    "where why how but and or so also now here after before in on at "
    "il elle ils elles nous vous je tu le la les un une des puis ensuite mais et ou "
    "on ona ono oni my vy já ty ten ta to pak potom ale a nebo"
    .split()
)  # fmt: skip
ORDINAL_BEFORE = frozenset(  # before a year-like number, or a sentence's first word: an ordinal all the same
    "am vom zum im bis ab seit den der die das dem des zur beim ein eine einem einen einer eines jeden jedem jeder "
    "jede mein meine meinem meinen sein seine seinem seinen ihr ihre ihrem ihren unser unsere unserem unseren dieser "
    "diese diesem diesen"
    .split()
)  # fmt: skip
MONTHS = frozenset(
    "januar jänner februar märz april mai juni juli august september oktober november dezember jan feb mär apr jun "
    "jul aug sep sept okt nov dez"
    .split()
)  # fmt: skip
ABBREVIATIONS = frozenset(
    # German
    "bzw ca dr evtl ggf hr fr frl nr str st usw vgl etc inkl sog tel abs bsp jh jhd mio mrd min max prof dipl ing "
    "geb gest bspw ebd zzgl abzgl ggü allg ehem gegr jan feb mär apr jun jul aug sep sept okt nov dez abb kap bd hrsg "
    # English
    "mr mrs ms mt jr sr vs no fig approx dept est ave rd blvd co corp inc ltd oct dec "
    # French
    "m mm mme mlle mgr av bd env cf éd p pp "
    # Czech
    "tj tzv např atd apod resp mj pí mgr ul sv čp zn"
    .split()
)  # fmt: skip


# top-level domains a sentence may end a web address with ("siehe example.de."): the common generic ones and the
# countries of the languages read here and their neighbours
DOMAINS = frozenset("com org net edu gov info io eu de at ch fr be lu nl cz sk pl it es uk dk se no fi us ca".split())


def split_sentences(line: str) -> list[str]:
    """``line``'s sentences, in order, each stripped (one: ``[line.strip()]``, where no sentence ends inside it; [] for
    a blank line); a line break inside ``line`` ends one. Joined with single spaces they give the line, its runs of
    white space between sentences aside."""
    return [piece for part in _lines_sentences(line) for piece in part]


def _lines_sentences(text: str) -> list[list[str]]:
    """Each line's sentences of ``text`` stripped ([] for a blank line, so ``[[]]`` for a blank text)."""
    text = text.strip()
    # typed without capitals: nothing tells a sentence's start but the letter after an end ("Ein Mann ... "got
    # rocks?" is flipping" has one capital, its first, and no sentence starts after the "?")
    any_letter = not any(c.isupper() for c in text)
    # at line feeds only: str.splitlines also broke a line at a vertical tab (Word's manual line break), a stray CR,
    # U+2028, U+0085 or \x1c-\x1e, tearing a sentence in two ("... über die\x0bStraße." -> "... water. A street.");
    # they are white space to the words
    return [_sentences(part.strip(), any_letter) for part in text.split("\n")]


def _sentences(text: str, any_letter: bool) -> list[str]:
    """The sentences of ``text``, a stripped line without line breaks (:func:`split_sentences`)."""
    pieces, start = [], 0
    for m in _END.finditer(text):
        rest = text[m.end() :].lstrip()
        after = rest.lstrip(_OPENERS)[:1]
        if not after or not (after.isupper() or after.isdigit() or (any_letter and after.isalpha())):
            continue
        mark = text[m.start() : m.end()].rstrip(_CLOSERS)  # "." (or "..."), "!", "?!", "…"
        if mark.endswith(".") and _abbreviation(text[: m.start()], rest):
            continue
        pieces.append(text[start : m.end()].strip())
        start = m.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


MARKS_NOTE = "nothing to translate: marks alone (no letter or digit), written as typed"


def marks_alone(line: str) -> bool:
    """Whether a line of input holds marks alone, no letter or digit ("---", "* * *", "-", "…"): nothing a model of
    sentences reads (it made sentences up: "A view of the distance."); a line that is not UTF-8 is not (its error is
    said)."""
    return lone_surrogate(line) is None and not any(c.isalnum() for c in line)


def item_mark(sentence: str) -> tuple[str, str]:
    """``sentence``'s list item marker, as one space after the mark ("- ", "1. "; "" where it has none), and the rest of
    it, stripped: what is translated."""
    text = sentence.strip()
    found = _ITEM.match(text)
    if found is None:
        return "", text
    return found.group().rstrip() + " ", text[found.end() :]


def plain(text: str) -> str:
    """``text`` without the marks of emphasis, code spans and links around its words ("ein **roter** Hut" -> "ein roter
    Hut", "[Sand](http://x.de)" -> "Sand"); as typed where it has none."""
    if not any(c in text for c in "*_`["):
        return text
    for pattern, kept in _MARKUP:
        text = pattern.sub(kept, text)
    return text


def item_marks(text: str) -> list[str] | None:
    """Each of ``text``'s sentences' item marker (:func:`item_mark`; "" for none), in order, as the translator splits
    ``text`` (Translator.sentence_tokens); None where no sentence has one."""
    marks = [item_mark(piece)[0] for piece in split_sentences(text)]
    return marks if any(marks) else None


def line_breaks(text: str) -> list[int]:
    """How many line breaks come before each of ``text``'s sentences (:func:`split_sentences`): 0 on the line of the
    sentence before (and for the first), 1 at a line's start (a heading's, a list item's or a quote's line, kept in a
    paragraph: text_attn.translation.paragraphs), 2 after a blank line (a paragraph's start)."""
    breaks, blank = [], 0  # blank: line breaks since the last sentence, counting blank lines once
    for pieces in _lines_sentences(text):
        if not pieces:
            blank = 2 if breaks else 0
            continue
        breaks += [max(blank, 1) if breaks else 0] + [0] * (len(pieces) - 1)  # the line's first starts it
        blank = 0
    return breaks


def laid_out(translation: Any, breaks: list[int] | None) -> str:
    """``translation``'s text with each sentence's line breaks before it as in its source (``breaks``:
    :func:`line_breaks`; a space where none): the source's layout kept (``translate --paragraphs --keep-layout``,
    ``Translation.laid_out``). One line where the sentences are not as many (a sentence without tokens was left
    out)."""
    pieces = translation.pieces or [translation]
    if not breaks or len(pieces) != len(breaks):
        return translation.text
    return "".join(
        ("\n" * n if n else " ") * (i > 0) + p.text for i, (p, n) in enumerate(zip(pieces, breaks, strict=True))
    )


def put_marks(translation: Any, marks: list[str] | None) -> Any:
    """``translation`` (a Translation of a text whose sentences' item marks are ``marks``: :func:`item_marks`) with
    each sentence's mark put back before its translation, in its text and n-best texts; as it is where there are
    none, or where the translation's sentences are not as many (a sentence without tokens was left out)."""
    pieces = translation.pieces or [translation]
    if not marks or len(pieces) != len(marks):
        return translation
    marked = [
        dataclasses.replace(
            piece,
            text=mark + piece.text,
            nbest=[(mark + text, score, cut) for text, score, cut in piece.nbest] if piece.nbest else piece.nbest,
        )
        for piece, mark in zip(pieces, marks, strict=True)
    ]
    return dataclasses.replace(joined(marked), marks=list(marks))


def _abbreviation(before: str, after: str = "") -> bool:
    """Whether the word ending ``before`` (the text up to a period) makes that period its own: an abbreviation, an
    initial, an ordinal number (:data:`ORDINAL_BEFORE`; a list's number at the text's start), a word with periods
    inside. ``after``: the text after the period."""
    words = re.split(r"[\s(\[\"'„“«‚‘]", before)
    word = words[-1]
    if not word:
        return False  # a period after a space or a bracket: "..." handled as the end's own run
    if "." in word:
        return not _ends_as_sentence(word)
    if word.isdigit():
        earlier = next((w for w in reversed(words[:-1]) if w), None)
        month = re.match(r"\w+", after)
        if earlier is None or month is not None and month.group().lower() in MONTHS:
            return True  # a list's number at the text's start; a date
        core = earlier.lower().strip(",:;.")
        if core in CARDINAL_BEFORE:
            return False  # a count: "Nummer 7.", "Abb. 3."
        if earlier[-1] in ".!?…" and not (earlier[-1] == "." and core in ABBREVIATIONS):  # ("ca. 50.": no end)
            return True  # an inline list's number after a sentence's end: "... läuft. 2. Eine Frau ..."
        if core in ORDINAL_BEFORE:
            return True  # "am 3. Dann ...", "der 1000. Besucher": an ordinal's word before it
        following = re.match(r"\w+", after.lstrip(_OPENERS))
        if following is not None and following.group().lower() in STARTERS:
            return False  # a sentence starts after it: "ist 12. Er spielt ...", "counts to 10. A woman ..."
        return len(word) != 4  # a year ends one ("Das war 2024. Im Jahr ..."); else an ordinal, as before
    if len(word) == 1 and word.isalpha():
        return True
    # German streets' compounds: "Hauptstr. 5", "Bahnhofstr. 12"
    return word.lower() in ABBREVIATIONS or len(word) > 4 and word.lower().endswith("str")


def _ends_as_sentence(word: str) -> bool:
    """Whether a word with periods inside, before a period, may end a sentence there: a web address or a domain
    ("www.example.de", "example.com"), a number of thousands or a date with its year ("1.000", "3.10.2024"); not an
    abbreviation of letters ("z.B", "u.a", "E.S.E") nor a date without its year ("3.10")."""
    if "://" in word or word.lower().startswith("www."):
        return True
    parts = word.strip("/").split(".")
    if all(part.isdigit() for part in parts):
        return len(parts[-1]) >= 3
    # a domain: its last part a top-level domain people write ("Prof.Dr", "Dipl.Ing", "Tel.Nr" are abbreviations)
    return len(parts) >= 2 and parts[-1].lower() in DOMAINS and max(len(p) for p in parts[:-1]) >= 2


def join_grids(grids: list[Tensor], source_lengths: list[int], fold_end: bool = True) -> Tensor:
    """Sentences' attention grids (..., T_i, S_i + 1) (columns: their S_i source tokens, then their end) -> the line's
    (..., T, S + 1), block by block: sentence i's rows read its own columns alone, zeros elsewhere. A sentence before
    the last has no end column of its own in the line (the line has one end): its end's weight goes to its last
    source token (its closing punctuation), so each row still sums as it did. ``fold_end`` False: its end's column
    is left out instead (leave-one-out drops, which do not add up as weights do: the end's and the stop's, of
    opposite signs, summed into a value no removal gave)."""
    if len(grids) == 1:
        return grids[0]
    rows = sum(g.size(-2) for g in grids)
    cols = sum(source_lengths) + 1
    out = grids[0].new_zeros(*grids[0].shape[:-2], rows, cols)
    r = c = 0
    for i, (g, s) in enumerate(zip(grids, source_lengths, strict=True)):
        t = g.size(-2)
        if i == len(grids) - 1:
            out[..., r : r + t, c : c + s + 1] = g
        else:
            out[..., r : r + t, c : c + s] = g[..., :s]
            if s and fold_end:
                out[..., r : r + t, c + s - 1] += g[..., s]
        r, c = r + t, c + s
    return out


def joined(pieces: list[Any]) -> Any:
    """A line's one Translation from its sentences' (each a Translation of one sentence, in order): tokens, source and
    words one after another, the text joined by spaces, the attention by :func:`join_grids`, the score the sentences'
    averaged by their steps (tokens and end: with length penalty 1, the line's mean log-probability a step), cut off
    where any was, the end's probability the last sentence's; its n-best list's k-th entry each sentence's k-th (or
    its last, where it has fewer) joined. ``pieces`` keeps the sentences'."""
    if len(pieces) == 1:
        return pieces[0]
    first = pieces[0]
    steps = [len(p.tokens) + 1 for p in pieces]

    def mean(scores: list[float]) -> float:
        return sum(s * n for s, n in zip(scores, steps, strict=True)) / sum(steps)

    attention = None
    if all(p.attention is not None for p in pieces):
        heads = first.attention.dim() == 3  # (T, H, S + 1): the heads in the middle
        grids = [p.attention.movedim(0, -2) if heads else p.attention for p in pieces]
        attention = join_grids(grids, [len(p.source) for p in pieces])
        attention = attention.movedim(-2, 0) if heads else attention
    nbest = None
    if all(p.nbest for p in pieces):
        nbest = []
        for k in range(max(len(p.nbest) for p in pieces)):
            alts = [p.nbest[min(k, len(p.nbest) - 1)] for p in pieces]
            nbest.append((_text([a[0] for a in alts]), mean([a[1] for a in alts]), any(a[2] for a in alts)))
    read = all(p.probs is not None for p in pieces)
    return dataclasses.replace(
        first,
        source=[t for p in pieces for t in p.source],
        tokens=[t for p in pieces for t in p.tokens],
        text=_text([p.text for p in pieces]),
        attention=attention,
        unknown=list(dict.fromkeys(w for p in pieces for w in p.unknown)),
        score=mean([p.score for p in pieces]),
        nbest=nbest,
        truncated=any(p.truncated for p in pieces),
        probs=[x for p in pieces for x in p.probs] if read else None,
        end_prob=pieces[-1].end_prob if read else None,
        word_probs=[x for p in pieces for x in p.word_probs]
        if read and all(p.word_probs is not None for p in pieces)
        else None,
        words=[w for p in pieces for w in p.words] if read and all(p.words is not None for p in pieces) else None,
        pieces=list(pieces),
    )


def _text(texts: list[str]) -> str:
    return " ".join(t for t in texts if t)


def piece_keys(keys: Tensor, counts: list[int]) -> Tensor:
    """(L,) int64 keys of L lines -> (sum(counts),) keys of their sentences: a line's first sentence keeps the line's
    key (a line of one sentence draws as it did before lines were split), the k-th another mixed from it, so that each
    sentence draws the same in any batch."""
    import torch

    from text_attn.core.decoding import _mix

    keys = torch.as_tensor(keys, dtype=torch.long)
    line = keys.repeat_interleave(torch.tensor(counts, dtype=torch.long))  # (P,)
    index = torch.cat([torch.arange(c) for c in counts]) if counts else torch.zeros(0, dtype=torch.long)
    return torch.where(index == 0, line, _mix(_mix(line) + index))
