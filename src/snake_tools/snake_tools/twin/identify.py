"""Fit the twin's physics (a calibration target's ``twin:`` block) to a recorded run of the robot.

The recording gives what the robot was told (``/joint_commands``) and what it did
(``/joint_states``, and the head pose of mocap or ground truth). The twin
(:class:`snake_hardware.sim.twin.SimTwin`) is driven by the same commands on the bag's time
base from the recorded initial joint angles (:func:`simulate`). Two recordings, two fits:

* **lifted** (the robot hanging from its head, ``snake twin excite --variant lifted``; the
  twin's :class:`~snake_hardware.sim.mjcf.SimOptions` ``lifted``): the servo model of every
  joint type, p = (``kp``, ``kv``, ``armature``, ``frictionloss``, ``latency_s``) per type,
  minimising ``r(p) = (q_twin(p) - q_robot) / sigma`` over every joint sample (``sigma``: the
  noise model, below) with ``scipy.optimize.least_squares`` (trust-region reflective; ``kp``,
  ``kv``, ``armature`` as log values, ``frictionloss`` and the latency, in physics steps, plain;
  every variable within its :data:`PHYSICAL_RANGE`; a forward-difference Jacobian, one rollout
  of the whole recording per column, the columns rolled out in one batch in C by
  :class:`LiftedRollout`, bit for bit :func:`simulate`'s joint angles). The twin blends a
  fractional latency over one physics step, so the latency is a continuous parameter. The
  refinement stops when an iteration lowers ``|r|^2`` by less than :data:`_COST_TOL` times
  ``max(1, |r|^2 / (m - n))``: ``|r|^2`` rises by that scale over one standard deviation of a
  parameter (:func:`noise_covariance`), so the least left is a fraction of one away. Global
  stage: the latency is the least convex direction (a softer, more damped servo mimics a
  delay: a local minimum), so a short refinement (:data:`_START_NFEV` evaluations) runs from
  each of :data:`_LATENCY_STARTS` and the best is refined to the end. On a recording at least
  :data:`_HEAD_MIN_RATIO` times its head long (up to :data:`_HEAD_S` after the first command
  that moves), the starts and a first refinement of the best roll out only the head
  (:func:`recording_head`), and the refinement on the whole recording starts from there (it
  stops after one iteration if that lowers the cost by less than the tolerance).
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

Noise model (:func:`noise_model`): per joint sample ``sigma^2 = res^2 / 12 + qdot^2 (s_t^2 +
h^2 / 12) + s_rest^2``: the encoder's rounding, the angle's change over the stamp's error (the
stamps' spread about their grid, and the twin's physics step h to which it rounds them) and the
angles' spread at rest. Uncertainty of the servo fit (:func:`noise_covariance`): the covariance
of the fitted variables is ``(J^T J)^-1`` of the weighted residual (Ljung, System
Identification, eq. 9.18), scaled up by ``|r|^2 / (m - n)`` when that exceeds 1, never down; a
direction of ``J^T J`` whose standard deviation exceeds :data:`UNBOUNDED_STD` is not excited
and its parameters' spreads are infinite. The square-root diagonal is the relative standard
deviation of a log-fitted parameter, the standard deviation in physics steps of a latency, and
that over max(|value|, 5 mN m) of a friction loss. Adequacy (:func:`adequacy`): the weighted
residual's RMS against :data:`ADEQUACY_THRESHOLD`, its whiteness per joint type and its
features (lag, dead band, speed saturation); a lifted fit that is not adequate identifies
nothing. The ground friction's spread
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
:data:`IDENTIFIABLE_REL_STD` (latency: :data:`LATENCY_STD_STEPS`), is infinite, or lies on its
physical range's bound is reported as not identified and keeps its starting value: the
recording did not excite it.

Structure (:func:`choose_structure`): a lifted fit with ``structure="auto"`` (``snake twin
identify``'s default) fits the servo model without gear play (``none``) and with a play per joint
type (``backlash``, :data:`PHYSICAL_RANGE` bounding it; from the ``none`` fit's optimum, its global
stage varying the play from each of :data:`_BACKLASH_STARTS` instead of the latency) and keeps the
one of the least BIC of the noise-weighted residual; the report is the fit's ``structure``.

Why scipy and not ``mujoco.sysid``: the twin's command path (per-type latency, the target
checks of :meth:`SimTwin.set_targets`) and the parameters' mapping to several MJCF fields with
derived defaults (:mod:`snake_core.twin_params`) live in :class:`SimTwin`; rolling out SimTwin
itself keeps one code path for the fit, ``snake twin replay`` and every experiment, where the
toolbox rolls out a bare ``MjModel`` of its own; and its HTML report loads plotly from a CDN.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.bag.series import BagSeries, read_series

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
MAX_LIFTED_TRAVEL_M = 0.05
"""Largest head travel of a lifted recording (the head is held), m: more is a run on the ground."""
_MIN_MOTION_RAD = 0.02      # rad, a joint type whose commands move less than this is not excited
_MIN_TRAVEL_M = 0.02        # m, a head that moves less identifies no ground friction
_ROLLOUT_BYTES = 256 * 2 ** 20  # states one mujoco.rollout call may return (a longer batch is split)
_COST_TOL = 0.1            # the refinement stops when an iteration lowers |r|^2 by less than this times max(1, s^2)
_DIFF_STEP = 1e-2           # relative step of the forward-difference Jacobian (log space)
_LOG_FIELDS = ("kp", "kv", "armature")  # fitted as log values
_FRICTION_SCALE = 0.01      # N m, typical size of a dry friction (x_scale of the fit)
_FRICTION_FLOOR = 0.005     # N m, a friction loss below this is judged on this absolute size
_LATENCY_STARTS = (0.0, 5.0, 10.0, 20.0)  # physics steps of the global stage's starts
_START_NFEV = 3             # evaluations (each with its Jacobian of rollouts) of a start's short refinement
_MAX_NFEV = 80              # least-squares iterations (each one Jacobian of rollouts)
_HEAD_S = 20.0              # s, the global stage and a first refinement roll out only the recording's first this long
_HEAD_MIN_RATIO = 1.5       # ... when the recording is at least this many times longer (else all of it)
_FRICTION_RANGE = (0.1, 2.0)  # ground friction scanned (sliding coefficient)
_FRICTION_GRID = 25         # points of the scan, log-spaced
_FRICTION_PROBES = (0.03, 0.07, 0.15)  # steps in log mu evaluated either side of the best (interval resolution)
_CHI2_95 = 3.84             # 95 % quantile of chi-square with one degree of freedom
_ROUGHNESS_STEP = 0.005     # step in log mu of the probes of the cost's roughness (its smooth part is flat there)
LOAD_WINDOW_S = 1.0
"""Window of the tracking-error RMS compared on the ground, s."""
ENCODER_TICKS = 4096
"""Encoder ticks per turn of the servos' position reading (Dynamixel X-series), the noise model's resolution."""
ADEQUACY_THRESHOLD = 2.0
"""A fit is adequate when its joint residual's RMS is at most this many times the noise floor."""
WHITE_LAGS = 20
"""Lags (samples) of the residual's autocorrelation tested for whiteness."""
WHITE_OUTSIDE = 0.25
"""A joint type's residual is white when at most this fraction of its autocorrelations lie outside +-1.96/sqrt(N)."""
UNBOUNDED_STD = 5.0
"""A direction of the fitted variables with a standard deviation above this (log units, physics steps,
scaled friction) is not excited by the recording: its parameters get an unbounded spread."""
PHYSICAL_RANGE: dict[str, tuple[float, float]] = {
    "kp": (0.1, 1000.0),           # N m/rad: from a limp hobby servo to a stiff industrial joint
    "kv": (1e-4, 100.0),           # N m s/rad
    "armature": (1e-4, 1.0),       # kg m^2: rotor 1e-8..1e-6 kg m^2 times a gear ratio of 100..1000 squared
    "frictionloss": (0.0, 5.0),    # N m: at most a few stall torques
    "latency_s": (0.0, MAX_LATENCY_STEPS * 0.004),  # s (bounded in physics steps)
    "backlash_rad": (1e-4, math.radians(1.0)),  # rad: X-series gear trains have 0.1 to 0.4 deg; above 1 deg is worn
}
"""Physical range of each fitted servo field (the bounds of the fit; a value on a bound is not identified)."""
STRUCTURES = ("none", "backlash")
"""Servo model structures a lifted fit chooses between (module docstring, "Structure"): ``none``, today's
model (:data:`SERVO_FIELDS` per joint type); ``backlash``, that and a gear play ``backlash_rad`` per joint type."""
_BACKLASH_START = math.radians(0.2)  # rad, the play a cold backlash fit starts from (a new X-series gear train's)
_BACKLASH_STARTS = (0.05, 0.2, 0.4, 0.7)  # deg, the plays (every type at once) of a warm backlash fit's global stage
_BACKLASH_UNIT = 1e-3      # rad, the play is fitted in mrad (the Jacobian's step and x_scale in that unit)
FEATURE_EXPLAINED = 0.2
"""A residual feature (lag, dead band) is reported when it explains at least this fraction of a type's residual."""


