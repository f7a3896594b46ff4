"""The benchmark scripts' command-line input, checked when the options are read: a bad value is one line naming the
option and exit code 2, before any photo is written, model trained or baseline timed; never a traceback, never a
value taken that fails (or silently does nothing) later. Each case below was, before: a traceback, a late failure, a
message naming a config key (data.root) or none at all, or an exit 0."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from helpers.bench_driver import run_cases

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))  # _runs, as running a script from benchmarks/ finds it

from _runs import batch_settings, check_corpus, int_list, text_model  # noqa: E402 - the benchmarks' folder on the path first

from text_attn.core.errors import at_least  # noqa: E402


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    """Every case's (exit code, stdout, stderr) by its name."""
    from PIL import Image

    tmp = tmp_path_factory.mktemp("bench")
    gone, corpus, photos = tmp / "gone", tmp / "corpus", tmp / "photos"
    corpus.mkdir()
    for split in ("val", "test_2016_flickr"):
        (corpus / f"{split}.de").write_text("ein hund läuft .\n")
        (corpus / f"{split}.en").write_text("a dog runs .\n")
    photos.mkdir()
    Image.new("RGB", (8, 8)).save(photos / "a.jpg", quality=85)
    (tmp / "a_file").write_text("x\n")
    cases = {
        # 1: tracebacks (torch.set_num_threads, torch.device, int("abc") after the photos, IndexError, mkdir)
        "threads": ("alignment_error.py", ["--threads", "0", "--multi30k-root", str(gone)]),
        "device": ("transformer_speed.py", ["--device", "bogus"]),
        "workers": ("pipeline.py", ["--workers", "abc", "--photos", "2"]),
        "scale photos": ("caption_scale.py", ["--photos", "0"]),
        "scale model": ("caption_scale.py", ["--photos", "2", "--model", f"{gone}.pt"]),
        "stream out": ("streaming.py", ["--data", str(gone), "--out", str(tmp / "a_file")]),
        # 2: taken and failed later, or never checked
        "iterations": ("alignment_error.py", ["--iterations", "0", "--multi30k-root", str(gone)]),
        "tree": ("caption_scale.py", ["--photos", "2", "--tree", str(gone)]),
        # 3: exit 2 and no line at all
        "no photos": ("pipeline.py", ["--photos", "0", "--workers", "1"]),
        # 4: found after the work
        "tuning json": ("tune_translation_decoding.py", ["--data-root", str(gone), "--json", str(gone / "t.json")]),
        "jpeg write": ("jpeg_step.py", [str(photos), "--write", f"{gone}.pt"]),
        "models": ("casing.py", ["--data-root", str(corpus), "--split", "val", "--models", f"transformer,{gone}.pt"]),
        "splits": ("translate_ensemble.py", ["--data-root", str(corpus), "--splits", "val,bogus", "--models",
                                             "bahdanau"]),
        # 5: messages that named no option (or a config key)
        "repeats": ("caption_scale.py", ["--photos", "2", "--repeats", "0"]),
        "limit": ("alignment_error.py", ["--limit", "0", "--multi30k-root", str(gone)]),
        "data root": ("wrapped_text.py", ["--data-root", str(gone)]),
        "gold": ("alignment_error.py", ["--gold", str(gone / "g.txt"), "--multi30k-root", str(gone)]),
        # 6: counts of plain int; options --help did not describe
        "gpu photos": ("gpu.py", ["--photos", "0"]),
        "test size": ("your_pairs.py", ["--test-size", "0", "--ding", str(gone)]),
        "help": ("transformer_speed.py", ["HELP"]),
        "batching": ("serve.py", ["--batching", "4:0.01,16"]),
    }  # fmt: skip
    return run_cases(cases, cwd=tmp)


def _refused(runs, name: str) -> str:
    """The one line a case was refused with: exit code 2, no traceback."""
    code, _, err = runs[name]
    assert code == 2 and "Traceback" not in err, err[-2000:]
    return err.strip().splitlines()[-1]


