"""Text wrapped over lines read as paragraphs (text_attn/translation/paragraphs.py): a paragraph's lines joined, a word
a hyphen broke at a line's end made whole where it should be and not where it should not, paragraphs streamed as a
pipe sends them, the lines that break a sentence off found (and Multi30k's own lines not), a model's words asked."""

import math
import unicodedata
import warnings

import pytest

from text_attn.translation.paragraphs import (
    NO_END,
    file_paragraphs,
    file_unit,
    goes_on,
    join_wrapped,
    kept_break,
    paragraphs,
)
from text_attn.translation.translator import BrokenLinesWarning, Translator


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        (["Ein Mann läuft über die", "Straße."], "Ein Mann läuft über die Straße."),
        (["  Ein Kind fährt mit dem Fahr-  ", "rad.  "], "Ein Kind fährt mit dem Fahrrad."),  # stripped
        # a blank line ends a paragraph (a text of several, as Python's and the server's paragraphs=1 get them)
        (
            ["Ein Mann läuft über die", "Straße und ein Hund", " ", "Zwei Kinder spielen im", "Sand."],
            "Ein Mann läuft über die Straße und ein Hund\n\nZwei Kinder spielen im Sand.",
        ),
        (["Eine Wieder-", "holung"], "Eine Wiederholung"),  # a word broken to fit the line
        (["ein T-", "Shirt"], "ein T-Shirt"),  # a capital after it: the word's own hyphen
        (["von 1990-", "1995"], "von 1990-1995"),
        (["ein 3-", "jähriges Kind"], "ein 3-jähriges Kind"),  # digits before it: the word's own
        (["Ein-", "und Ausgang"], "Ein- und Ausgang"),  # a part left out before "und"
        (["pre-", "or post-war"], "pre- or post-war"),
        (["Er kam -", "und ging."], "Er kam - und ging."),  # a dash apart is no broken word
        (["Ein Bahn\u00ad", "Hof"], "Ein BahnHof"),  # a soft hyphen always joins, whatever follows
        (["a four-", "year-old boy"], "a fouryear-old boy"),  # nothing to ask: joined whole
        ([], ""),
        (["   "], ""),
        (["Ein Mädchen mit grün-", "weißem Hut."], "Ein Mädchen mit grünweißem Hut."),
    ],
)
def test_a_paragraphs_lines_are_joined_by_hand(lines, joined):
    assert join_wrapped(lines) == joined
    # typed decomposed ("u" + a combining diaeresis: macOS), joined as typed composed ("grün-" ended in a mark)
    decomposed = [unicodedata.normalize("NFD", line) for line in lines]
    assert join_wrapped(decomposed) == unicodedata.normalize("NFC", joined)


def test_the_models_words_decide_between_the_word_whole_and_hyphened():
    logp = {"schwarzweiß": -9.0, "schwarz-weiß": -7.0, "fahrrad": -8.0, "four-year-old": -6.0, "bisweilen": -12.0}
    asked = []

    def word_logp(word):
        asked.append(word)
        return logp.get(word.lower(), -math.inf)

    assert join_wrapped(["ein schwarz-", "weiß"], word_logp) == "ein schwarz-weiß"  # written so more often
    assert asked == ["schwarzweiß", "schwarz-weiß"]
    logp["schwarzweiß"] = -5.0
    assert join_wrapped(["ein schwarz-", "weiß"], word_logp) == "ein schwarzweiß"
    assert join_wrapped(["Fahr-", "rad."], word_logp) == "Fahrrad."
    assert join_wrapped(["a four-", "year-old boy"], word_logp) == "a four-year-old boy"  # the whole compound asked
    assert join_wrapped(["Ein-", "und Ausgang"], word_logp) == "Ein- und Ausgang"  # "einund": never written
    assert join_wrapped(["bis-", "weilen"], word_logp) == "bisweilen"
    logp["fahrund"] = -3.0  # a word the text writes, though its second half is a conjunction: joined
    assert join_wrapped(["Fahr-", "und"], word_logp) == "Fahrund"
    assert join_wrapped(["Neu-", "bau"], lambda word: None) == "Neubau"  # a model that cannot tell: whole


def test_paragraphs_are_streamed_as_the_blank_lines_arrive():
    lines = ["Ein Mann", None, "läuft.", "", " \t", "\f", "Ein Hund-", None, "", "", "bellt.", "Laut."]
    # a pause (None) passes on at once; the paragraph still being typed is held until its blank line or the end
    assert list(paragraphs(lines)) == [None, "Ein Mann läuft.", None, "Ein Hund-", "bellt. Laut."]
    assert list(paragraphs([])) == [] and list(paragraphs(["", "  "])) == []
    # a line of marks alone (a rule, a code fence, a heading's underline) is an input of its own, written as typed:
    # joined, it was dropped, read into the text or made a sentence of ("* * *" -> "* * A view of the same time.")
    marked = ["Ein Mann fährt", "Fahrrad.", "---", "Eine Frau läuft.", "> * * *", ">", "```"]
    assert list(paragraphs(marked)) == ["Ein Mann fährt Fahrrad.", "---", "Eine Frau läuft.", "> * * *", "```"]