class IdentifyError(ValueError):
    """A recording the fit cannot use (one line naming the bag and what is missing)."""


@dataclass(frozen=True)
class NoiseModel:
    """What a recording's ``joint_states`` can tell, per sample (module docstring, "Noise model").

    Attributes:
        resolution_rad: Encoder resolution, rad (``2 pi / ENCODER_TICKS``).
        stamp_std_s: Standard deviation of the stamps about their regular grid, s.
        rest_std_rad: Standard deviation of the angles at rest beyond the resolution, rad.
        step_s: The twin's physics step (it samples at stamps rounded to it), s.
        sigma: Standard deviation of each sample (samples, joints), rad.
    """

    resolution_rad: float
    stamp_std_s: float
    rest_std_rad: float
    step_s: float
    sigma: np.ndarray

    @property
    def floor_rad(self) -> float:
        """The noise floor: RMS of the per-sample standard deviations, rad."""
        return float(np.sqrt(np.mean(self.sigma ** 2)))

    def as_dict(self) -> dict[str, float]:
        """Plain data (the per-sample sigma left out)."""
        return {"resolution_rad": self.resolution_rad, "stamp_std_s": self.stamp_std_s,
                "rest_std_rad": self.rest_std_rad, "step_s": self.step_s, "noise_floor_rad": self.floor_rad}


def stamp_spread(t: np.ndarray) -> tuple[float, float]:
    """``(period, std)`` of stamps (s): the median interval, and the stamps' spread about their regular grid.

    Each sample's index on the grid is counted interval by interval (a dropped sample skips
    one); the grid is the least-squares line through (index, stamp).
    """
    t = np.asarray(t, dtype=float)
    dts = np.diff(t)
    if len(t) < 3:
        return (float(np.median(dts)) if len(dts) else math.nan), 0.0
    period = float(np.median(dts))
    k = np.concatenate([[0.0], np.cumsum(np.maximum(np.round(dts / period), 1.0))])
    return period, float(np.std(t - np.polyval(np.polyfit(k, t, 1), k)))


def noise_model(rec: Recording, step_s: float, ticks: int = ENCODER_TICKS) -> NoiseModel:
    """The noise model of a recording's joint angles (module docstring, "Noise model").

    ``sigma^2 = res^2 / 12 + qdot^2 (s_t^2 + h^2 / 12) + s_rest^2`` per sample and joint:
    the encoder's rounding (uniform over one tick, ``res = 2 pi / ticks``), the angle's change
    over the stamp's error (``s_t``: the stamps' spread about their regular grid, missing
    samples skipped; ``h``: the twin's physics step, to which it rounds every stamp) at the
    recorded speed ``qdot`` (central differences on the stamps), and what the angles show at
    rest (``s_rest``: the spread of the first differences, over sqrt 2, of samples whose
    command did not move over the last 0.2 s, less the resolution's part; 0 without rest).
    """
    res = 2.0 * math.pi / ticks
    t = rec.t_state
    stamp_std = stamp_spread(t)[1] if len(t) > 2 else 0.0
    qdot = np.gradient(rec.q_state, t, axis=0) if len(t) > 2 else np.zeros_like(rec.q_state)
    held = np.clip(np.searchsorted(rec.t_cmd, t, side="right") - 1, 0, len(rec.t_cmd) - 1)
    since = np.clip(np.searchsorted(rec.t_cmd, t - 0.2, side="right") - 1, 0, len(rec.t_cmd) - 1)
    still = np.all(np.abs(rec.q_cmd[held] - rec.q_cmd[since]) < 1e-9, axis=1)
    rest = still[1:] & still[:-1]
    rest_std = 0.0
    if rest.sum() >= 10:
        spread2 = float(np.mean(np.diff(rec.q_state, axis=0)[rest] ** 2)) / 2.0
        rest_std = math.sqrt(max(spread2 - res ** 2 / 12.0, 0.0))
    sigma = np.sqrt(res ** 2 / 12.0 + qdot ** 2 * (stamp_std ** 2 + step_s ** 2 / 12.0) + rest_std ** 2)
    return NoiseModel(res, stamp_std, rest_std, step_s, sigma)


def adequacy(rec: Recording, q: np.ndarray, noise: NoiseModel, robot: RobotModel) -> dict[str, Any]:
    """The verdict on a model (module docstring, "Adequacy"): residual against the noise floor, whiteness, features.

    Returns:
        ``ratio`` (RMS of the residual in units of each sample's sigma), ``adequate`` (ratio at
        most :data:`ADEQUACY_THRESHOLD`), ``threshold``, ``joint_rms_rad``, and per joint type
        ``by_type``: its ratio, whiteness (lag-1 autocorrelation, fraction of the first
        :data:`WHITE_LAGS` autocorrelations outside +-1.96/sqrt(N), ``white``) and ``features``.
    """
    e = q - rec.q_state
    ratio = float(np.sqrt(np.mean((e / noise.sigma) ** 2)))
    by_type: dict[str, Any] = {}
    for jtype in joint_types(robot):
        idx = [i for i, j in enumerate(robot.joints) if j.type == jtype]
        by_type[jtype] = {"ratio": float(np.sqrt(np.mean((e[:, idx] / noise.sigma[:, idx]) ** 2))),
                          **_whiteness(e[:, idx]), "features": residual_features(rec, e, idx)}
    return {"ratio": ratio, "adequate": ratio <= ADEQUACY_THRESHOLD, "threshold": ADEQUACY_THRESHOLD,
            "joint_rms_rad": float(np.sqrt(np.mean(e ** 2))), "by_type": by_type}


def _whiteness(e: np.ndarray) -> dict[str, Any]:
    """Autocorrelation test of residual columns (Ljung, System Identification, 16.6: ``|rho(k)| <= 1.96/sqrt(N)``)."""
    n = e.shape[0]
    lags = min(WHITE_LAGS, n - 1)
    rho = np.zeros((lags, e.shape[1]))
    for j in range(e.shape[1]):
        x = e[:, j] - e[:, j].mean()
        c0 = float(x @ x)
        if c0 <= 0.0:
            continue
        rho[:, j] = [float(x[k:] @ x[:-k]) / c0 for k in range(1, lags + 1)]
    outside = float(np.mean(np.abs(rho) > 1.96 / math.sqrt(n)))
    return {"lag1_autocorrelation": float(np.mean(rho[0])) if lags else 0.0, "outside_fraction": outside,
            "white": outside <= WHITE_OUTSIDE}


