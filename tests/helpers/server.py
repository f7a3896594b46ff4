"""A real ``attention-serve`` process on a free port for the server tests, and a small HTTP client (the standard
library's: multipart, raw bytes and JSON posts) that returns (status, headers, parsed JSON or text)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

SERVE = str(Path(sys.executable).parent / "attention-serve")


def group_pids(group: int) -> list[str]:
    """The pids of the processes in process group ``group``, read from /proc (``pgrep -g`` is procps', which a slim
    Linux image lacks)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the name, which may hold spaces and ')'
        except (OSError, IndexError):
            continue  # ended while listed
        if int(fields[2]) == group:  # state, ppid, pgrp
            found.append(stat.parent.name)
    return sorted(found, key=int)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``attention-serve ARGS --port P``, started and waited for (GET /health answers ok); its stderr in a file."""

    def __init__(self, args: list[str], log: Path, key: str | None = None, timeout: float = 180,
                 env: dict[str, str] | None = None, poll: float = 0.5, command: str = SERVE) -> None:  # fmt: skip
        """``env``: more environment variables; ``poll``: seconds between the looks at /health (``started_in`` then
        says how long the server took to answer 200, to within it); ``command``: the attention-serve script."""
        self.port, self.key, self.log = free_port(), key, log
        self.url = f"http://127.0.0.1:{self.port}"
        # the tests run with CAPTION_ONNX=0 (tests/conftest.py); the benchmark as users do
        env = dict(os.environ) | (env or {})
        start = time.monotonic()
        self._err = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([command, *args, "--port", str(self.port)], stdout=subprocess.DEVNULL,
                                     stderr=self._err, env=env, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        # whether the "serving" line was in the log while the port was still closed (it was, for ~4 s of every start)
        self.announced_early = False
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"attention-serve exited {self.proc.returncode}: {log.read_text()[-2000:]}")
            said = "attention-serve: serving" in log.read_text()  # read before the look: said, then refused = early
            try:
                if self.get("/health")[0] == 200:
                    self.started_in = time.monotonic() - start
                    return
            except OSError:
                self.announced_early = self.announced_early or said
            time.sleep(poll)
        self.stop()
        raise RuntimeError(f"attention-serve did not start in {timeout} s: {log.read_text()[-2000:]}")

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                key: bool = True, timeout: float = 120) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        headers = dict(headers or {})
        if key and self.key:
            headers["X-API-Key"] = self.key
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as reply:
                status, head, data = reply.status, dict(reply.headers), reply.read()
        except urllib.error.HTTPError as err:
            status, head, data = err.code, dict(err.headers), err.read()
        kind = head.get("content-type", head.get("Content-Type", ""))
        return status, head, json.loads(data) if "json" in kind else data.decode("utf-8", "replace")

    def get(self, path: str, **kw) -> tuple[int, dict[str, str], Any]:
        return self.request("GET", path, **kw)

    def post_json(self, path: str, data: Any, **kw) -> tuple[int, dict[str, str], Any]:
        return self.request("POST", path, json.dumps(data).encode(), {"Content-Type": "application/json"}, **kw)

    def post_file(self, path: str, content: bytes, fields: dict[str, str] | None = None, field: str = "image",
                  name: str = "photo.png", **kw) -> tuple[int, dict[str, str], Any]:  # fmt: skip
        body, ctype = multipart({**(fields or {})}, {field: (name, content)})
        return self.request("POST", path, body, {"Content-Type": ctype}, **kw)

    def group(self) -> list[str]:
        """The pids of every process in the server's process group: it, its workers, LitServe's manager and HTTP
        processes."""
        return group_pids(self.proc.pid)

    def cpu_seconds(self) -> float:
        """CPU-seconds used so far by the processes of its group (Linux /proc: utime + stime)."""
        from text_attn.core.cpu_load import read_own

        ticks = 0
        for pid in self.group():
            try:
                ticks += read_own(Path(f"/proc/{pid}/stat").read_text())
            except (OSError, ValueError):
                continue  # a process that ended between pgrep and the read
        return ticks / 100  # clock ticks (USER_HZ, 100 on Linux) -> seconds

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60, group: bool = False) -> int:
        """Send ``sig`` (to the whole process group with ``group``: what Ctrl-C in a terminal does) and wait."""
        if self.proc.poll() is None:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._err.close()
        return self.proc.returncode


def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, content) in files.items():
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                "Content-Type: application/octet-stream\r\n\r\n")  # fmt: skip
        parts.append(head.encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"
