"""The lifted servo fit's least-squares problem: its variables, residual, Jacobian and refinement.

A lifted fit (:mod:`snake_tools.twin.identify`) fits per joint type the servo fields of
:data:`SERVO_FIELDS`, and a structure's own (:data:`~snake_tools.twin.structure.STRUCTURE_FIELDS`),
to ``r(p) = (q_twin(p) - q_robot) / sigma`` over every joint sample. :class:`ServoProblem` holds
what every stage of that fit shares:

* **the variables**: ``kp``, ``kv`` and ``armature`` as log values (positive, relative steps),
  ``frictionloss`` and ``load_friction`` plain, the latency in physics steps (which the twin
  blends continuously) and the gear play in mrad; each within its :data:`PHYSICAL_RANGE`. Only
  the types whose joints move (:func:`types_moving`) are free; the others stay at the start.
* **the residual**, every point rolled out by :class:`~snake_tools.twin.rollout.LiftedRollout`
  (bit for bit :func:`~snake_tools.twin.rollout.simulate`'s joint angles), the whole recording or
  its head (:func:`recording_head`; :meth:`ServoProblem.use`), the last few points cached;
* **the forward-difference Jacobian**, its columns rolled out in one batch;
* **the refinement** (``scipy.optimize.least_squares``, trust-region reflective within the
  bounds) and its stopping rule: an iteration that lowers ``|r|^2`` by less than
  :data:`_COST_TOL` times ``max(1, |r|^2 / (m - n))`` ends it (``|r|^2`` rises by that scale
  over one standard deviation of a parameter, so the least left is a fraction of one away);
* each joint type's share of ``|r|^2`` (its own joints'), for the stages that let each type
  keep its own best point (a lifted body barely couples the types).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types
from snake_tools.twin.data import Recording
from snake_tools.twin.noise import NoiseModel
from snake_tools.twin.per_servo import _FRICTION_SCALE, _LOAD_FRICTION_SCALE
from snake_tools.twin.rollout import LiftedRollout
from snake_tools.twin.structure import STRUCTURE_FIELDS

SERVO_FIELDS = ("kp", "kv", "armature", "frictionloss", "latency_s")
"""Servo parameters fitted per joint type (``damping`` enters only as kv + damping: kept; ``effort_scale``
needs saturated motion: kept)."""
MAX_LATENCY_STEPS = 25
"""Largest command latency fitted, physics steps (0.1 s at the 4 ms step)."""
PHYSICAL_RANGE: dict[str, tuple[float, float]] = {
    "kp": (0.1, 1000.0),           # N m/rad: from a limp hobby servo to a stiff industrial joint
    "kv": (1e-4, 100.0),           # N m s/rad
    "armature": (1e-4, 1.0),       # kg m^2: rotor 1e-8..1e-6 kg m^2 times a gear ratio of 100..1000 squared
    "frictionloss": (0.0, 5.0),    # N m: at most a few stall torques
    "latency_s": (0.0, MAX_LATENCY_STEPS * 0.004),  # s (bounded in physics steps)
    "backlash_rad": (1e-4, math.radians(1.0)),  # rad: X-series gear trains have 0.1 to 0.4 deg; above 1 deg is worn
    "load_friction": (0.0, 0.5),   # N m per N m: BAM's m3 XL330 0.12; the eight XL330 logs 0.14 to 0.21
}
"""Physical range of each fitted servo field (the bounds of the fit; a value on a bound is not identified)."""
_MIN_MOTION_RAD = 0.02      # rad, a joint type whose commands move less than this is not excited
_COST_TOL = 0.1            # the refinement stops when an iteration lowers |r|^2 by less than this times max(1, s^2)
DIFF_STEP = 1e-2            # relative step of the forward-difference Jacobian (log space)
_LOG_FIELDS = ("kp", "kv", "armature")  # fitted as log values
_MAX_NFEV = 80              # least-squares iterations (each one Jacobian of rollouts)
_HEAD_S = 20.0              # s, the global stage and a first refinement roll out only the recording's first this long
HEAD_MIN_RATIO = 1.5        # ... when the recording is at least this many times longer (else all of it)
_BACKLASH_START = math.radians(0.2)  # rad, the play a cold backlash fit starts from (a new X-series gear train's)
# N m s/rad, the least kv a fit starts from: a start of 0 (the factory D gain's) sits on the range's floor, where
# kv does nothing and its log-space gradient vanishes (an overdamped servo was left far below its kv).
_KV_START = 0.05
BACKLASH_UNIT = 1e-3        # rad, the play is fitted in mrad (the Jacobian's step and x_scale in that unit)
_LOAD_FRICTION_START = 0.05   # N m per N m, where a cold load_friction fit starts
_CACHED = 8                 # residuals kept (a start's point is evaluated again)

Rolled = tuple[LiftedRollout, np.ndarray, np.ndarray]
"""What the residual rolls out: the rollout, the recorded angles and their sigma."""


def servo_names(robot: RobotModel, structure: str = "none") -> list[str]:
    """Parameters a lifted recording fits: ``servo.<type>.<field>`` of :data:`SERVO_FIELDS`.

    With the ``backlash`` structure, ``servo.<type>.backlash_rad`` of every type after them; with
    ``load_friction``, ``servo.<type>.load_friction`` (:data:`STRUCTURE_FIELDS`).
    """
    types = joint_types(robot)
    extra = STRUCTURE_FIELDS[structure]
    return [f"servo.{t}.{f}" for t in types for f in SERVO_FIELDS] + [f"servo.{t}.{f}" for f in extra for t in types]


def types_moving(rec: Recording, robot: RobotModel) -> dict[str, bool]:
    """Per joint type: whether some joint of it is commanded over at least :data:`_MIN_MOTION_RAD` (excited)."""
    return {t: float(np.ptp(rec.q_cmd[:, [i for i, j in enumerate(robot.joints) if j.type == t]], axis=0).max())
            >= _MIN_MOTION_RAD for t in joint_types(robot)}


def recording_head(rec: Recording, seconds: float) -> tuple[Recording, np.ndarray]:
    """The first ``seconds`` of a recording: commands, samples and poses stamped up to ``rec.start + seconds``.

    :attr:`Recording.start` (from the first command's and the first joint state's stamps, which the head keeps) is
    where :func:`simulate` and :class:`LiftedRollout` start, so the head's rollout is the recording's rollout up to its
    last kept sample, bit for bit (a lifted twin's controls depend on no later command).

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


def fit_head(rec: Recording) -> tuple[float, tuple[Recording, np.ndarray] | None]:
    """The head a fit's first stages roll out: its length, and the head where the recording is long enough.

    Returns:
        The head's length (:func:`head_seconds`), and the head with the mask of its samples
        (:func:`recording_head`) when the recording is at least :data:`HEAD_MIN_RATIO` times as
        long, else ``None`` (the whole recording is rolled out).
    """
    head_s = head_seconds(rec)
    return head_s, recording_head(rec, head_s) if rec.duration >= HEAD_MIN_RATIO * head_s else None


class ServoProblem:
    """The lifted servo fit's variables, residual, Jacobian and refinement (module docstring).

    Points ``z`` are the free variables only (:attr:`free`); the others stay at :attr:`x0`'s.

    Attributes:
        names, fields: Every variable's flat name and servo field.
        free: Which variables are fitted (their joint type moves).
        x0: Every variable's start, in the fit's units, within the bounds.
        bounds: Lower and upper bound of the free variables; ``lower``, ``upper`` of every one.
        x_scale: The free variables' scales (``least_squares``'s ``x_scale``).
        type_of: Each free variable's joint type; ``joint_type`` each joint's.
        full, head: The whole recording and its head (``None`` when the recording is not
            :data:`HEAD_MIN_RATIO` times its head long) as :data:`Rolled`; ``head_s`` the head's length.
        rollouts, head_rollouts: Rollouts made, all and of the head only.
        evals: Function evaluations of the current least-squares run (reset by its caller).
        previous: ``|r|^2`` of the last accepted iteration (the stopping rule's reference).
        unused_last: The current run's last Jacobian is not kept (:meth:`jacobian`).
    """

    def __init__(self, rec: Recording, robot: RobotModel, start: TwinParams, flat0: Mapping[str, float], dt: float,
                 noise: NoiseModel, workers: int, structure: str, warm: Mapping[str, float] | None) -> None:
        self.start = start
        self.names = servo_names(robot, structure)
        self.fields = [n.rsplit(".", 1)[-1] for n in self.names]
        fields = self.fields
        self.log = np.array([f in _LOG_FIELDS for f in fields])
        # latency: s <-> physics steps; play: rad <-> mrad
        self.scale = np.array([dt if f == "latency_s" else BACKLASH_UNIT if f == "backlash_rad" else 1.0
                               for f in fields])
        moving = types_moving(rec, robot)
        self.free = np.array([moving[n.split(".")[1]] for n in self.names])
        self.rollouts = 0
        self.head_rollouts = 0
        self.full: Rolled = (LiftedRollout(rec, robot, max(workers, 1)), rec.q_state, noise.sigma)
        self._on = self.full
        self.head_s, head = fit_head(rec)
        self.head: Rolled | None = None
        if head is not None:
            head_rec, head_keep = head
            self.head = (LiftedRollout(head_rec, robot, max(workers, 1)), head_rec.q_state, noise.sigma[head_keep])
        self._cache: dict[bytes, np.ndarray] = {}
        self.evals = 0
        self.previous = math.inf
        self.unused_last = False
        phys = np.array([PHYSICAL_RANGE[f] for f in fields]) / self.scale[:, None]
        self.lower = np.where(self.log, np.log(np.maximum(phys[:, 0], 1e-300)), phys[:, 0])
        self.upper = np.where(self.log, np.log(phys[:, 1]), phys[:, 1])
        self.bounds = (self.lower[self.free], self.upper[self.free])
        start_values = {n: max(flat0[n], _BACKLASH_START) if n.endswith("backlash_rad")
                        else max(flat0[n], _LOAD_FRICTION_START) if n.endswith(".load_friction")
                        else max(flat0[n], _KV_START) if n.endswith(".kv") else flat0[n] for n in self.names}
        raw = np.array([(warm or {}).get(n, start_values[n]) for n in self.names]) / self.scale
        self.x0 = np.clip(np.where(self.log, np.log(np.maximum(raw, 1e-300)), raw), self.lower, self.upper)
        x_scale = np.where(self.log, 1.0, np.where(self.scale != 1.0, 1.0, _FRICTION_SCALE))
        x_scale[[f == "load_friction" for f in fields]] = _LOAD_FRICTION_SCALE
        self.x_scale = x_scale[self.free]
        self.type_of = np.array([n.split(".")[1] for n in self.names])[self.free]
        self.joint_type = np.array([j.type for j in robot.joints])

    def column(self, field: str) -> np.ndarray:
        """Which free variables are of ``field``."""
        return np.array([f == field for f in self.fields])[self.free]

    def values_of(self, x: np.ndarray) -> dict[str, float]:
        """Flat servo values of every variable's ``x`` (in the fit's units)."""
        v = np.where(self.log, np.exp(x), x) * self.scale
        return {n: float(val) for n, val in zip(self.names, v, strict=True)}

    def full_point(self, z: np.ndarray) -> np.ndarray:
        """Every variable: ``z``'s free ones, :attr:`x0`'s others."""
        x = self.x0.copy()
        x[self.free] = z
        return x

    def residuals(self, zs: list[np.ndarray]) -> list[np.ndarray]:
        """The residual vectors of a batch of points, rolled out in one batch (not cached)."""
        roller, q_rec, sigma = self._on
        self.rollouts += len(zs)
        self.head_rollouts += len(zs) if self._on is not self.full else 0
        params = [self.start.with_flat(self.values_of(self.full_point(z))) for z in zs]
        return [((q - q_rec) / sigma).ravel() for q in roller.joint_angles(params)]

    def use(self, what: Rolled) -> None:
        """Roll out ``what`` from now on (the cached residuals are of the other)."""
        self._on = what
        self._cache.clear()

    def residual(self, z: np.ndarray) -> np.ndarray:
        """The residual vector at ``z`` (cached: a start's point is evaluated again)."""
        self.evals += 1
        key = np.asarray(z, dtype=float).tobytes()
        if key not in self._cache:
            if len(self._cache) >= _CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = self.residuals([np.asarray(z, dtype=float)])[0]
        return self._cache[key]

    def jacobian(self, z: np.ndarray, limit: int | None = None, step: float = DIFF_STEP) -> np.ndarray:
        """Forward differences (steps as scipy's ``2-point``, relative ``step``), the columns' rollouts in one batch.

        With ``limit``: zeros once the run has made ``limit`` evaluations (a start's short
        refinement ends there: its last Jacobian would not be used). While :attr:`unused_last`
        (the head's refinement, whose Jacobian is not kept): zeros where :meth:`converged`
        will stop the run at this point (scipy takes the Jacobian of an accepted point before
        it calls back with the same cost).
        """
        z = np.asarray(z, dtype=float)
        size = self._on[1].size
        if limit is not None and self.evals >= limit:
            return np.zeros((size, z.size))
        f0 = self._cache.get(z.tobytes())
        if f0 is None:
            f0 = self.residual(z)
        if self.unused_last and self.stops(float(f0 @ f0)):
            return np.zeros((size, z.size))
        h = step * np.maximum(1.0, np.abs(z))
        h = np.where(z + h > self.bounds[1], -h, h)   # stay within the bounds
        shifted = []
        for i in range(z.size):
            zi = z.copy()
            zi[i] += h[i]
            shifted.append(zi)
        cols = [(r - f0) / h[i] for i, r in enumerate(self.residuals(shifted))]
        return np.stack(cols, axis=1)

    def cost_scale(self, cost: float) -> float:
        """``max(1, s^2)`` of a ``|r|^2`` on the recording rolled out: the unit of the tolerances."""
        return max(cost / max(self._on[1].size - int(self.free.sum()), 1), 1.0)

    def stops(self, cost: float) -> bool:
        """Whether an iteration that reached ``cost`` (``|r|^2``) lowered it by less than the tolerance."""
        return self.previous - cost < _COST_TOL * self.cost_scale(cost)

    def converged(self, intermediate_result: Any) -> None:
        """Stop once an iteration lowers ``|r|^2`` by less than :data:`_COST_TOL` ``max(1, s^2)`` (module docstring)."""
        cost = 2.0 * float(intermediate_result.cost)
        if self.stops(cost):
            raise StopIteration
        self.previous = cost

    def restart_at(self, z: np.ndarray) -> None:
        """The next refinement starts at ``z``: its first iteration too must lower ``|r|^2`` by the tolerance."""
        f = self.residual(z)
        self.previous = float(f @ f)

    def short(self, z: np.ndarray, nfev: int) -> Any:
        """A short refinement from ``z``: ``nfev`` evaluations, its last Jacobian not computed."""
        from scipy.optimize import least_squares

        self.evals = 0
        return least_squares(self.residual, z, jac=lambda p: self.jacobian(p, nfev), bounds=self.bounds,
                             method="trf", x_scale=self.x_scale, max_nfev=nfev)

    def refine(self, z: np.ndarray, nfev: int | None = None) -> Any:
        """The refinement from ``z`` until :meth:`converged` (or :data:`_MAX_NFEV`), or ``nfev`` evaluations.

        Near a whole number of physics steps of latency the cost bends (the twin's fractional
        latency blends two steps' controls), the trust region shrinks and an iteration there
        can lower the cost by less than the tolerance well before the optimum: a fixed count
        goes on past it.
        """
        from scipy.optimize import least_squares

        if nfev is not None:
            return least_squares(self.residual, z, jac=self.jacobian, bounds=self.bounds, method="trf",
                                 x_scale=self.x_scale, xtol=1e-10, ftol=1e-12, max_nfev=nfev)
        return least_squares(self.residual, z, jac=self.jacobian, bounds=self.bounds, method="trf",
                             x_scale=self.x_scale, xtol=1e-8, ftol=1e-10, max_nfev=_MAX_NFEV,
                             callback=self.converged)

    def type_costs(self, fun: np.ndarray) -> dict[str, float]:
        """Each joint type's share of ``|r|^2``: its own joints'."""
        per_joint = (fun.reshape(-1, self.joint_type.size) ** 2).sum(axis=0)
        return {t: float(per_joint[self.joint_type == t].sum()) for t in dict.fromkeys(map(str, self.type_of))}

    def mix_types(self, base: np.ndarray, picks: Mapping[str, tuple[float, np.ndarray]]) -> np.ndarray:
        """``base`` with each joint type's variables taken from its pick (``type: (cost, variables)``)."""
        out = base.copy()
        for t, (_, z) in picks.items():
            out[self.type_of == t] = z[self.type_of == t]
        return out
