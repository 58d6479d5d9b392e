"""Every schema ``snake view`` advertises parses, and describes the bytes it sends.

ROS channels: the ``ros2msg`` definition is parsed by rosbags (a parser apart from rclpy) and
the CDR bytes rclpy writes for a filled message decode with it to the same values. JSON
channels: the schema obeys what the apps' JSON-schema parser needs (Foxglove Studio's and
Lichtblick's ``parseJsonSchema``: every object lists its ``properties``, every array its
``items``, each field one of the JSON types), and every field of the messages the view sends is
in it with its type. The real app parses them all in ``test_view_browser.py``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_tools.live_view import CHANNELS, JSON_CHANNELS, ROS_CHANNELS, ros2msg_definition, scene_update

_SEPARATOR = "=" * 80


def _rosbags_store(ros_type: str) -> Any:
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(ros2msg_definition(ros_type), ros_type))
    return store


def _joint_state() -> Any:
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp.sec, msg.header.stamp.nanosec, msg.header.frame_id = 12, 345, "base"
    msg.name = ["m1_dorsal", "m1_twist"]
    msg.position, msg.velocity, msg.effort = [0.25, -1.5], [0.5, 0.0], [1.0, -2.0]
    return msg


def _diagnostics() -> Any:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

    msg = DiagnosticArray()
    msg.status = [DiagnosticStatus(level=DiagnosticStatus.WARN, name="gait_node: gait", message="stopped",
                                   hardware_id="tsnake", values=[KeyValue(key="state", value="ARMED")])]
    return msg


def _pose() -> Any:
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.frame_id = "world"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = 1.25, -0.5, 0.02
    msg.pose.orientation.z, msg.pose.orientation.w = 0.6, 0.8
    return msg


def _path() -> Any:
    from nav_msgs.msg import Path

    msg = Path()
    msg.header.frame_id = "world"
    msg.poses = [_pose(), _pose()]
    msg.poses[1].pose.position.x = 2.0
    return msg


_MESSAGES = {"sensor_msgs/msg/JointState": _joint_state, "diagnostic_msgs/msg/DiagnosticArray": _diagnostics,
             "geometry_msgs/msg/PoseStamped": _pose, "nav_msgs/msg/Path": _path}


def test_every_channel_has_a_ros_type_or_a_json_schema() -> None:
    assert set(ROS_CHANNELS) | set(JSON_CHANNELS) == set(CHANNELS) and not set(ROS_CHANNELS) & set(JSON_CHANNELS)
    assert set(ROS_CHANNELS.values()) == set(_MESSAGES)


@pytest.mark.parametrize("ros_type", sorted(_MESSAGES))
def test_the_ros2msg_definition_decodes_what_rclpy_writes(ros_type: str) -> None:
    from rclpy.serialization import serialize_message

    msg = _MESSAGES[ros_type]()
    decoded = _rosbags_store(ros_type).deserialize_cdr(serialize_message(msg), ros_type)
    if ros_type.endswith("JointState"):
        assert list(decoded.name) == list(msg.name) and decoded.header.stamp.nanosec == 345
        for field in ("position", "velocity", "effort"):
            np.testing.assert_array_equal(getattr(decoded, field), getattr(msg, field))
    elif ros_type.endswith("DiagnosticArray"):
        (status,) = decoded.status
        assert (status.level, status.name, status.message, status.hardware_id) == (1, "gait_node: gait", "stopped",
                                                                                  "tsnake")
        assert [(kv.key, kv.value) for kv in status.values] == [("state", "ARMED")]
    else:
        poses = decoded.poses if ros_type.endswith("Path") else [decoded]
        assert [p.pose.position.x for p in poses] == ([1.25, 2.0] if ros_type.endswith("Path") else [1.25])
        assert poses[0].pose.orientation.w == pytest.approx(0.8) and poses[0].header.frame_id == "world"


@pytest.mark.parametrize("ros_type", sorted(_MESSAGES))
def test_the_definition_has_the_rosbag2_layout_with_every_dependency(ros_type: str) -> None:
    text = ros2msg_definition(ros_type)
    sections = text.split(_SEPARATOR + "\n")
    named = [s.splitlines()[0].removeprefix("MSG: ") for s in sections[1:]]
    assert all(s.startswith("MSG: ") for s in sections[1:]) and len(set(named)) == len(named)
    used = {f.split()[0].removesuffix("[]").split("[")[0] for s in sections for f in s.splitlines()
            if "/" in f.split()[0] and not f.startswith("MSG: ")}
    assert used <= set(named)                  # every complex field's type is defined below it
    assert {"std_msgs/Header", "builtin_interfaces/Time"} <= set(named)   # each of these types has a header


def _check_schema(schema: dict[str, Any], where: str) -> None:
    """The rules of the apps' JSON-schema parser (objects list properties, arrays their items)."""
    kind = schema.get("type")
    assert kind in {"object", "array", "string", "number", "integer", "boolean"}, f"{where}: type {kind!r}"
    if kind == "object":
        assert isinstance(schema.get("properties"), dict), f"{where}: an object without properties"
        for name, field in schema["properties"].items():
            _check_schema(field, f"{where}.{name}")
    if kind == "array":
        assert isinstance(schema.get("items"), dict), f"{where}: an array without items"
        _check_schema(schema["items"], f"{where}[]")


