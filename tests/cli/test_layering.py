"""The layering rule of DESIGN.md: text_attn.core is the library every family imports; it imports no application
(text_attn.translation, captioning), builds nothing when imported, and loads Lightning only where it must. Captioning
imports the core only, never the text application. The core's own tests (tests/core) import no application either.
The data modules (captioning.data, text_attn.translation.data) import no model, network or inference object. The server
(attention_serve) sits above both families; nothing below imports it."""

import ast
import functools
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORE = ROOT / "text_attn" / "core"
CORE_TESTS = ROOT / "tests" / "core"
HELPERS = ROOT / "tests" / "helpers"
# The only core modules that may import Lightning (the CLI runner, and the training helpers it uses at run time).
LIGHTNING_CORE = {"lightning_cli", "training"}


def _imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _offenders(folder: pathlib.Path, banned: tuple[str, ...]) -> list[str]:
    return _offending_files(sorted(folder.rglob("*.py")), banned)


def _offending_files(paths: list[pathlib.Path], banned: tuple[str, ...]) -> list[str]:
    return [
        f"{p.relative_to(ROOT)}: {n}"
        for p in paths
        for n in _imports(p)
        if any(n == b or n.startswith(b + ".") for b in banned)
    ]


def _helpers_imported(paths: list[pathlib.Path]) -> list[pathlib.Path]:
    """The tests/helpers modules these files import (``from helpers.NAME import ...``), and those the helpers import."""
    seen: set[pathlib.Path] = set()
    todo = list(paths)
    while todo:
        for name in _imports(todo.pop()):
            if name == "helpers":  # ``from helpers import NAME``: any of them
                found = set(HELPERS.glob("*.py"))
            elif name.startswith("helpers."):
                found = {HELPERS / f"{name.split('.')[1]}.py"}
            else:
                continue
            todo += sorted(found - seen)
            seen |= found
    return sorted(seen)


def _modules(folder: pathlib.Path, package: str) -> list[str]:
    """Every module of the package in ``folder``, its sub-packages' too (captioning's rooms)."""
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        if parts != ("__init__",):
            names.append(".".join((package, *(parts[:-1] if parts[-1] == "__init__" else parts))))
    return names


def _loaded_after(*groups: list[str]) -> list[set[str]]:
    """In one fresh interpreter, import each group of modules in turn: what sys.modules holds after each (a later
    group's set includes the earlier ones': one process serves checks that hold for the union)."""
    code = "import sys, importlib\n"
    for imports in groups:
        code += "".join(f"importlib.import_module({m!r})\n" for m in imports)
        code += "print('MODULES', *sorted(sys.modules))\n"  # marked: a module that prints on import cannot confuse it
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return [set(line.split()[1:]) for line in out.stdout.splitlines() if line.startswith("MODULES ")]


@functools.cache
def _core_then_all_of_captioning() -> tuple[set[str], set[str]]:
    """Every core module but the Lightning runner; then, in the same process, every captioning module too."""
    plain = [m for m in _modules(CORE, "text_attn.core") if m.rsplit(".", 1)[1] not in LIGHTNING_CORE]
    core, captioning = _loaded_after(
        ["text_attn", "text_attn.core", *plain], _modules(ROOT / "captioning", "captioning")
    )
    return core, captioning


def test_the_core_never_imports_an_application():
    assert len(list(CORE.glob("*.py"))) > 8  # the scan really saw the package
    assert _offenders(CORE, ("captioning", "text_attn.translation")) == []


def test_the_core_tests_import_no_application():
    """tests/core tests the core alone: no test there imports captioning or text_attn.translation, directly or through
    a tests/helpers module it imports (a family's part of a core test lives in that family's tests)."""
    tests = sorted(CORE_TESTS.rglob("*.py"))
    assert len([p for p in tests if p.name.startswith("test_")]) > 5  # the scan really saw the core's tests
    banned = ("captioning", "text_attn.translation")
    assert _offenders(CORE_TESTS, banned) == []
    helpers = _helpers_imported(tests)
    assert HELPERS / "run_logs.py" in helpers  # the helper scan follows `from helpers.NAME import ...`
    assert _offending_files(helpers, banned) == []


