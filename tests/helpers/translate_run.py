"""``translate`` run in process through its entry point, with stdin given: (exit code, stdout, stderr)."""

from __future__ import annotations

import io

from text_attn.translation.translate_cli import translate_main


def run_translate(argv: list[str], capsys, monkeypatch, stdin: str = "") -> tuple[int, str, str]:
    """``translate ARGV`` with ``stdin`` as its standard input (empty: none), argparse's and fail()'s exits caught."""
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = translate_main(argv)
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err
