"""``benchmarks/compare_faithfulness.py``: faithfulness JSONs (benchmarks/faithfulness.py --json) compared with whole
inputs drawn: two runs table by table, or one run's rankings against random; the JSON record; bad input as one line
and exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import compare_faithfulness  # noqa: E402
from _runs import run_main  # noqa: E402

TITLE = {"name": "Multi30k Bahdanau GRU", "removal": "source tokens masked, 3 test sentences"}


def words(areas: list[list[float]], random: float = 0.9) -> list[dict]:
    """One word per area, input by input, each input's last word its end word (as the benchmark writes them)."""
    out = []
    for item, sentence in enumerate(areas):
        for k, area in enumerate(sentence):
            rankings = {"attention": {"deletion_area": area, "deletion_least_area": 1.0, "tau": 0.5},
                        "random": {"deletion_area": random, "deletion_least_area": 0.9, "tau": 0.0},
                        "leave_one_out": {"deletion_area": 0.5, "deletion_least_area": 1.1, "tau": 1.0}}  # fmt: skip
            end = k == len(sentence) - 1
            out.append({"word": "<eos>" if end else "a", "kind": "function", "rankings": rankings, "item": item,
                        "interventions": {"uniform": {"tv": 0.3, "changed": False}}})  # fmt: skip
    return out


def write(path: Path, tables: list[tuple[dict, list[dict]]]) -> Path:
    path.write_text(json.dumps({"families": [{**t, "summary": {}, "words": w} for t, w in tables]}))
    return path


def run(*args) -> int:
    return run_main(lambda: compare_faithfulness.main([str(a) for a in args]))


def test_two_runs_table_by_table_with_the_record(tmp_path, capsys):
    a = write(tmp_path / "a.json", [(TITLE, words([[0.55, 0.6, 0.5], [0.6, 0.55], [0.5, 0.6, 0.55, 0.6]]))])
    b = write(tmp_path / "b.json", [(TITLE, words([[0.8, 0.85], [0.85, 0.8, 0.8], [0.8, 0.85]]))])
    assert run(a, b, "--json", tmp_path / "cmp.json") == 0
    out = capsys.readouterr().out
    assert "### Multi30k Bahdanau GRU: source tokens masked, 3 test sentences (all words)" in out
    assert "(3 inputs drawn whole, 1,000 draws)" in out
    row = next(line for line in out.splitlines() if line.startswith("| attention deletion_area "))
    assert row.endswith("| A more faithful |") and "| 0.561 [" in row  # A's mean over its 9 words: 5.05 / 9
    assert "| random deletion_area | 0.900 [0.900, 0.900] | 0.900 [0.900, 0.900] | +0.000 |" in out
    assert "| uniform tv |" in out and "leave_one_out tau" not in out  # against itself: always 1, left out
    record = json.loads((tmp_path / "cmp.json").read_text())
    (table,) = record["tables"]
    gap = next(r for r in table["rows"] if (r["a"], r["metric"]) == ("attention", "gap_closed"))
    assert table["inputs"] == 3 and gap["verdict"] == "A more faithful" and gap["b"] == "attention"
    assert gap["a_mean"] == pytest.approx((0.9 - 5.05 / 9) / 0.4)  # (random - attention) / (random - leave-one-out)


