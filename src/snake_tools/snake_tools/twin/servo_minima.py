"""Ways out of the lifted servo fit's second minima, each run from the refinement's optimum.

With a load-dependent friction the lifted fit's cost is rough (a friction set from the load
every physics step makes joints stick or slip), and the refinement stops in places the truth
leaves less. Four checks, each replacing the optimum only where it leaves less
(:mod:`snake_tools.twin.identify` says which structures run which):

* :func:`neighbour_latencies`: the refinement stops near a whole step of a joint type's latency
  in a second minimum (the twin's fractional latency blends two steps' controls, and there the
  cost bends), measured on the coverage benchmark's drawn physics with the twist servo 0.7 steps
  late, its kv 23 % and armature 61 % low, flagged identified. From the optimum with every
  type's latency one step earlier, and one later, a refinement of :data:`_NEIGHBOUR_NFEV`
  evaluations each; every type takes its values from the one of the three that leaves its own
  joints the least residual, and that mix is refined as long.
* :func:`each_type_alone`: each joint type refined on its own joints' residual, the others held
  (:mod:`snake_tools.twin.by_type`), the types' results put together and refined over every type.
* :func:`scaled_load_frictions`: a type's ``load_friction`` too high, held there by its kp too
  high and its armature too low (each compensating the others' effect on when the joint sticks),
  measured on the coverage benchmark's drawn physics (twist ``load_friction`` 1.12, kp 1.03 and
  armature 0.89 times the truth, |r|^2 9061 where the truth leaves 9041, no interval end lower):
  from the optimum with every type's ``load_friction`` scaled down, and up, by
  :data:`_LOAD_FRICTION_FACTORS`, the same refinements and mix as the latency-step check, the
  mix refined until it converges.
* :func:`interval_ends_probed`: the optimum probed at each variable's 95 % interval ends on its
  linearized profile path, one batch of rollouts, and refined again from the least point there
  where it leaves less (:mod:`snake_tools.twin.probe`: a small move of one type's timing can
  change when another type's joints stick), up to :data:`_PROBE_ROUNDS` times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from snake_tools.twin.by_type import refine_by_type
from snake_tools.twin.probe import lower_at_interval_ends
from snake_tools.twin.servo_problem import DIFF_STEP, ServoProblem

Progress = Callable[[str], None] | None
_NEIGHBOUR_NFEV = 25        # evaluations of each refinement of the latency-step check
_BY_TYPE_NFEV = 25          # evaluations of each run of a type's refinement on its own joints
_BY_TYPE_ROUNDS = 3         # runs of a type's refinement at most (each starts a new trust region) ...
_BY_TYPE_ROUND_TOL = 1.0    # ... while a run lowers its |r|^2 by this times max(1, s^2) or more
_PROBE_ROUNDS = 2           # a fit starts again from a lower point at its intervals' ends at most this often ...
_PROBE_TOL = 1.0            # ... where that point leaves less by this times max(1, s^2) or more
_LOAD_FRICTION_FACTORS = (0.75, 1.0 / 0.75)   # the load-friction check's moves of every type's load_friction


def _cost(sol: Any) -> float:
    return float(sol.fun @ sol.fun)


def _each_type_best(p: ServoProblem, sol: Any, moves: list[tuple[str, np.ndarray]], structure: str, what: str,
                    progress: Progress, mix_nfev: int | None = _NEIGHBOUR_NFEV) -> Any:
    """The least of the optimum, a refinement from each moved point, and their mix per joint type.

    Each of ``moves`` (a label and a point) is refined for :data:`_NEIGHBOUR_NFEV` evaluations;
    every joint type takes its values from the one of the optimum and those refinements that
    leaves its own joints the least residual (the lifted body barely couples the types); that
    mix is refined for ``mix_nfev`` evaluations (``None``: until :meth:`ServoProblem.converged`),
    and the least of them all is kept: one refinement can leave less than the mix.
    """
    best_of = {t: (c, sol.x) for t, c in p.type_costs(sol.fun).items()}
    found = [sol]   # every refinement's result: the least of them is kept
    for label, trial in moves:
        if progress is not None:
            progress(f"{structure}: refinement with {label}")
        moved = p.refine(trial, _NEIGHBOUR_NFEV)
        found.append(moved)
        for t, c in p.type_costs(moved.fun).items():
            if c < best_of[t][0]:
                best_of[t] = (c, moved.x)
    if all(z is sol.x for _, z in best_of.values()):
        return sol
    mixed = p.mix_types(sol.x, best_of)
    if progress is not None:
        moved_types = [t for t, (_, z) in best_of.items() if z is not sol.x]
        progress(f"{structure}: {what} is better for {', '.join(moved_types)}: refined")
    if mix_nfev is None:
        p.restart_at(mixed)
    found.append(p.refine(mixed, mix_nfev))
    kept = min(found, key=_cost)
    if progress is not None:
        progress(f"{structure}: |r|^2 {_cost(sol):.6g} -> {_cost(kept):.6g}")
    return kept


def _moved(p: ServoProblem, x: np.ndarray, field: str,
           moves: list[tuple[str, float, float]]) -> list[tuple[str, np.ndarray]]:
    """``x`` with every free variable ``v`` of ``field`` at ``v * factor + offset`` within the bounds, for each move.

    ``moves``: a label, a factor and an offset each. Empty when no variable of ``field`` is free.
    """
    col = p.column(field)
    if not col.any():
        return []
    lower, upper = p.bounds
    points = []
    for label, factor, offset in moves:
        trial = x.copy()
        trial[col] = np.clip(trial[col] * factor + offset, lower[col], upper[col])
        points.append((label, trial))
    return points


def neighbour_latencies(p: ServoProblem, sol: Any, structure: str, progress: Progress) -> Any:
    """The optimum, or a lower one with some joint type's latency a physics step away (module docstring).

    From the optimum with every type's latency one physics step earlier, and one later
    (:func:`_each_type_best`).
    """
    moves = _moved(p, sol.x, "latency_s", [(f"every latency {s:+g} physics step", 1.0, s) for s in (-1.0, 1.0)])
    if not moves:
        return sol
    return _each_type_best(p, sol, moves, structure, "a latency a physics step away", progress)


def scaled_load_frictions(p: ServoProblem, sol: Any, structure: str, progress: Progress) -> Any:
    """The optimum, or a lower one with some joint type's load-dependent friction scaled (module docstring).

    From the optimum with every type's ``load_friction`` times each of :data:`_LOAD_FRICTION_FACTORS`
    (:func:`_each_type_best`).
    """
    moves = _moved(p, sol.x, "load_friction",
                   [(f"every load_friction x{k:.3g}", k, 0.0) for k in _LOAD_FRICTION_FACTORS])
    if not moves:
        return sol
    return _each_type_best(p, sol, moves, structure, "a scaled load_friction", progress, mix_nfev=None)


def each_type_alone(p: ServoProblem, sol: Any, structure: str, progress: Progress) -> Any:
    """The optimum, or a lower one found by refining each type on its own joints (:mod:`snake_tools.twin.by_type`).

    The types' results put together are refined over every type (until
    :meth:`ServoProblem.converged`), which also gives the Jacobian at the point kept; that
    replaces the optimum where it leaves less.
    """
    if progress is not None:
        progress(f"{structure}: each joint type refined on its own joints")
    cost = _cost(sol)
    mixed = refine_by_type(p.residuals, sol.x, p.type_of, p.joint_type, p.bounds, p.x_scale, DIFF_STEP,
                           _BY_TYPE_NFEV, _BY_TYPE_ROUNDS, _BY_TYPE_ROUND_TOL * p.cost_scale(cost))
    p.restart_at(mixed)
    final = p.refine(mixed)
    lowered = _cost(final)
    if progress is not None:
        progress(f"{structure}: each type on its own joints: |r|^2 {cost:.6g} -> {lowered:.6g}")
    return final if lowered < cost else sol


def interval_ends_probed(p: ServoProblem, sol: Any, spreads: Callable[[Any], np.ndarray], structure: str,
                         progress: Progress) -> tuple[Any, np.ndarray]:
    """The optimum, or a lower one refined from a point at its intervals' ends, and its spreads.

    ``spreads(sol)`` gives the free variables' standard deviations at an optimum, the ones its
    intervals are drawn from (:mod:`snake_tools.twin.probe`).
    """
    std_free = spreads(sol)
    for _ in range(_PROBE_ROUNDS):
        cost = _cost(sol)
        found = lower_at_interval_ends(p.residuals, sol.x, sol.fun, sol.jac, std_free, p.x_scale, p.bounds,
                                       _PROBE_TOL * p.cost_scale(cost))
        if found is None:
            break
        if progress is not None:
            progress(f"{structure}: an interval's end leaves |r|^2 {found[1]:.6g} < {cost:.6g}: refined from there")
        p.previous = found[1]
        moved = p.refine(found[0])
        if _cost(moved) >= cost:
            break
        sol = moved
        std_free = spreads(sol)
    return sol, std_free
