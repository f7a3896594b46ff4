"""Make the checkout fit the device machine (issue 71): what the device tool sends is the working tree (tracked files
and untracked ones git does not ignore) plus the carried paths, 64 MiB at most; the tracked files alone are ~89 MB.

    python benchmarks/gpu_send.py prepare    # then: run PYTHONPATH=.gpu_carry python benchmarks/gpu.py ... (printed)
    python benchmarks/gpu_send.py size       # what would be sent now, by the largest files
    python benchmarks/gpu_send.py restore    # the working tree as it was

``prepare`` (every change reversible by ``restore``; the originals wait in .gpu_stash/, ignored by git, never sent):
- the bundled captioner becomes its first decoder alone with its encoder's weights in the file, in float16
  (``caption-export --member 1 --half``: 30 MiB instead of 48 MiB of two decoders, and the GPU machine needs no
  EfficientNet-Lite2 weights package, 24 MB). The device check then measures ONE decoder, and says so in its JSON
  (``decoders``): the bundled model's speed with two decoders is about 0.7-0.8x (docs/bundled_captioner.md);
- the bundled Bahdanau translator (17 MB) is set aside: the check translates with the bundled Transformer; so are
  the shapes captioner (2.7 MB), which no CUDA test loads,
  the docs' JSON records (9 MB), pictures (3 MB), pages (0.7 MB) and the notebooks (2 MB), which nothing there
  reads;
- .gpu_carry/ gets the EfficientNet-Lite code package (0.1 MB) and what ``caption-train`` needs that the device
  machine's image lacks (its package list: /work/.library/device/KINDS.md, 2026-11-17): jsonargparse with the
  ``signatures`` extra's docstring_parser and typeshed_client (3.6 MB; their dist-info too, because Lightning's
  LightningCLI checks ``jsonargparse[signatures]`` by its installed metadata; the CUDA tests train through it); and in
  .gpu_carry/if_missing/ pytest (1.6 MB), used only where the machine has none (the CUDA tests need it).
It refuses to run over uncommitted changes to those files, and when the result would not fit.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 64 * 2**20  # bytes the device tool sends at most (the working tree and the carried paths together)
CAPTIONER = Path("captioning/assets/flickr8k_soft.pt")
# the Bahdanau translator (the check translates with the Transformer); the benchmarks' records (docs/*.json: the
# faithfulness curves of each word, the decoding choices' tables, 9 MB in all and more with each model measured), and
# its pages (docs/*.md, 0.7 MB and growing: the spare room fell under 4 MiB on 2026-12-07); and the shapes captioner
# (2.7 MiB), which neither the check nor the CUDA tests load
SET_ASIDE = [Path("text_attn/translation/assets/multi30k_de_en_bahdanau.pt"), Path("captioning/assets/shapes_soft.pt"),
             *sorted(p.relative_to(ROOT) for pattern in ("docs/*.json", "docs/*.png", "docs/*.md", "docs/*.html",
                                                         "notebooks/*.ipynb") for p in ROOT.glob(pattern))]  # fmt: skip
STASH, CARRY = Path(".gpu_stash"), Path(".gpu_carry")
CODE_PACKAGE = "efficientnet_lite_pytorch"
# pure Python that caption-train needs and the device machine's image lacks (module doc): carried with their metadata
MISSING_THERE = ("jsonargparse", "docstring_parser", "typeshed_client")
# pytest, pure Python, for the CUDA tests where the device machine has none: not on PYTHONPATH (the machine's own
# pytest, if any, is used), benchmarks/gpu.py adds it only where ``import pytest`` fails
IF_MISSING = CARRY / "if_missing"
TEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig")


def sent_files(root: Path = ROOT) -> dict[str, int]:
    """Path -> bytes of what the device tool sends from the working tree: tracked files that are there and untracked
    files git does not ignore (carried paths not included)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode()  # fmt: skip
    sizes = {}
    for name in filter(None, listed.split("\0")):
        path = root / name
        if path.is_file() and not path.is_symlink():
            sizes[name] = path.stat().st_size
    return sizes


def folder_bytes(folder: Path, caches: bool = True) -> int:
    """The bytes of the files below ``folder``; without ``caches``, those in __pycache__ folders left out (what
    ``prepare`` copies of an installed package)."""
    if not folder.is_dir():
        return 0
    files = (p for p in folder.rglob("*") if p.is_file() and (caches or "__pycache__" not in p.parts))
    return sum(p.stat().st_size for p in files)


