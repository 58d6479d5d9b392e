"""Frames on the ROS side: mocap poses into the z-up world, and TF output where ``tf2_msgs`` exists.

``tf2_msgs`` comes with a full ROS 2 install but not from PyPI, so on the pip-only install
the nodes run without TF: :class:`TfPublisher` then logs once that TF is off and its
:meth:`~TfPublisher.send` does nothing. The message itself (``geometry_msgs/TransformStamped``,
which is on PyPI) is built by :func:`transform_msg`, the same on both installs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, TransformStamped
from nav_msgs.msg import Path
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from snake_core.frames import TransformFields, y_up_to_z_up

TF_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)
"""/tf as tf2_ros's TransformBroadcaster publishes it (reliable, volatile, depth 100)."""


def mocap_pose(msg: PoseStamped, y_up: bool) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and orientation ``(x, y, z, w)`` of a motion-capture pose in the z-up world.

    Args:
        msg: The rigid body's pose as the mocap driver publishes it.
        y_up: The capture frame is y-up (OptiTrack's default): rotate it into the z-up world.
    """
    p, q = msg.pose.position, msg.pose.orientation
    position, quat = np.array([p.x, p.y, p.z]), np.array([q.x, q.y, q.z, q.w])
    return y_up_to_z_up(position, quat) if y_up else (position, quat)


def pose_msg(x: float, y: float, yaw: float, frame_id: str = "world", stamp: Time | None = None) -> PoseStamped:
    """Planar pose at height 0: position ``(x, y)`` (m) and heading ``yaw`` (rad) about the world's z axis."""
    msg = PoseStamped()
    msg.header.frame_id = frame_id
    if stamp is not None:
        msg.header.stamp = stamp
    msg.pose.position.x, msg.pose.position.y = float(x), float(y)
    msg.pose.orientation.z, msg.pose.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return msg


def path_msg(points: Any, frame_id: str = "world", stamp: Time | None = None) -> Path:
    """``nav_msgs/Path`` through planar ``points`` (N x 2, m), each pose heading along the path.

    A pose's yaw is that of the chord from its predecessor to its successor (one-sided at the
    ends), the usual central difference; a single point faces +x.
    """
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    path = Path()
    path.header.frame_id = frame_id
    if stamp is not None:
        path.header.stamp = stamp
    for k, p in enumerate(pts):
        chord = pts[min(k + 1, len(pts) - 1)] - pts[max(k - 1, 0)] if len(pts) > 1 else np.array([1.0, 0.0])
        pose = pose_msg(p[0], p[1], math.atan2(float(chord[1]), float(chord[0])), frame_id)
        pose.header = path.header
        path.poses.append(pose)
    return path


def transform_msg(fields: TransformFields) -> TransformStamped:
    """``geometry_msgs/TransformStamped`` from the core's transform fields."""
    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = fields.parent, fields.child
    msg.header.stamp = Time(sec=fields.stamp_ns // 1_000_000_000, nanosec=fields.stamp_ns % 1_000_000_000)
    t, r = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = fields.translation
    r.x, r.y, r.z, r.w = fields.rotation
    return msg


class TfPublisher:
    """Publishes transforms on ``/tf`` if ``tf2_msgs`` can be imported; otherwise says so once.

    Args:
        node: The node that publishes.
    """

    def __init__(self, node: Node) -> None:
        self._msg_type: Any = None
        self._pub: Any = None
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            node.get_logger().info("TF off: tf2_msgs is not installed (a full ROS 2 install has it); "
                                   "everything else runs")
            return
        self._msg_type = TFMessage
        self._pub = node.create_publisher(TFMessage, "/tf", TF_QOS)

    @property
    def enabled(self) -> bool:
        """True when transforms go out on /tf."""
        return self._pub is not None

    def send(self, *transforms: TransformFields) -> None:
        """Publish transforms (nothing without tf2_msgs)."""
        if self._pub is not None:
            self._pub.publish(self._msg_type(transforms=[transform_msg(f) for f in transforms]))