def test_one_run_sets_each_ranking_against_random(tmp_path, capsys):
    a = write(tmp_path / "a.json", [(TITLE, words([[0.5, 0.6], [0.55, 0.5], [0.6, 0.6]]))])
    assert run(a, "--kind", "function") == 0
    out = capsys.readouterr().out
    assert "A: each ranking   B: random, on the same words" in out and "(function words)" in out
    rows = [line.split(" | ")[0] for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    attention = ["| attention gap_closed", "| attention deletion_area", "| attention deletion_least_area",
                 "| attention tau"]  # fmt: skip
    assert rows == [*attention, "| leave_one_out deletion_area", "| leave_one_out deletion_least_area"]
    assert run(a, "--against", "leave_one_out") == 0
    assert "B: leave_one_out" in capsys.readouterr().out
    # an option the other mode reads is refused, not left unread
    for args, said in (([a, a, "--against", "gradient"], "--against sets one run's rankings against another"),
                       ([a, "--measures", "attention"], "--measures picks what two runs compare")):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            run(*args)
        assert exc.value.code == 2 and said in capsys.readouterr().err


def test_one_table_each_under_other_titles_is_compared_with_a_note(tmp_path, capsys):
    a = write(tmp_path / "a.json", [(TITLE, words([[0.5, 0.6], [0.55], [0.6]]))])
    other = {"name": "Multi30k runs/before.pt", "removal": TITLE["removal"]}
    b = write(tmp_path / "b.json", [(other, words([[0.7], [0.75, 0.7], [0.8]]))])
    assert run(a, b, "--measures", "attention") == 0
    printed = capsys.readouterr()
    assert "note: comparing A's 'Multi30k Bahdanau GRU: " in printed.err
    assert "| attention gap_closed |" in printed.out and "| random " not in printed.out


@pytest.mark.parametrize(
    "case",
    [
        "missing",
        "not_json",
        "no_families",
        "no_table",
        "other_inputs",
        "no_against",
        "no_items",
        "no_measure",
        "unknown_measure",
        "nothing_in_common",
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    good = write(tmp_path / "good.json", [(TITLE, words([[0.5, 0.6], [0.55], [0.6]]))])
    bare = [{k: v for k, v in w.items() if k != "interventions"} for w in words([[0.5, 0.6], [0.55], [0.6]])]
    args = {
        "missing": [tmp_path / "nowhere.json"],
        "not_json": [tmp_path / "bad.json"],
        "no_families": [tmp_path / "scores.json"],
        "no_table": [good, "--table", "Transformer"],
        "other_inputs": [good, write(tmp_path / "two.json", [(TITLE, words([[0.5], [0.6]]))])],
        "no_against": [good, "--against", "gradient"],
        "no_items": [tmp_path / "old.json"],
        "no_measure": [good, write(tmp_path / "bare.json", [(TITLE, bare)]), "--measures", "uniform"],
        "unknown_measure": [good, good, "--measures", "attention", "gradcam"],  # was dropped unsaid
        # every table skipped: nothing compared, and exit 0
        "nothing_in_common": [
            good,
            write(
                tmp_path / "other.json",
                [({**TITLE, "removal": f"{k} sentences"}, w) for k, w in ((4, bare), (5, bare))],
            ),
        ],
    }[case]
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "scores.json").write_text(json.dumps({"per_photo": []}))
    old = words([[0.5, 0.6]])
    for w in old:
        del w["item"]
    old[-1]["word"] = "dog"  # no items and no end word: the inputs cannot be told apart
    write(tmp_path / "old.json", [(TITLE, old)])
    assert run(*args) == 2
    err = capsys.readouterr().err.strip()
    if case == "nothing_in_common":  # the table's skip note, then the line that ends it
        assert err.splitlines()[0].startswith("note: ") and len(err.splitlines()) == 2
        err = err.splitlines()[-1]
    expected = {
        "missing": "nowhere.json: no such file",
        "not_json": "bad.json: not a JSON file",
        "no_families": "not a JSON of benchmarks/faithfulness.py",
        "no_table": "no table's title holds 'Transformer' (its tables: Multi30k Bahdanau GRU: source tokens",
        "other_inputs": "A measured 3 inputs, B 2: a paired comparison needs the same ones",
        "no_against": "no ranking 'gradient' (its rankings: attention, random, leave_one_out)",
        "no_items": "no items recorded, and the last word is not <eos>",
        "no_measure": "no measure both runs hold among uniform",
        "unknown_measure": "--measures gradcam: not a measure of",
        "nothing_in_common": "have no table in common (A: Multi30k Bahdanau GRU: source tokens masked, 3 test",
    }[case]
    assert len(err.splitlines()) == 1 and "error: " in err and expected in err and "Traceback" not in err, err
