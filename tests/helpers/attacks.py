"""What the security tests plant (tests/cli/test_security.py, tests/core/test_safe_files.py): a checkpoint whose
unpickling runs a command, a shared library whose constructor runs one, a local web server, links and FIFOs. Each
attack leaves a marker file when its code runs, so a test asserts the marker is absent."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path


class _Runs:
    """Unpickled, it runs ``touch MARKER`` (what any pickle may do: call a function with arguments)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


def code_checkpoint(path: Path, marker: Path) -> Path:
    """A file shaped like a Lightning checkpoint whose unpickling runs code (touches ``marker``)."""
    import torch

    ckpt = {"state_dict": {}, "pytorch-lightning_version": "2.6.0", "hyper_parameters": {}, "epoch": 0}
    ckpt["callbacks"] = _Runs(marker)
    torch.save(ckpt, path)
    return path


def constructor_library(path: Path, marker: Path) -> Path:
    """A shared library whose constructor (run by dlopen, before any symbol is looked up) touches ``marker``."""
    src = path.with_suffix(".c")
    src.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void planted(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) fclose(f);\n'
        "}\n"
    )
    subprocess.run(["cc", "-shared", "-fPIC", str(src), "-o", str(path)], check=True, capture_output=True)
    return path


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """A web server on 127.0.0.1 serving ``folder``; yields its base URL and the paths it was asked for."""
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server method name
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def scan_bomb(side: int, scans: int) -> bytes:
    """A progressive JPEG (grey, ``side`` x ``side``) whose smallest scan is repeated until it holds ``scans``: each
    scan is a pass over every block, so a large one of thousands decodes for minutes (a "scan bomb")."""
    import io
    import struct

    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (side, side), 128).save(buf, "JPEG", progressive=True, quality=90)
    data, found, at = buf.getvalue(), [], 2
    while data[at + 1] != 0xD9:  # the segments up to the end of the picture
        end = at + 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]
        if data[at + 1] == 0xDA:  # a scan: its header, then its coded data up to the next marker
            while not (data[end] == 0xFF and data[end + 1] not in (0, *range(0xD0, 0xD8))):
                end += 1
            found.append(data[at:end])
        at = end
    eoi = data.rfind(b"\xff\xd9")
    return data[:eoi] + min(found, key=len) * (scans - len(found)) + data[eoi:]
