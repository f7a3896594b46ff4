"""`translate notes.txt` translates the words "notes.txt": the arguments are sentences, a file's lines come on stdin.
The translations stay as they were; a closing note names the arguments that are files and says how to give one."""

from __future__ import annotations

import io

from helpers.tiny_translator import tiny_word_model_file

from text_attn.translation.translate_cli import translate_main


def test_arguments_that_name_files_get_a_note_saying_how_to_give_a_file(tmp_path, capsys, monkeypatch):
    model = str(tiny_word_model_file(tmp_path / "m.pt"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.de").write_text("ein mann\n")
    (tmp_path / "more.de").write_text("ein hund\n")
    assert translate_main(["--model", model, "ein hund", "notes.de"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2  # both translated, as before
    notes = [line for line in err.splitlines() if "a file" in line or "files" in line]
    assert notes == ["translate: note: input 2 (notes.de) names a file, translated as text; to translate a file's "
                     "lines: translate < notes.de"]  # fmt: skip
    assert translate_main(["--model", model, "notes.de", "more.de", "ein mann"]) == 0
    assert "translate: note: inputs 1 (notes.de), 2 (more.de) name files, translated as text; to translate a file's " \
        "lines: translate < notes.de" in capsys.readouterr().err  # fmt: skip
    monkeypatch.setattr("sys.stdin", io.StringIO("notes.de\n"))  # a line of stdin is a sentence, whatever it says
    assert translate_main(["--model", model]) == 0
    assert "names a file" not in capsys.readouterr().err
