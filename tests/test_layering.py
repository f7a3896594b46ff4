"""The layering rule of DESIGN.md: text_attn is the lower layer and never imports captioning."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_text_attn_sources_never_import_captioning():
    offenders = []
    for path in sorted((ROOT / "text_attn").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "captioning"]
    assert offenders == []
    assert len(list((ROOT / "text_attn").glob("*.py"))) > 5  # the scan really saw the package


def test_importing_every_text_attn_module_loads_no_captioning_module():
    mods = [f"text_attn.{p.stem}" for p in (ROOT / "text_attn").glob("*.py") if p.stem != "__init__"]
    code = "import sys, importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in mods)
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'captioning'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_translator_and_the_caption_model_need_no_lightning():
    """Inference (translate, caption) loads a model file and decodes: it must not import the training stack."""
    code = "import sys, text_attn.translator, captioning.model\nprint('pytorch_lightning' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