def residual_features(rec: Recording, e: np.ndarray, idx: list[int]) -> dict[str, Any]:
    """What a joint type's residual looks like: lag, dead band, speed saturation.

    Least squares of the residual ``e = q_twin - q_robot`` on two regressors at once, pooled
    over the type's joints: the recorded speed (``e ~ lag * qdot``: a robot later than the
    twin by ``lag``) and the sign of the recorded tracking error (``e ~ band * sign(q_cmd -
    q)``: a robot stopping ``band`` short of its goal, a dead band); each with the fraction of
    the residual's sum of squares it explains alone. ``speed_ratio`` is the 99th percentile of
    the recorded speed over the twin's (well below 1: the robot's speed saturates where the
    twin's does not).
    ``found`` lists those that explain at least :data:`FEATURE_EXPLAINED` (and ``speed
    saturation`` when ``speed_ratio < 0.8``).
    """
    t = rec.t_state
    qdot = np.gradient(rec.q_state[:, idx], t, axis=0)
    held = np.clip(np.searchsorted(rec.t_cmd, t, side="right") - 1, 0, len(rec.t_cmd) - 1)
    sign = np.sign(rec.q_cmd[held][:, idx] - rec.q_state[:, idx])
    y = e[:, idx].ravel()
    total = float(y @ y)
    out: dict[str, Any] = {}
    found = []
    for key, reg in (("lag_s", qdot.ravel()), ("dead_band_rad", sign.ravel())):
        rr = float(reg @ reg)
        coef = float(reg @ y) / rr if rr > 0 else 0.0
        explained = coef * coef * rr / total if total > 0 else 0.0
        out[key] = coef
        out[key.rsplit("_", 1)[0] + "_explained"] = explained
        if explained >= FEATURE_EXPLAINED:
            found.append(key.rsplit("_", 1)[0].replace("_", " "))
    twin_dot = np.gradient(rec.q_state[:, idx] + e[:, idx], t, axis=0)
    p_twin = float(np.percentile(np.abs(twin_dot), 99))
    out["speed_ratio"] = float(np.percentile(np.abs(qdot), 99)) / p_twin if p_twin > 0 else 1.0
    if out["speed_ratio"] < 0.8:
        found.append("speed saturation")
    out["found"] = found
    return out


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
    def start(self) -> float:
        """First stamp of the recording (a command or a joint state), s: where a replay starts."""
        return float(min(self.t_cmd[0], self.t_state[0]))

    @property
    def duration(self) -> float:
        """Length of the recording, s."""
        return float(max(self.t_cmd[-1], self.t_state[-1])) - self.start


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
    xy, _, q, _ = run_recorded(twin, rec.t_cmd, rec.q_cmd, rec.t_pose, rec.t_state, rec.start)
    return q, xy


def recording_head(rec: Recording, seconds: float) -> tuple[Recording, np.ndarray]:
    """The first ``seconds`` of a recording: commands, samples and poses stamped up to ``rec.start + seconds``.

    :attr:`Recording.start` is the recording's first stamp, which :func:`simulate` and
    :class:`LiftedRollout` start from, so the head's rollout is the recording's rollout up to its last kept sample,
    bit for bit (a lifted twin's controls depend on no later command).

    Returns:
        The head, and the mask of ``rec``'s ``joint_states`` samples it keeps.
    """
    end = rec.start + seconds
    keep_cmd, keep, keep_pose = rec.t_cmd <= end, rec.t_state <= end, rec.t_pose <= end
    head = Recording(rec.path, rec.t_cmd[keep_cmd], rec.q_cmd[keep_cmd], rec.t_state[keep], rec.q_state[keep],
                     rec.t_pose[keep_pose], rec.xy_pose[keep_pose], rec.pose_source)
    return head, keep


def head_seconds(rec: Recording, seconds: float | None = None) -> float:
    """Length of the head the servo fit's global stage rolls out: up to ``seconds`` after the first command that moves.

    A recording may begin at rest; the head counts its motion from the first command farther
    than a tenth of the least fitted motion (2 mrad) from the first one, measured from the
    recording's first stamp. ``seconds`` defaults to :data:`_HEAD_S`.
    """
    moved = np.flatnonzero(np.abs(rec.q_cmd - rec.q_cmd[0]).max(axis=1) > _MIN_MOTION_RAD / 10)
    lead = float(rec.t_cmd[moved[0]]) - rec.start if len(moved) else 0.0
    return lead + (_HEAD_S if seconds is None else seconds)


