"""attention-serve says what `translate` and `caption` say of a length penalty at beam size 1: it changes no output
(one hypothesis, nothing to rank), only the score. /translate and /caption took it and answered as if it had been
used; now their answer's ``notes`` hold the commands' line, in the server's option names. In process: the HTTP
process's checks (front.Front._payload) make the payload, and the worker's own API answers it (tiny random models)."""

from __future__ import annotations

import pytest
from helpers.in_process import ask, served_apis

from attention_serve.openapi import CAPTION_ANSWER, TRANSLATE_ANSWER

NOTE = "length_penalty ranks the hypotheses of a beam; beam_size 1 keeps one hypothesis: it changes no output, only the scores reported"  # noqa: E501 - the line as a client reads it


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    return served_apis(tmp_path_factory.mktemp("models"))


def _written(answer: dict) -> tuple:
    """What the model wrote, the score aside."""
    if "translations" in answer:
        return tuple(t["tokens"] for t in answer["translations"])
    return tuple(answer["words"])


@pytest.mark.parametrize("path", ["/translate", "/caption"])
def test_a_length_penalty_at_beam_size_1_is_noted_in_the_answer(served, path):
    noted = ask(served, path, {"beam_size": 1, "length_penalty": 2.0})
    assert noted["notes"] == [NOTE]
    plain = ask(served, path, {"beam_size": 1})
    assert plain["notes"] == []
    assert _written(noted) == _written(plain)  # what the note says: the same output
    assert ask(served, path, {"beam_size": 1}, query="length_penalty=0.5")["notes"] == [NOTE]  # either place


@pytest.mark.parametrize("path", ["/translate", "/caption"])
def test_no_note_where_the_penalty_ranks_a_beam_or_none_was_given(served, path):
    assert ask(served, path, {"beam_size": 2, "length_penalty": 2.0})["notes"] == []
    assert ask(served, path, {})["notes"] == []  # the model file's own penalty is no option the client gave


def test_the_beam_size_is_the_model_files_where_the_request_gives_none(served):
    """The tiny text model's recorded decoding is greedy (beam 1), the caption model's a beam of 3."""
    front = served[0]
    assert (front.text.defaults["beam_size"], front.caption.defaults["beam_size"]) == (1, 3)
    assert ask(served, "/translate", {"length_penalty": 1.0})["notes"] == [NOTE]
    assert ask(served, "/caption", {"length_penalty": 1.0})["notes"] == []


@pytest.mark.parametrize(("path", "described"), [("/translate", TRANSLATE_ANSWER), ("/caption", CAPTION_ANSWER)])
def test_the_answers_description_names_its_notes(served, path, described):
    answer = ask(served, path, {"beam_size": 1, "length_penalty": 1.0})
    assert set(answer) <= set(described["properties"]) and described["properties"]["notes"]["type"] == "array"


def test_the_commands_and_the_server_say_it_in_one_wording():
    from text_attn.core.search_options import length_penalty_note

    assert length_penalty_note("length_penalty", "beam_size 1 keeps") == NOTE
    command = NOTE.replace("length_penalty", "--length-penalty").replace("beam_size", "beam")  # translate's, caption's
    assert length_penalty_note("--length-penalty", "beam 1 keeps") == command
