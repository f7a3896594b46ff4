"""The attacks of SECURITY.md, each run through the real command: a checkpoint that runs code (remote, local, resumed
as `last`), planted cache files (a kernel library, an ONNX graph), planted links at the names writers used to use,
outputs that are FIFOs or links, outputs that are inputs, and terminal escape sequences in a model file. Code that must
not run leaves a marker file; files that must not change are compared byte for byte."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.attacks import code_checkpoint, constructor_library, serving
from helpers.tiny_captioner import tiny_model_file
from helpers.tiny_translator import tiny_word_model_file
from PIL import Image

from captioning.commands.caption import caption_main
from captioning.commands.export import export_main as caption_export
from text_attn.core.modelfile import update_info
from text_attn.translation.export import export_main as text_export
from text_attn.translation.train_cli import train_main as text_train
from text_attn.translation.translate_cli import translate_main

FIX = Path(__file__).parent.parent / "fixtures"
PHOTO = FIX / "images" / "coffee.png"
ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x1b[31m"  # clipboard write (OSC 52), clear screen, red


def _exit(main, argv: list[str], capsys, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main(argv) or 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def cap_model(tmp_path_factory) -> Path:
    return tiny_model_file(tmp_path_factory.mktemp("m") / "caption.pt")


@pytest.fixture(scope="module")
def text_model(tmp_path_factory) -> Path:
    return tiny_word_model_file(tmp_path_factory.mktemp("t") / "text.pt")


# --- 1. checkpoints never unpickle code --------------------------------------------------------------------------


def test_the_planted_checkpoint_runs_code_when_unpickled_the_unsafe_way(tmp_path):
    """The control: the file the tests plant really runs code under weights_only=False (what Lightning did with a URL),
    so its marker staying absent below means the toolkit refused it."""
    marker = tmp_path / "ran"
    torch.load(code_checkpoint(tmp_path / "evil.ckpt", marker), weights_only=False)
    assert marker.exists()


def test_a_remote_checkpoint_is_refused_before_it_is_fetched(tmp_path, capsys, cli_run_in_tmp):
    marker = tmp_path / "ran"
    code_checkpoint(tmp_path / "evil.ckpt", marker)
    with serving(tmp_path) as (url, asked):
        for ckpt in (f"{url}/evil.ckpt", "s3://bucket/evil.ckpt"):
            code, _, err = _exit(text_train, ["test", "--ckpt_path", ckpt], capsys)
            assert code == 2 and "download it first" in _one_error(err)
    assert not marker.exists() and asked == []


def test_a_local_checkpoint_that_holds_code_is_refused(tmp_path, capsys, cli_run_in_tmp):
    marker = tmp_path / "ran"
    evil = code_checkpoint(tmp_path / "evil.ckpt", marker)
    code, _, err = _exit(text_train, ["test", "--ckpt_path", str(evil)], capsys)
    assert code == 2 and "evil.ckpt" in _one_error(err) and "refused: it holds more than tensors" in err
    assert not marker.exists()


def test_a_planted_last_checkpoint_is_read_weights_only_when_resumed(tmp_path, capsys, cli_run_in_tmp):
    """--ckpt_path last: Lightning finds the file itself, and reads it through the toolkit's checkpoint IO."""
    from helpers.resumable import resumable_config

    cfg = str(resumable_config(tmp_path, "text", every=2))
    text_train(["fit", "--config", cfg, "--trainer.max_steps", "2", "--trainer.default_root_dir", "run"])
    (last,) = Path("run").rglob("last.ckpt")
    marker = tmp_path / "ran"
    code_checkpoint(last, marker)
    args = ["fit", "--config", cfg, "--trainer.max_steps", "4", "--trainer.default_root_dir", "run"]
    code, _, err = _exit(text_train, [*args, "--ckpt_path", "last"], capsys)
    assert code == 2 and "refused" in _one_error(err) and "last.ckpt" in err
    assert not marker.exists()


