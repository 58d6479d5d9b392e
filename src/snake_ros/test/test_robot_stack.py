"""``robot_stack``: the robot's nodes in one process, with the nodes' own params files."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sensor_msgs.msg import JointState

from snake_ros.qos import COMMAND_QOS, SENSOR_QOS
from snake_ros.robot_stack import NODES, NodeListError, select_nodes


def test_nodes_flag_picks_and_orders_the_nodes_and_leaves_the_ros_arguments() -> None:
    names, executor, rest = select_nodes(["--nodes", "gait_node,bridge_node", "--ros-args", "--nodes", "x"])
    assert names == ["gait_node", "bridge_node"] and executor == "single"
    assert rest == ["--ros-args", "--nodes", "x"]  # inside --ros-args everything is rcl's
    names, executor, rest = select_nodes(["--ros-args", "-p", "a:=1", "--", "--nodes", "gait_node"])
    assert names == ["gait_node"] and rest == ["--ros-args", "-p", "a:=1", "--"]  # after "--": ours again
    names, executor, rest = select_nodes(["--executor=events", "--ros-args", "-p", "a:=1"])
    assert names == list(NODES) and executor == "events" and rest == ["--ros-args", "-p", "a:=1"]


@pytest.mark.parametrize("argv", [["--nodes", "gait_node,nope"], ["--nodes", "gait_node,gait_node"],
                                  ["--nodes", ""], ["--nodes"], ["--executor", "fast"]])
def test_bad_node_lists_and_executors_are_refused(argv: list[str]) -> None:
    with pytest.raises(NodeListError, match=argv[0]):
        select_nodes(argv)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snake_ros.robot_stack", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_help_lists_every_chosen_nodes_parameters() -> None:
    out = _run(["--nodes", "gait_node,slippage_monitor", "--help"])
    assert out.returncode == 0, out.stderr
    assert "max_linear_accel" in out.stdout and "n_directions" in out.stdout  # gait's and slippage's
    assert "health_rate_hz" not in out.stdout  # the bridge was not chosen


def test_a_bad_params_file_value_stops_the_process_with_one_line(tmp_path, repo_root) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("/**/gait_node:\n  ros__parameters:\n    rate_hz: 5000\n")
    out = _run(["--nodes", "bridge_node,gait_node", "--ros-args",
                "--params-file", str(repo_root / "config" / "bridge.yaml"), "--params-file", str(bad)])
    assert out.returncode == 2
    assert "[FATAL]" in out.stderr and "bad.yaml" in out.stderr and "rate_hz" in out.stderr
    assert _run(["--nodes", "gait_node,nope"]).returncode == 2


@pytest.mark.graph
@pytest.mark.parametrize("executor", ["single", "events"])
def test_bridge_and_gait_in_one_process_drive_the_emulated_servos(ros, repo_root, tmp_path, executor) -> None:
    """One process, the shipped params files: the gait's commands reach the bridge, which reports joint states."""
    overrides = tmp_path / "emulated.yaml"
    overrides.write_text("/**/bridge_node:\n  ros__parameters:\n    backend: emulated\n")
    states = ros.collect(JointState, "joint_states", SENSOR_QOS)
    commands = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    proc = ros.start("robot_stack", extra_args=[
        "--params-file", str(repo_root / "config" / "bridge.yaml"),
        "--params-file", str(repo_root / "config" / "gait_node.yaml"), "--params-file", str(overrides),
        "--", "--nodes", "bridge_node,gait_node", "--executor", executor])
    assert ros.spin_until(lambda: len(states) > 5 and len(commands) > 5), ros.log_of(proc)
    assert len(commands[-1].name) == 18 and set(states[-1].name) == set(commands[-1].name)
    names = ros.node.get_node_names()
    assert {"bridge_node", "gait_node"} <= set(names)
    assert ros.stop(proc) == 0, ros.log_of(proc)
    log = ros.log_of(proc)
    assert "Traceback" not in log
