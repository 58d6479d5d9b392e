"""Fit the twin's physics (a calibration target's ``twin:`` block) to a recorded run of the robot.

The recording gives what the robot was told (``/joint_commands``) and what it did
(``/joint_states``, and the head pose of mocap or ground truth). The twin
(:class:`snake_hardware.sim.twin.SimTwin`) is driven by the same commands on the bag's time
base from the recorded initial joint angles (:func:`simulate`). Two recordings, two fits:

* **lifted** (the robot hanging from its head, ``snake twin excite --variant lifted``; the
  twin's :class:`~snake_hardware.sim.mjcf.SimOptions` ``lifted``): the servo model of every
  joint type, p = (``kp``, ``kv``, ``armature``, ``frictionloss``, ``latency_s``) per type,
  minimising ``r(p) = (q_twin(p) - q_robot) / SIGMA_Q`` over every joint sample with
  ``scipy.optimize.least_squares`` (trust-region reflective; ``kp``, ``kv``, ``armature`` as
  log values, ``frictionloss`` and the latency, in physics steps, bounded below by 0; a
  forward-difference Jacobian, one rollout of the whole recording per column). The twin blends
  a fractional latency over one physics step, so the latency is a continuous parameter; the
  fit starts from the best of a few common latencies (:data:`_LATENCY_STARTS`), since a fit from
  0 can settle where a softer servo mimics the delay.
* **on the ground** (a gait run): the ground friction mu, with the servo model held at the
  target's (fit it lifted first). On the ground the servos push the body against the ground's
  friction, and the load shows as their tracking error: the fitted statistic is, per joint and
  per window of :data:`LOAD_WINDOW_S`, the RMS of the joint's tracking error (recorded angle
  minus the command in force), ``r(mu) = (e_twin(mu) - e_robot) / SIGMA_LOAD``, minimised over
  log mu by a scan of :data:`_FRICTION_GRID` points and Brent's method around the best. The
  head's path is not fitted: a rolling gait barely slips, its net motion changes by a few
  per cent over a twenty-fold range of mu, and contact makes the path chaotic (a 1 % change of
  any parameter moves the head by centimetres), where the windowed tracking errors are smooth
  in mu; the path is what ``snake twin replay`` compares.

Uncertainty: with J the Jacobian of r at the solution and s^2 = |r|^2 / (m - n), the covariance
of the fitted variables is s^2 (J^T J)^+ (first order); its square-root diagonal is the relative
standard deviation of a log-fitted parameter, the standard deviation in physics steps of a
latency, and that over max(|value|, 5 mN m) of a friction loss. The ground friction's spread
comes from its 95 % profile-likelihood interval over log mu instead (:func:`profile_interval`):
every mu whose cost is within ``3.84 s^2 + rho`` of the least, the crossings interpolated
between the evaluated points, where ``s^2 = |r|^2 / (w - 1)`` at the best over the w windows
(the joints of one window share one contact state; at least 1: the statistic is not trusted
below its scale), so a held servo model that does not explain the run widens the interval
instead of moving mu, and ``rho`` is the cost's roughness, its mean change over a step of
:data:`_ROUGHNESS_STEP` in log mu either side of the best (there the smooth part is flat and
only contact chaos moves it). The fitted mu is the interval's centre in log mu (the roughness
moves the best single point more) and its spread the interval's relative half-width,
``exp(half-width in log mu) - 1``. A parameter whose spread exceeds
:data:`IDENTIFIABLE_REL_STD` (latency: :data:`LATENCY_STD_STEPS`) is reported
as not identified and keeps its starting value: the recording did not excite it.

Why scipy and not ``mujoco.sysid``: the twin's command path (per-type latency, the target
checks of :meth:`SimTwin.set_targets`) and the parameters' mapping to several MJCF fields with
derived defaults (:mod:`snake_core.twin_params`) live in :class:`SimTwin`; rolling out SimTwin
itself keeps one code path for the fit, ``snake twin replay`` and every experiment, where the
toolbox rolls out a bare ``MjModel`` of its own; and its HTML report loads plotly from a CDN.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.bag.series import BagSeries, read_series

SIGMA_Q = 0.01
"""Scale of a joint-angle residual, rad (about the resolution of a good fit)."""
SIGMA_LOAD = 0.001
"""Scale of a window's tracking-error RMS residual on the ground, rad."""
IDENTIFIABLE_REL_STD = 0.15
"""A fitted parameter whose relative standard deviation exceeds this is reported as not identified."""
SERVO_FIELDS = ("kp", "kv", "armature", "frictionloss", "latency_s")
"""Servo parameters fitted per joint type (``damping`` enters only as kv + damping: kept; ``effort_scale``
needs saturated motion: kept)."""
LATENCY_STD_STEPS = 1.0
"""A fitted latency whose standard deviation exceeds this many physics steps is reported as not identified."""
MIN_DURATION_S = 5.0
"""Shortest recording a fit accepts, s."""
MAX_LATENCY_STEPS = 25
"""Largest command latency fitted, physics steps (0.1 s at the 4 ms step)."""
_MIN_MOTION_RAD = 0.02      # rad, a joint type whose commands move less than this is not excited
_MIN_TRAVEL_M = 0.02        # m, a head that moves less identifies no ground friction
_DIFF_STEP = 1e-2           # relative step of the forward-difference Jacobian (log space)
_LOG_FIELDS = ("kp", "kv", "armature")  # fitted as log values
_FRICTION_SCALE = 0.01      # N m, typical size of a dry friction (x_scale of the fit)
_FRICTION_FLOOR = 0.005     # N m, a friction loss below this is judged on this absolute size
_LATENCY_STARTS = (0.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0)  # physics steps tried as the fit's start
_MAX_NFEV = 80              # least-squares iterations (each one Jacobian of rollouts)
_FRICTION_RANGE = (0.1, 2.0)  # ground friction scanned (sliding coefficient)
_FRICTION_GRID = 25         # points of the scan, log-spaced
_FRICTION_PROBES = (0.03, 0.07, 0.15)  # steps in log mu evaluated either side of the best (interval resolution)
_CHI2_95 = 3.84             # 95 % quantile of chi-square with one degree of freedom
_ROUGHNESS_STEP = 0.005     # step in log mu of the probes of the cost's roughness (its smooth part is flat there)
LOAD_WINDOW_S = 1.0
"""Window of the tracking-error RMS compared on the ground, s."""


