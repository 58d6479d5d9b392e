"""A live view of the robot for Foxglove or Lichtblick, with no ROS on the viewer's side.

An rclpy node subscribes to the stack's topics and re-logs them on channels of a
Foxglove WebSocket server (``foxglove-sdk``) that every Foxglove-protocol app can parse, as
``foxglove_bridge`` does for ROS 2: the ROS messages themselves (``cdr`` encoding, ``ros2msg``
schemas holding the full definition with its dependencies, as rosbag2's MCAP writer stores them),
so that the apps' ROS-aware panels (Diagnostics, Plot, Raw Messages, 3D, State Transitions) work;
where a channel has no ROS type, JSON with a JSON schema naming every field in ``properties``:

======================  ==================================  ==============================================
channel                 schema                              from
======================  ==================================  ==============================================
``/joint_states``       ``sensor_msgs/msg/JointState``      ``joint_states``
``/robot/scene``        ``foxglove.SceneUpdate`` (JSON)     the body: backbone points of the robot YAML's
                                                            kinematics (:func:`snake_core.analysis.session.
                                                            chain_points_batch`) at the live joint angles
                                                            and the pose; the head's trail
``/mocap/head_pose``    ``geometry_msgs/msg/PoseStamped``   ``mocap/head_pose`` or ``--mocap-topic``
``/plan``               ``nav_msgs/msg/Path``               ``plan``
``/goal_pose``          ``geometry_msgs/msg/PoseStamped``   ``goal_pose``
``/monitors``           ``snake.Monitors`` (JSON)           ``singularity_margin``, ``slippage/ratio``,
                                                            ``slippage/status``
``/diagnostics``        ``diagnostic_msgs/msg/              ``diagnostics``
                        DiagnosticArray``
``/bridge/state``       ``snake.BridgeState`` (JSON)        the bridge's ``bridge: bus`` diagnostic
                                                            (state, message, level)
``/tf``                 ``foxglove.FrameTransform`` (JSON)  ``world`` -> ``snake_head``: the head's pose, with
                                                            each scene (the camera can follow the snake)
======================  ==================================  ==============================================

The ROS definitions come from rosbags' typestore of the stack's ROS distribution (the one
:func:`snake_tools.bag.storage.typestore_for` reads bags with); the tests parse them back and
decode the wire bytes with it. The scene is drawn where there is no motion capture from the
twin's ``ground_truth/head_pose``.

With ``allow_commands`` the server also offers the services ``/bridge/arm``,
``/bridge/disarm``, ``/bridge/emergency_stop`` and ``/bridge/clear_estop`` (JSON ``{}`` in, ``{"success", "message"}``
out), each a call of the bridge node's std_srvs/Trigger service of that name. Without it the
server advertises no service at all (docs/security.md).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from snake_core.analysis.session import chain_points_batch
from snake_core.robot import RobotModel
from snake_ros import service_call

SCENE_PERIOD_S = 0.05  # s between two scene updates (20 Hz; joint_states may come faster)
TRAIL_POINTS = 2000  # head positions kept in the trail
COMMAND_SERVICES = ("arm", "disarm", "emergency_stop", "clear_estop")
_CALL_TIMEOUT_S = 10.0  # s to wait for the bridge's answer to a service the app calls
_FRAME = "world"
HEAD_FRAME = "snake_head"
"""The frame at the head's pose (``/tf``): the 3D panel's camera follows it."""

ROS_CHANNELS: dict[str, str] = {
    "/joint_states": "sensor_msgs/msg/JointState",
    "/mocap/head_pose": "geometry_msgs/msg/PoseStamped",
    "/plan": "nav_msgs/msg/Path",
    "/goal_pose": "geometry_msgs/msg/PoseStamped",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
}
"""Channel topic -> ROS type of the channels carrying the ROS messages (``cdr``, ``ros2msg``)."""

_NUMBER, _INTEGER, _STRING, _BOOL = ({"type": "number"}, {"type": "integer"}, {"type": "string"},
                                     {"type": "boolean"})


def _object(**fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": fields}


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


_TIME = _object(sec=_INTEGER, nsec=_INTEGER)
_VECTOR3 = _object(x=_NUMBER, y=_NUMBER, z=_NUMBER)
_POSE = _object(position=_VECTOR3, orientation=_object(x=_NUMBER, y=_NUMBER, z=_NUMBER, w=_NUMBER))
_COLOR = _object(r=_NUMBER, g=_NUMBER, b=_NUMBER, a=_NUMBER)
_SCENE_ENTITY = _object(
    timestamp=_TIME, frame_id=_STRING, id=_STRING, lifetime=_TIME, frame_locked=_BOOL,
    metadata=_array(_object(key=_STRING, value=_STRING)),
    spheres=_array(_object(pose=_POSE, size=_VECTOR3, color=_COLOR)),
    lines=_array(_object(type=_INTEGER, pose=_POSE, thickness=_NUMBER, scale_invariant=_BOOL,
                         points=_array(_VECTOR3), color=_COLOR, colors=_array(_COLOR), indices=_array(_INTEGER))))

JSON_CHANNELS: dict[str, tuple[str, dict[str, Any]]] = {
    "/robot/scene": ("foxglove.SceneUpdate", _object(
        deletions=_array(_object(timestamp=_TIME, type=_INTEGER, id=_STRING)), entities=_array(_SCENE_ENTITY))),
    "/monitors": ("snake.Monitors", _object(timestamp=_TIME, singularity_margin=_NUMBER, slippage_ratio=_NUMBER,
                                            slippage_status=_STRING)),
    "/bridge/state": ("snake.BridgeState", _object(timestamp=_TIME, state=_STRING, message=_STRING,
                                                   level=_INTEGER)),
    "/tf": ("foxglove.FrameTransform", _object(
        timestamp=_TIME, parent_frame_id=_STRING, child_frame_id=_STRING, translation=_VECTOR3,
        rotation=_object(x=_NUMBER, y=_NUMBER, z=_NUMBER, w=_NUMBER))),
}
"""Channel topic -> (schema name, JSON schema) of the channels with no ROS type (JSON-encoded).

