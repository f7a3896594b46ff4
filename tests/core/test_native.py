"""The compiled attention-score kernel (text_attn/core/native) against float64 PyTorch, the PyTorch fallback, and how
it is built, cached and turned off. (In the caption decoder's training step:
tests/captioning/test_decoder_native.py.)"""

import os
import subprocess
import sys

import pytest
import torch

from text_attn.core import fused, native
from text_attn.core.fused import AdditiveScore, KeyGradSink, additive_score

KERNEL_OFF = os.environ.get("TEXT_ATTN_NATIVE") == "0"
pytestmark = pytest.mark.skipif(KERNEL_OFF, reason="the compiled kernels are turned off (TEXT_ATTN_NATIVE=0)")


@pytest.fixture(autouse=True)
def compiled():
    assert native.kernels() is not None, f"the score kernel did not build here: {native.status()}"


def _plain_score(q, proj, v):  # vᵀ tanh(proj[n // g] + q[n]), (N, S)
    g = q.size(0) // proj.size(0)
    return torch.tanh(proj.repeat_interleave(g, 0) + q.unsqueeze(1)) @ v.view(-1)


@pytest.mark.parametrize("g", [1, 3])
@pytest.mark.parametrize("A", [5, 16, 37])  # 8-wide lanes: only a tail, whole lanes, both
def test_compiled_score_equals_float64_tanh_in_value_and_gradient(g, A):
    torch.manual_seed(0)
    B, S = 4, 9
    q = torch.randn(B * g, A, requires_grad=True)
    proj = (2 * torch.randn(B, S, A)).requires_grad_()  # large values too: tanh saturates
    v = torch.randn(1, A, requires_grad=True)
    de = torch.randn(B * g, S)
    ours = AdditiveScore.apply(q, proj, v)
    ours_grads = torch.autograd.grad((ours * de).sum(), (q, proj, v))
    q64, proj64, v64 = (t.detach().double().requires_grad_() for t in (q, proj, v))
    exact = _plain_score(q64, proj64, v64)
    exact_grads = torch.autograd.grad((exact * de.double()).sum(), (q64, proj64, v64))
    torch.testing.assert_close(ours, exact.float(), rtol=1e-5, atol=1e-5)
    for a, b in zip(ours_grads, exact_grads, strict=True):
        torch.testing.assert_close(a, b.float(), rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # inference: no σ kept
        torch.testing.assert_close(additive_score(q, proj, v), ours)


def test_summed_backward_writes_then_adds_into_the_sink():
    """A teacher-forced sequence: the first backward to run writes the keys' gradient, the others add into it."""
    torch.manual_seed(0)
    B, S, A, T = 3, 6, 11, 4
    proj = torch.randn(B, S, A, requires_grad=True)
    v = torch.randn(1, A, requires_grad=True)
    qs = [torch.randn(B, A, requires_grad=True) for _ in range(T)]
    sink = KeyGradSink(proj)
    scores = [AdditiveScore.apply(q, proj, v, sink) for q in qs]
    des = [torch.randn(B, S) for _ in range(T)]
    ours = torch.autograd.grad(scores, [proj, v, *qs], des)
    plain = torch.autograd.grad([_plain_score(q, proj, v) for q in qs], [proj, v, *qs], des)
    for a, b in zip(ours, plain, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_retained_graph_refuses_to_run_after_a_later_step_rewrote_its_pooled_sigma():
    """The kernel writes σ into a pooled buffer behind autograd's back; it bumps the buffer's version itself, so the
    reuse is caught as PyTorch's own in-place writes are (an error, not gradients from another step's σ)."""
    fused.SCRATCH.clear()
    torch.manual_seed(0)
    proj = torch.randn(2, 3, 8, requires_grad=True)
    v = torch.randn(1, 8, requires_grad=True)

    def step() -> torch.Tensor:
        sink = KeyGradSink(proj)
        return AdditiveScore.apply(torch.randn(2, 8, requires_grad=True), proj, v, sink).sum()

    first = step()
    grads = torch.autograd.grad(first, (proj, v), retain_graph=True)  # σ goes back to the pool
    torch.autograd.grad(step(), (proj, v))  # takes that σ and writes its own numbers into it
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(first, (proj, v))
    assert all(torch.isfinite(g).all() for g in grads)


def test_a_query_of_another_shape_takes_the_pytorch_way():
    """q (N, 1) broadcasts in PyTorch; the kernel, which reads exactly (N, A), is not handed it."""
    torch.manual_seed(0)
    proj, v, q = torch.randn(2, 3, 8), torch.randn(1, 8), torch.randn(2, 1)
    torch.testing.assert_close(additive_score(q, proj, v), _plain_score(q, proj, v))
    with pytest.raises(RuntimeError):  # too narrow: PyTorch's shape error, no read past the end of q
        additive_score(torch.randn(2, 5), proj, v)


def test_a_row_gives_the_same_bits_alone_or_in_a_batch():
    """Batched and per-image beam search must agree exactly: a score row may not depend on where it sits."""
    torch.manual_seed(0)
    proj, v = torch.randn(5, 7, 37), torch.randn(1, 37)
    q = torch.randn(15, 37)  # 3 beams per image
    batched = additive_score(q, proj, v)
    for i in range(5):
        alone = additive_score(q[3 * i : 3 * i + 3].clone(), proj[i : i + 1].clone(), v)
        assert torch.equal(alone, batched[3 * i : 3 * i + 3])


def test_nan_in_the_keys_reaches_the_score():
    proj, v, q = torch.randn(2, 3, 9), torch.randn(1, 9), torch.randn(2, 9)
    proj[1, 2, 4] = float("nan")
    e = additive_score(q, proj, v)
    assert torch.isnan(e[1, 2]) and torch.isfinite(e).sum() == e.numel() - 1


def _status_in_subprocess(tmp_path, **env) -> str:
    code = "from text_attn.core import native; print(native.status())"
    full = {k: value for k, value in os.environ.items() if k != "CC"}  # the caller's CC is no part of the test
    full.update({"TEXT_ATTN_CACHE": str(tmp_path / "cache"), **env})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_built_once_into_the_cache_then_reused_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXT_ATTN_CACHE", str(tmp_path / "cache"))
    cc = ["cc"]
    built = native._build_and_load(cc, "score-test.so").path  # in this process: no torch import to wait for
    assert built.parent == tmp_path / "cache" and list(built.parent.iterdir()) == [built]  # no temporaries left
    stamp = built.stat().st_mtime_ns
    assert native._build_and_load(cc, "score-test.so").path == built and built.stat().st_mtime_ns == stamp
    damaged = tmp_path / "cache" / "score-damaged.so"  # a name this process never loaded (dlopen would reuse it)
    damaged.write_bytes(b"not a shared library")
    assert native._build_and_load(cc, damaged.name).path == damaged and damaged.read_bytes().startswith(b"\x7fELF")


def test_an_unwritable_cache_builds_for_the_process_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("TEXT_ATTN_CACHE", "/proc")  # /proc exists and takes no new files, even for root
    built = native._build_and_load(["cc"], "score-test.so").path
    assert built.is_file() and not str(built).startswith("/proc")
    # that private folder goes away with its process (checked in one that needs no torch)
    code = "from text_attn.core import native; print(native.private_dir())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert os.path.isabs(done.stdout.strip()) and not os.path.exists(done.stdout.strip())


def test_cc_may_be_a_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "env cc")  # as "ccache gcc" would be
    assert native.compiler() == ["env", "cc"]
    monkeypatch.setenv("TEXT_ATTN_CACHE", str(tmp_path))
    assert native._build_and_load(native.compiler(), "score-test.so").path == tmp_path / "score-test.so"


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"TEXT_ATTN_NATIVE": "0"}, "PyTorch (off (TEXT_ATTN_NATIVE=0))"),
        ({"CC": "no-such-compiler"}, "PyTorch (no C compiler ('no-such-compiler' not found; set CC))"),
        ({"CC": "false"}, "PyTorch (not built: false -O3"),  # a compiler that fails
    ],
)
def test_without_a_working_compiler_pytorch_runs_and_status_says_why(tmp_path, env, why):
    assert _status_in_subprocess(tmp_path, **env).startswith(why)
    assert not list((tmp_path / "cache").glob("*.so"))
