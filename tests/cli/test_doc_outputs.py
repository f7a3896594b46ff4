"""The outputs the docs quote are what the commands print today.

A doc shows a command in a ```bash block and what it printed in the ```text block after it; a model bundled anew, or a
change of wording, leaves the quote stale with nothing to say so (a doc audit of 2026-12-06 found ten such quotes,
among them test scores of a model replaced two days before). Each pair below is run as a reader would run it, from a
folder laid out as the repository root with ../shared beside it, and every line the doc quotes must be a line the
command printed (stdout's in stdout's order, stderr's in stderr's; a quoted line ending in "..." is a line's start).
The quotes that need the real data are slow and skip without it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
PAIR = re.compile(r"```bash\n(?P<cmd>.*?)```\s*\n(?:[^`\n][^\n]*\n){0,3}?\s*```text\n(?P<out>.*?)```", re.S)

# (doc, the bash block's first line's start, the lines of the block to run (None: all), needs the real data, exit
# code: the Flickr8k split names 13 photos the shared copy lacks, each a failed input)
CHECKED = [
    ("docs/text.md", 'translate "Ein Mann fährt Fahrrad." --given', None, False, 0),
    ("docs/text.md", "translate --unsure --html page.html", None, False, 0),
    ("docs/text.md", 'translate "Ein Mann fährt mit seinem Fahrrad eine Straße entlang."', 1, False, 0),
    ("docs/captioning.md", "caption --unsure captioning/assets/photos/chelsea.png", None, False, 0),
    ("docs/text.md", "mkdir -p runs\nzcat ../shared/data/multi30k/test_2016_flickr.de.gz | translate", None, True, 0),
    ("docs/captioning.md", "mkdir -p runs\nsed 's#^#../shared/data/flickr8k/", None, True, 1),
]  # fmt: skip


def quoted_pairs(doc: str) -> list[tuple[str, str]]:
    """A doc's (bash block, text block) pairs: a text block at most three lines of prose after its command."""
    return [(m["cmd"], m["out"]) for m in PAIR.finditer((ROOT / doc).read_text(encoding="utf-8"))]


def the_pair(doc: str, start: str) -> tuple[str, str]:
    found = [p for p in quoted_pairs(doc) if p[0].startswith(start)]
    assert len(found) == 1, f"{doc}: {len(found)} command blocks start {start!r} and quote an output"
    return found[0]


def _fits(quoted: str, got: str) -> bool:
    """A printed line is the quoted one, or starts as it does where the quote ends in "..."."""
    want = quoted.rstrip()
    return got.startswith(want[:-3]) if want.endswith("...") else got.rstrip() == want


def missing_lines(quoted: str, stdout: str, stderr: str) -> list[str]:
    """The quoted lines the output lacks: each must be a line of stdout or of stderr, each stream's in its order."""
    streams = {"stdout": stdout.splitlines(), "stderr": stderr.splitlines()}
    at = {"stdout": 0, "stderr": 0}
    missing = []
    for line in filter(str.strip, quoted.splitlines()):
        for name, lines in streams.items():
            hit = next((i for i in range(at[name], len(lines)) if _fits(line, lines[i])), None)
            if hit is not None:
                at[name] = hit + 1
                break
        else:
            missing.append(line)
    return missing


def test_missing_lines_reads_order_streams_and_cut_lines():
    assert missing_lines("a\nb: note ...\nc\n", "a\nc\n", "b: note here\n") == []
    assert missing_lines("c\na\n", "a\nc\n", "") == ["a"]  # stdout's order
    assert missing_lines("a 41.53\n", "a 42.33\n", "") == ["a 41.53"]
    assert missing_lines("b: note ...\n", "", "c: note\n") == ["b: note ..."]


def test_every_checked_pair_is_in_its_doc():
    for doc, start, *_ in CHECKED:
        the_pair(doc, start)


def _reader_folder(tmp_path: Path) -> Path:
    """A folder laid out as the repository root for reading (its assets, configs, data folders; links, nothing of the
    checkout written) with ../shared beside it."""
    work = tmp_path / "root"
    work.mkdir()
    for name in ("captioning", "configs", "docs", "benchmarks", "text_attn"):
        (work / name).symlink_to(ROOT / name)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED)
    return work


@pytest.mark.parametrize(
    "doc, start, lines, needs_data, code",
    [pytest.param(*c, marks=pytest.mark.slow if c[3] else pytest.mark.long, id=f"{c[0]}:{c[1][:40]}") for c in CHECKED],
)
def test_the_quoted_output_is_what_the_command_prints(tmp_path, doc, start, lines, needs_data, code):
    if needs_data and not (SHARED / "data").is_dir():
        pytest.skip(f"the real data is not at {SHARED / 'data'}")
    command, quoted = the_pair(doc, start)
    if lines is not None:
        command = "\n".join(command.splitlines()[:lines])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=_reader_folder(tmp_path), env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == code, done.stderr[-2000:]
    missing = missing_lines(quoted, done.stdout, done.stderr)
    assert not missing, (
        f"{doc} quotes lines the command does not print now (update the doc):\n"
        + "\n".join(missing)
        + f"\n--- stdout:\n{done.stdout[-3000:]}\n--- stderr:\n{done.stderr[-3000:]}"
    )
