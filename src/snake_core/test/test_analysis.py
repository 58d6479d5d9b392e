"""Trajectory analysis: circle fit, heading, Eq. 10 calibration fit, against known truths."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.analysis import body_heading, fit_circle, fit_reduction
from snake_core.errors import SnakeCoreError
from snake_core.gait.reduction import twist_from_rates


def test_circle_fit_recovers_a_noisy_arc():
    rng = np.random.default_rng(4)
    t = rng.uniform(0.3, 2.2, 200)  # an arc, not the full circle
    xy = np.column_stack([1.5 + 0.7 * np.cos(t), -0.4 + 0.7 * np.sin(t)]) + rng.normal(0, 0.002, (200, 2))
    fit = fit_circle(xy)
    assert fit.centre == pytest.approx([1.5, -0.4], abs=0.01)
    assert fit.radius == pytest.approx(0.7, abs=0.01)
    assert fit.rms_residual == pytest.approx(0.002, rel=0.3)


def test_circle_fit_rejects_collinear_points():
    with pytest.raises(SnakeCoreError):
        fit_circle(np.column_stack([np.arange(5.0), np.zeros(5)]))


@pytest.mark.parametrize("yaw", [0.0, 1.0, -2.5, 3.1])
def test_body_heading_points_head_to_tail(yaw):
    s = np.linspace(0, 1.2, 19)
    wiggle = 0.05 * np.cos(2 * np.pi * 2 * (s - 0.6) / 1.2)  # even about the middle: axis stays exact
    local = np.column_stack([s, wiggle])
    rot = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    heading = body_heading(local @ rot.T + [3.0, -1.0])
    assert np.angle(np.exp(1j * (heading - yaw))) == pytest.approx(0.0, abs=0.02)


def test_reduction_fit_recovers_eq10_coefficients():
    k, d = 0.047, 0.66
    runs = [(2.0, 2.0), (1.0, 1.0), (2.0, -2.0), (-1.5, 1.5), (0.0, 2.0), (1.0, 3.0)]
    oh, ot = np.array(runs).T
    v, w = np.array([twist_from_rates(a, b, k, d) for a, b in runs]).T
    fit = fit_reduction(oh, ot, v, w)
    assert (fit.k, fit.d_prime) == pytest.approx((k, d))
    assert fit.v_rms_error < 1e-12 and fit.omega_rms_error < 1e-12
    with pytest.raises(SnakeCoreError, match="turning"):
        fit_reduction(np.ones(2), np.ones(2), np.ones(2), np.zeros(2))


def test_drive_twist_of_a_known_unicycle():
    from snake_core.analysis import drive_twist

    t = np.linspace(0, 10, 501)
    v, w = 0.07, 0.05
    heading = -np.pi / 2 + w * t  # body axis; forward = heading + 90 deg = yaw of the drive
    yaw = heading + np.pi / 2
    xy = np.column_stack([np.cumsum(np.r_[0, np.diff(t)] * v * np.cos(yaw)),
                          np.cumsum(np.r_[0, np.diff(t)] * v * np.sin(yaw))])
    got_v, got_w = drive_twist(t, xy, heading)
    assert got_v == pytest.approx(v, rel=1e-3) and got_w == pytest.approx(w)