The scene's schema names the fields of Foxglove's ``SceneUpdate`` that :func:`scene_update` fills
(github.com/foxglove/schemas); the apps parse a JSON schema only when every object in it lists
its ``properties``."""

CHANNELS: dict[str, str] = {**ROS_CHANNELS, **{t: name for t, (name, _s) in JSON_CHANNELS.items()}}
"""Channel topic -> schema name, every channel."""


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": ns // 1_000_000_000, "nsec": ns % 1_000_000_000}


def _pose_dict(position: Any, orientation: Any) -> dict[str, Any]:
    return {"position": {"x": float(position[0]), "y": float(position[1]), "z": float(position[2])},
            "orientation": {"x": float(orientation[1]), "y": float(orientation[2]), "z": float(orientation[3]),
                            "w": float(orientation[0])}}


def scene_update(robot: RobotModel, points: np.ndarray, trail: np.ndarray, stamp_ns: int) -> dict[str, Any]:
    """A ``foxglove.SceneUpdate`` (JSON) of the body and the head's trail.

    Args:
        robot: The robot (its body radius sizes the spheres).
        points: Backbone points, head first, m, shape (m, 3).
        trail: Past head positions, m, shape (k, 3).
        stamp_ns: Time of the joint angles, ns.
    """
    radius = float(getattr(robot.body, "radius", 0.03))
    identity = _pose_dict((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    body = {
        "timestamp": _stamp(stamp_ns), "frame_id": _FRAME, "id": "body", "lifetime": {"sec": 0, "nsec": 0},
        "frame_locked": False, "metadata": [{"key": "robot", "value": robot.name}],
        "spheres": [{"pose": _pose_dict(p, (1.0, 0.0, 0.0, 0.0)), "size": {"x": 2 * radius, "y": 2 * radius,
                                                                          "z": 2 * radius},
                     "color": {"r": 0.9 if k == 0 else 0.2, "g": 0.3, "b": 0.2 if k == 0 else 0.8, "a": 1.0}}
                    for k, p in enumerate(points)],
        "lines": [{"type": 0, "pose": identity, "thickness": 2 * radius, "scale_invariant": False,
                   "points": [{"x": float(p[0]), "y": float(p[1]), "z": float(p[2])} for p in points],
                   "color": {"r": 0.2, "g": 0.4, "b": 0.9, "a": 1.0}, "colors": [], "indices": []}],
    }
    head_trail = {
        "timestamp": _stamp(stamp_ns), "frame_id": _FRAME, "id": "head_trajectory",
        "lifetime": {"sec": 0, "nsec": 0}, "frame_locked": False, "metadata": [],
        "lines": [{"type": 0, "pose": identity, "thickness": 2.0, "scale_invariant": True,
                   "points": [{"x": float(p[0]), "y": float(p[1]), "z": float(p[2])} for p in trail],
                   "color": {"r": 1.0, "g": 0.6, "b": 0.0, "a": 1.0}, "colors": [], "indices": []}],
    }
    return {"deletions": [], "entities": [body, head_trail]}


class LiveView:
    """The rclpy side of ``snake view``: subscriptions re-logged on the server's channels.

    Args:
        node: The rclpy node to subscribe with.
        robot: The robot whose body is drawn.
        channels: Channel topic -> ``foxglove.Channel`` (see :data:`CHANNELS`).
        bridge: The bridge node's name, for the services.
        mocap_topic: The head's motion-capture pose (geometry_msgs/PoseStamped).
    """

    def __init__(self, node: Any, robot: RobotModel, channels: dict[str, Any], bridge: str = "/bridge_node",
                 mocap_topic: str = "mocap/head_pose") -> None:
        """Subscribe to the stack's topics."""
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
        from geometry_msgs.msg import PoseStamped
        from nav_msgs.msg import Path
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64
        from std_srvs.srv import Trigger

        from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, STATUS_QOS

        self._serialize = serialize_message
        self._node, self._robot, self._ch = node, robot, channels
        self._index = {name: k for k, name in enumerate(robot.joint_names)}
        self._q = np.zeros(len(robot.joints))
        self._pose: tuple[np.ndarray, np.ndarray] = (np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
        self._mocap_seen = False
        self._trail: deque[np.ndarray] = deque(maxlen=TRAIL_POINTS)
        self._last_scene_ns = -(1 << 62)
        self._monitors: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._trigger = Trigger
        self._clients = {s: node.create_client(Trigger, f"{bridge.rstrip('/')}/{s}") for s in COMMAND_SERVICES}
        node.create_subscription(JointState, "joint_states", self._on_joints, SENSOR_QOS)
        node.create_subscription(PoseStamped, mocap_topic, self._on_mocap, SENSOR_QOS)
        node.create_subscription(PoseStamped, "ground_truth/head_pose", self._on_ground_truth, SENSOR_QOS)
        node.create_subscription(Path, "plan", self._on_plan, LATCHED_QOS)
        node.create_subscription(PoseStamped, "goal_pose", self._on_goal, COMMAND_QOS)
        node.create_subscription(DiagnosticArray, "diagnostics", self._on_diagnostics, STATUS_QOS)
        node.create_subscription(Float64, "singularity_margin", lambda m: self._monitor("singularity_margin",
                                                                                         m.data), STATUS_QOS)
        node.create_subscription(Float64, "slippage/ratio", lambda m: self._monitor("slippage_ratio", m.data),
                                 STATUS_QOS)
        node.create_subscription(DiagnosticStatus, "slippage/status",
                                 lambda m: self._monitor("slippage_status", m.message), STATUS_QOS)

    def _now_ns(self) -> int:
        return int(self._node.get_clock().now().nanoseconds)

    # --- callbacks -------------------------------------------------------------------------
    def _on_joints(self, msg: Any) -> None:
        now = self._now_ns()
        self._ch["/joint_states"].log(self._serialize(msg), log_time=now)
        with self._lock:
            for name, value in zip(msg.name, msg.position, strict=False):
                k = self._index.get(name)
                if k is not None and np.isfinite(value):
                    self._q[k] = value
            if now - self._last_scene_ns < SCENE_PERIOD_S * 1e9:
                return
            self._last_scene_ns = now
            position, quat = self._pose
            points = chain_points_batch(self._robot, position[None], quat[None], self._q[None])[0]
            self._trail.append(points[0])
            trail = np.array(self._trail)
        self._ch["/robot/scene"].log(scene_update(self._robot, points, trail, now), log_time=now)
        self._ch["/tf"].log({"timestamp": _stamp(now), "parent_frame_id": _FRAME, "child_frame_id": HEAD_FRAME,
                             "translation": {k: float(v) for k, v in zip("xyz", points[0], strict=True)},
                             "rotation": _pose_dict(points[0], quat)["orientation"]}, log_time=now)

    def _pose_of(self, msg: Any) -> tuple[np.ndarray, np.ndarray]:
        p, o = msg.pose.position, msg.pose.orientation
        return np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])

    def _on_mocap(self, msg: Any) -> None:
        now = self._now_ns()
        pose = self._pose_of(msg)
        with self._lock:
            self._pose, self._mocap_seen = pose, True
        self._ch["/mocap/head_pose"].log(self._serialize(msg), log_time=now)

    def _on_ground_truth(self, msg: Any) -> None:
        with self._lock:
            if not self._mocap_seen:  # motion capture first; the twin's ground truth without one
                self._pose = self._pose_of(msg)

    def _on_plan(self, msg: Any) -> None:
        self._ch["/plan"].log(self._serialize(msg), log_time=self._now_ns())

    def _on_goal(self, msg: Any) -> None:
        self._ch["/goal_pose"].log(self._serialize(msg), log_time=self._now_ns())

    def _monitor(self, key: str, value: Any) -> None:
        now = self._now_ns()
        with self._lock:
            self._monitors[key] = value if isinstance(value, str) else float(value)
            out = dict(self._monitors)
        self._ch["/monitors"].log({"timestamp": _stamp(now), **out}, log_time=now)

    def _on_diagnostics(self, msg: Any) -> None:
        now = self._now_ns()
        self._ch["/diagnostics"].log(self._serialize(msg), log_time=now)
        for s in msg.status:
            if s.name == "bridge: bus":
                level = int.from_bytes(s.level, "little") if isinstance(s.level, bytes) else int(s.level)
                values = {kv.key: kv.value for kv in s.values}
                self._ch["/bridge/state"].log({"timestamp": _stamp(now), "state": values.get("state", ""),
                                               "message": s.message, "level": level}, log_time=now)

    # --- services ----------------------------------------------------------------------------
    def call_bridge(self, service: str) -> dict[str, Any]:
        """Call the bridge's ``~/<service>`` (std_srvs/Trigger) and wait for its answer.

        Runs on the server's thread while the node spins on another (:func:`serve`).
        """
        client = self._clients[service]
        if not client.wait_for_service(timeout_sec=_CALL_TIMEOUT_S):
            return {"success": False, "message": f"no bridge answers on {client.srv_name}"}
        sent = service_call.call(client, self._trigger.Request(), service_call.threaded,
                                 time.monotonic() + _CALL_TIMEOUT_S)
        if sent is None:
            return {"success": False, "message": f"{client.srv_name} did not answer within {_CALL_TIMEOUT_S:g} s"}
        answer = sent.response
        return {"success": bool(answer.success), "message": str(answer.message), "sent": sent.sent}


