"""What one request may cost a model worker (attention_serve/limits.py), counted in the HTTP process as the server
counts it, with the bundled models' own tokenizers and grid: the audit's costly requests are refused naming the
limit, and every ordinary request (the docs' examples, long real sentences, a full request of them) passes at the
defaults."""

from __future__ import annotations

import random
import string

import pytest

from attention_serve import limits as cost  # check_work, check_caption_work, search_steps: a request's cost
from attention_serve.limits import CAPTION_OPTIONS, TRANSLATE_OPTIONS, ClientError, Limits, parse_options

LONGEST = int(TRANSLATE_OPTIONS["max_len"].high)
LONGEST_CAPTION = int(CAPTION_OPTIONS["max_len"].high)
FORTY_WORDS = (
    "Ein junger Mann mit einer roten Mütze und einer blauen Jacke steht neben einem alten Fahrrad vor einem kleinen "
    "Laden in einer belebten Straße, während zwei Frauen mit Einkaufstaschen vorbeigehen und ein Hund im Schatten "
    "eines großen Baumes schläft."
)


@pytest.fixture(scope="module")
def text():
    from attention_serve.models import load_text, text_path

    return load_text(text_path(None))  # the bundled Transformer, as the server loads it


@pytest.fixture(scope="module")
def caption():
    from attention_serve.models import caption_path, load_caption

    return load_caption(caption_path(None))


DEFAULTS = Limits()  # the server's defaults (attention-serve at --timeout 120)


def _translate(text, body: dict, limits: Limits = DEFAULTS) -> None:
    """The /translate checks of front.Front._payload, on a body's sentences and options."""
    body = dict(body)
    sentences = [body.pop("text")] if "text" in body else body.pop("sentences")
    options = parse_options(body, TRANSLATE_OPTIONS, text.defaults, limits.max_chars)
    given = len(text.extra["target_tokens"](options["given"])) if "given" in options else None
    tokens = cost.source_lengths(text.extra, sentences, False, given is not None)  # as front.Front._payload counts
    cost.check_work(tokens, options, limits, LONGEST, given)


def _caption(caption, fields: dict, limits: Limits = DEFAULTS) -> None:
    options = parse_options(fields, CAPTION_OPTIONS, caption.defaults, limits.max_chars)
    words = len(caption.extra["words"](options["given"])) if "given" in options else None
    cost.check_caption_work(options, limits, caption.extra["regions"], LONGEST_CAPTION, words)


def _refused(check, *args) -> str:
    with pytest.raises(ClientError) as err:
        check(*args)
    assert err.value.status == 413
    return err.value.message


def test_the_audits_costly_requests_are_refused_naming_the_limit(text, caption):
    # 216 bytes: 30 source tokens, yet 20 beams for up to 512 steps (504 after 120 s, the worker busy 2 more minutes)
    said = _refused(_translate, text, {"text": "Hund " * 30, "beam_size": 20, "max_len": 512, "length_penalty": 5})
    assert "up to 513 output tokens (the end counted)" in said and "at most 2,500,000 (--max-search)" in said
    # a given translation of 999 random letters (~950 tokens read one by one: 64.5 s)
    random.seed(0)
    letters = "".join(random.choice(string.ascii_letters) for _ in range(999))
    said = _refused(_translate, text, {"text": "Hund", "given": letters})
    assert said.startswith("given has") and "at most 512 (a translation's longest, max_len's ceiling)" in said
    # a caption of 499 given words with evidence (504 after 120 s)
    said = _refused(_caption, caption, {"given": " a" * 499, "evidence": 1})
    assert said == "given has 499 words; at most 100 (a caption's longest, max_len's ceiling)"
    said = _refused(_caption, caption, {"given": " a" * 60, "evidence": 1})  # 82 rows x 60 words
    assert "4,920 model steps" in said and "(--max-evidence)" in said
    said = _refused(_caption, caption, {"max_len": 100, "evidence": 1})  # the caption at its longest: 100 words
    assert "8,200 model steps" in said and "a smaller max_len" in said


def test_every_ordinary_request_passes_at_the_defaults(text, caption):
    for body in (
        {"text": "Ein Hund rennt."},
        {"text": "Zwei Hunde spielen im Schnee."},  # docs/serve.md's curl
        {"text": FORTY_WORDS},  # at the model's beam (8) and the default max_len
        {"text": "Ein Mann fährt mit dem Fahrrad eine Straße entlang.", "evidence": 1},
        {"text": FORTY_WORDS, "beam_size": 20},
        {"text": FORTY_WORDS, "given": "A young man in a red cap and a blue jacket stands next to an old bike."},
        {"text": (FORTY_WORDS + " ") * 4},  # 1,000 characters of real text (--max-chars)
        {"sentences": [FORTY_WORDS] * 16},
        {"sentences": ["Ein Mann fährt mit dem Fahrrad eine Straße entlang."] * 64},  # --max-sentences of them
    ):
        _translate(text, body)
    for fields in ({}, {"beam_size": 20}, {"evidence": 1}, {"given": "a dog runs through the grass", "evidence": 1},
                   {"given": "a dog " * 50}):  # fmt: skip
        _caption(caption, fields)


