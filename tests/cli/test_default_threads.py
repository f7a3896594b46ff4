"""``caption`` and ``translate`` without --threads use one thread per core other programs leave free
(text_attn/core/cpu_load.py); --threads, and a GPU run, keep their own count."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from captioning.commands.caption import caption_main
from text_attn.core import cpu_load
from text_attn.translation.translate_cli import translate_main

PHOTO = str(Path(__file__).resolve().parents[2] / "captioning" / "assets" / "photos" / "astronaut.png")


@pytest.fixture
def busy_core(monkeypatch):
    """A machine where other programs keep all but one core busy: the choice is recorded, torch's count restored."""
    asked = []

    def one_free(current: int) -> int:
        asked.append(current)
        return 1

    monkeypatch.setattr(cpu_load, "free_threads", one_free)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield asked
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("flags", "threads"), [([], 1), (["--device", "auto"], 1), (["--threads", "2"], 2)])
def test_caption_takes_the_free_cores_unless_told(tmp_path, busy_core, flags, threads):
    model = tiny_model_file(tmp_path / "tiny.pt")
    assert caption_main([PHOTO, "--model", str(model), "--max-len", "3", "--device", "cpu", *flags]) == 0
    assert torch.get_num_threads() == threads
    assert busy_core == ([2] if threads == 1 else [])  # asked with torch's own count; --threads: not asked


@pytest.mark.parametrize(("flags", "threads"), [([], 1), (["--threads", "2"], 2)])
def test_translate_takes_the_free_cores_unless_told(tmp_path, busy_core, flags, threads):
    model = tiny_word_model_file(tmp_path / "tiny.pt")
    assert translate_main(["--model", str(model), "--device", "cpu", *flags, "ma pipo"]) == 0
    assert torch.get_num_threads() == threads
    assert busy_core == ([2] if threads == 1 else [])


def test_more_threads_than_cores_is_said_in_one_note(tmp_path, busy_core, monkeypatch, capsys):
    """--threads beyond the cores the process may use is slower, not faster: both commands say so, and still do as
    told; within them, nothing is said."""
    monkeypatch.setattr(cpu_load, "cpu_ids", lambda: {0, 1})
    assert cpu_load.more_threads_note(2) is None
    model = tiny_model_file(tmp_path / "tiny.pt")
    assert caption_main([PHOTO, "--model", str(model), "--max-len", "3", "--device", "cpu", "--threads", "3"]) == 0
    err = capsys.readouterr().err
    assert "caption: note: --threads 3 is more than the 2 cores this process may use" in err and "(--threads 2" in err
    assert torch.get_num_threads() == 3
    words = tiny_word_model_file(tmp_path / "words.pt")
    assert translate_main(["--model", str(words), "--device", "cpu", "--threads", "2", "ma pipo"]) == 0
    assert "more than" not in capsys.readouterr().err
    assert translate_main(["--model", str(words), "--device", "cpu", "--threads", "3", "ma pipo"]) == 0
    assert "translate: note: --threads 3 is more than the 2 cores" in capsys.readouterr().err
