"""text_attn.core.data_note: a data folder's one-line note on itself, read back as written (lines joined, cut at
NOTE_CHARS), None where there is none or it is not text; the distillation scripts name a teacher without its
folders. (The data modules' facts carrying it: tests/text/test_distil_data.py,
tests/captioning/test_caption_distil_data.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

from text_attn.core.data_note import DATA_NOTE, NOTE_CHARS, note_facts, read_data_note, write_data_note

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import files_named, teacher_files, teacher_named  # noqa: E402 - the benchmarks' folder on the path first


def test_a_note_is_read_back_as_one_line(tmp_path):
    assert read_data_note(tmp_path) is None and read_data_note(None) is None
    assert note_facts(tmp_path) == {}
    write_data_note(tmp_path, "the train captions\n  are a teacher's ")
    assert (tmp_path / DATA_NOTE).read_text() == "the train captions are a teacher's\n"
    assert read_data_note(tmp_path) == "the train captions are a teacher's"
    assert note_facts(tmp_path) == {"data_note": "the train captions are a teacher's"}
    (tmp_path / DATA_NOTE).write_text("\n \n")
    assert read_data_note(tmp_path) is None  # blank: no note


def test_a_long_note_is_cut_and_what_is_not_text_is_none(tmp_path):
    (tmp_path / DATA_NOTE).write_text("é" * 3 * NOTE_CHARS)  # 2 bytes a character: the read ends between two
    assert read_data_note(tmp_path) == "é" * (NOTE_CHARS - 3) + "..."
    (tmp_path / DATA_NOTE).write_bytes(b"a" + "é".encode() * (2 * NOTE_CHARS))  # the read's end splits an é
    assert read_data_note(tmp_path) == "a" + "é" * (NOTE_CHARS - 4) + "..."
    (tmp_path / DATA_NOTE).write_bytes(b"\xff\xfe not utf-8")
    assert read_data_note(tmp_path) is None
    (tmp_path / DATA_NOTE).unlink()
    (tmp_path / DATA_NOTE).mkdir()  # not a file: unreadable, no note
    assert read_data_note(tmp_path) is None


def test_a_teacher_is_named_without_its_folders():
    assert teacher_named("caption", "") == "caption"
    named = teacher_named("caption", "--model /home/me/runs/a.pt --beam-size 3 --model=runs/b.pt 'odd name/c d.pt'")
    assert named == "caption --model a.pt --beam-size 3 --model=b.pt 'c d.pt'"


def test_a_teachers_model_files_are_its_model_and_ensemble_named_with_their_digests(tmp_path):
    def resolve(model):  # as a command resolves --model: none -> its default, a bundled name -> its file
        named = {None: tmp_path / "default.pt", "small": tmp_path / "small.pt"}
        return named[model] if model in named else Path(model)

    other = tmp_path / "other.pt"
    assert teacher_files("--beam-size 3", resolve) == [tmp_path / "default.pt"]
    assert teacher_files(f"--model={other} --ensemble small --ensemble x.pt", resolve) == [
        other, tmp_path / "small.pt", Path("x.pt")
    ]  # fmt: skip
    assert teacher_files(f"--ensemble small --model {other}", resolve) == [other, tmp_path / "small.pt"]
    (tmp_path / "default.pt").write_bytes(b"weights")
    other.write_bytes(b"")
    # sha256("weights") and sha256(""); a file that is not there (x.pt) is left out
    assert files_named([tmp_path / "default.pt", other, Path("x.pt")]) == (
        "default.pt sha256:9a129038d9a0, other.pt sha256:e3b0c44298fc"
    )
