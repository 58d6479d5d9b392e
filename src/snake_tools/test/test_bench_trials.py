"""``snake bench trials``: the executor's overhead from alternating direct and 1-worker runs."""

from __future__ import annotations

import json
import time

import pytest

from snake_tools.bench.trials import Runs, summary


def _runs(walls: list[float], inside: list[float], cpu: list[float]) -> Runs:
    return Runs(wall_s=walls, inside_s=inside, cpu_s=cpu)


def test_the_overhead_is_the_median_over_pairs_of_direct_and_one_worker_runs() -> None:
    trials = 10
    direct = _runs([10.0, 20.0, 11.0], [10.0, 20.0, 11.0], [9.0, 9.0, 9.0])  # a loaded second pair
    local = _runs([10.5, 20.0, 11.0 * 1.02], [10.3, 19.9, 10.9], [9.0, 9.9, 9.18])
    out = summary({"direct": direct, "local_1": local, "local_2": local, "scheduler_2": local}, trials)
    assert out["overhead_fraction_runs"] == pytest.approx([0.05, 0.0, 0.02])
    assert out["overhead_fraction"] == pytest.approx(0.02)  # the median pair, not the ratio of medians
    assert out["overhead_per_trial_s"] == pytest.approx(0.02 * 11.0 / trials)
    assert out["dispatch_s_per_trial"] == pytest.approx(0.02)  # median of (wall - inside) / trials: 0.02, 0.01, 0.032
    assert out["worker_cpu_ratio"] == pytest.approx(1.02)
    assert out["trials_per_minute_direct"] == pytest.approx(60.0 * trials / 11.0)
    assert out["scaling_efficiency_2"] == pytest.approx(0.5)  # "2 workers" here ran as fast as one


def test_the_ceiling_is_what_two_plain_processes_give_and_the_executor_is_read_against_it() -> None:
    trials = 12
    one = _runs([12.0, 12.0, 12.0], [12.0] * 3, [12.0] * 3)       # 60 trials/min
    two = _runs([6.0, 6.0, 6.0], [6.0] * 3, [6.0] * 3)            # 120: twice as fast
    plain_1 = _runs([10.0, 9.0, 11.0], [], [])                   # median 10 s: 72 trials/min
    plain_2 = _runs([6.25, 6.0, 7.0], [], [])                    # median 6.25 s: 115.2 trials/min
    out = summary({"direct": one, "local_1": one, "local_2": _runs([7.5] * 3, [7.5] * 3, [7.5] * 3),
                   "scheduler_2": two, "plain_1": plain_1, "plain_2": plain_2}, trials)
    assert out["trials_per_minute_plain_1"] == pytest.approx(72.0)
    assert out["scaling_ceiling_2"] == pytest.approx(115.2 / 144.0)          # 0.8
    assert out["scaling_efficiency_2"] == pytest.approx(96.0 / 120.0)         # 0.8
    assert out["scaling_efficiency_vs_ceiling"] == pytest.approx(1.0)


def test_the_bench_runs_every_variant_the_given_number_of_times(capsys: pytest.CaptureFixture[str]) -> None:
    from snake_tools.cli import main

    assert main(["bench", "trials", "--trials", "2", "--repeats", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for variant in ("direct", "local_1", "local_2", "scheduler_2", "plain_1", "plain_2"):
        assert len(out[f"trials_per_minute_{variant}_runs"]) == 2
        assert all(r > 0.0 for r in out[f"trials_per_minute_{variant}_runs"])
    assert len(out["overhead_fraction_runs"]) == 2 and out["dispatch_s_per_trial"] >= 0.0
    assert set(out["load_average"]) == {"local_1", "local_2", "scheduler_2"}
    assert out["scaling_ceiling_2"] > 0.0 and out["scaling_efficiency_vs_ceiling"] > 0.0


def test_worker_counts_are_distinct_positive_and_start_at_one() -> None:
    import argparse

    from snake_tools.bench.trials import worker_counts

    assert worker_counts("16,2,8") == [1, 2, 8, 16]  # efficiency is read against 1 worker
    assert worker_counts("1,2,4,8,16") == [1, 2, 4, 8, 16]
    for bad in ("0,2", "2,2", "a", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            worker_counts(bad)


_START = """
import time
first = time.time()
from snake_tools.bench.trials import process_start_epoch
print(repr(process_start_epoch()), repr(first))
"""


def test_process_start_is_read_from_proc_between_the_spawn_and_the_first_statement() -> None:
    """A child's start lies after its parent asked for it and before its own first statement (one tick of slack)."""
    import os
    import subprocess
    import sys

    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    before = time.time()
    out = subprocess.run([sys.executable, "-c", _START], capture_output=True, text=True, timeout=120, check=True)
    start, first = (float(x) for x in out.stdout.split())
    assert before - tick <= start <= first + tick


_NO_ROS = """
import builtins, sys
real = builtins.__import__
def refuse(name, *args, **kwargs):
    if name.split(".")[0] in ("rclpy", "rosidl_runtime_py", "launch", "launch_ros", "ament_index_python",
                              "sensor_msgs", "std_msgs", "geometry_msgs", "rosbags", "snake_ros"):
        raise ImportError("no ROS here: " + name)
    return real(name, *args, **kwargs)
builtins.__import__ = refuse
from snake_tools.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def test_scaling_runs_without_any_ros_package_and_reports_each_worker_count() -> None:
    """``--workers``: a cold local cluster per count, with no ROS package importable (a plain Python host)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _NO_ROS, "bench", "trials", "--workers", "1", "--trials", "1",
                          "--json"], capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout[out.stdout.find("{"):])
    one = result["workers"]["1"]
    assert result["trials"] == 1
    assert one["efficiency"] == pytest.approx(1.0) and one["ceiling"] == pytest.approx(1.0)
    assert one["trials_per_min"] > 0 and one["plain_trials_per_min"] > 0
    assert one["start_s"] > 0 and 0 < one["trial_s_median"]
    assert 0 < result["command_to_first_trial_s"]
