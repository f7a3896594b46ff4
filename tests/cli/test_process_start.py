"""``caption --devices N`` starts its other processes before anything heavy is imported
(captioning.commands.process_start): each then imports and loads beside the first, not in series behind it. The
two-process runs themselves, the paths on stdin among them, run with -m slow (here and in
tests/cli/test_caption_processes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from captioning.commands.process_start import LAUNCHED, should_start

# the first process of `caption PHOTO --jsonl OUT --devices 2`, with Popen replaced: what it starts, and when
PROBE = textwrap.dedent("""
    import json, os, sys
    import captioning.commands.process_start as ps

    class Started(Exception):
        pass

    def popen(cmd, env, **kwargs):
        print(json.dumps({"torch": "torch" in sys.modules, "lightning": "pytorch_lightning" in sys.modules,
                          "cmd": cmd, "env": {k: env.get(k) for k in ("LOCAL_RANK", "WORLD_SIZE", "NODE_RANK",
                          "MASTER_ADDR", "ATTN_QUIET_ERRORS")}, "port": env.get("MASTER_PORT"),
                          "mine": {k: os.environ.get(k) for k in ("LOCAL_RANK", "WORLD_SIZE")}}))
        raise Started

    ps.subprocess.Popen = popen
    from captioning.commands.caption import caption_main
    try:
        caption_main(sys.argv[1:])
    except Started:
        pass
