"""The layering rule of DESIGN.md: text_attn.core is the library every family imports; it imports no application
(text_attn.translation, captioning), builds nothing when imported, and loads Lightning only where it must. Captioning
imports the core only, never the text application. The core's own tests (tests/core) import no application either.
The data modules (captioning.training.data, text_attn.translation.data) import no model, network or inference object.
The server (attention_serve) sits above both families; nothing below imports it. No two project files import each
other; captioning's rooms import only the rooms below them; each family has one public face that loads no torch."""

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
# The only core modules that may import Lightning (the CLI runner, what it puts into the trainer: its callbacks, the
# progress lines among them, and the training helpers it uses at run time).
LIGHTNING_CORE = {"lightning_cli", "lightning_parts", "progress_lines", "training"}


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
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


# ~11 s of a fresh interpreter importing every module: the static checks above (no captioning file imports the text
# application, nor does any core file) hold it in the default run; this one also sees imports made at run time
@pytest.mark.slow
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


# --- no file circles; captioning's rooms, every arrow downwards (DESIGN.md "Layers", issue 64) ----------------------
PROJECT = ("captioning", "text_attn", "attention_serve", "benchmarks")
# captioning's rooms, top to bottom: a module in one imports only modules of the rooms below it (and its own room's)
ROOMS = ("commands", "training", "model", "views", "photos")


@functools.cache
def _project_files() -> dict[str, pathlib.Path]:
    """Every project file by module name (a package's __init__.py by the package's name)."""
    files = {}
    for top in PROJECT:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _resolve(name: str, importer: str) -> str | None:
    """The project module ``name`` loads: itself, or the package above it that is a file (``pkg.func`` -> pkg); a
    benchmark's plain ``from _runs import ...`` is benchmarks/_runs.py (the script's folder is on sys.path)."""
    files = _project_files()
    if importer.startswith("benchmarks.") and f"benchmarks.{name}" in files:
        return f"benchmarks.{name}"
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def _import_graph() -> dict[str, frozenset[str]]:
    """module -> the project modules its file imports anywhere (at the top, inside functions, under TYPE_CHECKING):
    ``from pkg import name`` counts as ``pkg.name`` when that is a module, else as ``pkg``; relative imports are
    resolved against the file's package."""
    graph = {}
    for module, path in _project_files().items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {_resolve(a.name, module) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    found.add(_resolve(f"{base}.{alias.name}", module) or _resolve(base, module))
        graph[module] = frozenset(found - {None, module})
    return graph


def test_the_import_graph_sees_every_kind_of_import():
    graph = _import_graph()
    assert {"captioning.commands.caption", "text_attn.translation.translator", "benchmarks.multi30k"} <= set(graph)
    assert "captioning.model.onnx_encoder" in graph["captioning.model.encoder"]  # from captioning.model import x
    assert "benchmarks._multi30k" in graph["benchmarks.multi30k"]  # a benchmark's from _multi30k import ...
    assert "text_attn.translation.checkpoint" in graph["text_attn.translation.translator"]  # inside a function


def test_no_two_project_files_import_each_other():
    """What two files share lives below both (docs/code.md): no pair of modules of captioning, text_attn,
    attention_serve or benchmarks imports each other, in any form of import."""
    graph = _import_graph()
    pairs = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph.get(b, ())})
    assert pairs == []


def test_captioning_lives_in_rooms_and_each_imports_only_the_rooms_below():
    files = _project_files()
    loose = [m for m in files if m.startswith("captioning.") and m.split(".")[1] not in ROOMS]
    assert loose == []  # every module in a room (captioning/__init__.py is the public face)
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse(files[f"captioning.{room}"].read_text()))
        assert doc and "import" in doc.lower(), f"captioning/{room}/__init__.py: say what the room holds and may import"
    wrong = []
    for module, targets in _import_graph().items():
        if not module.startswith("captioning."):
            continue
        below = ROOMS[ROOMS.index(module.split(".")[1]) :]  # its own room and those below
        for target in targets:
            if target == "captioning" or (target.startswith("captioning.") and target.split(".")[1] not in below):
                wrong.append(f"{module} -> {target}")
    assert len([m for m in files if m.startswith("captioning.")]) > 30  # the scan really saw the rooms
    assert wrong == []


def test_one_public_face_per_family_loaded_on_first_use():
    """from captioning import Captioner, from text_attn import Translator, and every name their __all__ lists;
    importing either package imports no torch (caption --help stays fast)."""
    code = (
        "import sys, captioning, text_attn\n"
        "assert 'torch' not in sys.modules, 'import captioning / text_attn loaded torch'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
    # every public name, here (the names need no fresh interpreter: ~5 s less than a second one)
    import captioning
    import text_attn
    from captioning import Captioner
    from text_attn import Translator

    assert Captioner.__module__ == "captioning.model.captioner"
    assert Translator.__module__ == "text_attn.translation.translator"
    for family in (captioning, text_attn):
        assert family.__all__ and all(getattr(family, n) is not None for n in family.__all__)