def test_a_planted_hpc_checkpoint_is_checked_before_lightning_reads_it(tmp_path, capsys, cli_run_in_tmp,
                                                                       monkeypatch):  # fmt: skip
    """--ckpt_path hpc was left to the toolkit's checkpoint reader, which a strategy reading checkpoints itself (FSDP's)
    never calls: the highest hpc_ckpt_N.ckpt of the run folder is checked first, as a file given is."""
    from text_attn.core.run_checkpoints import hpc_file

    run = tmp_path / "run"
    run.mkdir()
    torch.save({"x": 1}, run / "hpc_ckpt_2.ckpt")
    marker = tmp_path / "ran"
    code_checkpoint(run / "hpc_ckpt_10.ckpt", marker)  # the highest number, not the newest name sorted as text
    assert hpc_file(run) == run / "hpc_ckpt_10.ckpt" and hpc_file(tmp_path / "none") is None
    config = Path(__file__).resolve().parents[1] / "fixtures/text/tiny_reorder.yaml"

    def reached(*args, **kwargs):  # as under FSDP: no check of the toolkit's reader to rely on
        raise AssertionError("Lightning's read came before the check")

    monkeypatch.setattr("text_attn.core.lightning_parts.AtomicCheckpointIO.load_checkpoint", reached)
    code, _, err = _exit(text_train, ["fit", "--config", str(config), "--trainer.default_root_dir", str(run),
                                      "--ckpt_path", "hpc"], capsys)  # fmt: skip
    assert code == 2 and "hpc_ckpt_10.ckpt: refused: it holds more than tensors" in _one_error(err)
    assert not marker.exists()


def test_the_checkpoint_reader_lightning_uses_refuses_urls_and_code(tmp_path):
    from text_attn.core.lightning_cli import CheckpointRefused, _make_cli_class

    reader = _make_cli_class("text-train").checkpoint_io_class_()
    marker = tmp_path / "ran"
    with pytest.raises(CheckpointRefused, match="holds more than tensors"):
        reader.load_checkpoint(code_checkpoint(tmp_path / "evil.ckpt", marker))
    with pytest.raises(CheckpointRefused, match="download it first"):
        reader.load_checkpoint("https://example.org/x.ckpt")
    assert not marker.exists()
    torch.save({"state_dict": {"w": torch.ones(2)}, "epoch": 3}, tmp_path / "good.ckpt")
    assert reader.load_checkpoint(tmp_path / "good.ckpt")["epoch"] == 3


# --- 2. caches trust only what this user built ------------------------------------------------------------------


def _kernel_name() -> str:
    from text_attn.core import native

    return f"kernels-{native._build_key(native.compiler())}.so"


def _native_statuses(caches: list[Path]) -> list[tuple[str, str]]:
    """native.status() with each cache in turn, in one fresh process (each a process of its own imported torch again,
    ~1.5 s): each one's (stdout, stderr). Its kernels are looked up afresh for each, as a new process does."""
    env = {**os.environ, "TEXT_ATTN_NATIVE": "1"}
    env.pop("CC", None)
    code = "\n".join([
        "import os, sys",
        "from text_attn.core import native",
        "for cache in sys.argv[1:]:",
        "    os.environ['TEXT_ATTN_CACHE'] = cache",
        "    native._kernels.cache_clear()",
        "    print(native.status(), '---', sep='\\n', flush=True)",
        "    print('---', file=sys.stderr, flush=True)",
    ])  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, *map(str, caches)], capture_output=True, text=True, env=env,
                          timeout=180)  # fmt: skip
    outs, errs = done.stdout.split("---\n"), done.stderr.split("---\n")
    assert done.returncode == 0 and len(outs) == len(errs) == len(caches) + 1, done.stderr
    return list(zip(outs[:-1], errs[:-1], strict=True))


KERNEL_CASES = ["control", "folder writable by others", "file of another user"]


def _planted_cache(root: Path, how: str) -> tuple[Path, Path]:
    """A kernels cache under ``root`` holding a library planted under the kernels' name, made untrusted as ``how``
    says: (the cache, the marker its constructor touches when it is loaded)."""
    cache = root / "cache"
    cache.mkdir(mode=0o700, parents=True)
    marker = root / "ran"
    planted = constructor_library(cache / _kernel_name(), marker)
    if how == "folder writable by others":
        cache.chmod(0o777)
    elif how == "file of another user":
        if os.geteuid() != 0:
            planted.chmod(0o666)  # not root: a file others can write stands in for one they own
        else:
            os.chown(planted, 65534, 65534)
    return cache, marker


@pytest.fixture(scope="module")
def kernel_statuses(tmp_path_factory) -> dict[str, tuple[Path, Path, str, str]]:
    """how -> (cache, marker, stdout, stderr) of the -m long run's cases, all in one process."""
    planted = {how: _planted_cache(tmp_path_factory.mktemp("kernels"), how) for how in KERNEL_CASES[:2]}
    ran = _native_statuses([cache for cache, _ in planted.values()])
    return {how: (*planted[how], *out) for how, out in zip(planted, ran, strict=True)}


