"""The ground friction fitted from an on-ground recording, with the servo model held (:func:`fit_friction`).

Two statistics, each scaled by its own variance. On the ground the servos push the body against
the ground's friction, and the load shows as their tracking error: per joint and per window of
:data:`LOAD_WINDOW_S`, the RMS of the joint's tracking error (recorded angle minus the command in
force), ``r(mu) = (e_twin(mu) - e_robot) / SIGMA_LOAD`` over ``w`` windows. And the friction
decides how fast the body moves and turns under a command: the head's speed and turn rate per span
of constant ``cmd_vel`` (:mod:`snake_tools.twin.path_rates`), ``r_p(mu)`` of size ``n_p``. The
head's path itself is not fitted: contact makes it chaotic (a 1 % change of any parameter moves
the head by centimetres), where the windowed tracking errors and the span rates are local. The
cost is

    c(mu) = |r(mu)|^2 / s^2 + |r_p(mu)|^2 / s_p^2,

``s^2 = max(1, min |r|^2 / (w - 1))`` (the joints of one window share one contact state: one
sample each) and ``s_p^2 = max(1, min |r_p|^2 / (n_p - 1))``, each at the least of its statistic
over the scan (a scale of at least 1: the statistic is not trusted below it; a recording without
the head's heading has no ``r_p``). It is minimised over log mu by a scan of :data:`_FRICTION_GRID`
points and Brent's method around the best. On the bench robot the tracking statistic's scale is
mostly the held servo model's misfit (``s^2`` up to 1400), and the span rates narrow the interval
the tracking errors leave (seed 0: 0.61 to 0.89 where it was 0.40 to 1.11;
docs/twin_identification.md).

The span rates are confounded with the servo model: a servo model that moves the joints less
moves the body less, and a lower friction makes up for it (measured: held at the default servo
model, 40-80 % off a hidden one, the span rates fit mu 0.35, 95 % interval 0.32 to 0.39, where the
truth is 0.5; the tracking errors' scale, 1.5e4, shows the misfit and leaves the friction open).
So they count only where the start comes with its standard deviations (a fitted servo model,
:func:`start_std`), whose share is carried into the interval (below); a start without them is
fitted by the tracking errors alone.

The friction's spread comes from its 95 % profile-likelihood interval over log mu
(:func:`snake_tools.twin.uncertainty.profile_interval`): every mu whose cost is within
``3.84 + rho`` of the least, ``rho`` the cost's roughness, its mean change over a step of
:data:`_ROUGHNESS_STEP` in log mu either side of the best (there the smooth part is flat and only
contact chaos moves it). The fitted mu is the interval's centre in log mu (the roughness moves the
best single point more) and its spread the interval's relative half-width,
``exp(half-width in log mu) - 1``.

That interval holds the servo model at its start. Where the start comes with standard
deviations (a lifted fit's, :func:`start_std`), their share is added by Monte Carlo propagation
(JCGM 101:2008, "Propagation of distributions using a Monte Carlo method"): :data:`_SHARE_DRAWS`
servo models drawn at once, every value normal about the start's with its standard deviation
(taken as independent, clipped to its physical range), each scanned at :data:`_SHARE_OFFSETS`
about the interval's centre with its best log mu the vertex of the parabola through the least
scanned point and its neighbours; the share is the best's standard deviation over the draws, and
the half-width becomes ``sqrt(w^2 + (1.96 share)^2)``. A first-order share per value (the delta
method) adds every value's step through the contact's chaos: with a per-joint servo model's 126
values it reached 2.2-2.5 in log mu on the bench robot, an interval of 0.006 to 92, where the
draws move the best by 0.03 to 0.28.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import IdentifyError, Recording
from snake_tools.twin.path_rates import path_residual
from snake_tools.twin.rollout import simulate_paths
from snake_tools.twin.rollout_pool import Payload
from snake_tools.twin.servo_problem import PHYSICAL_RANGE
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
_SHARE_DRAWS = 8            # servo models drawn for the servo model's share in the friction's interval
_SHARE_OFFSETS = (-0.3, -0.15, 0.0, 0.15, 0.3)   # log mu about the interval's centre scanned per draw
_SHARE_EXTENSIONS = 4       # steps a draw's scan goes on outward while its least cost is at an end
_SHARE_SEED = 0             # the draws' seed: a fit is repeatable


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
                  world: str | Path | None, progress: Any, std: Mapping[str, float] | None = None,
                  workers: int = 1) -> _Stage:
    """Ground friction from an on-ground recording (module docstring).

    A scan of log mu over :data:`_FRICTION_RANGE`, Brent's method between the best point's
    neighbours, probes either side of the best (:data:`_FRICTION_PROBES`), then the 95 %
    profile-likelihood interval over every evaluated point (:func:`profile_interval`), widened
    by the share of the start's standard deviations ``std`` (flat names; module docstring). The
    scan, the probes and the share's draws are each one batch of runs on ``workers`` processes
    (:func:`snake_tools.twin.rollout.simulate_paths`); Brent's method one run at a time.
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
    cache: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    spread_known = bool(std)   # the span rates need the servo model's spread carried over (module docstring)

    payload = Payload(rec, robot)

    def rollouts(sets: list[dict[str, float]]) -> list[tuple[np.ndarray, np.ndarray]]:
        count[0] += len(sets)
        runs = simulate_paths(rec, robot, [start.with_flat(values) for values in sets], world, workers, payload)
        return [(_load_residual(rec, q), path_residual(rec, xy, heading) if spread_known else np.empty(0))
                for q, xy, heading in runs]

    def evaluated(log_mus: Sequence[float]) -> None:
        """Those of ``log_mus`` not yet run, in one batch."""
        todo: dict[float, float] = {}
        for x in log_mus:
            key = round(float(x), 12)
            if key not in cache:
                todo.setdefault(key, float(x))
        for key, pair in zip(todo, rollouts([{name: math.exp(x)} for x in todo.values()]), strict=True):
            cache[key] = pair

    def residuals(log_mu: float) -> tuple[np.ndarray, np.ndarray]:
        evaluated([log_mu])
        return cache[round(float(log_mu), 12)]

    grid = np.linspace(math.log(_FRICTION_RANGE[0]), math.log(_FRICTION_RANGE[1]), _FRICTION_GRID)
    evaluated([math.log(flat0[name]), *grid])
    r0, p0 = residuals(math.log(flat0[name]))
    windows = r0.size // len(robot.joints)  # the joints of one window share one contact state: one sample each
    s2 = max(min(float(r @ r) for r, _ in cache.values()) / max(windows - 1, 1), 1.0)
    s2_path = max(min(float(rp @ rp) for _, rp in cache.values()) / max(p0.size - 1, 1), 1.0) if p0.size else 1.0

    def scaled(pair: tuple[np.ndarray, np.ndarray]) -> float:
        r, rp = pair
        return float(r @ r) / s2 + float(rp @ rp) / s2_path

    def cost(log_mu: float) -> float:
        return scaled(residuals(log_mu))

    costs = [cost(g) for g in grid]
    k = int(np.argmin(costs))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    minimize_scalar(cost, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3, "disp": 0})
    best = min(cache, key=cost)
    evaluated([x for h in _FRICTION_PROBES for x in (best - h, best + h) if grid[0] <= x <= grid[-1]])
    best = min(cache, key=cost)
    c_best = cost(best)
    beside = [best + d for d in (-_ROUGHNESS_STEP, _ROUGHNESS_STEP) if grid[0] <= best + d <= grid[-1]]
    evaluated(beside)
    roughness = float(np.mean([abs(cost(x) - c_best) for x in beside]))
    xs = np.array(sorted(cache))
    cs = np.array([cost(x) for x in xs])
    best = float(xs[int(np.argmin(cs))])
    c_min = float(cs.min())
    lower, upper = profile_interval(xs, cs, _CHI2_95 + roughness)
    servo_share = 0.0
    if std and math.isfinite(lower) and math.isfinite(upper):
        centre = (lower + upper) / 2
        # A per-joint fit's deviations name joints: their own values are drawn, as the types' are.
        servo_share = _servo_share(centre, lambda points: [scaled(pair) for pair in rollouts(
            [{name: math.exp(log_mu)} | values for log_mu, values in points])], flat0 | start.joint_flat(robot), std)
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
                 f"{math.exp(best):.4g} at cost {c_min:.4g} (scales {s2:.3g} and {s2_path:.3g} of the tracking "
                 f"errors and span rates), roughness {roughness:.3g}; the servo model's share "
                 f"{servo_share:.3g} in log mu) after {count[0]} rollouts")
    identified = _identified(name, rel)
    if not identified:
        fitted = flat0[name]   # not told by the recording: held
    why = (f"95 % profile interval's relative half-width {rel:.3g} "
           f"{'within' if identified else 'above'} {IDENTIFIABLE_REL_STD:g}")
    starts = {"count": _FRICTION_GRID, "varied": name, "cost_min": c_min, "cost_max": float(max(costs)),
              "servo_share_log_mu": servo_share, "scale": s2, "path_scale": s2_path, "spans": p0.size // 2}
    return _Stage([name], {name: fitted}, {name: rel}, count[0], float(np.sqrt(np.mean(r0 ** 2))),
                  start.with_flat({name: fitted}), {name: interval}, {name: identified}, {name: why}, starts)


def _servo_share(centre: float, costs_with: Callable[[list[tuple[float, dict[str, float]]]], list[float]],
                 flat0: Mapping[str, float], std: Mapping[str, float], draws: int = _SHARE_DRAWS) -> float:
    """Standard deviation of the best log mu over servo models drawn from ``std`` (module docstring), in log mu.

    ``costs_with(points)``: the fit's cost at each ``(log_mu, values)`` of ``points``, with the
    servo values ``values`` (flat names) in place of the start's (the draws' scans are one call).
    Names that ``flat0`` lacks, and deviations of 0, are left out; none left: 0. A draw whose
    least cost lies at an end of its scan is scanned on outward, up to :data:`_SHARE_EXTENSIONS`
    steps; one whose least is still at an end has its best outside every scan: the share is
    unbounded (``inf``).
    """
    names = sorted(n for n, s in std.items() if n in flat0 and s > 0)
    if not names:
        return 0.0
    rng = np.random.default_rng(_SHARE_SEED)
    xs = centre + np.asarray(_SHARE_OFFSETS)
    drawn = []
    for _ in range(draws):
        values = {}
        for n in names:
            low, high = PHYSICAL_RANGE.get(n.rsplit(".", 1)[-1], (-math.inf, math.inf))
            values[n] = float(np.clip(flat0[n] + std[n] * rng.standard_normal(), low, high))
        drawn.append(values)
    scans = costs_with([(float(v), values) for values in drawn for v in xs])
    bests = []
    for d, values in enumerate(drawn):
        x, cs = list(xs), scans[d * len(xs):(d + 1) * len(xs)]
        for _ in range(_SHARE_EXTENSIONS):   # a least at an end: the scan goes on outward, a step at a time
            i = int(np.argmin(cs))
            if 0 < i < len(x) - 1:
                break
            step = x[1] - x[0]
            if i == 0:
                x.insert(0, x[0] - step)
                cs.insert(0, costs_with([(x[0], values)])[0])
            else:
                x.append(x[-1] + step)
                cs.append(costs_with([(x[-1], values)])[0])
        if int(np.argmin(cs)) in (0, len(x) - 1):
            return math.inf
        bests.append(parabola_vertex(np.array(x), np.array(cs)))
    return float(np.std(bests, ddof=1))


def parabola_vertex(xs: np.ndarray, cs: np.ndarray) -> float:
    """The least of evenly spaced points ``xs``, moved to the vertex of the parabola through it and its neighbours.

    At an end of ``xs``, or where the three points do not bend upwards, the least point itself;
    the vertex is kept within the neighbours.
    """
    i = int(np.argmin(cs))
    if i == 0 or i == len(xs) - 1:
        return float(xs[i])
    bend = cs[i - 1] - 2 * cs[i] + cs[i + 1]
    if not bend > 0:
        return float(xs[i])
    h = float(xs[i + 1] - xs[i])
    return float(np.clip(xs[i] + 0.5 * h * (cs[i - 1] - cs[i + 1]) / bend, xs[i - 1], xs[i + 1]))
