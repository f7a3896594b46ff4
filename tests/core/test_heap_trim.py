"""A long search hands the heap's free pages back (text_attn.core.heap_trim): at the steps it says, and for real."""

import platform
import subprocess
import sys

import pytest
import torch

import text_attn.core.decoding as decoding
from text_attn.core import heap_trim
from text_attn.core.decoding import beam_search, greedy_search

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def test_the_hook_trims_from_step_128_every_32_steps(monkeypatch):
    calls = []
    monkeypatch.setattr(heap_trim, "release_free_heap", lambda: calls.append(1) or True)
    trimmed = []
    for t in range(300):
        before = len(calls)
        heap_trim.every_few_steps(t)
        if len(calls) > before:
            trimmed.append(t)
    assert trimmed == [128, 160, 192, 224, 256, 288]  # a sentence's search (< 128 steps) never trims


class NeverEnds:
    """A step model over V=5 tokens that never picks the end (id 2): every search runs to its cap."""

    def step(self, tokens, state):
        lp = torch.log_softmax(torch.tensor([0.0, 0.0, -9.0, 3.0, 1.0]).expand(tokens.numel(), 5), dim=-1)
        return lp, None, state


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_searches_call_it_at_every_step(search, monkeypatch):
    seen = []
    monkeypatch.setattr(decoding, "every_few_steps", seen.append)
    state = torch.zeros(2, 1)
    if search == "greedy":
        greedy_search(NeverEnds(), state, 2, bos_id=1, eos_id=2, max_len=40)
    else:
        beam_search(NeverEnds(), state, 2, bos_id=1, eos_id=2, max_len=40, beam_size=3)
    assert seen == list(range(40))


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's: elsewhere release_free_heap does nothing")
def test_a_holed_heap_gives_its_free_pages_back():
    # In a fresh process: 800 blocks of 256 KiB from the heap (one freed first raises glibc's mmap threshold above
    # them), every other one freed: holes between the blocks kept, which no trim of the heap's top can return.
    # Resident memory stays up until release_free_heap, then falls by most of the holes' 100 MiB.
    code = r"""
import ctypes
from text_attn.core.heap_trim import release_free_heap
from text_attn.core.memory_room import own_resident as rss
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(1 << 20))  # an mmapped block freed: later blocks below 1 MiB come from the heap
blocks = []
for _ in range(800):
    b = libc.malloc(256 << 10)
    ctypes.memset(b, 1, 256 << 10)
    blocks.append(b)
start = rss()
for b in blocks[::2]:
    libc.free(b)
held = rss()
assert release_free_heap()
print(start, held, rss())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    start, held, after = map(int, out)
    mib = 2**20
    assert held > start - 20 * mib, (start, held)  # free() alone kept the holes' pages
    assert after < held - 80 * mib, (held, after)  # the trim handed them back


def test_it_is_a_no_op_where_there_is_no_malloc_trim(monkeypatch):
    monkeypatch.setattr(heap_trim, "_trim", False)
    assert heap_trim.release_free_heap() is False
    heap_trim.every_few_steps(128)  # no error
