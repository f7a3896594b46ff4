"""README's third Quick-start command as written (`attention-serve`, the bundled models; on a free port instead of
8000, which a test machine may have taken): the page, a photo captioned, a German sentence translated, the screenshot's
caption, and Ctrl-C ends it with exit code 0. Slow: it loads both bundled models (-m slow)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from helpers.server import Server

from captioning.model.bundled import DEMO_PHOTOS


@pytest.mark.slow
def test_the_readme_server_command_serves_the_bundled_models(tmp_path):
    server = Server([], tmp_path / "server.log")
    try:
        status, _, page = server.get("/")
        assert status == 200 and "flickr8k (bundled)" in page and "multi30k_de_en (bundled)" in page
        astronaut = next(p for p in DEMO_PHOTOS if p.name == "astronaut.png")
        status, _, rec = server.post_file("/caption", Path(astronaut).read_bytes())
        assert (
            status == 200 and rec["caption"] == "a group of people are in a race" and rec["grid"] == [9, 9]
        )  # README's picture
        assert rec["options"] == {"beam_size": 5, "max_len": 30, "length_penalty": 1.0, "no_repeat_ngram": 3}
        status, _, res = server.post_json("/translate", {"text": "Ein Hund rennt über eine grüne Wiese."})
        assert status == 200 and res["translations"][0]["translation"].startswith("A dog")
    finally:
        code = server.stop(signal.SIGINT, group=True)
    assert code == 0, server.log.read_text()[-2000:]
