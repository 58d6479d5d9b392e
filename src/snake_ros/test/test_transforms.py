"""Message builders of snake_ros.transforms against hand-computed headings."""

from __future__ import annotations

import math

import numpy as np

from snake_ros.transforms import path_msg, pose_msg


def _yaw(pose) -> float:
    q = pose.pose.orientation
    return 2.0 * math.atan2(q.z, q.w)


def test_a_path_faces_along_its_chords_and_carries_its_frame_on_every_pose() -> None:
    pts = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]
    msg = path_msg(pts, "mocap")
    # Central differences: (1,0)-(0,0) at the start, (1,1)-(0,0), (0,1)-(1,0), (0,1)-(1,1) at the end.
    expected = [0.0, math.pi / 4, 3 * math.pi / 4, math.pi]
    assert [(p.pose.position.x, p.pose.position.y) for p in msg.poses] == pts
    np.testing.assert_allclose([_yaw(p) for p in msg.poses], expected, atol=1e-12)
    assert msg.header.frame_id == "mocap" and {p.header.frame_id for p in msg.poses} == {"mocap"}


def test_a_single_point_faces_plus_x_and_an_empty_path_has_no_poses() -> None:
    assert _yaw(path_msg([(2.0, 3.0)]).poses[0]) == 0.0
    assert path_msg([]).poses == []


def test_a_pose_has_its_heading_about_z_and_unit_quaternion() -> None:
    msg = pose_msg(0.5, -0.25, -2.0)
    q = msg.pose.orientation
    assert (msg.pose.position.x, msg.pose.position.y, msg.header.frame_id) == (0.5, -0.25, "world")
    assert math.isclose(q.x**2 + q.y**2 + q.z**2 + q.w**2, 1.0) and math.isclose(_yaw(msg), -2.0)