def test_a_signatures_short_lines_are_read_at_the_width_of_the_text_above():
    mail = ["Ein Mann mit einem roten Hut steht vor dem Haus und", "wartet auf den Bus.", "", "Viele Grüße", "Max"]
    # alone, "Viele Grüße" is its paragraph's widest line: "Max" would not fit on it, so the lines look wrapped
    assert list(paragraphs(mail[3:])) == ["Viele Grüße Max"]
    # after a paragraph wrapped at 51 columns, lines at most half as wide were not wrapped: each its own
    assert list(paragraphs(mail)) == ["Ein Mann mit einem roten Hut steht vor dem Haus und wartet auf den Bus.",
                                      "Viele Grüße\nMax"]  # fmt: skip
    assert (
        join_wrapped(mail)
        == "Ein Mann mit einem roten Hut steht vor dem Haus und wartet auf den Bus.\n\nViele Grüße\nMax"
    )
    # wrapped more than half as wide: read at its own width, its breaks wraps
    narrow = ["Zwei Kinder spielen mit einem", "Hund im Garten."]
    assert list(paragraphs([*mail[:3], *narrow])) == [
        join_wrapped(mail[:2]),
        "Zwei Kinder spielen mit einem Hund im Garten.",
    ]
    # wrapped at half the width above or less: three lines or more that break only where the next word did not fit
    # are read at their own width (German's capitals made each break look ended: "... Sonne. Die" / "Frau liest ...")
    wide = ["Ein Mann mit beginnender Glatze, der eine rote Rettungsweste trägt, sitzt in einem kleinen Boot auf "
            "dem See und angelt nach Fischen.", ""]  # fmt: skip
    wrapped = ["Zwei Kinder spielen im Sand am Strand in der Sonne. Die", "Frau liest ein Buch auf einer Bank im "
               "Park. Ein Mann", "fährt mit seinem Fahrrad eine Straße entlang."]  # fmt: skip
    assert list(paragraphs([*wide, *wrapped]))[1] == " ".join(wrapped)
    assert list(paragraphs([*wide, *wrapped[:2]]))[1] == " ".join(wrapped[:2])  # two lines: "Die" goes on
    assert list(paragraphs([*wide, *mail[3:]]))[1] == "Viele Grüße\nMax"


def test_files_are_read_a_paragraph_an_input():
    assert file_paragraphs(["A dog", "runs.", "", "", "A cat-", "s sleep."]) == ["A dog runs.", "A cats sleep."]
    assert file_paragraphs([""]) == []

    class Args:
        paragraphs = True

    assert file_unit(Args()) == "paragraph" and file_unit(object()) == "line"


@pytest.mark.parametrize(
    ("before", "line", "breaks"),
    [
        ("Ein Mann läuft über die", "Straße.", True),  # an article never ends a sentence
        ("A man walks across the", "Street.", True),
        ("Zwei Hunde spielen im", "Schnee.", True),  # a preposition and its article in one
        ("Ein Kind fährt mit dem Fahr-", "rad.", True),
        ("Ein Mann, der läuft,", "springt.", True),  # a comma, then lowercase
        ("Ein Mann läuft", "und springt.", True),
        ("Ein Mann läuft.", "und springt.", False),  # a sentence's end
        ("Ein Kind sitzt und sieht zur Kamera auf", "Zwei Frauen blicken auf den Ozean.", False),  # Multi30k test 72
        ("A man is climbing a rock wall with a harness on", "A young man rides a bicycle.", False),  # a particle
        ("ein mann läuft", "und springt.", False),  # typed lowercase: a missing period tells nothing
        ("ein mann läuft über die", "straße.", True),  # but an article does
        ("Zwei Kinder spielen in der Sonne. Die", "Frau liest.", True),  # an article at a sentence's start too
        ("Die Sitzung der UN", "Die Delegierten kamen.", False),  # in capitals: a name, not "un"
        ("Wir nehmen Plan A", "The second plan failed.", False),  # a lone capital: not "a"
        ("ein mann läuft-", "weg", True),
        ("", "läuft", False),
        ("Ein Mann läuft über die", "", False),
        ("Ein Mann läuft über die", "42 Straßen", False),
        ("> Ein Mann läuft über die", "> Straße.", True),  # an e-mail's quote, read without its marks
        ("> Ein Mann läuft über die", ">> Straße.", False),  # at two depths: two quotes
    ],
)
def test_a_line_that_breaks_a_sentence_off_is_found(before, line, breaks):
    assert goes_on(before, line) is breaks


