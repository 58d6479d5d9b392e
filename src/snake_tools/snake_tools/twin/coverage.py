"""Coverage of the identification's 95 % intervals: how often they hold the truth, over many hidden physics.

An interval is judged the way statisticians judge one: by its coverage, the fraction of cases
in which it holds the true value. One case (:func:`run_case`) draws hidden physics from
:data:`HIDDEN_RANGES` (per joint type ``kp``, ``kv``, ``armature``, ``frictionloss``,
``latency_s``, and the ground friction) with a seeded generator (:func:`draw_hidden`), records
the twin with them (a lifted run under ``snake twin excite``'s lifted multisine and an on-ground
run of the rolling gait, :func:`snake_tools.twin.recording.record_twin_run`), optionally measured
as a servo bus measures (``sensing``: :data:`snake_tools.twin.recording.ROBOT_SENSING`), fits the
servo model lifted (structure ``none``; ``backlash``, a gear play per joint type drawn and fitted
too; ``load_friction``, a load-dependent friction per joint type drawn and fitted too) and the
ground friction with that servo model held, and keeps per parameter the truth, the fitted value, the
95 % interval and whether it was flagged identified. :func:`coverage_table` counts, per
parameter: the fraction of intervals holding the truth (``coverage``), the fraction flagged
identified, the coverage among those flagged (``coverage_identified``: the figure a user relies
on, goal :data:`COVERAGE_GOAL`), and the median interval width.

``snake bench twin --coverage N`` runs N cases (case ``k`` draws from seed ``[seed, k]``). The cases
are independent trials (:func:`coverage_case`): ``--workers`` runs them in that many processes of a
local Dask cluster, ``--scheduler`` on a running one (:mod:`snake_tools.experiment.executor`),
with the same results as one after the other.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams, joint_types

COVERAGE_GOAL = 0.90
"""Least coverage of the 95 % intervals of parameters flagged identified, over many cases."""
HIDDEN_RANGES: dict[str, tuple[float, float, bool]] = {
    "kp": (20.0, 80.0, True),            # N m/rad: a soft to a stiff position loop of an X-series servo
    "kv": (0.25, 1.0, True),             # N m s/rad: a servo's derivative gain beyond its back-EMF damping
    "armature": (0.0055, 0.022, True),   # kg m^2: rotor inertia behind the gear train, half to twice an XM430's
    "frictionloss": (0.0, 0.03, False),  # N m: none to a few per cent of a stall torque
    "latency_s": (0.0, 0.04, False),     # s: none to two control periods
    "ground_friction": (0.3, 1.2, True),  # sliding coefficient: polished floor to rubber on carpet
    "backlash_rad": (math.radians(0.1), math.radians(0.4), False),  # rad: an X-series gear train's play
    # N m of dry friction per N m of torque: BAM's m3 fit of an XL330 gives 0.12, snake servo-model
    # identify on eight XL330 logs 0.14-0.21 (snake_core.twin_params, load_friction)
    "load_friction": (0.05, 0.25, False),
}
"""Range of each hidden parameter, ``(low, high, log-uniform)``: per joint type the servo fields, and the
ground friction; the gear play only for the ``backlash`` structure, the load-dependent friction only for
the ``load_friction`` structure."""
_MOCAP_NOISE_M = 0.001      # m, the mocap noise of the ground run (the bench's)


@dataclass(frozen=True)
class CaseResult:
    """One parameter of one case: truth, fit, 95 % interval, verdict."""

    name: str
    true: float
    fitted: float
    lower: float
    upper: float
    identified: bool

    @property
    def covered(self) -> bool:
        """Whether the interval holds the true value (bounds included)."""
        return self.lower <= self.true <= self.upper

    def as_dict(self) -> dict[str, Any]:
        """Plain data (an infinite bound as None)."""
        return {"name": self.name, "true": self.true, "fitted": self.fitted,
                "interval": [_finite(self.lower), _finite(self.upper)], "identified": self.identified,
                "covered": self.covered}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def draw_hidden(robot: RobotModel, rng: np.random.Generator, structure: str = "none") -> dict[str, float]:
    """Hidden physics drawn from :data:`HIDDEN_RANGES` (flat ``twin_params`` names, the ground friction included).

    With ``structure`` ``backlash`` a gear play per joint type too, with ``load_friction`` a
    load-dependent friction per joint type, drawn after the rest (a seed keeps its other values).
    """
    values: dict[str, float] = {}

    def draw(key: str) -> float:
        lo, hi, log = HIDDEN_RANGES[key]
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))) if log else rng.uniform(lo, hi))

    for t in joint_types(robot):
        for f in ("kp", "kv", "armature", "frictionloss", "latency_s"):
            values[f"servo.{t}.{f}"] = draw(f)
    values["contact.ground_friction"] = draw("ground_friction")
    extra = {"backlash": "backlash_rad", "load_friction": "load_friction"}.get(structure)
    if extra is not None:
        for t in joint_types(robot):
            values[f"servo.{t}.{extra}"] = draw(extra)
    return values


def run_case(robot: RobotModel, hidden: dict[str, float], seed: int, duration: float, ground_duration: float,
             sensing: Any = None, workers: int | None = None, structure: str = "none") -> list[CaseResult]:
    """Record the twin with ``hidden`` physics, fit it as a researcher does, and judge each interval.

    Args:
        robot: The robot.
        hidden: Hidden physics (:func:`draw_hidden`).
        seed: Seed of the recordings' sensing and mocap noise.
        duration: Lifted recording, s (the lifted multisine).
        ground_duration: On-ground recording, s (0: no ground run, the ground friction not judged).
        sensing: How ``joint_states`` is measured (None: exact).
        workers: Threads of the lifted fit's rollouts.
        structure: The servo model structure fitted (the hidden physics': ``backlash`` when they
            have gear play, ``load_friction`` when they have load-dependent friction).

    Returns:
        One :class:`CaseResult` per fitted parameter.
    """
    from snake_core.excitation import JointBounds, plan_excitation
    from snake_tools.twin.ground import start_std
    from snake_tools.twin.identify import identify, read_recording
    from snake_tools.twin.recording import record_twin_run

    params = TwinParams().with_flat(hidden)
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=duration)
    out: list[CaseResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        lifted_bag = record_twin_run(Path(tmp) / "lifted", robot, duration, twin_params=params, world=None,
                                     lifted=True, controller=lambda tw: motion.positions(np.array([tw.time]))[0],
                                     seed=seed, sensing=sensing)
        fits = [identify(read_recording(lifted_bag, robot), robot, TwinParams(), lifted=True, structure=structure,
                         workers=workers)]
        if ground_duration > 0:
            half = ground_duration / 2
            ground_bag = record_twin_run(Path(tmp) / "ground", robot, ground_duration, twin_params=params,
                                         mocap_noise_m=_MOCAP_NOISE_M, seed=seed + 1, sensing=sensing,
                                         cmd_vel=lambda t: (0.08, 0.0) if t < half else (0.05, 0.15))
            fits.append(identify(read_recording(ground_bag, robot), robot, fits[0].params, world="flat",
                                 world_friction=0.8, start_std=start_std(fits[0].intervals, fits[0].names)))
    for fit in fits:
        for name in fit.names:
            lo, hi = fit.intervals.get(name, (-math.inf, math.inf))
            out.append(CaseResult(name, float(hidden[name]), float(fit.fitted[name]), float(lo), float(hi),
                                  bool(fit.identified[name])))
    return out


def coverage_table(cases: Sequence[Sequence[CaseResult]]) -> dict[str, dict[str, Any]]:
    """Per parameter, over the cases: coverage, flagged identified, coverage among those flagged, median width.

    Returns:
        ``{name: {cases, covered, coverage, identified, identified_fraction, identified_covered,
        coverage_identified, median_width}}``: ``coverage`` the fraction of the intervals that hold the
        truth; ``coverage_identified`` that among the cases flagged identified (None when none was);
        ``median_width`` the median of ``upper - lower`` in the parameter's unit (None when infinite).
    """
    rows: dict[str, list[CaseResult]] = {}
    for case in cases:
        for r in case:
            rows.setdefault(r.name, []).append(r)
    table: dict[str, dict[str, Any]] = {}
    for name, rs in rows.items():
        flagged = [r for r in rs if r.identified]
        width = float(np.median([r.upper - r.lower for r in rs]))
        table[name] = {
            "cases": len(rs), "covered": sum(r.covered for r in rs), "coverage": sum(r.covered for r in rs) / len(rs),
            "identified": len(flagged), "identified_fraction": len(flagged) / len(rs),
            "identified_covered": sum(r.covered for r in flagged),
            "coverage_identified": sum(r.covered for r in flagged) / len(flagged) if flagged else None,
            "median_width": _finite(width),
        }
    return table


def coverage_case(k: int, seed: int, duration: float, ground_duration: float, sensing: Any = None,
                  workers: int | None = None, structure: str = "none") -> list[CaseResult]:
    """Case ``k`` of a coverage run: hidden physics drawn from seed ``[seed, k]``, recorded, fitted, judged.

    A trial of :mod:`snake_tools.experiment.executor`: everything it draws comes from its
    arguments (the recordings' sensing from seed ``2 k``), so any process may run it.
    ``workers`` is the threads of its lifted fit's rollouts (:func:`run_case`).
    """
    from snake_core.robot import load_robot

    robot = load_robot("tsnake")
    hidden = draw_hidden(robot, np.random.default_rng([seed, k]), structure)
    return run_case(robot, hidden, 2 * k, duration, ground_duration, sensing, workers, structure)


def coverage_figures(n: int, seed: int, duration: float, ground_duration: float, sensing: Any = None,
                     workers: int | None = None, progress: Any = None, structure: str = "none",
                     trial_workers: int = 1, scheduler: str | None = None) -> dict[str, Any]:
    """``snake bench twin --coverage N``'s figures: ``n`` cases (case ``k`` drawn from seed ``[seed, k]``).

    ``structure`` ``backlash`` draws a gear play too, ``load_friction`` a load-dependent friction,
    and fits that structure (:func:`run_case`). With ``trial_workers`` above 1 (or a ``scheduler``)
    the cases run in Dask worker processes (:func:`snake_tools.experiment.executor.map_trials`),
    each fit's rollouts on one thread; else here, one after the other, with ``workers`` threads.

    Returns:
        ``cases``, ``seed``, ``structure``, ``lifted_recording_s``, ``ground_recording_s``, ``robot_sensing``,
        ``workers`` (the processes that ran the cases; None on a ``scheduler``), ``scheduler``,
        ``hidden_ranges``, ``parameters`` (:func:`coverage_table`), ``worst_coverage_identified`` (the
        least over the parameters; None when none was flagged), ``goal``, ``meets_goal``, and
        ``detail`` (every case's hidden physics and results).
    """
    from snake_tools.experiment.executor import map_trials

    here = scheduler is None and trial_workers <= 1
    tasks = [(k, seed, duration, ground_duration, sensing, workers if here else 1, structure) for k in range(n)]
    done = [0]

    def report(k: int, results: list[CaseResult]) -> None:
        done[0] += 1
        if progress is not None:
            missed = [r.name for r in results if r.identified and not r.covered]
            progress(f"case {k + 1}/{n} ({done[0]} done): {sum(r.identified for r in results)} identified, "
                     f"missed by an identified interval: {', '.join(missed) or 'none'}")

    cases: list[list[CaseResult]] = map_trials(coverage_case, tasks, trial_workers, desc="coverage cases",
                                               progress=False, scheduler=scheduler, each=report)
    detail = [{"case": k, "results": [r.as_dict() for r in results]} for k, results in enumerate(cases)]
    table = coverage_table(cases)
    flagged = [v["coverage_identified"] for v in table.values() if v["coverage_identified"] is not None]
    worst = min(flagged) if flagged else None
    return {"cases": n, "seed": seed, "structure": structure, "lifted_recording_s": duration,
            "ground_recording_s": ground_duration, "robot_sensing": sensing is not None,
            "workers": None if scheduler is not None else max(1, min(trial_workers, n)), "scheduler": scheduler,
            "hidden_ranges": {k: list(v) for k, v in HIDDEN_RANGES.items()}, "parameters": table,
            "worst_coverage_identified": worst, "goal": COVERAGE_GOAL,
            "meets_goal": worst is not None and worst >= COVERAGE_GOAL, "detail": detail}