def one_decoder_file(source: Path, out: Path) -> Path:
    """``caption-export SOURCE OUT --member 1 --half``: the first decoder with the encoder's weights, float16."""
    from captioning.commands.export import export_main

    code = export_main([str(source), str(out), "--member", "1", "--half"])
    if code:
        raise SystemExit(f"gpu_send: caption-export failed ({code})")
    return out


def test_packages() -> list[Path]:
    """The installed folders of ``TEST_PACKAGES`` (pytest and what it needs beyond the device machine's Lightning)."""
    import importlib.util

    found = []
    for name in TEST_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise SystemExit(f"gpu_send: the {name} package is not installed here (pip install -e '.[dev]')")
        found.append(Path(spec.origin).parent)
    return found


def code_package() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(CODE_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"gpu_send: the {CODE_PACKAGE} package is not installed here (pip install -e .)")
    return Path(spec.origin).parent


def missing_there() -> list[Path]:
    """The installed folders of ``MISSING_THERE``: each package and its ``.dist-info`` (importlib.metadata's)."""
    import importlib.metadata

    found = []
    for name in MISSING_THERE:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(f"gpu_send: the {name} package is not installed here (pip install -e .)") from None
        metadata = next((f for f in dist.files or [] if f.name == "METADATA"), None)
        info = Path(str(dist.locate_file(metadata))).parent if metadata else Path(f"{name}.dist-info")
        package = Path(str(dist.locate_file(name)))
        if not info.is_dir() or not package.is_dir():
            raise SystemExit(f"gpu_send: {name}'s files are not where its metadata says ({package}, {info})")
        found += [package, info]
    return found


def _dirty(root: Path, paths: list[Path]) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--", *map(str, paths)], cwd=root, capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return [line[3:] for line in out.splitlines()]


def prepare(root: Path = ROOT) -> int:
    """Stash, replace, carry (module doc); returns the bytes that will be sent."""
    if (root / STASH).exists():
        raise SystemExit(f"gpu_send: {STASH}/ exists: prepared already (restore first)")
    dirty = _dirty(root, [CAPTIONER, *SET_ASIDE])
    if dirty:
        raise SystemExit(f"gpu_send: uncommitted changes to {', '.join(dirty)}: commit them first")
    (root / STASH).mkdir()
    for path in [CAPTIONER, *SET_ASIDE]:
        target = root / STASH / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(root / path, target)
    one_decoder_file(root / STASH / CAPTIONER, root / CAPTIONER)
    shutil.rmtree(root / CARRY, ignore_errors=True)
    shutil.copytree(code_package(), root / CARRY / CODE_PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in missing_there():
        shutil.copytree(folder, root / CARRY / folder.name, ignore=shutil.ignore_patterns("__pycache__"))
    for package in test_packages():
        shutil.copytree(package, root / IF_MISSING / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    total = sum(sent_files(root).values()) + folder_bytes(root / CARRY)
    if total > LIMIT:
        restore(root)
        raise SystemExit(f"gpu_send: {total / 2**20:.1f} MiB would be sent, over {LIMIT / 2**20:.0f} MiB: restored")
    return total


def restore(root: Path = ROOT) -> None:
    """Put every stashed file back (the replaced captioner over its one-decoder copy) and drop .gpu_stash/. What the
    stash holds, not SET_ASIDE: restore runs in a later process, where the docs glob no longer finds what was moved."""
    stash = root / STASH
    if not stash.is_dir():
        raise SystemExit("gpu_send: nothing to restore (no .gpu_stash/)")
    for kept in sorted(p for p in stash.rglob("*") if p.is_file()):
        path = root / kept.relative_to(stash)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(kept, path)
    shutil.rmtree(stash)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("prepare", "size", "restore"))
    args = p.parse_args(argv)
    if args.action == "restore":
        restore()
        print(
            "restored: every file set aside is back (the bundled captioner, the GRU, the shapes captioner, the docs' "
            "JSONs, pictures and pages, the notebooks)"
        )
        return 0
    total = prepare() if args.action == "prepare" else sum(sent_files().values()) + folder_bytes(ROOT / CARRY)
    sizes = sorted(sent_files().items(), key=lambda kv: -kv[1])[:5]
    print(f"sent: {total / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} MiB (working tree + {CARRY}/); largest files:")
    for name, size in sizes:
        print(f"  {size / 2**20:6.1f} MiB  {name}")
    if args.action == "prepare":
        print(f"\nnow run (device tool), carry [\"{CARRY}\"]:\n  PYTHONPATH={CARRY} python benchmarks/gpu.py --out "
              "$OUT\nthen: python benchmarks/gpu_send.py restore")  # fmt: skip
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
