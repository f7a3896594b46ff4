"""benchmarks/your_photos.py: its table (with and without the rest of Flickr8k's test photos), its option refusals, and
(slow) the shapes scenario run for real on a short fit: the start, the shipped config's fit and its blend back towards
the start (exported by caption-export, validated, scored), every model scored on a second set of photos too, the
models that share an encoder captioning from one computation of its features."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.scene_corpus import write_flickr8k

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import your_photos  # noqa: E402 - the benchmark's folder on the path first


def _row(**more) -> dict:
    return {"best_val_CIDEr": 63.2, "Bleu_4": 30.91, "CIDEr": 64.07, "vocabulary": 2540, "new_words": 0,
            "captions_with_new_words": 0, "captions": 188, "train_minutes": 0.0, **more}  # fmt: skip


def test_the_table_has_the_rest_columns_only_where_they_were_scored():
    result = {"train_photos": 155, "val_photos": 40, "test_photos": 188, "rows": {"the start": _row()}}
    lines = your_photos.table("dogs", result).splitlines()
    assert lines[0] == "**dogs**: 155 photos to train on, 40 to validate, 188 held out to score"
    assert lines[2].count("|") == 8 and "Flickr8k" not in lines[2]
    assert lines[4] == "| the start | 63.20 | 30.91 | 64.07 | 2,540 (0) | 0 of 188 | none |"
    rest = _row(rest_Bleu_4=22.5, rest_CIDEr=55.123, rest_photos=812, train_minutes=1.94)
    lines = your_photos.table("dogs", {**result, "rows": {"a blend": rest}}).splitlines()
    assert "| Flickr8k's other 812 test photos: BLEU-4 | CIDEr-D |" in lines[2]
    assert lines[4] == "| a blend | 63.20 | 30.91 | 64.07 | 22.50 | 55.12 | 2,540 (0) | 0 of 188 | 1.9 min |"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--blend", "1"], "--blend 1: each weight between 0 and 1"),
        (["--blend", "0.5", "--rows", "keep"], "--blend blends the extend row's fit: keep extend in --rows"),
        (["--rows", "extend,nope"], "unknown row 'nope'"),
        (["--mix", "500"], "--mix 500: numbers of Flickr8k's train photos, with --flickr8k-root to read them from"),
        (["--mix", "500", "0", "--flickr8k-root", "f8k"], "--mix 500 0: numbers of Flickr8k's train photos"),
        (["--rows", "extend,mix"], "--rows mix: the mix rows need --mix N"),
        (["--rows", "extend,mix_scst"], "--rows mix_scst: the mix rows need --mix N"),
    ],
)
def test_bad_options_are_one_line(argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        your_photos.main(["--scenarios", "shapes", "--out", str(tmp_path), *argv])
    assert exc.value.code == 2 and says in capsys.readouterr().err


def test_named_mix_rows_run_alone_and_a_seed_keeps_its_own_folder(tmp_path, monkeypatch, capsys):
    import captioning.training.readers as readers

    runs = []
    monkeypatch.setattr(readers, "read_flickr8k", lambda root: {"test": []})
    monkeypatch.setattr(your_photos, "_shapes", lambda folder, n, seed: [])
    monkeypatch.setattr(your_photos, "run_scenario", lambda *a: runs.append(a) or {"rows": {}})
    monkeypatch.setattr(your_photos, "table", lambda name, result: "")
    out = tmp_path / "bench"
    given = ["--scenarios", "shapes", "--out", str(out), "--flickr8k-root", str(tmp_path), "--mix", "250"]
    assert your_photos.main([*given, "--rows", "extend,mix", "--seed", "1"]) == 0
    assert runs[-1][6] == {"extend", "mix"} and runs[-1][-1] == 1  # no self-critical stage asked for, none run
    assert (out / "seed.txt").read_text() == "1\n"
    assert your_photos.main([*given, "--rows", "extend", "--seed", "1"]) == 0
    assert runs[-1][6] == {"extend", "mix", "mix_scst"}  # --mix alone: both mix rows
    for other in (["--seed", "2"], []):  # another seed, or the configs' (0), in the folder of seed 1's fits
        with pytest.raises(SystemExit) as exc:
            your_photos.main([*given, *other])
        assert exc.value.code == 2
    assert "holds fits of seed 1; give another --out" in capsys.readouterr().err and len(runs) == 2


@pytest.mark.slow
def test_the_shapes_scenario_blends_the_fit_back_and_scores_a_second_set(tmp_path, monkeypatch):
    from captioning.model.captioner import Captioner

    monkeypatch.chdir(tmp_path)  # caption-train's config.yaml lands in the working folder
    train = your_photos._shapes(tmp_path / "photos", 24 + 6, seed=21)
    test = your_photos._shapes(tmp_path / "photos", 8, seed=22)
    rest, features = your_photos._shapes(tmp_path / "photos", 5, seed=23), {}
    out = tmp_path / "shapes"
    flickr8k = write_flickr8k(tmp_path / "flickr8k", n=20)  # 12 train photos, 4 of them mixed in
    result = your_photos.run_scenario("shapes", train, 6, test, out, 1, {"extend", "mix"}, (0.25,), (rest, features),
                                      (flickr8k, (4,)))  # fmt: skip
    rows = result["rows"]
    start, fit, blend, mixed, mixed_blend = rows.values()
    assert list(rows)[2:] == ["from it, blended 0.25 with the start (--weights 0.25 0.75)",
                              "from it, new words added, 4 of Flickr8k's train photos mixed in (data.mix_size)",
                              "mixed, blended 0.25 with the start (--weights 0.25 0.75)"]  # fmt: skip
    assert Captioner.load(out / "mix4" / "model.pt").info["mixed_in"] == "4 of Flickr8k's train photos"
    mixed_info = Captioner.load(out / "blend_mix4_0.25.pt").info  # the mixed fit's facts, the first file's
    assert mixed_info["mixed_in"] == "4 of Flickr8k's train photos"
    assert mixed_info["averaged"] == "the mean of the weights of 2 files: model.pt, start.pt (weighted 0.25, 0.75)"
    assert mixed_blend["train_minutes"] == mixed["train_minutes"] > 0
    assert blend["train_minutes"] == fit["train_minutes"] > 0 and start["train_minutes"] == 0
    assert blend["vocabulary"] == fit["vocabulary"] == start["vocabulary"] + fit["new_words"]
    assert all(r["best_val_CIDEr"] > float("-inf") for r in rows.values())  # each validated on the 6 val photos
    assert all(r["rest_photos"] == 5 and r["captions"] == 8 for r in rows.values())
    # the encoder is frozen in the fit, but the start recompresses a photo at quality 90 as its Flickr8k copies were,
    # and the fit on PNG files does not (its blend keeps the fit's): two computations of the rest's features, not three
    assert len(features) == 2 and mixed["rest_photos"] == 5
    made = Captioner.load(out / "blend_0.25.pt")
    assert made.info["averaged"].endswith("model.pt, start.pt (weighted 0.25, 0.75)")
    again = your_photos.run_scenario("shapes", train, 6, test, out, 1, {"extend"}, (0.25,), (rest, {}), None)
    kept = again["rows"][list(rows)[1]]["train_minutes"]  # kept: not fitted again (its seconds kept to 0.1)
    assert all(again["rows"][row]["CIDEr"] == rows[row]["CIDEr"] for row in again["rows"])  # scores.json kept
    assert (out / "extend" / "scores.json").is_file()
    assert kept == pytest.approx(fit["train_minutes"], abs=0.1 / 60)


def test_each_mix_size_is_a_row_and_the_first_is_blended_and_trained_on_further():
    rows = your_photos._rows((Path("/data/f8k"), (500, 2000)))
    assert [r[1] for r in rows[:5]] == ["start", "extend", "mix500", "mix2000", "keep"]
    assert [r[1] for r in rows if r[5]] == ["extend", "mix500"]  # --blend blends these fits
    assert rows[3][0] == "mix" and rows[3][2] == ("from it, new words added, 2,000 of Flickr8k's train photos mixed "
                                                  "in (data.mix_size)")  # fmt: skip
    assert rows[3][4] == ["--data.mix_root", "/data/f8k", "--data.mix_size", "2000"]
    second = [r for r in rows if r[0] == "mix_scst"]  # the second stage, from the first N's fit, mixed too
    assert [(r[1], r[2]) for r in second] == [("mix500_scst", "mixed (500), then your_photos_scst.yaml from its "
                                               "model, mixed too")]  # fmt: skip
    assert second[0][4] == ["--model.init_from", "@mix500", "--model.init_member", "null", "--data.mix_root",
                            "/data/f8k", "--data.mix_size", "500"]  # fmt: skip
    assert [r[1] for r in your_photos._rows(None)] == [k for k, *_ in your_photos.ROWS if not k.startswith("mix")]


def test_scores_are_kept_for_the_same_model_file_and_photos(tmp_path):
    import os

    model, run, calls = tmp_path / "model.pt", tmp_path / "run", []
    model.write_bytes(b"weights")

    def score():
        calls.append(1)
        return {"CIDEr": 50.0 + len(calls)}

    test, rest = [("a.jpg", ["a dog"])], ([("b.jpg", ["a cat"])], {})
    assert your_photos.kept_scores(run, model, test, rest, score) == {"CIDEr": 51.0}
    assert your_photos.kept_scores(run, model, test, rest, score) == {"CIDEr": 51.0} and len(calls) == 1
    assert your_photos.kept_scores(run, model, [("c.jpg", ["a dog"])], rest, score) == {"CIDEr": 52.0}  # other photos
    os.utime(model, ns=(1, 1))  # a model written again
    assert your_photos.kept_scores(run, model, [("c.jpg", ["a dog"])], rest, score) == {"CIDEr": 53.0}


def test_the_dog_photos_and_the_rest_of_the_test_split_part_it():
    from types import SimpleNamespace as Item

    def item(name: str, *captions: str):
        return Item(path=name, captions=[c.split() for c in captions])

    test = [item("a.jpg", "a dog runs", "two dogs", "a puppy", "dog", "the dog"),
            item("b.jpg", "a dog runs", "a man", "dog", "dog", "dog"), item("c.jpg", "a cat")]  # fmt: skip
    splits = {"val": [item("v.jpg", *["a dog"] * 5)], "test": test}
    dogs = your_photos._dog_photos(splits)
    assert dogs == {"val": [("v.jpg", ["a dog"] * 5)], "test": [("a.jpg", ["a dog runs", "two dogs", "a puppy", "dog",
                                                                          "the dog"])]}  # fmt: skip
    assert [p for p, _ in your_photos._rest_of_test(splits)] == ["b.jpg", "c.jpg"]  # one caption without a dog: rest


def test_a_fit_that_wrote_its_start_back_is_scored_on_val_as_the_start(tmp_path):
    (tmp_path / "fit.log").write_text(
        "caption-train: val_CIDEr: 71.49 from model.init_from runs/extend/model.pt before training, 66.47 at the best "
        "checkpoint (as 0-100; logged as a fraction, 0-1): training did not beat the start on these val photos (the "
        "start may caption them as well)\n"
        "wrote model file: runs/xe_scst/model.pt (model.init_from's weights: they scored better on val than the best "
        "checkpoint, best.ckpt, which holds the trained ones)\n"
    )
    assert your_photos.written_back(tmp_path) == 71.49
    (tmp_path / "fit.log").write_text(
        "caption-train: val_CIDEr: 64.96 from model.init_from flickr8k (decoder 1) before training, 65.79 at the best "
        "checkpoint (as 0-100; logged as a fraction, 0-1)\n"
        "wrote model file: runs/scst/model.pt (best checkpoint best.ckpt)\n"
    )
    assert your_photos.written_back(tmp_path) is None
    row = _row(best_val_CIDEr=71.49, start_written_back=True)
    lines = your_photos.table("dogs", {"train_photos": 1, "val_photos": 1, "test_photos": 1, "rows": {"x": row}})
    assert "| x | 71.49 (the start's: written back) | 30.91 |" in lines