""")


def test_the_other_process_starts_before_torch_is_imported(tmp_path):
    photo = tmp_path / "p.png"
    photo.write_bytes(b"")  # never read: the probe stops at the start
    args = [str(photo), "--jsonl", str(tmp_path / "o.jsonl"), "--devices", "2"]
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in __import__("os").environ.items() if k not in LAUNCHED})  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert not seen["torch"] and not seen["lightning"]  # started before the heavy imports
    assert seen["cmd"][0] == sys.executable and seen["cmd"][-len(args) :] == args  # the same command line
    assert seen["env"] == {"LOCAL_RANK": "1", "WORLD_SIZE": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                           "ATTN_QUIET_ERRORS": "1"}  # fmt: skip
    assert int(seen["port"]) > 0 and seen["mine"] == {"LOCAL_RANK": "0", "WORLD_SIZE": "2"}


@pytest.mark.parametrize(
    ("devices", "nodes", "env", "starts"),
    [
        (2, 1, {}, True),
        (None, 1, {}, False),  # one process, its own loop
        (1, 1, {}, False),  # one process on Lightning: nothing to start
        (2, 2, {}, False),  # several machines: each machine's launcher starts its processes
        (2, 1, {"LOCAL_RANK": "0"}, False),  # torchrun or a process started here: started already
        (2, 1, {"SLURM_NTASKS": "2"}, False),
        (2, 1, {"CAPTION_EARLY_START": "0"}, False),  # Lightning's launcher, when the loop begins
    ],
)
def test_who_starts_the_other_processes(monkeypatch, devices, nodes, env, starts):
    for key in (*LAUNCHED, "CAPTION_EARLY_START"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert should_start(devices, nodes) is starts


@pytest.mark.long
def test_what_every_process_refuses_is_said_once(tmp_path):
    import os
    from pathlib import Path

    from captioning.model.bundled import DEMO_PHOTOS

    bad = tmp_path / "bad.pt"
    bad.write_text("not a model")
    caption = str(Path(sys.executable).parent / "caption")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHED}
    done = subprocess.run([caption, str(DEMO_PHOTOS[0]), "--jsonl", str(tmp_path / "o.jsonl"), "--devices", "2",
                           "--model", str(bad)], capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"caption: error: {bad}: not a model file: 11 bytes that torch cannot read as one"
    ]


def test_paths_on_stdin_reach_every_process_whole(monkeypatch):
    import os

    import captioning.commands.process_start as ps

    class Proc:
        returncode = 0

        def __init__(self, cmd, env, stdin=None, **kwargs):
            self.got = stdin.read().decode() if stdin is not None else None

        def poll(self):
            return 0

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(ps.subprocess, "Popen", Proc)
    before = dict(os.environ)
    try:
        others = ps.start_others(3, ["-", "--jsonl", "o.jsonl", "--devices", "3"], "a.jpg\nb.jpg\n")
        assert [p.got for p in others.procs] == ["a.jpg\nb.jpg\n"] * 2  # each its own copy, read from its start
        assert os.environ["LOCAL_RANK"] == "0" and os.environ["WORLD_SIZE"] == "3"  # this process: rank 0
        assert others.finish(0) == 0
        # and the environment as it was after the run: a later caption in this process (a notebook's) read
        # LOCAL_RANK as another launcher's (its --sample drew no seed)
        assert {k: os.environ.get(k) for k in ps.RANK_VARIABLES} == {k: before.get(k) for k in ps.RANK_VARIABLES}
    finally:
        os.environ.clear()
        os.environ.update(before)


@pytest.mark.slow  # two real processes, each importing Lightning: ~18 s of CPU, the default run's longest test
def test_two_processes_caption_the_paths_given_on_stdin(tmp_path):
    import os
    from pathlib import Path

    from helpers.tiny_captioner import tiny_model_file
    from PIL import Image

    model = tiny_model_file(tmp_path / "tiny.pt")
    paths = []
    for i in range(3):
        Image.new("RGB", (30 + i, 24), (60 * i, 90, 160)).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    caption = str(Path(sys.executable).parent / "caption")
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHED}
    out = tmp_path / "out.jsonl"
    done = subprocess.run([caption, "-", "--model", str(model), "--jsonl", str(out), "--devices", "2", "--max-len", "3",
                           "--workers", "0"], input="\n".join(paths) + "\n", capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["image"] for line in out.read_text().splitlines()] == paths  # each once, in order


def test_paths_on_stdin_with_another_launcher_are_refused_in_one_line(monkeypatch, capsys):
    from captioning.commands.caption import caption_main

    monkeypatch.setenv("CAPTION_EARLY_START", "0")  # Lightning's launcher starts the others: no stdin to give them
    with pytest.raises(SystemExit) as exc:
        caption_main(["-", "--jsonl", "o.jsonl", "--devices", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "(paths on stdin) with several processes" in err[0]


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie nobody reaped yet: a container's first process may not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent's death signal is Linux's (prctl)")
def test_the_started_processes_end_when_the_first_is_killed():
    """``kill -9`` of the first process left the others captioning their whole share with no parent (hours, at
    scale), then printing a traceback from the barrier on the terminal of a command that had returned."""
    import os
    import time

    first = textwrap.dedent("""
        import sys, time
        from captioning.commands import process_start
        process_start._command = lambda argv: [sys.executable, "-c", "import time; time.sleep(60)"]
        others = process_start.start_others(2, [])
        print(others.procs[0].pid, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", first], stdout=subprocess.PIPE, text=True)
    other = int(proc.stdout.readline())
    assert not _ended(other)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while not _ended(other) and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = _ended(other)
    if not ended:
        os.kill(other, 9)
    assert ended, "the other process outlived the first"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent's death signal is Linux's (prctl)")
def test_an_error_of_a_started_process_whose_first_is_gone_is_quiet():
    """Its first process killed mid-collective, a started process's connection error came before the signal, and its
    traceback reached the terminal; an error while the first lives is raised as before."""
    import os

    code = textwrap.dedent("""
        import os, sys
        from captioning.commands import process_start
        process_start.GONE_WAIT_S = 0.0
        os.environ[process_start.FIRST_PID] = sys.argv[1]
        with process_start.first_gone_quietly():
            raise RuntimeError("Connection reset by peer")
    """)
    for first, gone in ((os.getpid(), False), (os.getpid() + 10**6, True)):  # its parent; a process that is not
        run = subprocess.run([sys.executable, "-c", code, str(first)], capture_output=True, text=True, timeout=60)
        assert (run.returncode, run.stderr == "") == ((143, True) if gone else (1, False)), run.stderr
        assert gone or "RuntimeError: Connection reset by peer" in run.stderr
