"""``text-train optimize --out`` / ``caption-train optimize --out`` that cannot take the chunks: one line, before the
corpus is read (text_attn.core.optimize_cli.out_problem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from text_attn.translation.train_cli import train_main as text_main

FIX = Path(__file__).parent.parent / "fixtures"


@pytest.fixture(autouse=True)
def _in_tmp(cli_run_in_tmp):
    pass


def test_an_out_folder_that_cannot_take_the_chunks_is_one_line_before_any_work(tmp_path, capsys):
    """A file for --out was said after every photo was encoded; a split folder holding another LitData dataset ended
    in a traceback, after the splits before it were written beside the user's files."""
    cfg = str(FIX / "text/tiny_reorder.yaml")
    Path("afile").write_text("mine")
    Path("theirs/val").mkdir(parents=True)
    Path("theirs/val/index.json").write_text("{}")
    for out, said in [("afile", "afile is a file, not a folder"), ("afile/sub", "afile is a file, not a folder"),
                      ("theirs", "theirs/val holds a LitData dataset this command did not write")]:  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            text_main(["optimize", "--config", cfg, "--out", out])
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and err.startswith(f"text-train optimize: error: --out {out}: {said}"), err
    assert sorted(p.name for p in Path("theirs").rglob("*")) == ["index.json", "val"]  # nothing written beside them


@pytest.mark.parametrize("given", ["0", "0b", "lots", "12XB", "0.0001kb"])
def test_a_chunk_size_litdata_cannot_take_is_one_line_before_any_work(given, capsys):
    """LitData's own refusal was a traceback from its worker, with a half-made chunk folder left; 0b wrote chunks of
    no size."""
    with pytest.raises(SystemExit) as exc:
        text_main(["optimize", "--config", str(FIX / "text/tiny_reorder.yaml"), "--out", "chunks", "--chunk_bytes",
                   given])  # fmt: skip
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err == (f"text-train optimize: error: --chunk_bytes takes a size above 0 such as "
                                           f"64MB, 500KB or 1000000 (bytes), got {given!r}\n")  # fmt: skip
    assert not Path("chunks").exists()


def test_a_chunk_size_in_bytes_or_litdatas_units_is_taken():
    from text_attn.core.optimize_cli import chunk_size

    assert [chunk_size("t", g) for g in ("64MB", "500kb", "1.5g", "2000")] == ["64MB", "500kb", "1.5g", 2000]


def test_data_options_a_fit_from_chunks_does_not_read_are_noted_where_typed(tmp_path):
    """``--data.val_size 2`` or another ``--data.image_dir`` beside ``--data.root CHUNKS`` changed nothing, unsaid;
    a config's own (the one optimize read too) are not noted."""
    from captioning.training.unread import unread_options as caption_unread
    from text_attn.core.unread_options import given_unread
    from text_attn.translation.unread import unread_options as text_unread

    (tmp_path / "chunks").mkdir()
    (tmp_path / "chunks" / "streaming.json").write_text("{}")  # what makes a folder optimize's
    for unread, data, typed, said in [
        (text_unread, {"root": "chunks", "task": "dates", "train_size": 10, "batch_size": 8}, ["data.task",
         "data.train_size", "data.batch_size"], "of data.root reads no data.task, data.train_size"),
        (caption_unread, {"root": "chunks", "source": "folder", "image_dir": "x", "val_size": 2}, ["data.image_dir",
         "data.val_size"], "a fit from the chunks of data.root reads no data.image_dir, data.val_size"),
    ]:  # fmt: skip
        found = unread({"data": data})
        value = lambda option, d=data: d.get(option.split(".", 1)[1])  # noqa: E731
        _, note = given_unread(found, [f"data.{k}" for k in data], value, typed=typed)
        assert note is not None and said in note, note
        _, note = given_unread(found, [f"data.{k}" for k in data], value, typed=[])  # a config's: not noted
        assert note is None or "chunks" not in note
        assert not any("chunks" in u.setting for u in unread({"data": {**data, "root": "elsewhere"}}))


def test_another_familys_chunks_are_named_so(tmp_path):
    import json

    from text_attn.core.streaming import FORMAT, MANIFEST, ChunkError, _earlier

    (tmp_path / "chunks").mkdir()
    (tmp_path / "chunks" / MANIFEST).write_text(json.dumps({"format": FORMAT, "family": "text", "options": {}}))
    with pytest.raises(ChunkError) as err:  # it said "made with other data options"
        _earlier(tmp_path / "chunks", "caption", {})
    assert str(err.value) == (f"--out {tmp_path / 'chunks'}: holds the chunks of text-train optimize, not "
                              "caption-train's; give a new folder")  # fmt: skip


@pytest.mark.long
def test_stdout_holds_the_one_result_line(capfd):
    """LitData's own lines and its workers' ("Worker 0 is terminating.", "Finished data processing!": 46 for this
    corpus) and optimize's progress went to stdout beside the result; they go to stderr. A finished folder's rerun
    lists the splits in the same order (its manifest read back listed them alphabetically)."""
    said = "text-train optimize: chunks: train 96, val 16, test 16 pairs; train on it with --data.root chunks\n"
    errs = []
    for _ in range(2):
        text_main(["optimize", "--config", str(FIX / "text/tiny_reorder.yaml"), "--out", "chunks"])
        out, err = capfd.readouterr()
        assert out == said, out
        errs.append(err)
    assert "train: 96 samples -> chunks/train" in errs[0] and "Finished data processing!" in errs[0]
