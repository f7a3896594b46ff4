"""A headless Chromium for tests, driven by Playwright (the ``playwright`` package, dev extra) through the system's
own browser: never ``playwright install``, nothing is downloaded. Open a page, run JavaScript, send real mouse and key
events, take screenshots, and collect the page's errors (uncaught exceptions and console errors).

``page()`` gives a Playwright page (the server's page tests); ``Browser`` keeps the small interface the HTML report
tests were written against (open, eval, wait_for, hover, click, key, screenshot).

Wait with selectors (``wait_for_selector("#x[data-shown='0']")``), not ``wait_for_function``: the served page's
Content-Security-Policy has no 'unsafe-eval', and Playwright re-runs a string predicate with eval inside the page, so
such a wait fails whenever its first check is false."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MISSING = (
    "chromium is not installed: the browser tests need a real browser; install it with "
    "`apt-get install chromium` (.ci/run does; under CI=1 a missing browser fails these tests)"
)
# quiet on a machine with no network: no background requests, no component updates, no QUIC probes
FLAGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--no-default-browser-check", "--disable-quic", "--disable-dev-shm-usage",
         "--disable-extensions", "--mute-audio"]  # fmt: skip


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _watch(page) -> None:
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: page.errors.append(f"console: {m.text}") if m.type == "error" else None)


@contextlib.contextmanager
def browser() -> Iterator:
    """One headless Chromium (Playwright's Browser) for several pages: a module's tests share one launch (~1 s)."""
    from playwright.sync_api import sync_playwright

    exe = find_chromium()
    if exe is None:
        raise RuntimeError(MISSING)
    args = FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])  # Chromium refuses root with its sandbox
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=exe, args=args)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def page(width: int = 1100, height: int = 800, shared=None) -> Iterator:
    """A fresh Playwright page (in a context of its own: no cookies, storage or cache from another page) in
    ``shared`` (a ``browser()``), else in a fresh headless Chromium; ``page.errors`` collects what went wrong on it."""
    if shared is None:
        with browser() as chromium, page(width, height, chromium) as pg:
            yield pg
        return
    context = shared.new_context(viewport={"width": width, "height": height})
    try:
        pg = context.new_page()
        _watch(pg)
        yield pg
    finally:
        context.close()


def accessible(page, *selectors: str) -> list[dict[str, Any]]:
    """What a screen reader is told of the first element each selector matches: Chromium's own accessibility node
    (through the DevTools protocol), as {"role", "name", "ignored", and its properties: "live", "selected",
    "focusable", ...}. The page's main frame only."""
    cdp = page.context.new_cdp_session(page)
    try:
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        found = []
        for selector in selectors:
            node_id = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
            if not node_id:
                raise LookupError(f"no element matches {selector}")
            node = cdp.send("Accessibility.getPartialAXTree", {"nodeId": node_id, "fetchRelatives": False})["nodes"][0]
            props = {p["name"]: p["value"].get("value") for p in node.get("properties", [])}
            found.append({"role": node.get("role", {}).get("value"), "name": node.get("name", {}).get("value", ""),
                          "ignored": node.get("ignored", False), **props})  # fmt: skip
        return found
    finally:
        cdp.detach()


def contrast(foreground: str, background: str, under: str = "rgb(255, 255, 255)") -> float:
    """WCAG's contrast ratio of two computed CSS colours (``rgb(...)`` / ``rgba(...)``), a translucent background
    laid over ``under`` first (an opaque one)."""

    def parts(css: str) -> list[float]:
        values = [float(v) for v in css[css.index("(") + 1 : css.index(")")].split(",")]
        return values + [1.0] * (4 - len(values))

    def luminance(rgb: list[float]) -> float:
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in rgb)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    *bg, alpha = parts(background)
    laid = [alpha * c + (1 - alpha) * u for c, u in zip(bg, parts(under)[:3], strict=True)]
    hi, lo = sorted((luminance(parts(foreground)[:3]), luminance(laid)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


class Browser:
    """One headless browser with one page; ``errors`` collects what went wrong on the page. Use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 20.0):
        self.timeout = timeout
        self._context = page(width, height)
        self.page = self._context.__enter__()
        self.page.set_default_timeout(timeout * 1000)

    @property
    def errors(self) -> list[str]:
        return self.page.errors

    def open(self, path: str | Path) -> None:
        """Load a local file and wait for its load event."""
        self.page.goto(Path(path).resolve().as_uri(), wait_until="load")

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited); a thrown error raises RuntimeError."""
        from playwright.sync_api import Error

        try:
            return self.page.evaluate(expression)
        except Error as err:
            raise RuntimeError(f"{expression!r} threw: {err}") from None

    def wait_for(self, expression: str, timeout: float = 5.0) -> Any:
        """Poll until the expression is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {expression}")
            time.sleep(0.02)

    def centre(self, selector: str) -> tuple[float, float]:
        """Scroll the element into view; its centre in viewport pixels."""
        box = self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return box[0], box[1]

    def hover(self, selector: str) -> None:
        """A real mouse move onto the element's centre."""
        self.page.mouse.move(*self.centre(selector))

    def click(self, selector: str) -> None:
        self.page.mouse.click(*self.centre(selector))

    def key(self, key: str) -> None:
        self.page.keyboard.press(key)

    def screenshot(self, path: str | Path) -> Path:
        self.page.screenshot(path=str(path))
        return Path(path)

    def close(self) -> None:
        self._context.__exit__(None, None, None)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
