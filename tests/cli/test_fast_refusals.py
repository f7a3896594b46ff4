"""A mistyped path is answered at once: a missing model file (caption, translate, attention-serve), IMAGE arguments
none of which exists or folders none of which holds an image (caption), an output in a folder that does not exist
(caption --jsonl, translate --output, the exports' OUT), a missing or broken --config or a missing --ckpt_path
(caption-train, text-train, also their optimize) and a missing checkpoint to export (caption-export, text-export) are
refused before torch is imported, in the words and with the exit code the run gives them after loading; a run that
writes records for its failed images still writes them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers.server import free_port

from text_attn.core.lightning_cli import refuse_missing_files

CAPTION = ("captioning.commands.caption", "caption_main")
TRANSLATE = ("text_attn.translation.translate_cli", "translate_main")
CAPTION_TRAIN = ("captioning.commands.train", "train_main")
TEXT_TRAIN = ("text_attn.translation.train_cli", "train_main")
CAPTION_EXPORT = ("captioning.commands.export", "export_main")
TEXT_EXPORT = ("text_attn.translation.export", "export_main")
SERVE = ("attention_serve.cli", "serve_main")
TWO = ["gone.jpg", "lost.png"]


def _probes(entry: tuple[str, str], argvs: list[list[str]], cwd) -> list[tuple[int, str, str, bool]]:
    """Each command line's main run in turn, in one fresh interpreter (another one costs ~4 s): for each, (exit code,
    stdout, stderr, whether torch was imported by its end)."""
    module, main = entry
    probe = "\n".join([
        "import sys, traceback",
        f"from {module} import {main}",
        f"for argv in {argvs!r}:",
        "    try:",
        f"        code = {main}(argv)",
        "    except SystemExit as e:",
        "        code = e.code",
        "    except Exception:  # a crash is this case's failure, not the later cases'",
        "        traceback.print_exc()",
        "        code = 1",
        "    print('EXIT', code, 'torch' in sys.modules, flush=True)",
        "    print('---', file=sys.stderr, flush=True)",
    ])  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=cwd)
    runs, out = [], []
    for line in done.stdout.splitlines():
        if line.startswith("EXIT "):
            _, code, torch = line.split()
            runs.append((int(code), "\n".join(out), torch == "True"))
            out = []
        else:
            out.append(line)
    errs = done.stderr.split("---\n")
    assert len(runs) == len(argvs), done.stdout + done.stderr
    return [(code, text, errs[i], torch) for i, (code, text, torch) in enumerate(runs)]


def _probe(entry: tuple[str, str], argv: list[str], cwd) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, whether torch was imported) of the command's main run in a fresh interpreter."""
    return _probes(entry, [argv], cwd)[0]


