"""The README's screenshot of attention-serve's page: the bundled models, a bundled CC0 photo uploaded through the page
in a real browser (Playwright driving the system's Chromium), one word hovered.

    python benchmarks/serve_page_screenshot.py docs/serve_page.png [--photo astronaut.png] [--word 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from helpers.browser import page  # noqa: E402
from helpers.server import Server  # noqa: E402

from captioning.commands.caption import ASSETS  # noqa: E402
from text_attn.core.errors import new_file, positive_int  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=new_file, help="the PNG to write")
    p.add_argument("--photo", default="astronaut.png", help="a bundled photo (captioning/assets/photos)")
    p.add_argument("--word", type=positive_int, default=2, help="the word to hover, 1-based (default 2)")
    args = p.parse_args(argv)
    bundled = sorted(f.name for f in (ASSETS / "photos").iterdir() if f.suffix in (".png", ".jpg"))
    if args.photo not in bundled:  # met by the browser after the server started, as an Errno without the option
        p.error(f"--photo {args.photo}: not a bundled photo; one of {', '.join(bundled)}")
    server = Server([], Path(tempfile.mkdtemp()) / "server.log")
    try:
        with page(1000, 720) as pg:
            pg.goto(server.url + "/")
            pg.set_input_files("#pick", str(ASSETS / "photos" / args.photo))
            pg.wait_for_selector("#cap-out .w", timeout=120_000)
            pg.locator("#cap-out .w").nth(args.word - 1).hover()
            pg.wait_for_function(f"document.querySelector('#cap-out section').dataset.shown === '{args.word - 1}'")
            pg.screenshot(path=str(args.out))
            print(f"{pg.locator('#cap-out .words').inner_text()!r} -> {args.out}", file=sys.stderr)
            if pg.errors:
                print(f"page errors: {pg.errors}", file=sys.stderr)
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    sys.exit(run_main(main))
