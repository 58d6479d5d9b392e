"""The twin's contact model chosen by an on-ground recording (:func:`choose_contact`).

How a contact resists (:class:`snake_core.twin_params.ContactParams`: the friction cone, the
torsional friction, the contact's stiffness ``solref``) is not a number the ground friction's fit
(:mod:`snake_tools.twin.ground`) can move, and on a rolling gait it decides more of the head's
path than the servo model does. The candidates are a grid (:func:`candidates`): a pyramidal or an
elliptic cone, no torsional friction or :data:`TORSIONAL_M` of it, MuJoCo's default time constant
or :data:`STIFF_SOLREF` (two physics steps: the stiffest contact the 4 ms step resolves). Each is
scored by the ground fit's own statistic (:func:`snake_tools.twin.ground._load_residual`: per joint
and window, the RMS tracking error, twin minus robot, over ``SIGMA_LOAD``) at its best ground
friction of a scan of :data:`MU_FACTORS` times the start's, with the servo model held at the start's.
The path is not scored: a few per cent of any parameter moves the head by centimetres over a
run, where the windowed tracking errors are smooth.

Criterion (as :func:`snake_tools.twin.structure.choose_structure`): ``BIC = |r|^2 / s^2 + k ln n``,
``n`` the residual's size, ``k`` the candidate's parameters (the friction, plus one for each of
the cone, the torsional friction and the stiffness that differ from the start's), and ``s^2 =
max(1, |r|^2 / (n - k))`` of the candidate that leaves the least. The start's contact model is one
of the candidates' fields kept; ``solimp`` is the start's throughout.

Measured on the bench robot: docs/twin_identification.md, "The contact model".
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

from snake_core.robot import RobotModel
from snake_core.twin_params import CONES, MUJOCO_SOLREF, ContactParams, TwinParams
from snake_tools.twin.data import Recording
from snake_tools.twin.ground import _load_residual
from snake_tools.twin.rollout import simulate

TORSIONAL_M = (0.0, 0.005, 0.02)
"""Torsional friction of the candidates, m: none, a contact patch of a few mm, of a few cm."""
STIFF_SOLREF = (0.008, 1.0)
"""The stiff candidates' ``solref``: a time constant of two 4 ms physics steps, critically damped."""
MU_FACTORS = (0.6, 0.75, 0.9, 1.0, 1.15, 1.35)
"""Ground friction of each candidate's scan, times the start's (the friction's own fit follows on the choice)."""


def candidates(start: ContactParams) -> list[ContactParams]:
    """The grid of contact models, the start's first (module docstring)."""
    grid = [dataclasses.replace(start, cone=cone, torsional_friction=tors, solref=solref)
            for cone, tors, solref in itertools.product(CONES, TORSIONAL_M, (MUJOCO_SOLREF, STIFF_SOLREF))]
    return [start] + [c for c in grid if c != start]


def _extra_parameters(c: ContactParams, start: ContactParams) -> int:
    """Fields of the contact model that ``c`` sets otherwise than ``start`` (each one parameter)."""
    return sum(getattr(c, f) != getattr(start, f) for f in ("cone", "torsional_friction", "solref"))


def choose_contact(rec: Recording, robot: RobotModel, start: TwinParams, world: str | Path | None,
                   mu0: float, progress: Any = None) -> tuple[ContactParams, dict[str, Any]]:
    """The contact model of least BIC on an on-ground recording (module docstring).

    Args:
        rec: The on-ground recording.
        robot: The robot recorded.
        start: The twin held (servo model; its contact model is the first candidate).
        world: The recording's world.
        mu0: The start's ground friction (the scans' centre).
        progress: Called as ``progress(message)`` after each candidate (or ``None``).

    Returns:
        The chosen contact model (its ground friction the start's), and the report ``{criterion,
        chosen, n, scale, candidates: [{cone, torsional_friction, solref, parameters, cost, mu, bic}],
        rollouts}``.
    """
    rows: list[dict[str, Any]] = []
    for k, c in enumerate(candidates(start.contact)):
        twin = dataclasses.replace(start, contact=c)
        costs = {}
        for factor in MU_FACTORS:
            q, _ = simulate(rec, robot, twin.with_flat({"contact.ground_friction": mu0 * factor}), world)
            r = _load_residual(rec, q)
            costs[mu0 * factor] = float(r @ r)
        mu = min(costs, key=costs.__getitem__)
        rows.append({"cone": c.cone, "torsional_friction": c.torsional_friction, "solref": list(c.solref),
                     "parameters": 1 + _extra_parameters(c, start.contact), "cost": costs[mu], "mu": mu,
                     "n": r.size, "model": c})
        if progress is not None:
            progress(f"contact candidate {k + 1}: {c.cone} cone, torsional {c.torsional_friction:g} m, solref "
                     f"{c.solref[0]:g} s: |r|^2 {costs[mu]:.6g} at friction {mu:.3g}")
    n = rows[0]["n"]
    least = min(rows, key=lambda row: row["cost"])
    s2 = max(least["cost"] / max(n - least["parameters"], 1), 1.0)
    for row in rows:
        row["bic"] = row["cost"] / s2 + row["parameters"] * math.log(n)
    best = min(rows, key=lambda row: row["bic"])
    report = {"criterion": "BIC", "n": n, "scale": s2, "rollouts": len(rows) * len(MU_FACTORS),
              "chosen": {k: best[k] for k in ("cone", "torsional_friction", "solref")},
              "candidates": [{k: v for k, v in row.items() if k not in ("model", "n")} for row in rows]}
    return best["model"], report


def contact_block(c: ContactParams) -> dict[str, Any]:
    """The contact model's fields as a ``twin.contact`` block writes them."""
    return {"cone": c.cone, "torsional_friction": c.torsional_friction, "solref": list(c.solref)}

