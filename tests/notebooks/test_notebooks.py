"""Every notebook runs top to bottom (notebooks/run.py, Jupyter's nbclient) under ``-m slow``: in quick mode (about
30 s each) and in full (the run whose outputs are stored; at most 5 minutes each on 2 cores). The default run checks
the stored outputs only: even the first notebook's quick run cost 12 s of it, most of that a kernel starting. A
cell that raises fails the test, naming the cell. The stored notebooks hold the outputs of a full run, none of them an
error, with no timing or memory address that would change on every run."""

from __future__ import annotations

import base64
import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

RUNNER = Path(__file__).resolve().parents[2] / "notebooks" / "run.py"
spec = importlib.util.spec_from_file_location("notebook_runner", RUNNER)
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
NOTEBOOKS = runner.notebooks()
DOCS = RUNNER.parents[1] / "docs"


def test_there_are_notebooks_and_each_has_a_parameters_cell_reading_quick():
    assert len(NOTEBOOKS) >= 1
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert "parameters" in code[0].metadata.get("tags", []), path.name
        assert "ATTN_NOTEBOOK_QUICK" in code[0].source, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_are_a_clean_full_run(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{path.name}: not executed in full (notebooks/run.py)"
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), path.name  # top to bottom, once
    for cell in code:
        for out in cell.outputs:
            assert out.output_type != "error", f"{path.name}: a stored error"
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r"at 0x[0-9a-f]{6,}", text), f"{path.name}: a memory address in the outputs"
            assert "it/s]" not in text and "s/it]" not in text, f"{path.name}: a progress bar in the outputs"
    # the README's picture of this notebook is its stored output (notebooks/run.py writes it on a full run)
    tagged = [c for c in code if "readme-picture" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: one cell tagged readme-picture"
    png = next(o.data["image/png"] for o in tagged[0].outputs if "image/png" in o.get("data", {}))
    assert (DOCS / f"notebook_{path.stem}.png").read_bytes() == base64.b64decode(png), path.name


def test_no_cell_ends_on_a_value_a_fresh_run_would_show_and_the_stored_one_does_not():
    """03's scratch-folder cell ended on ``atexit.register(...)``, whose value (the function) a fresh run shows as
    Out[2]: the stored notebook, run before that line moved last, was not what a run writes."""
    import ast

    for path in NOTEBOOKS:
        for cell in (c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"):
            body = ast.parse(cell.source.replace("%matplotlib inline", "None")).body  # a magic: its own line
            last = body[-1] if body else None
            shown = any(o.output_type == "execute_result" for o in cell.outputs)
            if (
                isinstance(last, ast.Expr)
                and isinstance(last.value, ast.Call)
                and not cell.source.rstrip().endswith(";")
            ):
                name = ast.unparse(last.value.func)
                assert name != "atexit.register" or shown, f"{path.name}: a cell ends on {name}(...), shown as Out[]"


def test_the_runner_takes_a_notebook_by_name_or_by_path(monkeypatch):
    """``python notebooks/run.py notebooks/01_attention_by_hand.ipynb`` (tab-completed from the repository root) was
    "no such notebook: .../notebooks/notebooks/01_...": a name, a name without .ipynb and a path are one notebook."""
    first = NOTEBOOKS[0]
    monkeypatch.chdir(RUNNER.parents[1])
    for given in (first.name, first.stem, f"notebooks/{first.name}", str(first)):
        assert runner._notebook(given) == first, given
    assert not runner._notebook("no_such_notebook").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_runs_top_to_bottom_in_quick_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel inherits it: its tempfile.mkdtemp() folders land here
    seconds, nb = runner.execute(path, quick=True, timeout=300)
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    # a notebook's scratch folder (7-47 MB of checkpoints and pictures) goes when its kernel stops
    assert not [p.name for p in tmp_path.glob("tmp*") if p.is_dir()], f"{path.name}: its scratch folder was left"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_runs_top_to_bottom_in_full(path):
    seconds, nb = runner.execute(path, quick=False)
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")  # every cell ran (as in quick mode)
    print(f"{path.name}: {seconds:.0f} s")  # the budget is 5 minutes on 2 cores: measured, not asserted (README)
