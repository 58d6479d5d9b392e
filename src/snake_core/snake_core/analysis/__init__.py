"""Trajectory analysis for experiments and bag replay: circle fits, body heading, calibration.

Pure numpy/scipy; used by ``snake experiment`` on simulated runs and on recorded bags.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from snake_core.errors import SnakeCoreError


@dataclass(frozen=True)
class CircleFit:
    """Least-squares circle through planar points.

    Attributes:
        centre: (x, y), m.
        radius: m.
        rms_residual: RMS of |p - centre| - radius, m.
    """

    centre: np.ndarray
    radius: float
    rms_residual: float


def fit_circle(xy: np.ndarray) -> CircleFit:
    """Geometric least-squares circle fit (Kasa's algebraic fit refined by Levenberg-Marquardt).

    Args:
        xy: Points, shape (n, 2), n >= 3, m.

    Raises:
        SnakeCoreError: Fewer than three points, or collinear points.
    """
    p = np.asarray(xy, dtype=float)
    if p.ndim != 2 or p.shape[1] != 2 or len(p) < 3:
        raise SnakeCoreError(f"circle fit needs (n >= 3, 2) points, got shape {p.shape}")
    spread = np.linalg.svd(p - p.mean(axis=0), compute_uv=False)
    if spread[-1] <= 1e-9 * max(spread[0], 1e-300):
        raise SnakeCoreError("circle fit: points are collinear or coincident")
    a = np.column_stack([2 * p, np.ones(len(p))])
    b = (p**2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(a, b, rcond=None)
    c0 = sol[:2]
    r0 = np.sqrt(max(sol[2] + c0 @ c0, 0.0))
    if not np.isfinite(r0) or r0 == 0:
        raise SnakeCoreError("circle fit: points are collinear or coincident")

    def residual(x: np.ndarray) -> np.ndarray:
        return np.hypot(p[:, 0] - x[0], p[:, 1] - x[1]) - x[2]

    from scipy.optimize import least_squares  # imported here: every bag analysis imports this package

    res = least_squares(residual, np.array([c0[0], c0[1], r0]), method="lm")
    r = residual(res.x)
    return CircleFit(centre=res.x[:2].copy(), radius=float(abs(res.x[2])), rms_residual=float(np.sqrt(np.mean(r**2))))


def body_heading(points: np.ndarray) -> float:
    """Yaw of the body's long axis, rad, pointing from head to tail.

    The principal axis of the body points' planar projection (SVD), signed so that it
    points from the first point (head) towards the last (tail).

    Args:
        points: Body points head to tail, shape (n, 2 or 3), m.
    """
    p = np.asarray(points, dtype=float)[:, :2]
    centred = p - p.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axis = vt[0]
    if axis @ (p[-1] - p[0]) < 0:
        axis = -axis
    return float(np.arctan2(axis[1], axis[0]))


def unwrap_headings(headings: np.ndarray) -> np.ndarray:
    """Continuous heading series from wrapped ones, rad."""
    return np.unwrap(np.asarray(headings, dtype=float))


@dataclass(frozen=True)
class ReductionFit:
    """Locomotive-reduction coefficients estimated from runs (003 Eq. 10).

    Attributes:
        k: Velocity transmission coefficient, m/rad.
        d_prime: Equivalent wheel separation, m.
        v_rms_error: RMS of measured minus predicted linear speed, m/s.
        omega_rms_error: RMS of measured minus predicted yaw rate, rad/s.
    """

    k: float
    d_prime: float
    v_rms_error: float
    omega_rms_error: float


def fit_reduction(omega_h: np.ndarray, omega_t: np.ndarray, v: np.ndarray, omega: np.ndarray) -> ReductionFit:
    """Least-squares k and d' of 003 Eq. 10 from measured runs.

    Eq. 10: v = k (omega_h + omega_t) / 2 is linear in k; omega = (k / d') (omega_t - omega_h)
    is linear in c = k / d'. Both are fitted through the origin, then d' = k / c.

    Args:
        omega_h: Commanded head rolling speeds, rad/s, one per run.
        omega_t: Commanded tail rolling speeds, rad/s.
        v: Measured speed along the direction of travel, m/s.
        omega: Measured yaw rate, rad/s.

    Raises:
        SnakeCoreError: The runs do not excite both terms (no translation or no turning).
    """
    oh, ot, v, w = (np.asarray(x, dtype=float) for x in (omega_h, omega_t, v, omega))
    s, d = 0.5 * (oh + ot), ot - oh
    if s @ s == 0 or d @ d == 0:
        raise SnakeCoreError("calibration needs translating runs (omega_h + omega_t != 0) and turning runs")
    k = float(s @ v / (s @ s))
    c = float(d @ w / (d @ d))
    if k <= 0 or c == 0:
        raise SnakeCoreError(f"calibration gave non-physical k={k:.4g}, k/d'={c:.4g}: check the runs")
    return ReductionFit(
        k=k,
        d_prime=k / c,
        v_rms_error=float(np.sqrt(np.mean((v - k * s) ** 2))),
        omega_rms_error=float(np.sqrt(np.mean((w - c * d) ** 2))),
    )


def drive_twist(t: np.ndarray, xy: np.ndarray, heading: np.ndarray) -> tuple[float, float]:
    """Mean twist of the reduced differential drive over a trajectory (003 Eq. 9-10 frame).

    The head segment is the drive's left wheel (Eq. 9), so with the body axis pointing
    from head to tail at yaw ``heading``, the drive's forward direction is that axis
    turned by +90 deg.

    Args:
        t: Times, s (increasing).
        xy: Body centre positions, m, shape (n, 2).
        heading: Unwrapped body-axis yaw, rad.

    Returns:
        (mean speed along the forward direction m/s, mean yaw rate rad/s).
    """
    t, xy, heading = np.asarray(t, float), np.asarray(xy, float), np.asarray(heading, float)
    if len(t) < 2 or t[-1] <= t[0]:
        raise SnakeCoreError("drive_twist needs at least two samples spanning a positive time")
    forward = np.column_stack([np.cos(heading + np.pi / 2), np.sin(heading + np.pi / 2)])
    step = np.diff(xy, axis=0)
    duration = t[-1] - t[0]
    v = float(np.sum(np.einsum("ij,ij->i", step, forward[:-1])) / duration)
    return v, float((heading[-1] - heading[0]) / duration)