@pytest.mark.long
@pytest.mark.parametrize(
    "name, said",
    [
        ("threads", "argument --threads: must be at least 1, got 0"),
        ("device", "argument --device: 'bogus': not a torch device"),
        ("workers", "argument --workers: expected comma-separated integers, got 'abc'"),
        ("scale photos", "argument --photos: must be at least 2, got 0"),
        ("scale model", "argument --model: "),
        ("stream out", "--out "),
        ("iterations", "argument --iterations: must be at least 1, got 0"),
        ("tree", "argument --tree: "),
        ("no photos", "argument --photos: must be at least 1, got 0"),
        ("tuning json", "argument --json: cannot write"),
        ("jpeg write", "--write "),
        ("models", "argument --models: "),
        ("splits", "--splits bogus: "),
        ("repeats", "argument --repeats: must be at least 1, got 0"),
        ("limit", "argument --limit: must be at least 1, got 0"),
        ("data root", "--data-root "),
        ("gold", "argument --gold: "),
        ("gpu photos", "argument --photos: must be at least 1, got 0"),
        ("test size", "argument --test-size: must be at least 1, got 0"),
        ("batching", "argument --batching: '16': expected max_batch_size:batch_timeout"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(runs, name, said):
    assert said in _refused(runs, name)


@pytest.mark.long
def test_the_file_or_folder_named_is_in_the_line(runs, tmp_path):
    """The value the user gave is named beside its option: which of several files, and not the config key."""
    assert _refused(runs, "scale model").endswith("gone.pt: no such model file (nor a bundled model: flickr8k, shapes)")
    assert _refused(runs, "stream out").endswith("a_file: a file, not a folder")
    assert _refused(runs, "data root").endswith("gone: no such folder")
    assert "data.root" not in _refused(runs, "data root")
    assert "holds neither bogus.de nor bogus.de.gz" in _refused(runs, "splits")


@pytest.mark.long
def test_help_describes_every_option(runs):
    code, out, _ = runs["help"]
    assert code == 0 and "UNDESCRIBED []" in out, out


def test_counts_are_checked_by_the_option_types():
    assert at_least(0)("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 2, got 1"):
        at_least(2)("1")
    assert int_list(0)("0,2") == [0, 2]
    for bad, said in (("1,x", "comma-separated integers"), ("1,-1", "each must be at least 0")):
        with pytest.raises(argparse.ArgumentTypeError, match=said):
            int_list(0)(bad)


def test_batch_settings_are_pairs_of_a_count_and_seconds():
    assert batch_settings("1:0,16:0.01") == [(1, 0.0), (16, 0.01)]
    for bad in ("16", "0:0.01", "4:-1", "4:x", "x:0", "4:inf", "4:nan", "4:0.01,"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected max_batch_size:batch_timeout"):
            batch_settings(bad)


def test_a_model_is_a_bundled_name_or_a_file(tmp_path):
    assert text_model("bahdanau") == "bahdanau"
    (tmp_path / "m.pt").write_bytes(b"x")
    assert text_model(str(tmp_path / "m.pt")) == str(tmp_path / "m.pt")
    with pytest.raises(argparse.ArgumentTypeError, match="no such model file"):
        text_model(str(tmp_path / "gone.pt"))


def test_a_corpus_is_refused_by_the_option_typed(tmp_path, capsys):
    p = argparse.ArgumentParser(prog="x")
    (tmp_path / "val.de.gz").write_bytes(b"")
    check_corpus(p, "--data-root", tmp_path, "val", "de")  # a gzipped split is one
    with pytest.raises(SystemExit) as exit_:
        check_corpus(p, "--data-root", tmp_path, "val", "de", "en")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--data-root " + f"{tmp_path}: found neither "
                                                                     "val.en nor val.en.gz")  # fmt: skip
