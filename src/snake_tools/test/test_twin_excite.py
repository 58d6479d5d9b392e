"""``snake twin excite`` over DDS: reads the present pose, publishes the motion inside limits, stops."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

from snake_core.robot import load_robot
from snake_tools.command import snake_command

_RUN_TIMEOUT_S = 300.0  # s, failure bound only (a command that never ends), not a speed requirement



def test_excite_publishes_from_present_pose_and_stops(ros, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS

    robot = load_robot("tsnake")
    names = [j.name for j in robot.joints]
    pose = [0.3 if np.isfinite(j.upper) else 1.0 for j in robot.joints]
    pose[0] = robot.joints[0].upper - 0.05 if np.isfinite(robot.joints[0].upper) else pose[0]
    state_pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)

    def publish_state() -> None:
        msg = JointState()
        msg.name, msg.position = names, pose
        state_pub.publish(msg)

    ros.node.create_timer(0.05, publish_state)
    commands = ros.collect(JointState, "joint_commands", COMMAND_QOS)
    out = (tmp_path / "out.json").open("wb")
    proc = subprocess.Popen([*snake_command(), "twin", "excite", "--robot", "tsnake", "--duration", "4",
                             "--rate", "25", "--json"], stdout=out, stderr=subprocess.PIPE, env=os.environ.copy())
    try:
        assert ros.spin_until(lambda: proc.poll() is not None, timeout=_RUN_TIMEOUT_S)
        assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
        result = json.loads((tmp_path / "out.json").read_text())
        assert ros.spin_until(lambda: len(commands) >= result["published"], timeout=_RUN_TIMEOUT_S)
        # and then nobody is publishing: the command has stopped
        assert ros.spin_until(lambda: ros.node.count_publishers("joint_commands") == 0, timeout=_RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(commands) == result["published"] == 4 * 25 + 1
    q = np.array([list(m.position) for m in commands])
    assert all(list(m.name) == names for m in commands)
    np.testing.assert_allclose(q[0], pose, atol=1e-12)  # from the present pose
    np.testing.assert_allclose(q[-1], pose, atol=1e-9)  # back to it
    lower = np.array([j.lower for j in robot.joints])
    upper = np.array([j.upper for j in robot.joints])
    assert np.all(q >= lower) and np.all(q <= upper)
    assert np.abs(q - np.array(pose)).max() > 0.05  # it did move
    assert abs(q[:, 0] - pose[0]).max() <= 0.05  # the joint next to its limit stayed clear of it


def test_excite_without_joint_states_is_one_line_exit_2(ros) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run([*snake_command(), "twin", "excite", "--robot", "tsnake", "--pose-timeout", "1"],
                          check=False, capture_output=True, text=True, env=os.environ.copy(),
                          timeout=_RUN_TIMEOUT_S)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "joint_states" in lines[0]


def _bus(diags: list) -> dict[str, str]:  # type: ignore[type-arg]
    for arr in reversed(diags):
        for st in arr.status:
            if st.name == "bridge: bus":
                return {kv.key: kv.value for kv in st.values}
    return {}


def test_excite_never_arms_the_bridge(ros) -> None:  # type: ignore[no-untyped-def]
    from diagnostic_msgs.msg import DiagnosticArray

    from snake_ros.qos import STATUS_QOS

    bridge = ros.start("bridge_node", {"backend": "emulated", "auto_arm": False, "rate_hz": 50.0})
    diags = ros.collect(DiagnosticArray, "diagnostics", STATUS_QOS)
    assert ros.spin_until(lambda: _bus(diags).get("state") == "DISARMED", _RUN_TIMEOUT_S), ros.log_of(bridge)
    proc = subprocess.Popen(snake_command("twin", "excite", "--robot", "tsnake", "--duration", "4", "--rate", "25"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    seen: set[str] = set()
    command_states: set[str] = set()

    def done() -> bool:
        seen.add(_bus(diags).get("state", ""))
        command_states.add(_bus(diags).get("command_state", ""))
        return proc.poll() is not None

    try:
        assert ros.spin_until(done, _RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    # the bridge took the stream as its commander, and stayed limp throughout
    first = len(diags)
    assert ros.spin_until(lambda: len(diags) > first + 1, _RUN_TIMEOUT_S)
    command_states.add(_bus(diags).get("command_state", ""))
    assert "active" in command_states, command_states
    assert seen <= {"DISARMED", ""}, seen
    assert _bus(diags)["state"] == "DISARMED" and _bus(diags)["torque"] == "False"
    assert ros.stop(bridge) == 0


def test_excite_waits_for_its_subscribers_then_one_line_exit_2(ros) -> None:  # type: ignore[no-untyped-def]
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS

    robot = load_robot("tsnake")
    state_pub = ros.node.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)

    def publish_state() -> None:
        msg = JointState()
        msg.name, msg.position = [j.name for j in robot.joints], [0.0] * len(robot.joints)
        state_pub.publish(msg)

    ros.node.create_timer(0.05, publish_state)
    commands = ros.collect(JointState, "joint_commands", COMMAND_QOS)  # one subscriber of the two asked for
    # --pose-timeout bounds the wait for the pose and the subscribers: long enough for a loaded
    # machine to discover both the pose and the one subscriber, so the line names the missing one.
    proc = subprocess.Popen([*snake_command(), "twin", "excite", "--robot", "tsnake", "--subscribers", "2",
                             "--pose-timeout", "20"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=os.environ.copy())
    try:
        assert ros.spin_until(lambda: proc.poll() is not None, timeout=_RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2
    lines = proc.stderr.read().decode().strip().splitlines() if proc.stderr else []
    # One of the two subscribers: no command goes out, and the line says why.
    assert len(lines) == 1 and "1 of 2 subscribers on /joint_commands" in lines[0], lines
    assert commands == []
