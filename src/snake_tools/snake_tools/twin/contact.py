"""The twin's contact model chosen by an on-ground recording (:func:`choose_contact`).

How a contact resists (:class:`snake_core.twin_params.ContactParams`: the friction cone, the
torsional friction, the contact's stiffness ``solref``) is not a number the ground friction's fit
(:mod:`snake_tools.twin.ground`) can move, and on a rolling gait it decides more of the head's
path than the servo model does. The candidates are a grid (:func:`candidates`): a pyramidal or an
elliptic cone, no torsional friction or :data:`TORSIONAL_M` of it, MuJoCo's default time constant
or :data:`STIFF_SOLREF` (two physics steps: the stiffest contact the 4 ms step resolves). Each is
scored by two statistics at once, at its best ground friction of a scan of :data:`MU_FACTORS` times
the start's, with the servo model held at the start's: the ground fit's own
(:func:`snake_tools.twin.ground._load_residual`: per joint and window, the RMS tracking error, twin
minus robot, over ``SIGMA_LOAD``), and the head's speed and turn rate per span of constant
``cmd_vel`` (:mod:`snake_tools.twin.path_rates`). The path itself is not scored: a few per cent of
any parameter moves the head by centimetres over a run; its rates over a span are local, and they
are what a contact model changes most: how fast the body turns under a command.

Criterion (as :func:`snake_tools.twin.structure.choose_structure`, each statistic scaled by its
own variance): ``BIC = |r|^2 / s^2 + |r_p|^2 / s_p^2 + k ln (w + n_p)``, ``r`` the tracking
residual over ``w`` windows (the joints of one window share one contact state: one sample each, as
the ground friction's interval counts them), ``r_p`` the span rates' of size ``n_p``, ``k`` the
candidate's parameters (the friction, plus one for each of the cone, the torsional friction and the
stiffness that differ from the start's), and the scales ``s^2 = max(1, |r|^2 / (w - k))`` and
``s_p^2 = max(1, |r_p|^2 / (n_p - k))`` of the scanned points that leave the least of each. On the
ground the tracking statistic's scale is mostly the held servo model's misfit (``s^2`` of 50 to
1400 on the bench robot's seeds), which a contact model cannot remove. A recording without the
head's heading or spans, or held at a servo model without its spreads (a servo model not fitted:
the span rates are confounded with it, :mod:`snake_tools.twin.ground`), is scored by the tracking
statistic alone. The start's contact model is one of the candidates' fields kept; ``solimp`` is the
start's throughout.

Measured on the bench robot: docs/twin_identification.md, "The contact model".
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import CONES, MUJOCO_SOLREF, ContactParams, TwinParams
from snake_tools.twin.data import Recording
from snake_tools.twin.ground import _load_residual
from snake_tools.twin.path_rates import path_residual
from snake_tools.twin.rollout import simulate_paths
from snake_tools.twin.rollout_pool import Payload
from snake_tools.twin.structure import DECISIVE_BIC

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
                   mu0: float, progress: Any = None, span_rates: bool = True,
                   workers: int = 1) -> tuple[ContactParams, dict[str, Any]]:
    """The contact model of least BIC on an on-ground recording (module docstring).

    Args:
        rec: The on-ground recording.
        robot: The robot recorded.
        start: The twin held (servo model; its contact model is the first candidate).
        world: The recording's world.
        mu0: The start's ground friction (the scans' centre).
        progress: Called as ``progress(message)`` after each candidate (or ``None``).
        span_rates: Score the span rates too (``identify`` passes whether the servo model held
            comes with its spreads: the span rates are confounded with the servo model, as the
            ground friction's fit says, :mod:`snake_tools.twin.ground`).
        workers: Processes of each candidate's scan (:func:`snake_tools.twin.rollout.simulate_paths`).

    Returns:
        The chosen contact model (its ground friction the start's), and the report ``{criterion,
        chosen, margin, runner_up, decisive, within_margin, n, n_path, scale, path_scale,
        candidates: [{cone, torsional_friction, solref, parameters, cost, path_cost, mu, bic}],
        rollouts}`` (``cost``: the tracking statistic's |r|^2, ``path_cost``: the span rates', at
        the candidate's ``mu``; ``margin``: the next candidate's BIC above the chosen one's,
        ``decisive`` where it exceeds :data:`~snake_tools.twin.structure.DECISIVE_BIC`, and
        ``within_margin`` the other candidates within that of the chosen: a choice that is not
        decisive is still the least BIC's, and says so).
    """
    scans: list[tuple[ContactParams, dict[float, tuple[float, float]]]] = []
    n = n_path = 0
    payload = Payload(rec, robot)
    for k, c in enumerate(candidates(start.contact)):
        twin = dataclasses.replace(start, contact=c)
        costs = {}
        runs = simulate_paths(rec, robot, [twin.with_flat({"contact.ground_friction": mu0 * factor})
                                           for factor in MU_FACTORS], world, workers, payload)
        for factor, (q, xy, heading) in zip(MU_FACTORS, runs, strict=True):
            r = _load_residual(rec, q)
            rp = path_residual(rec, xy, heading) if span_rates else np.empty(0)
            costs[mu0 * factor] = (float(r @ r), float(rp @ rp))
            n, n_path = r.size, rp.size
        scans.append((c, costs))
        if progress is not None:
            least = min(costs.values())
            progress(f"contact candidate {k + 1}: {c.cone} cone, torsional {c.torsional_friction:g} m, solref "
                     f"{c.solref[0]:g} s: least |r|^2 {least[0]:.6g} (span rates {least[1]:.6g})")
    k_of = [1 + _extra_parameters(c, start.contact) for c, _ in scans]
    windows = n // len(robot.joints)   # the joints of one window share one contact state: one sample each
    s2 = _scale([(cost[0], k) for (_, costs), k in zip(scans, k_of, strict=True) for cost in costs.values()],
                windows)
    s2_path = _scale([(cost[1], k) for (_, costs), k in zip(scans, k_of, strict=True) for cost in costs.values()],
                     n_path) if n_path else 1.0
    rows: list[dict[str, Any]] = []
    for (c, costs), k in zip(scans, k_of, strict=True):
        mu = min(costs, key=lambda m: costs[m][0] / s2 + costs[m][1] / s2_path)
        rows.append({"cone": c.cone, "torsional_friction": c.torsional_friction, "solref": list(c.solref),
                     "parameters": k, "cost": costs[mu][0], "path_cost": costs[mu][1], "mu": mu,
                     "bic": costs[mu][0] / s2 + costs[mu][1] / s2_path + k * math.log(windows + n_path),
                     "model": c})
    best, runner_up = sorted(rows, key=lambda row: row["bic"])[:2]
    fields = ("cone", "torsional_friction", "solref")
    margin = runner_up["bic"] - best["bic"]
    near = sum(row["bic"] - best["bic"] <= DECISIVE_BIC for row in rows) - 1
    report = {"criterion": "BIC", "n": n, "windows": windows, "n_path": n_path, "scale": s2, "path_scale": s2_path,
              "rollouts": len(rows) * len(MU_FACTORS),
              "chosen": {k: best[k] for k in fields},
              "margin": margin, "runner_up": {k: runner_up[k] for k in fields}, "decisive": margin > DECISIVE_BIC,
              "within_margin": near,
              "candidates": [{k: v for k, v in row.items() if k != "model"} for row in rows]}
    if progress is not None:
        progress(f"contact model: {_named(best)}, BIC {margin:.3g} below the next ({_named(runner_up)})"
                 + ("" if margin > DECISIVE_BIC else f": not decisive, {near} other candidates within "
                    f"{DECISIVE_BIC:g}: the recording does not tell them apart"))
    return best["model"], report


def _named(row: dict[str, Any]) -> str:
    """A candidate's contact model in words."""
    return f"{row['cone']} cone, torsional {row['torsional_friction']:g} m, solref {row['solref'][0]:g} s"


def _scale(costs: list[tuple[float, int]], n: int) -> float:
    """``max(1, |r|^2 / (n - k))`` of the (cost, parameters) pair that leaves the least (module docstring)."""
    cost, k = min(costs)
    return max(cost / max(n - k, 1), 1.0)


def contact_block(c: ContactParams) -> dict[str, Any]:
    """The contact model's fields as a ``twin.contact`` block writes them."""
    return {"cone": c.cone, "torsional_friction": c.torsional_friction, "solref": list(c.solref)}

