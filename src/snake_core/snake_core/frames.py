"""Frame conventions of motion capture and TF: y-up to z-up, and a pose as a transform.

Motion-capture systems differ in which axis points up. OptiTrack (Motive) streams y-up by
default, Vicon z-up; the stack works in a z-up world (``world``, x and y on the ground, REP 103).
A y-up frame ``(x_m, y_m, z_m)`` with ``y_m`` up is taken to the z-up world by the rotation of
+90 deg about x::

    R_x(+pi/2) = [[1, 0, 0], [0, 0, -1], [0, 1, 0]],   (x, y, z)_world = (x_m, -z_m, y_m)

so the capture volume's ``x_m`` stays ``x`` and its ``z_m`` (towards the viewer in Motive's
default, right-handed) becomes ``-y``. An orientation ``q`` of a rigid body becomes
``q_x * q`` with ``q_x`` the quaternion of that rotation: the body's axes are the same
physical directions, only written in the new world frame.

A transform ``parent -> child`` (tf2's ``TransformStamped``) of a body whose pose in ``parent``
is ``(p, q)`` has translation ``p`` and rotation ``q``: it maps child coordinates to parent
coordinates, ``x_parent = R(q) x_child + p``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np

from snake_core.errors import SnakeCoreError

_HALF_SQRT2 = math.sqrt(0.5)
_Q_X90 = np.array([_HALF_SQRT2, 0.0, 0.0, _HALF_SQRT2])  # (x, y, z, w): +90 deg about x


class FrameError(SnakeCoreError, ValueError):
    """A pose that cannot be converted (NaN, a zero quaternion)."""


def quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of quaternions given as ``(x, y, z, w)``."""
    ax, ay, az, aw = (float(v) for v in a)
    bx, by, bz, bw = (float(v) for v in b)
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


@overload
def y_up_to_z_up(position: np.ndarray, quaternion_xyzw: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@overload
def y_up_to_z_up(position: np.ndarray, quaternion_xyzw: None = None) -> tuple[np.ndarray, None]: ...


def y_up_to_z_up(position: np.ndarray, quaternion_xyzw: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """A pose measured in a y-up frame, written in the z-up world (rotation R_x(+pi/2), module docstring).

    Args:
        position: ``(x, y, z)`` in the y-up frame, m (or ``(K, 3)`` marker positions).
        quaternion_xyzw: Orientation in the y-up frame, ``(x, y, z, w)``, or None (markers).

    Returns:
        Position(s) ``(x, -z, y)``, m, and the orientation ``q_x * q`` (None if none was given).
    """
    p = np.asarray(position, dtype=float)
    out = np.stack([p[..., 0], -p[..., 2], p[..., 1]], axis=-1)
    if quaternion_xyzw is None:
        return out, None
    return out, quat_multiply(_Q_X90, np.asarray(quaternion_xyzw, dtype=float))


@dataclass(frozen=True)
class TransformFields:
    """The fields of a ``geometry_msgs/TransformStamped`` (tf2), without ROS types.

    Attributes:
        parent: ``header.frame_id``.
        child: ``child_frame_id``.
        stamp_ns: ``header.stamp`` in nanoseconds.
        translation: ``transform.translation`` ``(x, y, z)``, m.
        rotation: ``transform.rotation`` ``(x, y, z, w)``, unit norm.
    """

    parent: str
    child: str
    stamp_ns: int
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]


def pose_to_transform(parent: str, child: str, stamp_ns: int, position: np.ndarray,
                      quaternion_xyzw: np.ndarray) -> TransformFields:
    """The transform ``parent -> child`` of a body at pose ``(position, quaternion)`` in ``parent``.

    ``x_parent = R(q) x_child + p`` (module docstring); the quaternion is normalised.

    Args:
        parent: Frame the pose is given in (``world``).
        child: The body's frame (the URDF's root link).
        stamp_ns: Time of the pose, ns.
        position: ``p``, m.
        quaternion_xyzw: ``q`` as ``(x, y, z, w)``.

    Raises:
        FrameError: A NaN, an infinite value or a zero quaternion.
    """
    p = np.asarray(position, dtype=float).reshape(3)
    q = np.asarray(quaternion_xyzw, dtype=float).reshape(4)
    n = float(np.linalg.norm(q))
    if not (np.isfinite(p).all() and np.isfinite(q).all()) or n < 1e-9:
        raise FrameError(f"pose: need a finite position and a non-zero quaternion, got {p.tolist()}, {q.tolist()}")
    q = q / n
    return TransformFields(parent, child, int(stamp_ns), (float(p[0]), float(p[1]), float(p[2])),
                           (float(q[0]), float(q[1]), float(q[2]), float(q[3])))


def planar_pose_to_transform(parent: str, child: str, stamp_ns: int, x: float, y: float, yaw: float,
                             z: float = 0.0) -> TransformFields:
    """The transform of a planar pose ``(x, y, yaw)`` (a rotation about z by ``yaw``), see :func:`pose_to_transform`."""
    return pose_to_transform(parent, child, stamp_ns, np.array([x, y, z]),
                             np.array([0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)]))
