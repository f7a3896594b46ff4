"""The device check's profile (issue 71; benchmarks/gpu.py --out DIR): torch.profiler over one captioning batch (the
bundled model's encoder and search at its recorded decoding) and one training step at the compass shape, written as
tables under DIR, and the rows that say what bounds each: the share of the wall time the device's kernels were busy,
of the host's time in kernel launches, and in waits for the device (synchronisations and device-to-host reads).
On a CPU the same code runs (the device shares are then empty: no CUDA activity), so the test suite checks it."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

LAUNCH = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaGraphLaunch", "cudaMemcpyAsync")
WAIT = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "aten::_local_scalar_dense")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profiled(fn, device: torch.device, name: str, out: Path) -> dict:
    """Run ``fn`` once to warm up, then once under the profiler; write DIR/profile_<name>.txt (the top ops by self
    time, device first on CUDA) and return the shares (module doc) and the top three device kernels."""
    fn()
    _sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        fn()
        _sync(device)
        wall_us = (time.perf_counter() - t0) * 1e6
    events = prof.key_averages()
    on_device = device.type == "cuda"
    sort = "self_cuda_time_total" if on_device else "self_cpu_time_total"
    (out / f"profile_{name}.txt").write_text(events.table(sort_by=sort, row_limit=30) + "\n")
    host = sum(e.self_cpu_time_total for e in events)

    def self_device(e) -> float:
        return getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))

    kernels = sorted((e for e in events if self_device(e) > 0), key=self_device, reverse=True)
    busy = sum(self_device(e) for e in events)
    launch = sum(e.self_cpu_time_total for e in events if e.key in LAUNCH)
    wait = sum(e.self_cpu_time_total for e in events if e.key in WAIT)
    return {
        "wall_ms": wall_us / 1000,
        "device_busy": busy / wall_us if on_device else None,
        "launch_share": launch / host if host else 0.0,
        "wait_share": wait / host if host else 0.0,
        "top": [f"{e.key} {self_device(e) / 1000:.1f} ms" for e in kernels[:3]],
        "file": f"profile_{name}.txt",
    }


def profile_rows(device: torch.device, folder: Path, out: Path, quick: bool) -> list[dict]:
    """The two profiles as rows of the check's table."""
    from speed import our_train_step, paper_decoder

    from captioning.model.captioner import Captioner
    from captioning.photos.preprocess import prepared

    out.mkdir(parents=True, exist_ok=True)
    captioner = Captioner.load().to(device)
    paths = sorted(folder.iterdir())[: 8 if quick else 128]
    images = torch.stack([prepared(p, captioner.preprocess) for p in paths]).to(device)
    d = captioner.decoding()
    search = dict(beam_size=d["beam_size"], length_penalty=d["length_penalty"], no_repeat_ngram=d["no_repeat_ngram"])
    batch = lambda: captioner.generate(captioner.encode(images), **search)  # noqa: E731
    parts = {f"a captioning batch of {len(paths)} (encoder + search)": profiled(batch, device, "caption", out)}
    regions, feat, words = (49, 256, 8) if quick else (196, 2048, 20)
    dec = paper_decoder().to(device).train()
    if quick:
        from captioning.model.decoder import DecoderConfig, ShowAttendTellDecoder

        dec = ShowAttendTellDecoder(DecoderConfig(vocab_size=1000, feature_dim=feat, embed_dim=64, hidden_dim=64,
                                                  attn_dim=64)).to(device).train()  # fmt: skip
    opt = torch.optim.Adam(dec.parameters(), lr=1e-4)
    feats = torch.randn(32, regions, feat, device=device)
    caps = torch.randint(4, dec.cfg.vocab_size, (32, words + 1), device=device)
    parts[f"a training step, batch 32 ({'small: --quick' if quick else 'the compass shape'}), eager"] = profiled(
        lambda: our_train_step(dec, opt, feats, caps[:, :-1], caps[:, 1:]), device, "train_step", out
    )
    rows = []
    for what, p in parts.items():
        busy = "" if p["device_busy"] is None else f"device busy {p['device_busy']:.0%} of the wall time, "
        value = (f"{p['wall_ms']:.1f} ms; {busy}host time in launches {p['launch_share']:.0%}, in waits for the "
                 f"device {p['wait_share']:.0%}; top kernels: {', '.join(p['top']) or 'none (no CUDA)'} "
                 f"({p['file']})")  # fmt: skip
        rows.append({"what": f"profile, {what}", "value": value, **p})
    return rows
