"""caption and translate where the system's text and streams are not the usual ones: a file name that is not UTF-8,
a locale that is not UTF-8 (``LC_ALL=C``, ``PYTHONIOENCODING=ascii``), stdout or stderr closed (``>&-``), ``-`` as an
output name, and ONNX Runtime's telemetry. Each: the run's output or one line and the documented exit code, never a
traceback. On tiny random-weight models (the plumbing is under test); the processes started here import no torch,
except the ONNX Runtime one.

A process under ``LC_ALL=C`` decodes the UTF-8 bytes of "Mädchen" in its arguments and file names as
"M\\udcc3\\udca4dchen": the in-process tests give the commands that very text (the same bytes to the file functions
of this UTF-8 process)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.one_line import refused
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_subword_model_file, tiny_word_model_file
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.photos.image_paths import image_paths
from text_attn.translation.translate_cli import translate_main

FAST = ["--max-len", "3", "--workers", "0"]
GIVEN_FAST = FAST[2:]  # --given reads a caption whole: --max-len is refused beside it
C_LOCALE_MAEDCHEN = "M\udcc3\udca4dchen.png"  # "Mädchen.png" as a process under LC_ALL=C reads its name

pytestmark = pytest.mark.skipif(sys.getfilesystemencoding() != "utf-8", reason="the tests' own locale is not UTF-8")


@pytest.fixture(scope="module")
def cap_model(tmp_path_factory):
    return tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    return tiny_subword_model_file(tmp_path_factory.mktemp("text"))


def _photo(path: str | bytes) -> None:
    """A small PNG at ``path`` (bytes: a name that need not be UTF-8)."""
    buf = io.BytesIO()
    Image.new("RGB", (48, 40), "red").save(buf, format="PNG")
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def _ascii_stdout(monkeypatch) -> io.TextIOWrapper:
    """A stdout that can only write ASCII, as ``PYTHONIOENCODING=ascii`` gives (strict, no file descriptor)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", out)
    return out


def _written(out: io.TextIOWrapper) -> str:
    out.flush()
    return out.buffer.getvalue().decode("ascii")


# --- 1. a file name that is not UTF-8 on the --html page --------------------------------------------------------------


