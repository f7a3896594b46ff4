"""text_attn.core.html_page, the page code the interactive HTML reports share: quantised attention round-trips, and a
page that cannot be finished leaves the old one whole.
(The reports themselves, made through the real CLIs and driven in a headless browser: tests/cli/test_html_pages.py.)"""

import numpy as np

from text_attn.core.html_page import dequantise, quantise


def test_quantised_attention_round_trips_within_1_255():
    values = np.random.default_rng(0).random((3, 7, 5))
    back = dequantise(quantise(values), values.shape)
    assert back.shape == values.shape and np.abs(back - values).max() <= 1 / 255
    assert dequantise(quantise([[-0.5, 0.0, 1.0, 2.0]])).tolist() == [0.0, 0.0, 1.0, 1.0]  # clipped to [0, 1]


def test_a_page_that_cannot_be_finished_leaves_the_old_one_whole(tmp_path, monkeypatch):
    """The page grows in a temporary file beside it and replaces it on close; a write failing midway (a full disk)
    removes that file and the old page stays as it was (it was cut off mid-picture, its end gone)."""
    import errno

    import pytest

    from text_attn.core.html_page import HtmlPage

    path = tmp_path / "report.html"
    path.write_text("<html>my old report</html>")
    page = HtmlPage(path, "t")
    page.add("<section>one</section>")
    assert path.read_text() == "<html>my old report</html>"  # nothing replaced while it grows

    def full(text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(page._out, "write", full)
    with pytest.raises(OSError, match="No space"):
        page.add("<section>two</section>")
    assert page.close() is None  # closing what failed writes nothing more
    assert path.read_text() == "<html>my old report</html>" and list(tmp_path.iterdir()) == [path]
    finished = HtmlPage(path, "t")  # and a page that ends well replaces it, whole
    finished.add("<section>one</section>")
    assert finished.close() == path and path.read_text().endswith("</html>\n") and "one" in path.read_text()
    assert list(tmp_path.iterdir()) == [path]


def test_a_name_that_is_not_utf8_is_written_readably(tmp_path):
    """caption --html on a photo named b"\\xff.jpg" (a lone surrogate in Python) ended the page with a
    UnicodeEncodeError and wrote nothing: the name is shown as its byte, and any other such text still writes."""
    from text_attn.core.html_page import HtmlPage, escape

    page = HtmlPage(tmp_path / "p.html", "t")
    page.add("<h2>" + escape("n/\udcff.jpg") + "</h2>")
    page.add('<script type="application/json">{"w":"\udcff"}</script>')  # not made readable: still written
    assert page.close() == tmp_path / "p.html"
    text = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert "<h2>n/\\xff.jpg</h2>" in text and '{"w":"\\udcff"}' in text