class LiftedRollout:
    """The lifted twin driven by a recording, many parameter sets at once in C (``mujoco.rollout``).

    A lifted run's commands do not depend on the state: the controls of every physics step
    (the recorded commands at their stamps rounded to the physics step, as :func:`simulate`
    applies them, through the per-type latency and its blend) are computed at once per
    parameter set (:meth:`SimTwin.control_sequence`), then every set is rolled out open loop
    from the twin's reset state by ``mujoco.rollout`` on ``nthread`` threads (it releases the
    GIL). The joint angles equal :func:`simulate`'s (``lifted=True``) bit for bit; that stays
    the reference for replay and experiments.

    Args:
        rec: The recording.
        robot: The robot recorded.
        nthread: Threads of the rollouts.
    """

    def __init__(self, rec: Recording, robot: RobotModel, nthread: int = 1) -> None:
        import mujoco

        from snake_hardware.sim.mjcf import SimOptions

        self.rec, self.robot, self.nthread = rec, robot, max(int(nthread), 1)
        self.options = SimOptions(lifted=True)
        self.t0 = rec.start
        self._mujoco = mujoco
        dt = self.options.timestep
        # Physics step of each command and sample, rounded as run_recorded rounds them.
        self._cmd_steps = np.array([round((t - self.t0) / dt) for t in rec.t_cmd], dtype=np.int64)
        self._state_steps = np.array([round((t - self.t0) / dt) for t in rec.t_state], dtype=np.int64)
        self._nstep = int(max(self._cmd_steps.max(), self._state_steps.max()))
        # MjData per thread, per model structure (joints with gear play and the state's size).
        self._datas: dict[tuple[Any, ...], list[Any]] = {}

    def _prepare(self, params: TwinParams) -> _Prepared:
        """One parameter set's model, initial state and warm start, controls, and where its joint angles are."""
        from snake_hardware.sim.twin import SimTwin

        mj = self._mujoco
        twin = SimTwin(self.robot, None, twin_params=params, options=self.options)
        twin.reset(targets=self.rec.q_state[0])
        spec = mj.mjtState.mjSTATE_FULLPHYSICS.value
        state0 = np.empty(mj.mj_stateSize(twin.model, spec))
        mj.mj_getState(twin.model, twin.data, state0, spec)
        ctrl = twin.control_sequence(self._cmd_steps, self.rec.q_cmd, self._nstep)
        # The state starts with the time, then qpos (mjSTATE_FULLPHYSICS).
        play_idx, play_qadr = twin.joint_play_qpos_addresses
        return _Prepared(twin.model, state0, twin.data.qacc_warmstart.copy(), ctrl, 1 + twin.joint_qpos_addresses,
                         play_idx, 1 + play_qadr)

    def joint_angles(self, params_list: list[TwinParams]) -> list[np.ndarray]:
        """The twin's joint angles at the recording's ``joint_states`` stamps, one array per parameter set.

        Parameter sets of different model structures (gear play on some joint types, none on
        others) are rolled out in separate batches.
        """
        mj = self._mujoco
        from mujoco import rollout

        prepared = [self._prepare(p) for p in params_list]
        steps = self._state_steps
        out: list[np.ndarray | None] = [None] * len(prepared)
        if self._nstep == 0:
            return [np.tile(p.angles(p.state0[None, :])[0], (len(steps), 1)) for p in prepared]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, p in enumerate(prepared):
            groups.setdefault(p.structure, []).append(i)
        for key, members in groups.items():
            first = prepared[members[0]]
            datas = self._datas.get(key, [])
            if len(datas) < self.nthread:
                datas = self._datas[key] = [mj.MjData(first.model) for _ in range(self.nthread)]
            # Batches whose states (every step's) stay within _ROLLOUT_BYTES, at least one per thread.
            size = max(_ROLLOUT_BYTES // (self._nstep * first.state0.size * 8), self.nthread, 1)
            for lo in range(0, len(members), size):
                batch = [prepared[i] for i in members[lo:lo + size]]
                state, _ = rollout.rollout([p.model for p in batch], datas[:self.nthread],
                                           np.stack([p.state0 for p in batch]), np.stack([p.ctrl for p in batch]),
                                           initial_warmstart=np.stack([p.warmstart for p in batch]))
                # The state after step s is the rollout's row s - 1; a sample at step 0 is the initial state.
                for b, (i, p) in enumerate(zip(members[lo:lo + size], batch, strict=True)):
                    rows = state[b][np.maximum(steps - 1, 0)]
                    rows[steps == 0] = p.state0
                    out[i] = p.angles(rows)
        return [q for q in out if q is not None]


@dataclass(frozen=True)
class _Prepared:
    """One parameter set ready for ``mujoco.rollout`` (:meth:`LiftedRollout.joint_angles`)."""

    model: Any
    state0: np.ndarray
    warmstart: np.ndarray
    ctrl: np.ndarray
    qadr: np.ndarray       # each joint's (motor-side) angle in the state
    play_idx: np.ndarray   # joints with gear play
    play_adr: np.ndarray   # their play hinge's angle in the state

    @property
    def structure(self) -> tuple[Any, ...]:
        """What sets share one batch: the joints with play and the state's size."""
        return (self.state0.size, *self.play_idx.tolist())

    def angles(self, states: np.ndarray) -> np.ndarray:
        """Joint angles of rows of states (with play: motor side plus play, as :meth:`SimTwin.joint_positions`)."""
        from snake_hardware.sim.twin import shaft_values  # mujoco: only when fitting

        return shaft_values(states, self.qadr, self.play_idx, self.play_adr)


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
class _Stage:
    """What one fitting stage returns."""

    names: list[str]
    fitted: dict[str, float]
    rel: dict[str, float]
    rollouts: int
    rms_before: float
    params: TwinParams
    intervals: dict[str, tuple[float, float]]
    identified: dict[str, bool]
    reasons: dict[str, str]
    starts: dict[str, Any]
    best: dict[str, float] = field(default_factory=dict)
    free: int = 0
    """Variables fitted (the parameters of the joint types that move)."""
    cost: float = math.nan
    """``|r|^2`` of the noise-weighted residual at the least-squares optimum, over the whole recording."""
    """The least-squares optimum, every fitted value as the fit left it (``fitted`` holds the
    parameters not identified at their start)."""


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
    reasons: dict[str, str] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    adequacy_before: dict[str, Any] = field(default_factory=dict)
    adequacy_after: dict[str, Any] = field(default_factory=dict)
    starts: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] | None = None
    structure: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data: per parameter start, fitted, spread, 95 % interval, identified and why; residuals, verdict."""
        params: dict[str, dict[str, Any]] = {
            n: {"start": self.start[n], "fitted": self.fitted[n], "relative_std": self.rel_std[n],
                "identified": self.identified[n], "why": self.reasons.get(n, "")} for n in self.names}
        for n, (lo, hi) in self.intervals.items():
            params[n]["interval"] = [lo, hi if math.isfinite(hi) else None]
        out = {
            "variant": self.variant,
            "parameters": params,
            "timestep_s": self.timestep_s,
            "not_identified": [n for n in self.names if not self.identified[n]] + self.held,
            "residual_rms_before": self.rms_before,
            "residual_rms_after": self.rms_after,
            "rollouts": self.rollouts,
            "wall_s": self.wall_s,
            "noise_floor_rad": self.noise.get("noise_floor_rad"),
            "noise_model": self.noise,
            "adequacy": {k: self.adequacy_after[k] for k in ("ratio", "adequate", "threshold")},
            "adequacy_detail": self.adequacy_after,
            "adequacy_before": self.adequacy_before.get("ratio"),
            "starts": self.starts,
            "structure": self.structure,
        }
        if self.validation is not None:
            out["validation"] = self.validation
        return out


def servo_names(robot: RobotModel, structure: str = "none") -> list[str]:
    """Parameters a lifted recording fits: ``servo.<type>.<field>`` of :data:`SERVO_FIELDS`.

    With the ``backlash`` structure, ``servo.<type>.backlash_rad`` of every type after them.
    """
    types = joint_types(robot)
    extra = ("backlash_rad",) if structure == "backlash" else ()
    return [f"servo.{t}.{f}" for t in types for f in SERVO_FIELDS] + [f"servo.{t}.{f}" for f in extra for t in types]


def identify(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None = "flat",
             lifted: bool = False, world_friction: float = 0.8, progress: Any = None,
             workers: int | None = None, structure: str = "none") -> Fit:
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
        workers: Threads of the lifted fit's rollouts (default: the CPU count).
        structure: The lifted fit's servo model structure (:data:`STRUCTURES`; default ``none``,
            today's model), or ``auto`` (``snake twin identify``'s default): fit each and keep the
            one of the least BIC (:func:`choose_structure`).

    Returns:
        The fit.

    Raises:
        ValueError: An unknown ``structure``.
    """
    if structure != "auto" and structure not in STRUCTURES:
        raise ValueError(f"structure: one of auto, {', '.join(STRUCTURES)}, got {structure!r}")
    wall = time.perf_counter()
    if progress is not None:
        report = progress

        def timed(message: str) -> None:  # every stage's line with the time since the fit began
            report(f"[{time.perf_counter() - wall:.1f} s] {message}")

        progress = timed
    flat0 = start.flat(robot, world_friction)
    from snake_hardware.sim.mjcf import SimOptions

    dt = SimOptions().timestep  # the physics step of every twin simulate() builds
    noise = noise_model(rec, dt)
    if lifted:
        travel = float(np.hypot(*np.ptp(rec.xy_pose, axis=0))) if len(rec.t_pose) else 0.0
        if travel > MAX_LIFTED_TRAVEL_M:
            raise IdentifyError(f"{rec.path}: the head moved {travel:.3f} m: not a lifted run (a lifted head moves at "
                                f"most {MAX_LIFTED_TRAVEL_M} m; drop --lifted to fit the ground friction)")
        stages: dict[str, _Stage] = {}
        candidates = STRUCTURES if structure == "auto" else (structure,)
        for k, name in enumerate(candidates):
            warm = stages["none"].best if "none" in stages else None
            if progress is not None:
                progress(f"structure candidate {k + 1}/{len(candidates)}: {name}")
            stages[name] = _fit_servos(rec, robot, start, flat0, dt, noise, progress, workers or os.cpu_count() or 1,
                                       name, warm)
        chosen, chosen_report = choose_structure(stages, rec.q_state.size)
        if progress is not None and len(stages) > 1:
            progress(f"structure: {chosen} (" + ", ".join(f"{c['name']} BIC {c['bic']:.6g}"
                                                          for c in chosen_report["candidates"]) + ")")
        stage = stages[chosen]
        stage.rollouts = sum(st.rollouts for st in stages.values())
        held = ["contact.ground_friction"]
    else:
        stage = _fit_friction(rec, robot, start, flat0, world, progress)
        held = servo_names(robot)
        played = any(start.servo_of(t).backlash_rad > 0 for t in joint_types(robot))
        chosen_report = {"chosen": "backlash" if played else "none", "criterion": None, "candidates": [],
                  "note": "an on-ground fit holds the servo model (and its structure) of its start"}
    extra = 0
    if lifted:
        best = start.with_flat(stage.best)
        sets = [start, stage.params] + ([best] if best != stage.params else [])
        qs = LiftedRollout(rec, robot, workers or os.cpu_count() or 1).joint_angles(sets)
        q_start, q = qs[0], qs[1]
        extra = len(sets) - 2
    else:
        q_start, _ = simulate(rec, robot, start, world, lifted)
        q, _ = simulate(rec, robot, stage.params, world, lifted)
    before = adequacy(rec, q_start, noise, robot)
    after = adequacy(rec, q, noise, robot)
    if lifted and extra and not after["adequate"]:
        # Not adequate: no value is identified and none is held at its start (module docstring,
        # "Adequacy"); the fitted twin is the least-squares optimum, every value as the fit left
        # it (holding an unidentified kv at its start moves the optimum of the others).
        q = qs[2]
        after = adequacy(rec, q, noise, robot)
        stage.params, stage.fitted = best, dict(stage.best)
    if lifted and not after["adequate"]:
        # A model that does not explain the recording fits biased values, however narrow their
        # spread: none of them is identified (--write changes nothing); the best fit's values are
        # still reported (and drive the report's figures and --validate).
        for n in stage.names:
            if stage.identified[n]:
                stage.identified[n] = False
                stage.reasons[n] = (f"the model does not explain the recording (residual {after['ratio']:.3g} x the "
                                    f"noise floor, above {ADEQUACY_THRESHOLD:g}); {stage.reasons[n]}")
    if progress is not None:
        told = [n for n in stage.names if stage.identified[n]]
        progress(f"verdict: {len(told)} of {len(stage.names)} parameters identified"
                 + (f"; the model is {'adequate' if after['adequate'] else 'NOT adequate'} (residual "
                    f"{after['ratio']:.3g} x the noise floor, threshold {ADEQUACY_THRESHOLD:g})" if lifted else ""))
    if lifted:
        rms_before, rms_after = before["ratio"], after["ratio"]
    else:
        rms_before = stage.rms_before
        r_final = _load_residual(rec, q)
        rms_after = float(np.sqrt(np.mean(r_final ** 2)))
    return Fit(variant="lifted" if lifted else "on the ground", names=stage.names,
               start={n: flat0[n] for n in stage.names}, fitted=stage.fitted, rel_std=stage.rel,
               identified=stage.identified, timestep_s=dt, rms_before=rms_before, rms_after=rms_after,
               rollouts=stage.rollouts + 2 + extra, wall_s=time.perf_counter() - wall, params=stage.params, held=held,
               intervals=stage.intervals, reasons=stage.reasons, noise=noise.as_dict(), adequacy_before=before,
               adequacy_after=after, starts=stage.starts, structure=chosen_report)


