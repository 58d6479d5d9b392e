"""The servos' zero offsets, seen through the hanging body of a lifted recording (:func:`fit_zero_offsets`).

A servo's horn sits on its spline within a fraction of a degree of the link's zero, so the link
stands at ``q - z`` when the servo reads and holds ``q`` (``zero_offset_rad``,
:mod:`snake_core.twin_params`). Goals and readings are the servo's: only gravity, pulling the
bent body another way than the twin's, shows ``z``, as a steady offset of the joints that hold
the hanging body. On the bench robot (horns drawn within +-0.2 deg) the lifted fit's twin sat up
to 1 mrad from the recording on average on the dorsal joints and 0.4 mrad on the lateral ones,
and seed 7's fit stayed at 2.04 times the noise floor on its dorsal joints for it (1.75 with
the recording turned by the drawn offsets).

Unlike the servo values of :mod:`snake_tools.twin.per_servo`, an offset does not act on its
own joint alone: it tilts every link behind it, and every joint below carries that. The fit
therefore takes the full Jacobian (one rollout per joint, every joint's residual), and the
intervals come from it (:func:`snake_tools.twin.uncertainty.fit_std`): on a short recording
the offsets of neighbouring joints trade against each other (their sum tilts the body below),
and the intervals say so. The servo values are held at the fit's.

What the recording leaves loose, the prior settles: each offset is drawn from N(0, sigma_p^2)
around the robot's calibration (the robot YAML's ``zero_offset``), sigma_p =
:data:`HORN_TOLERANCE_RAD`, so the fit is the maximum a posteriori one: ``|r|^2 + |z|^2 /
sigma_p^2`` is minimised. Without it, neighbouring offsets that trade against each other went
out to twice the horns' tolerance, cancelling on the lifted recording and tilting the body on
the ground: on the bench robot (seeds 0, 1, 2, the 20 s lifted run) the held-out teleop replay
over 60 s, with the bench's contact, stood at 0.85, 0.21 and 0.21 times the default twin's
divergence with the offsets fitted alone, and at 0.41, 0.23 and 0.16 with the prior, the lifted
adequacy the same. A spread is the recording's combined with the prior's (``1 / std^2 =
1 / std_recording^2 + 1 / sigma_p^2``: wider than the joint posterior's where neighbours trade).

Criterion (as :func:`snake_tools.twin.per_servo.choose_per_servo`): the offsets are kept where
``|r|^2 / s^2 + k ln n`` with them (``k`` offsets, ``n`` joint samples, ``s^2 = max(1, |r|^2 /
(n - k))`` of the fit with them) is below ``|r|^2 / s^2`` without.
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
from snake_tools.twin.uncertainty import (
    Judged,
    correlation_lags,
    fit_std,
    grid_offsets,
    judge,
    segment_stability,
)

ZERO_RANGE = (-0.02, 0.02)
"""rad: the offsets searched (a horn within about a degree of its link's zero)."""
HORN_TOLERANCE_RAD = math.radians(0.2)
"""rad, the prior's standard deviation of an offset: a horn calibrated straight within about 0.2 deg.

The bench robot draws its horns within +-0.2 deg (a standard deviation of 2 mrad). A tighter
prior pulls real offsets in: at 1.5 mrad seed 0's 60 s teleop replay went from 0.41 to 0.67 times
the default twin's divergence (seeds 1 and 2: 0.23 to 0.20, 0.16 to 0.19)."""
_UNIT = 1e-3              # rad: the offsets are fitted in mrad
_STEP = 0.05              # mrad, the forward-difference step
_MAX_NFEV = 8             # evaluations of the least squares (each with its Jacobian): the effect is nearly linear
_COST_TOL = 0.1           # stop when an iteration lowers |r|^2 by less than this times max(1, s^2)


@dataclass
class ZeroOffsets(Judged):
    """What :func:`fit_zero_offsets` returns.

    ``joint.<name>.zero_offset_rad`` -> the fitted offset (rad), with its verdict
    (:class:`~snake_tools.twin.uncertainty.Judged`).

    Attributes:
        kept: Whether the criterion keeps them (module docstring).
        report: The criterion's report (``criterion``, ``n``, ``scale``, ``prior_sigma_rad``, ``without``,
            ``with``: the recording's cost and BIC).
        rollouts: Rollouts made.
    """

    kept: bool = False
    report: dict[str, Any] = field(default_factory=dict)
    rollouts: int = 0


def fit_zero_offsets(rec: Recording, robot: RobotModel, base: TwinParams, joints: list[int], noise: NoiseModel,
                     dt: float, workers: int, head: tuple[Recording, np.ndarray] | None = None,
                     progress: Any = None, prior_sigma: float = HORN_TOLERANCE_RAD) -> ZeroOffsets:
    """Fit the zero offsets of the joints ``joints`` with every other value held at ``base`` (module docstring).

    Args:
        rec: The lifted recording.
        robot: The robot recorded.
        base: The fitted twin (its servo values held).
        joints: Indices of the joints whose offsets are fitted.
        noise: The recording's noise model.
        dt: The twin's physics step, s.
        workers: Threads of the rollouts.
        head: The recording's head and the mask of its samples (the iterations roll it out; the
            spreads and the criterion are taken on the whole recording).
        progress: Called as ``progress(message)`` (or ``None``).
        prior_sigma: The prior's standard deviation of an offset, rad (module docstring).
    """
    from scipy.optimize import least_squares

    names = [f"joint.{robot.joints[i].name}.zero_offset_rad" for i in joints]
    flat = base.joint_flat(robot)
    start = {n: flat[n] for n in names}
    lo, hi = (np.full(len(names), b / _UNIT) for b in ZERO_RANGE)
    prior = _UNIT / prior_sigma          # the prior's rows: z / sigma_p, z in mrad
    full = Residuals(rec, robot, noise.sigma, workers)
    on = full.head(head)

    def residuals(what: Residuals, zs: list[np.ndarray]) -> list[np.ndarray]:
        return [r.ravel() for r in what([base.with_flat(dict(zip(names, (z * _UNIT).tolist(), strict=True)))
                                         for z in zs])]

    def jacobian(what: Residuals, z: np.ndarray, f0: np.ndarray) -> np.ndarray:
        """The full forward-difference Jacobian: each offset stepped alone, read on every joint."""
        h = np.where(z + _STEP > hi, -_STEP, _STEP)
        stepped = [z + h[k] * np.eye(len(z))[k] for k in range(len(z))]
        return np.column_stack([(f - f0) / h[k] for k, f in enumerate(residuals(what, stepped))])

    cache: dict[bytes, np.ndarray] = {}

    def residual(z: np.ndarray) -> np.ndarray:
        key = z.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = residuals(on, [z])[0]
        return cache[key]

    def posterior(z: np.ndarray) -> np.ndarray:
        return np.concatenate([residual(z), prior * z])

    def posterior_jac(z: np.ndarray) -> np.ndarray:
        return np.vstack([jacobian(on, z, residual(z)), prior * np.eye(len(z))])

    previous = [math.inf]

    def converged(intermediate_result: Any) -> None:
        cost = 2.0 * float(intermediate_result.cost)
        if previous[0] - cost < _COST_TOL * max(cost / max(residual(intermediate_result.x).size - len(z0), 1), 1.0):
            raise StopIteration
        previous[0] = cost

    z0 = np.clip(np.array([start[n] for n in names]) / _UNIT, lo, hi)
    sol = least_squares(posterior, z0, jac=posterior_jac, bounds=(lo, hi), method="trf", x_scale=np.ones(len(z0)),
                        max_nfev=_MAX_NFEV, xtol=1e-8, ftol=1e-10, callback=converged)
    z = sol.x
    # The whole recording: the spreads (the recording's, then the prior's with them), the
    # criterion on the recording's cost, and the verdicts.
    r_with, r_without = residuals(full, [z, z0])
    jac = jacobian(full, z, r_with)
    samples = rec.q_state.shape[0]
    lags = correlation_lags(rec.t_state)
    scale = np.ones(len(z))
    offsets = grid_offsets(rec.q_state, noise.resolution_rad)
    recorded = fit_std(jac, r_with, scale, samples, lags, rec.q_state, noise.sigma, noise.resolution_rad, offsets)
    std = 1.0 / np.sqrt(1.0 / recorded ** 2 + prior ** 2)
    n = r_with.size
    k = len(names)
    cost_with, cost_without = float(r_with @ r_with), float(r_without @ r_without)
    s2 = max(cost_with / max(n - k, 1), 1.0)
    bic_with, bic_without = cost_with / s2 + k * math.log(n), cost_without / s2
    kept = bic_with < bic_without
    report = {"criterion": "BIC", "n": n, "scale": s2, "kept": kept, "prior_sigma_rad": prior_sigma,
              "without": {"parameters": 0, "cost": cost_without, "bic": bic_without},
              "with": {"parameters": k, "cost": cost_with, "bic": bic_with}}
    if progress is not None:
        progress(f"zero offsets: |r|^2 {cost_without:.6g} -> {cost_with:.6g} (BIC {bic_without:.6g} without, "
                 f"{bic_with:.6g} with: {'kept' if kept else 'not kept'})")
    std = std * _UNIT
    stability = segment_stability(jac, r_with, scale, samples, lags)
    out = ZeroOffsets(values={nm: float(v * _UNIT) for nm, v in zip(names, z, strict=True)}, start=start, kept=kept,
                      report=report)
    for i, nm in enumerate(names):
        judged = judge("zero_offset_rad", out.values[nm], float(std[i]), log=False, step_s=dt, physical=ZERO_RANGE,
                       search=(z[i], lo[i], hi[i]), stability=(bool(stability.stable[i]), stability.worst(i)))
        out.record(nm, judged, "the servo values held, the horn tolerance as prior")
    out.rollouts = full.rollouts
    return out