def test_a_photo_whose_name_is_not_utf8_is_on_the_page_readably(cap_model, tmp_path, capsys):
    folder = tmp_path / "n"
    folder.mkdir()
    _photo(os.path.join(os.fsencode(folder), b"\xff.png"))
    page = tmp_path / "n.html"
    assert caption_main([str(folder), "--model", str(cap_model), *FAST, "--html", str(page)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {page}" in err and "wrote None" not in err, err
    assert f"<h2>1. {folder}/\\xff.png " in page.read_text(encoding="utf-8")


# --- 2. stdout or stderr closed ---------------------------------------------------------------------------------------

COMMAND = textwrap.dedent("""
    import sys
    from text_attn.core.errors import emit, fail
    from text_attn.core.fast_exit import leaving
    from text_attn.core.safe_files import inert_output

    @inert_output
    def main():
        what = sys.argv[1]
        if what == "refuse":
            fail("cmd", "--x 0: must be at least 1")
        print("cmd: note: a note", file=sys.stderr)
        if what == "file":
            open(sys.argv[2], "w").write("the records")
            print("wrote", sys.argv[2])  # not the command's output: dropped (a progress bar, "wrote model.pt")
            return 0
        emit("cmd", "a caption")
        return 1

    sys.argv[0] = "cmd"
    leaving(main)()
""")


def _run(args: list[str], stream: str, how: str = "closed", **kwargs) -> subprocess.CompletedProcess:
    """``python -c COMMAND args`` with ``stream`` (stdout or stderr) closed, or open for reading only (``how``
    "read-only": what a shell wrapper such as a pyenv shim leaves there, its script)."""
    fd = {"stdout": 1, "stderr": 2}[stream]
    redirect = f"{fd}>&-" if how == "closed" else f"{fd}</dev/null"
    pipes = {name: subprocess.PIPE for name in ("stdout", "stderr") if name != stream}
    return subprocess.run(["sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable, *args], text=True, timeout=60,
                          **pipes, **kwargs)  # fmt: skip


def test_a_closed_stdout_is_a_broken_pipe_where_output_goes_there_and_nothing_where_it_does_not(tmp_path):
    done = _run(["-c", COMMAND, "stdout"], "stdout")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "cmd: note: a note\ncmd: error: cannot write stdout: [Errno 9] stdout is closed\n"
    done = _run(["-c", COMMAND, "file", str(tmp_path / "out")], "stdout")
    assert (done.returncode, done.stderr) == (0, "cmd: note: a note\n")
    assert (tmp_path / "out").read_text() == "the records"


@pytest.mark.parametrize("how", ["closed", "read-only"])
def test_a_closed_stderr_keeps_the_exit_code_the_run_would_have(how):
    assert _run(["-c", COMMAND, "stdout"], "stderr", how).stdout == "a caption\n"
    assert _run(["-c", COMMAND, "stdout"], "stderr", how).returncode == 1
    assert _run(["-c", COMMAND, "refuse"], "stderr", how).returncode == 2
    caption = "import sys; sys.argv[0] = 'caption'; from captioning.commands.caption import main; main()"
    assert _run(["-c", caption, "x.jpg", "--beam-size", "0"], "stderr", how).returncode == 2  # before any import


@pytest.mark.long
def test_translations_to_a_closed_stdout_are_refused_before_any_is_made(tmp_path):
    translate = "import sys; sys.argv[0] = 'translate'; from text_attn.translation.translate_cli import main; main()"
    model = str(tiny_word_model_file(tmp_path / "t.pt"))
    done = _run(["-c", translate, "--model", model, "ma pipo"], "stdout")
    assert (done.returncode, done.stderr.splitlines()[-1]) == (
        2,
        "translate: error: cannot write stdout: [Errno 9] stdout is closed (--output FILE writes them to a file)",
    )
    done = _run(["-c", translate, "--model", model, "ma pipo", "--output", str(tmp_path / "o.txt")], "stdout")
    assert done.returncode == 0 and (tmp_path / "o.txt").read_text().count("\n") == 1


def test_help_with_stdout_closed_ends_quietly():
    translate = "import sys; sys.argv[0] = 'translate'; from text_attn.translation.translate_cli import main; main()"
    done = _run(["-c", translate, "--help"], "stdout")
    assert (done.returncode, done.stderr) == (0, "")


# --- 3. an output encoding that is not UTF-8, names on stdin ----------------------------------------------------------


def test_text_the_output_encoding_cannot_hold_is_escaped(cap_model, tmp_path, monkeypatch, capsys):
    _photo(tmp_path / "Mädchen.png")
    out = _ascii_stdout(monkeypatch)
    args = ["--model", str(cap_model), *FAST]
    assert caption_main([str(tmp_path / "Mädchen.png"), str(tmp_path / "Mädchen.png"), *args]) == 0
    assert caption_main([str(tmp_path / "Mädchen.png"), "--given", "a red café", *args[:2], *GIVEN_FAST]) == 0
    printed = _written(out).splitlines()
    # named twice: captioned once, on a line with its path (two inputs given)
    assert printed[0].startswith(f"{tmp_path}/M\\xe4dchen.png\t") and "\ta red caf\\xe9\t" in printed[1], printed


def test_names_on_stdin_are_read_as_the_arguments_are(tmp_path, monkeypatch):
    # stdin's own encoding (ascii here) is not the names': their bytes are decoded as argv's (os.fsdecode)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"u/M\xc3\xa4dchen.jpg\nu/\xff.jpg\n"),
                                                       encoding="ascii"))  # fmt: skip
    assert list(image_paths(["-"])) == ["u/Mädchen.jpg", "u/\udcff.jpg"]


# --- 4. UTF-8 German under a locale that is not UTF-8 -----------------------------------------------------------------


def test_utf8_text_is_translated_whatever_the_locale(text_model, monkeypatch, capsys):
    args = ["--model", str(text_model), "--max-len", "3"]
    assert translate_main(["Ein M\udcc3\udca4dchen l\udcc3\udca4uft.", *args]) == 0  # argv under LC_ALL=C
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("Ein Mädchen läuft.\n".encode()), encoding="ascii"))
    assert translate_main(args) == 0  # stdin under PYTHONIOENCODING=ascii
    _ascii_stdout(monkeypatch)
    assert translate_main(["Das Café ist geöffnet.", "--given", "The caf\udcc3\udca9 is open.", *args[:2]]) == 0
    assert "\tThe caf\\xe9 is open.\t" in _written(sys.stdout)
    err = capsys.readouterr().err
    assert "not valid UTF-8" not in err and "Traceback" not in err, err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Ein M\xe4dchen.\n"), encoding="utf-8"))
    assert translate_main(args) == 1  # bytes that are not UTF-8: still the one line
    assert "translate: error: input 1: not valid UTF-8 text" in capsys.readouterr().err