def choose_structure(stages: dict[str, _Stage], n: int) -> tuple[str, dict[str, Any]]:
    """The servo model structure of the least BIC among fitted ones (module docstring, "Structure").

    For a structure of ``k`` fitted variables whose least-squares optimum leaves the noise-weighted
    residual ``|r|^2`` over ``n`` samples, the Gaussian log-likelihood with the noise model's
    per-sample sigma scaled by a common ``s^2`` is ``-2 ln L = |r|^2 / s^2 + const``, so

        AIC = |r|^2 / s^2 + 2 k          (Akaike 1974, IEEE TAC 19(6), eq. 2)
        BIC = |r|^2 / s^2 + k ln n       (Schwarz 1978, Ann. Stat. 6(2))

    with ``s^2 = max(1, |r_K|^2 / (n - K))`` of the structure with the most variables ``K``
    (the noise model's sigma when that structure explains the data to the noise, scaled up, never
    down, by what it leaves; one scale for every candidate, as Mallows' Cp takes it from the
    fullest model): a structure that leaves the recording unexplained is not rewarded for
    fitting the misfit. BIC chooses: its penalty grows with ``n`` (thousands of correlated
    samples), so it adds a parameter only for a gain far above the noise, and it is consistent
    (chooses the true structure as the recording grows), where AIC keeps a parameter whenever it
    lowers ``|r|^2`` by more than 2.

    Returns:
        The chosen structure's name and the report ``{chosen, criterion, scale, n,
        candidates: [{name, parameters, cost, aic, bic}]}`` (``parameters``: ``k``).
    """
    largest = max(stages.values(), key=lambda st: st.free)
    s2 = max(largest.cost / max(n - largest.free, 1), 1.0)
    candidates: list[dict[str, Any]] = [
        {"name": name, "parameters": st.free, "cost": st.cost, "aic": st.cost / s2 + 2 * st.free,
         "bic": st.cost / s2 + st.free * math.log(n)} for name, st in stages.items()]
    chosen = str(min(candidates, key=lambda c: float(c["bic"]))["name"])
    return chosen, {"chosen": chosen, "criterion": "BIC", "scale": s2, "n": n, "candidates": candidates}


def joint_replay(rec: Recording, robot: RobotModel, params: TwinParams) -> dict[str, Any]:
    """A lifted recording replayed through the lifted twin: the joint residual, no pose needed.

    Returns:
        ``joint_rms_rad`` per joint (twin minus recording), ``joint_residual_rms_rad`` over
        every joint, ``noise_floor_rad`` and ``ratio_to_noise`` (:func:`noise_model`).
    """
    from snake_hardware.sim.mjcf import SimOptions

    noise = noise_model(rec, SimOptions().timestep)
    q, _ = simulate(rec, robot, params, None, lifted=True)
    e = q - rec.q_state
    return {"bag": str(rec.path), "drive": "joint_commands", "variant": "lifted", "duration_s": rec.duration,
            "joint_rms_rad": {j.name: float(np.sqrt(np.mean(e[:, i] ** 2))) for i, j in enumerate(robot.joints)},
            "joint_residual_rms_rad": float(np.sqrt(np.mean(e ** 2))), "noise_floor_rad": noise.floor_rad,
            "ratio_to_noise": float(np.sqrt(np.mean((e / noise.sigma) ** 2)))}


def validate(fit: Fit, rec: Recording, robot: RobotModel, start: TwinParams,
             world: str | Path | None = "flat") -> dict[str, Any]:
    """The fitted twin on a held-out recording (not used in the fit): joint residual against its noise floor.

    Returns:
        ``joint_rms_rad`` (fitted twin), ``joint_rms_per_joint_rad``, ``ratio_to_noise`` (the
        residual's RMS in units of the held-out recording's per-sample sigma), ``adequate``
        (at most :data:`ADEQUACY_THRESHOLD`), and ``joint_rms_start_rad``, ``ratio_to_noise_start``
        of the starting twin, for comparison.
    """
    lifted = fit.variant == "lifted"
    noise = noise_model(rec, fit.timestep_s)
    out: dict[str, Any] = {"bag": str(rec.path), "noise_floor_rad": noise.floor_rad}
    for key, params in (("", fit.params), ("_start", start)):
        q, _ = simulate(rec, robot, params, world, lifted)
        e = q - rec.q_state
        out[f"joint_rms{key}_rad"] = float(np.sqrt(np.mean(e ** 2)))
        out[f"ratio_to_noise{key}"] = float(np.sqrt(np.mean((e / noise.sigma) ** 2)))
        if not key:
            out["joint_rms_per_joint_rad"] = {j.name: float(np.sqrt(np.mean(e[:, i] ** 2)))
                                              for i, j in enumerate(robot.joints)}
    out["adequate"] = out["ratio_to_noise"] <= ADEQUACY_THRESHOLD
    return out


