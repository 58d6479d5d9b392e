"""Recorded-session analysis math against independent computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from snake_core.analysis import body_heading, drive_twist
from snake_core.analysis.session import (
    body_centres_headings,
    chain_points_batch,
    command_segments,
    cross_track,
    segment_twists,
    sim_time_map,
    tracking_errors,
)
from snake_core.kinematics import chain_points
from snake_core.robot import load_robot


@pytest.mark.parametrize("robot_name", ["tsnake", "wheeled_snake"])
def test_batched_forward_kinematics_matches_the_scipy_chain(robot_name):
    robot = load_robot(robot_name)
    rng = np.random.default_rng(3)
    n = 7
    pos = rng.normal(0, 1, (n, 3))
    quat = Rotation.random(n, random_state=5).as_quat()[:, [3, 0, 1, 2]]
    q = rng.uniform(-1.2, 1.2, (n, len(robot.joints)))
    batch = chain_points_batch(robot, pos, quat, q)
    for k in range(n):
        np.testing.assert_allclose(batch[k], chain_points(robot, pos[k], quat[k], q[k]), atol=1e-12)


def test_batched_headings_match_body_heading():
    rng = np.random.default_rng(8)
    pts = np.cumsum(rng.normal(0, 0.1, (20, 12, 2)) + np.array([0.1, 0.03]), axis=1)
    centre, heading = body_centres_headings(pts)
    np.testing.assert_allclose(centre, pts.mean(axis=1))
    expected = np.unwrap([body_heading(p) for p in pts])
    np.testing.assert_allclose(np.mod(heading - expected + np.pi, 2 * np.pi) - np.pi, 0.0, atol=1e-12)


def test_command_segments_split_on_changes_and_on_deadman_gaps():
    t = np.r_[np.arange(0, 2, 0.05), np.arange(2, 4, 0.05), np.arange(6, 7, 0.05)]
    v = np.r_[np.full(40, 0.1), np.full(40, 0.0), np.full(20, 0.1)]
    w = np.r_[np.zeros(40), np.full(40, 0.2), np.zeros(20)]
    segs = command_segments(t, v, w, timeout_s=0.5, end_s=8.0)
    got = [(s.label, s.v_cmd, s.omega_cmd, round(s.start_s, 6), round(s.end_s, 6)) for s in segs]
    assert got == [("translate", 0.1, 0.0, 0.0, 2.0), ("turn in place", 0.0, 0.2, 2.0, 4.45),
                   ("stop", 0.0, 0.0, 4.45, 6.0), ("translate", 0.1, 0.0, 6.0, 7.45), ("stop", 0.0, 0.0, 7.45, 8.0)]


def test_segment_twist_of_an_exact_arc():
    t = np.linspace(0, 10, 501)
    v, w, psi0 = 0.06, 0.12, 0.3
    psi = psi0 + w * t
    theta = psi + np.pi / 2  # T-Snake: forward is the body axis turned by +90 deg
    centre = np.column_stack([(v / w) * (np.sin(theta) - np.sin(theta[0])),
                              -(v / w) * (np.cos(theta) - np.cos(theta[0]))])
    segs = command_segments(np.arange(0, 10, 0.05), np.full(200, v), np.full(200, w), 0.5, end_s=10.0)
    (row,) = segment_twists(segs, t, centre, psi, 0.4, np.pi / 2)
    # Each chord (length 2 (v/w) sin(w dt/2)) is projected on the heading at its start,
    # cos(w dt/2) off the chord: the measured speed is v sin(w dt) / (w dt).
    dt = t[1] - t[0]
    assert row["v"] == pytest.approx(v * np.sin(w * dt) / (w * dt), rel=1e-9)
    assert row["omega"] == pytest.approx(w, rel=1e-12)
    # The same with drive_twist directly on the measured part.
    keep = t >= 4.0
    assert (row["v"], row["omega"]) == pytest.approx(drive_twist(t[keep], centre[keep], psi[keep]))


def test_tracking_error_and_lag_of_a_delayed_sine():
    t = np.arange(0, 20, 0.02)
    a, f, lag_steps = 0.3, 0.5, 3
    cmd = a * np.sin(2 * np.pi * f * t)
    state = a * np.sin(2 * np.pi * f * (t - lag_steps * 0.02))
    (res,) = tracking_errors(t, cmd[:, None], t, state[:, None], max_lag_s=0.2, lag_step_s=0.01)
    assert res.rms_rad == pytest.approx(np.sqrt(np.mean((state - cmd) ** 2)))
    assert res.max_rad == pytest.approx(np.max(np.abs(state - cmd)))
    assert res.lag_s == pytest.approx(0.06)
    assert res.rms_at_lag_rad == pytest.approx(0.0, abs=1e-12)


def test_cross_track_against_brute_force():
    rng = np.random.default_rng(1)
    path = np.cumsum(rng.normal(0, 1, (6, 2)), axis=0)
    pts = rng.normal(0, 2, (50, 2))
    dense = np.concatenate([np.linspace(a, b, 20001) for a, b in itertools.pairwise(path)])
    brute = np.min(np.linalg.norm(pts[:, None] - dense[None], axis=2), axis=1)
    np.testing.assert_allclose(cross_track(path, pts), brute, atol=1e-3)


def test_sim_time_map_follows_a_clock_twice_as_fast():
    rx = np.arange(0, 10, 0.1)
    clock = 100 + 2 * rx
    q = np.array([-1.0, 0.05, 5.0, 12.0])
    np.testing.assert_allclose(sim_time_map(rx, clock, q), [99.0, 100.1, 110.0, 100 + 2 * 9.9 + (12 - 9.9)])


def test_short_or_sparse_segments_are_flagged_and_left_out_of_the_means():
    from snake_core.analysis.session import flag_short_segments

    rows = [{"v_cmd": 0.1, "omega_cmd": 0.0, "v": 0.09, "omega": 0.01, "start_s": 0.0, "end_s": 5.0, "samples": 150},
            {"v_cmd": 0.0, "omega_cmd": 0.0, "v": -0.367, "omega": 0.605, "start_s": 5.0, "end_s": 5.1, "samples": 3},
            {"v_cmd": 0.2, "omega_cmd": 0.5, "v": 0.22, "omega": 0.45, "start_s": 5.1, "end_s": 9.0, "samples": 5},
            {"v_cmd": 0.0, "omega_cmd": 0.2, "v": 0.01, "omega": 0.25, "start_s": 9.0, "end_s": 12.0, "samples": 90}]
    means = flag_short_segments(rows, min_duration_s=1.0, min_samples=10)
    assert [r["measured"] for r in rows] == [True, False, False, True]
    assert "shorter than 1.00 s" in rows[1]["flag"] and "3 samples" in rows[1]["flag"]
    assert "5 samples, fewer than 10" == rows[2]["flag"]
    assert rows[1]["v"] is None and rows[2]["omega"] is None
    assert means["measured"] == 2 and means["flagged"] == 2
    assert means["v_error_mean_m_s"] == pytest.approx(((0.09 - 0.1) + 0.01) / 2)
    assert means["omega_error_abs_mean_rad_s"] == pytest.approx((0.01 + 0.05) / 2)
    assert flag_short_segments([], 1.0, 10)["v_error_mean_m_s"] is None
