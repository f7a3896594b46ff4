"""text_attn.core.part_files: parts written per process, read back whole after a kill, merged by id."""

from __future__ import annotations

import pytest

from text_attn.core.part_files import (
    LineCounter,
    PartError,
    PartWriter,
    Row,
    held_ids,
    merge_parts,
    part_files,
    read_rows,
)


def _rows(ids, kind="ok"):
    return [Row(i, kind, f"r{i[0]}.{i[1]}") for i in ids]


def test_parts_merge_by_id_into_input_order(tmp_path):
    parts = tmp_path / "out.jsonl.parts"
    a, b = PartWriter(parts, 0), PartWriter(parts, 1)
    a.write(_rows([(0, 0), (2, 0)]))
    b.write(_rows([(1, 0), (1, 1), (1, 5)]))
    a.write(_rows([(3, 0)]))
    assert a.close().name.endswith(".part") and not a.path.exists()
    b.close()
    merged = merge_parts(parts, tmp_path / "out.jsonl")
    assert (tmp_path / "out.jsonl").read_text().splitlines() == ["r0.0", "r1.0", "r1.1", "r1.5", "r2.0", "r3.0"]
    assert (merged.rows, merged.failed, merged.parts) == (6, 0, 2)


def test_a_killed_writer_leaves_its_whole_rows_and_a_torn_line_is_dropped(tmp_path):
    w = PartWriter(tmp_path, 3)
    w.write(_rows([(0, 1), (0, 2)]))
    with open(w.path, "a") as f:  # what a kill mid-write leaves: half a line
        f.write("0 3\tok\t{half")
    assert [r.id for r in read_rows(w.path)] == [(0, 1), (0, 2)]
    assert held_ids(tmp_path) == {(0, 1), (0, 2)}
    assert part_files(tmp_path) == [w.path]


def test_retry_rows_are_not_done_and_a_later_try_wins(tmp_path):
    first = PartWriter(tmp_path, 0)
    first.write([Row((0, 0), "ok", "a"), Row((0, 1), "retry", "failed once"), Row((0, 2), "retry", "fails")])
    first.close()
    assert held_ids(tmp_path) == {(0, 0)}
    second = PartWriter(tmp_path, 1)  # the resumed run, another process count: tries the failures again
    second.write([Row((0, 1), "ok", "b"), Row((0, 2), "retry", "fails again"), Row((0, 3), "held", "key3")])
    second.close()
    merged = merge_parts(tmp_path, tmp_path / "out", held={"key3": "from the old output"}.get)
    assert (tmp_path / "out").read_text().splitlines() == ["a", "b", "fails again", "from the old output"]
    assert merged.failed == 1 and merged.rows == 4


def test_foreign_lines_and_unordered_parts_are_refused(tmp_path):
    (tmp_path / "x.part").write_text("not a row\nmore\n")
    with pytest.raises(PartError, match="line 1 is not a part row"):
        held_ids(tmp_path)
    (tmp_path / "x.part").write_text("0 5\tok\ta\n0 1\tok\tb\n")
    with pytest.raises(PartError, match="out of order"):
        merge_parts(tmp_path, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_line_counter_reads_only_what_was_added_and_skips_earlier_runs(tmp_path):
    old = PartWriter(tmp_path, 0)
    old.write(_rows([(0, 0)]))
    old.close()
    count = LineCounter(tmp_path, since=part_files(tmp_path))
    w = PartWriter(tmp_path, 1)
    assert count() == 0
    w.write(_rows([(1, 0), (1, 1)]))
    assert count() == 2
    w.write(_rows([(1, 2)]))
    w.close()  # renamed: counted on from where it was
    assert count() == 3


def test_held_ids_can_keep_one_share(tmp_path):
    w = PartWriter(tmp_path, 0)
    w.write(_rows([(0, 0), (0, 1), (1, 0), (1, 1)]))
    assert held_ids(tmp_path, keep=lambda i: i[1] == 1) == {(0, 1), (1, 1)}