def _fit_servos(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float], dt: float,
                noise: NoiseModel, progress: Any, workers: int, structure: str = "none",
                warm: dict[str, float] | None = None) -> _Stage:
    """Servo model and latency per joint type from a lifted recording (one least-squares fit).

    ``kp``, ``kv`` and ``armature`` are fitted as log values (positive, relative steps);
    ``frictionloss`` (N m) and ``latency_s`` (fitted in physics steps, which the twin blends
    continuously) as plain values; every one within its :data:`PHYSICAL_RANGE`. The residual
    is weighted by the noise model (``r = (q_twin - q_robot) / sigma``), and the covariance
    comes from it (:func:`noise_covariance`). Every rollout is :class:`LiftedRollout`'s (the
    same joint angles as :func:`simulate`), the Jacobian's columns in one batch on ``workers``
    threads. ``structure`` ``backlash`` adds a gear play per joint type (fitted in mrad, from
    :data:`_BACKLASH_START`); ``warm`` (another structure's optimum) starts every value it names
    there and skips the global stage (its latency starts were run for that optimum).
    """
    from scipy.optimize import least_squares

    names = servo_names(robot, structure)
    fields = [n.rsplit(".", 1)[-1] for n in names]
    log = np.array([f in _LOG_FIELDS for f in fields])
    # latency: s <-> physics steps; play: rad <-> mrad
    scale = np.array([dt if f == "latency_s" else _BACKLASH_UNIT if f == "backlash_rad" else 1.0 for f in fields])
    types = joint_types(robot)
    moving = {t: float(np.ptp(rec.q_cmd[:, [i for i, j in enumerate(robot.joints) if j.type == t]], axis=0).max())
              >= _MIN_MOTION_RAD for t in types}
    free = np.array([moving[n.split(".")[1]] for n in names])
    count = [0, 0]   # rollouts: all, of the head only
    full = (LiftedRollout(rec, robot, max(workers, 1)), rec.q_state, noise.sigma)
    on = [full]      # what the residual rolls out: (rollout, recorded angles, their sigma)
    head_s = head_seconds(rec)
    headed = rec.duration >= _HEAD_MIN_RATIO * head_s
    if headed:
        head_rec, head_keep = recording_head(rec, head_s)
        head = (LiftedRollout(head_rec, robot, max(workers, 1)), head_rec.q_state, noise.sigma[head_keep])

    def values_of(x: np.ndarray) -> dict[str, float]:
        v = np.where(log, np.exp(x), x) * scale
        return {n: float(val) for n, val in zip(names, v, strict=True)}

    cache: dict[bytes, np.ndarray] = {}   # residuals of the last few points (a start's point is evaluated again)
    evals = [0]                           # function evaluations of the current least-squares run

    def residuals(zs: list[np.ndarray]) -> list[np.ndarray]:
        roller, q_rec, sigma = on[0]
        count[0] += len(zs)
        count[1] += len(zs) if on[0] is not full else 0
        params = []
        for z in zs:
            x = x0.copy()
            x[free] = z
            params.append(start.with_flat(values_of(x)))
        return [((q - q_rec) / sigma).ravel() for q in roller.joint_angles(params)]

    def use(what: tuple[LiftedRollout, np.ndarray, np.ndarray]) -> None:
        """Roll out ``what`` from now on (the cached residuals are of the other)."""
        on[0] = what
        cache.clear()

    def residual(z: np.ndarray) -> np.ndarray:
        evals[0] += 1
        key = np.asarray(z, dtype=float).tobytes()
        if key not in cache:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            cache[key] = residuals([np.asarray(z, dtype=float)])[0]
        return cache[key]

    def jacobian(z: np.ndarray, limit: int | None = None) -> np.ndarray:
        """Forward differences (steps as scipy's ``2-point``), the columns' rollouts in one batch.

        With ``limit``: zeros once the run has made ``limit`` evaluations (a start's short
        refinement ends there: its last Jacobian would not be used). While ``unused_last``
        (the head's refinement, whose Jacobian is not kept): zeros where :func:`converged`
        will stop the run at this point (scipy takes the Jacobian of an accepted point before
        it calls back with the same cost).
        """
        z = np.asarray(z, dtype=float)
        if limit is not None and evals[0] >= limit:
            return np.zeros((on[0][1].size, z.size))
        f0 = cache.get(z.tobytes())
        if f0 is None:
            f0 = residual(z)
        if unused_last[0] and stops(float(f0 @ f0)):
            return np.zeros((on[0][1].size, z.size))
        h = _DIFF_STEP * np.maximum(1.0, np.abs(z))
        h = np.where(z + h > upper[free], -h, h)   # stay within the bounds
        shifted = []
        for i in range(z.size):
            zi = z.copy()
            zi[i] += h[i]
            shifted.append(zi)
        cols = [(r - f0) / h[i] for i, r in enumerate(residuals(shifted))]
        return np.stack(cols, axis=1)

    def stops(cost: float) -> bool:
        """Whether an iteration that reached ``cost`` (``|r|^2``) lowered it by less than the tolerance."""
        s2 = max(cost / max(on[0][1].size - int(free.sum()), 1), 1.0)
        return previous[0] - cost < _COST_TOL * s2

    def converged(intermediate_result: Any) -> None:
        """Stop once an iteration lowers ``|r|^2`` by less than :data:`_COST_TOL` ``max(1, s^2)`` (module docstring)."""
        cost = 2.0 * float(intermediate_result.cost)
        if stops(cost):
            raise StopIteration
        previous[0] = cost

    previous = [math.inf]
    unused_last = [False]
    phys = np.array([PHYSICAL_RANGE[f] for f in fields]) / scale[:, None]
    lower = np.where(log, np.log(np.maximum(phys[:, 0], 1e-300)), phys[:, 0])
    upper = np.where(log, np.log(phys[:, 1]), phys[:, 1])
    start_values = {n: max(flat0[n], _BACKLASH_START) if n.endswith("backlash_rad") else flat0[n] for n in names}
    raw = np.array([(warm or {}).get(n, start_values[n]) for n in names]) / scale
    x0 = np.clip(np.where(log, np.log(np.maximum(raw, 1e-300)), raw), lower, upper)
    r0 = residual(x0[free])
    # Global stage: the delay is the least convex direction (a softer, more damped servo mimics
    # it, a local minimum of the cost): a short refinement from each of a few latencies, the
    # best of them refined to the end. On a long recording the starts and a first refinement of
    # the best roll out only its head (_HEAD_S), the refinement on all of it starts from there.
    if headed:
        use(head)
    # Varied by the global stage: the latency; from another structure's optimum (warm), the play instead.
    if warm is None:
        varied, start_points, varied_name = "latency_s", list(_LATENCY_STARTS), "servo.*.latency_s"
    else:
        varied, varied_name = "backlash_rad", "servo.*.backlash_rad"
        start_points = [math.radians(d) / _BACKLASH_UNIT for d in _BACKLASH_STARTS]
    lat = np.array([f == varied for f in fields]) & free
    x_scale = np.where(log, 1.0, np.where(scale != 1.0, 1.0, _FRICTION_SCALE))
    costs: list[float] = []
    if lat.any():
        best = (math.inf, x0[free])
        for steps in start_points:
            trial = x0.copy()
            trial[lat] = steps
            evals[0] = 0
            short = least_squares(residual, trial[free], jac=lambda z: jacobian(z, _START_NFEV),
                                  bounds=(lower[free], upper[free]), method="trf", x_scale=x_scale[free],
                                  max_nfev=_START_NFEV)
            cost = float(short.fun @ short.fun)
            costs.append(cost)
            if cost < best[0]:
                best = (cost, short.x)
            if progress is not None:
                progress(f"{structure}: start {len(costs)}/{len(start_points)} ({varied} {steps * scale[lat][0]:.4g}): "
                         f"|r|^2 {cost:.6g}")
        x0[free] = best[1]

    def refine(z: np.ndarray) -> Any:
        """The refinement from ``z`` until :func:`converged` (or :data:`_MAX_NFEV`)."""
        return least_squares(residual, z, jac=jacobian, bounds=(lower[free], upper[free]), method="trf",
                             x_scale=x_scale[free], xtol=1e-8, ftol=1e-10, max_nfev=_MAX_NFEV, callback=converged)

    if headed:
        if progress is not None:
            progress(f"{structure}: refinement on the first {head_s:.0f} s")
        unused_last[0] = True
        x0[free] = refine(x0[free]).x
        unused_last[0] = False
        use(full)
        # Refined already: its first iteration too must lower the cost by the tolerance, or it stops there.
        f_head = residual(x0[free])
        previous[0] = float(f_head @ f_head)
    if progress is not None:
        progress(f"{structure}: refinement on all {rec.duration:.0f} s")
    sol = refine(x0[free])
    x = x0.copy()
    x[free] = sol.x
    if progress is not None:
        progress(f"{structure}: residual/noise {np.sqrt(np.mean(r0 ** 2)):.4g} -> {np.sqrt(np.mean(sol.fun ** 2)):.4g} "
                 f"in {count[0]} rollouts")
    std = np.full(len(names), math.inf)
    std[free] = noise_covariance(sol.jac, sol.fun, x_scale[free])
    fitted = values_of(x)
    rel: dict[str, float] = {}
    reasons: dict[str, str] = {}
    identified: dict[str, bool] = {}
    intervals: dict[str, tuple[float, float]] = {}
    for i, n in enumerate(names):
        sd = float(std[i])
        if log[i]:
            rel[n] = sd                                  # std of log p: relative
            lo, hi = fitted[n] * math.exp(-1.96 * sd), fitted[n] * math.exp(1.96 * sd)
        elif fields[i] == "latency_s":
            rel[n] = sd                                  # in physics steps: identified within one
            lo, hi = fitted[n] - 1.96 * sd * dt, fitted[n] + 1.96 * sd * dt
        elif fields[i] == "backlash_rad":
            sd *= _BACKLASH_UNIT                          # mrad -> rad
            rel[n] = sd / fitted[n]
            lo, hi = fitted[n] - 1.96 * sd, fitted[n] + 1.96 * sd
        else:
            rel[n] = sd / max(abs(fitted[n]), _FRICTION_FLOOR)
            lo, hi = fitted[n] - 1.96 * sd, fitted[n] + 1.96 * sd
        p_lo, p_hi = PHYSICAL_RANGE[fields[i]]
        intervals[n] = (max(lo, p_lo) if math.isfinite(lo) else p_lo, min(hi, p_hi) if math.isfinite(hi) else math.inf)
        span = upper[i] - lower[i]
        on_bound = free[i] and fields[i] != "frictionloss" and fields[i] != "latency_s" and \
            min(x[i] - lower[i], upper[i] - x[i]) < 1e-3 * span
        limit = LATENCY_STD_STEPS if fields[i] == "latency_s" else IDENTIFIABLE_REL_STD
        identified[n] = bool(free[i] and math.isfinite(sd) and not on_bound and rel[n] <= limit)
        unit = "physics steps" if fields[i] == "latency_s" else "relative"
        if not free[i]:
            reasons[n] = "its joint type does not move in the recording"
        elif not math.isfinite(sd):
            reasons[n] = "not excited: the recording leaves a direction of it unbounded"
        elif on_bound:
            reasons[n] = f"on its physical range's bound {PHYSICAL_RANGE[fields[i]]}"
        elif rel[n] > limit:
            reasons[n] = f"spread {rel[n]:.3g} ({unit} std) above {limit:g}"
        else:
            reasons[n] = f"spread {rel[n]:.3g} ({unit} std) within {limit:g}"
    optimum = dict(fitted)
    keep = {n: flat0[n] for n in names if not identified[n]}  # not told by the recording: held
    fitted.update(keep)
    starts = {"count": len(costs), "varied": varied_name, "values_steps": start_points,
              "refinement_nfev": _START_NFEV, "costs": costs, "cost_min": min(costs) if costs else None,
              "cost_max": max(costs) if costs else None, "cost_final": float(sol.fun @ sol.fun),
              "head_s": head_s if headed else None, "head_rollouts": count[1]}
    return _Stage(names, fitted, rel, count[0], float(np.sqrt(np.mean(r0 ** 2))), start.with_flat(fitted),
                  intervals, identified, reasons, starts, optimum, free=int(free.sum()), cost=float(sol.fun @ sol.fun))


