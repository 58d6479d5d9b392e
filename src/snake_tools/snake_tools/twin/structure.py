"""The servo model's structure a lifted fit keeps: gear play, load-dependent friction or neither, by BIC.

A lifted fit with ``structure="auto"`` (``snake twin identify``'s default) fits the servo model
without either (``none``), with a play per joint type (``backlash``) and with a load-dependent
friction per joint type (``load_friction``: dry friction ``frictionloss + load_friction |tau|``,
``tau`` the actuator's torque, BAM's model m3; :mod:`snake_core.twin_params`), each bounded by
:data:`snake_tools.twin.identify.PHYSICAL_RANGE` and fitted from the ``none`` fit's optimum (its
global stage varying the structure's own parameter instead of the latency), and keeps the one of
the least BIC of the noise-weighted residual (:func:`choose_structure`); the report is the fit's
``structure``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from snake_core.twin_params import TwinParams

STRUCTURES = ("none", "backlash", "load_friction")
"""Servo model structures a lifted fit chooses between (module docstring, "Structure"): ``none``, today's
model (:data:`SERVO_FIELDS` per joint type); ``backlash``, that and a gear play ``backlash_rad`` per joint type;
``load_friction``, that and a load-dependent friction ``load_friction`` per joint type."""
STRUCTURE_FIELDS: dict[str, tuple[str, ...]] = {"none": (), "backlash": ("backlash_rad",),
                                                 "load_friction": ("load_friction",)}
"""The servo fields each structure fits on top of ``none``'s (per joint type, and per joint in the per-joint stage)."""


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


def choose_structure(stages: dict[str, _Stage], n: int) -> tuple[str, dict[str, Any]]:
    """The servo model structure of the least BIC among fitted ones (module docstring, "Structure").

    For a structure of ``k`` fitted variables whose least-squares optimum leaves the noise-weighted
    residual ``|r|^2`` over ``n`` samples, the Gaussian log-likelihood with the noise model's
    per-sample sigma scaled by a common ``s^2`` is ``-2 ln L = |r|^2 / s^2 + const``, so

        AIC = |r|^2 / s^2 + 2 k          (Akaike 1974, IEEE TAC 19(6), eq. 2)
        BIC = |r|^2 / s^2 + k ln n       (Schwarz 1978, Ann. Stat. 6(2))

    with ``s^2 = max(1, |r_K|^2 / (n - K))`` of the structure with the most variables ``K`` (of
    several with as many, the one that leaves the least: ``backlash`` and ``load_friction`` add
    three each, and a structure that does not fit the recording must not inflate the scale)
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
    most = max(st.free for st in stages.values())
    largest = min((st for st in stages.values() if st.free == most), key=lambda st: st.cost)
    s2 = max(largest.cost / max(n - largest.free, 1), 1.0)
    candidates: list[dict[str, Any]] = [
        {"name": name, "parameters": st.free, "cost": st.cost, "aic": st.cost / s2 + 2 * st.free,
         "bic": st.cost / s2 + st.free * math.log(n)} for name, st in stages.items()]
    chosen = str(min(candidates, key=lambda c: float(c["bic"]))["name"])
    return chosen, {"chosen": chosen, "criterion": "BIC", "scale": s2, "n": n, "candidates": candidates}
