"""Synthetic motion capture: noise statistics, latency, dropout rate and bursts (seeded)."""

from __future__ import annotations

import numpy as np
import pytest
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


@pytest.mark.parametrize(("field", "value"), [("position_noise_m", -1.0), ("latency_s", float("nan")),
                                              ("dropout_probability", 1.0), ("rate_hz", 0.0)])
def test_bad_parameters_name_the_field(field, value):
    with pytest.raises(MocapConfigError, match=field):
        MocapConfig(**{field: value})
