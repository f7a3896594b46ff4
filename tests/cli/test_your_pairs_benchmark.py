"""benchmarks/your_pairs.py: the sentence pairs read off a Ding dictionary file (which entries give a pair, what is
dropped), and the whole benchmark on a small file of that format: the bundled Transformer scored, taught the pairs
through the real text-train (a subprocess: slow), scored again, the table, the examples, the JSON, and a second run
that scores the kept fit without fitting again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from your_pairs import ding_sentences, main  # noqa: E402 - the benchmark's folder on the path first

DING = """\
# Version :: 1.9 (a comment)
Hund {m} | Hunde {pl} :: dog | dogs
Ich bin sprachlos. :: I don't know what to say.
Wie spät ist es? | Es ist spät. :: What time is it? | It is late.
Geschieht ihm recht! [ugs.] :: Serves him right! /SHR/
Das ist Ansichtssache.; Das kommt darauf an. :: That's a matter of opinion.; It depends.
Er hat etw. gesagt. :: He said sth.
Komm her, du Schlingel/Schlawiner! :: Come here, you monkey!
Eins. :: One.
Ich bin sprachlos. :: I am speechless.
Zwei Sätze. | Drei. | Vier. :: Two sentences. | Three.
kleingeschrieben ist er. :: lower case.
Sie (die Frau) lacht. :: She (the woman) laughs.
"""


def test_a_ding_file_gives_its_sentence_entries_each_german_sentence_once(tmp_path):
    path = tmp_path / "de-en"
    path.write_text(DING, encoding="utf-8")
    assert ding_sentences(path) == [
        ("Ich bin sprachlos.", "I don't know what to say."),  # its second entry: the same German, left out
        ("Wie spät ist es?", "What time is it?"),  # " | ": a pair each
        ("Es ist spät.", "It is late."),
        ("Geschieht ihm recht!", "Serves him right!"),  # [notes] and /abbreviations/ dropped
        ("Das ist Ansichtssache.", "That's a matter of opinion."),  # the first of ";" variants
        ("Sie lacht.", "She laughs."),  # (notes) dropped
    ]  # a noun, a placeholder (etw.), "/" alternatives, one word, unpaired entries, lower case: none


def _ding(path: Path, n: int) -> Path:
    """A Ding-format file of ``n`` short German sentences of the kind the bundled model reads, with translations."""
    nouns = [("Hund", "dog"), ("Mann", "man"), ("Junge", "boy"), ("Vogel", "bird"), ("Fahrer", "driver")]
    verbs = [("rennt", "runs"), ("schläft", "sleeps"), ("springt", "jumps"), ("lacht", "laughs"), ("wartet", "waits")]
    places = [("", ""), (" im Park", " in the park"), (" am Strand", " on the beach"), (" im Schnee", " in the snow")]
    lines, k = [], 0
    for de_n, en_n in nouns:
        for de_v, en_v in verbs:
            for de_p, en_p in places:
                if k < n:
                    lines.append(f"Der {de_n} {de_v}{de_p}. :: The {en_n} {en_v}{en_p}.")
                    k += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_bundled_model_taught_small_pairs_scored_before_and_after(tmp_path, capsys):
    ding = _ding(tmp_path / "de-en", 100)
    out = tmp_path / "bench"
    argv = ["--ding", str(ding), "--out", str(out), "--test-size", "20", "--val-size", "10", "--epochs", "1",
            "--examples", "2", "--json", str(tmp_path / "r.json")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Ding's sentences: 100 pairs; 70 to train on, 10 to validate, 20 held out to score" in printed
    assert "| model | Ding test sacreBLEU | Ding test chrF | training |" in printed
    result = json.loads((tmp_path / "r.json").read_text())
    start, taught = result["rows"].values()
    assert len(start["ding"]["translations"]) == 2 and len(start["probes"]) == 5 and start["train_minutes"] == 0
    assert taught["train_minutes"] > 0 and (out / "fit" / "model.pt").is_file()
    assert (out / "pairs.tsv").read_text(encoding="utf-8").count("\n") == 80  # the TSV a user gives (val included)
    held = {p["source"] for p in result["test"]}
    assert not held & {line.split("\t")[0] for line in (out / "pairs.tsv").read_text(encoding="utf-8").splitlines()}
    # again with the same --out: the kept fit is scored, not fitted again
    fitted = (out / "fit" / "model.pt").stat().st_mtime_ns
    assert main(argv[:-2]) == 0 and (out / "fit" / "model.pt").stat().st_mtime_ns == fitted
    assert "$ text-train fit" not in capsys.readouterr().out


def _multi30k(root: Path) -> Path:
    """A Multi30k folder of the benchmark's two splits: 30 training pairs (gzipped, as the corpus comes) and 4 test."""
    import gzip

    root.mkdir()
    train = [(f"Ein Mann mit {k} Hunden.", f"A man with {k} dogs.") for k in range(30)]
    test = [("Ein Hund rennt.", "A dog runs."), ("Zwei Männer.", "Two men."), ("Ein Kind lacht.", "A child laughs."),
            ("Eine Frau wartet.", "A woman waits.")]  # fmt: skip
    for split, pairs in (("train", train), ("test_2016_flickr", test)):
        for k, lang in enumerate(("de", "en")):
            with gzip.open(root / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(pair[k] + "\n" for pair in pairs))
    return root