def _check_value(value: Any, schema: dict[str, Any], where: str) -> None:
    """``value`` is described by ``schema``: its type, and for objects every key among the properties."""
    kind = schema["type"]
    expected = {"object": dict, "array": list, "string": str, "number": (int, float), "integer": int,
                "boolean": bool}[kind]
    assert isinstance(value, expected) and (kind == "boolean" or not isinstance(value, bool)), (
        f"{where}: {value!r} is not {kind}")
    if kind == "object":
        missing = set(value) - set(schema["properties"])
        assert not missing, f"{where}: fields {sorted(missing)} not in the schema"
        for k, v in value.items():
            _check_value(v, schema["properties"][k], f"{where}.{k}")
    if kind == "array":
        for k, v in enumerate(value):
            _check_value(v, schema["items"], f"{where}[{k}]")


@pytest.mark.parametrize("topic", sorted(JSON_CHANNELS))
def test_json_schemas_list_every_field(topic: str) -> None:
    _name, schema = JSON_CHANNELS[topic]
    _check_schema(json.loads(json.dumps(schema)), topic)


def test_the_scene_the_view_sends_is_described_by_its_schema() -> None:
    robot = load_robot("tsnake")
    points = np.cumsum(np.full((len(robot.joints) + 2, 3), 0.05), axis=0)
    message = json.loads(json.dumps(scene_update(robot, points, points[:5], 1_500_000_000)))
    _check_value(message, JSON_CHANNELS["/robot/scene"][1], "/robot/scene")
    assert {e["id"] for e in message["entities"]} == {"body", "head_trajectory"}


@pytest.mark.parametrize(("topic", "message"), [
    ("/monitors", {"timestamp": {"sec": 1, "nsec": 2}, "singularity_margin": 0.5, "slippage_ratio": 0.1,
                   "slippage_status": "ok"}),
    ("/bridge/state", {"timestamp": {"sec": 1, "nsec": 2}, "state": "ARMED", "message": "bus ok", "level": 0}),
    ("/tf", {"timestamp": {"sec": 1, "nsec": 2}, "parent_frame_id": "world", "child_frame_id": "snake_head",
             "translation": {"x": 1.0, "y": 2.0, "z": 0.0}, "rotation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}),
])
def test_the_status_channels_are_described_by_their_schemas(topic: str, message: dict[str, Any]) -> None:
    _check_value(message, JSON_CHANNELS[topic][1], topic)