def noise_covariance(jac: np.ndarray, res: np.ndarray, x_scale: np.ndarray) -> np.ndarray:
    """Standard deviations of fitted variables from the noise-weighted Jacobian (inf: not excited).

    With ``J`` the Jacobian of the residual weighted by each sample's noise sigma, the
    first-order covariance is ``(J^T J)^-1`` (Ljung, System Identification, eq. 9.18 with the
    measured noise); it is scaled up by ``s^2 = |r|^2 / (m - n)`` when that exceeds 1 (a model
    that does not explain the data is less certain), never down (a near-perfect fit does not
    make a parameter certain). The inverse is taken over the eigenvectors of ``D J^T J D``
    (``D``: the variables' typical scales); an eigen-direction whose standard deviation exceeds
    :data:`UNBOUNDED_STD` is not excited, and every variable with a component above 0.1 in it
    gets an infinite standard deviation.
    """
    n = jac.shape[1]
    d = np.asarray(x_scale, dtype=float)
    h = (jac * d).T @ (jac * d)
    lam, vec = np.linalg.eigh(h)
    s2 = max(float(res @ res) / max(res.size - n, 1), 1.0)
    excited = lam > 1.0 / UNBOUNDED_STD ** 2
    cov = (vec[:, excited] / lam[excited]) @ vec[:, excited].T
    std = d * np.sqrt(np.clip(np.diag(cov), 0.0, None) * s2)
    unbounded = np.any(np.abs(vec[:, ~excited]) > 0.1, axis=1) if (~excited).any() else np.zeros(n, dtype=bool)
    std[unbounded] = math.inf
    return std


def _identified(name: str, spread: float) -> bool:
    """Whether a fitted parameter is told by the recording (relative std, or std in steps for a latency)."""
    return spread <= (LATENCY_STD_STEPS if name.endswith("latency_s") else IDENTIFIABLE_REL_STD)


def _fit_friction(rec: Recording, robot: RobotModel, start: TwinParams, flat0: dict[str, float],
                  world: str | Path | None, progress: Any) -> _Stage:
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
    interval = (math.exp(lower), math.exp(upper))
    if math.isfinite(lower) and math.isfinite(upper):
        # The interval's centre in log mu: contact's roughness moves it less than the best single point.
        fitted = math.exp((lower + upper) / 2)
        rel = math.exp((upper - lower) / 2) - 1.0
    else:
        fitted, rel = math.exp(best), math.inf
    if progress is not None:
        progress(f"ground friction {fitted:.4g} (95 % interval {interval[0]:.4g} to {interval[1]:.4g}, best "
                 f"{math.exp(best):.4g} at cost {c_min:.4g}, roughness {roughness:.3g}) after {count[0]} rollouts")
    identified = _identified(name, rel)
    if not identified:
        fitted = flat0[name]   # not told by the recording: held
    why = (f"95 % profile interval's relative half-width {rel:.3g} "
           f"{'within' if identified else 'above'} {IDENTIFIABLE_REL_STD:g}")
    starts = {"count": _FRICTION_GRID, "varied": name, "cost_min": c_min, "cost_max": float(max(costs))}
    return _Stage([name], {name: fitted}, {name: rel}, count[0], float(np.sqrt(np.mean(r0 ** 2))),
                  start.with_flat({name: fitted}), {name: interval}, {name: identified}, {name: why}, starts)


