"""``snake bench stack``: its measuring pieces against independent computations, and its JSON contract.

The graph test runs the whole stack for a few seconds and checks only the shape and the
sanity of what it prints (every figure present, finite and in its range), never a speed.
"""

from __future__ import annotations

import io
import json
import math
import os
import resource
import time
from pathlib import Path

import pytest

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator.servo import EmulatedServo
from snake_ros.dds_profile import PROFILE_ENV, use_snake_profile
from snake_tools.bench import stack
from snake_tools.bench.all import bench_names
from snake_tools.cli import main
from snake_tools.commands.servo_emulator import record_goal_changes

_NODES = {"bridge_node", "gait_node", "singularity_monitor", "slippage_monitor"}


def test_stack_is_one_of_the_benchmarks_bench_all_runs() -> None:
    assert "stack" in bench_names()


def test_the_bench_offers_the_executors_the_runtime_has() -> None:
    from snake_ros.runtime import EXECUTORS

    assert stack.EXECUTORS == EXECUTORS


def test_step_latency_is_the_first_goal_change_after_a_step_from_rest() -> None:
    steps = [1.0, 2.0, 3.0, 4.0]
    changes = [0.5, 1.012, 1.02, 1.3,  # step 1: at rest since 0.5 -> 12 ms
               1.95, 2.03,             # step 2: a goal changed 50 ms before it (< quiet) -> not counted
               3.5,                    # step 3: at rest since 2.03 -> 500 ms
               ]                       # step 4: no change before the end -> not counted
    got = stack.step_latencies(steps, changes, quiet=0.1)
    assert got == pytest.approx([0.012, 0.5])
    # A change only after the next step belongs to that one, not to the one before.
    assert stack.step_latencies([1.0, 2.0], [2.5], quiet=0.1) == pytest.approx([0.5])


def test_cpu_and_memory_of_a_process_agree_with_the_kernels_other_accounts() -> None:
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn some CPU so there is something to count
        pass
    times = os.times()
    cpu = stack.cpu_seconds(os.getpid())
    assert cpu == pytest.approx(times.user + times.system, abs=0.05)  # clock-tick rounding
    rss, peak = stack.memory_mib(os.getpid())
    assert 0 < rss <= peak
    assert peak == pytest.approx(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, rel=0.05)


def test_first_log_stamp_is_the_nodes_first_line() -> None:
    text = ("noise\n[INFO] [1700000000.250000000] [other]: x\n"
            "[WARN] [1700000001.500000000] [gait_node]: calibration\n[INFO] [1700000002.0] [gait_node]: y\n")
    assert stack.first_log_stamp(text, "gait_node") == pytest.approx(1700000001.5)
    assert stack.first_log_stamp(text, "bridge_node") is None


def test_goal_hook_logs_each_accepted_write_that_changes_a_goal() -> None:
    servo = EmulatedServo(7, ct.model("XM430-W350").number)
    out = io.StringIO()
    record_goal_changes({7: servo}, out, ct.GOAL_POSITION)
    before = time.monotonic()
    assert servo.write(ct.GOAL_POSITION, (2100).to_bytes(4, "little")) == 0
    assert servo.write(ct.GOAL_POSITION, (2100).to_bytes(4, "little")) == 0  # same goal: no line
    assert servo.write(ct.GOAL_POSITION, (2000).to_bytes(4, "little")) == 0
    refused = servo.write(ct.GOAL_POSITION, (10**6).to_bytes(4, "little"))  # beyond the position limits
    assert refused != 0
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert [(int(sid), int(ticks)) for _, sid, ticks in lines] == [(7, 2100), (7, 2000)]
    stamps = [float(t) for t, _, _ in lines]
    assert before <= stamps[0] <= stamps[1] <= time.monotonic()
    assert servo.goal_log == [2100, 2100, 2000]  # the emulator's own record is untouched


def test_executor_flag_needs_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "stack", "--processes", "--executor", "events", "--duration", "1"]) == 2
    assert "--executor" in capsys.readouterr().err


def test_without_flags_the_bench_measures_the_shipped_layout() -> None:
    """One robot_stack process, as snake.launch.py starts the nodes unless given one_process:=false."""
    from snake_ros.robot_stack import select_nodes
    from snake_tools.bench.stack import DEFAULT_EXECUTOR
    from snake_tools.cli import build_parser

    launch = (Path(__file__).resolve().parents[3] / "launch" / "snake.launch.py").read_text()
    assert 'DeclareLaunchArgument("one_process", default_value="true"' in launch
    assert f'DeclareLaunchArgument("executor", default_value="{DEFAULT_EXECUTOR}"' in launch
    assert select_nodes([])[1] == DEFAULT_EXECUTOR  # robot_stack's own default
    args = build_parser(["bench"]).parse_args(["bench", "stack"])
    assert args.processes is False and args.executor is None  # None: DEFAULT_EXECUTOR
    assert build_parser(["bench"]).parse_args(["bench", "stack", "--processes"]).processes is True


@pytest.mark.graph
@pytest.mark.parametrize("one_process", [False, True], ids=["processes", "one_process"])
def test_bench_stack_json_has_every_figure(capsys: pytest.CaptureFixture[str], one_process: bool) -> None:
    args = ["bench", "stack", "--json", "--duration", "3"] + ([] if one_process else ["--processes"])
    domain = os.environ.get("ROS_DOMAIN_ID")
    profile = os.environ.get(PROFILE_ENV)
    node_env = dict(os.environ)
    use_snake_profile(node_env)  # what a node process started from here runs with
    assert main(args) == 0
    assert os.environ.get("ROS_DOMAIN_ID") == domain  # the bench's own domain did not leak into this process
    assert os.environ.get(PROFILE_ENV) == profile  # nor its DDS profile
    out = json.loads(capsys.readouterr().out)
    assert out["one_process"] is one_process
    assert set(out["nodes"]) == _NODES
    procs = out["processes"]
    assert "servo_emulator" in procs
    robot = {name: p for name, p in procs.items() if name != "servo_emulator"}
    assert set(robot) == ({"robot_stack"} if one_process else _NODES)  # the start-up floor's process is in none
    assert out["startup_floor_s"] > 0.0
    assert sorted(n for p in robot.values() for n in p["nodes"]) == sorted(_NODES)
    for p in procs.values():
        assert 0.0 <= p["cpu_percent"] <= 100.0 * (os.cpu_count() or 1)
        assert 0.0 < p["rss_mb"] <= p["rss_peak_mb"]
    assert out["cpu_percent_total"] == pytest.approx(sum(p["cpu_percent"] for p in robot.values()))
    assert out["rss_mb_total"] == pytest.approx(sum(p["rss_mb"] for p in robot.values()))
    for name, node in out["nodes"].items():
        assert node["startup_s"] > 0.0, name
        assert node["ready_s"] is not None and 0.0 < node["ready_s"], name
        if not one_process:
            assert node["cpu_percent"] == procs[name]["cpu_percent"]
    assert out["cmd_vel_steps"] >= 1
    assert 0 <= out["latency_steps"] <= out["cmd_vel_steps"]
    if out["latency_steps"]:
        assert 0.0 < out["latency_ms_p50"] <= out["latency_ms_p99"]
        assert math.isfinite(out["latency_ms_p99"])
    assert out["armed"]
    assert out["dds_profile"] == node_env.get(PROFILE_ENV)  # the listener runs as a node would
