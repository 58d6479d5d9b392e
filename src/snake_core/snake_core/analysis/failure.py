"""Failure classes of a gait run: stuck, self-collision, a joint at its limit, a body off the ground.

Pure functions of a run's sampled time series (numpy arrays), so that a gait search can
score a run that went wrong as such instead of by its objective alone. Each function
decides one class from geometry and joint samples only (no simulator contacts: the twin
models no contacts between the robot's own links, so self-collision is found here by
geometry). :func:`classify_run` applies them all with the module's thresholds.

Classes (the names a search records):

* ``stuck``: the run made no progress, neither moved nor turned:
  ``|c(T) - c(0)| < d_min`` and ``|h(T) - h(0)| < psi_min`` (planar centre of mass ``c``,
  unwrapped body heading ``h``).
* ``self_collision``: two points of the backbone polyline farther apart *along* the
  body than ``s_min`` come closer in space than the body's diameter ``2 r``:
  ``exists i, j: |s_i - s_j| > s_min and |p_i - p_j| < 2 r`` (backbone sampled every
  ``r / 2`` along each straight link). ``s_min`` defaults to ``4 r``: two points on the two
  legs of one joint bent by 90 deg, ``a`` and ``b`` from it, are ``sqrt(a^2 + b^2) >=
  (a + b) / sqrt(2)`` apart, i.e. at least ``2.83 r > 2 r`` when ``a + b > 4 r``, so a joint's
  own bend within its limits is never taken for a collision.
* ``joint_limit``: some joint spends more than ``f_max`` of the run within ``margin`` of
  one of its limits: ``mean_t [q_j(t) <= lower_j + margin or q_j(t) >= upper_j - margin]
  > f_max`` (continuous joints, with infinite limits, never count).
* ``airborne``: the body leaves the ground: the lowest body point's height above the
  ground beneath it rises more than ``z_max`` over its height at the start,
  ``min_k (z_k(t) - g(x_k(t), y_k(t))) - min_k (z_k(0) - g(x_k(0), y_k(0))) > z_max`` at
  some sample (a jump, a flip onto a raised part, a launch off a bump).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

FAILURE_CLASSES = ("stuck", "self_collision", "joint_limit", "airborne")
"""The failure classes, in the order :func:`classify_run` reports them."""

_STUCK_DISTANCE_M = 0.02  # m, net centre-of-mass displacement below which a run made no progress
_STUCK_ANGLE_RAD = 0.05  # rad, net heading change below which a run did not turn either
_MIN_ARC_RADII = 4.0  # s_min in body radii (module docstring)
_SAMPLE_RADII = 0.5  # backbone sample spacing in body radii
_LIMIT_MARGIN_RAD = 0.02  # rad, a joint this close to a limit is at it
_LIMIT_FRACTION = 0.25  # fraction of the run a joint may spend at a limit
_AIRBORNE_RADII = 2.0  # z_max in body radii: the whole body one diameter above where it started


def is_stuck(com: ArrayLike, heading: ArrayLike, distance: float = _STUCK_DISTANCE_M,
             angle: float = _STUCK_ANGLE_RAD) -> bool:
    """Whether a run neither moved nor turned: ``|c(T) - c(0)| < d_min and |h(T) - h(0)| < psi_min``.

    Args:
        com: Planar centre of mass per sample, m, shape (samples, 2).
        heading: Body heading per sample, rad (unwrapped or wrapped: it is unwrapped here).
        distance: d_min, m.
        angle: psi_min, rad.
    """
    c = np.asarray(com, dtype=float)
    h = np.unwrap(np.asarray(heading, dtype=float))
    return bool(np.linalg.norm(c[-1] - c[0]) < distance and abs(h[-1] - h[0]) < angle)


def _resample(points: np.ndarray, arc: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Points every ``spacing`` (or closer) along each straight segment of the polyline, with their arc positions."""
    out_p, out_s = [points[:1]], [arc[:1]]
    for k in range(len(points) - 1):
        n = max(1, int(np.ceil((arc[k + 1] - arc[k]) / spacing)))
        u = np.arange(1, n + 1)[:, None] / n
        out_p.append(points[k] + u * (points[k + 1] - points[k]))
        out_s.append(arc[k] + u[:, 0] * (arc[k + 1] - arc[k]))
    return np.concatenate(out_p), np.concatenate(out_s)


