"""A line of several sentences is translated sentence by sentence and joined (text_attn.translation.sentences): where
a line's sentences end, the line's one Translation made of its sentences' (the text, tokens, attention block by block,
score, n-best list, probabilities, seeded draws), and the readers of a translation that compute again from its source
(the evidence, a Transformer's every layer) doing so sentence by sentence."""

from __future__ import annotations

import pytest
import torch

from text_attn.core.decoding import Sampling
from text_attn.translation.alignment_page import report_attention
from text_attn.translation.explain import evidence_of, translation_evidence
from text_attn.translation.sentences import item_mark, item_marks, join_grids, piece_keys, put_marks, split_sentences
from text_attn.translation.translator import Translator

FIRST, SECOND = "Ein Hund läuft über die Wiese.", "Eine Katze schläft auf dem Sofa."
LINE = f"{FIRST} {SECOND}"


@pytest.mark.parametrize(
    "line, sentences",
    [
        (LINE, [FIRST, SECOND]),
        ("Wirklich? Ja! Genau…  Und dann?", ["Wirklich?", "Ja!", "Genau…", "Und dann?"]),
        ('Er sagte: "Komm her!" Dann lief er weg.', ['Er sagte: "Komm her!"', "Dann lief er weg."]),
        ("Am 3. Mai kam er. (Dann ging er.)", ["Am 3. Mai kam er.", "(Dann ging er.)"]),
        ("Un homme passe. Il court.", ["Un homme passe.", "Il court."]),
        ("Sechs Leute fahren Rad. 2 Mädchen sitzen.", ["Sechs Leute fahren Rad.", "2 Mädchen sitzen."]),
        ("Muž jde okolo. Pes běží.", ["Muž jde okolo.", "Pes běží."]),
        ("ein hund läuft. eine katze schläft.", ["ein hund läuft.", "eine katze schläft."]),  # no capital anywhere
        # German quotes close with marks that open quotes elsewhere: after a sentence's mark they close
        ("Er ruft: „Ein Hund läuft.“ Eine Katze schläft.", ["Er ruft: „Ein Hund läuft.“", "Eine Katze schläft."]),
        ("Er ruft: »Ein Hund läuft.« Eine Katze.", ["Er ruft: »Ein Hund läuft.«", "Eine Katze."]),
        ("Er ruft: ‚Komm!‘ Sie kommt.", ["Er ruft: ‚Komm!‘", "Sie kommt."]),
        ("He said. “Hello there.” Then left.", ["He said.", "“Hello there.”", "Then left."]),
        # a web address, a number of thousands, a date with its year end a sentence
        ("Mehr auf www.example.de. Eine Katze.", ["Mehr auf www.example.de.", "Eine Katze."]),
        ("Siehe example.de. Eine Katze.", ["Siehe example.de.", "Eine Katze."]),
        ("Prof.Dr. Müller kam. Er ging.", ["Prof.Dr. Müller kam.", "Er ging."]),
        ("See https://example.com/a. Next one.", ["See https://example.com/a.", "Next one."]),
        ("Ein Hund kostet 1.000. Eine Katze.", ["Ein Hund kostet 1.000.", "Eine Katze."]),
        ("Am 3.10.2024. Ein Fest.", ["Am 3.10.2024.", "Ein Fest."]),
        # a number's period ends a sentence after a word that takes a count, or as a year's (every "N." was an
        # ordinal: the next sentence was merged in and mostly lost); an inline list's number stays with its item
        ("Er trägt die Nummer 7. Eine Frau sitzt.", ["Er trägt die Nummer 7.", "Eine Frau sitzt."]),
        ("Das war 2024. Im Jahr 2025 kam er.", ["Das war 2024.", "Im Jahr 2025 kam er."]),
        ("Zum 100. Mal. Dann ging er.", ["Zum 100. Mal.", "Dann ging er."]),
        ("Er las S. 5 und Abb. 3. Dann ging er.", ["Er las S. 5 und Abb. 3.", "Dann ging er."]),
        ("1. Ein Mann läuft. 2. Eine Frau sitzt.", ["1. Ein Mann läuft.", "2. Eine Frau sitzt."]),
        # a sentence's first word after a number's period: it ended one ("the boy is 12. He ..." was merged: review)
        ("The boy is 12. He plays soccer.", ["The boy is 12.", "He plays soccer."]),
        ("Der Junge ist 12. Er spielt Fußball.", ["Der Junge ist 12.", "Er spielt Fußball."]),
        ("Das kostet ca. 50. Er zahlt.", ["Das kostet ca. 50.", "Er zahlt."]),
        ("A man counts to 10. A woman laughs.", ["A man counts to 10.", "A woman laughs."]),
        # a line break ends a sentence; other characters str.splitlines breaks at do not (a vertical tab: Word's
        # manual line break)
        ("Ein Mann läuft über die\x0bStraße. Eine Frau.", ["Ein Mann läuft über die\x0bStraße.", "Eine Frau."]),
        ("Ein Mann\u2028fährt\x85Rad\rweg.", None),
        # no sentence ends: abbreviations, initials, words with periods inside, a lowercase word after a "?"
        ("Ein Mann läuft an einem Schild vorbei, auf dem E.S.E. Electronics steht.", None),
        ("Zwei Menschen halten einen Globus mit ca. 120 cm Durchmesser.", None),
        ("Zwei alte Männer mit Hut bzw. Mütze dösen.", None),
        ("Ein Mann steht vor einem Prince St. Cafe.", None),
        ("Mehrere Männer in einer John A. Noble Einrichtung.", None),
        ("Mr. Smith und z.B. Dr. Who.", None),
        ('A man wearing a shirt that says "got rocks?" is flipping a pancake.', None),
        ("Ein Hund", None),
        ("Er wohnt in der Hauptstr. 5 in Berlin.", None),
        ("Am 3.10. Ein Fest.", None),  # a date without its year
        ("Das ist z.B. Ein Test, u.a. Dies.", None),
        ("Dipl.Ing. Meyer kam heute an.", None),  # periods inside, no web address: an abbreviation
        ("Bitte Tel.Nr. Angeben.", None),
        ("Der 2. Platz ging an ihn. Er lachte.", ["Der 2. Platz ging an ihn.", "Er lachte."]),
        ("Es war der 5. Dezember.", None),
        ("Sie kam am 1. Juni zurück.", None),
        ("Sie kam 1. Juni zurück.", None),  # a month after it
        ("Am 1. und 2. Tag regnete es.", None),  # ordinals wherever no count's word comes before
        ("Er wurde 2. Sieger.", None),
        ("Er kam als 3. Läufer ins Ziel.", None),
        ("Der 1000. Besucher kam.", None),
    ],
)
def test_a_line_is_cut_where_its_sentences_end_and_nowhere_else(line, sentences):
    found = split_sentences(line)
    assert found == (sentences or [line])
    assert " ".join(" ".join(found).split()) == " ".join(line.split())  # nothing lost or moved, spaces aside
    assert split_sentences("  \t ") == []


