"""benchmarks/distil_data.py: the distillation corpus is the train pairs, then the same sources with the teacher's
translations (exactly `translate`'s), with a line of links per pair, val and test as they were; a second run and a
run cut off mid-translation end with the same files."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest
from helpers.multi30k import DE, EN, write_corpus
from helpers.tiny_translator import tiny_subword_model_file

from text_attn.core.data_note import read_data_note, write_data_note
from text_attn.core.file_digest import sha256_of
from text_attn.core.safe_files import OutputRefused
from text_attn.translation.data import TranslationDataModule
from text_attn.translation.pairs import TaskError
from text_attn.translation.tokens import TextCodec
from text_attn.translation.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from distil_data import main as distil_data  # noqa: E402 - the benchmarks' folder on the path first


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


@pytest.mark.long  # two runs of the translate command (~4 s)
def test_the_corpus_holds_both_targets_and_their_links(tmp_path, capsys):
    data = write_corpus(tmp_path / "m30k", {"train": 6, "val": 2, "test_2016_flickr": 2})
    model = tiny_subword_model_file(tmp_path)
    out = tmp_path / "out"
    assert distil_data(["--data-root", str(data), "--out", str(out), "--teacher", f"--model {model}"]) == 0
    taught = [t.text for t in Translator.load(model).translate(DE)]  # at the model's own decoding, as translate
    assert (out / "teacher.en").read_text().splitlines() == taught
    assert _lines(out / "train.de.gz") == DE + DE
    assert _lines(out / "train.en.gz") == EN + taught
    links = (out / "train-links.txt").read_text().splitlines()
    assert len(links) == 12 and all(link.split("-")[0].isdigit() for line in links for link in line.split())
    for name in ("val.de.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        assert (out / name).read_bytes() == (data / name).read_bytes()
    # a student's model file says whose translations it learned, the teacher's file named without its folders
    assert read_data_note(out) == (f"train: the pairs, then the same sources again with a teacher's translations: "
                                   f"translate --model {model.name}, model files {model.name} "
                                   f"sha256:{sha256_of(model)[:12]} (sequence-level distillation); val and test as "
                                   "they were")  # fmt: skip
    same = sum(a == b for a, b in zip(taught, EN, strict=True))
    assert f"teacher: {same:,} of 6 translations" in capsys.readouterr().out

    # cut off after two translations: the next run translates the rest (translate --resume) and ends as the first
    (out / "teacher.en").write_text("".join(t + "\n" for t in taught[:2]))
    (out / "train-links.txt").unlink()
    assert distil_data(["--data-root", str(data), "--out", str(out), "--teacher", f"--model {model}"]) == 0
    assert (out / "teacher.en").read_text().splitlines() == taught
    assert len((out / "train-links.txt").read_text().splitlines()) == 12
    # another teacher over a whole teacher.en: refused (it was kept, and the data note named the other teacher); the
    # links of pairs that changed since are made again (same line count: kept, each line off against its pair)
    other = tiny_subword_model_file(tmp_path / "other", info={"note": "another teacher"})  # another sha256
    with pytest.raises(SystemExit, match="translate failed"):
        distil_data(["--data-root", str(data), "--out", str(out), "--teacher", f"--model {other}"])
    (out / "train-links.txt").write_text("0-0\n" * 12)  # links of other pairs, as many
    assert distil_data(["--data-root", str(data), "--out", str(out), "--teacher", f"--model {model}"]) == 0
    assert (out / "train-links.txt").read_text() == "0-0\n" * 12  # the digest still says these pairs: kept
    (out / "train-links.pairs-sha256").write_text("another\n")
    assert distil_data(["--data-root", str(data), "--out", str(out), "--teacher", f"--model {model}"]) == 0
    assert (out / "train-links.txt").read_text() != "0-0\n" * 12  # made again


def test_refusals(tmp_path):
    with pytest.raises(SystemExit, match="distil_data: .*missing: no such folder"):
        distil_data(["--data-root", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    data = write_corpus(tmp_path / "m30k", {"train": 3})
    with pytest.raises(TaskError, match="found neither val.de nor val.de.gz"):  # named before any translating
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "out")])
    data = write_corpus(tmp_path / "m30k", {"train": 3, "val": 1, "test_2016_flickr": 1})
    (data / "train.en.gz").write_bytes(gzip.compress(b"one\n"))
    with pytest.raises(SystemExit, match=r"train\.de has 3 lines, train\.en 1"):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "out")])
    data = write_corpus(tmp_path / "m30k6")
    (tmp_path / "out").mkdir(exist_ok=True)  # the refused run above made it
    (tmp_path / "out" / "teacher.en").write_text("a\n" * 6)  # a whole run's, then a smaller one asked
    with pytest.raises(SystemExit, match="holds 6 translations for 2 sources: another run's"):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "out"), "--limit", "2"])
    with pytest.raises(SystemExit):
        distil_data(["--data-root", str(data), "--out", str(tmp_path / "out"), "--limit", "0"])
    # OUT the corpus itself: its files would be written over; refused before anything is written
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    with pytest.raises(OutputRefused, match=r"train\.de\.gz is also an input"):
        distil_data(["--data-root", str(data), "--out", str(data)])
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before


def test_a_model_trained_on_the_folder_records_its_note(tmp_path):
    """The note (text_attn.core.data_note) is a fact of its own beside Multi30k's in a model file; a word model's
    file from before 2026-12-02 names its target language only in its training data, read past what follows the
    pair there (the bundled Transformer's ": 29,000 training pairs, ...")."""
    write_data_note(tmp_path, "train: a teacher's translations")
    facts = TranslationDataModule(task="pair", root=str(tmp_path), src_lang="de", tgt_lang="fr").facts
    assert facts["training_data"] == "Multi30k task 1 (Elliott et al. 2016), German -> French"
    assert facts["data_note"] == "train: a teacher's translations"
    assert TextCodec.from_metadata({"info": facts}).target_lang == "fr"
    bundled = {"training_data": "Multi30k, German -> English: 29,000 training pairs, and ... (distillation)"}
    assert TextCodec.from_metadata({"info": bundled}).target_lang == "en"


def test_a_model_trained_on_part_of_multi30k_says_how_many_pairs(tmp_path):
    """A folder laid out as Multi30k (or data.train_size) of fewer training pairs than the corpus's 29,000: the model
    file said "Multi30k task 1" alone, as if trained on the whole."""
    from helpers.multi30k import write_corpus

    dm = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "c")), src_lang="de", tgt_lang="en")
    assert "trained_on" not in dm.facts  # not read yet: nothing to say
    dm.setup("fit")
    assert dm.facts["trained_on"] == "6 of its 29,000 training pairs"
    assert dm.facts["training_data"] == "Multi30k task 1 (Elliott et al. 2016), German -> English"
    more = TranslationDataModule(task="pair", root=str(write_corpus(tmp_path / "d", {"train": 29_001, "val": 2,
                                                                                     "test_2016_flickr": 2})),
                                 src_lang="de", tgt_lang="en", train_size=0)  # fmt: skip
    more.setup("fit")  # a distilled folder's train split: the originals and a teacher's (its data note says so)
    assert "trained_on" not in more.facts
