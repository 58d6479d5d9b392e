"""The ground friction fitted from an on-ground recording, with the servo model held (:func:`fit_friction`).

On the ground the servos push the body against the ground's friction, and the load shows as
their tracking error: the fitted statistic is, per joint and per window of :data:`LOAD_WINDOW_S`,
the RMS of the joint's tracking error (recorded angle minus the command in force),
``r(mu) = (e_twin(mu) - e_robot) / SIGMA_LOAD``, minimised over log mu by a scan of
:data:`_FRICTION_GRID` points and Brent's method around the best. The head's path is not fitted:
a rolling gait barely slips, its net motion changes by a few per cent over a twenty-fold range of
mu, and contact makes the path chaotic (a 1 % change of any parameter moves the head by
centimetres), where the windowed tracking errors are smooth in mu; the path is what
``snake twin replay`` compares.

The friction's spread comes from its 95 % profile-likelihood interval over log mu
(:func:`snake_tools.twin.uncertainty.profile_interval`): every mu whose cost is within
``3.84 s^2 + rho`` of the least, where ``s^2 = |r|^2 / (w - 1)`` at the best over the w windows
(the joints of one window share one contact state; at least 1: the statistic is not trusted below
its scale), so a held servo model that does not explain the run widens the interval instead of
moving mu, and ``rho`` is the cost's roughness, its mean change over a step of
:data:`_ROUGHNESS_STEP` in log mu either side of the best (there the smooth part is flat and only
contact chaos moves it). The fitted mu is the interval's centre in log mu (the roughness moves the
best single point more) and its spread the interval's relative half-width,
``exp(half-width in log mu) - 1``.

That interval holds the servo model at its start. Where the start comes with standard
deviations (a lifted fit's, :func:`start_std`), their share is added, to first order
(the delta method; Seber & Wild, Nonlinear Regression, sec. 5.1): the shift of the best
log mu when a servo parameter moves by its standard deviation ``s_i``,

    d_i = -(J^T (r(c, theta + h_i e_i) - r(c, theta))) / (J^T J) * s_i / h_i,
    J = (r(c + g) - r(c - g)) / (2 g),

at the interval's centre ``c``, with a step ``h_i`` of at least :data:`_SERVO_STEP_REL` of the
value (or :data:`_SERVO_STEP_ABS` of its unit: a step the contact chaos does not drown), and
``g`` = :data:`_PROPAGATION_STEP` in log mu; the half-width becomes
``sqrt(w^2 + (1.96 sqrt(sum d_i^2))^2)`` (the servo parameters taken as independent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import IdentifyError, Recording
from snake_tools.twin.rollout import simulate
from snake_tools.twin.structure import _Stage
from snake_tools.twin.uncertainty import _CHI2_95, _Z_95, IDENTIFIABLE_REL_STD, _identified, profile_interval

SIGMA_LOAD = 0.001
"""Scale of a window's tracking-error RMS residual on the ground, rad."""
LOAD_WINDOW_S = 1.0
"""Window of the tracking-error RMS compared on the ground, s."""
_MIN_TRAVEL_M = 0.02        # m, a head that moves less identifies no ground friction
_FRICTION_RANGE = (0.1, 2.0)  # ground friction scanned (sliding coefficient)
_FRICTION_GRID = 25         # points of the scan, log-spaced
_FRICTION_PROBES = (0.03, 0.07, 0.15)  # steps in log mu evaluated either side of the best (interval resolution)
_ROUGHNESS_STEP = 0.005     # step in log mu of the probes of the cost's roughness (its smooth part is flat there)
_PROPAGATION_STEP = 0.07    # step in log mu of the residual's slope used to carry the servo model's spread over
_SERVO_STEP_REL = 0.05      # least step of a servo parameter for its effect, relative to its value
_SERVO_STEP_ABS = {"frictionloss": 0.0025, "latency_s": 0.008, "load_friction": 0.025, "backlash_rad": 0.00125}
"""Least step of a servo parameter, by kind, in its unit (N m, s: two physics steps, none, rad).

Smaller steps leave the effect in the contact's chaos: at 2 % and one physics step the 95 %
intervals of ``snake bench twin --coverage 20 --robot-sensing`` held the truth 20 of 20 times, a
median 0.10 of their half-width from it (0.34 for an exact interval), and told the friction in
11 cases of 20."""


