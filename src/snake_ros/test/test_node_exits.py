"""Every node's safe-exit action reaches the graph on SIGINT and on SIGTERM.

The nodes handle both signals in their spin loop, so the action (stop the robot,
hold the last shape, a final STALE status) is published while the ROS context is
still valid; the probe must receive it and the process must exit 0.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Path
from sensor_msgs.msg import JointState

from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_PUB_QOS, STATUS_QOS

pytestmark = pytest.mark.graph


def _stale(msg: DiagnosticStatus) -> bool:
    return msg.level == DiagnosticStatus.STALE and "stopped" in msg.message


def _goal(ros: Any) -> Callable[[], None]:
    """Make the planner publish a status: ask for a plan."""
    pub = ros.node.create_publisher(PoseStamped, "goal_pose", COMMAND_QOS)
    goal = PoseStamped()
    goal.header.frame_id = "world"
    goal.pose.position.x, goal.pose.orientation.w = 1.0, 1.0
    return lambda: pub.publish(goal)


def _joint_states(ros: Any) -> Callable[[], None]:
    """Make the slippage monitor publish a status: one shape of its case study (3 joints)."""
    pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
    return lambda: pub.publish(JointState(name=["j1", "j2", "j3"], position=[0.3, -0.4, 0.5]))


def _empty_plan(ros: Any) -> Callable[[], None]:
    """Make the follower publish a (zero) command: an empty plan means stop."""
    pub = ros.node.create_publisher(Path, "plan", LATCHED_QOS)
    return lambda: pub.publish(Path())


def _until_heard(ros: Any, box: list[Any], provoke: Callable[[Any], Callable[[], None]] | None) -> bool:
    """Wait for a first message in ``box``, provoking the node again and again if it needs it.

    A message that arrives proves the node's publisher has matched the probe (discovery
    is complete on the node's side too), so its last message cannot go unheard.
    """
    send = provoke(ros) if provoke is not None else None
    for _ in range(600):
        if send is not None:
            send()
        if ros.spin_until(lambda: bool(box), 0.1):
            return True
    return False


# node executable -> (message type, topic of its status and of its safe-exit message, the exit message's
# test, an action that makes the node publish a status while it runs, or None when it publishes by itself)
EXITS: dict[str, tuple[Any, str, Callable[[Any], bool], Callable[[Any], Callable[[], None]] | None]] = {
    "gait_node": (DiagnosticStatus, "gait_state", _stale, None),
    "bridge_node": (DiagnosticArray, "diagnostics", lambda m: any(_stale(s) and "torque_off" in s.message
                                                                  for s in m.status), None),
    "path_follower": (DiagnosticStatus, "follower_status", _stale, None),
    "planner_node": (DiagnosticStatus, "planner_status", _stale, _goal),
    "singularity_monitor": (DiagnosticArray, "diagnostics", lambda m: any(_stale(s) for s in m.status), None),
    "slippage_monitor": (DiagnosticStatus, "slippage/status", _stale, _joint_states),
}


_PARAMS = {"bridge_node": {"backend": "emulated"}}  # start-up parameters (default: none)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("node", list(EXITS))
def test_the_safe_exit_message_arrives(ros: Any, node: str, sig: signal.Signals) -> None:
    msg_type, topic, is_exit_message, provoke = EXITS[node]
    box: list[Any] = ros.collect(msg_type, topic, STATUS_QOS)
    proc = ros.start(node, _PARAMS.get(node, {}))
    assert ros.spin_until(lambda: ros.node.count_publishers(topic) > 0, 60.0), ros.log_of(proc)
    assert _until_heard(ros, box, provoke), ros.log_of(proc)
    assert not any(is_exit_message(m) for m in box)
    proc.send_signal(sig)
    assert ros.spin_until(lambda: any(is_exit_message(m) for m in box), 60.0), ros.log_of(proc)
    assert proc.wait(timeout=60) == 0, ros.log_of(proc)
    log = ros.log_of(proc)
    assert "Traceback" not in log
    # One line on the way out, naming what stopped the node; the bridge's says what the servos were left in.
    exits = [line for line in log.splitlines() if f"exiting ({sig.name})" in line]
    assert len(exits) == 1, log
    if node == "bridge_node":
        assert "servos left torque off" in exits[0], exits


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_follower_sends_a_zero_command_on_exit(ros: Any, sig: signal.Signals) -> None:
    cmds: list[TwistStamped] = ros.collect(TwistStamped, "cmd_vel", COMMAND_QOS)
    status: list[DiagnosticStatus] = ros.collect(DiagnosticStatus, "follower_status", STATUS_QOS)
    proc = ros.start("path_follower", {})
    assert _until_heard(ros, status, None) and _until_heard(ros, cmds, _empty_plan), ros.log_of(proc)
    before = len(cmds)
    signalled_ns = time.time_ns()  # the follower stamps its commands with the host's clock
    proc.send_signal(sig)

    def stops() -> list[TwistStamped]:
        # Zero commands stamped after the signal: not an answer to an empty plan still in flight.
        return [m for m in cmds[before:] if m.twist.linear.x == 0.0 and m.twist.angular.z == 0.0
                and m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec > signalled_ns]

    # The status and the command come on two topics: wait for both, neither proves the other arrived.
    assert ros.spin_until(lambda: any(_stale(m) for m in status) and bool(stops()), 60.0), ros.log_of(proc)
    assert proc.wait(timeout=60) == 0, ros.log_of(proc)
    assert stops(), f"no zero cmd_vel after the signal; log:\n{ros.log_of(proc)}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_twin_exits_cleanly(ros: Any, sig: signal.Signals) -> None:
    proc = ros.start("twin_node", {"mode": "lockstep"})
    assert ros.spin_until(lambda: ros.node.count_publishers("/clock") > 0, 60.0), ros.log_of(proc)
    proc.send_signal(sig)
    assert proc.wait(timeout=60) == 0, ros.log_of(proc)
    assert "twin stopped" in ros.log_of(proc)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_node_is_still_importing_gives_its_exit_line_and_no_traceback(sig: signal.Signals) -> None:
    """The signal is sent after the package's first import and before the node's module (rclpy, numpy) is in."""
    import subprocess
    import sys

    code = ("import os, signal, sys; sys.argv[0] = '/x/lib/snake_ros/bridge_node'; import snake_ros; "
            f"os.kill(os.getpid(), {int(sig)}); import snake_ros.bridge_node; print('imported')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and "imported" not in run.stdout, run.stderr
    assert f"[INFO] [bridge_node]: exiting ({sig.name} while starting" in run.stderr, run.stderr


def test_the_early_handlers_are_only_for_node_scripts_and_cover_every_one() -> None:
    import re
    from pathlib import Path as FilePath

    from snake_ros.start_signals import NODE_SCRIPTS, install

    setup = (FilePath(__file__).parents[1] / "setup.py").read_text()
    assert set(re.findall(r'"(\w+) = snake_ros\.\w+:main"', setup)) == NODE_SCRIPTS
    assert install("/usr/bin/pytest") is False           # a library import elsewhere changes no handler
