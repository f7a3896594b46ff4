"""Text wrapped over lines (copied from a PDF, an e-mail, a book), read as paragraphs.

A line is one input to ``translate``; text wrapped over lines breaks its sentences at every line's end, and each
half is translated on its own ("Ein Mann läuft über die" -> "A man is walking across the water.", "Straße." -> "A
street."). With ``translate --paragraphs`` (and attention-serve's ``paragraphs=1``) the lines up to a blank line are
one input, joined into one line by :func:`join_wrapped`; its sentences are then translated each on its own as a
line's are (text_attn.translation.sentences).

A word broken at a line's end by a hyphen is made whole again: "Wieder-" + "holung" -> "Wiederholung". A hyphen that
belongs to the word stays ("T-" + "Shirt" -> "T-Shirt", "1990-" + "1995"), and so does one that stands for a word's
part left out before "und", "or", ... ("Ein-" + "und Ausgang" -> "Ein- und Ausgang"). Where the model's training text
is known (Translator.word_logp), a lowercase half joins as that text writes the word more often: "schwarz-" +
"weißer" -> "schwarzweißer" or "schwarz-weißer". A soft hyphen (U+00AD) at a line's end always joins.

Not every line break in a paragraph wraps a sentence: a heading ("Einleitung") or a list ("Zutaten:" "- Mehl" "- Eier")
has its own. Such a break is kept, as one line break in the joined text, which ends a sentence there
(:func:`kept_break`): before a list item, and after a line that ends where the next line's first word would have fitted,
which a wrapper never does. Joined, the heading was read into the first sentence and a list's items into one ("- Ein
Hund - Eine Katze - Zwei Kinder spielen im Sand" -> "A shaggy dog playing in the sand"); kept, each is translated on its
own, its item marker put back before it ("- A dog").
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from text_attn.core.casing import shows_nothing
from text_attn.translation.sentences import item_mark, marks_alone

SOFT_HYPHEN = "\u00ad"
# the word before a hyphen (hyphen-minus, U+2010, a soft hyphen) that ends a line (letters or digits, with any hyphens
# inside: "four-year-"), and the word
# that starts the next ("old", "year-old"): the whole words asked about, as the model's word profile holds them
_QUOTE = re.compile(r">(?:[ \t]*>)*")  # an e-mail's quote marks at a line's start: ">", ">>", "> >"
_HEAD = re.compile(r"(\w+(?:[-'’]\w+)*)[-\u2010\u00ad]$")
_TAIL = re.compile(r"\w+(?:[-'’]\w+)*")
_COUNTED = re.compile(r"\(?(\d{1,3}|[A-Za-z])[.)]")  # a numbered or lettered item's mark: "3.", "2)", "(b)"
# a lowercase word after a line-ending hyphen that says the hyphen stands for a part left out ("Ein- und Ausgang",
# "pre- and post-war", "před- a poválečný"): German, English, French, Czech
CONJUNCTIONS = frozenset(
    "und oder bis sowie bzw beziehungsweise noch wie and or to nor et ou à a i nebo či ani až".split()
)


# words no sentence ends with, as written in mid-sentence: articles, conjunctions and German's preposition-article
# contractions (German, English, French, Czech). Not prepositions: German and English end sentences with their
# particles ("sieht zur Kamera auf", "looks on"), and "den" is Czech's "day": with them, 40 of Multi30k's lines seemed
# to break off into the next; with these, 3 of its 124,044 lines followed by another (train, val, test; four
# languages; goes_on) do: Czech train lines whose next has no capital
NO_END = frozenset(
    "der die das dem des ein eine einen einem einer eines im zum zur vom beim ins und oder the a and or of le la les "
    "un une du et".split()
)


# words a day's number follows ("am 3. Mai", "vom 2. bis 4. Juni", "le 3 mai", "dne 3. května"): a line ending in one
# goes on with the date, even where the lines below count up as a list's numbers would
BEFORE_A_DAY = frozenset("am vom bis zum ab seit dem den on le du au dne od".split())
# a list item's marks that are never a sentence's (a dash or "3." may be): a line starting with one starts an item
BULLETS = "•·‣◦▪▫●○■□►▸➢➤✓✔*#"  # "#": a Markdown heading's
# a line shorter than this share of the paragraph's longest, with room for the next word, was ended, not wrapped: the
# fifth to spare keeps text set in a proportional font (a PDF's; its lines' characters vary in width) from seeming so
FIT = 0.8
# a paragraph whose lines are all at most this share of the text's width was not wrapped (a signature, an address): its
# breaks are read at the text's width. Text wrapped narrower than half its document's width would be read so too
NARROW = 0.5
# ...unless its own lines, three or more and at least this wide, break only where the next word would not have fitted
OWN_WRAP = 40


def join_wrapped(lines: Iterable[str], word_logp: Callable[[str], float | None] | None = None, wide: int = 0) -> str:
    """``lines`` (a paragraph's, or a text's of several) joined into one text: each stripped, blank ones dropped,
    joined by single spaces, a word a hyphen breaks at a line's end made whole (see the module's text); a line break is
    kept (one "\\n") before a list item, after a line that ends short of where the text wraps (:func:`kept_break`)
    and where an e-mail's quote starts or ends (its marks, "> ", taken off each line and put once before its text),
    and a blank line (one "\\n\\n") where a paragraph ends. ``word_logp(word)``: how often the model's training
    text writes ``word`` (a log-probability; -inf: never; None: it cannot tell; Translator.word_logp): a broken word
    is joined as the text writes it more often ("schwarz-" "weiß": "schwarzweiß" or "schwarz-weiß"). ``wide``: where
    the text around wraps (the paragraphs before, in a document: :func:`paragraphs`): a paragraph whose lines are all
    at most half as wide (a signature, "Viele Grüße" "Max"; an address) was not wrapped, and is read at that width."""
    # the lines in runs of one paragraph and e-mail quote depth, their marks taken off, each with what goes before it
    runs: list[tuple[str, list[str], str]] = []
    ended = False  # a blank line above: the next line starts a paragraph
    quote_ended = False  # a quote's blank line above (">" alone): the next line starts one of the quote's paragraphs
    for line in lines:
        quote, rest = quoted(unicodedata.normalize("NFC", line))  # "grün-" typed decomposed is a word's end too
        if not rest:  # a blank line ends a paragraph; a quote's (">" alone) ends one of the quote's, on its own line
            ended, quote_ended = ended or not quote, quote_ended or bool(quote)  # (the two were read as one) unless
            continue
        # a quote's blank line where the line above breaks a sentence off that this one goes on with: skipped (a
        # reflowed quote's stray ">")
        if quote_ended and runs and runs[-1][0] == quote and goes_on(runs[-1][1][-1], rest):
            quote_ended = False
        if runs and runs[-1][0] == quote and not ended and not quote_ended:
            runs[-1][1].append(rest)
        else:
            gap = ("\n\n" if ended else "\n") if runs else ""  # after a paragraph's end, a blank line kept
            runs.append((quote, [rest], gap))
        ended = quote_ended = False
    wide = max([wide, *(wrap_width(run) for _, run, _ in runs)])
    # each run joined, its quote's marks before each of its lines ("> A man ...": put back before its translation as
    # a list item's; a line break kept inside a quote's run had none, and the quoted lines after it read as the
    # writer's own)
    return "".join(
        gap + quote + _join_run(run, word_logp, wide).replace("\n", "\n" + quote) for quote, run, gap in runs
    )


def wrap_width(lines: list[str]) -> int:
    """Where stripped ``lines`` wrap, as near as they tell: their longest line with a space (a line of one word may be
    longer: a word no line holds, a URL); 0 for none."""
    return max((len(line) for line in lines if " " in line), default=0)


def quoted(line: str) -> tuple[str, str]:
    """``line``'s e-mail quote marks at its start (">" a level, then one space: "> ", ">> "; "" for none) and the
    rest of it, stripped."""
    line = line.strip()
    found = _QUOTE.match(line)
    if found is None:
        return "", line
    return ">" * found.group().count(">") + " ", line[found.end() :].strip()


def _join_run(kept: list[str], word_logp: Callable[[str], float | None] | None, wide: int = 0) -> str:
    """Stripped lines of one paragraph and quote depth joined (:func:`join_wrapped`; ``wide``: the text's width)."""
    width = wrap_width(kept)
    if width <= NARROW * wide and not _wrapped_here(kept, width):  # a signature's lines: short of the text's width,
        width = wide  # not wrapped
    listing = _listing(kept)  # a list: a dash or "3." starts an item there
    text = ""
    for before, line in zip(["", *kept], kept, strict=False):  # before: "" for the first
        if not text:
            text = line
        elif kept_break(before, line, width, listing):
            text += "\n" + line
        else:
            text = _joined(text, line, word_logp)
    return text


def _article(word: str) -> bool:
    """Whether a line's last word is one no sentence ends with (:data:`NO_END`), as written mid-sentence or starting
    one ("Die" + "Frau": German's nouns start with capitals); not in capitals ("LA", "UN", "DU": names) nor a lone
    capital ("Plan A")."""
    return word.lower() in NO_END and (word.islower() or (len(word) > 1 and word.istitle()))


def _wrapped_here(lines: list[str], width: int) -> bool:
    """Whether stripped ``lines`` (three or more, :data:`OWN_WRAP` wide or more: not a signature's nor an address's)
    were wrapped at their own ``width``, narrower than the text around: no line could have held the next one's first
    word, as a wrapper leaves them (a German text's capitals make every short break look ended)."""
    if len(lines) < 3 or width < OWN_WRAP:
        return False
    return all(len(a) + 1 + len(b.split(None, 1)[0]) > width for a, b in itertools.pairwise(lines))


def _listing(lines: list[str]) -> bool:
    """Whether ``lines`` (stripped) are a list's: two of them or more start with an item's mark, and the numbers or
    letters among those marks count up by one, as a list's do ("1." "2." "3.", "a)" "b)"). Dates broken at their
    line's start ("am" / "3. Mai", later "am" / "2. Mai") are not a list."""
    marks = [mark for mark in (item_mark(line)[0] for line in lines) if mark]
    places = [_place(found.group(1)) for found in map(_COUNTED.match, marks) if found]
    return len(marks) > 1 and all(b == a + 1 for a, b in zip(places, places[1:], strict=False))


def _place(counter: str) -> int:
    """A list item's number or letter as its place: "3" -> 3, "b" -> 2."""
    return int(counter) if counter.isdigit() else ord(counter.lower()) - ord("a") + 1


def kept_break(before: str, line: str, width: int, listing: bool = False) -> bool:
    """Whether the break between the stripped lines ``before`` and ``line`` of a paragraph whose longest line with a
    space is ``width`` characters long ends what ``before`` holds rather than wraps it: ``line`` starts a list item (a
    bullet; a dash, a number or a letter with a bracket where ``listing``, the paragraph being a list (two of its
    lines or more start so), or after an end or a colon: else it may be a dash in a sentence, or "am" "3. Mai"), or
    ``before`` is a heading or a line ended short: ``line``'s first word would have fitted on it with a fifth of the
    width to spare, ``line`` starts as a sentence or an item does, and ``before`` does not end as a sentence going on
    does (a hyphen, a comma, :data:`NO_END`). A wrapper breaks a line only where the next word does not fit, so text
    wrapped at its width never has such a break."""
    mark = item_mark(line)[0]
    dated = mark[:1].isdigit() and (before.split() or [""])[-1].lower() in BEFORE_A_DAY  # "am" / "3. Mai"
    if mark and (mark[0] in BULLETS or (listing and not dated) or before[-1:] in ":.!?"):
        return True  # an item starts
    if item_mark(before)[0].startswith("#"):
        return True  # a Markdown heading ends
    if _HEAD.search(before) or before.endswith(",") or _article(before.rsplit(None, 1)[-1]):
        return False
    first = line.split(None, 1)[0]
    starts = bool(mark) or first[0].isupper() or first[0].isdigit() or first[0] in "\"'„“«‚‘(["
    return starts and len(before) + 1 + len(first) <= FIT * width


def _joined(before: str, line: str, word_logp: Callable[[str], float | None] | None) -> str:
    head, tail = _HEAD.search(before), _TAIL.match(line)
    if head is None:  # no hyphen at the end, or a dash apart ("Er kam -"): the line break is a space
        return f"{before} {line}"
    if before[-1] == SOFT_HYPHEN:  # put there by a typesetter to break the word: never part of it
        return before[:-1] + line
    word = head.group(1)
    # the word's own hyphen: "T-" "Shirt", "1990-" "1995", "3-" "jährige"
    if tail is None or not tail.group()[0].islower() or word[-1].isdigit():
        return before + line
    rest = tail.group()
    whole = hyphened = None
    if word_logp is not None:
        whole, hyphened = word_logp(word + rest), word_logp(f"{word}-{rest}")
    if rest.lower() in CONJUNCTIONS and not (whole is not None and whole > -math.inf):  # "Ein- und Ausgang"
        return f"{before} {line}"
    if whole is not None and hyphened is not None and hyphened > whole:  # the text writes it with its hyphen
        return before + line
    return before[:-1] + line  # the common case in typeset text: a word broken to fit the line


def goes_on(before: str, line: str) -> bool:
    """Whether ``line`` looks like the rest of a sentence that ``before`` (the line above it) broke off: ``before``
    ending in an article, a conjunction or a preposition fused with its article (:data:`NO_END`: "über die" +
    "Straße.", "im" + "Schnee."), or a word broken by a hyphen ("Fahr-" + "rad."), or in a letter or a comma with
    ``line`` going on in lowercase. The last tells nothing where ``before`` has no capital (text typed lowercase, a
    lowercased corpus). Lines of an e-mail's quote are read without its marks ("> "), where both are at one depth.
    ``translate`` says so once, pointing at --paragraphs."""
    (depth, before), (other, line) = quoted(before), quoted(line)
    if depth != other or not before or not line[:1].isalpha():
        return False
    if _article(before.rsplit(None, 1)[-1]):
        return True
    if not line[0].islower():
        return False
    if _HEAD.search(before):
        return True
    return (before[-1].isalpha() or before[-1] == ",") and any(c.isupper() for c in before)


def breaks_off(text: str) -> bool:
    """Whether one of ``text``'s own lines breaks a sentence off that the next goes on with (:func:`goes_on`): text
    wrapped over lines sent whole without paragraphs (Translator.translate's warning, the server's note)."""
    return "\n" in text and any(goes_on(a, b) for a, b in itertools.pairwise(text.splitlines()))


def paragraphs(
    lines: Iterable[str | None], word_logp: Callable[[str], float | None] | None = None
) -> Iterator[str | None]:
    """``lines`` (translate_streams.stdin_lines: None where a pipe has nothing more for now) as paragraphs: the lines
    up to a blank one (or one of white space alone, a form feed) joined by :func:`join_wrapped`, as each blank line
    (or the end) arrives. The Nones are passed on: what was whole by then is translated, a paragraph still being
    typed is held."""
    held: list[str] = []
    wide = 0  # where the paragraphs so far wrap: a signature's or an address's short lines are kept (join_wrapped)
    for line in lines:
        if line is None:
            yield None
        elif not shows_nothing(line) and not _marks_line(line):  # a line of a zero-width space alone is blank too
            held.append(line)
        else:
            if held and (joined := join_wrapped(held, word_logp, wide)):  # (a quote's blank line alone: nothing)
                yield joined
                wide = max(wide, wrap_width([quoted(kept)[1] for kept in held]))
            held = []
            if not shows_nothing(line):  # a rule ("---", "* * *"), a code fence, a heading's underline: an input of
                yield line  # its own, written as typed (translate_cli: marks alone); joined, it was dropped, read
                # into the text ("``` Eine Frau" -> "... in the middle of the movie line") or made a sentence of
    if held and (joined := join_wrapped(held, word_logp, wide)):
        yield joined


def _marks_line(line: str) -> bool:
    """Whether ``line`` holds marks alone (no letter or digit) after its e-mail quote marks, if any (a quote's blank
    line, ">" alone, is the quote's own: join_wrapped)."""
    rest = quoted(line)[1]
    return bool(rest) and marks_alone(rest)


def file_unit(args: Any) -> str:
    """What holds one input in a file of one an input (``--given-file``, ``--references``): a line, or with
    ``--paragraphs`` a paragraph (the messages name it)."""
    return "paragraph" if getattr(args, "paragraphs", False) else "line"


def file_paragraphs(lines: list[str]) -> list[str]:
    """A file's ``lines`` (corpora.read_lines) as its paragraphs (``--references`` and ``--given-file`` read so with
    ``--paragraphs``, a paragraph an input); no model's words to ask, so a lowercase half joins whole."""
    return [p for p in paragraphs(lines) if p is not None]
