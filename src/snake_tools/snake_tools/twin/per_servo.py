"""One servo model per joint where a lifted recording tells the servos of a type apart (:func:`fit_per_servo`).

A lifted fit (:mod:`snake_tools.twin.identify`) fits one servo model per joint type. Real servos
of one type differ (gain, motor constants, gear friction and loss, rotor inertia: a few to tens of
per cent), and one model per type then leaves each joint's own part unexplained. This stage starts
from the chosen structure's per-type optimum and fits, per joint ``j`` of a type that moves,

    p_j = (kp, damping, armature, frictionloss, latency_s[, backlash_rad | load_friction])

with ``kv`` kept per type: without torque saturation only ``kv + damping`` shows in the motion,
and ``damping``, unlike ``kv``, may go below the type's value (a servo with less back-EMF than the
model's; the per-type fit puts the bench robot's ``kv`` on its lower bound).

Why per joint at once: hanging from its held head, the body makes the servos nearly independent
(a joint's parameters move its own angle; the others' only through the reaction of the links).
The fit therefore takes the Jacobian as block-diagonal: the column of field ``f`` of joint ``j``
is read on joint ``j``'s own residual, from one rollout in which field ``f`` of every
:data:`COLOUR_STRIDE`-th joint is stepped at once (a colouring of the Jacobian, Curtis, Powell
and Reid 1974, J. Inst. Maths Applics 13(1); the contamination comes only from joints that many
apart, three modules), so a Jacobian of every joint's fields costs :data:`COLOUR_STRIDE` times
the fields' rollouts, not the joints' count times them, rolled out in one batch on the fit's
threads (one rollout steps nine servos: the cores fit the servos in parallel). The step is
``scipy.optimize.least_squares``' trust-region reflective one over every joint's variables (log
``kp``, ``damping``, ``armature``; ``frictionloss`` in N m; latency in physics steps; play in
mrad; within their physical ranges), and every step is judged on the exact residual of the whole
twin (the coupling the Jacobian neglects shows there): the fit converges where the residual's
gradient through each joint's block vanishes. On the twin with two dorsal servos 35 % stiffer
and 30 % softer than the others, stepping joints three apart together (every joint of a type)
left it at 4.1 times the noise floor, nine apart at 1.0 (src/snake_tools/test/test_twin_per_servo.py).
The iterations roll out the recording's head (as the per-type fit's global stage), the spreads
the whole recording.

Each joint's spreads, intervals, held-out segment stability and "identified" are those of the
per-type fit (:mod:`snake_tools.twin.uncertainty`) on its own residual and block: conditional on
the other joints' values.

Criterion (as :func:`snake_tools.twin.structure.choose_structure`): per joint type ``T`` with
``n_T`` joint samples, the per-type model (``k`` = the type's fitted variables) against one model
per joint (``k`` = its joints times the per-joint fields, plus the type's ``kv``),
``BIC = |r_T|^2 / s^2 + k ln n_T`` with ``s^2 = max(1, |r_T|^2 / (n_T - k))`` of the per-joint
model (the fuller one): the type keeps per-joint values when their BIC is the lower, and falls
back to its per-type values otherwise (servos alike: the gain does not pay for the parameters).
On a long recording the criterion is first taken on the head the iterations roll out
(:attr:`PerServo.head_cost_by_joint`; :mod:`snake_tools.twin.lifted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import Recording
from snake_tools.twin.noise import NoiseModel
from snake_tools.twin.rollout import Residuals
from snake_tools.twin.structure import STRUCTURE_FIELDS
from snake_tools.twin.uncertainty import (
    Judged,
    correlation_lags,
    fit_std,
    grid_offsets,
    judge,
    segment_stability,
    time_base_std_steps,
)

JOINT_FIELDS = ("kp", "damping", "armature", "frictionloss", "latency_s")
"""Servo fields fitted per joint (the structure's own after them: :func:`joint_fields`)."""
COLOUR_STRIDE = 9
"""Joints this many apart are stepped together in one rollout of the block Jacobian (module docstring)."""
JOINT_RANGE: dict[str, tuple[float, float]] = {"damping": (1e-4, 100.0)}
"""Physical range of the fields a per-type fit does not fit (N m s/rad); the others' are the per-type fit's."""
_LOG_FIELDS = ("kp", "damping", "armature")
_MAX_ITER = 30            # evaluations of the least-squares (each with its coloured Jacobian)
_COST_TOL = 0.1           # stop when an iteration lowers |r|^2 by less than this times max(1, s^2) ...
_COST_REL = 1e-3          # ... or by less than this fraction of it
_STEP = 1e-2              # forward-difference step in the fitted variables
_FRICTION_SCALE = 0.01    # N m
_BACKLASH_UNIT = 1e-3     # rad
_LOAD_FRICTION_SCALE = 0.1   # N m per N m, typical size of a load-dependent friction (BAM's m3 XL330: 0.12)


@dataclass
class PerServo(Judged):
    """What :func:`fit_per_servo` returns.

    The per-joint optimum, ``joint.<name>.<field>`` -> value for every joint of a moving type, each
    started at its type's fitted value, with its verdict (:class:`~snake_tools.twin.uncertainty.Judged`).

    Attributes:
        cost_by_joint: ``|r_j|^2`` at the per-joint optimum over the whole recording.
        head_cost_by_joint: The same over the samples the iterations rolled out (the head, or the
            whole recording without one), of which there are ``head_samples``.
        rollouts: Rollouts made.
        iterations: Evaluations of the least-squares fit (each with its coloured Jacobian).
    """

    cost_by_joint: np.ndarray = field(default_factory=lambda: np.zeros(0))
    head_cost_by_joint: np.ndarray = field(default_factory=lambda: np.zeros(0))
    head_samples: int = 0
    rollouts: int = 0
    iterations: int = 0


def joint_fields(structure: str) -> tuple[str, ...]:
    """The fields fitted per joint for a structure (``backlash``: the play too; ``load_friction``: that)."""
    return JOINT_FIELDS + STRUCTURE_FIELDS[structure]


def fit_per_servo(rec: Recording, robot: RobotModel, base: TwinParams, moving: list[int], noise: NoiseModel,
                  physical: dict[str, tuple[float, float]], dt: float, workers: int, structure: str = "none",
                  head: tuple[Recording, np.ndarray] | None = None, progress: Any = None) -> PerServo:
    """Fit one servo model per joint of the joints ``moving`` from the per-type twin ``base`` (module docstring).

    Args:
        rec: The lifted recording.
        robot: The robot recorded.
        base: The per-type optimum (every value as the per-type fit left it).
        moving: Indices of the joints fitted (those of the joint types that move).
        noise: The recording's noise model.
        physical: Physical range of each per-type field (the per-type fit's bounds).
        dt: The twin's physics step, s.
        workers: Threads of the rollouts.
        structure: The per-type fit's structure (``backlash``: the play per joint too; ``load_friction``:
            the load-dependent friction per joint too).
        head: The recording's head and the mask of its samples (the iterations roll it out; the
            spreads are taken on the whole recording).
        progress: Called as ``progress(message)`` (or ``None``).
    """
    fields = joint_fields(structure)
    names = [robot.joints[i].name for i in moving]
    rng = physical | JOINT_RANGE
    nf = len(fields)
    log = np.array([f in _LOG_FIELDS for f in fields])
    unit = np.array([_BACKLASH_UNIT if f == "backlash_rad" else dt if f == "latency_s" else 1.0 for f in fields])
    lo, hi = (np.array([math.log(rng[f][b]) if f in _LOG_FIELDS else rng[f][b] / u
                        for f, u in zip(fields, unit, strict=True)]) for b in (0, 1))
    scale = np.array([_FRICTION_SCALE if f == "frictionloss" else _LOAD_FRICTION_SCALE if f == "load_friction"
                      else 1.0 for f in fields])
    flat = base.joint_flat(robot)
    start = {f"joint.{n}.{f}": flat[f"joint.{n}.{f}"] for n in names for f in fields}

    def encode(values: dict[str, float]) -> np.ndarray:
        raw = np.array([[values[f"joint.{n}.{f}"] for f in fields] for n in names]) / unit
        return np.clip(np.where(log, np.log(np.maximum(raw, 1e-300)), raw), lo, hi)

    def decode(x: np.ndarray) -> dict[str, float]:
        v = np.where(log, np.exp(x), x) * unit
        return {f"joint.{n}.{f}": float(v[k, i]) for k, n in enumerate(names) for i, f in enumerate(fields)}

    full = Residuals(rec, robot, noise.sigma, workers)
    on = full.head(head)

    def residuals(what: Residuals, xs: list[np.ndarray]) -> list[np.ndarray]:
        return [r[:, moving] for r in what([base.with_flat(decode(x)) for x in xs])]

    def steps(x: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """The stepped points of the coloured Jacobian and each variable's step."""
        h = _STEP * np.maximum(1.0, np.abs(x))
        h = np.where(x + h > hi, -h, h)
        points = []
        for c in range(min(COLOUR_STRIDE, len(names))):
            for i in range(nf):
                z = x.copy()
                z[c::COLOUR_STRIDE, i] += h[c::COLOUR_STRIDE, i]
                points.append(z)
        return points, h

    def jacobian(x: np.ndarray, f0: np.ndarray, shifted: list[np.ndarray], h: np.ndarray) -> np.ndarray:
        """Per joint its block (samples, fields): the coloured columns read on its own residual."""
        jac = np.empty((len(names), f0.shape[0], nf))
        colours = min(COLOUR_STRIDE, len(names))
        for c in range(colours):
            for i in range(nf):
                r = shifted[c * nf + i]
                for k in range(c, len(names), COLOUR_STRIDE):
                    jac[k, :, i] = (r[:, k] - f0[:, k]) / h[k, i]
        return jac

    from scipy.optimize import least_squares

    nj = len(names)
    cache: dict[bytes, np.ndarray] = {}

    def residual(z: np.ndarray) -> np.ndarray:
        key = z.tobytes()
        if key not in cache:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            cache[key] = residuals(on, [z.reshape(nj, nf)])[0]
        return cache[key].ravel()

    def full_jacobian(z: np.ndarray) -> np.ndarray:
        """The coloured block Jacobian as the least-squares' (rows: sample-major, joints; columns: joint-major)."""
        x = z.reshape(nj, nf)
        f0 = residual(z).reshape(-1, nj)
        shifted, h = steps(x)
        blocks = jacobian(x, f0, residuals(on, shifted), h)   # (joints, samples, fields)
        out = np.zeros((f0.shape[0], nj, nj, nf))
        out[:, np.arange(nj), np.arange(nj), :] = blocks.transpose(1, 0, 2)
        return out.reshape(f0.shape[0] * nj, nj * nf)

    def converged(intermediate_result: Any) -> None:
        cost = 2.0 * float(intermediate_result.cost)
        s2 = max(cost / max(nj * on.q_rec.shape[0] - nj * nf, 1), 1.0)
        if previous[0] - cost < max(_COST_TOL * s2, _COST_REL * cost):
            raise StopIteration
        previous[0] = cost

    previous = [math.inf]
    x0 = encode(start)
    sol = least_squares(residual, x0.ravel(), jac=full_jacobian, bounds=(np.tile(lo, nj), np.tile(hi, nj)),
                        method="trf", x_scale=np.tile(scale, nj), max_nfev=_MAX_ITER, xtol=1e-8, ftol=1e-10,
                        callback=converged)
    x = sol.x.reshape(nj, nf)
    iterations = int(sol.nfev)
    if progress is not None:
        progress(f"per servo: |r|^2 {float(residual(x0.ravel()) @ residual(x0.ravel())):.6g} -> "
                 f"{float(sol.fun @ sol.fun):.6g} in {iterations} evaluations")
    # Spreads on the whole recording (each joint's block, conditional on the others).
    f_full = residuals(full, [x])[0]
    shifted, h = steps(x)
    jac = jacobian(x, f_full, residuals(full, shifted), h)
    samples = rec.q_state.shape[0]
    lags = correlation_lags(rec.t_state)
    offsets = grid_offsets(rec.q_state, noise.resolution_rad)
    values = decode(x)
    out = PerServo(values=values, start=start, cost_by_joint=(f_full ** 2).sum(axis=0),
                   head_cost_by_joint=(sol.fun.reshape(-1, nj) ** 2).sum(axis=0), head_samples=on.q_rec.shape[0],
                   rollouts=full.rollouts, iterations=iterations)
    for k, (jidx, jname) in enumerate(zip(moving, names, strict=True)):
        jk, rk = jac[k], f_full[:, k]
        std = fit_std(jk, rk, scale, samples, lags, rec.q_state[:, [jidx]], noise.sigma[:, [jidx]],
                      noise.resolution_rad, None if offsets is None else offsets[[jidx]])
        stability = segment_stability(jk, rk, scale, samples, lags)
        for i, f in enumerate(fields):
            n = f"joint.{jname}.{f}"
            sd = float(std[i])
            if f == "latency_s":   # in physics steps, the stamps' time base added (as the per-type latency's)
                sd = math.hypot(sd, time_base_std_steps(noise.stamp_std_s, dt))
            elif not log[i]:
                sd *= unit[i]
            judged = judge(f, values[n], sd, log=bool(log[i]), step_s=dt, physical=rng[f],
                           search=(x[k, i], lo[i], hi[i]), stability=(bool(stability.stable[i]), stability.worst(i)))
            out.record(n, judged, "per joint, the other joints' values held")
    out.rollouts = full.rollouts
    return out


def choose_per_servo(robot: RobotModel, moving: list[int], type_cost: np.ndarray, joint_cost: np.ndarray,
                     samples: int, type_params: dict[str, int], fields_per_joint: int,
                     kept_per_type: int) -> tuple[list[str], dict[str, Any]]:
    """Per joint type, one servo model per joint or one per type, by BIC (module docstring, "Criterion").

    Args:
        robot: The robot.
        moving: The joints fitted per joint (indices), in the order of the costs.
        type_cost: ``|r_j|^2`` of each of those joints with the per-type model.
        joint_cost: The same with one model per joint.
        samples: Sample times of the recording.
        type_params: Per joint type, the variables of its per-type model.
        fields_per_joint: Fields fitted per joint.
        kept_per_type: Per-type variables the per-joint model keeps (``kv``).

    Returns:
        The types that keep per-joint values, and the report ``{criterion, types: {type: {chosen,
        joints, n, scale, per_type: {parameters, cost, bic}, per_joint: {...}}}}``.
    """
    report: dict[str, Any] = {"criterion": "BIC", "types": {}}
    chosen: list[str] = []
    for t in dict.fromkeys(robot.joints[i].type for i in moving):
        sel = [k for k, i in enumerate(moving) if robot.joints[i].type == t]
        n = samples * len(sel)
        k_type = type_params[t]
        k_joint = len(sel) * fields_per_joint + kept_per_type
        c_type, c_joint = float(type_cost[sel].sum()), float(joint_cost[sel].sum())
        s2 = max(c_joint / max(n - k_joint, 1), 1.0)
        bic_type, bic_joint = c_type / s2 + k_type * math.log(n), c_joint / s2 + k_joint * math.log(n)
        per_joint = bic_joint < bic_type
        if per_joint:
            chosen.append(t)
        report["types"][t] = {"chosen": "per joint" if per_joint else "per type", "joints": len(sel), "n": n,
                              "scale": s2, "per_type": {"parameters": k_type, "cost": c_type, "bic": bic_type},
                              "per_joint": {"parameters": k_joint, "cost": c_joint, "bic": bic_joint}}
    return chosen, report