def test_the_sentences_grids_join_block_by_block_their_ends_on_their_last_tokens():
    a = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])  # 2 output tokens over 2 source tokens + end
    b = torch.tensor([[0.6, 0.4]])  # 1 output token over 1 source token + end
    line = join_grids([a, b], [2, 1])
    expected = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.1, 0.9, 0.0, 0.0], [0.0, 0.0, 0.6, 0.4]])
    torch.testing.assert_close(line, expected)
    torch.testing.assert_close(line.sum(-1), torch.ones(3))  # each row sums as before
    heads = join_grids([a.expand(3, 2, 3), b.expand(3, 1, 2)], [2, 1])  # (H, T, S + 1): leading dims kept
    assert heads.shape == (3, 3, 4)
    torch.testing.assert_close(heads[1], expected)
    assert join_grids([a], [2]) is a


def test_a_lines_first_sentence_keeps_the_lines_key_the_others_draw_apart():
    keys = piece_keys(torch.tensor([7, 9]), [2, 1])
    assert keys[0] == 7 and keys[2] == 9 and keys[1] not in (7, 9)
    assert torch.equal(piece_keys(torch.tensor([7]), [2]), keys[:2])  # the same in any batch


@pytest.fixture(scope="module", params=["transformer", "bahdanau"])
def translator(request):
    from text_attn.translation.bundled import MODEL_NAMES

    return Translator.load(MODEL_NAMES[request.param])


