"""A headless Chromium for tests, driven over the DevTools protocol (JSON messages on a websocket): open a page, run
JavaScript, send real mouse and key events, take screenshots, and collect the page's errors (uncaught exceptions,
console.error, error log entries). Needs the ``chromium`` program and the ``websocket-client`` package."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

MISSING = (
    "chromium is not installed: the HTML report tests need a real browser; install it with "
    "`apt-get install chromium` (.ci/run does; under CI=1 a missing browser fails these tests)"
)
_KEYS = {"ArrowRight": 39, "ArrowLeft": 37}


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless browser with one page; ``errors`` collects what went wrong on the page. Use as a context manager."""

    def __init__(self, width: int = 1200, height: int = 900, timeout: float = 20.0):
        import websocket  # websocket-client, in the dev extra

        exe = find_chromium()
        if exe is None:
            raise RuntimeError(MISSING)
        self.timeout, self.errors, self._events, self._id = timeout, [], [], 0
        self._dir = tempfile.mkdtemp(prefix="chromium-")
        args = [exe, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={self._dir}",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-gpu",
                "--disable-dev-shm-usage", "--mute-audio", f"--window-size={width},{height}",
                "about:blank"]  # fmt: skip
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self._log = open(Path(self._dir) / "stderr.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log)
        try:
            port = self._port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=self.timeout) as reply:
                page = next(t for t in json.load(reply) if t["type"] == "page")
            self.ws = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=self.timeout, suppress_origin=True
            )
            for domain in ("Page", "Runtime", "Log"):
                self.send(f"{domain}.enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        marker = Path(self._dir) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}: {self._stderr()}")
            lines = marker.read_text().splitlines() if marker.is_file() else []
            if lines and lines[0].isdigit():
                return int(lines[0])
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not open its DevTools port within {self.timeout} s: {self._stderr()}")

    def _stderr(self) -> str:
        self._log.flush()
        return (Path(self._dir) / "stderr.log").read_text(errors="replace")[-2000:]

    # --- protocol -----------------------------------------------------------------------------------------------------
    def send(self, method: str, **params: Any) -> dict:
        """Call one DevTools method and return its result; events that arrive meanwhile are recorded."""
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        self._events.append(method)
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.errors.append(params["entry"].get("text"))

    def open(self, path: str | Path) -> None:
        """Load a local file and wait for its load event."""
        self._events.clear()
        self.send("Page.navigate", url=Path(path).resolve().as_uri())
        deadline = time.monotonic() + self.timeout
        while "Page.loadEventFired" not in self._events:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not finish loading")
            self._event(json.loads(self.ws.recv()))

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited); a thrown error raises RuntimeError."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

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

    # --- input --------------------------------------------------------------------------------------------------------
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
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, selector: str) -> None:
        x, y = self.centre(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def key(self, key: str) -> None:
        code = _KEYS[key]
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code)

    def screenshot(self, path: str | Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    # --- end ----------------------------------------------------------------------------------------------------------
    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                self.send("Browser.close")
            except Exception:  # noqa: BLE001 - the browser may already be gone
                pass
            ws.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