def _tracking_rms(rec: Recording, q: np.ndarray) -> np.ndarray:
    """RMS of each joint's tracking error per window of :data:`LOAD_WINDOW_S`, (windows, joints), rad.

    The tracking error at a ``joint_states`` sample is its angle minus the last command sent
    at or before it, ``e = q(t) - q_cmd(t_k <= t)``; the window's RMS is
    ``sqrt(mean over the window of e^2)``.
    """
    held = np.clip(np.searchsorted(rec.t_cmd, rec.t_state, side="right") - 1, 0, len(rec.t_cmd) - 1)
    err2 = (q - rec.q_cmd[held]) ** 2
    window = np.floor((rec.t_state - rec.t_state[0]) / LOAD_WINDOW_S).astype(int)
    counts = np.bincount(window)
    keep = counts > 0
    return np.sqrt(np.stack([np.bincount(window, weights=err2[:, j])[keep] / counts[keep]
                             for j in range(err2.shape[1])], axis=1))


def _load_residual(rec: Recording, q: np.ndarray) -> np.ndarray:
    """On-ground residual (module docstring): twin minus robot windowed tracking RMS, rad / SIGMA_LOAD."""
    return ((_tracking_rms(rec, q) - _tracking_rms(rec, rec.q_state)) / SIGMA_LOAD).ravel()


def start_std(intervals: Mapping[str, tuple[float, float]], names: Sequence[str]) -> dict[str, float]:
    """Standard deviations of ``names`` from their 95 % intervals, ``(hi - lo) / (2 x 1.96)``; unbounded left out."""
    out = {}
    for name in names:
        lo, hi = intervals.get(name, (-math.inf, math.inf))
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            out[name] = (hi - lo) / (2 * _Z_95)
    return out


