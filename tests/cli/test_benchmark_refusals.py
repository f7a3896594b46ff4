"""The benchmark scripts meet bad input as the commands do: one line naming it and exit code 2, never a traceback
(benchmarks/_runs.run_main), and an output file in a folder that does not exist is refused when the options are read,
before any measuring (text_attn.core.errors.new_file)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from helpers.bench_driver import run_cases

from text_attn.core.errors import new_file

# every test here reads the one run of all the cases (~3-5 s: torch imported, the scripts run): out of the default run
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> tuple[Path, dict[str, tuple[str, str]]]:
    """(the folder the cases name, each case's exit code and stderr by its name)."""
    from captioning.model.bundled import SHAPES_MODEL

    tmp = tmp_path_factory.mktemp("bench")
    gone, out = tmp / "gone", str(tmp / "x")
    (tmp / "s.txt").write_text("ein hund\n")
    (tmp / "t.txt").write_text("a dog\n")
    cases = {
        "model": ("domain_check.py", [f"{gone}.pt", "--shapes", "2"]),
        "data root": ("flickr8k.py", ["--data-root", str(gone), "--out", out, "--quick", "--stages", "soft"]),
        "beam data": ("beam_search.py", ["--flickr8k-root", str(gone)]),
        "rounds": ("beam_search.py", ["--multi30k-root", str(gone), "--rounds", "0"]),
        "beam file": ("beam_search.py", ["--multi30k-root", str(tmp), "--translator", str(gone)]),
        "beam file alone": ("beam_search.py", ["--flickr8k-root", str(tmp), "--translator", str(gone)]),
        "json": ("transformer_speed.py", ["--json", str(tmp / "no" / "t.json")]),
        "shapes 0": ("domain_check.py", [str(SHAPES_MODEL), "--shapes", "0"]),
        "shapes -3": ("domain_check.py", [str(SHAPES_MODEL), "--shapes", "-3"]),
        "iterations": ("word_align.py", [str(tmp / "s.txt"), str(tmp / "t.txt"), "--out", str(tmp / "o"),
                                         "--iterations", "-1"]),
        # named by the option typed, not the config key the data module says (data.root)
        "unsure root": ("unsure_attention.py", ["--multi30k-root", str(gone)]),
        "reading root": ("reading.py", ["--multi30k", str(gone)]),
        "faithfulness root": ("faithfulness.py", ["--multi30k-root", str(gone), "--families", "text"]),
        "unsure photos": ("unsure_attention.py", ["--flickr8k-root", str(gone)]),
        # a name given twice: both rows were the second model's numbers, the first's lost, exit 0
        "sharpness twice": ("attention_sharpness.py", ["--model", "b=flickr8k", "--model", "b=shapes"]),
        # an empty shell variable: every form ran (~13 minutes on the full set)
        "casing forms": ("casing.py", ["--data-root", str(tmp), "--forms", ""]),
        # one model twice: translated twice, its rows and JSON keyed by the one name
        "models twice": ("casing.py", ["--data-root", str(tmp), "--models", "transformer,bahdanau,transformer"]),
        "unsure split": ("unsure_cost.py", ["--multi30k-root", str(tmp), "--split", "nope"]),
        "root a file": ("wrapped_text.py", ["--data-root", str(tmp / "s.txt")]),  # said "no such folder"
    }  # fmt: skip
    return tmp, {name: (code, err) for name, (code, _, err) in run_cases(cases, timeout=120).items()}


def _refused(refusals, name: str) -> str:
    """The one line a case was refused with: exit code 2, no traceback."""
    code, err = refusals[1][name]
    assert code == 2 and "Traceback" not in err, err[-2000:]
    return err.strip().splitlines()[-1]


def test_a_missing_model_or_data_root_is_one_line(refusals):
    gone = refusals[0] / "gone"
    assert _refused(refusals, "model") == f"domain_check.py: error: {gone}.pt: model file not found"
    assert _refused(refusals, "data root") == f"flickr8k.py: error: {gone}: data root not found"
    said = f"beam_search.py: error: no Flickr8k_text/Flickr_8k.testImages.txt in {gone}: give Flickr8k's folder as "
    assert _refused(refusals, "beam data") == said + "--flickr8k-root"
    assert _refused(refusals, "beam file") == f"beam_search.py: error: --translator {gone}: no such file"
    said = "beam_search.py: error: --translator needs --multi30k-root: the sentences to translate"
    assert _refused(refusals, "beam file alone") == said
    assert _refused(refusals, "unsure root") == f"unsure_attention.py: error: --multi30k-root {gone}: no such folder"
    assert _refused(refusals, "reading root") == f"reading.py: error: --multi30k {gone}: no such folder"
    assert _refused(refusals, "faithfulness root") == f"faithfulness.py: error: --multi30k-root {gone}: no such folder"
    assert _refused(refusals, "unsure photos").startswith(f"unsure_attention.py: error: --flickr8k-root {gone}")
    said = "attention_sharpness.py: error: --model b=shapes: the name 'b' is given twice; give each model its own"
    assert _refused(refusals, "sharpness twice") == said
    assert _refused(refusals, "casing forms").startswith("casing.py: error: --forms is empty: give one or more of")
    said = "casing.py: error: argument --models: transformer named twice: each model once"
    assert _refused(refusals, "models twice") == said
    assert (
        _refused(refusals, "root a file")
        == f"wrapped_text.py: error: --data-root {refusals[0] / 's.txt'}: not a folder"
    )


def test_an_output_in_a_missing_folder_is_refused_before_the_work(refusals, tmp_path):
    no = refusals[0] / "no"
    assert f"cannot write {no / 't.json'}: the folder {no} does not exist" in _refused(refusals, "json")
    assert new_file(str(tmp_path / "t.json")) == tmp_path / "t.json"
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder"):
        new_file(str(tmp_path))
    (tmp_path / "victim.json").write_text("kept")  # "--json victim.json/" replaced it, exit 0 (review)
    for typed in (f"{tmp_path}/victim.json/", f"{tmp_path}/new/"):
        with pytest.raises(argparse.ArgumentTypeError, match="ends in a slash, a folder's name: give a file path"):
            new_file(typed)


def test_a_count_below_one_is_refused_by_name(refusals):
    """--shapes 0 fell into the Flickr8k branch (a TypeError), -3 an empty torch.cat; --iterations -1 aligned with no
    EM at all and said nothing."""
    from text_attn.core.errors import positive_int

    for count in ("0", "-3"):
        said = f"domain_check.py: error: argument --shapes: must be at least 1, got {int(count)}"
        assert _refused(refusals, f"shapes {count}") == said
    said = "beam_search.py: error: argument --rounds: must be at least 1, got 0"
    assert _refused(refusals, "rounds") == said
    said = "word_align.py: error: argument --iterations: must be at least 1, got -1"
    assert _refused(refusals, "iterations") == said
    assert positive_int("3") == 3
