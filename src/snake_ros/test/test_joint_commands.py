"""joint_commands filtering shared by the bridge and the twin: a joint named twice drops the message."""

from __future__ import annotations

from typing import Any

from rclpy.logging import LoggingSeverity
from sensor_msgs.msg import JointState

from snake_core.robot import load_robot
from snake_hardware.command import JointTargetFilter
from snake_ros.joint_commands import filter_joint_command


class _Logger:
    """Records warnings and their throttle, as an rclpy logger would receive them."""

    name = "test_joint_commands"

    def __init__(self) -> None:
        self.lines: list[tuple[str, Any]] = []

    def log(self, text: str, severity: Any, throttle_duration_sec: Any = None) -> bool:
        assert severity == LoggingSeverity.WARN
        self.lines.append((text, throttle_duration_sec))
        return True


def test_a_joint_named_twice_drops_the_message_with_a_throttled_warning() -> None:
    command_filter = JointTargetFilter(load_robot("tsnake").joints)
    logger = _Logger()
    twice = JointState(name=["m1_dorsal", "m2_dorsal", "m1_dorsal"], position=[0.1, 0.2, -0.1])
    assert filter_joint_command(twice, command_filter, logger) is None  # type: ignore[arg-type]
    assert len(logger.lines) == 1
    text, throttle = logger.lines[0]
    assert "m1_dorsal" in text and "m2_dorsal" not in text and throttle is not None and throttle > 0
    once = JointState(name=["m1_dorsal", "m2_dorsal"], position=[0.1, 0.2])
    cmd = filter_joint_command(once, command_filter, logger)  # type: ignore[arg-type]
    assert cmd is not None and dict(cmd.targets) == {"m1_dorsal": 0.1, "m2_dorsal": 0.2}


def test_a_publisher_whose_node_is_not_yet_discovered_is_named_as_such() -> None:
    from types import SimpleNamespace

    from snake_ros.joint_commands import UNDISCOVERED, node_names

    infos = [SimpleNamespace(node_namespace="/", node_name="gait_node"),
             SimpleNamespace(node_namespace="/lab", node_name="teleop"),
             SimpleNamespace(node_namespace="_NODE_NAMESPACE_UNKNOWN_", node_name="_NODE_NAME_UNKNOWN_")]
    assert node_names(infos) == sorted(["/gait_node", "/lab/teleop", UNDISCOVERED])
