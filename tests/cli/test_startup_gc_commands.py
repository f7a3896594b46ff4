"""Every console script that loads a model gives the garbage collector back once its model is in
(text_attn.core.startup_gc): run in-process after hold(), as its console script starts, each command ends released."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file

from text_attn.core import startup_gc

PHOTO = str(Path(__file__).parent.parent / "fixtures" / "images" / "chelsea.png")


def _caption(tmp_path):
    from captioning.commands.caption import caption_main

    return caption_main([PHOTO, "--model", str(tiny_model_file(tmp_path / "c.pt")), "--max-len", "3"])


def _translate(tmp_path):
    from text_attn.translation.translate_cli import translate_main

    return translate_main(["--model", str(tiny_word_model_file(tmp_path / "t.pt")), "ein mann"])


def _caption_export(tmp_path):
    from captioning.commands.export import export_main

    return export_main([str(tiny_model_file(tmp_path / "c.pt")), str(tmp_path / "out.pt")])


def _text_export(tmp_path):
    from text_attn.translation.export import export_main

    return export_main([str(tiny_word_model_file(tmp_path / "t.pt")), str(tmp_path / "out.pt")])


def _serve(tmp_path):
    from attention_serve.cli import _parser, build_server

    args = _parser().parse_args(["--caption-model", str(tiny_model_file(tmp_path / "c.pt")),
                                 "--text-model", str(tiny_word_model_file(tmp_path / "t.pt"))])  # fmt: skip
    build_server(args)
    return 0


@pytest.mark.parametrize("command", [_caption, _translate, _caption_export, _text_export, _serve],
                         ids=["caption", "translate", "caption-export", "text-export", "attention-serve"])  # fmt: skip
def test_every_command_that_loads_a_model_releases_it(command, tmp_path, capsys):
    before = gc.get_threshold()
    startup_gc.hold()  # as its console script does (the test process's imports are frozen already: tests/conftest.py)
    try:
        assert command(tmp_path) == 0
        assert not startup_gc.held() and gc.get_threshold() == before
    finally:
        startup_gc.release()
