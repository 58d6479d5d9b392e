"""Head pose from motion capture: rigid fit of three markers, rigid-body poses, outlier/dropout filter."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from snake_core.following.head_pose import (
    HeadPoseFilter,
    HeadPoseFilterConfig,
    MocapError,
    fit_markers,
    pose_from_rigid_body,
)

TEMPLATE = np.array([[0.04, 0.0, 0.03], [-0.03, 0.025, 0.03], [-0.03, -0.02, 0.035]])  # m, head frame


@pytest.mark.parametrize("seed", range(5))
def test_rigid_fit_recovers_a_known_pose_from_noisy_markers(seed):
    rng = np.random.default_rng(seed)
    rot = Rotation.from_euler("zyx", [rng.uniform(-np.pi, np.pi), rng.uniform(-0.2, 0.2), rng.uniform(-0.2, 0.2)])
    p = rng.uniform(-2, 2, 3)
    noise = 0.0005  # m
    measured = rot.apply(TEMPLATE) + p + rng.normal(0, noise, TEMPLATE.shape)
    fit = fit_markers(TEMPLATE, measured)
    assert np.linalg.norm(fit.translation - p) < 5 * noise
    assert (fit.rotation * rot.inv()).magnitude() < 0.05
    x, y, yaw = fit.planar()
    ex = rot.apply([1, 0, 0])
    assert abs(math.remainder(yaw - math.atan2(ex[1], ex[0]), 2 * math.pi)) < 0.05
    assert (x, y) == pytest.approx((p[0], p[1]), abs=5 * noise)
    assert fit.rms < 3 * noise


def test_rigid_fit_is_least_squares_no_perturbation_does_better():
    rng = np.random.default_rng(11)
    measured = Rotation.from_euler("z", 0.7).apply(TEMPLATE) + np.array([1, 2, 0]) + rng.normal(0, 0.002, (3, 3))
    fit = fit_markers(TEMPLATE, measured)

    def cost(rot, t):
        return float(((rot.apply(TEMPLATE) + t - measured) ** 2).sum())

    best = cost(fit.rotation, fit.translation)
    for _ in range(200):
        d_rot = Rotation.from_rotvec(rng.normal(0, 0.01, 3))
        assert cost(d_rot * fit.rotation, fit.translation + rng.normal(0, 0.001, 3)) >= best - 1e-15


def test_collinear_markers_are_refused():
    line = np.array([[0, 0, 0], [0.05, 0, 0], [0.1, 0, 0]], dtype=float)
    with pytest.raises(MocapError, match="collinear"):
        fit_markers(line, line)


def test_rigid_body_pose_gives_yaw_of_the_head_x_axis():
    q = Rotation.from_euler("z", 2.5).as_quat()  # x, y, z, w
    assert pose_from_rigid_body([1.0, -2.0, 0.1], q) == pytest.approx((1.0, -2.0, 2.5))
    with pytest.raises(MocapError):
        pose_from_rigid_body([math.nan, 0, 0], q)


def test_filter_ignores_nan_rejects_jumps_and_times_out():
    f = HeadPoseFilter(HeadPoseFilterConfig(max_speed=0.5, timeout=0.3))
    assert f.offer(0.0, (0.0, 0.0, 0.0))
    assert not f.offer(0.01, (math.nan, 0.0, 0.0))
    assert f.rejected_nan == 1
    assert f.offer(0.1, (0.04, 0.0, 0.0))  # 0.4 m/s: plausible
    assert not f.offer(0.2, (1.0, 0.0, 0.0))  # 9.6 m/s: an outlier (marker swap)
    assert f.rejected_jump == 1
    assert f.current(0.25) == (0.04, 0.0, 0.0)
    assert f.current(0.45) is None  # 0.35 s since the last accepted sample
    # after a dropout, a sample consistent with max speed over the gap is accepted again
    assert f.offer(1.0, (0.4, 0.0, 0.0))
    assert f.current(1.0) == (0.4, 0.0, 0.0)


def test_filter_markers_with_nan_or_wrong_order_are_rejected():
    f = HeadPoseFilter()
    good = Rotation.from_euler("z", 0.3).apply(TEMPLATE) + np.array([0.5, 0.5, 0.0])
    assert f.offer_markers(0.0, TEMPLATE, good)
    bad = good.copy()
    bad[1, 0] = math.nan
    assert not f.offer_markers(0.01, TEMPLATE, bad)
    swapped = good[[1, 0, 2]]  # two markers swapped: the fit residual is large
    assert not f.offer_markers(0.02, TEMPLATE, swapped)
    assert f.rejected_fit == 1
    assert f.pose == pytest.approx(fit_markers(TEMPLATE, good).planar())