# -m long's cases share a process (kernel_statuses); the file owned by another user is the same refusal,
# in a process of its own (~4 s): -m slow
@pytest.mark.long
@pytest.mark.parametrize("how", [*KERNEL_CASES[:2], pytest.param(KERNEL_CASES[2], marks=pytest.mark.slow)])
def test_a_planted_kernel_library_is_not_loaded(tmp_path, how, request):
    if how in KERNEL_CASES[:2]:
        cache, marker, stdout, stderr = request.getfixturevalue("kernel_statuses")[how]
    else:
        cache, marker = _planted_cache(tmp_path, how)
        ((stdout, stderr),) = _native_statuses([cache])
    if how == "control":  # this user's own cache: the file is trusted and loaded (so the marker detects a load)
        assert marker.exists()
        return
    assert not marker.exists(), stderr
    assert stderr.count("note: the compiled kernels cache") == 1 and "is not used" in stderr
    assert stdout.startswith("compiled C") and str(cache) not in stdout  # built in a private folder


@pytest.mark.long
def test_a_planted_onnx_graph_is_not_run(tmp_path, monkeypatch, cap_model):
    """A graph that multiplies the features by zero, planted under the name the encoder's graph has."""
    import onnx

    from captioning.model import onnx_encoder
    from captioning.model.encoder import ImageEncoder

    monkeypatch.setenv("CAPTION_ONNX", "1")
    monkeypatch.setenv("TEXT_ATTN_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    enc = ImageEncoder("efficientnet_lite0", grid=3, weights=None).eval()
    for m in enc.modules():  # batch-norm statistics far from their defaults: features far from zero
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.bias.uniform_(0.5, 1.5)
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        honest = enc(x)
    assert honest.abs().max() > 0.1
    (graph,) = (tmp_path / "cache" / "onnx").glob("*.onnx")
    model = onnx.load(graph)
    zero = onnx.helper.make_tensor("zero", onnx.TensorProto.FLOAT, [], [0.0])
    out = model.graph.output[0].name
    model.graph.initializer.append(zero)
    for node in model.graph.node:  # the last node writes "<out>_raw", then a Mul by zero writes the output
        node.output[:] = [f"{o}_raw" if o == out else o for o in node.output]
    model.graph.node.append(onnx.helper.make_node("Mul", [f"{out}_raw", "zero"], [out]))
    onnx.save(model, graph)

    def fresh():
        twin = ImageEncoder("efficientnet_lite0", grid=3, weights=None).eval()
        twin.load_state_dict(enc.state_dict())
        monkeypatch.setattr(onnx_encoder, "_sessions", {})
        with torch.no_grad():
            return twin(x)

    assert fresh().abs().max() == 0  # the control: in this user's own folder the planted graph runs
    graph.parent.chmod(0o777)  # a folder others can write
    torch.testing.assert_close(fresh(), honest, rtol=1e-4, atol=1e-4 * honest.abs().max().item())


# --- 3, 4. writers never follow links, never replace what is not a regular file -----------------------------------


def test_planted_links_at_the_old_temporary_names_change_nothing(tmp_path, capsys, monkeypatch, cap_model):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    (tmp_path / "out.pt.part").symlink_to(victim)
    assert caption_export([str(cap_model), str(tmp_path / "out.pt")]) in (0, None)
    capsys.readouterr()
    (tmp_path / "run.jsonl").write_text("")
    (tmp_path / "run.jsonl.part").symlink_to(victim)
    code, _, err = _exit(caption_main, [str(PHOTO), "--model", str(cap_model), "--max-len", "3", "--jsonl",
                                        str(tmp_path / "run.jsonl"), "--resume"], capsys)  # fmt: skip
    assert code == 0, err
    copy = tmp_path / "copy.pt"
    copy.write_bytes((tmp_path / "out.pt").read_bytes())
    (tmp_path / "copy.pt.part").symlink_to(victim)
    update_info(copy, {"note": "x"})
    assert victim.read_bytes() == b"precious\n" and (tmp_path / "run.jsonl").read_text().count("\n") == 1


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_an_output_that_is_a_fifo_or_a_link_is_refused_and_left_as_it_is(tmp_path, capsys, kind, cap_model, text_model):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")

    def target(name: str) -> str:
        path = tmp_path / name
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(victim)
        return str(path)

    runs = [
        (text_export, [str(text_model), target("a")]),
        (caption_export, [str(cap_model), target("b")]),
        (caption_main, [str(PHOTO), "--model", str(cap_model), "--max-len", "3", "--jsonl", target("c")]),
        (caption_main, [str(PHOTO), "--model", str(cap_model), "--max-len", "3", "--html", target("d")]),
        (translate_main, ["ein mann", "--model", str(text_model), "--output", target("e")]),
        (translate_main, ["ein mann", "--model", str(text_model), "--plot", target("f")]),
    ]
    for main, argv in runs:
        code, _, err = _exit(main, argv, capsys)
        line = _one_error(err)
        assert code == 2 and ("a FIFO" if kind == "fifo" else "symbolic link") in line, line
    for name in "abcdef":
        mode = os.lstat(tmp_path / name).st_mode
        assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISLNK(mode)
    assert victim.read_bytes() == b"precious\n"


# --- 5. an output is never an input --------------------------------------------------------------------------------


def test_an_output_that_is_an_input_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, cap_model):
    photos = tmp_path / "photos"
    photos.mkdir()
    for name in ("a.png", "b.png"):
        (photos / name).write_bytes(PHOTO.read_bytes())
    os.link(photos / "a.png", tmp_path / "hard.png")
    before = {p: p.read_bytes() for p in photos.iterdir()}
    m = ["--model", str(cap_model), "--max-len", "3"]
    attempts = [
        ([str(photos), "--html", str(photos / "b.png")], None),  # found in a folder
        (["-", "--jsonl", str(photos / "a.png")], f"{photos / 'a.png'}\n"),  # read from stdin
        ([str(photos / "a.png"), "--jsonl", str(tmp_path / "hard.png")], None),  # a hard link to the input
        ([str(photos), "--jsonl", str(tmp_path / "hard.png")], None),
    ]
    for argv, stdin in attempts:
        code, _, err = _exit(caption_main, [*argv, *m], capsys, stdin=stdin or "", monkeypatch=monkeypatch)
        assert code == 2 and "is also an input" in _one_error(err), err
    # an overlay that would be written over an input: out/a-attention.png is given as an image
    out = tmp_path / "out"
    out.mkdir()
    (out / "a-attention.png").write_bytes(PHOTO.read_bytes())
    code, _, err = _exit(caption_main, [str(out / "a-attention.png"), str(photos / "a.png"), "--overlay", str(out),
                                        *m], capsys)  # fmt: skip
    assert code == 2 and "the overlay" in _one_error(err) and "is also an input" in err
    assert (out / "a-attention.png").read_bytes() == PHOTO.read_bytes()
    assert {p: p.read_bytes() for p in photos.iterdir()} == before


