"""Real-time scheduling for a control loop's thread, and a meter of its late cycles.

A bus loop that a busy computer preempts for tens of milliseconds lets the servos' Bus
Watchdog trip and the tracking envelope fault. Linux offers the remedy ros2_control uses for
its update loop: the ``SCHED_FIFO`` policy (a runnable thread of this policy runs before every
ordinary one) and a CPU affinity (the loop keeps its caches and can be given a core of its
own, e.g. one kept free with ``isolcpus``). Both need a permission a process may lack
(``CAP_SYS_NICE``, or an ``rtprio`` limit in ``/etc/security/limits.conf`` for the user):
then the loop runs as an ordinary thread and the caller warns, once.

Both calls apply to the calling thread and to the threads it starts afterwards (Linux
scheduling is per thread); threads started before keep theirs, unless
:func:`apply_realtime_to_process` gives them the priority too.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence

import numpy as np

MAX_PRIORITY = 99
"""Highest ``SCHED_FIFO`` priority on Linux (``sched_get_priority_max``)."""

LATE_FRACTION = 0.5
"""A cycle is late when it starts more than this fraction of a period after it was due."""

_WINDOW = 2000  # cycle periods kept for the percentile (20 s at 100 Hz)


def apply_realtime(priority: int, cpus: Sequence[int]) -> list[str]:
    """Give the calling thread ``SCHED_FIFO`` at ``priority`` (0: leave it) and the CPUs ``cpus`` (empty: leave).

    Returns:
        One line per setting that could not be applied, saying why and what allows it; empty
        when everything asked for was applied.
    """
    problems: list[str] = []
    if cpus:
        available = sorted(os.sched_getaffinity(0))
        unknown = sorted(set(cpus) - set(available))
        if unknown:
            problems.append(f"cpu_affinity {list(cpus)}: CPUs {unknown} are not among this computer's {available}; "
                            "the loop runs on any CPU")
        else:
            try:
                os.sched_setaffinity(0, set(cpus))
            except OSError as err:
                problems.append(f"cpu_affinity {list(cpus)} not applied ({err.strerror}); the loop runs on any CPU")
    if priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(min(priority, MAX_PRIORITY)))
        except PermissionError:
            problems.append(f"rt_priority {priority} not applied (no permission for SCHED_FIFO: give the user an "
                            "rtprio limit in /etc/security/limits.conf, or CAP_SYS_NICE); the loop runs at normal "
                            "priority and a busy computer can make it late")
        except OSError as err:
            problems.append(f"rt_priority {priority} not applied ({err.strerror}); the loop runs at normal priority")
    return problems


def apply_realtime_to_process(priority: int) -> list[str]:
    """``SCHED_FIFO`` at ``priority`` for every thread of this process that exists now (Linux).

    The threads a process started before (DDS's receive and event threads, a library's
    workers) keep the normal scheduler otherwise, and a busy computer keeps them waiting:
    a real-time thread of the process that then needs one of them (a lock, a Python thread
    waiting for the interpreter lock another thread holds) waits as long (priority
    inversion). Measured on the bench robot beside 8 busy processes (docs/benchmarks.md,
    ``snake bench loaded``): bus answers up to 1.3 s late with only its Python threads
    real-time, 0.17-0.65 s in three runs of four with every thread.

    Returns:
        One line when a thread could not be given the policy (why, and what allows it);
        empty when every thread was (or ``priority`` is 0).
    """
    if priority <= 0:
        return []
    param = os.sched_param(min(priority, MAX_PRIORITY))
    failed: list[str] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, param)
        except ProcessLookupError:
            continue   # the thread ended meanwhile
        except OSError as err:
            failed.append(f"{tid} ({err.strerror})")
    if not failed:
        return []
    return [f"rt_priority {priority} not applied to threads {', '.join(failed)} (give the user an rtprio limit in "
            "/etc/security/limits.conf, or CAP_SYS_NICE); they run at normal priority"]


def scheduling() -> str:
    """The calling thread's policy, priority and CPUs, e.g. ``SCHED_FIFO 50 on CPUs [1]``."""
    policy = os.sched_getscheduler(0)
    names = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
    name = names.get(policy, str(policy))
    priority = os.sched_getparam(0).sched_priority
    return f"{name} {priority} on CPUs {sorted(os.sched_getaffinity(0))}"


class CycleLateness:
    """Cycles that started late, the worst lateness and the 99th percentile of the cycle period.

    A loop that a timer starts every ``period_s`` is on time when each start follows the one
    before by the period; a start more than :data:`LATE_FRACTION` of a period after it was
    due counts as late, by how much beyond the period it came.

    Args:
        period_s: The loop's period, s.
    """

    def __init__(self, period_s: float) -> None:
        """Nothing measured yet."""
        self.period_s = period_s
        self.late = 0
        self.worst_s = 0.0
        self._last: float | None = None
        self._periods: deque[float] = deque(maxlen=_WINDOW)

    def tick(self, now: float) -> None:
        """A cycle started at ``now`` (monotonic seconds)."""
        if self._last is not None:
            dt = now - self._last
            self._periods.append(dt)
            lateness = dt - self.period_s
            if lateness > LATE_FRACTION * self.period_s:
                self.late += 1
                self.worst_s = max(self.worst_s, lateness)
        self._last = now

    @property
    def p99_s(self) -> float:
        """99th percentile of the recent cycle periods, s (nan before two cycles)."""
        return float(np.percentile(self._periods, 99)) if self._periods else float("nan")


class KeepingUp:
    """How a simulation stepped against the wall clock keeps up, report by report.

    Between two reports: the simulated seconds per wall second (1.0 keeps up; less falls
    behind, by the wall time it skipped or has yet to catch up) and the skips (times it fell
    so far behind that it jumped ahead, losing that time).

    Args:
        now: Wall time of the start, s (monotonic).
        sim_s: Simulated time at the start, s.
        skips: Skips counted at the start.
    """

    BEHIND = 0.9
    """Simulated per wall seconds below which a report counts as falling behind."""

    def __init__(self, now: float, sim_s: float = 0.0, skips: int = 0) -> None:
        """Start the first report's window."""
        self._wall, self._sim, self._skips = now, sim_s, skips

    def report(self, now: float, sim_s: float, skips: int) -> tuple[float, int]:
        """Close the window at ``now``: (simulated per wall seconds, skips in the window); start the next."""
        wall = now - self._wall
        ratio = (sim_s - self._sim) / wall if wall > 0 else 1.0
        new = skips - self._skips
        self._wall, self._sim, self._skips = now, sim_s, skips
        return ratio, new

    @classmethod
    def behind(cls, ratio: float, skips: int) -> bool:
        """Whether a report with this ratio and these skips fell behind real time."""
        return skips > 0 or ratio < cls.BEHIND
