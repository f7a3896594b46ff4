"""Two runs writing one output (an audit: a second ``caption --devices`` run removed the first one's parts folder and
exited 0 with the wrong photos' records, the first crashed; two ``caption --jsonl`` or ``translate --output`` runs
interleaved their lines, both exit 0). The second is refused in one line, exit code 2, before its model loads, and
nothing is written or removed (safe_files.hold_outputs). The other writer is a real process holding the lock; the
refused command runs in this one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

from captioning.commands import caption
from captioning.commands.caption import caption_main
from text_attn.translation.translate_cli import translate_main

pytest.importorskip("fcntl")  # Windows: outputs are not locked (tests/cli/test_other_systems.py)

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers"
HOLD = ("import sys; from text_attn.core.safe_files import hold_outputs\nwith hold_outputs([('--x', sys.argv[1])]): "
        "print('held', flush=True); sys.stdin.read()")  # fmt: skip
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@contextlib.contextmanager
def held_elsewhere(path: Path) -> Iterator[subprocess.Popen]:
    """Another process writing ``path`` (holding its lock as a command does) until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=ENV)  # fmt: skip
    try:
        assert proc.stdout.readline() == "held\n"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def _state(folder: Path) -> dict[str, bytes | None]:
    """Every file under ``folder`` with its bytes (None: a folder)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def _refused(main, argv: list, capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def no_model_loads(monkeypatch):
    def load(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(caption, "_load_captioner", load)
    from text_attn.translation.translator import Translator

    monkeypatch.setattr(Translator, "load", load)


@pytest.mark.parametrize("extra", [[], ["--resume"], ["--devices", "1"], ["--devices", "1", "--resume"]])
def test_a_second_caption_of_a_jsonl_being_written_is_refused_and_changes_nothing(tmp_path, capsys, extra,
                                                                                  no_model_loads):  # fmt: skip
    out = tmp_path / "out.jsonl"
    out.write_text('{"image": "a.png", "caption": "a circle", "error": null}\n')
    parts = tmp_path / "out.jsonl.parts"  # the first run's, with --devices: it was removed under it
    parts.mkdir()
    (parts / "inputs.json").write_text('["/photos"]')
    (parts / "rank00000-1-1.part.open").write_text('0 0\tok\t{"image": "a.png"}\n')
    Image.new("RGB", (20, 20)).save(tmp_path / "b.png")
    before = _state(tmp_path)
    with held_elsewhere(out) as other:
        err = _refused(caption_main, [tmp_path / "b.png", "--model", "shapes", "--jsonl", out, *extra], capsys)
        assert err == (f"caption: error: --jsonl {out} is being written by another process (pid {other.pid}): wait "
                       "for it to end, or give another file (nothing was written)\n")  # fmt: skip
        assert _state(tmp_path) == {**before, ".out.jsonl.attention-toolkit.lock": f"{other.pid}\n".encode()}


def test_a_second_caption_page_being_written_is_refused(tmp_path, capsys, no_model_loads):
    page = tmp_path / "page.html"
    Image.new("RGB", (20, 20)).save(tmp_path / "b.png")
    with held_elsewhere(page):
        err = _refused(caption_main, [tmp_path / "b.png", "--model", "shapes", "--jsonl", tmp_path / "o.jsonl",
                                      "--html", page], capsys)  # fmt: skip
    assert f"--html {page} is being written by another process" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png"]  # o.jsonl's lock given back and removed


def test_a_second_caption_into_an_overlay_folder_being_written_is_refused(tmp_path, capsys, no_model_loads):
    """Two runs' overlays of photos named alike (img1.jpg in two folders) replaced each other in one --overlay DIR,
    each run's records naming the files, both exit 0."""
    folder = tmp_path / "ov"
    folder.mkdir()
    Image.new("RGB", (20, 20)).save(tmp_path / "b.png")
    with held_elsewhere(folder):
        err = _refused(caption_main, [tmp_path / "b.png", "--model", "shapes", "--overlay", folder], capsys)
    assert f"--overlay {folder} is being written by another process" in err
    assert list(folder.iterdir()) == []


def test_a_second_translate_output_or_alignments_being_written_is_refused(tmp_path, capsys, no_model_loads):
    same, mine = tmp_path / "same.txt", tmp_path / "mine.txt"
    same.write_text("Ein Hund läuft.\n")
    mine.write_text("kept\n")
    with held_elsewhere(same) as other:
        err = _refused(translate_main, ["--output", same, "a dog runs ."], capsys)
        assert err.startswith(f"translate: error: --output {same} is being written by another process (pid "
                              f"{other.pid}):")  # fmt: skip
        err = _refused(translate_main, ["--output", mine, "--alignments", same, "a dog runs ."], capsys)
        assert f"--alignments {same} is being written" in err
    assert same.read_text() == "Ein Hund läuft.\n" and mine.read_text() == "kept\n"  # neither emptied
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "same.txt"]