def test_each_sentence_is_translated_as_alone_and_the_line_joins_them(translator):
    (line,) = translator.translate([LINE])
    alone = translator.translate([FIRST, SECOND])
    (whole,) = translator.translate([LINE], split=False)
    assert line.text == f"{alone[0].text} {alone[1].text}"
    assert "cat" in line.text and "cat" not in whole.text  # translated whole, the second sentence was dropped
    assert line.pieces is not None and [p.text for p in line.pieces] == [a.text for a in alone]
    assert whole.pieces is None and alone[0].pieces is None
    assert line.source == alone[0].source + alone[1].source == whole.source
    assert line.tokens == alone[0].tokens + alone[1].tokens
    steps = [len(a.tokens) + 1 for a in alone]
    assert line.score == pytest.approx((alone[0].score * steps[0] + alone[1].score * steps[1]) / sum(steps))
    # attention: (T, [H,] S + 1), each sentence's rows over its own source, the first's end on its "."
    grid = line.attention if line.attention.dim() == 2 else line.attention.transpose(0, 1)  # (.., T, S + 1)
    t0, s0 = len(alone[0].tokens), len(alone[0].source)
    assert grid.shape[-2:] == (len(line.tokens), len(line.source) + 1)
    assert bool((grid[..., :t0, s0:] == 0).all()) and bool((grid[..., t0:, :s0] == 0).all())
    first = alone[0].attention if alone[0].attention.dim() == 2 else alone[0].attention.transpose(0, 1)
    torch.testing.assert_close(grid[..., :t0, s0 - 1], first[..., s0 - 1] + first[..., s0])
    torch.testing.assert_close(grid.sum(-1), torch.ones(grid.shape[:-1]))


def test_n_best_probabilities_and_seeded_draws_of_a_line(translator):
    (line,) = translator.translate([LINE], n_best=3, beam_size=3)
    alone = translator.translate([FIRST, SECOND], n_best=3, beam_size=3)
    assert line.nbest[0][0] == line.text
    assert [t for t, _, _ in line.nbest] == [f"{a[0]} {b[0]}" for a, b in zip(*(x.nbest for x in alone), strict=True)]
    scores = [s for _, s, _ in line.nbest]
    assert scores == sorted(scores, reverse=True)
    (read,) = translator.translate([LINE], probs=True)
    assert len(read.probs) == len(read.tokens) and len(read.word_probs) == len(read.words) == len(read.text.split())
    assert read.end_prob == read.pieces[-1].end_prob
    draw = Sampling(seed=3, temperature=1.5)
    (drawn,) = translator.translate([LINE], sampling=draw, keys=[11])
    (first,) = translator.translate([FIRST], sampling=draw, keys=[11])
    assert drawn.pieces[0].text == first.text  # a line's first sentence draws as that sentence alone, same key
    assert translator.translate([LINE, FIRST], sampling=draw, keys=[11, 4])[0].text == drawn.text


def test_the_evidence_and_every_layer_are_computed_sentence_by_sentence(translator):
    (line,) = translator.translate([LINE])
    found = evidence_of(translator, line)
    pieces = [translation_evidence(translator, list(p.source), list(p.tokens)) for p in line.pieces]
    assert found.tokens == line.tokens and found.source == [*line.source, "<eos>"]
    assert found.evidence.shape == found.attention.shape == (len(line.tokens), len(line.source) + 1)
    t0, s0 = len(pieces[0].tokens), len(line.pieces[0].source)
    torch.testing.assert_close(found.evidence[t0:, s0:], pieces[1].evidence)
    # the first sentence's drops as measured, its end's left out (summed into its "." they made a value no removal
    # gave); each token's agreement over the units its row shows (it was over its sentence's with its own end)
    torch.testing.assert_close(found.evidence[:t0, :s0], pieces[0].evidence[:, :s0])
    assert bool((found.evidence[:t0, s0:] == 0).all())
    from text_attn.core.faithfulness import kendall_tau

    shown = [kendall_tau(found.attention[t, :s0], found.evidence[t, :s0]) for t in range(t0)]
    assert found.agreement == pytest.approx(shown + pieces[1].agreement, nan_ok=True)
    # the --html page's taus of the view the records draw (the plot layer, heads averaged) are the records' (over
    # the whole line's row it said 0.91 beside the records' 0.6; review)
    from text_attn.core.faithfulness import rounded_taus
    from text_attn.translation.alignment_page import view_taus
    from text_attn.translation.explain import row_spans

    (grid,) = report_attention(translator, [line])
    layer = getattr(translator.net, "plot_index", -1) if grid.shape[0] > 1 else 0
    page = view_taus(grid, found.evidence, row_spans(line))[layer][0]
    assert page == pytest.approx(rounded_taus(found.agreement), abs=1e-3, nan_ok=True)
    (layers,) = report_attention(translator, [line])
    alone = report_attention(translator, line.pieces)
    assert layers.shape[-2:] == (len(line.tokens), len(line.source) + 1)
    torch.testing.assert_close(torch.from_numpy(layers[..., t0:, s0:]), torch.from_numpy(alone[1]))