def test_a_file_on_stdin_is_an_input_too(tmp_path, text_model):
    """translate --output FILE < FILE would empty FILE before reading it."""
    src = tmp_path / "in.txt"
    src.write_text("ein mann\n")
    with src.open() as stdin:
        translate = str(Path(sys.executable).parent / "translate")
        done = subprocess.run([translate, "--model", str(text_model), "--output", str(src)], stdin=stdin,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "is also an input (stdin)" in done.stderr, done.stderr
    assert src.read_text() == "ein mann\n"


# --- 6. text from files reaches the terminal inert ---------------------------------------------------------------


def test_model_info_and_file_names_reach_the_terminal_inert(tmp_path, capsys, cap_model, text_model):
    cap, txt = tmp_path / "c.pt", tmp_path / "t.pt"
    cap.write_bytes(cap_model.read_bytes())
    txt.write_bytes(text_model.read_bytes())
    for path in (cap, txt):
        update_info(path, {"data": f"photos{ESCAPES}", "license": f"x{ESCAPES}"})
    for main, argv in ((caption_main, ["--model", str(cap), "--model-info"]),
                       (translate_main, ["--model", str(txt), "--model-info"])):  # fmt: skip
        code, out, err = _exit(main, argv, capsys)
        assert code == 0, err
        assert "\x1b" not in out + err and "\x07" not in out and "\\x1b]52;c;" in out
    odd = tmp_path / f"name{ESCAPES}.png"
    code, out, err = _exit(caption_main, [str(odd), "--model", str(cap), "--max-len", "3"], capsys)
    assert code == 1 and "\x1b" not in out + err and "name\\x1b]52" in err
    # a photo that is there, named so (and with a bidirectional override): its caption line and its overlay's line
    there = tmp_path / f"cat{ESCAPES}\u202egnp.png"
    Image.new("RGB", (32, 32), "red").save(there, format="PNG")
    code, out, err = _exit(caption_main, [str(there), str(there.with_name("b.png")), "--model", str(cap),
                                          "--max-len", "3", "--overlay", str(tmp_path / "ov2")], capsys)  # fmt: skip
    assert "\x1b" not in out + err and "\u202e" not in out + err and "cat\\x1b]52" in out and "\\u202e" in err
    # a line break in a name stays inside its line: an error line and a "wrote" line are one line each
    broken, photo = tmp_path / "empty\nfile.jpg", tmp_path / "bad\nname.png"
    broken.write_bytes(b"")
    Image.new("RGB", (32, 32), "red").save(photo, format="PNG")
    code, out, err = _exit(caption_main, [str(broken), str(photo), "--model", str(cap), "--max-len", "3", "--overlay",
                                          str(tmp_path / "ov")], capsys)  # fmt: skip
    lines = [line for line in err.strip().splitlines() if "--max-len" not in line]  # (and a note: cut off at 3)
    assert code == 1 and len(lines) == 2, lines
    assert lines[0].startswith(f"caption: error: {tmp_path}/empty\\x0afile.jpg: ") and "bad\\x0aname" in lines[1]


@pytest.mark.parametrize("flag", [["--json"], ["--jsonl", "-"]])
def test_records_on_stdout_stay_json_whatever_their_text_holds(flag, capsys, monkeypatch, text_model):
    """json.dumps leaves DEL, C1 controls, the bidirectional overrides and lone surrogates raw; the inert stdout wrote
    them as \\x85, which JSON has no escape for (a NEL in an input: json.load failed, exit 0). Written as JSON's
    \\uXXXX: inert on a terminal and the same JSON value."""
    odd = ["ein\x85hund", "ein \x7fmann \u202eläuft", "eine\x9b2Jfrau", f"x{ESCAPES}"]
    code, out, err = _exit(translate_main, ["--model", str(text_model), *flag], capsys, "\n".join(odd) + "\n",
                           monkeypatch)  # fmt: skip
    assert code == 0, err
    records = json.loads(out) if flag == ["--json"] else [json.loads(line) for line in out.splitlines()]
    assert [r["source"] for r in records] == odd
    assert not any(c in out for c in "\x1b\x07\x85\x7f\x9b\u202e")  # inert as it is


@pytest.mark.long
def test_what_the_training_commands_print_of_folders_and_configs_reaches_the_terminal_inert(tmp_path, capsys,
                                                                                           monkeypatch):  # fmt: skip
    """A planted run folder's name (found by --ckpt_path last) and a config's value reached the terminal raw: the
    line naming the checkpoint, Lightning's "Restoring states from ...", the note on options left unread."""
    monkeypatch.chdir(tmp_path)
    planted = tmp_path / f"r/lightning_logs/v{ESCAPES}\u202e/checkpoints"
    planted.mkdir(parents=True)
    torch.save({"state_dict": {}, "pytorch-lightning_version": "2.6.0", "hyper_parameters": {}, "epoch": 0,
                "global_step": 0}, planted / "last.ckpt")  # fmt: skip
    config = Path(__file__).resolve().parents[1] / "fixtures/text/tiny_reorder.yaml"
    odd = tmp_path / "odd.yaml"
    odd.write_text('data:\n  task: "dates\\e]52;c;Zg==\\a\\e[2J\\u202e"\n')  # YAML's own escapes
    for argv in (["fit", "--config", str(config), "--trainer.default_root_dir", "r", "--trainer.max_steps", "1",
                  "--ckpt_path", "last"], ["fit", "--config", str(config), "--config", str(odd)]):  # fmt: skip
        code, out, err = _exit(text_train, argv, capsys)
        assert "\x1b" not in out + err and "\u202e" not in out + err, err
        assert "\\x1b]52" in err and "\\x1b[2J" in err, err  # said, as escapes


# --- what the review of the first fix found --------------------------------------------------------------------


def test_the_model_file_is_an_input_too(tmp_path, capsys, cap_model, text_model):
    cap, txt = tmp_path / "c.pt", tmp_path / "t.pt"
    cap.write_bytes(cap_model.read_bytes())
    txt.write_bytes(text_model.read_bytes())
    before = cap.read_bytes(), txt.read_bytes()
    for main, argv in ((caption_main, [str(PHOTO), "--model", str(cap), "--jsonl", str(cap)]),
                       (caption_main, [str(PHOTO), "--model", str(cap), "--html", str(cap)]),
                       (translate_main, ["ein mann", "--model", str(txt), "--output", str(txt)]),
                       (translate_main, ["ein mann", "--model", str(txt), "--html", str(txt)])):  # fmt: skip
        code, _, err = _exit(main, argv, capsys)
        assert code == 2 and "is also an input" in _one_error(err), err
    assert (cap.read_bytes(), txt.read_bytes()) == before


def test_a_numbered_plot_never_replaces_the_file_on_stdin(tmp_path, text_model, monkeypatch, capsys):
    """In this process, the file as its stdin (the check reads sys.stdin's file: a new process costs ~4 s)."""
    from text_attn.translation.translate_cli import translate_main

    src = tmp_path / "g-1.png"
    src.write_text("ein mann\nein mann\n")
    with src.open() as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        code, _, err = _exit(translate_main, ["--model", str(text_model), "--plot", str(tmp_path / "g.png")], capsys)
    assert code == 2 and "is also an input (stdin)" in _one_error(err), err
    assert src.read_text() == "ein mann\nein mann\n"


def test_an_export_never_writes_over_its_info_file(tmp_path, capsys, cap_model):
    info = tmp_path / "info.json"
    info.write_text('{"data": "x"}')
    code, _, err = _exit(caption_export, [str(cap_model), str(info), "--info", str(info)], capsys)
    assert code == 2 and "is also an input" in _one_error(err)
    assert info.read_text() == '{"data": "x"}'


def test_a_planted_link_at_the_runs_config_yaml_is_not_written_through(tmp_path, capsys, cli_run_in_tmp):
    from captioning.commands.train import train_main as caption_train

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "config.yaml").symlink_to(victim)  # the tiny config logs nowhere: config.yaml lands in the root
    args = ["fit", "--config", str(FIX / "captions" / "tiny_shapes.yaml"), "--trainer.max_steps", "1"]
    code, _, err = _exit(caption_train, [*args, "--trainer.default_root_dir", "."], capsys)
    assert code == 2 and "symbolic link" in _one_error(err)
    assert victim.read_text() == "precious\n"


