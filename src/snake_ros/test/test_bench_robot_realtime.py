"""The bench robot says live whether its body keeps up with real time (real DDS, the real node)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

from snake_hardware.emulator.body import MAX_LAG_S
from snake_ros.qos import STATUS_QOS

pytestmark = pytest.mark.graph

_BOUND_S = 120.0
_STOP_S = 3 * MAX_LAG_S  # s the process is stopped: the body falls past MAX_LAG_S behind and skips ahead


def _reports(diags: list[DiagnosticArray]) -> list[DiagnosticStatus]:
    return [st for arr in diags for st in arr.status if st.name == "bench robot: real time"]


def _values(st: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in st.values}


def test_a_body_kept_waiting_is_reported_behind_live(ros: Any, tmp_path: Path) -> None:
    bench = ros.start("bench_robot", {"robot": "tsnake", "seed": 1, "link": str(tmp_path / "bench_pty")})
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: len(_reports(diags)) >= 2, _BOUND_S), ros.log_of(bench)
    first = _values(_reports(diags)[-1])
    assert {"sim_per_wall", "skips", "skips_total", "sim_time_s", "realtime_factor"} <= set(first)
    # The process stopped, then continued: the stand-in for a computer that kept the body waiting.
    seen = len(_reports(diags))
    skips_before = int(first["skips_total"])
    os.kill(bench.pid, signal.SIGSTOP)
    time.sleep(_STOP_S)
    os.kill(bench.pid, signal.SIGCONT)

    def behind() -> bool:
        return any(int(_values(st)["skips"]) > 0 for st in _reports(diags)[seen:])

    assert ros.spin_until(behind, _BOUND_S), ros.log_of(bench)
    report = next(st for st in _reports(diags)[seen:] if int(_values(st)["skips"]) > 0)
    assert report.level == DiagnosticStatus.WARN and report.message.startswith("behind real time")
    assert int(_values(report)["skips_total"]) > skips_before
    assert "behind real time" in ros.log_of(bench)   # the warning reaches the log too, at once
    assert bench.poll() is None