def self_collision_distance(points: ArrayLike, arc: ArrayLike, radius: float, min_arc: float | None = None) -> float:
    """Smallest distance between backbone points more than ``s_min`` apart along the body, m.

    The backbone is the polyline through ``points`` (straight links between joints), sampled
    every ``r / 2``; a value below ``2 r`` is a self-collision (module docstring).

    Args:
        points: Backbone points head to tail (link origins), m, shape (n, 3) or (n, 2).
        arc: Their arc positions along the body, m, shape (n,), increasing.
        radius: Body radius r, m.
        min_arc: s_min, m (default ``4 r``).

    Returns:
        The distance, m; ``inf`` when no two points are ``s_min`` apart along the body.
    """
    p = np.asarray(points, dtype=float)
    s = np.asarray(arc, dtype=float)
    if p.ndim != 2 or s.shape != (len(p),):
        raise ValueError(f"points {p.shape} must be (n, 2|3) and arc {s.shape} must be (n,)")
    s_min = _MIN_ARC_RADII * radius if min_arc is None else float(min_arc)
    q, sq = _resample(p, s, _SAMPLE_RADII * radius)
    far = np.abs(sq[:, None] - sq[None, :]) > s_min
    if not far.any():
        return float("inf")
    d = np.linalg.norm(q[:, None, :] - q[None, :, :], axis=-1)
    return float(d[far].min())


def self_collides(body: ArrayLike, arc: ArrayLike, radius: float, min_arc: float | None = None) -> bool:
    """Whether any sample of a run has a self-collision (:func:`self_collision_distance` ``< 2 r``).

    Args:
        body: Backbone points per sample, m, shape (samples, n, 3).
        arc: Arc positions of the points along the body, m, shape (n,).
        radius: Body radius r, m.
        min_arc: s_min, m (default ``4 r``).
    """
    return any(self_collision_distance(b, arc, radius, min_arc) < 2.0 * radius for b in np.asarray(body, dtype=float))


def limit_fraction(q: ArrayLike, lower: ArrayLike, upper: ArrayLike, margin: float = _LIMIT_MARGIN_RAD) -> np.ndarray:
    """Fraction of samples each joint spends within ``margin`` of a limit: ``mean_t [q <= lo + m or q >= up - m]``.

    Args:
        q: Joint positions, rad, shape (samples, joints).
        lower: Lower limits, rad, shape (joints,) (``-inf`` for continuous joints).
        upper: Upper limits, rad, shape (joints,) (``+inf`` for continuous joints).
        margin: Distance from a limit that counts as at it, rad.

    Returns:
        Per joint, the fraction in [0, 1].
    """
    qq = np.atleast_2d(np.asarray(q, dtype=float))
    at = (qq <= np.asarray(lower, dtype=float) + margin) | (qq >= np.asarray(upper, dtype=float) - margin)
    return np.asarray(at.mean(axis=0))


def lift(body: ArrayLike, ground: ArrayLike) -> np.ndarray:
    """Rise of the body's lowest point above the ground beneath it over the start, m, per sample.

    ``min_k (z_k(t) - g_k(t)) - min_k (z_k(0) - g_k(0))``.

    Args:
        body: Body points per sample, m, shape (samples, n, 3).
        ground: Ground height beneath each point, m, shape (samples, n).
    """
    b = np.asarray(body, dtype=float)
    clearance = (b[..., 2] - np.asarray(ground, dtype=float)).min(axis=1)
    return np.asarray(clearance - clearance[0])


@dataclass(frozen=True)
class RunSamples:
    """What :func:`classify_run` reads of one run.

    Attributes:
        com: Planar centre of mass, m, (samples, 2).
        heading: Body heading, rad, (samples,).
        body: Backbone points (link origins head to tail), m, (samples, n, 3).
        arc: Arc positions of the backbone points, m, (n,).
        ground: Ground height beneath each backbone point, m, (samples, n).
        q: Joint positions, rad, (samples, joints).
        lower: Lower joint limits, rad, (joints,).
        upper: Upper joint limits, rad, (joints,).
        radius: Body radius, m.
    """

    com: np.ndarray
    heading: np.ndarray
    body: np.ndarray
    arc: np.ndarray
    ground: np.ndarray
    q: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    radius: float


def classify_run(run: RunSamples) -> list[str]:
    """The failure classes of a run (a subset of :data:`FAILURE_CLASSES`, in its order; empty: no failure).

    Thresholds: stuck below 0.02 m and 0.05 rad; self-collision below ``2 r`` beyond ``4 r``
    along the body; a joint within 0.02 rad of a limit for more than a quarter of the run;
    airborne when the lowest point rises more than ``2 r`` (module docstring for the formulas).
    """
    found = {
        "stuck": is_stuck(run.com, run.heading),
        "self_collision": self_collides(run.body, run.arc, run.radius),
        "joint_limit": bool((limit_fraction(run.q, run.lower, run.upper) > _LIMIT_FRACTION).any()),
        "airborne": bool((lift(run.body, run.ground) > _AIRBORNE_RADII * run.radius).any()),
    }
    return [name for name in FAILURE_CLASSES if found[name]]