def test_report_never_replaces_the_logs_it_reads(tmp_path, capsys):
    import os

    from helpers.run_logs import write_run

    from text_attn.core.run_report import report_main

    log_dir = write_run(tmp_path / "run")
    metrics = next(p for p in log_dir.iterdir() if p.name == "metrics.csv")
    before = metrics.read_bytes()
    os.link(metrics, tmp_path / "report.png")  # the log under a picture's name (--out metrics.csv: not a picture)
    for out, says in ((metrics, "the report is a picture"), (tmp_path / "report.png", "is also an input")):
        code, _, err = _exit(lambda argv: report_main("caption-train", argv),
                             [str(tmp_path / "run"), "--out", str(out)], capsys)  # fmt: skip
        assert code == 2 and says in _one_error(err) and metrics.read_bytes() == before


def test_names_and_captions_cannot_forge_lines(tmp_path, capsys, cap_model):
    odd = tmp_path / "b\nforged.png\tA FORGED CAPTION.png"
    odd.write_bytes(PHOTO.read_bytes())
    code, out, err = _exit(caption_main, [str(PHOTO), str(odd), "--model", str(cap_model), "--max-len", "3"], capsys)
    assert code == 0, err
    assert len(out.splitlines()) == 2 and all(line.count("\t") == 1 for line in out.splitlines())
    assert "b\\x0aforged.png\\x09A FORGED CAPTION.png\t" in out


def test_features_cached_in_a_folder_others_can_write_are_not_used(tmp_path, capsys):
    from captioning.training.feature_cache import load_features, save_features

    mine = tmp_path / "mine" / "f.pt"
    save_features(mine, torch.ones(2, 3, 4))
    assert load_features(mine, 2) is not None
    mine.parent.chmod(0o777)
    assert load_features(mine, 2) is None and "are not used" in capsys.readouterr().err