def test_no_end_holds_no_preposition_a_sentence_ends_with():
    assert {"auf", "an", "zu", "vor", "on", "up", "den"}.isdisjoint(NO_END)


def test_a_model_file_tells_how_often_its_text_writes_a_word():
    translator = Translator.load("transformer")
    assert translator.word_logp("Fahrrad") > translator.word_logp("Regenwald") == -math.inf
    assert translator.word_logp("FAHRRAD") == translator.word_logp("fahrrad")
    assert translator.word_logp("Mu\u0308tze") == translator.word_logp("Mütze") > -math.inf  # decomposed: NFC
    profile = translator.source_check
    try:
        translator.source_check = None
        assert translator.word_logp("Fahrrad") is None
        translator.source_check = {k: v for k, v in profile.items() if k != "words"}
        assert translator.word_logp("Fahrrad") is None
    finally:
        translator.source_check = profile


def test_translate_paragraphs_true_joins_each_texts_lines_first():
    translator = Translator.load("transformer")
    wrapped = "Ein Kind fährt mit dem Fahr-\nrad. Eine Frau wartet an der\nHaltestelle."
    typed = "Ein Kind fährt mit dem Fahrrad. Eine Frau wartet an der Haltestelle."
    joined, alone = translator.translate([wrapped, typed], paragraphs=True)
    assert joined.text == alone.text and len(joined.pieces) == 2
    # without it "Fahr-" and "rad." stay apart, and a warning says so (the server's note, translate's closing note)
    with pytest.warns(
        BrokenLinesWarning, match=r"^text 2: a line breaks off mid-sentence.*paragraphs=True\) joins the lines$"
    ):
        assert translator.translate([typed, wrapped])[1].text != joined.text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # lines that do not break a sentence off, or read whole: no warning
        translator.translate(["Zutaten:\n- Mehl", typed])
        translator.translate([wrapped], split=False)
    with pytest.raises(ValueError):
        translator.translate(["\n \n"], paragraphs=True)


def test_the_servers_note_names_the_texts_that_break_off():
    from attention_serve.front import wrapped_notes

    assert wrapped_notes(["Ein Mann läuft.", "Ein Hund."]) == [] and wrapped_notes(["Ein Mann"]) == []
    (one,) = wrapped_notes(["Ein Mann läuft über die", "Straße."])
    assert one.startswith("text 1 breaks off mid-sentence, the next going on with its rest") and "paragraphs=1" in one
    (two,) = wrapped_notes(["Ein Kind fährt mit dem Fahr-", "rad und der", "Hund.", "Eine Katze."])
    assert two.startswith("texts 1, 2 break off mid-sentence, the next going on with their rest")
    # a wrapped paragraph sent whole without paragraphs=1: its line breaks each end a sentence, said too
    (inside,) = wrapped_notes(["Ein Mann.", "Ein Mann läuft über die\nStraße.", "Zutaten:\n- Mehl"])
    assert inside.startswith("text 2: a line breaks off mid-sentence") and "paragraphs=1 joins" in inside


