"""Stall detection: no progress along the path for a time or over a travelled distance is ``stalled``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.following.follower import (
    FollowerConfig,
    FollowerError,
    FollowerStatus,
    PathFollower,
    StallDetector,
    path_coordinate,
)


def test_path_coordinate_is_the_arc_length_to_the_projection():
    path = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 3.0]])
    assert path_coordinate(path, 0, np.array([0.5, 0.7])) == pytest.approx(0.5)
    assert path_coordinate(path, 1, np.array([2.4, 1.0])) == pytest.approx(2.0 + 1.0)
    # clipped to the branch: behind its start counts as its start, beyond its end as its end
    assert path_coordinate(path, 1, np.array([1.0, -1.0])) == pytest.approx(2.0)
    assert path_coordinate(path, 1, np.array([2.0, 9.0])) == pytest.approx(5.0)


def test_stall_detector_time_window_transition_by_transition():
    d = StallDetector(time=10.0, progress=0.05, distance=0.0)
    assert not d.update(0.0, (0.0, 0.0), 0.0)  # first sample: the window starts
    assert not d.update(5.0, (0.0, 0.0), 0.04)  # less than the progress step: no new best
    assert d.best == 0.0 and d.t_best == 0.0
    assert not d.update(6.0, (0.0, 0.0), 0.05)  # a step of 0.05 m: progress, the window restarts at 6 s
    assert (d.best, d.t_best) == (0.05, 6.0)
    assert not d.update(15.9, (0.0, 0.0), 0.09)  # 9.9 s without a further step
    assert d.update(16.0, (0.0, 0.0), 0.09)  # 10 s: stalled
    assert "10.0 s" in d.reason and "0.05 m" in d.reason
    d.reset()
    assert not d.update(100.0, (0.0, 0.0), 0.0) and d.reason == ""  # reset: a new window


def test_stall_detector_distance_catches_an_orbit_before_the_time_window():
    d = StallDetector(time=1000.0, progress=0.05, distance=1.0)
    r, n = 0.3, 200  # a circle of 0.3 m radius around a peg: 1.88 m of track per turn
    stalled_at = None
    for k in range(n + 1):
        a = 2 * math.pi * k / n
        if d.update(0.1 * k, (r * math.cos(a), r * math.sin(a)), 0.0):
            stalled_at = k
            break
    # Travel counts in chords of at least 0.05 m: 6 samples (chord 2 r sin(6 pi / n) = 0.0565 m),
    # and the first count that reaches 1 m is the 18th.
    per = math.ceil(0.05 / (2 * r * math.sin(math.pi / n)))
    chord = 2 * r * math.sin(per * math.pi / n)
    counts = math.ceil(1.0 / chord)
    assert stalled_at == per * counts
    assert d.travelled == pytest.approx(counts * chord)
    assert "travelled" in d.reason


def test_stall_detector_ignores_measurement_noise_at_rest():
    rng = np.random.default_rng(3)
    d = StallDetector(time=1e9, progress=0.05, distance=0.1)
    for k in range(20000):  # 5 mm noise per coordinate (a yaw jitter carried 0.63 m out): no travel
        assert not d.update(0.05 * k, rng.normal(0.0, 0.005, 2), 0.0)
    assert d.travelled == 0.0


def test_stall_detector_never_fires_while_progress_continues():
    d = StallDetector(time=5.0, progress=0.05, distance=0.5)  # 0.05 m takes 2.5 s here
    for k in range(2000):  # 0.02 m/s along the path for 200 s, with a lateral swing of 0.1 m
        t = 0.1 * k
        x = 0.02 * t
        assert not d.update(t, (x, 0.1 * math.sin(t)), x)


def test_follower_reports_stalled_with_a_zero_command_when_orbiting():
    cfg = FollowerConfig(stuck_speed=0.01, stuck_time=1000.0, stall_time=1000.0, stall_progress=0.05,
                         stall_distance=1.0)
    fol = PathFollower(cfg)
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    out = None
    for k in range(400):  # moving at 0.1 m/s around a circle about x = 1: never beyond x = 1.3
        a = 0.1 * 0.1 * k / 0.3
        out = fol.update(0.1 * k, (1.0 + 0.3 * math.cos(a), 0.3 * math.sin(a), a + math.pi / 2))
        if out.status is not FollowerStatus.FOLLOWING:
            break
    assert out is not None and out.status is FollowerStatus.STALLED
    assert (out.linear, out.angular, out.head_offset) == (0.0, 0.0, 0.0)
    a, b = fol.blocked_branch
    np.testing.assert_allclose([a, b], [[0.0, 0.0], [5.0, 0.0]])
    assert "travelled" in fol.stop_reason
    # it stays stopped until a new plan comes
    assert fol.update(100.0, (1.0, 0.0, 0.0)).status is FollowerStatus.STALLED
    fol.set_path(np.array([[1.0, 0.0], [1.0, 5.0]]))
    assert fol.update(101.0, (1.0, 0.0, 0.0)).status is FollowerStatus.FOLLOWING


def test_follower_stall_window_restarts_after_a_dropout():
    fol = PathFollower(FollowerConfig(stuck_speed=0.0, stall_time=5.0, stall_distance=0.0))
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    assert fol.update(0.0, (0.0, 0.0, 0.0)).status is FollowerStatus.FOLLOWING
    assert fol.update(4.0, None).status is FollowerStatus.NO_POSE
    assert fol.update(8.0, (0.0, 0.0, 0.0)).status is FollowerStatus.FOLLOWING  # window restarted at 8 s
    assert fol.update(12.9, (0.0, 0.0, 0.0)).status is FollowerStatus.FOLLOWING
    assert fol.update(13.0, (0.0, 0.0, 0.0)).status is FollowerStatus.STALLED


def test_stall_settings_are_checked():
    with pytest.raises(FollowerError, match="stall_time"):
        FollowerConfig(stall_time=0.0)
    with pytest.raises(FollowerError, match="stall_distance"):
        FollowerConfig(stall_distance=-1.0)