class IdentifyError(ValueError):
    """A recording the fit cannot use (one line naming the bag and what is missing)."""


@dataclass(frozen=True)
class Recording:
    """What a fit reads from a bag: commands, joint states, head positions (times in s)."""

    path: Path
    t_cmd: np.ndarray
    q_cmd: np.ndarray
    t_state: np.ndarray
    q_state: np.ndarray
    t_pose: np.ndarray
    xy_pose: np.ndarray
    pose_source: str

    @property
    def duration(self) -> float:
        """Length of the recording, s."""
        return float(max(self.t_cmd[-1], self.t_state[-1]) - min(self.t_cmd[0], self.t_state[0]))


def read_recording(bag: Path | BagSeries, robot: RobotModel, pose_topic: str | None = None) -> Recording:
    """The series a fit needs, in ``robot``'s joint order.

    Raises:
        IdentifyError: No ``/joint_commands``, no ``/joint_states``, other joints, or too short.
        BagError: The bag cannot be read.
    """
    from snake_tools.twin.replay import ReplayError, _joint_matrix

    bs = bag if isinstance(bag, BagSeries) else read_series(Path(bag), progress=False, pose_topic=pose_topic)
    path = bs.summary.path
    for topic in ("/joint_commands", "/joint_states"):
        if not bs.has(topic) or len(bs.series[topic].t) < 2:
            raise IdentifyError(f"{path}: no {topic}: a fit needs what the robot was told and what its joints did")
    names = robot.joint_names
    try:
        q_cmd = _joint_matrix(bs.series["/joint_commands"].rows, names, "/joint_commands", path)
        q_state = _joint_matrix(bs.series["/joint_states"].rows, names, "/joint_states", path)
    except ReplayError as err:
        raise IdentifyError(str(err)) from err
    if bs.pose_topics:
        pose = bs.series[bs.pose_topics[0]]
        t_pose, xy = bs.stamped_times(bs.pose_topics[0]), np.asarray(pose.rows, dtype=float).reshape(-1, 7)[:, :2]
        source = bs.pose_topics[0]
    else:
        t_pose, xy, source = np.empty(0), np.empty((0, 2)), ""
    rec = Recording(path, bs.stamped_times("/joint_commands"), q_cmd, bs.stamped_times("/joint_states"), q_state,
                    t_pose, xy, source)
    if rec.duration < MIN_DURATION_S:
        raise IdentifyError(f"{path}: {rec.duration:.1f} s recorded: a fit needs at least {MIN_DURATION_S:g} s "
                            "of excitation (snake twin excite)")
    return rec


