"""Forward kinematics of the snake's serial chain, from the robot description.

Same frames as the URDF (:mod:`snake_core.urdf`): each link frame has x along the
backbone from head to tail; joint k sits at its arc position along the body and turns
about its YAML axis. Used to recover the body's shape and heading from a base pose and
``joint_states`` (live, or replayed from a bag).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from snake_core.robot import RobotModel


def joint_offsets(robot: RobotModel) -> np.ndarray:
    """Distance along x from each joint's parent frame origin to the joint, m (head first)."""
    if robot.kind == "tsnake":
        s = robot.joint_arc_positions()
        return np.diff(np.concatenate([[0.0], s]))
    return robot.link_lengths[:-1].copy()


def tail_offset(robot: RobotModel) -> float:
    """From the last joint to the tail end, m."""
    if robot.kind == "tsnake":
        return float(robot.length - robot.joint_arc_positions()[-1])
    return float(robot.link_lengths[-1])


def chain_points(robot: RobotModel, base_position: np.ndarray, base_quat_wxyz: np.ndarray,
                 q: np.ndarray) -> np.ndarray:
    """World positions of the head end, every joint and the tail end, m.

    Args:
        robot: Robot description.
        base_position: Head frame origin in the world, m.
        base_quat_wxyz: Head frame orientation (w, x, y, z).
        q: Joint angles in robot joint order, rad.

    Returns:
        Array (n_joints + 2, 3), head end first.
    """
    w, x, y, z = np.asarray(base_quat_wxyz, dtype=float)
    rot = Rotation.from_quat([x, y, z, w])
    pos = np.asarray(base_position, dtype=float).copy()
    points = [pos.copy()]
    for j, offset, angle in zip(robot.joints, joint_offsets(robot), np.asarray(q, dtype=float), strict=True):
        pos = pos + rot.apply([offset, 0.0, 0.0])
        points.append(pos.copy())
        rot = rot * Rotation.from_rotvec(np.asarray(j.axis) * angle)
    points.append(pos + rot.apply([tail_offset(robot), 0.0, 0.0]))
    return np.asarray(points)