# (entry, argv, exit code, stderr lines)
MISSING = [
    (CAPTION, ["gone.jpg"], 1, ["caption: error: gone.jpg: no such file"]),
    (CAPTION, TWO, 1, [f"caption: error: {n}: no such file" for n in TWO]),
    (CAPTION, ["--model", "nope.pt", "photo.jpg"], 2, ["caption: error: nope.pt: model file not found"]),
    (
        CAPTION,
        ["empty", "notes"],
        2,
        ["caption: error: no images: empty, notes: no image files"],
    ),  # fmt: skip
    (TRANSLATE, ["--model", "nope.pt", "Hallo"], 2, ["translate: error: nope.pt: model file not found"]),
    (
        CAPTION,
        ["photo.jpg", "--jsonl", "no/o.jsonl"],
        2,
        ["caption: error: cannot use --jsonl no/o.jsonl: the folder no does not exist"],
    ),  # fmt: skip
    (
        TRANSLATE,
        ["--output", "no/o.txt", "Hallo"],
        2,
        ["translate: error: cannot write --output no/o.txt: the folder no does not exist"],
    ),  # fmt: skip
    (
        CAPTION,
        ["photo.jpg", "--html", "no/p.html"],
        2,
        ["caption: error: cannot use --html no/p.html: the folder no does not exist"],
    ),  # fmt: skip
    (
        TRANSLATE,
        ["--html", "no/p.html", "Hallo"],
        2,
        ["translate: error: cannot write --html no/p.html: the folder no does not exist"],
    ),  # fmt: skip
    (
        CAPTION_TRAIN,
        ["fit", "--config", "nope.yaml"],
        2,
        ["caption-train: error: --config nope.yaml: no such file"],
    ),
    (TEXT_TRAIN, ["fit", "-c", "."], 2, ["text-train: error: --config .: is a directory"]),
    (CAPTION_EXPORT, ["gone.ckpt", "out.pt"], 2, ["caption-export: error: gone.ckpt: no such file"]),
    (TEXT_EXPORT, [".", "out.pt"], 2, ["text-export: error: .: a folder, not a checkpoint or model file"]),
    # said after the model loaded (2.3 s), as "cannot write no/x.pt: No such file or directory"
    (
        CAPTION_EXPORT,
        ["photo.jpg", "no/x.pt"],
        2,
        ["caption-export: error: cannot write no/x.pt: the folder no does not exist"],
    ),
    (
        TEXT_EXPORT,
        ["ok.yaml", "no/x.pt"],
        2,
        ["text-export: error: cannot write no/x.pt: the folder no does not exist"],
    ),
    (
        TEXT_EXPORT,
        ["ok.yaml", "ok.yaml/x.pt"],
        2,
        ["text-export: error: cannot write ok.yaml/x.pt: ok.yaml is not a folder"],
    ),
    (
        TEXT_TRAIN,
        ["fit", "--config=bad.yaml"],
        2,
        ["text-train: error: --config bad.yaml: not valid YAML: line 1, column 5: mapping values are not allowed here"],
    ),
    (
        CAPTION_TRAIN,
        ["test", "--config", "ok.yaml", "--ckpt_path=gone.ckpt"],
        2,
        ["caption-train: error: --ckpt_path gone.ckpt: no such file"],
    ),
    (
        TEXT_TRAIN,
        ["optimize", "--config", "nope.yaml", "--out", "chunks"],
        2,
        ["text-train optimize: error: --config nope.yaml: no such file"],
    ),
]


@pytest.fixture(scope="module")
def missing_probed(tmp_path_factory) -> dict[tuple, tuple[int, str, str, bool]]:
    """(entry, *argv) -> what _probe says of each case of MISSING, all in one folder; the cases of one command in one
    interpreter (a fresh one each cost ~0.3 s: ~5 s in all). Whether torch is imported is read after each case: a case
    that imports it fails, and the later ones of its command with it."""
    tmp = tmp_path_factory.mktemp("missing")
    (tmp / "photo.jpg").write_bytes(b"")  # there, so that only the model is missing
    (tmp / "ok.yaml").write_text("trainer:\n  max_steps: 1\n")
    (tmp / "bad.yaml").write_text("a: b: c\n")
    (tmp / "empty").mkdir()
    (tmp / "notes" / "sub").mkdir(parents=True)
    (tmp / "notes" / "sub" / "read.txt").write_text("no photo here")
    by_entry: dict[tuple[str, str], list[list[str]]] = {}
    for entry, argv, _, _ in MISSING:
        by_entry.setdefault(entry, []).append(argv)
    return {(entry, *argv): got for entry, argvs in by_entry.items()
            for argv, got in zip(argvs, _probes(entry, argvs, tmp), strict=True)}  # fmt: skip


@pytest.mark.parametrize(("entry", "argv", "code", "lines"), MISSING)
def test_a_missing_file_is_refused_before_torch_is_imported(entry, argv, code, lines, missing_probed):
    got, _, err, torch = missing_probed[(entry, *argv)]
    assert (got, err.splitlines(), torch) == (code, lines, False)


