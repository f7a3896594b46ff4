"""Matplotlib's folders where HOME cannot be written (text_attn.core.mpl_home): no MPLCONFIGDIR warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from text_attn.core import mpl_home

ROOT = Path(__file__).parent.parent.parent


def test_an_unwritable_home_gets_a_private_matplotlib_folder_and_no_warning(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # ~/.config under a file: it cannot be made, as on a read-only HOME
    env = {k: v for k, v in os.environ.items() if k != "MPLCONFIGDIR"}
    env.update(XDG_CONFIG_HOME=str(blocked / "config"), PYTHONPATH=str(ROOT))
    code = "import os, text_attn, matplotlib; print(os.path.isdir(os.environ['MPLCONFIGDIR']))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "True"
    assert done.stderr == ""  # Matplotlib's "mkdir -p failed ... set the MPLCONFIGDIR environment variable" is gone


def test_a_writable_home_or_a_set_mplconfigdir_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("MPLCONFIGDIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # not there yet, but can be made
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    mpl_home.point_matplotlib_home()
    assert "MPLCONFIGDIR" not in os.environ and not (tmp_path / "config").exists()  # nothing made for Matplotlib
    monkeypatch.setenv("MPLCONFIGDIR", "/theirs")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("")
    mpl_home.point_matplotlib_home()
    assert os.environ["MPLCONFIGDIR"] == "/theirs"
