"""Path lengths with the measurement noise removed, against closed-form paths and known noise."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.analysis.smoothing import noise_sigma, path_length, smooth_path
from snake_core.errors import SnakeCoreError

_SIGMA = 5e-4  # m, per-axis noise of the synthetic motion capture (the twin's default)
_RATES_HZ = (50.0, 100.0, 200.0, 400.0)


def _undulation(t: np.ndarray) -> np.ndarray:
    """A head crawling at 0.08 m/s with a 5 cm, 0.5 Hz side-to-side sweep, m."""
    return np.column_stack([0.08 * t, 0.05 * np.sin(np.pi * t)])


def _true_length(duration_s: float) -> float:
    """Arc length of :func:`_undulation` by quadrature of its speed (an oracle apart from the module)."""
    from scipy.integrate import quad

    return float(quad(lambda t: np.hypot(0.08, 0.05 * np.pi * np.cos(np.pi * t)), 0.0, duration_s, limit=400)[0])


@pytest.mark.parametrize("rate", _RATES_HZ)
def test_a_still_robot_travels_no_further_than_its_net_displacement_and_the_noise(rate):
    rng = np.random.default_rng(int(rate))
    t = np.arange(0.0, 29.0, 1.0 / rate)
    creep = np.column_stack([0.001 * t, np.zeros_like(t)])  # 1 mm/s: 29 mm net
    r = smooth_path(t, creep + rng.normal(0.0, _SIGMA, (len(t), 2)))
    assert r.noise_sigma_m == pytest.approx(_SIGMA, rel=0.1)
    assert r.length_m <= r.displacement_m + 3 * r.noise_sigma_m
    assert r.displacement_m == pytest.approx(0.029, abs=3 * _SIGMA)
    assert r.raw_length_m > 30 * r.length_m  # what the polyline through the samples "travels"


def test_the_path_length_does_not_grow_with_the_sample_rate():
    truth = _true_length(30.0)
    lengths, raw = [], []
    for k, rate in enumerate(_RATES_HZ):
        t = np.arange(0.0, 30.0 + 1e-9, 1.0 / rate)
        r = smooth_path(t, _undulation(t) + np.random.default_rng(k).normal(0.0, _SIGMA, (len(t), 2)))
        lengths.append(r.length_m)
        raw.append(r.raw_length_m)
    assert lengths == pytest.approx([truth] * len(lengths), rel=0.01)
    assert raw[-1] > 2 * truth  # the polyline at 400 Hz: noise counted as distance


def test_noise_free_samples_are_used_as_they_are():
    t = np.arange(0.0, 10.0, 0.02)
    r = smooth_path(t, _undulation(t))
    assert r.lam is None and r.length_m == r.raw_length_m == path_length(_undulation(t))


def test_uneven_sampling_and_repeated_times_are_handled():
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0.0, 20.0, 3000))
    t = np.concatenate([t, t[:10]])  # ten samples received twice
    t.sort()
    r = smooth_path(t, _undulation(t) + rng.normal(0.0, _SIGMA, (len(t), 2)))
    assert r.noise_sigma_m == pytest.approx(_SIGMA * np.sqrt(np.mean([1.0] * 2990 + [0.5] * 10)), rel=0.15)
    assert r.length_m == pytest.approx(_true_length(float(t[-1])) - _true_length(float(t[0])), rel=0.02)


def test_noise_sigma_of_white_noise_on_a_line():
    t = np.linspace(0.0, 10.0, 5001)
    y = 0.3 * t + np.random.default_rng(0).normal(0.0, 2e-3, len(t))
    assert noise_sigma(t, y) == pytest.approx(2e-3, rel=0.05)


@pytest.mark.parametrize(("t", "xy", "match"), [
    (np.arange(4.0), np.zeros((3, 2)), "expected times"),
    (np.array([0.0, 2.0, 1.0]), np.zeros((3, 2)), "non-decreasing"),
])
def test_bad_input_is_refused(t, xy, match):
    with pytest.raises(SnakeCoreError, match=match):
        smooth_path(t, xy)


def test_whole_frame_jumps_of_the_motion_capture_are_left_out():
    rng = np.random.default_rng(7)
    t = np.arange(0.0, 30.0, 0.01)
    xy = _undulation(t) + rng.normal(0.0, _SIGMA, (len(t), 2))
    jumps = rng.choice(len(t), size=30, replace=False)  # 1 % of the frames moved by 0.5 m (synthetic_mocap's jumps)
    angle = rng.uniform(0.0, 2 * np.pi, len(jumps))
    xy[jumps] += 0.5 * np.column_stack([np.cos(angle), np.sin(angle)])
    r = smooth_path(t, xy)
    assert r.outliers == 30
    assert r.length_m == pytest.approx(_true_length(float(t[-1])), rel=0.01)
    assert r.raw_length_m > 30 * 2 * 0.5  # each jump: there and back
