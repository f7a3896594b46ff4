"""``benchmarks/compare_scores.py``: two runs' --scores files compared by a paired bootstrap. The files are made here
the way the commands make them (caption_scores.scores, references_cli.scores), in the process: each score as the
file holds it, the verdict, the JSON record, and bad input as one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import compare_scores  # noqa: E402
from _runs import run_main  # noqa: E402

REFS = {
    f"/photos/{i}.jpg": refs
    for i, refs in enumerate(
        [
            ["A dog runs on the grass.", "A brown dog is running.", "The dog runs outside."],
            ["Two men play football.", "Men playing soccer on a field.", "Two people kick a ball."],
            ["A girl in a red dress.", "A little girl smiles.", "A child in red."],
            ["A man rides a bike down a hill.", "A cyclist on a hill.", "A person riding a bicycle."],
        ]
    )
}
GOOD = [
    "a dog runs on the grass",
    "two men play soccer on a field",
    "a little girl in a red dress",
    "a man rides a bike",
]
POOR = ["a dog", "a man", "a girl", "a man"]


@pytest.fixture(autouse=True)
def no_java(monkeypatch, request):
    """Scored without Java (no PTB tokenizer, no METEOR: each JVM costs seconds), as on a machine without one; the
    slow test keeps it."""
    if "slow" not in request.keywords:
        monkeypatch.setattr("text_attn.core.metrics.java_available", lambda: False)


def caption_file(tmp_path: Path, name: str, captions: list[str]) -> Path:
    from captioning.commands import caption_scores

    result = caption_scores.scores(dict(zip(REFS, captions, strict=True)), REFS)
    path = tmp_path / name
    path.write_text(json.dumps(result))
    return path


def translation_file(tmp_path: Path, name: str, translations: list[str]) -> Path:
    from text_attn.translation.references_cli import scores

    refs = ["A dog runs on the grass.", "Two men play football.", "A girl in a red dress.", "A man rides a bike."]
    result = scores([(i, f"Quelle {i}", t, r) for i, (t, r) in enumerate(zip(translations, refs, strict=True))])
    path = tmp_path / name
    path.write_text(json.dumps(result))
    return path


def compare(*args: str) -> int:
    sys.argv = ["compare_scores.py", *args]
    return run_main(lambda: compare_scores.main(list(args)))


def rows(out: str) -> dict[str, list[str]]:
    return {cells[1]: cells[2:-1] for line in out.splitlines() if line.startswith("| ") and
            (cells := [c.strip() for c in line.split("|")])[1] not in ("score", "---")}  # fmt: skip


def test_captions_compared_score_as_their_files_and_write_the_record(tmp_path, capsys):
    a, b = caption_file(tmp_path, "a.json", GOOD), caption_file(tmp_path, "b.json", POOR)
    out_json = tmp_path / "cmp.json"
    assert compare(str(a), str(b), "--names", "good", "poor", "--resamples", "200", "--json", str(out_json)) == 0
    out, err = capsys.readouterr()
    table = rows(out)
    assert list(table) == ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "CIDEr-D", "ROUGE-L"]
    file_a, file_b = json.loads(a.read_text())["scores"], json.loads(b.read_text())["scores"]
    for name, cells in table.items():
        a, a_low, a_high = (float(x) for x in cells[0].replace("[", "").replace("]", "").replace(",", "").split())
        assert a == pytest.approx(file_a[name], abs=0.005), name  # the file's own score, recomputed
        assert a_low <= a <= a_high, name  # its own interval holds it (4 photos: wide)
        assert float(cells[1].split()[0]) == pytest.approx(file_b[name], abs=0.005), name
    assert "A: good   B: poor   (4 photos" in out and "scored again here differs" not in err
    record = json.loads(out_json.read_text())
    assert record["items"] == 4 and record["kind"] == "caption" and len(record["scores"]) == 6
    bleu1 = next(s for s in record["scores"] if s["name"] == "BLEU-1")
    low, high = bleu1["interval_95"]
    assert bleu1["a_minus_b"] > 0 and low <= bleu1["a_minus_b"] <= high
    assert bleu1["a_interval_95"][0] <= bleu1["a"] <= bleu1["a_interval_95"][1]


def test_a_run_against_itself_is_within_noise_at_zero(tmp_path, capsys):
    a = caption_file(tmp_path, "a.json", GOOD)
    assert compare(str(a), str(a), "--resamples", "50") == 0
    for name, cells in rows(capsys.readouterr().out).items():
        assert cells[2:] == ["+0.00", "[+0.00, +0.00]", "0.0%", "within noise"], name
        assert cells[0] == cells[1], name  # the same draws: the same interval


def test_translations_compared_with_the_signatures_tokenizer(tmp_path, capsys):
    a = translation_file(tmp_path, "a.json", ["A dog runs on the grass.", "Two men play football.",
                                              "A girl in a red dress.", "A man rides a bike."])  # fmt: skip
    b = translation_file(tmp_path, "b.json", ["A dog.", "Men play.", "A girl in red.", "A man rides."])
    assert compare(str(a), str(b), "--resamples", "100") == 0
    table = rows(capsys.readouterr().out)
    assert list(table) == ["sacreBLEU", "chrF"]
    assert table["sacreBLEU"][0] == "100.00 [100.00, 100.00]" and table["sacreBLEU"][-1] == "A ahead"
    assert float(table["chrF"][1].split()[0]) == pytest.approx(json.loads(b.read_text())["scores"]["chrF"], abs=0.005)


def test_a_file_whose_scores_are_not_its_texts_is_said(tmp_path, capsys):
    a = caption_file(tmp_path, "a.json", GOOD)
    data = json.loads(a.read_text())
    data["scores"]["BLEU-4"] += 5  # edited by hand, or scored another way
    a.write_text(json.dumps(data))
    assert compare(str(a), str(a), "--resamples", "10") == 0
    assert "scored again here differs: BLEU-4" in capsys.readouterr().err


@pytest.mark.parametrize("case", ["other photos", "other kind", "not json", "missing", "other references",
                                  "no java"])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, case):
    a = caption_file(tmp_path, "a.json", GOOD)
    b, want = {
        "other photos": (tmp_path / "b.json", "score different photos: 1 only in the first"),
        "other kind": (translation_file(tmp_path, "t.json", GOOD), "holds caption scores but"),
        "not json": (tmp_path / "b.json", "not a JSON file"),
        "missing": (tmp_path / "gone.json", "no such file"),
        "other references": (tmp_path / "b.json", "against different references"),
        "no java": (tmp_path / "b.json", "needs Java"),
    }[case]
    data = json.loads(a.read_text())
    if case == "other photos":
        data["per_photo"][0]["image"] = "/photos/elsewhere.jpg"
    elif case == "other references":
        data["per_photo"][0]["references"] = ["something else"]
    elif case == "no java":  # a file scored where Java was, compared where it is not
        data["how"] = "coco-caption, its PTB tokenizer"
    if case == "not json":
        b.write_text("{not json")
    elif b.name == "b.json":
        b.write_text(json.dumps(data))
    assert compare(str(a if case != "no java" else b), str(b), "--resamples", "10") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("compare_scores.py: error: ") and want in err, err


@pytest.mark.slow
def test_captions_scored_with_javas_ptb_tokenizer_are_compared_with_it(tmp_path, capsys):
    from text_attn.core.metrics import java_available

    if not java_available():
        pytest.skip("needs Java (coco-caption's PTB tokenizer)")
    a, b = caption_file(tmp_path, "a.json", GOOD), caption_file(tmp_path, "b.json", POOR)
    assert "PTB tokenizer" in json.loads(a.read_text())["how"]
    assert compare(str(a), str(b), "--resamples", "50") == 0
    out, err = capsys.readouterr()
    file_a = json.loads(a.read_text())["scores"]
    for name, cells in rows(out).items():
        assert float(cells[0].split()[0]) == pytest.approx(file_a[name], abs=0.005), name
    assert "scored again here differs" not in err