@pytest.mark.parametrize(
    ("lines", "joined"),
    [
        # a heading, then text wrapped at its width: the heading's break kept, the wrapped ones joined
        (["Einleitung", "Ein Mann läuft über die", "Straße. Ein Hund spielt", "im Park."],
         "Einleitung\nEin Mann läuft über die Straße. Ein Hund spielt im Park."),
        # a list after a colon: each item its own; an item wrapped onto a line of its own joined back
        (["Zutaten:", "- Ein Hund läuft über die", "  Straße.", "- Eine Katze", "• Zwei Kinder"],
         "Zutaten:\n- Ein Hund läuft über die Straße.\n- Eine Katze\n• Zwei Kinder"),
        (["1. Ein Hund", "2. Eine Katze"], "1. Ein Hund\n2. Eine Katze"),  # the first item starts the paragraph
        (["Einkaufsliste", "- Milch", "- Eier"], "Einkaufsliste\n- Milch\n- Eier"),  # two lines start so: a list
        # an e-mail's quote: its marks off each line, once before its text; its depth changing or ending, a break
        (["> Ein Mann läuft über die", ">  Straße. Ein Hund", ">", "> spielt im Park.", "Danke, das ist", "schön."],
         "> Ein Mann läuft über die Straße. Ein Hund spielt im Park.\nDanke, das ist schön."),
        ([">> Ein Mann läuft", "> > über die Straße.", "> Ja."], ">> Ein Mann läuft über die Straße.\n> Ja."),
        # a line break kept inside a quote keeps the quote's marks on both sides (the quoted list's later items, and
        # a quoted line after a quoted heading, read as the writer's own); a quote's blank line (">" alone) ends one
        # of its paragraphs (they were read as one) unless the line above breaks a sentence off
        (["> - Ein Hund", "> - Eine Katze", "> - Zwei Kinder"], "> - Ein Hund\n> - Eine Katze\n> - Zwei Kinder"),
        (["> # Der Hund", "> Ein Hund läuft über die", "> Wiese."], "> # Der Hund\n> Ein Hund läuft über die Wiese."),
        (["> Ein Mann läuft über die", "> Straße.", ">", "> Eine Frau sitzt auf einer", "> Bank."],
         "> Ein Mann läuft über die Straße.\n> Eine Frau sitzt auf einer Bank."),
        # Markdown's headings: a line of their own, whatever their length
        (["# Ein Mann läuft über die Straße und ein Hund", "bellt.", "## Teil 2", "Ein Kind spielt mit dem Ball."],
         "# Ein Mann läuft über die Straße und ein Hund\nbellt.\n## Teil 2\nEin Kind spielt mit dem Ball."),
        # a dash or a number a line starts with inside a sentence: no item (lowercase after it, no end before it)
        (["Er kam zu spät nach Hause", "- aber nicht allein."], "Er kam zu spät nach Hause - aber nicht allein."),
        (["Ein Mann mit einem grünen Hut geht", "3. Mal über die Straße."],
         "Ein Mann mit einem grünen Hut geht 3. Mal über die Straße."),
        # two lines start with a number, inside sentences: no list where the numbers do not count up by one
        (["Das große Konzert im Stadtpark findet am", "3. Mai statt, und die letzte Probe ist am",
          "2. Mai in der alten Halle neben dem Park."],
         "Das große Konzert im Stadtpark findet am 3. Mai statt, und die letzte Probe ist am 2. Mai in der alten Halle "
         "neben dem Park."),
        # ... nor where they count up but the line above ends in a word a day's number follows ("am" "4. Mai")
        (
            ["Das große Konzert im Stadtpark findet am", "3. Mai statt, und die letzte Probe ist am", "4. Mai."],
            "Das große Konzert im Stadtpark findet am 3. Mai statt, und die letzte Probe ist am 4. Mai.",
        ),
        (["Wir treffen uns am:", "1. Mai", "2. Juni"], "Wir treffen uns am:\n1. Mai\n2. Juni"),  # a colon: a list
        # a list's numbers and letters count up: each item its own, after a heading as long as the text's lines
        (["Die folgenden Schritte sind wirklich nötig", "1. Öffnen", "2. Schließen", "3. Gehen"],
         "Die folgenden Schritte sind wirklich nötig\n1. Öffnen\n2. Schließen\n3. Gehen"),
        (["Die folgenden Schritte sind wirklich nötig", "a) Öffnen", "b) Schließen"],
         "Die folgenden Schritte sind wirklich nötig\na) Öffnen\nb) Schließen"),
        # a short line that goes on: a hyphen, a comma, an article at its end; a lowercase next line
        (["Ein Kind", "fährt mit dem Fahrrad über die Straße."], "Ein Kind fährt mit dem Fahrrad über die Straße."),
        (["Ein Hund, der", "Ball und eine Leine liegen da."], "Ein Hund, der Ball und eine Leine liegen da."),
        # a word no line holds, on its own line, says nothing of the width: the lines around it stay wrapped
        (["Ein Mann steht an der", "Straßenbahnhaltestellenüberdachung", "Am Bahnhof."],
         "Ein Mann steht an der Straßenbahnhaltestellenüberdachung Am Bahnhof."),
    ],
)  # fmt: skip
def test_a_heading_and_a_list_keep_their_line_breaks(lines, joined):
    assert join_wrapped(lines) == joined


def test_a_break_is_kept_only_where_the_next_word_would_have_fitted():
    # a fifth of the width to spare: "Hallo" + " " + "Wie" is 9 characters; 9 <= 0.8 x 12, not 0.8 x 11
    assert kept_break("Hallo", "Wie geht's?", 12) and not kept_break("Hallo", "Wie geht's?", 11)
    assert not kept_break("Hallo", "wie geht's?", 40)  # a lowercase start goes on
    assert not kept_break("Ein Mann und", "Eine Frau", 40) and not kept_break("Eine Wieder-", "Holung", 40)
    assert kept_break("Er kam", "• spät", 6)  # a bullet is an item's mark wherever it stands
    assert not kept_break("Er kam zu spät nach Hause", "- aber", 30) and kept_break("Er kam.", "- Aber", 30)
    assert kept_break("Er kam zu spät nach Hause", "- aber", 30, listing=True)
    assert kept_break("Er kam", "- aber", 30)  # ended short: the dash and more would have fitted
