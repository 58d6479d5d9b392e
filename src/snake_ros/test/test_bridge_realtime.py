"""The bridge's real-time settings and its live report of late cycles, over real DDS and the SDK."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from snake_core.robot import load_robot
from snake_hardware.emulator import ServoBusEmulator
from snake_ros.qos import STATUS_QOS

pytestmark = pytest.mark.graph

_ROBOT = load_robot("tsnake")
_STOP_S = 0.4  # s the bridge process is stopped: its next cycle starts at least this late


def _bridge(ros: Any, emu: ServoBusEmulator, **extra: Any) -> Any:
    params = {"backend": "dynamixel", "port": emu.port, "baud_rate": 4000000, "rate_hz": 50.0,
              "latency_ms": 30.0, "watchdog_s": 1.0, "command_timeout_s": 30.0, **extra}
    return ros.start("bridge_node", params)


def _bus(diags: list[DiagnosticArray]) -> DiagnosticStatus | None:
    for arr in reversed(diags):
        for st in arr.status:
            if st.name == "bridge: bus":
                return st
    return None


def _values(st: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in st.values}


def test_fifo_on_a_cpu_is_confirmed_or_refused_in_one_warning(ros: Any, emu: ServoBusEmulator) -> None:
    cpu = min(os.sched_getaffinity(0))
    proc = _bridge(ros, emu, rt_priority=10, cpu_affinity=[cpu])
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: _bus(diags) is not None, 60.0), ros.log_of(proc)
    log = ros.log_of(proc)
    applied = f"bus loop: SCHED_FIFO 10 on CPUs [{cpu}]" in log
    refused = "rt_priority 10 not applied" in log and "bus loop: SCHED_OTHER 0" in log
    assert applied != refused, log
    assert proc.poll() is None


def test_unknown_cpus_warn_and_the_bridge_runs(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _bridge(ros, emu, cpu_affinity=[9999])
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: _bus(diags) is not None, 60.0), ros.log_of(proc)
    assert "cpu_affinity [9999]: CPUs [9999] are not among" in ros.log_of(proc)
    assert proc.poll() is None


def test_a_loop_kept_waiting_is_reported_live(ros: Any, emu: ServoBusEmulator) -> None:
    proc = _bridge(ros, emu)
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: _bus(diags) is not None and "late_cycles" in _values(_bus(diags)), 60.0), \
        ros.log_of(proc)
    # The process stopped, then continued: the stand-in for a computer that kept the loop waiting.
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(_STOP_S)
    os.kill(proc.pid, signal.SIGCONT)

    def reported() -> bool:
        st = _bus(diags)
        return st is not None and float(_values(st)["worst_late_ms"]) >= (_STOP_S - 0.02) * 1e3

    assert ros.spin_until(reported, 60.0), ros.log_of(proc)
    values = _values(_bus(diags))
    assert int(values["late_cycles"]) >= 1 and float(values["cycle_p99_ms"]) > 0.0
    warned = [st for arr in diags for st in arr.status
              if st.name == "bridge: bus" and "late cycles since the last report" in st.message]
    assert warned and all(st.level == DiagnosticStatus.WARN for st in warned)
    assert proc.poll() is None
