"""Matplotlib's folders where the home folder cannot be written (issue: `text-train fit` with a read-only HOME printed
Matplotlib's two-line warning, "mkdir -p failed ... it is highly recommended to set the MPLCONFIGDIR environment
variable").

Matplotlib is imported by Lightning's own imports (torchmetrics' plotting), before any of this toolkit's code runs, so
:func:`point_matplotlib_home` runs as ``text_attn`` is imported: where its config or cache folder
(``$XDG_CONFIG_HOME/matplotlib``, ``$XDG_CACHE_HOME/matplotlib``) could not be made or written and MPLCONFIGDIR is
not set, MPLCONFIGDIR names a private folder of this process (safe_files.private_dir; loader workers inherit it).
Nothing is made otherwise: a writable home is left to Matplotlib.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _writable(folder: Path) -> bool:
    """Whether Matplotlib could use ``folder``: a writable folder, or one its nearest existing ancestor lets it make
    (a read-only mount answers EROFS to ``access``, even for root)."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)


def point_matplotlib_home() -> None:
    """MPLCONFIGDIR set to a private folder where Matplotlib's own folders cannot be written (the module doc)."""
    if os.environ.get("MPLCONFIGDIR") or not sys.platform.startswith(("linux", "freebsd")):  # the XDG folders
        return
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no home at all: Matplotlib warns the same way
        home = None
    folders = []
    for variable, default in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        base = os.environ.get(variable) or (home / default if home else None)
        folders.append(Path(base, "matplotlib") if base else None)
    if all(f is not None and _writable(f) for f in folders):
        return
    from text_attn.core.safe_files import private_dir

    os.environ["MPLCONFIGDIR"] = str(private_dir())