def simulate(rec: Recording, robot: RobotModel, params: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The twin driven by the recording: its joint angles at ``t_state`` and head xy at ``t_pose``."""
    from snake_hardware.sim.mjcf import SimOptions  # mujoco: only when fitting
    from snake_hardware.sim.twin import SimTwin
    from snake_tools.twin.replay import run_recorded

    twin = SimTwin(robot, None if lifted else world, twin_params=params, options=SimOptions(lifted=lifted))
    twin.reset(targets=rec.q_state[0])
    t0 = float(min(rec.t_cmd[0], rec.t_state[0]))
    xy, _, q, _ = run_recorded(twin, rec.t_cmd, rec.q_cmd, rec.t_pose, rec.t_state, t0)
    return q, xy


def _joint_residual(rec: Recording, q: np.ndarray) -> np.ndarray:
    """Joint part of the residual (module docstring), rad / SIGMA_Q."""
    return ((q - rec.q_state) / SIGMA_Q).ravel()


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


def profile_interval(x: np.ndarray, cost: np.ndarray, threshold: float) -> tuple[float, float]:
    """Profile-likelihood interval of a scanned scalar: where ``cost`` is within ``threshold`` of its minimum.

    The region ``{x : cost(x) <= min cost + threshold}`` is taken from its outermost evaluated
    points on each side of the best, each extended to the threshold's crossing, interpolated
    linearly in x between that point and the next evaluated point outward. A region that reaches
    the first or last evaluated point has no crossing there: that bound is infinite.

    Args:
        x: Evaluated points (any order; in log mu for the ground friction).
        cost: The cost at each point.
        threshold: Allowed rise of the cost above its minimum (3.84 s^2 for 95 %).

    Returns:
        (lower, upper) bounds in x; ``-inf`` / ``inf`` where the region is not closed.
    """
    order = np.argsort(x)
    xs, cs = np.asarray(x, dtype=float)[order], np.asarray(cost, dtype=float)[order]
    level = float(cs.min()) + threshold
    inside = np.flatnonzero(cs <= level)
    lo_i, hi_i = int(inside[0]), int(inside[-1])

    def crossing(i: int, j: int) -> float:  # between inside point i and outside point j
        return float(xs[i] + (xs[j] - xs[i]) * (level - cs[i]) / (cs[j] - cs[i]))

    lower = -math.inf if lo_i == 0 else crossing(lo_i, lo_i - 1)
    upper = math.inf if hi_i == len(xs) - 1 else crossing(hi_i, hi_i + 1)
    return lower, upper


@dataclass
class Fit:
    """Result of :func:`identify` (see :meth:`as_dict`)."""

    variant: str
    names: list[str]
    start: dict[str, float]
    fitted: dict[str, float]
    rel_std: dict[str, float]
    identified: dict[str, bool]
    timestep_s: float
    rms_before: float
    rms_after: float
    rollouts: int
    wall_s: float
    params: TwinParams
    held: list[str]
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data: per parameter start, fitted, spread, identified (and a profiled 95 % interval); residuals."""
        params: dict[str, dict[str, Any]] = {
            n: {"start": self.start[n], "fitted": self.fitted[n], "relative_std": self.rel_std[n],
                "identified": self.identified[n]} for n in self.names}
        for n, (lo, hi) in self.intervals.items():
            params[n]["interval"] = [lo, hi]
        return {
            "variant": self.variant,
            "parameters": params,
            "timestep_s": self.timestep_s,
            "not_identified": [n for n in self.names if not self.identified[n]] + self.held,
            "residual_rms_before": self.rms_before,
            "residual_rms_after": self.rms_after,
            "rollouts": self.rollouts,
            "wall_s": self.wall_s,
        }


def servo_names(robot: RobotModel) -> list[str]:
    """Parameters a lifted recording fits (``servo.<type>.<field>`` of :data:`SERVO_FIELDS`)."""
    types = joint_types(robot)
    return [f"servo.{t}.{f}" for t in types for f in SERVO_FIELDS]


def identify(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False, world_friction: float = 0.8, progress: Any = None) -> Fit:
    """Fit the twin's parameters to ``rec`` from ``start`` (module docstring).

    A lifted recording (the robot hanging from its head, ``snake twin excite --lifted``)
    fits the servo model of every joint type and its latency; an on-ground recording fits the
    ground friction with the servo model held at ``start`` (fit it from a lifted recording
    first): on the ground, contact couples every joint to every other and to the terrain,
    and the joint-level fit would chase the contacts.

    Args:
        rec: The recording (:func:`read_recording`).
        robot: The robot recorded.
        start: Starting parameters (the target's block, or the defaults).
        world: World of an on-ground recording.
        lifted: The recording is of the lifted robot.
        world_friction: Ground friction of ``world`` (the start when ``start`` sets none).
        progress: Called as ``progress(message)`` after each stage (or ``None``).

    Returns:
        The fit.
    """
    wall = time.perf_counter()
    flat0 = start.flat(robot, world_friction)
    from snake_hardware.sim.mjcf import SimOptions

    dt = SimOptions().timestep  # the physics step of every twin simulate() builds
    if lifted:
        fit = _fit_servos(rec, robot, start, flat0, dt, progress)
        held = ["contact.ground_friction"]
    else:
        fit = _fit_friction(rec, robot, start, flat0, world, progress)
        held = servo_names(robot)
    names, fitted, rel, rollouts, rms_before, final, intervals = fit
    identified = {n: _identified(n, rel[n]) for n in names}
    q, _ = simulate(rec, robot, final, world, lifted)
    r_final = _joint_residual(rec, q) if lifted else _load_residual(rec, q)
    return Fit(variant="lifted" if lifted else "on the ground", names=names,
               start={n: flat0[n] for n in names}, fitted=fitted, rel_std=rel, identified=identified,
               timestep_s=dt, rms_before=rms_before, rms_after=float(np.sqrt(np.mean(r_final ** 2))),
               rollouts=rollouts + 1, wall_s=time.perf_counter() - wall, params=final, held=held,
               intervals=intervals)


def _fit_servos(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float], dt: float,
                progress: Any) -> tuple[list[str], dict[str, float], dict[str, float], int, float, TwinParams,
                                        dict[str, tuple[float, float]]]:
    """Servo model and latency per joint type from a lifted recording (one least-squares fit).

    ``kp``, ``kv`` and ``armature`` are fitted as log values (positive, relative steps);
    ``frictionloss`` (N m) and ``latency_s`` (fitted in physics steps, which the twin blends
    continuously) as plain values bounded below by 0.
    """
    from scipy.optimize import least_squares

    names = servo_names(robot)
    log = np.array([n.rsplit(".", 1)[-1] in _LOG_FIELDS for n in names])
    scale = np.array([dt if n.endswith("latency_s") else 1.0 for n in names])  # latency: s <-> steps
    types = joint_types(robot)
    moving = {t: float(np.ptp(rec.q_cmd[:, [i for i, j in enumerate(robot.joints) if j.type == t]], axis=0).max())
              >= _MIN_MOTION_RAD for t in types}
    free = np.array([moving[n.split(".")[1]] for n in names])
    count = [0]

    def values_of(x: np.ndarray) -> dict[str, float]:
        v = np.where(log, np.exp(x), x) * scale
        return {n: float(val) for n, val in zip(names, v, strict=True)}

    def residual(z: np.ndarray) -> np.ndarray:
        count[0] += 1
        x = x0.copy()
        x[free] = z
        q, _ = simulate(rec, robot, start.with_flat(values_of(x)), None, lifted=True)
        return _joint_residual(rec, q)

    raw = np.array([flat0[n] for n in names]) / scale
    x0 = np.where(log, np.log(np.maximum(raw, 1e-12)), raw)
    lower = np.where(log, -np.inf, 0.0)
    upper = np.where(log, np.inf, np.where([n.endswith("latency_s") for n in names], MAX_LATENCY_STEPS, np.inf))
    r0 = residual(x0[free])
    # The delay is the least convex direction (a fit from the start latency can settle where a
    # softer servo mimics it): start from the best of a few common latencies, every type alike.
    lat = np.array([n.endswith("latency_s") for n in names]) & free
    if lat.any():
        costs = []
        for steps in _LATENCY_STARTS:
            trial = x0.copy()
            trial[lat] = steps
            r = residual(trial[free])
            costs.append(float(r @ r))
        x0[lat] = _LATENCY_STARTS[int(np.argmin(costs))]
    sol = least_squares(residual, x0[free], bounds=(lower[free], upper[free]), method="trf", diff_step=_DIFF_STEP,
                        x_scale=np.where(log, 1.0, np.where(scale != 1.0, 1.0, _FRICTION_SCALE))[free],
                        xtol=1e-8, ftol=1e-10, max_nfev=_MAX_NFEV)
    x = x0.copy()
    x[free] = sol.x
    if progress is not None:
        progress(f"servo fit: rms {np.sqrt(np.mean(r0 ** 2)):.4g} -> {np.sqrt(np.mean(sol.fun ** 2)):.4g} "
                 f"in {count[0]} rollouts ({sol.message})")
    # First-order standard deviations: sqrt diag of s^2 (J^T J)^+ in the fitted variables.
    std = np.full(len(names), math.inf)
    dof = max(sol.fun.size - int(free.sum()), 1)
    cov = float(sol.fun @ sol.fun) / dof * np.linalg.pinv(sol.jac.T @ sol.jac)
    std[free] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    fitted = values_of(x)
    rel: dict[str, float] = {}
    for i, n in enumerate(names):
        if log[i]:
            rel[n] = float(std[i])                       # std of log p: relative
        elif n.endswith("latency_s"):
            rel[n] = float(std[i])                       # in physics steps: identified within one
        else:
            rel[n] = float(std[i] / max(abs(fitted[n]), _FRICTION_FLOOR))
    keep = {n: flat0[n] for n in names if not _identified(n, rel[n])}  # not told by the recording: held
    fitted.update(keep)
    return names, fitted, rel, count[0], float(np.sqrt(np.mean(r0 ** 2))), start.with_flat(fitted), {}


