"""Real-time scheduling of a thread and the late-cycle meter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from snake_hardware.realtime import LATE_FRACTION, CycleLateness, KeepingUp, apply_realtime, scheduling


def _in_a_thread(priority: int, cpus: list[int]) -> tuple[list[str], str]:
    """apply_realtime in a thread of its own (scheduling is per thread: pytest's stays as it is)."""
    out: list[tuple[list[str], str]] = []

    def run() -> None:
        problems = apply_realtime(priority, cpus)
        out.append((problems, scheduling()))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out[0]


def test_fifo_and_a_cpu_are_applied_or_each_refusal_is_one_line_naming_the_setting() -> None:
    cpu = min(os.sched_getaffinity(0))
    problems, now = _in_a_thread(10, [cpu])
    if problems:  # no permission here: each line names the setting and says what allows it
        assert all(p.startswith(("rt_priority 10", "cpu_affinity")) for p in problems), problems
        assert any("limits.conf" in p for p in problems if p.startswith("rt_priority"))
    else:
        assert now == f"SCHED_FIFO 10 on CPUs [{cpu}]"
    assert scheduling().startswith("SCHED_OTHER")  # the calling thread kept its own


_PROCESS = """
import json, os, threading
from snake_hardware.realtime import apply_realtime_to_process
started = threading.Event(); done = threading.Event()
t = threading.Thread(target=lambda: (started.set(), done.wait()))
t.start(); started.wait()
problems = apply_realtime_to_process(10)
policies = {os.sched_getscheduler(int(tid)) for tid in os.listdir("/proc/self/task")}
done.set(); t.join()
print(json.dumps([problems, policies == {os.SCHED_FIFO}]))
"""


def test_every_thread_of_the_process_started_before_gets_fifo_or_one_line_says_which_did_not() -> None:
    """In a process of its own: a thread started before the call is given the policy too."""
    out = subprocess.run([sys.executable, "-c", _PROCESS], capture_output=True, text=True, timeout=120, check=True)
    problems, all_fifo = json.loads(out.stdout)
    if problems:  # no permission here: one line naming the threads and what allows it
        assert len(problems) == 1 and problems[0].startswith("rt_priority 10") and "limits.conf" in problems[0]
    else:
        assert all_fifo


def test_unknown_cpus_are_named_and_nothing_is_changed() -> None:
    before = scheduling()
    problems, now = _in_a_thread(0, [9999])
    assert len(problems) == 1 and "cpu_affinity [9999]" in problems[0] and "[9999]" in problems[0]
    assert now == before


def test_nothing_asked_changes_nothing() -> None:
    before = scheduling()
    assert _in_a_thread(0, []) == ([], before)


def test_late_cycles_are_those_past_half_a_period_and_the_worst_is_kept() -> None:
    period = 0.01
    meter = CycleLateness(period)
    starts = np.cumsum([0.0, 0.01, 0.01, 0.0149, 0.0151, 0.01, 0.04, 0.01])
    for t in starts:
        meter.tick(float(t))
    periods = np.diff(starts)
    late = periods - period > LATE_FRACTION * period
    assert meter.late == int(late.sum()) == 2
    assert meter.worst_s == pytest.approx(0.03)
    assert meter.p99_s == pytest.approx(float(np.percentile(periods, 99)))


def test_no_period_before_two_cycles() -> None:
    meter = CycleLateness(0.01)
    meter.tick(5.0)
    assert meter.late == 0 and np.isnan(meter.p99_s)


def test_keeping_up_reports_the_window_ratio_and_new_skips() -> None:
    meter = KeepingUp(now=100.0, sim_s=0.0, skips=0)
    assert meter.report(101.0, 1.0, 0) == (pytest.approx(1.0), 0)
    ratio, skips = meter.report(103.0, 2.5, 2)        # 1.5 simulated s in 2 wall s, two skips
    assert ratio == pytest.approx(0.75) and skips == 2
    assert KeepingUp.behind(ratio, skips) and KeepingUp.behind(0.99, 1) and KeepingUp.behind(0.5, 0)
    assert not KeepingUp.behind(*meter.report(104.0, 3.5, 2))  # the next window starts from the last
