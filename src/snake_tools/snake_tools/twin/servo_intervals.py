"""The lifted servo fit's spreads, 95 % intervals and verdict per value, at its optimum.

:class:`Spreads` gives the free variables' standard deviations from the Jacobian at an
optimum, for errors correlated in time (:func:`~snake_tools.twin.uncertainty.parameter_std`)
and, where the angles are rounded to an encoder's ticks, with that rounding's effect on the
estimate (:func:`~snake_tools.twin.uncertainty.quantization_std`). On a rough cost (``wide``:
a load-dependent friction) a Jacobian of 1 % steps sees the roughness's slopes as information:
the spreads are also taken from a Jacobian of :data:`_WIDE_DIFF_STEP` steps, and each variable
keeps the larger.

:func:`judged_stage` turns the optimum and its spreads into the stage's values, intervals and
verdicts (:func:`~snake_tools.twin.uncertainty.judge`, with the held-out segment check): the
latency's spread carries the error common to the joint states' stamps, and a value not
identified is held at its start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from snake_tools.twin.data import Recording
from snake_tools.twin.noise import NoiseModel
from snake_tools.twin.servo_problem import BACKLASH_UNIT, PHYSICAL_RANGE, ServoProblem
from snake_tools.twin.servo_starts import Starts
from snake_tools.twin.structure import _Stage
from snake_tools.twin.uncertainty import (
    correlation_lags,
    fit_std,
    grid_offsets,
    judge,
    segment_stability,
    time_base_std_steps,
)

_WIDE_DIFF_STEP = 5e-2      # relative step of the second Jacobian whose spread a rough cost's intervals hold too


class Spreads:
    """The free variables' standard deviations at an optimum (module docstring): ``Spreads(...)(sol)``."""

    def __init__(self, p: ServoProblem, rec: Recording, noise: NoiseModel, wide: bool) -> None:
        self.p, self.rec, self.noise, self.wide = p, rec, noise, wide
        self.samples = rec.q_state.shape[0]
        self.lags = correlation_lags(rec.t_state)
        self.offsets = grid_offsets(rec.q_state, noise.resolution_rad)

    def of(self, jac: np.ndarray, fun: np.ndarray) -> np.ndarray:
        """The standard deviations from the Jacobian ``jac`` at an optimum whose residual is ``fun``."""
        return fit_std(jac, fun, self.p.x_scale, self.samples, self.lags, self.rec.q_state, self.noise.sigma,
                       self.noise.resolution_rad, self.offsets)

    def __call__(self, sol: Any) -> np.ndarray:
        """The standard deviations at the optimum ``sol`` (with ``wide``, the larger of two Jacobians')."""
        std_free = self.of(sol.jac, sol.fun)
        if self.wide:
            std_free = np.maximum(std_free, self.of(self.p.jacobian(sol.x, step=_WIDE_DIFF_STEP), sol.fun))
        return std_free


def judged_stage(p: ServoProblem, sol: Any, std_free: np.ndarray, spreads: Spreads, r0: np.ndarray,
                 flat0: Mapping[str, float], dt: float, starts: Starts) -> _Stage:
    """The stage at the optimum ``sol``: values, spreads, 95 % intervals, verdicts and the ``starts`` report.

    ``std_free`` are the free variables' standard deviations there, ``r0`` the residual at the
    start. A variable that is not free keeps an infinite spread (its type does not move).
    """
    names, fields, free = p.names, p.fields, p.free
    std = np.full(len(names), math.inf)
    std[free] = std_free
    x = p.full_point(sol.x)
    # The latency is read between the commands' stamps and the joint states': an error common to the
    # joint states' stamps shifts every sample at once (uncertainty module).
    latency = np.array([f == "latency_s" for f in fields])
    std[latency] = np.sqrt(std[latency] ** 2 + time_base_std_steps(spreads.noise.stamp_std_s, dt) ** 2)
    stability = segment_stability(sol.jac, sol.fun, p.x_scale, spreads.samples, spreads.lags)
    stable = np.ones(len(names), dtype=bool)
    stable[free] = stability.stable
    worst = {int(i): stability.worst(k) for k, i in enumerate(np.flatnonzero(free))}
    fitted = p.values_of(x)
    rel: dict[str, float] = {}
    reasons: dict[str, str] = {}
    identified: dict[str, bool] = {}
    intervals: dict[str, tuple[float, float]] = {}
    for i, n in enumerate(names):
        sd = float(std[i]) * (BACKLASH_UNIT if fields[i] == "backlash_rad" else 1.0)   # mrad -> rad
        judged = judge(fields[i], fitted[n], sd, log=bool(p.log[i]), step_s=dt, physical=PHYSICAL_RANGE[fields[i]],
                       search=(x[i], p.lower[i], p.upper[i]),
                       stability=(bool(stable[i]), worst.get(i, (-1, math.nan))))
        rel[n], intervals[n] = judged.rel, judged.interval
        identified[n] = bool(free[i]) and judged.identified
        reasons[n] = judged.reason if free[i] else "its joint type does not move in the recording"
    optimum = dict(fitted)
    keep = {n: flat0[n] for n in names if not identified[n]}  # not told by the recording: held
    fitted.update(keep)
    cost = float(sol.fun @ sol.fun)
    report = starts.as_dict() | {"cost_final": cost, "head_s": p.head_s if p.head is not None else None,
                                 "head_rollouts": p.head_rollouts}
    return _Stage(names, fitted, rel, p.rollouts, float(np.sqrt(np.mean(r0 ** 2))), p.start.with_flat(fitted),
                  intervals, identified, reasons, report, optimum, free=int(free.sum()), cost=cost)
