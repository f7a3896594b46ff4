"""Execute the notebooks top to bottom with Jupyter's own executor (nbclient), as a reader would run them.

    python notebooks/run.py                    # run every notebook in full and rewrite its stored outputs
    python notebooks/run.py 01_attention_by_hand.ipynb --quick     # quick mode, outputs not written
    python notebooks/run.py --check            # full run, outputs not written (what `-m slow` tests do)

Each notebook's first code cell (tagged ``parameters``, so papermill can set it too) reads ``QUICK`` from the
environment variable ATTN_NOTEBOOK_QUICK: quick mode shrinks every size so a notebook runs in about 30 seconds (the
`-m slow` tests execute them all so, and in full; the default run checks their stored outputs); the full run is what
the stored outputs show, at most 5 minutes a notebook on 2 CPU cores. Real data is looked for at ATTN_DATA (default:
../shared/data beside the repository); a notebook that needs it says so and skips that part. Outputs are kept
reviewable: no timings, progress bars or memory addresses are printed by the notebooks, and execution timestamps are
not recorded. The time each took is printed here only.
A full run also writes the picture of each notebook's cell tagged ``readme-picture`` (its first PNG output) to
docs/notebook_<name>.png, the README's "Learn" pictures.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
TIMEOUT = 900  # seconds a cell may take before the run fails (a full notebook's budget is 300 in all)


def notebooks() -> list[Path]:
    """The notebooks, in reading order."""
    return sorted(HERE.glob("[0-9][0-9]_*.ipynb"))


def execute(path: Path, quick: bool = False, write: bool = False, timeout: int = TIMEOUT) -> tuple[float, object]:
    """Run ``path`` in a fresh kernel (working folder: notebooks/); returns (seconds, the executed notebook). A cell
    that raises fails the run with nbclient's CellExecutionError naming the cell. ``write``: store the outputs."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {"ATTN_NOTEBOOK_QUICK": "1" if quick else "0", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        # coalesce_streams: one print is one output however the kernel's messages happened to be split (a re-run
        # stores the same notebook); record_timing off: no execution timestamps in the cells' metadata
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False, coalesce_streams=True,
                                resources={"metadata": {"path": str(HERE)}})  # fmt: skip
        start = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - start
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if write:
        nb.metadata.pop("widgets", None)
        nbformat.write(nb, path)
        readme_picture(nb, path)
    return seconds, nb


def readme_picture(nb, path: Path) -> Path | None:
    """The first PNG output of the cell tagged ``readme-picture``, written to docs/notebook_<stem>.png."""
    import base64

    from text_attn.core.safe_files import write_bytes

    for cell in nb.cells:
        if cell.cell_type == "code" and "readme-picture" in cell.metadata.get("tags", []):
            for out in cell.outputs:
                png = out.get("data", {}).get("image/png")
                if png:
                    return write_bytes(DOCS / f"notebook_{path.stem}.png", base64.b64decode(png))
    return None


def _notebook(name: str) -> Path:
    """A notebook as named: ``01_attention_by_hand.ipynb`` or without ``.ipynb`` (in notebooks/), or a path to one
    (``notebooks/01_attention_by_hand.ipynb``, tab-completed from the repository root: it was "no such notebook")."""
    given = Path(name)
    if given.suffix != ".ipynb":
        given = given.with_name(given.name + ".ipynb")
    return given.resolve() if given.is_file() else HERE / given.name


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="notebooks to run (default: all)")
    p.add_argument("--quick", action="store_true", help="quick mode (small sizes); outputs are not written")
    p.add_argument("--check", action="store_true", help="full run without writing the outputs")
    p.add_argument("--pictures", action="store_true", help="only write the README pictures from the stored outputs")
    args = p.parse_args(argv)
    chosen = [_notebook(n) for n in args.names] if args.names else notebooks()
    missing = [str(c) for c in chosen if not c.is_file()]
    if missing:
        print(f"run notebooks: error: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.pictures:
        import nbformat

        for path in chosen:
            print(f"{path.name}: {readme_picture(nbformat.read(path, as_version=4), path) or 'no readme-picture cell'}")
        return 0
    from nbclient.exceptions import CellExecutionError

    for path in chosen:
        try:
            seconds, _ = execute(path, quick=args.quick, write=not (args.quick or args.check))
        except CellExecutionError as err:
            print(f"{path.name}: FAILED\n{err}", file=sys.stderr)
            return 1
        print(f"{path.name}: {seconds:.0f} s{' (quick)' if args.quick else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
