"""A write error mid-run (the disk fills: here RLIMIT_FSIZE, the kernel's limit on how large this process may make a
file, which fails writes with EFBIG as a full disk fails them with ENOSPC) is one line naming the file, a non-zero exit
and no traceback, for translate --output and for text-train's checkpoints; what was written before stays whole. And a
stdout whose reader leaves in the middle of one large output is said and exit code 2, not dropped. (caption --jsonl:
tests/cli/test_caption_cli.py.)"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.multi30k import write_corpus

from text_attn.core.errors import close_quietly

BIN = Path(sys.executable).parent


def _limit(size: int):
    def child() -> None:  # writes past `size` bytes fail with EFBIG instead of killing the process (SIGXFSZ ignored)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return child


def _tiny_text_model(tmp: Path) -> Path:
    import torch

    from text_attn.core.vocab import Vocabulary
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.translator import Translator

    vocab = Vocabulary.build([["ein", "mann", "a", "man"]])
    cfg = Seq2SeqConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab), embed_dim=8, enc_hidden=8, dec_hidden=8,
                        attn_dim=8)  # fmt: skip
    torch.manual_seed(0)
    return Translator(Seq2Seq(cfg), vocab, vocab, "word", True).save(tmp / "m.pt") or tmp / "m.pt"


@pytest.mark.slow
def test_translate_output_full_mid_run(tmp_path):
    model = _tiny_text_model(tmp_path)
    out = tmp_path / "out.txt"
    lines = "".join("ein mann ein mann\n" for _ in range(400))
    cmd = [str(BIN / "translate"), "--model", str(model), "--max-len", "6", "--batch-size", "16", "--output", str(out)]
    done = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit(2000))  # FILE.run.json (~340 bytes) fits; the lines do not  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert errors == [f"translate: error: cannot write --output {out}: [Errno 27] File too large ({out}: --resume "
                      "continues after the inputs done)"]  # fmt: skip
    written = out.read_text().splitlines()
    assert 0 < len(written) < 400


@pytest.mark.slow
def test_text_train_checkpoint_full(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    cmd = [str(BIN / "text-train"), "fit", "--data.task", "pair", "--data.root", str(corpus), "--data.src_lang", "de",
           "--data.tgt_lang", "en", "--trainer.max_steps", "2", "--trainer.default_root_dir", str(tmp_path / "run"),
           "--trainer.enable_progress_bar", "false", "--model.network.embed_dim", "8",
           "--model.network.enc_hidden", "8", "--model.network.dec_hidden", "8", "--model.network.attn_dim", "8",
           "--trainer.logger", "false"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, preexec_fn=_limit(20_000), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("text-train: error: cannot write checkpoint "), errors
    assert errors[0].endswith("[Errno 27] File too large") or "File too large" in errors[0]
    assert not list((tmp_path / "run").rglob("*.tmp"))  # the half-written file is removed


@pytest.mark.slow
def test_exports_full_disk(tmp_path):
    """caption-export and text-export on a full disk: one line, exit code 2, no half-written file left behind. Both
    run through their entry points in one limited process (one interpreter start, not two)."""
    text_model = _tiny_text_model(tmp_path)
    shapes = Path(__file__).resolve().parents[2] / "captioning" / "assets" / "shapes_soft.pt"
    runs = {"caption-export": ("captioning.commands.export", shapes),
            "text-export": ("text_attn.translation.export", text_model)}  # fmt: skip
    code = "import sys, importlib\n"
    for prog, (module, src) in runs.items():
        out = tmp_path / f"{prog}.pt"
        code += (f"try:\n    importlib.import_module({module!r}).export_main([{str(src)!r}, {str(out)!r}])\n"
                 f"except SystemExit as e:\n    print({prog!r}, e.code, file=sys.stderr, flush=True)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit(2000))  # fmt: skip
    expected = []
    for prog in runs:
        out = tmp_path / f"{prog}.pt"
        expected += [f"{prog}: error: cannot write {out}: File too large", f"{prog} 2"]
        assert not out.exists() and not list(tmp_path.glob(f"{prog}.pt*"))
    assert done.stderr.splitlines() == expected, done.stderr


def test_a_reader_that_leaves_mid_output_is_one_line_and_exit_code_2():
    """One large output (caption --json's list) to a pipe whose reader leaves after a few bytes: Python's buffered
    stdout took the kernel's short write as the whole and dropped the rest, exit code 0 and nothing said; errors.emit
    writes until all is written, so the gone reader is an error line and exit code 2, as for any line."""
    code = "from text_attn.core.errors import emit\nemit('caption', 'x' * 1_000_000)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=Path(__file__).parents[2])  # fmt: skip
    assert proc.stdout.read(10) == b"x" * 10
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 2 and err == "caption: error: cannot write stdout: [Errno 32] Broken pipe\n", err


@contextlib.contextmanager
def _reader_gone():
    """Stdout a pipe whose reader has left (`command | true`), line-buffered as under PYTHONUNBUFFERED=1: a print
    there raises BrokenPipeError at once. Set inside the test (pytest puts its capture back when the call starts)."""
    read, write = os.pipe()
    os.close(read)
    stream, saved = open(write, "w", buffering=1), sys.stdout  # noqa: SIM115 - closed below
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = saved
        close_quietly(stream)


def test_an_export_says_wrote_on_stderr_and_needs_no_stdout(tmp_path, capsys):
    """`text-export bahdanau x.pt | true` wrote x.pt, then its "wrote" line on stdout ended in a BrokenPipeError
    traceback, exit code 1. That line goes to stderr, as caption's and translate's "wrote" lines do: an export prints
    nothing on stdout, so a stdout whose reader is gone changes nothing."""
    from captioning.commands.export import export_main as caption_export
    from tests.helpers.tiny_captioner import tiny_model_file
    from text_attn.translation.export import export_main as text_export

    sources = {"text-export": (text_export, _tiny_text_model(tmp_path)),
               "caption-export": (caption_export, tiny_model_file(tmp_path / "c.pt"))}  # fmt: skip
    for prog, (main, src) in sources.items():
        out = tmp_path / f"{prog}.pt"
        with _reader_gone():
            assert main([str(src), str(out)]) == 0 and out.is_file()
        err = capsys.readouterr().err
        assert err.startswith(f"wrote {out} from model file {src}: ") and err.count("\n") == 1, err


def test_a_report_whose_stdout_reader_is_gone_is_one_line(tmp_path, capsys):
    """`text-train report RUN | true`: its summary line (its output) cannot be written once the PNG is: one line and
    exit code 2, as caption's and translate's output, not a traceback with exit code 1; the PNG and its "wrote" line
    stay."""
    from helpers.run_logs import write_run

    from text_attn.translation.train_cli import train_main

    write_run(tmp_path / "run")
    with pytest.raises(SystemExit) as exc, _reader_gone():
        train_main(["report", str(tmp_path / "run")])
    png = tmp_path / "run" / "report.png"
    assert exc.value.code == 2 and png.is_file()
    assert capsys.readouterr().err.splitlines() == [
        f"wrote {png}",
        "text-train report: error: cannot write stdout: [Errno 32] Broken pipe",
    ]