def test_a_translation_given_is_read_sentence_by_sentence_where_it_has_as_many(translator):
    pieces = translator.sentence_tokens(LINE)
    first, second = "A dog runs across the grass.", "A cat sleeps on the sofa."
    (line,) = translator.read_split([pieces], [f"{first} {second}"])
    a, b = translator.read([FIRST], first)[0], translator.read([SECOND], second)[0]
    assert line.given and line.text == f"{a.text} {b.text}" and [p.text for p in line.pieces] == [a.text, b.text]
    assert line.word_probs == pytest.approx(a.word_probs + b.word_probs, rel=1e-5)  # read in one batch, not alone
    assert line.end_prob == pytest.approx(b.end_prob, rel=1e-5)
    steps = [len(a.tokens) + 1, len(b.tokens) + 1]  # each reading's score: the mean over its tokens and end
    assert line.score == pytest.approx((a.score * steps[0] + b.score * steps[1]) / sum(steps))
    (whole,) = translator.read_split([pieces], ["A dog runs across the grass while a cat sleeps."])  # one sentence
    assert whole.pieces is None and whole.source == pieces[0] + pieces[1]
    with pytest.raises(ValueError, match="one each"):
        translator.read_split([pieces], [])


@pytest.mark.parametrize(
    ("sentence", "mark", "rest"),
    [
        ("- Ein Hund", "- ", "Ein Hund"),
        ("•  Eine Katze schläft.", "• ", "Eine Katze schläft."),  # one space after the mark, whatever was typed
        ("1. Zwei Kinder spielen.", "1. ", "Zwei Kinder spielen."),
        ("12) Ein Mann", "12) ", "Ein Mann"),
        ("(b) ein Hund", "(b) ", "ein Hund"),
        ("– Ja, sagte er.", "– ", "Ja, sagte er."),
        ("## Teil 2", "## ", "Teil 2"),  # a Markdown heading's
        ("> Ein Hund", "> ", "Ein Hund"),  # an e-mail's quote's, at any depth, and marks one after another
        ("> > Ein Hund", "> > ", "Ein Hund"),
        ("> - Ein Hund", "> - ", "Ein Hund"),
        ("5 > 3 ist wahr.", "", "5 > 3 ist wahr."),
        # no mark: a negative number, a number without a period, a date inside, a mark with nothing after it
        ("-5 Grad", "", "-5 Grad"),
        ("2 Mädchen sitzen.", "", "2 Mädchen sitzen."),
        ("Am 3. Mai kam er.", "", "Am 3. Mai kam er."),
        ("-", "", "-"),
        ("1990. Ein Jahr.", "", "1990. Ein Jahr."),  # four digits: a year, not an item's number
    ],
)
def test_a_list_items_marker_is_found_at_a_sentences_start_and_nowhere_else(sentence, mark, rest):
    assert item_mark(sentence) == (mark, rest)


def test_a_line_break_ends_a_sentence_and_each_sentence_keeps_its_marker():
    text = "Zutaten:\n- Ein Hund läuft. Eine Katze\n- Zwei Kinder"
    assert split_sentences(text) == ["Zutaten:", "- Ein Hund läuft.", "Eine Katze", "- Zwei Kinder"]
    assert item_marks(text) == ["", "- ", "", "- "]
    assert item_marks("Ein Hund läuft. Eine Katze schläft.") is None


