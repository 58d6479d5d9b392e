"""A live view of the robot for Foxglove or Lichtblick, with no ROS on the viewer's side.

An rclpy node subscribes to the stack's topics and re-logs them on channels of a
Foxglove WebSocket server (``foxglove-sdk``), JSON-encoded, under the schema names the
apps' panels know (``foxglove.SceneUpdate``, ``foxglove.PoseInFrame``, ...):

======================  ========================  ==============================================
channel                 schema                    from
======================  ========================  ==============================================
``/joint_states``       ``snake.JointStates``     ``joint_states`` (names, positions rad, ...)
``/robot/scene``        ``foxglove.SceneUpdate``  the body: backbone points of the robot YAML's kinematics
                                                  (:func:`snake_core.analysis.session.chain_points_batch`)
                                                  at the live joint angles and the pose; the head's trail
``/mocap/head_pose``    ``foxglove.PoseInFrame``  ``mocap/head_pose`` or ``--mocap-topic`` (else
                                                  ``ground_truth/head_pose``)
``/plan``               ``foxglove.PosesInFrame`` ``plan`` (nav_msgs/Path)
``/goal_pose``          ``foxglove.PoseInFrame``  ``goal_pose``
``/monitors``           ``snake.Monitors``        ``singularity_margin``, ``slippage/ratio``, ``slippage/status``
``/diagnostics``        ``snake.Diagnostics``     ``diagnostics``
``/bridge/state``       ``snake.BridgeState``     the bridge's ``bridge: bus`` diagnostic (state, message)
======================  ========================  ==============================================

With ``allow_commands`` the server also offers the services ``/bridge/arm``,
``/bridge/disarm`` and ``/bridge/emergency_stop`` (JSON ``{}`` in, ``{"success", "message"}``
out), each a call of the bridge node's std_srvs/Trigger service of that name. Without it the
server advertises no service at all (docs/security.md).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

import numpy as np

from snake_core.analysis.session import chain_points_batch
from snake_core.robot import RobotModel

SCENE_PERIOD_S = 0.05  # s between two scene updates (20 Hz; joint_states may come faster)
TRAIL_POINTS = 2000  # head positions kept in the trail
COMMAND_SERVICES = ("arm", "disarm", "emergency_stop")
_CALL_TIMEOUT_S = 10.0  # s to wait for the bridge's answer to a service the app calls
_FRAME = "world"

CHANNELS: dict[str, str] = {
    "/joint_states": "snake.JointStates",
    "/robot/scene": "foxglove.SceneUpdate",
    "/mocap/head_pose": "foxglove.PoseInFrame",
    "/plan": "foxglove.PosesInFrame",
    "/goal_pose": "foxglove.PoseInFrame",
    "/monitors": "snake.Monitors",
    "/diagnostics": "snake.Diagnostics",
    "/bridge/state": "snake.BridgeState",
}
"""Channel topic -> schema name (all JSON-encoded)."""


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
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64
        from std_srvs.srv import Trigger

        from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, STATUS_QOS

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
        self._ch["/joint_states"].log({"timestamp": _stamp(now), "name": list(msg.name),
                                       "position": list(msg.position), "velocity": list(msg.velocity),
                                       "effort": list(msg.effort)}, log_time=now)
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

    def _pose_of(self, msg: Any) -> tuple[np.ndarray, np.ndarray]:
        p, o = msg.pose.position, msg.pose.orientation
        return np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])

    def _on_mocap(self, msg: Any) -> None:
        now = self._now_ns()
        pose = self._pose_of(msg)
        with self._lock:
            self._pose, self._mocap_seen = pose, True
        self._ch["/mocap/head_pose"].log({"timestamp": _stamp(now), "frame_id": msg.header.frame_id or _FRAME,
                                          "pose": _pose_dict(*pose)}, log_time=now)

    def _on_ground_truth(self, msg: Any) -> None:
        with self._lock:
            if not self._mocap_seen:  # motion capture first; the twin's ground truth without one
                self._pose = self._pose_of(msg)

    def _on_plan(self, msg: Any) -> None:
        now = self._now_ns()
        poses = [_pose_dict(*self._pose_of(p)) for p in msg.poses]
        self._ch["/plan"].log({"timestamp": _stamp(now), "frame_id": msg.header.frame_id or _FRAME,
                               "poses": poses}, log_time=now)

    def _on_goal(self, msg: Any) -> None:
        now = self._now_ns()
        self._ch["/goal_pose"].log({"timestamp": _stamp(now), "frame_id": msg.header.frame_id or _FRAME,
                                    "pose": _pose_dict(*self._pose_of(msg))}, log_time=now)

    def _monitor(self, key: str, value: Any) -> None:
        now = self._now_ns()
        with self._lock:
            self._monitors[key] = value if isinstance(value, str) else float(value)
            out = dict(self._monitors)
        self._ch["/monitors"].log({"timestamp": _stamp(now), **out}, log_time=now)

    def _on_diagnostics(self, msg: Any) -> None:
        now = self._now_ns()
        status = [{"name": s.name, "level": int.from_bytes(s.level, "little") if isinstance(s.level, bytes)
                   else int(s.level), "message": s.message, "hardware_id": s.hardware_id,
                   "values": {kv.key: kv.value for kv in s.values}} for s in msg.status]
        self._ch["/diagnostics"].log({"timestamp": _stamp(now), "status": status}, log_time=now)
        for s in status:
            if s["name"] == "bridge: bus":
                self._ch["/bridge/state"].log({"timestamp": _stamp(now), "state": s["values"].get("state", ""),
                                               "message": s["message"], "level": s["level"]}, log_time=now)

    # --- services ----------------------------------------------------------------------------
    def call_bridge(self, service: str) -> dict[str, Any]:
        """Call the bridge's ``~/<service>`` (std_srvs/Trigger) and wait for its answer.

        Runs on the server's thread while the node spins on another (:func:`serve`).
        """
        client = self._clients[service]
        if not client.wait_for_service(timeout_sec=_CALL_TIMEOUT_S):
            return {"success": False, "message": f"no bridge answers on {client.srv_name}"}
        done = threading.Event()
        future = client.call_async(self._trigger.Request())
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(_CALL_TIMEOUT_S):
            return {"success": False, "message": f"{client.srv_name} did not answer within {_CALL_TIMEOUT_S:g} s"}
        answer = future.result()
        return {"success": bool(answer.success), "message": str(answer.message)}


def make_channels() -> dict[str, Any]:
    """The server's channels (:data:`CHANNELS`), JSON-encoded with their schema names."""
    import foxglove

    out = {}
    for topic, name in CHANNELS.items():
        schema = foxglove.Schema(name=name, encoding="jsonschema", data=json.dumps({"type": "object"}).encode())
        out[topic] = foxglove.Channel(topic, schema=schema, message_encoding="json")
    return out


def command_services(view: LiveView) -> list[Any]:
    """The services ``/bridge/<name>`` of :data:`COMMAND_SERVICES` (offered only with ``--allow-commands``)."""
    import foxglove

    response = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="snake.TriggerResponse", encoding="jsonschema", data=json.dumps(
            {"type": "object", "properties": {"success": {"type": "boolean"},
                                              "message": {"type": "string"}}}).encode()))
    request = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="snake.TriggerRequest", encoding="jsonschema", data=json.dumps({"type": "object"}).encode()))
    services = []
    for name in COMMAND_SERVICES:
        def handler(req: Any, name: str = name) -> bytes:
            return json.dumps(view.call_bridge(name)).encode()

        services.append(foxglove.Service(name=f"/bridge/{name}", schema=foxglove.ServiceSchema(
            name="std_srvs/Trigger", request=request, response=response), handler=handler))
    return services
