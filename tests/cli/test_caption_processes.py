"""``caption --devices N``: Lightning's predict loop, each process its part, merged into OUT in input order; equal to
the one-process run; --resume after an interrupted run. The first tests run one process in this one (fast); the slow
ones start 2 CPU processes (gloo), as a user would, and kill one with SIGKILL mid-run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from helpers.shards import write_shard
from helpers.srun import srun_processes
from helpers.tiny_captioner import tiny_model_file
from PIL import Image

import captioning.commands.caption_batch as cli
from captioning.commands.caption import caption_main
from text_attn.core.unsure_options import NAMED

HELPERS = Path(__file__).resolve().parents[1] / "helpers"
CAPTION = str(Path(sys.executable).parent / "caption")
FAST = ["--max-len", "4", "--workers", "0"]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_model_file(tmp_path_factory.mktemp("model") / "tiny.pt")


def _inputs(root: Path, photos: int = 4, damaged: bool = True, truncated: bool = False) -> list[str]:
    """A folder of photos and two shards (img2dataset's layout); the first shard's last sample is damaged, the second
    shard optionally cut off in its last photo."""
    folder = root / "photos"
    folder.mkdir()
    for i in range(photos):
        Image.new("RGB", (30 + 3 * i, 24), (i * 40 % 256, 90, 160)).save(folder / f"{i:03d}.png")
    extra = {"000000004.jpg": b"this is no jpeg", "000000004.txt": b"a broken photo"} if damaged else None
    a = write_shard(root / "00000.tar", 0, 4, extra=extra)
    b = write_shard(root / "00001.tar", 10, 3)
    if truncated:
        with tarfile.open(b) as tar:
            cut = tar.getmember("000000012.jpg").offset_data + 50
        b.write_bytes(b.read_bytes()[:cut])
    assert a.name == "00000.tar"
    return [str(folder), str(root / "{00000..00001}.tar")]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _run(args: list[str]) -> int:
    return caption_main([str(a) for a in args])


@pytest.mark.long
def test_one_process_on_lightning_writes_the_plain_runs_records_and_resumes(model, tmp_path, capsys, monkeypatch):
    inputs = _inputs(tmp_path)
    base = [*inputs, "--model", model, *FAST, "--batch-size", "3"]
    assert _run([*base, "--jsonl", tmp_path / "plain.jsonl"]) == 1  # the damaged member failed
    plain = _lines(tmp_path / "plain.jsonl")
    err = capsys.readouterr().err
    assert err.count("caption: error: ") == 1 and "00000.tar/000000004.jpg: " in err
    recs = [json.loads(line) for line in plain]
    assert len(recs) == 4 + 5 + 3 and [r["error"] is not None for r in recs].count(True) == 1
    member = recs[5]
    assert member["image"] == f"{tmp_path}/00000.tar/000000001.jpg" and member["key"] == "000000001"
    assert member["reference"] == "a photo number 1" and member["caption"] and "key" not in recs[0]

    out = tmp_path / "dev.jsonl"
    import pytorch_lightning  # noqa: F401 - its import sets its loggers' levels; the run must not change them after

    levels = {n: logging.getLogger(n).level for n in ("pytorch_lightning", "lightning_fabric")}
    assert _run([*base, "--jsonl", out, "--devices", "1"]) == 1
    assert _lines(out) == plain  # byte for byte: the same batches, the same per-batch work
    # Lightning's start-up lines were hidden for the run only: a later run in this process logs as before
    assert {n: logging.getLogger(n).level for n in levels} == levels
    assert not Path(f"{out}.parts").exists()
    assert capsys.readouterr().err.count("caption: error: ") == 1
    # the shards' JPEGs decoded in the main process (--decode-on-device): the loader's batch reaches predict_step as
    # the loader made it (one byte tensor, on the host), and the records are the same
    decoded = tmp_path / "decoded.jsonl"
    assert _run([*base, "--jsonl", decoded, "--devices", "1", "--decode-on-device"]) == 1
    assert _lines(decoded) == plain
    capsys.readouterr()

    # a run that stops in its third batch: the parts hold the first two; --resume captions the rest, nothing twice
    out.unlink()
    real, calls, read = cli.caption_items, [], []
    monkeypatch.setattr(cli, "caption_items", lambda *a, **k: calls.append(1) or (
        (_ for _ in ()).throw(RuntimeError("stopped")) if len(calls) == 3 else real(*a, **k)))  # fmt: skip
    with pytest.raises(RuntimeError, match="stopped"):
        _run([*base, "--jsonl", out, "--devices", "1"])
    assert not out.exists() and sum(len(_lines(p)) for p in Path(f"{out}.parts").glob("*.part*")) == 6
    monkeypatch.setattr(cli, "caption_items", real)
    from captioning.photos import collection

    real_read = collection.read_photo
    monkeypatch.setattr(collection, "read_photo", lambda name, *a: read.append(name) or real_read(name, *a))
    assert _run([*base, "--jsonl", out, "--devices", "1", "--resume"]) == 1
    assert _lines(out) == plain and not Path(f"{out}.parts").exists()
    assert len(read) == 12 - 6  # the six in the parts were not read again

    # the one-process run resumes a half-done OUT of shard members and files alike
    half = tmp_path / "half.jsonl"
    half.write_text("\n".join(plain[:7]) + "\n" + plain[7][:40])
    read.clear()
    assert _run([*base, "--jsonl", half, "--resume"]) == 1
    _same_records(_lines(half), plain)
    assert _lines(half)[:7] == plain[:7] and len(read) == 12 - 7
    assert "7 image(s) already in" in capsys.readouterr().err

    # on top of an OUT a one-process run left half done: its records are carried over, the rest captioned
    out.write_text("\n".join(plain[:5]) + "\n" + plain[5][:40])
    read.clear()
    assert _run([*base, "--jsonl", out, "--devices", "1", "--resume"]) == 1
    _same_records(_lines(out), plain)  # batched otherwise than before: see _same_records
    assert _lines(out)[:5] == plain[:5] and len(read) == 12 - 5
    # a resume with other decoding is refused before anything is read or written (captioning.commands.caption_run)
    assert json.loads(Path(f"{out}.run.json").read_text())["options"]["--max-len"] == 4
    before, read[:] = out.read_bytes(), []
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        _run([*base, "--jsonl", out, "--devices", "1", "--resume", "--beam-size", "2"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "made with --beam-size 3 (this run: 2)" in err, err
    assert out.read_bytes() == before and not read


def test_a_part_that_cannot_be_written_is_one_line_and_resume_finishes(model, tmp_path, capsys, monkeypatch):
    """A full disk under a --devices run ended in Lightning's traceback, once a process; now the process whose part
    fails says which and why, in one line, exit 2, and what its part held before is kept for --resume."""
    from text_attn.core import part_files

    inputs = _inputs(tmp_path, damaged=False)
    base = [*inputs, "--model", model, *FAST, "--batch-size", "3"]
    assert _run([*base, "--jsonl", tmp_path / "whole.jsonl"]) == 0
    out, real, calls = tmp_path / "out.jsonl", part_files.PartWriter.write, []

    def full_at_third(self, rows):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(self, rows)

    monkeypatch.setattr(part_files.PartWriter, "write", full_at_third)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        _run([*base, "--jsonl", out, "--devices", "1"])
    err = capsys.readouterr().err.strip()
    part = next(Path(f"{out}.parts").glob("*.part.open"))
    assert exc.value.code == 2 and err == (
        f"caption: error: cannot write {part}: [Errno 28] No space left on device; --resume continues after the "
        f"photos {out}.parts holds"
    )
    assert len(_lines(part)) == 6 and not out.exists()
    monkeypatch.setattr(part_files.PartWriter, "write", real)
    assert _run([*base, "--jsonl", out, "--devices", "1", "--resume"]) == 0
    _same_records(_lines(out), _lines(tmp_path / "whole.jsonl"))
    # what was skipped is said as the one-process run says it: the parts' photos first, then OUT's
    assert f"caption: 6 image(s) already in {out} or {out}.parts: skipped" in capsys.readouterr().err
    assert _run([*base, "--jsonl", out, "--devices", "1", "--resume"]) == 0
    assert f"caption: 11 image(s) already in {out} or {out}.parts: skipped" in capsys.readouterr().err
    _same_records(_lines(out), _lines(tmp_path / "whole.jsonl"))


def test_bad_uses_of_devices_are_one_line(model, tmp_path, capsys):
    inputs = _inputs(tmp_path, damaged=False)
    for extra, says in (
        ([], "--devices writes its records to --jsonl OUT"),
        (["--jsonl", tmp_path / "o.jsonl", "--html", tmp_path / "p.html"], "--html draws one page"),
        (["--jsonl", tmp_path / "o.jsonl", "--devices", "0"], "--devices must be at least 1"),
        # a typo's 1000 started processes until the machine ran out of memory
        (["--jsonl", tmp_path / "o.jsonl", "--devices", "1000"], "--devices 1000: more CPU processes than twice the "),
        (["--jsonl", tmp_path], "cannot use --jsonl"),
    ):
        with pytest.raises(SystemExit) as exc:
            _run([*inputs, "--model", model, "--devices", "1", *extra])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and says in err, err
    (tmp_path / "o.jsonl.parts").mkdir()
    with pytest.raises(SystemExit):
        _run([*inputs, "--model", model, "--jsonl", tmp_path / "o.jsonl", "--resume"])
    assert "resume it with --devices" in capsys.readouterr().err
    # a planted link at OUT.parts: the parts were written where it pointed (a --resume read what was there)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "l.jsonl.parts").symlink_to(tmp_path / "elsewhere")
    for resume in ([], ["--resume"]):
        with pytest.raises(SystemExit) as exc:
            _run([*inputs, "--model", model, "--jsonl", tmp_path / "l.jsonl", "--devices", "1", *resume])
        assert exc.value.code == 2 and "l.jsonl.parts is a symbolic link" in capsys.readouterr().err
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_devices_that_do_not_match_the_slurm_job_are_one_line(model, tmp_path, capsys, monkeypatch):
    """An sbatch job of one task a machine, `caption --devices 2` in it: Lightning refuses as predict starts, and its
    ValueError came out as a traceback."""
    slurm = {"SLURM_NTASKS": "1", "SLURM_NTASKS_PER_NODE": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
             "SLURM_NODEID": "0", "SLURM_JOB_NAME": "job", "SLURM_NODELIST": "127.0.0.1",
             "SLURM_JOB_ID": "99"}  # fmt: skip
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    folder = _inputs(tmp_path, photos=2, damaged=False)[0]
    out = tmp_path / "out.jsonl"
    with pytest.raises(SystemExit) as exc:
        _run([folder, "--model", model, *FAST, "--jsonl", out, "--devices", "2", "--device", "cpu"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err, err
    assert err.startswith("caption: error: --devices 2 --num-nodes 1 do not match how the processes are started: ")
    assert "--ntasks-per-node=1" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "out.jsonl.parts").exists()


def test_shard_members_get_overlays_named_by_key(model, tmp_path, capsys):
    shard = write_shard(tmp_path / "s.tar", 7, 2)
    page = tmp_path / "page.html"
    assert _run([shard, "--model", model, *FAST, "--json", "--overlay", tmp_path / "ov", "--html", page]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [Path(r["overlay"]).name for r in recs] == ["000000007-attention.png", "000000008-attention.png"]
    assert all(Path(r["overlay"]).is_file() for r in recs)
    html = page.read_text()
    assert "s.tar/000000008.jpg" in html and html.count("data:image/") >= 2  # each member's picture on the page


# --- 2 processes ----------------------------------------------------------------------------------------------------
def _two(args: list, cwd: Path, script: str | None = None, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, script] if script else [CAPTION]
    return subprocess.run([*cmd, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=900, **kw)


def _same_records(a: list[str], b: list[str]) -> None:
    """Word for word; numbers to the 6 decimals written, give or take one in the last (another batch composition
    rounds a float another way: the one-process run does the same between batch sizes)."""
    assert len(a) == len(b)
    for x, y in zip(map(json.loads, a), map(json.loads, b), strict=True):
        for key in x:
            if key in ("score",):
                assert x[key] == pytest.approx(y[key], abs=2e-6), key
            elif key == "attention":
                assert len(x[key]) == len(y[key])
                for r, s in zip(x[key], y[key], strict=True):
                    assert r == pytest.approx(s, abs=2e-6)
            else:
                assert x[key] == y[key], key


@pytest.mark.slow
def test_two_processes_caption_every_photo_once_as_one_process_does(model, tmp_path):
    inputs = _inputs(tmp_path, photos=5, truncated=True)
    (tmp_path / "nothing").mkdir()  # a folder without photos: named once, by the first process
    base = [*inputs, str(tmp_path / "nothing"), "--model", model, *FAST, "--batch-size", "2", "--threads", "1"]
    one = _two([*base, "--jsonl", tmp_path / "one.jsonl"], tmp_path)
    two = _two([*base, "--jsonl", tmp_path / "two.jsonl", "--devices", "2"], tmp_path)
    assert one.returncode == two.returncode == 1, two.stderr[-3000:]
    a, b = _lines(tmp_path / "one.jsonl"), _lines(tmp_path / "two.jsonl")
    assert len(a) == 5 + 5 + 3  # the truncated shard's whole samples, and the error record of the photo cut off
    _same_records(a, b)
    for err in (one.stderr, two.stderr):  # the damaged member and the photo cut off said once, by whoever read them
        assert err.count("caption: error: ") == 2 and err.count("00001.tar/000000012.jpg: cut off (50 of its") == 1, err
        assert err.count("nothing: no image files") == 1 and "Traceback" not in err
    # the notes on the captions written: one, counting every process's captions, as one process prints it
    notes = [[line for line in err.splitlines() if "reached --max-len" in line] for err in (one.stderr, two.stderr)]
    assert len(notes[0]) == 1 and notes[0] == notes[1], notes
    # naming the first ten cut off, in input order: gathered from both processes (each captioned every other batch)
    cut = [json.loads(line)["image"] for line in a if json.loads(line)["truncated"]]
    assert len(cut) > NAMED and notes[0][0].endswith(f": {', '.join(cut[:NAMED])} and {len(cut) - NAMED} more")
    assert not (tmp_path / "two.jsonl.parts").exists()
    # shards alone, more processes than shards: their samples are dealt out, and still come back in order
    shards = [str(tmp_path / "00000.tar")]
    # one thread in both runs: the same matrix products, so the same last digits (2 threads round some apart)
    one = _two([*shards, "--model", model, *FAST, "--batch-size", "1", "--jsonl", tmp_path / "s1.jsonl", "--threads",
                "1"], tmp_path)  # fmt: skip
    two = _two([*shards, "--model", model, *FAST, "--batch-size", "1", "--jsonl", tmp_path / "s2.jsonl",
                "--devices", "2", "--threads", "1"], tmp_path)  # fmt: skip
    assert one.returncode == two.returncode == 1
    assert _lines(tmp_path / "s1.jsonl") == _lines(tmp_path / "s2.jsonl")  # batches of 1: byte for byte


@pytest.mark.long
def test_two_processes_srun_starts_write_one_run(model, tmp_path):
    """srun starts every process itself and numbers them SLURM_PROCID / SLURM_LOCALID, with no RANK nor LOCAL_RANK:
    each took itself for the first, held --jsonl OUT, and the run ended in "OUT is being written by another process"
    (docs/scale.md's SLURM command). Two such processes, as srun starts them on one machine."""
    folder = _inputs(tmp_path, photos=5, damaged=False)[0]
    base = [folder, "--model", model, *FAST, "--batch-size", "2", "--threads", "1"]
    one = _two([*base, "--jsonl", tmp_path / "one.jsonl"], tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    cmd = [CAPTION, *map(str, [*base, "--jsonl", tmp_path / "two.jsonl", "--devices", "2"])]
    done = srun_processes(cmd, tmp_path)
    assert [code for code, _, _ in done] == [0, 0], [err[-2000:] for _, _, err in done]
    assert "being written by another process" not in done[0][2] + done[1][2]
    _same_records(_lines(tmp_path / "one.jsonl"), _lines(tmp_path / "two.jsonl"))
    assert not (tmp_path / "two.jsonl.parts").exists()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


@pytest.mark.slow
def test_a_process_killed_mid_run_then_resume_equals_an_uninterrupted_run(model, tmp_path):
    inputs = _inputs(tmp_path, photos=10, damaged=False)
    base = [*inputs, "--model", model, *FAST, "--batch-size", "1", "--threads", "1"]
    out, parts = tmp_path / "out.jsonl", tmp_path / "out.jsonl.parts"
    env = {**os.environ, "CAPTION_SLOW": "0.5"}
    cmd = [sys.executable, str(HELPERS / "slow_caption.py"), *map(str, base), "--jsonl", str(out), "--devices", "2"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline, rows = time.monotonic() + 600, 0
        while time.monotonic() < deadline and rows < 6:
            time.sleep(0.2)
            rows = sum(len(_lines(p)) for p in parts.glob("*.part*")) if parts.is_dir() else 0
        assert rows >= 6, "the run wrote no parts in 600 s"
        (second,) = _children(proc.pid)
        os.kill(second, signal.SIGKILL)  # the second process dies mid-run; Lightning ends the first
        proc.wait(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode != 0 and not out.exists()
    held = sum(len(_lines(p)) for p in parts.glob("*.part*"))
    assert 6 <= held < 10 + 4 + 3
    resumed = _two([*base, "--jsonl", out, "--devices", "2", "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    whole = _two([*base, "--jsonl", tmp_path / "whole.jsonl"], tmp_path)
    assert whole.returncode == 0
    assert _lines(out) == _lines(tmp_path / "whole.jsonl")  # batches of 1: byte for byte, each photo once
    assert not parts.exists()


def test_under_devices_two_shards_members_of_one_key_get_overlays_of_their_own():
    """Each process makes names unique only against its own: two shards' 000000000.jpg, drawn by two processes, were
    both 000000000-attention.png, one overwriting the other. Under --devices a member's name starts with its shard's."""
    from captioning.commands.caption_batch import OverlayNames

    sources = ["a.jpg", "shards/00000.tar", "shards/00001.tar"]
    first, second = (OverlayNames(sources, by_shard=True) for _ in range(2))  # two processes' own
    one = first.stem({"id": (1, 0), "name": "shards/00000.tar/000000000.jpg"})
    other = second.stem({"id": (2, 0), "name": "shards/00001.tar/000000000.jpg"})
    assert (one, other) == ("00000-000000000", "00001-000000000")
    assert first.stem({"id": (0, 0), "name": "a.jpg"}) == "a"  # files: named from the whole list, as before
    alone = OverlayNames(sources)  # one process: the key, the second one numbered
    assert [alone.stem({"id": (k, 0), "name": f"shards/0000{k - 1}.tar/000000000.jpg"}) for k in (1, 2)] == [
        "000000000", "000000000-2"]  # fmt: skip


@pytest.mark.slow  # two real processes (~15 s each)
@pytest.mark.parametrize(("sig", "group", "workers", "code"), [
    ("SIGINT", True, "0", 130),  # Ctrl-C in the terminal: the whole group
    ("SIGTERM", False, "0", 143),  # kill PID: it hung, Lightning's handler broadcasting inside the handler
    ("SIGTERM", True, "1", 143),  # timeout, a scheduler: the loader's worker too (exit 2, "out of memory", twice)
], ids=["ctrl-c", "kill", "group-term"])  # fmt: skip
def test_a_stop_under_devices_exits_as_interrupted_and_resume_finishes(tmp_path, sig, group, workers, code):
    """Lightning turns Ctrl-C into exit(1): every other command's interrupted run exits 130, so does this one now;
    SIGTERM 143, whether it reaches the first process alone or the whole group."""
    import glob

    photos = tmp_path / "photos"
    photos.mkdir()
    for i in range(40):
        Image.new("RGB", (48, 40), ((i * 37) % 256, (i * 91) % 256, 90)).save(photos / f"p{i:02d}.png")
    out = tmp_path / "o.jsonl"
    cmd = [CAPTION, str(photos), "--model", "shapes", "--jsonl", str(out), "--devices", "2", "--threads", "1",
           "--batch-size", "1", "--max-len", "4", "--workers", workers]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        parts = [f for f in glob.glob(f"{out}.parts/*") if os.path.isfile(f)]
        if sum(1 for f in parts for _ in open(f)) >= 4:
            break
        time.sleep(0.2)
    (os.killpg if group else os.kill)(proc.pid, getattr(signal, sig))
    try:
        err = proc.communicate(timeout=120)[1]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # a hung run's processes, all of them
    assert proc.returncode == code, err[-2000:]
    assert "interrupted;" in err and "--resume continues" in err, err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err and "error" not in err, err[-2000:]
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(json.loads(line)["image"] for line in out.read_text().splitlines()) == sorted(
        str(p) for p in photos.iterdir())  # fmt: skip


@pytest.mark.slow  # a caption with two loader workers, killed: ~3 s
def test_loader_workers_end_with_their_caption(tmp_path):
    """A caption ended by SIGTERM while its page is written (its handler removes the page's temporary file and leaves
    at once, os._exit) left its two loader workers running, ~450 MB each, for minutes, holding its outputs' locks;
    they end with it now (Linux)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(400):
        Image.new("RGB", (64, 48), (i % 256, 90, 160)).save(folder / f"{i:03d}.png")
    cmd = [sys.executable, "-c", "import sys; from captioning.commands.caption import main; sys.argv[0] = 'caption'; "
           "sys.exit(main())", str(folder), "--model", "shapes", "--workers", "2", "--batch-size", "2",
           "--jsonl", str(tmp_path / "out.jsonl"), "--html", str(tmp_path / "out.html")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, workers = time.monotonic() + 120, []
    while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
        time.sleep(0.2)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        workers = [int(p) for p in children.read_text().split()] if children.exists() else []
    assert len(workers) >= 2, "the loader's workers never started"
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    deadline = time.monotonic() + 2  # torch's own check of the parent runs every 5 s at best
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.1)
    alive = [w for w in workers if Path(f"/proc/{w}").exists() and "Z" not in Path(f"/proc/{w}/stat").read_text()
             .split(")")[-1].split()[0]]  # fmt: skip
    for w in alive:
        os.kill(w, signal.SIGKILL)
    assert alive == []