def ros2msg_definition(ros_type: str) -> str:
    """The full definition of ``ros_type`` with its dependencies, as rosbag2's MCAP writer stores it.

    The type's own fields first, then each type it uses after a line of 80 ``=`` and
    ``MSG: pkg/Name`` (the ``ros2msg`` schema encoding of the MCAP format's registry).

    Args:
        ros_type: ``pkg/msg/Name``.
    """
    from snake_tools.bag.storage import typestore_for

    text, _md5 = typestore_for([]).generate_msgdef(ros_type, ros_version=2)
    return str(text)


def make_channels() -> dict[str, Any]:
    """The server's channels: :data:`ROS_CHANNELS` as ``cdr``, :data:`JSON_CHANNELS` as ``json``."""
    import foxglove

    out = {}
    for topic, ros_type in ROS_CHANNELS.items():
        schema = foxglove.Schema(name=ros_type, encoding="ros2msg", data=ros2msg_definition(ros_type).encode())
        out[topic] = foxglove.Channel(topic, schema=schema, message_encoding="cdr")
    for topic, (name, json_schema) in JSON_CHANNELS.items():
        schema = foxglove.Schema(name=name, encoding="jsonschema", data=json.dumps(json_schema).encode())
        out[topic] = foxglove.Channel(topic, schema=schema, message_encoding="json")
    return out


def command_services(view: LiveView) -> list[Any]:
    """The services ``/bridge/<name>`` of :data:`COMMAND_SERVICES` (offered only with ``--allow-commands``)."""
    import foxglove

    response = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="snake.TriggerResponse", encoding="jsonschema", data=json.dumps(
            _object(success=_BOOL, message=_STRING)).encode()))
    request = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="snake.TriggerRequest", encoding="jsonschema", data=json.dumps(_object()).encode()))
    services = []
    for name in COMMAND_SERVICES:
        def handler(req: Any, name: str = name) -> bytes:
            return json.dumps(view.call_bridge(name)).encode()

        services.append(foxglove.Service(name=f"/bridge/{name}", schema=foxglove.ServiceSchema(
            name="std_srvs/Trigger", request=request, response=response), handler=handler))
    return services