def _identified(name: str, spread: float) -> bool:
    """Whether a fitted parameter is told by the recording (relative std, or std in steps for a latency)."""
    return spread <= (LATENCY_STD_STEPS if name.endswith("latency_s") else IDENTIFIABLE_REL_STD)


def _fit_friction(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float],
                  world: str | Path | None, progress: Any
                  ) -> tuple[list[str], dict[str, float], dict[str, float], int, float, TwinParams,
                             dict[str, tuple[float, float]]]:
    """Ground friction from an on-ground recording (module docstring).

    A scan of log mu over :data:`_FRICTION_RANGE`, Brent's method between the best point's
    neighbours, probes either side of the best (:data:`_FRICTION_PROBES`), then the 95 %
    profile-likelihood interval over every evaluated point (:func:`profile_interval`).
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

    def residual(log_mu: float) -> np.ndarray:
        key = round(float(log_mu), 12)
        if key not in cache:
            count[0] += 1
            q, _ = simulate(rec, robot, start.with_flat({name: math.exp(log_mu)}), world)
            cache[key] = _load_residual(rec, q)
        return cache[key]

    def cost(log_mu: float) -> float:
        r = residual(log_mu)
        return float(r @ r)

    r0 = residual(math.log(flat0[name]))
    grid = np.linspace(math.log(_FRICTION_RANGE[0]), math.log(_FRICTION_RANGE[1]), _FRICTION_GRID)
    costs = [cost(g) for g in grid]
    k = int(np.argmin(costs))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    sol = minimize_scalar(cost, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
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
    interval = (math.exp(lower), math.exp(upper))
    if math.isfinite(lower) and math.isfinite(upper):
        # The interval's centre in log mu: contact's roughness moves it less than the best single point.
        fitted = math.exp((lower + upper) / 2)
        rel = math.exp((upper - lower) / 2) - 1.0
    else:
        fitted, rel = math.exp(best), math.inf
    if progress is not None:
        progress(f"ground friction {fitted:.4g} (95 % interval {interval[0]:.4g} to {interval[1]:.4g}, best "
                 f"{math.exp(best):.4g} at cost {c_min:.4g}, roughness {roughness:.3g}) after {count[0]} rollouts "
                 f"({sol.message})")
    if not _identified(name, rel):
        fitted = flat0[name]   # not told by the recording: held
    return ([name], {name: fitted}, {name: rel}, count[0], float(np.sqrt(np.mean(r0 ** 2))),
            start.with_flat({name: fitted}), {name: interval})


def write_block(fit: Fit, robot: RobotModel, target: str, bag: Path) -> Path:
    """Write the fitted parameters into the target's ``twin:`` block; the rest of its file is kept.

    Parameters the fit did not identify keep the block's value (or none); a ``provenance``
    entry in the block records the bag, the variant, the date and the residuals.
    """
    import datetime

    import yaml

    from snake_core.robot import calibration_path, load_twin_params

    path = calibration_path(robot.name, target)
    data: dict[str, Any] = {}
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
    current, _ = load_twin_params(robot.name, target)
    values = {n: fit.fitted[n] for n in fit.names if fit.identified[n]}
    block = current.with_flat(values).to_yaml_dict()
    block = {k: _rounded(v) for k, v in block.items()}
    block["provenance"] = {
        "command": f"snake twin identify {bag} --robot {robot.name} --target {target}"
                   f"{' --lifted' if fit.variant == 'lifted' else ''} --write",
        "date": datetime.date.today().isoformat(), "variant": fit.variant,
        "residual_rms_before": round(fit.rms_before, 5), "residual_rms_after": round(fit.rms_after, 5),
        "not_identified": [n for n in fit.names if not fit.identified[n]],
    }
    data["twin"] = block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return float(f"{value:.6g}") if isinstance(value, float) else value


def html_report(fit: Fit, rec: Recording, robot: RobotModel, start: TwinParams, out: Path,
                world: str | Path | None = "flat") -> Path:
    """A self-contained HTML page: the parameter table and recorded vs twin motion before and after the fit.

    One joint per type (its largest commanded motion) for a lifted fit, the head path for an
    on-ground one; figures by matplotlib, embedded as PNG (no network).
    """
    import base64
    import html
    import io

    import matplotlib.pyplot as plt

    lifted = fit.variant == "lifted"
    q0, xy0 = simulate(rec, robot, start, world, lifted)
    q1, xy1 = simulate(rec, robot, fit.params, world, lifted)
    if lifted:
        types = joint_types(robot)
        fig, axes = plt.subplots(len(types), 1, figsize=(9, 2.6 * len(types)), sharex=True, squeeze=False)
        for ax, t in zip(axes[:, 0], types, strict=True):
            idx = [i for i, j in enumerate(robot.joints) if j.type == t]
            i = idx[int(np.argmax(np.ptp(rec.q_cmd[:, idx], axis=0)))]
            ax.plot(rec.t_state, rec.q_state[:, i], "k", lw=1.2, label="robot")
            ax.plot(rec.t_state, q0[:, i], "C1", lw=0.9, label="twin, start")
            ax.plot(rec.t_state, q1[:, i], "C0--", lw=0.9, label="twin, fitted")
            ax.set_ylabel(f"{robot.joints[i].name} (rad)")
        axes[-1, 0].set_xlabel("time (s)")
        axes[0, 0].legend(loc="upper right", fontsize=8)
    else:
        fig, ax = plt.subplots(figsize=(6, 6))
        for xy, style, label in ((rec.xy_pose, "k", "robot"), (xy0 - xy0[0] + rec.xy_pose[0], "C1", "twin, start"),
                                 (xy1 - xy1[0] + rec.xy_pose[0], "C0--", "twin, fitted")):
            ax.plot(xy[:, 0], xy[:, 1], style, label=label)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_aspect("equal")
        ax.legend()
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    png = base64.b64encode(buf.getvalue()).decode()
    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{fit.start[n]:.5g}</td><td>{fit.fitted[n]:.5g}</td>"
                   f"<td>{fit.rel_std[n]:.3g}</td><td>{'yes' if fit.identified[n] else 'no'}</td></tr>"
                   for n in fit.names)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>snake twin identify: {html.escape(robot.name)}"
            f"</title></head><body><h1>Twin identification ({html.escape(fit.variant)})</h1>"
            f"<p>Recording {html.escape(str(rec.path))}; residual RMS {fit.rms_before:.4g} before, "
            f"{fit.rms_after:.4g} after ({fit.rollouts} rollouts, {fit.wall_s:.1f} s).</p>"
            "<table border='1' cellpadding='3'><tr><th>parameter</th><th>start</th><th>fitted</th>"
            "<th>spread (relative std; latency: physics steps; ground friction: 95 % interval's relative "
            "half-width)</th><th>identified</th></tr>"
            f"{rows}</table><img alt='recorded and twin motion' src='data:image/png;base64,{png}'></body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
