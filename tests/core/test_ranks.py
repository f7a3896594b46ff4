"""text_attn.core.ranks: which process of a run says what every process reads alike (a data module's notes)."""

from __future__ import annotations

import pytest

from text_attn.core.ranks import first_on_machine, first_process, say

KEYS = ("RANK", "LOCAL_RANK", "NODE_RANK")


@pytest.mark.parametrize(
    "env, first",
    [
        ({}, True),  # one process, no launcher
        ({"LOCAL_RANK": "0", "NODE_RANK": "0"}, True),  # Lightning's first process
        ({"LOCAL_RANK": "1", "NODE_RANK": "0"}, False),  # Lightning's second
        ({"LOCAL_RANK": "0", "NODE_RANK": "1"}, False),  # the first of the second machine
        ({"RANK": "0", "LOCAL_RANK": "0"}, True),  # torchrun
        ({"RANK": "3", "LOCAL_RANK": "0"}, False),  # torchrun, another machine's first: RANK decides
        ({"RANK": "0", "LOCAL_RANK": "1"}, True),
    ],
)
def test_the_first_process_is_rank_zero_of_all(env, first, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert first_process() is first
    assert first_on_machine() is (env.get("LOCAL_RANK", "0") == "0")


def test_say_is_said_by_the_first_process_only(monkeypatch, capsys):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    say("text data: one")
    monkeypatch.setenv("LOCAL_RANK", "2")
    say("text data: two")
    captured = capsys.readouterr()
    assert captured.err == "text data: one\n" and captured.out == ""