@pytest.mark.slow
def test_mix_adds_a_row_fitted_on_the_pairs_with_multi30ks_among_them(tmp_path, capsys):
    ding, root = _ding(tmp_path / "de-en", 60), _multi30k(tmp_path / "m30k")
    out = tmp_path / "bench"
    argv = ["--ding", str(ding), "--multi30k-root", str(root), "--out", str(out), "--test-size", "10", "--val-size",
            "10", "--epochs", "1", "--mix", "12", "--blend", "0.5", "--json", str(tmp_path / "r.json")]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Multi30k test_2016_flickr: 4; 12 of Multi30k's training pairs mixed in for the rows that say so" in printed
    result = json.loads((tmp_path / "r.json").read_text())
    assert list(result["rows"]) == ["the bundled Transformer, as it is", "taught the pairs (your_pairs.yaml)",
                                    "taught, blended 0.5 with the bundled",
                                    "taught the pairs with 12 of Multi30k's",
                                    "taught with 12 of Multi30k's, blended 0.5 with the bundled"]  # fmt: skip
    blended = result["rows"]["taught, blended 0.5 with the bundled"]  # an export of the taught fit: its minutes
    assert blended["train_minutes"] == result["rows"]["taught the pairs (your_pairs.yaml)"]["train_minutes"]
    assert (out / "blend_0.5.pt").is_file() and result["blend"] == [0.5]
    assert result["mix"] == 12 and all(len(r["multi30k"]["translations"]) == 4 for r in result["rows"].values())
    plain = (out / "pairs.tsv").read_text(encoding="utf-8").splitlines()
    mixed = (out / "pairs_mixed.tsv").read_text(encoding="utf-8").splitlines()
    assert mixed[: len(plain)] == plain and len(mixed) == len(plain) + 12  # the same pairs, 12 of Multi30k's after
    assert len(set(mixed[len(plain) :])) == 12 and all(line.startswith("Ein Mann mit ") for line in mixed[len(plain) :])
    mix_minutes = result["rows"]["taught the pairs with 12 of Multi30k's"]["train_minutes"]
    assert (out / "fit_mix12" / "model.pt").is_file() and mix_minutes > 0
    # the mixed fit blended back as well: an export of it, its minutes
    assert result["rows"]["taught with 12 of Multi30k's, blended 0.5 with the bundled"]["train_minutes"] == mix_minutes
    assert (out / "blend_mix12_0.5.pt").is_file()


@pytest.mark.parametrize(
    ("extra", "said"),
    [(["--mix", "5"], "--mix 5: a number of Multi30k's training pairs, with --multi30k-root to read them from"),
     (["--mix", "-1", "--multi30k-root", "."], "--mix -1: a number of Multi30k's training pairs"),
     (["--blend", "0.5", "1"], "--blend 0.5 1: each the taught model's share, between 0 and 1")],
)  # fmt: skip
def test_a_mix_or_blend_out_of_range_is_one_line(extra, said, tmp_path, capsys):
    ding = _ding(tmp_path / "de-en", 10)
    with pytest.raises(SystemExit) as exc:
        main(["--ding", str(ding), *extra])
    assert exc.value.code == 2 and said in capsys.readouterr().err.splitlines()[-1]


def test_a_missing_ding_file_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--ding", str(tmp_path / "none")])
    assert exc.value.code == 2 and "apt-get install trans-de-en" in capsys.readouterr().err.splitlines()[-1]
