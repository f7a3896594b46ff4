"""The short commands' default thread count (text_attn/core/cpu_load.py): one per core other programs leave free, read
from /proc/stat; an explicit choice wins. Hand-computed readings, then the real machine beside a busy process."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from text_attn.core import cpu_load

# user nice system idle iowait irq softirq steal guest guest_nice
STAT_BEFORE = """cpu  300 0 100 600 0 0 0 0 0 0
cpu0 150 0 50 300 0 0 0 0 0 0
cpu1 150 0 50 300 0 0 0 0 0 0
intr 1 2 3
ctxt 99
"""
# 100 ticks a core later: cpu0 all busy (70 user incl. 20 guest, 20 system, 10 steal), cpu1 40 busy, 50 idle, 10 iowait
STAT_AFTER = """cpu  410 0 120 650 10 0 0 10 20 0
cpu0 220 0 70 300 0 0 0 10 20 0
cpu1 190 0 50 350 10 0 0 0 0 0
intr 1 2 3
ctxt 120
"""


def test_proc_stat_is_read_per_core_with_steal_busy_and_guest_not_counted_twice():
    assert cpu_load.read_cpus(STAT_BEFORE) == {0: (200, 500), 1: (200, 500)}
    # cpu0: busy 220 + 70 + 10 (steal) = 300, guest (inside user) not added; cpu1: idle 350 + iowait 10
    assert cpu_load.read_cpus(STAT_AFTER) == {0: (300, 600), 1: (240, 600)}


def test_own_ticks_are_counted_after_the_name_whatever_it_holds():
    fields = ["S"] + [str(i) for i in range(4, 14)] + ["7", "5"] + ["0"] * 30  # utime 7, stime 5 (fields 14, 15)
    assert cpu_load.read_own("42 (a (weird) name) " + " ".join(fields)) == 12


def test_other_programs_load_is_the_busy_ticks_less_our_own_over_one_core():
    before, after = cpu_load.read_cpus(STAT_BEFORE), cpu_load.read_cpus(STAT_AFTER)
    # busy 100 + 40 = 140 ticks, ours 60, one core's interval 100 ticks: others kept 0.8 of a core busy
    assert cpu_load.others_busy(before, after, 60, {0, 1}) == pytest.approx(0.8)
    assert cpu_load.others_busy(before, after, 0, {1}) == pytest.approx(0.4)  # only the cores we may use count
    assert cpu_load.others_busy(before, after, 500, {0, 1}) == 0.0  # never below 0
    assert cpu_load.others_busy(before, before, 0, {0, 1}) == 0.0  # no ticks in the interval: nothing known
    assert cpu_load.others_busy(before, after, 0, {7}) == 0.0  # a core /proc/stat does not list


@pytest.mark.parametrize(
    ("current", "cores", "busy", "expected"),
    [
        (2, 2, 0.0, 2),
        (2, 2, 0.49, 2),  # a little background work leaves both threads
        (2, 2, 0.5, 1),  # half a core taken already stalls the thread on it
        (2, 2, 1.0, 1),
        (2, 2, 2.0, 1),  # at least one
        (8, 16, 3.2, 8),  # at most torch's own count
        (16, 16, 3.6, 12),
    ],
)
def test_threads_are_the_free_cores_at_least_one_at_most_torchs(current, cores, busy, expected):
    assert cpu_load.threads_for(current, cores, busy) == expected


@pytest.fixture
def fake_proc(tmp_path, monkeypatch):
    """/proc/stat and /proc/self/stat replaced by files the test writes; two cores; no reading taken yet."""
    stat, own = tmp_path / "stat", tmp_path / "self_stat"
    monkeypatch.setattr(cpu_load, "STAT", str(stat))
    monkeypatch.setattr(cpu_load, "SELF_STAT", str(own))
    monkeypatch.setattr(cpu_load, "_start", None)
    monkeypatch.setattr(cpu_load, "cpu_ids", lambda: {0, 1})
    monkeypatch.setattr(cpu_load, "MIN_SECONDS", 0.0)
    for name in cpu_load.EXPLICIT:
        monkeypatch.delenv(name, raising=False)

    def write(stat_text: str, own_ticks: int) -> None:
        stat.write_text(stat_text)
        own.write_text(f"1 (caption) R {' '.join(['0'] * 10)} {own_ticks} 0 0 0")

    return write


def test_the_two_readings_choose_the_threads(fake_proc):
    for own, threads in ((30, 1), (60, 1), (100, 2)):
        # others kept (140 - own) / 100 cores busy: 1.1 and 0.8 -> 1 thread of 2; 0.4 (the rest was ours) -> 2
        fake_proc(STAT_BEFORE, 0)
        cpu_load.start()
        fake_proc(STAT_AFTER, own)
        assert cpu_load.free_threads(2) == threads


def test_each_reading_is_used_once(fake_proc):
    """A second command in the same process (a notebook, a test) measures its own interval, not the first's."""
    fake_proc(STAT_BEFORE, 0)
    cpu_load.start()
    fake_proc(STAT_AFTER, 0)
    assert cpu_load.free_threads(2) == 1  # others: 1.4 cores
    assert cpu_load._start is None
    assert cpu_load.free_threads(2) == 2  # no start: read now and again; the files did not change, nothing busy


def test_an_explicit_thread_count_in_the_environment_wins(fake_proc, monkeypatch):
    fake_proc(STAT_BEFORE, 0)
    cpu_load.start()
    fake_proc(STAT_AFTER, 0)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpu_load.free_threads(2) == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert cpu_load.free_threads(2) == 1  # the reading was kept for the run that uses it


def test_without_proc_stat_torchs_choice_stands(fake_proc, monkeypatch):
    monkeypatch.setattr(cpu_load, "STAT", "/nonexistent/stat")
    cpu_load.start()
    assert cpu_load.free_threads(3) == 3


@pytest.mark.skipif(not cpu_load._snapshot(), reason="needs /proc/stat (Linux)")
def test_beside_a_busy_process_this_machine_gives_up_a_thread(monkeypatch):
    """The real /proc/stat: a process spinning on one core is seen, and a thread is left out for it (whatever else
    the machine runs, e.g. the other test worker, only adds to the load)."""
    for name in cpu_load.EXPLICIT:
        monkeypatch.delenv(name, raising=False)
    cores = len(cpu_load.cpu_ids())
    if cores < 2:
        pytest.skip("one core: there is no thread to give up")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the spinner is started and running
        cpu_load.start()
        time.sleep(0.4)
        assert cpu_load.free_threads(cores) <= cores - 1
    finally:
        spinner.kill()
        spinner.wait()


def test_use_free_threads_sets_torch(monkeypatch):
    threads = torch.get_num_threads()
    # from a count other than the one chosen: a worker of the test run already has 1 thread on 2 cores, so a
    # use_free_threads that set nothing passed "== 1"
    torch.set_num_threads(3)
    monkeypatch.setattr(cpu_load, "free_threads", lambda current: 2)
    try:
        assert cpu_load.use_free_threads() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