def write_block(fit: Fit, robot: RobotModel, target: str, bag: Path) -> tuple[Path, Path | None]:
    """Write the fitted parameters into the target's ``twin:`` block; the rest of its file is kept.

    Parameters the fit did not identify keep the block's value (or none). The block's
    ``provenance`` keeps one entry per variant (``lifted``, ``on the ground``): the bag, the
    command, the date, the residuals, the noise floor and the adequacy verdict; a fit of one
    variant replaces its own entry and keeps the other's. A new target (no file yet) gets the
    gait calibration (``gaits:`` and its ``provenance``) of the default target ``twin``, so
    that the gait node and every experiment on it keep the calibrated coefficients.

    Returns:
        The file written, and the file whose gait calibration was copied (None: none copied).
    """
    import datetime

    import yaml

    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_path, load_twin_params

    path = calibration_path(robot.name, target)
    data: dict[str, Any] = {}
    copied: Path | None = None
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
    else:
        source = calibration_path(robot.name, DEFAULT_CALIBRATION_TARGET)
        if source != path and source.is_file():
            src = yaml.safe_load(source.read_text()) or {}
            if "gaits" in src:
                data = {k: src[k] for k in ("gaits", "provenance") if k in src}
                copied = source
    current, _ = load_twin_params(robot.name, target)
    values = {n: fit.fitted[n] for n in fit.names if fit.identified[n]}
    block = current.with_flat(values).to_yaml_dict()
    block = {k: _rounded(v) for k, v in block.items()}
    old = (data.get("twin") or {}).get("provenance") or {}
    if "variant" in old:  # a single fit's entry: keyed by its variant
        old = {old["variant"]: old}
    entry = {
        "command": f"snake twin identify {bag} --robot {robot.name} --target {target}"
                   f"{' --lifted' if fit.variant == 'lifted' else ''} --write",
        "bag": str(bag), "date": datetime.date.today().isoformat(),
        "residual_rms_before": round(fit.rms_before, 5), "residual_rms_after": round(fit.rms_after, 5),
        "noise_floor_rad": _rounded(fit.noise.get("noise_floor_rad", 0.0)),
        "adequacy_ratio": _rounded(fit.adequacy_after.get("ratio", 0.0)),
        "adequate": bool(fit.adequacy_after.get("adequate", False)),
        "not_identified": [n for n in fit.names if not fit.identified[n]],
    }
    block["provenance"] = {k: v for k, v in old.items() if k != fit.variant} | {fit.variant: entry}
    data["twin"] = block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, copied


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
        sigma = noise_model(rec, fit.timestep_s).sigma
        fig, axes = plt.subplots(len(types), 2, figsize=(13, 2.6 * len(types)), sharex=True, squeeze=False)
        for row, t in zip(axes, types, strict=True):
            idx = [i for i, j in enumerate(robot.joints) if j.type == t]
            i = idx[int(np.argmax(np.ptp(rec.q_cmd[:, idx], axis=0)))]
            row[0].plot(rec.t_state, rec.q_state[:, i], "k", lw=1.2, label="robot")
            row[0].plot(rec.t_state, q0[:, i], "C1", lw=0.9, label="twin, start")
            row[0].plot(rec.t_state, q1[:, i], "C0--", lw=0.9, label="twin, fitted")
            row[0].set_ylabel(f"{robot.joints[i].name} (rad)")
            # Residual of every joint of the type after the fit, against the noise band (2 sigma, RMS over them).
            band = 2.0 * np.sqrt(np.mean(sigma[:, idx] ** 2, axis=1))
            row[1].fill_between(rec.t_state, -band, band, color="0.85", label="noise band (2 sigma)")
            row[1].plot(rec.t_state, q1[:, idx] - rec.q_state[:, idx], lw=0.6)
            row[1].set_ylabel(f"{t} residual (rad)")
        for ax in axes[-1]:
            ax.set_xlabel("time (s)")
        axes[0, 0].legend(loc="upper right", fontsize=8)
        axes[0, 1].legend(loc="upper right", fontsize=8)
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
    def interval(n: str) -> str:
        if n not in fit.intervals:
            return ""
        lo, hi = fit.intervals[n]
        return f"{lo:.4g} to {hi:.4g}" if math.isfinite(hi) else f"{lo:.4g} to (unbounded)"

    rows = "".join(f"<tr><td>{html.escape(n)}</td><td>{fit.start[n]:.5g}</td><td>{fit.fitted[n]:.5g}</td>"
                   f"<td>{fit.rel_std[n]:.3g}</td><td>{interval(n)}</td>"
                   f"<td>{'yes' if fit.identified[n] else 'no'}</td><td>{html.escape(fit.reasons.get(n, ''))}</td></tr>"
                   for n in fit.names)
    verdict = ""
    if fit.adequacy_after:
        ad = fit.adequacy_after
        white = ", ".join(f"{t}: {'white' if v['white'] else 'not white'}"
                          f"{' (' + ', '.join(v['features']['found']) + ')' if v['features']['found'] else ''}"
                          for t, v in ad["by_type"].items())
        verdict = (f"<p><b>Adequacy: {'adequate' if ad['adequate'] else 'NOT adequate'}</b>: joint residual "
                   f"{ad['ratio']:.3g} times the noise floor ({fit.noise.get('noise_floor_rad', 0.0):.3g} rad; "
                   f"threshold {ad['threshold']:g}; {fit.adequacy_before.get('ratio', float('nan')):.3g} before the "
                   f"fit). Residual by joint type: {html.escape(white)}.</p>")
    if fit.structure.get("candidates"):
        st = fit.structure
        verdict += (f"<p>Structure: <b>{html.escape(st['chosen'])}</b> (least {html.escape(st['criterion'])}; "
                    + "; ".join(f"{html.escape(c['name'])}: k {c['parameters']}, |r|^2 {c['cost']:.6g}, "
                                f"AIC {c['aic']:.6g}, BIC {c['bic']:.6g}" for c in st["candidates"]) + ").</p>")
    if fit.validation is not None:
        v = fit.validation
        verdict += (f"<p>Held-out recording {html.escape(str(v['bag']))}: joint residual RMS "
                    f"{v['joint_rms_rad']:.4g} rad fitted ({v['ratio_to_noise']:.3g} times its noise floor), "
                    f"{v['joint_rms_start_rad']:.4g} rad with the starting twin.</p>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>snake twin identify: {html.escape(robot.name)}"
            f"</title></head><body><h1>Twin identification ({html.escape(fit.variant)})</h1>"
            f"<p>Recording {html.escape(str(rec.path))}; residual RMS {fit.rms_before:.4g} before, "
            f"{fit.rms_after:.4g} after ({fit.rollouts} rollouts, {fit.wall_s:.1f} s).</p>{verdict}"
            "<table border='1' cellpadding='3'><tr><th>parameter</th><th>start</th><th>fitted</th>"
            "<th>spread (relative std; latency: physics steps; ground friction: 95 % interval's relative "
            "half-width)</th><th>95 % interval</th><th>identified</th><th>why</th></tr>"
            f"{rows}</table><img alt='recorded and twin motion' src='data:image/png;base64,{png}'></body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
