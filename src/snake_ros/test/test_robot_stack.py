"""``robot_stack``: the robot's nodes in one process, with the nodes' own params files."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sensor_msgs.msg import JointState

from snake_ros.qos import COMMAND_QOS, SENSOR_QOS
from snake_ros.robot_stack import (
    DEFAULT_NODES,
    NODES,
    NodeListError,
    ParameterRouteError,
    route_parameters,
    select_nodes,
)
from snake_ros.runtime import EXECUTORS


def test_nodes_flag_picks_and_orders_the_nodes_and_leaves_the_ros_arguments() -> None:
    names, executor, rest = select_nodes(["--nodes", "gait_node,bridge_node", "--ros-args", "--nodes", "x"])
    assert names == ["gait_node", "bridge_node"] and executor == "events"  # the default
    assert rest == ["--ros-args", "--nodes", "x"]  # inside --ros-args everything is rcl's
    names, executor, rest = select_nodes(["--ros-args", "-p", "a:=1", "--", "--nodes", "gait_node"])
    assert names == ["gait_node"] and rest == ["--ros-args", "-p", "a:=1", "--"]  # after "--": ours again
    names, executor, rest = select_nodes(["--executor=single", "--ros-args", "-p", "a:=1"])
    assert names == list(DEFAULT_NODES) and executor == "single" and rest == ["--ros-args", "-p", "a:=1"]
    # the follow loop's robot-side nodes, hosted on request, the follower (which commands motion) built last
    names, _, _ = select_nodes(["--nodes", "bridge_node,gait_node,planner_node,path_follower"])
    assert names == ["bridge_node", "gait_node", "planner_node", "path_follower"]


@pytest.mark.parametrize("argv", [["--nodes", "gait_node,nope"], ["--nodes", "gait_node,gait_node"],
                                  ["--nodes", ""], ["--nodes"], ["--executor", "fast"]])
def test_bad_node_lists_and_executors_are_refused(argv: list[str]) -> None:
    with pytest.raises(NodeListError, match=argv[0]):
        select_nodes(argv)


def _tables(*names: str) -> dict:
    return {name: NODES[name]().parameters for name in names}


def test_each_override_goes_to_the_nodes_that_have_the_parameter() -> None:
    tables = _tables("bridge_node", "gait_node", "slippage_monitor")
    argv = ["--ros-args", "-p", "latency_ms:=10.0", "--param", "max_linear_accel:=2.0", "-p", "rate_hz:=50.0",
            "-p", "gait_node:cmd_timeout:=3.0", "-p", "use_sim_time:=true", "--params-file", "f.yaml", "--",
            "-p", "x:=1"]
    assert route_parameters(argv, tables) == [
        "--ros-args", "-p", "bridge_node:latency_ms:=10.0", "--param", "gait_node:max_linear_accel:=2.0",
        "-p", "bridge_node:rate_hz:=50.0", "-p", "gait_node:rate_hz:=50.0",  # both have rate_hz
        "-p", "gait_node:cmd_timeout:=3.0", "-p", "use_sim_time:=true",  # scoped already; ROS's own
        "--params-file", "f.yaml", "--", "-p", "x:=1"]  # after "--": not rcl's
    # every node named in a rewritten override has that parameter in its table (the independent check)
    for arg in route_parameters(argv, tables)[1:12]:
        node, _, rest = arg.partition(":")
        if node in tables:
            assert rest.partition(":=")[0] in tables[node].names


def test_an_override_no_node_has_is_refused_naming_it() -> None:
    with pytest.raises(ParameterRouteError, match=r"latency_msx.*did you mean `latency_ms`"):
        route_parameters(["--ros-args", "-p", "latency_msx:=10.0"], _tables("bridge_node", "gait_node"))
    with pytest.raises(ParameterRouteError, match="latency_ms"):  # the bridge, which has it, is not chosen
        route_parameters(["--ros-args", "-p", "latency_ms:=10.0"], _tables("gait_node"))


def test_own_help_names_the_process_options_and_the_routing() -> None:
    out = _run(["--help"])
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("usage: robot_stack") and "--nodes" in first and "--executor" in first
    assert "hardware bridge" not in out.stdout.split("parameters of bridge_node")[0]  # not the bridge's text
    assert all(f"parameters of {name}:" in out.stdout for name in DEFAULT_NODES)
    assert "parameters of planner_node:" not in out.stdout  # not run by default, but named as a choice
    assert f"among {','.join(NODES)}" in out.stdout


def test_every_node_the_process_can_host_is_the_node_its_own_process_runs() -> None:
    """Each entry of NODES builds the node class of that name, with its own table and safe-exit action."""
    import importlib

    modules = {"bridge_node": "bridge_node", "gait_node": "gait_node", "singularity_monitor": "singularity_node",
               "slippage_monitor": "slippage_node", "planner_node": "planner_node",
               "path_follower": "path_follower_node"}
    assert set(NODES) == set(modules) and set(DEFAULT_NODES) < set(NODES)
    for name, factory in NODES.items():
        spec = factory()
        module = importlib.import_module(f"snake_ros.{modules[name]}")
        assert spec.parameters is module.PARAMETERS and spec.parameters.node_name == name
        assert spec.factory.__module__ == module.__name__
        assert spec.on_exit is not None and spec.on_exit.__name__ in ("stop_safely", "shutdown_safely")


def test_unknown_override_is_one_fatal_line_and_exit_2() -> None:
    out = _run(["--ros-args", "-p", "latency_msx:=10.0"])
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "latency_msx" in out.stderr and "[FATAL]" in out.stderr


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
    # A node's name reaches the graph apart from its endpoints (its participant's discovery
    # data): messages can flow before the name is known, so the names are waited for.
    assert ros.spin_until(lambda: {"bridge_node", "gait_node"} <= set(ros.node.get_node_names())), \
        ros.node.get_node_names()
    assert ros.stop(proc) == 0, ros.log_of(proc)
    log = ros.log_of(proc)
    assert "Traceback" not in log


@pytest.mark.graph
@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_timer_reset_over_and_over_holds_no_other_timer_back(ros, executor) -> None:
    """The gait node resets its tick timer at every changed command; the other timers must keep running.

    rclcpp's EventsExecutor, whose design rclpy's follows, once held a timer back after another
    timer's reset until the reset timer fired. Here the reset timer is reset at every cycle of
    a 100 Hz timer, so it never fires: a timer held back until it fires would never run.
    """
    from rclpy.executors import ExternalShutdownException

    from snake_ros.runtime import make_executor
    from snake_ros.stack_node import StackNode

    node = StackNode(f"timer_reset_{executor}", context=ros.context)
    counts = {"cycle": 0, "diagnostics": 0, "reset_fired": 0}
    reset_timer = node.create_timer(3600.0, lambda: counts.__setitem__("reset_fired", counts["reset_fired"] + 1))

    def cycle() -> None:
        counts["cycle"] += 1
        reset_timer.timer_period_ns = 3600 * 10**9 - counts["cycle"]  # the prompt tick's period change, then reset
        reset_timer.reset()

    node.create_timer(0.01, cycle)
    node.create_timer(0.1, lambda: counts.__setitem__("diagnostics", counts["diagnostics"] + 1))
    spinner = make_executor(executor, ros.context)
    spinner.add_node(node)
    deadline = time.monotonic() + 120.0  # a failure bound, not a speed requirement
    try:
        while not (counts["cycle"] >= 200 and counts["diagnostics"] >= 5) and time.monotonic() < deadline:
            spinner.spin_once(timeout_sec=0.1)
    except ExternalShutdownException:
        pass
    finally:
        spinner.remove_node(node)
        spinner.shutdown(timeout_sec=0.0)
        node.destroy_node()
    assert counts["cycle"] >= 200 and counts["diagnostics"] >= 5, counts
    assert counts["reset_fired"] == 0


@pytest.mark.graph
def test_overrides_reach_the_nodes_that_have_them(ros, repo_root, tmp_path) -> None:
    """``-p latency_ms`` (the bridge's) and ``-p max_linear_accel`` (the gait's) in one process: each takes its own."""
    from rclpy.parameter_client import AsyncParameterClient

    overrides = tmp_path / "emulated.yaml"
    overrides.write_text("/**/bridge_node:\n  ros__parameters:\n    backend: emulated\n")
    commands = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    proc = ros.start("robot_stack", extra_args=[
        "--params-file", str(repo_root / "config" / "bridge.yaml"),
        "--params-file", str(repo_root / "config" / "gait_node.yaml"), "--params-file", str(overrides),
        "-p", "latency_ms:=10.0", "-p", "max_linear_accel:=2.5", "--", "--nodes", "bridge_node,gait_node"])
    assert ros.spin_until(lambda: len(commands) > 2), ros.log_of(proc)
    values = {}
    for node, name in (("bridge_node", "latency_ms"), ("gait_node", "max_linear_accel")):
        client = AsyncParameterClient(ros.node, node)
        assert ros.spin_until(lambda c=client: c.services_are_ready()), ros.log_of(proc)
        future = client.get_parameters([name])
        assert ros.spin_until(future.done), ros.log_of(proc)
        values[name] = future.result().values[0].double_value
    assert values == {"latency_ms": 10.0, "max_linear_accel": 2.5}
    assert ros.stop(proc) == 0, ros.log_of(proc)


@pytest.mark.graph
def test_a_node_renamed_on_the_command_line_starts(ros, repo_root) -> None:
    """``-r __node:=NAME`` (what a launch file's ``name=`` passes) renames the node, not the start-up name
    check's probe, which would otherwise find itself under NAME and refuse to start."""
    commands = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    params = ["--params-file", str(repo_root / "config" / "gait_node.yaml")]
    proc = ros.start("gait_node", name="gait_renamed", extra_args=params)
    assert ros.spin_until(lambda: len(commands) > 2 or proc.poll() is not None), ros.log_of(proc)
    assert proc.poll() is None, ros.log_of(proc)
    assert ros.spin_until(lambda: "gait_renamed" in ros.node.get_node_names()), ros.node.get_node_names()
    assert ros.stop(proc) == 0, ros.log_of(proc)
