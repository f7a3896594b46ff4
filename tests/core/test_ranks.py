"""text_attn.core.ranks: which process of a run says what every process reads alike (a data module's notes)."""

from __future__ import annotations

import pytest

from text_attn.core import ranks
from text_attn.core.ranks import first_on_machine, first_process, say

KEYS = ranks.RUN_RANKS + ranks.MACHINE_RANKS


@pytest.mark.parametrize(
    "env, first, first_here",
    [
        ({}, True, True),  # one process, no launcher
        ({"LOCAL_RANK": "0", "NODE_RANK": "0"}, True, True),  # Lightning's first process
        ({"LOCAL_RANK": "1", "NODE_RANK": "0"}, False, False),  # Lightning's second
        ({"LOCAL_RANK": "0", "NODE_RANK": "1"}, False, True),  # the first of the second machine
        ({"RANK": "0", "LOCAL_RANK": "0"}, True, True),  # torchrun
        ({"RANK": "3", "LOCAL_RANK": "0"}, False, True),  # torchrun, another machine's first
        ({"SLURM_PROCID": "0", "SLURM_LOCALID": "0"}, True, True),  # srun
        ({"SLURM_PROCID": "5", "SLURM_LOCALID": "1"}, False, False),  # srun sets no RANK nor LOCAL_RANK
        ({"SLURM_PROCID": "4", "SLURM_LOCALID": "0"}, False, True),
        ({"SLURM_PROCID": "0", "LOCAL_RANK": "1"}, False, False),  # an sbatch script's variable, Lightning's 2nd
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}, False, False),  # mpirun
        ({"JSM_NAMESPACE_RANK": "1", "JSM_NAMESPACE_LOCAL_RANK": "1"}, False, False),  # LSF's jsrun
    ],
)
def test_the_first_process_is_the_one_every_launcher_numbers_0(env, first, first_here, monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert first_process() is first and first_on_machine() is first_here


def test_say_is_said_by_the_first_process_only(monkeypatch, capsys):
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)
    say("text data: one")
    monkeypatch.setenv("LOCAL_RANK", "2")
    say("text data: two")
    captured = capsys.readouterr()
    assert captured.err == "text data: one\n" and captured.out == ""
