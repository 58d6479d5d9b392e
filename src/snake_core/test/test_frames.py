"""Frame conventions: y-up motion capture to the z-up world, and a pose as a tf2 transform."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from snake_core.frames import FrameError, planar_pose_to_transform, pose_to_transform, quat_multiply, y_up_to_z_up


def _same_rotation(q1, q2) -> bool:
    return abs(abs(float(np.dot(q1, q2))) - 1.0) < 1e-9  # q and -q are the same rotation


def test_quaternion_product_is_the_composition_of_rotations():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = Rotation.random(random_state=rng), Rotation.random(random_state=rng)
        assert _same_rotation(quat_multiply(a.as_quat(), b.as_quat()), (a * b).as_quat())


def test_y_up_positions_become_z_up_with_up_kept_up():
    p = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    out, none = y_up_to_z_up(p)
    assert none is None
    # the capture frame's up (y) is the world's up (z), x stays x, right-handedness kept (z_m -> -y)
    assert out[1] == pytest.approx([0.0, 0.0, 1.0])
    assert out[2] == pytest.approx([0.0, -1.0, 0.0])
    assert out[0] == pytest.approx(Rotation.from_euler("x", 90, degrees=True).apply(p[0]))


def test_y_up_orientation_keeps_the_body_axes_physical():
    rng = np.random.default_rng(5)
    r_x = Rotation.from_euler("x", 90, degrees=True)
    for _ in range(20):
        body = Rotation.random(random_state=rng)  # orientation in the y-up frame
        pos = rng.normal(size=3)
        p_w, q_w = y_up_to_z_up(pos, body.as_quat())
        # a point fixed on the body, written in the capture frame, maps to the same world point
        local = rng.normal(size=3)
        in_capture = body.apply(local) + pos
        assert Rotation.from_quat(q_w).apply(local) + p_w == pytest.approx(r_x.apply(in_capture))


def test_a_body_lying_flat_in_optitrack_gets_its_heading_as_world_yaw():
    # OptiTrack y-up: a body heading along x_m, turned by 30 deg about the vertical (y_m) axis.
    body = Rotation.from_euler("y", 30, degrees=True)
    _, q = y_up_to_z_up(np.zeros(3), body.as_quat())
    ex = Rotation.from_quat(q).apply([1.0, 0.0, 0.0])
    assert ex[2] == pytest.approx(0.0, abs=1e-12)  # still level
    # +30 deg about y_m (up) is +30 deg about z (up): counter-clockwise seen from above in both
    assert math.atan2(ex[1], ex[0]) == pytest.approx(math.radians(30))


def test_pose_to_transform_maps_child_points_into_the_parent():
    rng = np.random.default_rng(7)
    rot, p = Rotation.random(random_state=rng), rng.normal(size=3)
    tf = pose_to_transform("world", "head", 1_500_000_000, p, 3.0 * rot.as_quat())  # not normalised
    assert (tf.parent, tf.child, tf.stamp_ns) == ("world", "head", 1_500_000_000)
    assert np.linalg.norm(tf.rotation) == pytest.approx(1.0)
    x_child = rng.normal(size=(5, 3))
    got = Rotation.from_quat(tf.rotation).apply(x_child) + np.array(tf.translation)
    assert got == pytest.approx(rot.apply(x_child) + p)


def test_planar_pose_is_a_rotation_about_z():
    tf = planar_pose_to_transform("world", "head", 0, 1.0, -2.0, 2.5, z=0.03)
    assert tf.translation == pytest.approx((1.0, -2.0, 0.03))
    assert Rotation.from_quat(tf.rotation).as_euler("xyz")[2] == pytest.approx(2.5)


@pytest.mark.parametrize(("p", "q"), [([math.nan, 0, 0], [0, 0, 0, 1]), ([0, 0, 0], [0, 0, 0, 0]),
                                      ([0, 0, 0], [math.inf, 0, 0, 1])])
def test_bad_poses_are_refused(p, q):
    with pytest.raises(FrameError, match="pose"):
        pose_to_transform("world", "head", 0, np.array(p, float), np.array(q, float))