def test_a_given_caption_is_read_as_utf8_whatever_the_locale(cap_model, tmp_path, capsys):
    _photo(tmp_path / "a.png")
    args = [str(tmp_path / "a.png"), "--model", str(cap_model), *GIVEN_FAST, "--json"]
    assert caption_main([*args, "--given", "a red caf\udcc3\udca9"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["given"][0]["caption"] == "a red café"
    # --given-file's names (UTF-8) found for a photo whose name the locale could not decode
    _photo(tmp_path / "Mädchen.png")
    (tmp_path / "given.tsv").write_text("Mädchen.png\ta red square\n", encoding="utf-8")
    args = [str(tmp_path / C_LOCALE_MAEDCHEN), "--model", str(cap_model), *GIVEN_FAST, "--json"]
    assert caption_main([*args, "--given-file", str(tmp_path / "given.tsv")]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["image"] == str(tmp_path / "Mädchen.png") and record["caption"] == "a red square"


# --- 5. records name photos by their UTF-8 names, so --resume finds them under any locale -----------------------------


def test_a_record_names_the_photo_by_its_utf8_name_and_resume_finds_it(cap_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("u").mkdir()
    _photo("u/Mädchen.png")
    _photo(b"u/\xff.png")
    out, args = "u.jsonl", ["--model", str(cap_model), *FAST, "--jsonl", "u.jsonl"]
    assert caption_main([f"u/{C_LOCALE_MAEDCHEN}", "u/\udcff.png", *args]) == 0  # as a run under LC_ALL=C names them
    lines = Path(out).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["image"] for line in lines] == ["u/Mädchen.png", "u/\udcff.png"]
    assert '"u/\\udcff.png"' in lines[1]  # bytes that are not UTF-8: JSON's escape of U+DC00 + byte
    assert caption_main(["u", *args, "--resume"]) == 0  # under a UTF-8 locale
    assert "2 image(s) already in u.jsonl" in capsys.readouterr().err
    assert len(Path(out).read_text(encoding="utf-8").splitlines()) == 2


def test_an_output_named_in_utf8_is_written_under_a_locale_that_is_not(tmp_path):
    """Every output is written through a temporary file named after it: under LC_ALL=C that name was made of the
    characters, not the bytes, and could not be opened (a UnicodeEncodeError: --overlay, --jsonl, --html)."""
    write = "import sys; from text_attn.core.safe_files import write_text; write_text(sys.argv[1], 'x')"
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", write, "Mädchen-attention.png"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == ["Mädchen-attention.png"]


def test_a_file_written_before_names_were_utf8_is_resumed(cap_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("u").mkdir()
    _photo("u/Mädchen.png")
    args = ["--model", str(cap_model), *FAST, "--jsonl", "u.jsonl"]
    assert caption_main(["u", *args]) == 0
    old = Path("u.jsonl").read_text(encoding="utf-8").replace("M\\u00e4dchen", "M\\udcc3\\udca4dchen")
    Path("u.jsonl").write_text(old, encoding="utf-8")  # as a run under LC_ALL=C wrote it
    assert caption_main(["u", *args, "--resume"]) == 0
    assert "1 image(s) already in u.jsonl" in capsys.readouterr().err


# --- 6. '-' as an output ----------------------------------------------------------------------------------------------


def test_dash_as_the_translations_or_records_output_is_stdout(cap_model, text_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _photo("a.png")
    assert translate_main(["Ein Hund.", "--model", str(text_model), "--max-len", "3", "--output", "-"]) == 0
    assert capsys.readouterr().out.count("\n") == 1
    assert caption_main(["a.png", "nothere.png", "--model", str(cap_model), *FAST, "--jsonl", "-"]) == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["image"] for r in records] == ["a.png", "nothere.png"] and records[1]["error"]  # a failed one too
    assert not Path("-").exists()


REFUSED = "use ./- for a file named -"


@pytest.mark.parametrize(
    ("main", "args", "line"),
    [
        (caption_main, ["a.png", "--html", "-"], f"caption: error: --html -: --html writes a page, not stdout; "
         f"{REFUSED}"),
        (caption_main, ["a.png", "--overlay", "-"],
         "caption: error: --overlay -: --overlay writes a folder of PNGs, not stdout; use ./- for a folder named -"),
        (caption_main, ["a.png", "--jsonl", "-", "--resume"],
         "caption: error: --resume continues a --jsonl FILE; --jsonl - writes the records to stdout: give a file"),
        (translate_main, ["Ein Hund.", "--html", "-"], f"translate: error: --html -: --html writes a page, not stdout; "
         f"{REFUSED}"),
        (translate_main, ["Ein Hund.", "--plot", "-"], f"translate: error: --plot -: --plot writes PNG images, not "
         f"stdout; {REFUSED}"),
    ],
)  # fmt: skip
def test_dash_for_a_file_only_output_is_refused(main, args, line, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert refused(main, capsys, *args) == line
    assert not Path("-").exists()


# --- 7. ONNX Runtime writes nothing of its own and says nothing -------------------------------------------------------

SESSION = textwrap.dedent("""
    from pathlib import Path
    import onnx
    from onnx import TensorProto, helper
    from captioning.model import onnx_encoder

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx_encoder._session(Path("g.onnx"), model.SerializeToString(), 1)
""")


@pytest.mark.long
def test_onnx_runtime_keeps_no_device_id_and_prints_no_warning(tmp_path):
    """It wrote ~/.cache/Microsoft/DeveloperTools/ on every run, and where it could not (a read-only home), printed a
    coloured warning whatever NO_COLOR said. One process (it imports torch): the cache written to, nothing else."""
    pytest.importorskip("onnxruntime")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    done = subprocess.run([sys.executable, "-c", SESSION], env={**env, "HOME": str(home), "NO_COLOR": "1"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert list(home.rglob("*")) == []