def test_the_server_sits_above_both_families_and_neither_imports_it():
    """attention_serve imports captioning and text_attn; no module of either family (or of the core) imports it."""
    assert len(list((ROOT / "attention_serve").glob("*.py"))) >= 6
    for family in ("captioning", "text_attn"):
        assert _offenders(ROOT / family, ("attention_serve",)) == []
    used = {n.split(".")[0] for p in (ROOT / "attention_serve").glob("*.py") for n in _imports(p)}
    assert {"captioning", "text_attn", "litserve"} <= used


def test_captioning_imports_the_core_only():
    assert len(list((ROOT / "captioning").rglob("*.py"))) > 8
    assert _offenders(ROOT / "captioning", ("text_attn.translation",)) == []


# The data modules never depend on a model: no network, no LightningModule, no inference object (docs/code.md).
DATA_MODULES = {
    "captioning/training/data.py": (
        "captioning.model.captioner",  # the inference object
        "captioning.model.network",
        "captioning.model.encoder",
        "captioning.model.inference_encoder",
        "captioning.model.decoder",
        "captioning.training.module",  # the LightningModule
        "captioning.training.objective",
    ),
    "text_attn/translation/data.py": (
        "text_attn.translation.translator",  # the inference object
        "text_attn.translation.networks",
        "text_attn.translation.seq2seq",
        "text_attn.translation.transformer",
        "text_attn.translation.module",  # the LightningModule
    ),
}


def _imported_modules(path: pathlib.Path) -> list[str]:
    """What a file imports, ``from pkg import name`` counted as ``pkg.name`` too (name may be a module)."""
    names = _imports(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


@pytest.mark.slow
def test_the_data_modules_import_no_model_network_or_inference_object():
    """Directly (the file's own imports) and indirectly (what importing it loads)."""
    for path, banned in DATA_MODULES.items():
        assert all((ROOT / f"{m.replace('.', '/')}.py").is_file() for m in banned)  # the list names real modules
        names = _imported_modules(ROOT / path)
        assert "text_attn.core.batching" in names  # the scan really read the file
        assert [n for n in names if any(n == b or n.startswith(b + ".") for b in banned)] == [], path
    (loaded,) = _loaded_after([p.removesuffix(".py").replace("/", ".") for p in DATA_MODULES])
    assert "captioning.training.data" in loaded and "text_attn.translation.data" in loaded
    assert sorted(loaded & {b for banned in DATA_MODULES.values() for b in banned}) == []


@pytest.mark.slow
def test_importing_the_core_builds_no_application_and_no_lightning():
    """Every core module but the Lightning runner, imported together: no text task (the toy lexicons are built when
    text_attn.translation.tasks is imported), no captioning module and no Lightning come along."""
    loaded, _ = _core_then_all_of_captioning()
    assert "text_attn.core.attention" in loaded and "text_attn.core.decoding" in loaded
    assert sorted(m for m in loaded if m.startswith(("captioning", "text_attn.translation"))) == []
    assert "pytorch_lightning" not in loaded and "lightning_fabric" not in loaded


def test_importing_all_of_captioning_loads_no_text_application():
    _, loaded = _core_then_all_of_captioning()  # the core's modules loaded first: they are captioning's library
    assert "captioning.training.module" in loaded
    assert sorted(m for m in loaded if m.startswith("text_attn.translation")) == []


@pytest.mark.slow
def test_inference_needs_no_lightning():
    """Inference (translate, caption) loads a model file and decodes: it must not import the training stack."""
    (loaded,) = _loaded_after(
        [
            "text_attn.translation.translator",
            "captioning.model.captioner",
            "captioning.model.network",
            "captioning.commands.caption",
        ]
    )
    assert "text_attn.translation.translator" in loaded and "captioning.model.captioner" in loaded
    assert "pytorch_lightning" not in loaded
