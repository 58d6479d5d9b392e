"""Probing a fit's optimum where its intervals end: a lower cost there means the search stopped short.

A least-squares optimum comes with a quadratic model of the cost: the Gauss-Newton covariance
``(J^T J)^-1`` of the Jacobian ``J`` at the optimum. Along variable ``i``'s linearized profile
path (``i`` moved, every other variable following as the covariance's column ``i`` says: the
path that minimizes the quadratic cost for each value of ``i``: the profile trace of Bates &
Watts, *Nonlinear Regression Analysis and Its Applications*, 1988, linearized) the cost should
rise by ``(d / sigma_w)^2`` at a distance ``d``, ``sigma_w`` the white-noise standard deviation.
:func:`interval_ends` gives the two points at ``+- width`` standard deviations of each variable
on that path.

Where a friction set from the transmitted torque every physics step (a load-dependent friction)
makes a joint stick or slip, the cost is not that quadratic: a small move of one joint type's
timing changes when another type's joints stick, and the cost can drop by hundreds there. On the
coverage benchmark's case 0 (seed 0, robot-like sensing, structure ``load_friction``) the end of
the twist kv's 95 % interval on its path left 8346 against the optimum's 8738 (a quarter of the
way there, 8345), the truth 8356: the dorsal joints' share fell by 395 as the twist's timing
moved by 0.06 ms and its kv and armature by 1 %. Refined from there, the fit reached 8342, the
servo values closer to the truth. :func:`lower_at_interval_ends` rolls the ``2 n`` points out in
one batch and returns the least when it leaves less than the optimum by more than a tolerance,
for the fit to start again from it (:mod:`snake_tools.twin.identify`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

PROBE_WIDTH = 1.96
"""Standard deviations of a variable at which its path is probed: the 95 % interval's ends."""


def interval_ends(jac: np.ndarray, std: np.ndarray, x: np.ndarray, x_scale: np.ndarray,
                  bounds: tuple[np.ndarray, np.ndarray], width: float = PROBE_WIDTH) -> np.ndarray:
    """The ``2 n`` points ``x +- width std_i p_i``, ``p_i`` variable ``i``'s linearized profile path.

    ``p_i`` is column ``i`` of ``(J^T J)^-1`` divided by its diagonal entry (module docstring),
    computed with the variables scaled by ``x_scale``; a variable the Jacobian does not see (a
    zero diagonal) moves alone, and one whose ``std`` is infinite is not moved (its points are
    ``x``, which :func:`lower_at_interval_ends` leaves out). The points are clipped to ``bounds``.

    Returns:
        Rows ``2 i`` (``x_i`` lowered) and ``2 i + 1`` (raised), shape ``(2 n, n)``.
    """
    jd = jac * x_scale
    cov = np.linalg.pinv(jd.T @ jd) * np.outer(x_scale, x_scale)
    n = x.size
    out = np.empty((2 * n, n))
    for i in range(n):
        step = float(std[i]) * width if np.isfinite(std[i]) else 0.0
        path = cov[:, i] / cov[i, i] if cov[i, i] > 0 else np.eye(n)[i]
        for k, sign in enumerate((-1.0, 1.0)):
            out[2 * i + k] = np.clip(x + sign * step * path, bounds[0], bounds[1])
    return out


def lower_at_interval_ends(residuals: Callable[[list[np.ndarray]], Sequence[np.ndarray]], x: np.ndarray,
                           fun: np.ndarray, jac: np.ndarray, std: np.ndarray, x_scale: np.ndarray,
                           bounds: tuple[np.ndarray, np.ndarray], tol: float,
                           width: float = PROBE_WIDTH) -> tuple[np.ndarray, float] | None:
    """The least of :func:`interval_ends`'s points, when it leaves ``|r|^2`` below ``|fun|^2 - tol``.

    Args:
        residuals: Residual vectors of a batch of points (one batch of rollouts).
        x: The optimum.
        fun: Its residual.
        jac: Its Jacobian.
        std: Each variable's standard deviation at the optimum.
        x_scale: The variables' scales (the covariance is computed scaled).
        bounds: Lower and upper bounds of the variables.
        tol: How much less than the optimum's ``|r|^2`` a point must leave.
        width: Standard deviations of each probe.

    Returns:
        ``(point, its |r|^2)``, or None when no point leaves less than ``|fun|^2 - tol``.
    """
    points = [p for p in interval_ends(jac, std, x, x_scale, bounds, width) if not np.array_equal(p, x)]
    if not points:
        return None
    costs = [float(r @ r) for r in residuals(points)]
    k = int(np.argmin(costs))
    return (points[k], costs[k]) if costs[k] < float(fun @ fun) - tol else None
