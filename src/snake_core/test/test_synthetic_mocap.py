"""Synthetic motion capture: noise statistics, outliers, latency, dropout rate and bursts (seeded)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.transform import Rotation

from snake_core.following.synthetic_mocap import MocapConfig, MocapConfigError, MocapModel

_N = 20000  # samples per statistical test
_RATE_HZ = 100.0
_DT = 1.0 / _RATE_HZ


def _make_truth(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A moving true pose at k * _DT: positions, quaternions (w, x, y, z), three markers each."""
    t = np.arange(n) * _DT
    pos = np.stack([0.1 * t, np.sin(t), np.full(n, 0.05)], axis=1)
    rot = Rotation.from_rotvec(np.stack([0.2 * np.sin(t), np.full(n, 0.1), t], axis=1))
    q = rot.as_quat()  # x, y, z, w
    body = np.array([[0.01, 0.0, 0.02], [0.05, 0.01, 0.02], [0.05, -0.01, 0.02]])
    markers = pos[:, None, :] + np.einsum("nij,mj->nmi", rot.as_matrix(), body)
    return pos, np.concatenate([q[:, 3:], q[:, :3]], axis=1), markers


_POS, _QUAT, _MARKERS = _make_truth(_N)


def _truth(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The true pose of sample k."""
    return _POS[k], _QUAT[k], _MARKERS[k]


def _run(cfg: MocapConfig, n: int, seed: int = 7) -> list:
    model = MocapModel(cfg, seed)
    out = []
    for k in range(n):
        model.capture(k * _DT, *_truth(k))
        out += model.release(k * _DT)
    return out


def test_noise_statistics_match_the_configuration():
    sigma_p, sigma_r = 0.002, 0.01
    samples = _run(MocapConfig(position_noise_m=sigma_p, orientation_noise_rad=sigma_r, rate_hz=_RATE_HZ), _N)
    assert len(samples) == _N and all(s.valid for s in samples)
    k = np.array([round(s.capture_time / _DT) for s in samples])
    dp = np.array([s.position for s in samples]) - _POS[k]
    dm = np.array([s.markers for s in samples]) - _MARKERS[k]
    # Independent: the rotation taking the true attitude to the measured one, as a rotation vector.
    qm = np.array([s.quaternion for s in samples])
    meas = Rotation.from_quat(np.concatenate([qm[:, 1:], qm[:, :1]], axis=1))
    true = Rotation.from_quat(np.concatenate([_QUAT[k, 1:], _QUAT[k, :1]], axis=1))
    dr = (meas * true.inv()).as_rotvec()
    np.testing.assert_allclose(np.linalg.norm(qm, axis=1), 1.0, atol=1e-12)
    markers_flat = dm.reshape(-1, 3)
    # Std of a sample std is sigma / sqrt(2 N) (< 0.5 % here); 3 % tolerance.
    for arr, sigma in ((dp, sigma_p), (markers_flat, sigma_p), (dr, sigma_r)):
        np.testing.assert_allclose(arr.std(axis=0), sigma, rtol=0.03)
        np.testing.assert_allclose(arr.mean(axis=0), 0.0, atol=4 * sigma / np.sqrt(len(arr)))
    # Markers are perturbed independently of each other and of the body origin.
    assert abs(np.corrcoef(dp[:, 0], dm[:, 0, 0])[0, 1]) < 0.05


def test_zero_noise_is_exact():
    samples = _run(MocapConfig(rate_hz=_RATE_HZ), 50)
    for s in samples:
        pos, q, markers = _truth(round(s.capture_time / _DT))
        np.testing.assert_array_equal(s.position, pos)
        np.testing.assert_allclose(s.quaternion, q if q[0] >= 0 else -q, atol=1e-15)
        np.testing.assert_array_equal(s.markers, markers)


@pytest.mark.parametrize("latency", [0.0, 0.03, 0.25])
def test_latency_delays_by_the_configured_amount(latency):
    model = MocapModel(MocapConfig(latency_s=latency, rate_hz=_RATE_HZ), 1)
    released: list[tuple[float, object]] = []
    for k in range(200):
        model.capture(k * _DT, *_truth(k))
        released += [(k * _DT, s) for s in model.release(k * _DT)]
    lag = round(latency / _DT)
    assert len(released) == 200 - lag
    for t_release, s in released:
        assert t_release - s.capture_time == pytest.approx(latency, abs=1e-9)
        # The content is the truth at the capture time, latency before the release.
        np.testing.assert_array_equal(s.position, _truth(round((t_release - latency) / _DT))[0])
    assert model.pending == lag


def _runs_of_lost(valid: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive lost samples."""
    lost = np.concatenate([[0], (~valid).astype(int), [0]])
    edges = np.flatnonzero(np.diff(lost))
    return edges[1::2] - edges[::2]


@pytest.mark.parametrize(("p", "burst_s"), [(0.05, 0.0), (0.02, 0.1), (0.2, 0.0)])
def test_dropouts_happen_at_the_configured_rate(p, burst_s):
    cfg = MocapConfig(dropout_probability=p, dropout_burst_s=burst_s, rate_hz=_RATE_HZ)
    samples = _run(cfg, _N, seed=11)
    valid = np.array([s.valid for s in samples])
    lost = 1.0 - valid.mean()
    b = max(1.0, burst_s * _RATE_HZ)
    expected = p * b / (p * b + 1 - p)  # renewal argument, written out independently of the model
    assert expected == pytest.approx(cfg.expected_loss_fraction)
    # Tolerance: several stds of the loss fraction of ~N / (B + 1/p) independent bursts.
    n_bursts = _N / (b + (1 - p) / p)
    assert lost == pytest.approx(expected, abs=4 * b * np.sqrt(n_bursts) / _N + 0.002)
    runs = _runs_of_lost(valid)
    if burst_s == 0.0:
        # Single-sample dropouts are independent: runs of length k occur with P = p^(k-1) (1 - p).
        assert runs.mean() == pytest.approx(1.0 / (1.0 - p), rel=0.1)
    else:
        # Bursts of mean B samples; back-to-back bursts merge only with probability ~p.
        assert runs.mean() == pytest.approx(b, rel=0.15)
    for s in samples:
        if not s.valid:
            assert np.isnan(s.position).all() and np.isnan(s.quaternion).all() and np.isnan(s.markers).all()


def test_a_seed_reproduces_and_dropouts_do_not_shift_the_noise():
    noisy = MocapConfig(position_noise_m=0.001, orientation_noise_rad=0.01, rate_hz=_RATE_HZ)
    a, b = _run(noisy, 300, seed=3), _run(noisy, 300, seed=3)
    assert all(np.array_equal(x.position, y.position) for x, y in zip(a, b, strict=True))
    c = _run(MocapConfig(position_noise_m=0.001, orientation_noise_rad=0.01, rate_hz=_RATE_HZ), 300, seed=4)
    assert not np.array_equal(a[0].position, c[0].position)
    # Dropouts and outliers switched on: every sample kept and not displaced is the one of the plain run.
    busy = MocapConfig(position_noise_m=0.001, orientation_noise_rad=0.01, dropout_probability=0.1,
                       dropout_burst_s=0.05, outlier_probability=0.1, rate_hz=_RATE_HZ)
    d = _run(busy, 300, seed=3)
    valid = [k for k, s in enumerate(d) if s.valid]
    assert 0 < len(valid) < 300
    same = [k for k in valid if np.linalg.norm(d[k].position - a[k].position) < 1e-12]
    moved = [k for k in valid if k not in same]
    assert moved  # some outliers, each exactly one jump (0.5 m by default) from the plain sample
    for k in moved:
        np.testing.assert_allclose(np.linalg.norm(d[k].markers - a[k].markers, axis=1), busy.outlier_jump_m,
                                   rtol=1e-12)
    for k in same:
        np.testing.assert_array_equal(d[k].markers, a[k].markers)
        np.testing.assert_array_equal(d[k].quaternion, a[k].quaternion)
    # ... and the dropout pattern does not depend on the noise and outlier settings.
    e = _run(MocapConfig(dropout_probability=0.1, dropout_burst_s=0.05, rate_hz=_RATE_HZ), 300, seed=3)
    assert [s.valid for s in d] == [s.valid for s in e]


@pytest.mark.parametrize(("q", "p"), [(0.05, 0.0), (0.1, 0.05)])
def test_outliers_are_whole_frame_jumps_at_the_configured_rate(q, p):
    sigma, jump = 0.001, 0.3
    cfg = MocapConfig(position_noise_m=sigma, outlier_probability=q, outlier_jump_m=jump, dropout_probability=p,
                      dropout_burst_s=0.05, rate_hz=_RATE_HZ)
    model = MocapModel(cfg, 21)
    samples = []
    for k in range(_N):
        model.capture(k * _DT, *_truth(k))
        samples += model.release(k * _DT)
    kept = [s for s in samples if s.valid]
    k = np.array([round(s.capture_time / _DT) for s in kept])
    dp = np.array([s.position for s in kept]) - _POS[k]
    dm = np.array([s.markers for s in kept]) - _MARKERS[k]
    # An outlier is 0.3 m off, a plain sample within a few mm: the two are told apart by distance.
    far = np.linalg.norm(dp[:, :2], axis=1) > jump / 2
    assert model.outliers == far.sum()
    # Rate: a fraction q of the kept samples, independently of the dropouts (binomial, 4 sigma).
    assert far.mean() == pytest.approx(q, abs=4 * np.sqrt(q * (1 - q) / len(kept)))
    assert far.sum() / _N == pytest.approx(cfg.expected_outlier_fraction, rel=0.15)
    # Whole frame: origin and every marker move by one horizontal vector of length outlier_jump_m.
    shift = dp[far]
    np.testing.assert_allclose(np.linalg.norm(shift[:, :2], axis=1), jump, atol=6 * sigma)
    assert np.abs(shift[:, 2]).max() < 6 * sigma
    np.testing.assert_allclose(dm[far] - shift[:, None, :], 0.0, atol=9 * sigma)
    assert np.linalg.norm(dp[~far], axis=1).max() < 8 * sigma
    # Direction uniform on the circle (Kolmogorov-Smirnov against U[0, 2 pi)).
    angle = np.mod(np.arctan2(shift[:, 1], shift[:, 0]), 2 * np.pi)
    assert stats.kstest(angle / (2 * np.pi), "uniform").pvalue > 1e-3
    # Independent from sample to sample: outlier pairs among consecutive kept samples occur at q^2.
    consecutive = np.diff(k) == 1
    pairs = (far[:-1] & far[1:])[consecutive]
    assert pairs.mean() == pytest.approx(q * q, abs=5 * np.sqrt(q * q / consecutive.sum()))


@pytest.mark.parametrize(("field", "value"), [("position_noise_m", -1.0), ("latency_s", float("nan")),
                                              ("dropout_probability", 1.0), ("rate_hz", 0.0),
                                              ("outlier_probability", 1.5), ("outlier_probability", -0.1),
                                              ("outlier_jump_m", -0.2), ("outlier_jump_m", float("inf"))])
def test_bad_parameters_name_the_field(field, value):
    with pytest.raises(MocapConfigError, match=field):
        MocapConfig(**{field: value})
