"""The lifted servo fit's global stage: short refinements from a few starts, each joint type keeping its best.

The delay is the least convex direction of the lifted fit's cost (a softer, more damped servo
mimics it: a local minimum), so a short refinement (:data:`_START_NFEV` evaluations) runs from
each of :data:`_LATENCY_STARTS`; each joint type takes its values from the start that left its
own joints the least residual (the types' latencies are separate parameters, and one type's
best start can be another's worst: a lifted body barely couples them). Then each type's best
start again with its ``kp`` times :data:`_KP_START_FACTORS` (a servo stiffer than the start's:
from a soft start its cost is flat towards a low ``kv`` and armature), each type keeping its
best. That mix, or the best single start where it is better, is where the refinement begins
(:func:`global_stage`).

From another structure's optimum (``warm``) the latency's starts were run already: the stage
varies the structure's own parameter instead (:data:`_LOAD_FRICTION_STARTS`,
:data:`_BACKLASH_STARTS`, every type at once), without the stiffer starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from snake_tools.twin.servo_problem import BACKLASH_UNIT, ServoProblem

_LATENCY_STARTS = (0.0, 5.0, 10.0, 20.0)  # physics steps of the global stage's starts
_KP_START_FACTORS = (2.0, 4.0)  # the global stage's starts of a stiffer servo: each type's best start, kp times these
_START_NFEV = 3             # evaluations (each with its Jacobian of rollouts) of a start's short refinement
_BACKLASH_STARTS = (0.05, 0.2, 0.4, 0.7)  # deg, the plays (every type at once) of a warm backlash fit's global stage
_LOAD_FRICTION_STARTS = (0.02, 0.08, 0.15, 0.3)  # the values (every type at once) of a warm one's global stage


@dataclass
class Starts:
    """What the global stage found (the fit's ``starts`` report, :meth:`as_dict`).

    Attributes:
        z: Where the refinement begins (the free variables).
        varied: The servo field the starts vary; ``varied_name`` its flat name with ``*`` for the type.
        values: The varied field's starts, in the fit's units.
        costs: ``|r|^2`` after each start's short refinement.
        per_type: Each joint type's best start (its joints' ``|r|^2``, the start's values), or empty
            where the best single start beat the types' mix.
    """

    z: np.ndarray
    varied: str
    varied_name: str
    values: list[float]
    costs: list[float] = field(default_factory=list)
    per_type: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The report's ``starts`` block, as far as the global stage knows it."""
        return {"count": len(self.costs), "varied": self.varied_name, "values_steps": self.values,
                "refinement_nfev": _START_NFEV, "costs": self.costs,
                "cost_min": min(self.costs) if self.costs else None, "per_type": self.per_type,
                "cost_max": max(self.costs) if self.costs else None}


def _varied(structure: str, warm: Mapping[str, float] | None) -> tuple[str, str, list[float]]:
    """The field the global stage varies, its flat name and its starts (in the fit's units)."""
    if warm is None or structure == "none":
        return "latency_s", "servo.*.latency_s", list(_LATENCY_STARTS)
    if structure == "load_friction":
        return "load_friction", "servo.*.load_friction", list(_LOAD_FRICTION_STARTS)
    return "backlash_rad", "servo.*.backlash_rad", [math.radians(d) / BACKLASH_UNIT for d in _BACKLASH_STARTS]


def global_stage(problem: ServoProblem, structure: str, warm: Mapping[str, float] | None,
                 progress: Callable[[str], None] | None) -> Starts:
    """Short refinements from the starts, each joint type keeping its best (module docstring)."""
    p = problem
    varied, varied_name, start_points = _varied(structure, warm)
    out = Starts(p.x0[p.free], varied, varied_name, start_points)
    lat = np.array([f == varied for f in p.fields]) & p.free
    if not lat.any():
        return out
    best = (math.inf, p.x0[p.free])
    type_best: dict[str, tuple[float, np.ndarray]] = {}
    by_type = out.per_type
    stiffer = [f for f in _KP_START_FACTORS if warm is None]
    n_starts = len(start_points) + len(stiffer)

    def run_start(trial: np.ndarray, label: str, what: dict[str, float]) -> None:
        nonlocal best
        short = p.short(trial, _START_NFEV)
        cost = float(short.fun @ short.fun)
        out.costs.append(cost)
        if cost < best[0]:
            best = (cost, short.x)
        for t, c_t in p.type_costs(short.fun).items():
            if c_t < type_best.get(t, (math.inf, trial))[0]:
                type_best[t], by_type[t] = (c_t, short.x), {"cost": c_t} | what
        if progress is not None:
            progress(f"{structure}: start {len(out.costs)}/{n_starts} ({label}): |r|^2 {cost:.6g}")

    for steps in start_points:
        trial = p.x0.copy()
        trial[lat] = steps
        run_start(trial[p.free], f"{varied} {steps * p.scale[lat][0]:.4g}", {varied: float(steps * p.scale[lat][0])})
    # A stiffer servo than the start's: each type's best start with its kp raised (the kp's
    # range is wide and a stiff servo's cost is flat towards a soft one's kv and armature).
    kp_col = p.column("kp")
    base = p.mix_types(best[1], type_best)
    base_what = {t: dict(v) for t, v in by_type.items()}
    for factor in stiffer:
        trial = base.copy()
        trial[kp_col] = np.minimum(trial[kp_col] + math.log(factor), p.bounds[1][kp_col])
        run_start(trial, f"kp x{factor:g}", {"kp_factor": factor})
        for t, v in by_type.items():   # the latency it started from: the type's best of the first starts
            if v.get("kp_factor") == factor and varied not in v:
                v[varied] = base_what[t][varied]
    mixed = p.mix_types(best[1], type_best)
    f_mixed = p.residual(mixed)
    mixed_cost = float(f_mixed @ f_mixed)
    if progress is not None:
        progress(f"{structure}: each joint type from its own best start: |r|^2 {mixed_cost:.6g}")
    out.z = mixed if mixed_cost < best[0] else best[1]
    if mixed_cost >= best[0]:
        out.per_type = {}
    return out
