"""benchmarks/_runs.py's console scripts: the project's [project.scripts] read without tomllib, and where the checkout
is not installed (the GPU machine gets a copy, not an installation) a script file that runs the command as pip's
script would, from any directory (a file: Lightning's launcher re-runs sys.argv[0])."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.toml_reader import toml_reader

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import StageError, console_script, entry_points, write_console_script  # noqa: E402


def test_the_entry_points_are_pyprojects_own():
    tomllib = toml_reader()
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert entry_points() == tomllib.load(f)["project"]["scripts"]


@pytest.mark.parametrize(
    ("name", "usage"), [("translate", "usage: translate"), ("caption-export", "usage: caption-export")]
)
def test_a_written_script_runs_the_command_from_any_directory(name, usage, tmp_path):
    script = write_console_script(name, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(script), "--help"], cwd=elsewhere, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.startswith(usage), done.stderr


def test_a_written_script_imported_again_runs_nothing(tmp_path):
    """multiprocessing's workers (attention-serve's, Lightning's) import the main script again as __mp_main__."""
    script = write_console_script("caption", tmp_path)
    code = f"import runpy; runpy.run_path({str(script)!r}, run_name='__mp_main__'); print('imported')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "imported\n", "")


def test_a_name_the_project_does_not_define_is_one_line(tmp_path):
    with pytest.raises(StageError, match="no console script 'nope' in this project"):
        write_console_script("nope", tmp_path)


def test_an_installed_script_is_used_as_it_is():
    assert console_script("caption") == str(Path(sys.executable).parent / "caption")  # the test run's own install
