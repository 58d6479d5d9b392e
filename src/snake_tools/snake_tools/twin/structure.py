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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from snake_core.twin_params import TwinParams

STRUCTURES = ("none", "backlash", "load_friction")
"""Servo model structures a lifted fit chooses between (module docstring, "Structure"): ``none``, today's
model (:data:`SERVO_FIELDS` per joint type); ``backlash``, that and a gear play ``backlash_rad`` per joint type;
``load_friction``, that and a load-dependent friction ``load_friction`` per joint type."""
DECISIVE_BIC = 10.0
"""A structure whose BIC on a long recording's head exceeds the least by more than this is not fitted on the whole
recording (:func:`decisive_on_head`): a BIC difference above 10 is "very strong" evidence (Kass and Raftery 1995,
J. Am. Stat. Assoc. 90(430), sec. 3.2), and BIC's penalty is the same per sample on the whole recording."""
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


def choose_structure(fits: Mapping[str, tuple[int, float]], n: int) -> tuple[str, dict[str, Any]]:
    """The servo model structure of the least BIC among fitted ones (module docstring, "Structure").

    ``fits`` holds each structure's ``(k, |r|^2)``: for a structure of ``k`` fitted variables whose
    least-squares optimum leaves the noise-weighted residual ``|r|^2`` over ``n`` samples, the
    Gaussian log-likelihood with the noise model's per-sample sigma scaled by a common ``s^2`` is
    ``-2 ln L = |r|^2 / s^2 + const``, so

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
    most = max(k for k, _ in fits.values())
    cost_k = min(cost for k, cost in fits.values() if k == most)
    s2 = max(cost_k / max(n - most, 1), 1.0)
    candidates: list[dict[str, Any]] = [
        {"name": name, "parameters": k, "cost": cost, "aic": cost / s2 + 2 * k, "bic": cost / s2 + k * math.log(n)}
        for name, (k, cost) in fits.items()]
    chosen = str(min(candidates, key=lambda c: float(c["bic"]))["name"])
    return chosen, {"chosen": chosen, "criterion": "BIC", "scale": s2, "n": n, "candidates": candidates}


def decisive_on_head(fits: Mapping[str, tuple[int, float]], n: int) -> tuple[list[str], dict[str, Any]]:
    """The structures still in the running after the recording's head: BIC within :data:`DECISIVE_BIC` of the least.

    ``fits`` holds each structure's ``(k, |r|^2)`` at its optimum on the head of ``n`` samples
    (the criterion of :func:`choose_structure` on the head). A structure whose BIC there exceeds
    the least by more than :data:`DECISIVE_BIC` has lost: only the others are fitted on the whole
    recording, and where one is left it is the choice.

    Returns:
        The structures kept, in ``fits``' order, and :func:`choose_structure`'s report on the head
        with ``on`` ``"head"``, ``margin`` and ``kept``.
    """
    _, report = choose_structure(fits, n)
    least = min(float(c["bic"]) for c in report["candidates"])
    kept = [str(c["name"]) for c in report["candidates"] if float(c["bic"]) - least <= DECISIVE_BIC]
    return kept, report | {"on": "head", "margin": DECISIVE_BIC, "kept": kept}


def where_chosen(report: dict[str, Any]) -> str:
    """Which data a structure report compares the candidates on (:func:`decisive_on_head`).

    Returns:
        ``" on the first N s"`` for a choice made on the head, ``" on the whole recording (after the first N s: K
        kept)"`` where the head kept several, else ``""``.
    """
    if report.get("on") == "head":
        return f" on the first {report['seconds']:.0f} s"
    head = report.get("head")
    if head:
        return f" on the whole recording (after the first {head['seconds']:.0f} s: {', '.join(head['kept'])} kept)"
    return ""