def test_the_search_is_counted_by_the_steps_it_may_take():
    """Per sentence of S source tokens: S x S (the encoder) + beams x T x (S + T), T the output at its longest, and
    a sentence's own cost (250: its tokens through the layers, its record); a sentence with no tokens costs nothing."""
    one = cost.SENTENCE_STEPS
    assert one == 250
    assert cost.search_steps([4], {"beam_size": 5, "max_len": 10}, LONGEST) == 16 + 5 * 11 * 15 + one  # T: 10, end
    assert cost.search_steps([4], {"beam_size": 5}, LONGEST) == 16 + 5 * 20 * 24 + one  # T: 2 x (4 + 1) + 10
    assert cost.search_steps([400], {"beam_size": 1}, LONGEST) == 160_000 + 512 * 912 + one  # T: at most 512
    assert cost.search_steps([4, 2, 0], {"given": "a b", "beam_size": 5}, LONGEST, given=2) == (
        16 + 3 * 7 + 4 + 3 * 5 + 2 * one
    )
    # 64 texts of 249 "Ja. " (64 KB, 15,936 sentences) at max_len 1 counted 19 steps a sentence, 302,784 in all, and
    # held the worker 110 s; a sentence's own cost makes it 4,286,784: refused
    with pytest.raises(cost.ClientError, match="15,936 sentences"):
        cost.check_work([3] * 15_936, {"beam_size": 1, "max_len": 1}, DEFAULTS, LONGEST)
    # the same source, a longer output: the steps grow with it (the width alone, 4 x 5, did not)
    assert cost.search_steps([4], {"beam_size": 5, "max_len": 512}, LONGEST) > 100 * cost.search_steps(
        [4], {"beam_size": 5, "max_len": 5}, LONGEST
    )


def test_a_given_text_of_max_lens_ceiling_is_read_and_one_token_more_is_refused():
    """A given translation may be as long as a translation may be: 512 tokens (max_len's ceiling), its end not
    counted among them, as max_len does not count it; 513 is refused naming the ceiling."""
    cost.check_work([1], {"given": "x"}, DEFAULTS, LONGEST, LONGEST)  # passes
    said = _refused(cost.check_work, [1], {"given": "x"}, DEFAULTS, LONGEST, LONGEST + 1)
    ceiling = "at most 512 (a translation's longest, max_len's ceiling)"
    assert said == f"given has 513 tokens as the model writes them; {ceiling}"


def test_the_page_is_told_the_language_the_model_reads(text):
    """attention-serve hands it to its page (page.render's source_lang), which tags the text typed and the source
    words with it, for a screen reader's voice (the bundled models read German)."""
    assert text.extra["lang"] == "de"


def test_the_learned_positions_refusal_is_checked_without_torch():
    """The HTTP process refuses a sentence past a learned position table in Translator.length_error's words, through
    the one helper both call (text_attn.translation.position_limit), and imports no torch to do it."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\nfrom attention_serve.limits import ClientError, check_positions\n"
        "try:\n    check_positions([9], {}, 8, None)\nexcept ClientError as e:\n    print(e.status, e.message)\n"
        "print('torch' in sys.modules)\n"
    )
    root = Path(__file__).parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    said = "the sentence: 9 tokens: with its end more than the 8 positions the model learned (positions: learned)"
    assert done.stdout.splitlines() == [f"413 {said}; split it", "False"], done.stderr[-2000:]


def test_a_text_of_several_sentences_is_counted_sentence_by_sentence(text):
    """Each sentence of a text is searched on its own (Translator.sentence_tokens), so its cost is its sentences':
    nineteen sentences at beam 20 pass, which counted as one search of their 190 tokens would be refused."""
    one = "Ein Mann fährt mit dem Fahrrad eine Straße entlang."
    body = {"text": " ".join([one] * 19), "beam_size": 20}  # 987 characters (--max-chars: 1,000)
    _translate(text, body)
    each = len(text.extra["tokenize"](one, False))
    assert cost.source_lengths(text.extra, [body["text"]], False, False) == [each] * 19
    whole = cost.source_lengths(text.extra, [body["text"]], False, True)  # a given text is read against all of it
    assert whole[0] >= 19 * each and cost.search_steps(whole, {"beam_size": 20}, LONGEST) > DEFAULTS.max_search
    assert cost.source_lengths(text.extra, ["   "], False, False) == [0]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"texts": ["Ein Hund."]}, 'not neither (got "texts")'),  # a near miss is named, not only the right keys
        ({"sentence": "Ein Hund.", "beam_size": 2}, '(got "sentence", "beam_size")'),
        ({}, "not neither"),
        ({"text": "a", "sentences": ["b"]}, "not both"),
    ],
)
def test_a_body_without_its_text_names_the_keys_it_had(body, says):
    with pytest.raises(ClientError) as err:
        cost.sentences_of(body, DEFAULTS)
    assert err.value.status == 422 and says in err.value.message
    assert err.value.message.endswith("neither") == (not body or "text" in body)  # no "(got ...)" to name