def test_a_lock_left_by_a_killed_run_does_not_block_and_goes_at_the_end(tmp_path, capsys):
    model = tiny_model_file(tmp_path / "tiny.pt")
    Image.new("RGB", (30, 24), (200, 90, 60)).save(tmp_path / "b.png")
    out = tmp_path / "out.jsonl"
    with held_elsewhere(out) as other:
        other.send_signal(signal.SIGKILL)  # the kernel releases its lock; its file stays
        other.wait(timeout=30)
    assert (tmp_path / ".out.jsonl.attention-toolkit.lock").exists()
    argv = [tmp_path / "b.png", "--model", model, "--jsonl", out, "--max-len", "3", "--workers", "0"]
    assert caption_main([str(a) for a in argv]) == 0
    assert [json.loads(line)["image"] for line in out.read_text().splitlines()] == [str(tmp_path / "b.png")]
    assert not (tmp_path / ".out.jsonl.attention-toolkit.lock").exists()
    capsys.readouterr()


def test_the_other_processes_of_a_devices_run_hold_nothing(monkeypatch):
    """They write their own parts of the first process's run: holding its outputs, they would refuse themselves."""
    from captioning.commands.caption_parser import _parser

    args = _parser().parse_args(["p.png", "--jsonl", "o.jsonl", "--devices", "2", "--scores", "s.json"])
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert caption._held_outputs(args) == [
        ("--jsonl", "o.jsonl"),
        ("--html", None),
        ("--scores", "s.json"),
        ("--overlay", None),
    ]
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert caption._held_outputs(args) == []
    monkeypatch.setenv("RANK", "5")  # torchrun's, on another machine
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert caption._held_outputs(args) == []


@pytest.mark.slow  # two real runs, one on Lightning (~15 s)
def test_the_audits_two_devices_runs_the_second_refused_the_first_whole(tmp_path):
    """The audit's repro: a second ``caption --devices 1`` on the OUT of one that runs."""
    big, few = tmp_path / "big", tmp_path / "few"
    for folder, n in ((big, 12), (few, 3)):
        folder.mkdir()
        for i in range(n):
            Image.new("RGB", (40, 32), (i * 20, 90, 160 if folder == big else 30)).save(folder / f"{i:02d}.png")
    out, parts = tmp_path / "out.jsonl", tmp_path / "out.jsonl.parts"
    base = ["--model", "shapes", "--jsonl", str(out), "--devices", "1", "--batch-size", "1", "--workers", "0",
            "--threads", "1", "--max-len", "4"]  # fmt: skip
    first = subprocess.Popen([sys.executable, str(HELPERS / "slow_caption.py"), str(big), *base], cwd=tmp_path,
                             env={**ENV, "CAPTION_SLOW": "0.5"}, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 300
    while first.poll() is None and time.monotonic() < deadline and not list(parts.glob("*.part*")):
        time.sleep(0.1)  # the first run is in its loop: its parts folder holds a part
    second = subprocess.run([sys.executable, str(HELPERS / "slow_caption.py"), str(few), *base], cwd=tmp_path,
                            env=ENV, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert second.returncode == 2 and second.stderr.count("\n") == 1, second.stderr
    assert f"--jsonl {out} is being written by another process (pid {first.pid})" in second.stderr
    err = first.stderr.read()
    assert first.wait(timeout=300) == 0 and "Traceback" not in err, err[-2000:]
    images = [json.loads(line)["image"] for line in out.read_text().splitlines()]
    assert images == [str(p) for p in sorted(big.iterdir())]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "few", "out.jsonl", "out.jsonl.run.json"]


def test_an_export_to_an_out_another_export_writes_is_refused(tmp_path, capsys):
    """Two exports to one OUT both said "wrote ... from ..." and one of them was lost."""
    from captioning.commands.export import export_main as caption_export
    from text_attn.translation.export import export_main as text_export

    out = tmp_path / "out.pt"
    for main, model in ((caption_export, "shapes"), (text_export, "bahdanau")):
        with held_elsewhere(out):
            err = _refused(main, [model, out], capsys)
        assert f"OUT {out} is being written by another process" in err
        assert not out.exists()


def test_a_fit_whose_model_file_another_fit_writes_is_refused(tmp_path, capsys, cli_run_in_tmp):
    """The shipped configs name one model file per config: two fits of one config each said "wrote model file:
    runs/.../model.pt", the second's weights in it. The second is refused before it trains."""
    from text_attn.translation.train_cli import text_train_cli

    model = tmp_path / "model.pt"
    args = ["fit", "--config", str(ROOT / "tests/fixtures/text/tiny_reorder.yaml"), "--model.export_path", str(model),
            "--trainer.max_steps", "1"]  # fmt: skip
    with held_elsewhere(model):
        with pytest.raises(SystemExit) as exc:
            text_train_cli(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and (f"text-train: error: model.export_path {model} is being written by another "
                                    "process") in err and "give --model.export_path" in err  # fmt: skip
    assert not model.exists()
    text_train_cli(args)  # the other fit ended: this one writes it, and gives its lock back
    assert model.is_file() and not (tmp_path / ".model.pt.attention-toolkit.lock").exists()
