"""``caption`` with every batch slowed by CAPTION_SLOW seconds (default 0.3), so a test can kill a run part of the
way through. A script, not ``python -c``: Lightning's launcher starts the other processes by running it again."""

from __future__ import annotations

import os
import sys
import time

import captioning.commands.caption_batch as cli
from captioning.commands.caption import caption_main

_real = cli.caption_items


def _slow(*args, **kwargs):
    time.sleep(float(os.environ.get("CAPTION_SLOW", "0.3")))
    return _real(*args, **kwargs)


cli.caption_items = _slow

if __name__ == "__main__":
    sys.exit(caption_main(sys.argv[1:]))
