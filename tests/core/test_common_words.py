"""text_attn.core.common_words: a corpus side's language told from its common words, so that data.src_lang /
data.tgt_lang given the wrong way round (or as a name) is said, not recorded as the model's pair."""

from text_attn.core.common_words import language_notes, other_language, shares

GERMAN = ["Ein Mann fährt mit dem Fahrrad auf der Straße.", "Zwei Hunde spielen im Schnee.", "Die Frau und das Kind."]
ENGLISH = ["A man rides a bike on the street.", "Two dogs are playing in the snow.", "The woman and the child."]
FRENCH = ["Un homme fait du vélo dans la rue.", "Deux chiens jouent dans la neige.", "La femme et l'enfant."]


def test_each_side_reads_as_its_own_language_only():
    for lines, code in ((GERMAN, "de"), (ENGLISH, "en"), (FRENCH, "fr")):
        found = shares(lines)
        assert max(found, key=found.get) == code and found[code] >= 0.25, (code, found)
        assert other_language(lines, code) is None
    assert other_language(GERMAN, "en") == "de" and other_language(ENGLISH, "fr") == "en"
    assert other_language(GERMAN, "ja") is None  # a code not told: taken as given
    assert other_language(["Anna Berlin 1984", "Bob Paris"], "en") is None  # no language's common words


def test_notes_name_the_side_the_code_and_a_typed_name():
    assert language_notes({"source": ("en", GERMAN), "target": ("de", ENGLISH)}) == [
        "the source sentences read as German, not English as data.src_lang en says (their common words are "
        "German's): columns or codes swapped? The model file records German, what they read as",
        "the target sentences read as English, not German as data.tgt_lang de says (their common words are "
        "English's): columns or codes swapped? The model file records English, what they read as",
    ]
    assert language_notes({"source": ("German", GERMAN), "target": ("en", ENGLISH)}) == [
        "data.src_lang 'German' is a language's name: give its code, 'de' (the model file records the code)"
    ]
    assert language_notes({"source": ("de", GERMAN), "target": (None, ENGLISH)}) == []


def test_the_language_recorded_is_the_texts_and_a_name_typed_is_recorded_as_its_code():
    """A name typed ("german") was noted as de and recorded as "german"; English sources given as "german" were then
    noted as English and recorded as "german" (review): the file records what the notes say."""
    from text_attn.core.common_words import read_as

    assert read_as("German", GERMAN) == "de" and read_as("german", ENGLISH) == "en" and read_as("en", GERMAN) == "de"
    assert read_as("de", GERMAN) == "de" and read_as(None, GERMAN) is None and read_as("ja", GERMAN) == "ja"
