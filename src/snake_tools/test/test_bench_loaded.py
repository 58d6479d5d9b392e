"""``snake bench loaded``: what it counts, checked on hand-made diagnostics, and its JSON contract.

The graph test drives the real stack for a few seconds and checks the shape and sanity of
what it prints, never a speed or a count that depends on the host's load.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from snake_tools.bench import loaded
from snake_tools.bench.all import bench_names
from snake_tools.cli import main


def _array(*statuses: tuple[str, str, dict[str, str]]) -> DiagnosticArray:
    return DiagnosticArray(status=[DiagnosticStatus(name=n, message=m, values=[KeyValue(key=k, value=v)
                                                                               for k, v in vals.items()])
                                   for n, m, vals in statuses])


def test_loaded_is_one_of_the_benchmarks_bench_all_runs() -> None:
    assert "loaded" in bench_names()


def test_trips_and_faults_are_counted_once_each_and_only_while_driving() -> None:
    watch = loaded._Watch()
    tripped = ("bridge: m1_dorsal", "bus watchdog tripped (re-armed)", {})
    watch.take(_array(("bridge: bus", "FAULT: tracking: m1 ...", {"state": "FAULT"}), tripped))
    assert watch.trips == 0 and watch.faults == []          # before the drive: not counted
    watch.driving = True
    watch.take(_array(("bridge: bus", "DISARMED", {"state": "DISARMED"}), ("bridge: m1_dorsal", "ok", {})))
    watch.take(_array(("bridge: bus", "FAULT: tracking: m3_twist (ID 8) ...", {"state": "FAULT"}), tripped))
    watch.take(_array(("bridge: bus", "FAULT: tracking: m3_twist (ID 8) ...", {"state": "FAULT"}), tripped))
    watch.take(_array(("bench robot: real time", "behind", {"sim_per_wall": "0.7", "skips_total": "2"})))
    watch.take(_array(("bench robot: real time", "ok", {"sim_per_wall": "0.95", "skips_total": "2"})))
    assert watch.trips == 1                                   # one entry into the tripped state
    assert watch.faults == ["FAULT: tracking: m3_twist (ID 8) ..."]  # one entry into FAULT
    assert watch.slowest == pytest.approx(0.7) and watch.bench["skips_total"] == "2"


def test_the_bus_loop_line_says_what_the_bridge_logged() -> None:
    assert loaded._bus_loop("[INFO] [1.0] [bridge_node]: bus loop: SCHED_FIFO 50 on CPUs [1]\n", 50) == \
        "SCHED_FIFO 50 on CPUs [1]"
    refused = ("[WARN] [1.0] [bridge_node]: rt_priority 50 not applied (no permission for SCHED_FIFO: give ...); "
               "the loop runs at normal priority\n[INFO] [1.1] [bridge_node]: bus loop: SCHED_OTHER 0 on CPUs [0, 1]")
    assert loaded._bus_loop(refused, 50).startswith("rt_priority 50 not applied: no permission")
    assert loaded._bus_loop("", 0) == "normal scheduler (rt_priority 0)"


def _stat(pid: int, comm: str, policy: int, priority: int) -> str:
    """A /proc/PID/stat line as Linux writes it (52 fields; rt_priority the 40th, policy the 41st)."""
    after = ["I", "2"] + ["0"] * 48
    after[40 - 3], after[41 - 3] = str(priority), str(policy)
    return f"{pid} ({comm}) {' '.join(after)}\n"


def test_kernel_workers_counts_the_real_time_kworker_u_threads(tmp_path: Path) -> None:
    def write(pid: int, comm: str, policy: int, priority: int) -> None:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(_stat(pid, comm, policy, priority))

    assert loaded.kernel_workers(tmp_path) == "no kworker/u threads seen"
    write(10, "kworker/u8:1-events_unbound", os.SCHED_OTHER, 0)
    write(11, "kworker/0:1-events", os.SCHED_FIFO, 1)          # a per-CPU worker: not counted
    write(12, "odd (kworker/u8:2) name", os.SCHED_FIFO, 5)     # a process named so: not one
    assert loaded.kernel_workers(tmp_path) == "normal priority (1 kworker/u threads)"
    write(13, "kworker/u8:2-flush-254:0", os.SCHED_FIFO, 1)
    write(14, "kworker/u9:0", os.SCHED_FIFO, 1)
    (tmp_path / "self").mkdir()                                 # not a PID directory
    assert loaded.kernel_workers(tmp_path) == "SCHED_FIFO 1 for 2 of 3 kworker/u threads"
    # this computer's /proc: one of the three forms
    line = loaded.kernel_workers()
    assert re.fullmatch(r"no kworker/u threads seen|normal priority \(\d+ kworker/u threads\)|"
                        r"(SCHED_(FIFO|RR) \d+(, )?)+ for \d+ of \d+ kworker/u threads", line), line


@pytest.mark.parametrize("flags", [["--busy", "-1"], ["--rt-priority", "100"], ["--duration", "0"]])
def test_bad_flags_are_one_line_and_exit_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        raise SystemExit(main(["bench", "loaded", *flags]))
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flags[0] in err


@pytest.mark.graph
def test_a_short_loaded_drive_prints_every_figure() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["bench", "loaded", "--duration", "4", "--busy", "1", "--json"])
    assert code == 0
    result = json.loads(out.getvalue())
    assert result["busy"] == 1 and result["duration_s"] >= 4.0
    for key in ("watchdog_trips", "tracking_faults", "faults", "late_cycles", "bench_skips"):
        assert isinstance(result[key], int) and result[key] >= 0, key
    assert result["tracking_faults"] <= result["faults"] == len(result["fault_reasons"])
    assert math.isfinite(result["cycle_p99_ms"]) and result["cycle_p99_ms"] > 0.0
    # The shipped config's rt_priority 50: applied where the process may, else the one-line reason.
    assert result["bus_loop"].startswith(("SCHED_FIFO 50 on CPUs", "rt_priority 50 not applied: ")), result["bus_loop"]
    assert result["kernel_workers"].endswith(("kworker/u threads", "kworker/u threads)", "threads seen"))
    assert len(result["load_average_1min"]) == 2 and result["cpu_count"] >= 1