def test_a_missing_model_file_is_refused_before_the_server_imports_torch(tmp_path):
    argv = ["--caption-model", "none", "--text-model", "nope.pt", "--port", str(free_port())]
    got, _, err, torch = _probe(SERVE, argv, tmp_path)
    assert (got, err.splitlines(), torch) == (2, ["attention-serve: error: --text-model nope.pt: no such model file"],
                                              False)  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "name", "line"),
    [
        ("--text-model", "flickr8k", "--text-model flickr8k is a bundled caption model: attention-serve "
         "--caption-model flickr8k uses it; the bundled text models are multi30k_de_en, transformer, bahdanau"),
        ("--caption-model", "bahdanau", "--caption-model bahdanau is a bundled text model: attention-serve "
         "--text-model bahdanau uses it; the bundled caption models are flickr8k, shapes"),
    ],
)  # fmt: skip
def test_the_other_familys_bundled_name_is_said_before_the_server_imports_torch(flag, name, line, tmp_path):
    """`--text-model flickr8k` said "no such model file", as if the name were mistyped."""
    other = "--caption-model" if flag == "--text-model" else "--text-model"
    got, _, err, torch = _probe(SERVE, [flag, name, other, "none", "--port", str(free_port())], tmp_path)
    assert (got, err.splitlines(), torch) == (2, [f"attention-serve: error: {line}"], False)


@pytest.mark.long
def test_the_same_refusals_come_from_a_run_that_writes_records(tmp_path):
    """--json writes a record for each failed image, so it keeps to the run (torch loaded); its words are the same.
    The run's own refusal of a folder without images follows in the same interpreter (a second one costs ~4 s)."""
    (tmp_path / "empty").mkdir()
    (got, out, err, torch), (got2, _, err2, torch2) = _probes(
        CAPTION, [["gone.jpg", "--json"], ["empty", "--jsonl", "o.jsonl"]], tmp_path
    )
    assert got == 1 and torch and err.splitlines() == ["caption: error: gone.jpg: no such file"]
    assert [r["error"] for r in json.loads(out)] == ["gone.jpg: no such file"]
    assert got2 == 2 and torch2
    assert err2.splitlines() == ["caption: error: no images: empty: no image files"]


@pytest.mark.parametrize("name", ["null", "~", "last", "best", "hpc", "s3://bucket/run.ckpt"])
def test_what_only_the_run_can_resolve_passes_the_early_check(name):
    """No checkpoint (YAML's null), Lightning's own names and remote paths (refused by the run, with its reason)."""
    refuse_missing_files("text-train", ["fit", "--ckpt_path", name])
    refuse_missing_files("text-train", ["fit", f"--ckpt_path={name}"])


def test_a_url_is_named_as_typed_and_said_to_be_downloaded_first(tmp_path, capsys):
    """Nothing downloads at run time. A URL was "no such file", and as a model path ``https:/host/m.pt``: one slash
    fewer than the user typed (``Path`` collapses them)."""
    from captioning.commands.caption import caption_main
    from captioning.model.captioner import Captioner
    from text_attn.core.modelfile import ModelFileError
    from text_attn.translation.translate_cli import translate_main
    from text_attn.translation.translator import Translator

    said = ": a URL: only local files are read; download it first"
    url = "https://example.org/m.pt"
    photo = "https://example.org/a.jpg"
    # a missing photo exits 1 as every failed input does (README: exit codes); a missing model file 2
    cases = [("caption", caption_main, [photo], photo, 1), ("caption", caption_main, ["--model", url, "a.jpg"], url, 2),
             ("translate", translate_main, ["--model", url, "Hallo"], url, 2)]  # fmt: skip
    for prog, main, argv, named, code in cases:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert (exc.value.code, capsys.readouterr().err) == (code, f"{prog}: error: {named}{said}\n")
    for load in (Captioner.load, Translator.load):
        with pytest.raises(ModelFileError, match=f"^{url}{said}$"):
            load(url)
    with pytest.raises(ModelFileError, match="nope.pt: model file not found$"):  # a plain path: as before
        Translator.load(tmp_path / "nope.pt")
    from attention_serve.models import check_files

    with pytest.raises(ModelFileError, match=f"^--text-model {url}{said}$"):
        check_files(None, url)