def fit_friction(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float],
                  world: str | Path | None, progress: Any, std: Mapping[str, float] | None = None) -> _Stage:
    """Ground friction from an on-ground recording (module docstring).

    A scan of log mu over :data:`_FRICTION_RANGE`, Brent's method between the best point's
    neighbours, probes either side of the best (:data:`_FRICTION_PROBES`), then the 95 %
    profile-likelihood interval over every evaluated point (:func:`profile_interval`), widened
    by the share of the start's standard deviations ``std`` (flat names; module docstring).
    """
    from scipy.optimize import minimize_scalar

    name = "contact.ground_friction"
    if not len(rec.t_pose):
        raise IdentifyError(f"{rec.path}: no pose of the robot (mocap, ground truth or /tf): the ground friction "
                            "is fitted from an on-ground run")
    travel = float(np.hypot(*np.ptp(rec.xy_pose, axis=0)))
    if travel < _MIN_TRAVEL_M:
        raise IdentifyError(f"{rec.path}: the head moved {travel:.3f} m: too little to tell the ground friction "
                            f"(at least {_MIN_TRAVEL_M} m; record a gait run, or use --lifted for a lifted recording)")
    count = [0]
    cache: dict[float, np.ndarray] = {}

    def rollout(values: dict[str, float]) -> np.ndarray:
        count[0] += 1
        q, _ = simulate(rec, robot, start.with_flat(values), world)
        return _load_residual(rec, q)

    def residual(log_mu: float) -> np.ndarray:
        key = round(float(log_mu), 12)
        if key not in cache:
            cache[key] = rollout({name: math.exp(log_mu)})
        return cache[key]

    def moved(log_mu: float, servo: str, value: float) -> np.ndarray:
        return rollout({name: math.exp(log_mu), servo: value})

    def cost(log_mu: float) -> float:
        r = residual(log_mu)
        return float(r @ r)

    r0 = residual(math.log(flat0[name]))
    grid = np.linspace(math.log(_FRICTION_RANGE[0]), math.log(_FRICTION_RANGE[1]), _FRICTION_GRID)
    costs = [cost(g) for g in grid]
    k = int(np.argmin(costs))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    minimize_scalar(cost, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3, "disp": 0})
    best = min(cache, key=cost)
    for h in _FRICTION_PROBES:
        for x in (best - h, best + h):
            if grid[0] <= x <= grid[-1]:
                cost(x)
    best = min(cache, key=cost)
    c_best = cost(best)
    roughness = float(np.mean([abs(cost(best + d) - c_best) for d in (-_ROUGHNESS_STEP, _ROUGHNESS_STEP)
                               if grid[0] <= best + d <= grid[-1]]))
    xs = np.array(sorted(cache))
    cs = np.array([cost(x) for x in xs])
    best = float(xs[int(np.argmin(cs))])
    c_min = float(cs.min())
    windows = r0.size // len(robot.joints)  # the joints of one window share one contact state: one sample each
    s2 = max(c_min / max(windows - 1, 1), 1.0)
    lower, upper = profile_interval(xs, cs, _CHI2_95 * s2 + roughness)
    servo_share = 0.0
    if std and math.isfinite(lower) and math.isfinite(upper):
        centre = (lower + upper) / 2
        # A per-joint fit's deviations name joints: their own values are moved, as the types' are.
        servo_share = _servo_share(centre, residual, moved, flat0 | start.joint_flat(robot), std)
        half = math.hypot((upper - lower) / 2, _Z_95 * servo_share)
        lower, upper = centre - half, centre + half
    interval = (math.exp(lower), math.exp(upper))
    if math.isfinite(lower) and math.isfinite(upper):
        # The interval's centre in log mu: contact's roughness moves it less than the best single point.
        fitted = math.exp((lower + upper) / 2)
        rel = math.exp((upper - lower) / 2) - 1.0
    else:
        fitted, rel = math.exp(best), math.inf
    if progress is not None:
        progress(f"ground friction {fitted:.4g} (95 % interval {interval[0]:.4g} to {interval[1]:.4g}, best "
                 f"{math.exp(best):.4g} at cost {c_min:.4g}, roughness {roughness:.3g}; the servo model's share "
                 f"{servo_share:.3g} in log mu) after {count[0]} rollouts")
    identified = _identified(name, rel)
    if not identified:
        fitted = flat0[name]   # not told by the recording: held
    why = (f"95 % profile interval's relative half-width {rel:.3g} "
           f"{'within' if identified else 'above'} {IDENTIFIABLE_REL_STD:g}")
    starts = {"count": _FRICTION_GRID, "varied": name, "cost_min": c_min, "cost_max": float(max(costs)),
              "servo_share_log_mu": servo_share}
    return _Stage([name], {name: fitted}, {name: rel}, count[0], float(np.sqrt(np.mean(r0 ** 2))),
                  start.with_flat({name: fitted}), {name: interval}, {name: identified}, {name: why}, starts)


def _servo_share(centre: float, residual: Any, moved: Any, flat0: Mapping[str, float],
                 std: Mapping[str, float]) -> float:
    """Standard deviation of the best log mu carried over from the servo model's (module docstring), in log mu."""
    r_c = residual(centre)
    slope = (residual(centre + _PROPAGATION_STEP) - residual(centre - _PROPAGATION_STEP)) / (2 * _PROPAGATION_STEP)
    curvature = float(slope @ slope)
    if curvature <= 0:
        return math.inf
    shifts = []
    for servo, s in sorted(std.items()):
        if servo not in flat0 or not s > 0:
            continue
        value = flat0[servo]
        kind = servo.rsplit(".", 1)[-1]
        step = max(s, _SERVO_STEP_REL * abs(value), _SERVO_STEP_ABS.get(kind, 0.0))
        shifts.append(-float(slope @ (moved(centre, servo, value + step) - r_c)) / curvature * s / step)
    return float(np.sqrt(np.sum(np.square(shifts)))) if shifts else 0.0