def test_the_markers_are_put_back_before_their_sentences_translations(translator):
    items = ["Ein Hund läuft.", "Eine Katze schläft.", "Zwei Kinder spielen im Sand."]
    alone = translator.translate(items, n_best=2, beam_size=2)
    (line,) = translator.translate([f"- {items[0]} {items[1]}\n1. {items[2]}"], n_best=2, beam_size=2)
    # the markers are not read: the same tokens and translations as the sentences alone, each marker before its own
    assert line.source == [t for a in alone for t in a.source] and line.tokens == [t for a in alone for t in a.tokens]
    assert line.text == f"- {alone[0].text} {alone[1].text} 1. {alone[2].text}"
    assert line.marks == ["- ", "", "1. "] and [p.text for p in line.pieces] == [
        f"- {alone[0].text}", alone[1].text, f"1. {alone[2].text}"]  # fmt: skip
    assert line.nbest[1][0] == f"- {alone[0].nbest[1][0]} {alone[1].nbest[1][0]} 1. {alone[2].nbest[1][0]}"
    # laid out: the second line's item on a line of its own again; a text of one line is its text
    assert line.line_breaks == [0, 0, 1]
    assert line.laid_out == f"- {alone[0].text} {alone[1].text}\n1. {alone[2].text}"
    assert alone[0].line_breaks is None and alone[0].laid_out == alone[0].text
    (one,) = translator.translate(["• ein hund läuft."])  # one sentence; typed without capitals: read with them
    assert one.text == f"• {alone[0].text}" and one.read_as == "• Ein Hund läuft." and one.marks == ["• "]
    (whole,) = translator.translate(["- Ein Hund läuft."], split=False)  # read whole, as typed: nothing put back
    assert whole.marks is None and whole.source != alone[0].source
    plain = alone[0]
    assert put_marks(plain, ["- ", "- "]) is plain  # not as many sentences as marks: left as it is


def test_line_breaks_says_which_sentences_start_a_line_and_laid_out_puts_the_breaks_back():
    from types import SimpleNamespace

    from text_attn.translation.sentences import laid_out, line_breaks

    text = "Zutaten:\n- Ein Hund. Er bellt.\n\n- Eine Katze\nEnde."
    assert split_sentences(text) == ["Zutaten:", "- Ein Hund.", "Er bellt.", "- Eine Katze", "Ende."]
    assert line_breaks(text) == [0, 1, 0, 2, 1]  # a blank line: a paragraph's start, no sentence of its own
    assert line_breaks("Ein Mann. Ein Hund.") == [0, 0] and line_breaks("  ") == [] and line_breaks("\n\nA.") == [0]
    pieces = [SimpleNamespace(text=t) for t in ("Ingredients:", "- A dog.", "It barks.", "- A cat", "End.")]
    whole = SimpleNamespace(text=" ".join(p.text for p in pieces), pieces=pieces)
    assert laid_out(whole, line_breaks(text)) == "Ingredients:\n- A dog. It barks.\n\n- A cat\nEnd."
    assert laid_out(whole, [0, 1]) == whole.text  # not as many sentences (one left out): one line
    one = SimpleNamespace(text="A dog.", pieces=None)
    assert laid_out(one, [0]) == "A dog."


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("Ein Mann mit einem **roten** Hut.", "Ein Mann mit einem roten Hut."),
        ("*rot* und _blau_ und `grün`", "rot und blau und grün"),
        ("__zwei Wörter__ hier", "zwei Wörter hier"),
        ("im [Sand](http://example.com/sand).", "im Sand."),
        ("[im Park](www.example.com) spielen", "im Park spielen"),
        # no emphasis: arithmetic, names with underscores, a lone or unclosed mark, brackets that are no link
        ("2*3*4 und 5 * 3 und snake_case_name", "2*3*4 und 5 * 3 und snake_case_name"),
        ("x**y**z und *offen", "x**y**z und *offen"),
        ("Text [Anmerkung] (siehe oben)", "Text [Anmerkung] (siehe oben)"),
        ("* Ein Hund", "* Ein Hund"),  # a bullet: the marker's, not emphasis
    ],
)
def test_emphasis_code_and_link_marks_are_read_without_them(text, read):
    from text_attn.translation.sentences import plain

    assert plain(text) == read


def test_a_sentence_with_emphasis_is_translated_as_the_sentence_without(translator):
    marked = "Ein Mann mit einem **roten** Hut spielt im [Sand](http://example.com/sand)."
    bare = "Ein Mann mit einem roten Hut spielt im Sand."
    assert translator.sentence_tokens(marked) == translator.sentence_tokens(bare)
    (with_marks,), (without,) = translator.translate([marked]), translator.translate([bare])
    assert with_marks.text == without.text and with_marks.lost_addresses == ["http://example.com/sand"]
    assert "http" not in translator.unseen_words(marked)  # the link's address is not read, so not said unseen
    assert translator.sentence_tokens(marked, split=False) != translator.sentence_tokens(bare, split=False)  # as typed
