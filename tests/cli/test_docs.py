"""The docs stay honest where a test can keep them so: every relative link (and its #anchor) resolves, every command
in a fenced shell block of the README and docs/*.md names something that exists (a console script of this package, a
script or config in the repository, or a known outside tool), no local machine path appears, and the scores the
bundled model files record are the ones the results page prints."""

from __future__ import annotations

import json
import re
import shlex
from importlib.metadata import distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = {e.name for e in distribution("attention-toolkit").entry_points if e.group == "console_scripts"}
# commands from outside the package that the docs may show (installers, launchers, shells, clients)
TOOLS = {"pip", "git", "cd", "curl", "bash", "jupyter", "srun", "sbatch", "torchrun", "tensorboard", "openssl",
         "export", ".", "source", "find", "cat", "ls", "head", "echo", "mkdir", "cp", "tar", "img2dataset", "sudo",
         "apt-get", "python3", "kill", "systemctl", "docker", "gsutil", "aws", "for", "do", "done", "wait", "nohup",
         "time", "sed", "zcat"}  # fmt: skip
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MACHINE_PATH = re.compile(r"(?<![\w.~$])/(root|home|work|tmp|Users|opt|mnt|var/folders)/[\w.-]")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(doc):
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not checked offline
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(target)
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def _commands(block: str):
    """Each command of a shell block: its words, with continuation lines joined, comments dropped, and each part of
    a pipe, `&&` or `;` chain on its own."""
    joined = re.sub(r"\\\n", " ", block)
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            try:
                words = shlex.split(part)
            except ValueError:
                words = part.split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value before the command
                words = words[1:]
            if words:
                yield words


def _problem(words: list[str]) -> str | None:
    head = words[0]
    if head in SCRIPTS or head in TOOLS:
        pass
    elif head == "python":
        target = words[1] if len(words) > 1 else ""
        if target == "-m":
            return None
        if target.endswith(".py") and not (ROOT / target).is_file():
            return f"no script {target}"
    else:
        return f"unknown command {head!r}"
    for flag, value in zip(words, words[1:], strict=False):
        if flag == "--config" and value.startswith("configs/") and not (ROOT / value).is_file():
            return f"no config {value}"
    return None


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_shown_names_an_existing_script_or_config(doc):
    wrong = []
    for kind, block in FENCE.findall(doc.read_text()):
        if kind not in ("bash", "sh", "shell", "console"):
            continue
        for words in _commands(block):
            problem = _problem(words)
            if problem:
                wrong.append(f"{' '.join(words)[:80]}: {problem}")
    assert not wrong, f"{doc.name}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_local_machine_path(doc):
    found = [m.group(0) for m in MACHINE_PATH.finditer(doc.read_text())]
    assert not found, f"{doc.name}: {found}"


def test_the_results_page_prints_the_scores_the_bundled_files_record():
    """A bundled model retrained without its numbers updated fails here."""
    import torch

    results = (ROOT / "docs" / "results.md").read_text()
    files = [ROOT / "captioning/assets/flickr8k_soft.pt", ROOT / "text_attn/translation/assets/multi30k_de_en.pt",
             ROOT / "text_attn/translation/assets/multi30k_de_en_bahdanau.pt"]  # fmt: skip
    missing = []
    for path in files:
        info = torch.load(path, map_location="cpu", weights_only=True)["info"]
        scores = {**info.get("test_scores", {}), **info.get("test_scores_default_decoding", {})}
        for name, value in scores.items():  # the scores, not the decoding they were made with
            if name in ("beam", "length_penalty", "no_repeat_ngram"):
                continue
            if isinstance(value, float) and f"{value:.2f}" not in results:
                missing.append(f"{path.name}: {name} {value:.2f}")
    assert not missing, missing


def test_the_results_summary_row_of_each_bundled_model_quotes_its_recorded_scores():
    """The summary table at the top of the results page (the row a reader takes away) names each bundled model's own
    recorded test scores: the translator replaced on 2026-12-04 kept its predecessor's row, whose numbers the rest of
    the page still held, so the check above passed."""
    import torch

    rows = [line for line in (ROOT / "docs" / "results.md").read_text().splitlines() if line.startswith("| ")]
    files = {"| `caption`: ": ("captioning/assets/flickr8k_soft.pt", ("Bleu_4", "METEOR")),
             "| `translate`: ": ("text_attn/translation/assets/multi30k_de_en.pt", ("sacreBLEU", "tokenized)")),
             "| `translate --model bahdanau`: ": ("text_attn/translation/assets/multi30k_de_en_bahdanau.pt",
                                                  ("sacreBLEU", "tokenized)"))}  # fmt: skip
    missing = []
    for cell, (path, metrics) in files.items():
        row = next(r for r in rows if cell in r)
        scores = torch.load(ROOT / path, map_location="cpu", weights_only=True)["info"]["test_scores"]
        for name, value in scores.items():
            if name.endswith(metrics) and f"{value:.2f}" not in row:
                missing.append(f"{path}: {name} {value:.2f} not in its row: {row}")
    assert not missing, missing


def test_the_code_map_names_every_module():
    """Every module by name, and every room of captioning/ by its folder (the modules are listed under their room)."""
    text = (ROOT / "docs" / "code.md").read_text(encoding="utf-8")
    packages = ("text_attn/core", "text_attn/translation", "captioning", "attention_serve")
    modules = [p.name for pkg in packages for p in sorted((ROOT / pkg).rglob("*.py")) if p.name != "__init__.py"]
    assert modules and [m for m in modules if f"`{m}`" not in text] == []
    rooms = [p.parent.relative_to(ROOT).as_posix() for p in sorted((ROOT / "captioning").glob("*/__init__.py"))]
    assert len(rooms) >= 5 and [r for r in rooms if f"`{r}/`" not in text] == []
    # each room's modules are named after its heading and before the next one
    sections = text.split("*`captioning/")
    for room in rooms:
        (section,) = [s for s in sections if s.startswith(room.removeprefix("captioning/") + "/`")]
        names = [p.name for p in sorted((ROOT / room).glob("*.py")) if p.name != "__init__.py"]
        assert [n for n in names if f"`{n}`" not in section] == [], room


@pytest.mark.parametrize("record", sorted((ROOT / "docs").glob("*.json")), ids=lambda p: p.name)
def test_every_record_is_strict_json(record):
    # JavaScript's JSON.parse, serde and other strict readers refuse Python's NaN / Infinity: "no value" is null
    def refuse(constant):
        raise ValueError(f"{record.name}: {constant} is not JSON (write null)")

    json.loads(record.read_text(encoding="utf-8"), parse_constant=refuse)
