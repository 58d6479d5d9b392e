"""``snake experiment rolling-advantage``: how the rolling-vs-conical speed ratio depends on the conditions.

A small sensitivity study in the MuJoCo twin, flat ground: the rolling vector (003 Sec.
IV-A.2 commands: translate (2, 2, 1), turn in place (2, -2, 0) rad/s) against the conical
sidewinding baseline (omega_s = 2 rad/s; no taper to translate, full taper to turn), over

- the ground's Coulomb friction (``--frictions``), and
- the baseline's wave amplitude, as a factor on both of its joint amplitudes
  (``--amplitude-scales``; 1 = the rolling gait's own backbone wave, ``gaits.conical``).

Each run ramps the shape in for ``_SETTLE_S`` s, then measures over ``--duration`` s the
centre-of-mass speed (translate, m/s) or the body's yaw rate (turn, rad/s). Reported per
cell: rolling / conical. Runs are independent trials in ``--workers`` processes. Body
cross-section and terrain feature scale are not varied here (they need other robot or world
files; ``tsnake-benchmark --feature-length`` covers the terrain scale).
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.gait import Gait, make_gait
from snake_core.robot import RobotModel
from snake_hardware.sim.twin import SimTwin
from snake_hardware.sim.worlds import world_from_dict
from snake_tools.cli import positive_float
from snake_tools.experiment import cache
from snake_tools.experiment._plot import savefig
from snake_tools.experiment.executor import add_workers_argument, map_trials
from snake_tools.experiment.task import Command, GaitTask, Trace, reached, run_task, twin_at_spawn
from snake_tools.output import print_json, print_table

_SETTLE_S = 5.0  # s of shape ramp-in and start-up before measuring
_ROLLING = {"translate": (2.0, 2.0, 1.0), "turn": (2.0, -2.0, 0.0)}  # rad/s, 003 Sec. IV-A.2
_CONICAL_SPEED = 2.0  # rad/s, omega_s of the baseline (as tsnake-benchmark)
_GROUND_SIZE = 20.0  # m


def _finite_list(text: str) -> list[float]:
    """The ``type=`` of a comma-separated list of positive numbers."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"need comma-separated numbers, got {text!r}") from err
    if not values or any(not np.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"need positive numbers, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment rolling-advantage``."""
    p = subparsers.add_parser("rolling-advantage",
                              help="rolling vs conical speed ratio over ground friction and baseline amplitude")
    p.add_argument("--frictions", type=_finite_list, default=[0.4, 0.8, 1.2],
                   help="ground Coulomb coefficients, comma-separated")
    p.add_argument("--amplitude-scales", type=_finite_list, default=[0.5, 1.0, 1.5],
                   help="factors on the baseline's joint amplitudes, comma-separated")
    p.add_argument("--duration", type=positive_float, default=20.0, help="measured s per run")
    p.add_argument("--out", type=Path, default=Path("out/experiments/rolling_advantage"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_workers_argument(p)
    p.set_defaults(func=run)


@dataclass
class SpeedTask(GaitTask[float]):
    """One cell's run: a gait on flat ground of one friction, shape ramped in, then measured.

    Score: the centre of mass's speed over the measured part (``translate``, m/s) or the
    body's absolute yaw rate (``turn``, rad/s).

    Attributes:
        gait: ``rolling`` or ``conical``.
        mode: ``translate`` or ``turn``.
        friction: Ground Coulomb coefficient.
        amplitude_scale: Factor on the conical baseline's joint amplitudes (unused by ``rolling``).
        duration: Measured simulated s, after :data:`_SETTLE_S`.
    """

    gait: str
    mode: str
    friction: float
    amplitude_scale: float
    duration: float
    _command: Command = field(default=(), init=False, repr=False)
    _measure_from: int | None = field(default=None, init=False, repr=False)  # trace row where measuring starts
    _settle_end: float = field(default=0.0, init=False, repr=False)  # s
    _measure_end: float = field(default=0.0, init=False, repr=False)  # s

    @property
    def time_limit(self) -> float:
        """A bound the episode never reaches (:meth:`command` ends it after the measured part), s."""
        return _SETTLE_S + self.duration + 1.0

    def build_twin(self) -> SimTwin:
        """The T-Snake on a plane of the cell's friction."""
        world = world_from_dict({"name": f"flat_mu{self.friction:g}",
                                 "description": "flat ground (rolling-advantage)",
                                 "ground": {"type": "plane", "friction": float(self.friction),
                                            "size": [_GROUND_SIZE, _GROUND_SIZE]}})
        return twin_at_spawn(cache.robot("tsnake"), world)

    def build_gait(self, robot: RobotModel) -> Gait:
        """The rolling gait, or the conical baseline with scaled amplitudes."""
        if self.gait == "rolling":
            return make_gait("rolling", robot)
        cfg = robot.gait("conical")
        return make_gait("conical", robot, amplitude_dorsal=float(cfg["amplitude_dorsal"]) * self.amplitude_scale,
                         amplitude_lateral=float(cfg["amplitude_lateral"]) * self.amplitude_scale)

    def reset(self, twin: SimTwin, gait: Gait) -> None:
        """The mode's command (003 Sec. IV-A.2's for rolling; omega_s with no or full taper for conical)."""
        if self.gait == "rolling":
            self._command = _ROLLING[self.mode]
        else:
            taper = float(twin.robot.gait("conical")["taper_max"]) if self.mode == "turn" else 0.0
            self._command = (_CONICAL_SPEED, taper)
        self._measure_from, self._settle_end = None, twin.time + _SETTLE_S

    def command(self, trace: Trace) -> Command | None:
        """The command through the settling and the measured part; None at the end."""
        t = trace.t[-1]
        if self._measure_from is None:
            if not reached(t, self._settle_end):
                return self._command
            self._measure_from, self._measure_end = trace.now, t + self.duration
        return None if reached(t, self._measure_end) else self._command

    def score(self, outcome: Trace) -> float:
        """COM speed (m/s, translate) or |yaw rate| (rad/s, turn) over the measured part."""
        since = self._measure_from if self._measure_from is not None else 0
        if self.mode == "translate":
            return outcome.com_displacement(since) / self.duration
        return abs(outcome.heading_change(since)) / self.duration


def run(args: argparse.Namespace) -> int:
    """All runs, the ratio table, JSON and a figure."""
    if not np.isfinite(args.duration) or args.duration < 5:
        raise ValueError(f"--duration must be >= 5 s, got {args.duration}")
    modes = ("translate", "turn")
    keys = [("rolling", m, f, 1.0) for m in modes for f in args.frictions]
    keys += [("conical", m, f, a) for m in modes for f in args.frictions for a in args.amplitude_scales]
    tasks = [(SpeedTask(*k, args.duration),) for k in keys]
    values = dict(zip(keys, map_trials(run_task, tasks, args.workers, desc="rolling-advantage",
                                       progress=not args.json, scheduler=args.scheduler),
                      strict=True))
    cells: list[dict[str, Any]] = []
    for m, f, a in itertools.product(modes, args.frictions, args.amplitude_scales):
        roll = values[("rolling", m, f, 1.0)]
        con = values[("conical", m, f, a)]
        cells.append({"mode": m, "friction": f, "amplitude_scale": a, "rolling": roll, "conical": con,
                      "ratio": roll / con if con > 0 else None})
    out: dict[str, Any] = {"duration_s": args.duration, "units": {"translate": "m/s", "turn": "rad/s"},
                           "cells": cells}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, m in zip(axes, modes, strict=True):
        for a in args.amplitude_scales:
            pts = [(c["friction"], c["ratio"]) for c in cells if c["mode"] == m and c["amplitude_scale"] == a]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"baseline amplitude x{a:g}")
        ax.axhline(1.0, color="0.6", lw=0.8)
        ax.axhline({"translate": 1.665, "turn": 1.423}[m], color="r", ls="--", lw=0.8, label="003 (flat)")
        ax.set_xlabel("ground friction coefficient")
        ax.set_ylabel(f"rolling / conical {'speed' if m == 'translate' else 'yaw rate'}")
        ax.set_title(m, fontsize=10)
        ax.legend(fontsize=7)
    fig.suptitle("Rolling-vector advantage over conical sidewinding in the twin (flat ground)")
    fig.tight_layout()
    out["figure"] = savefig(fig, args.out, "rolling_advantage.png")
    plt.close(fig)
    (args.out / "rolling_advantage.json").write_text(json.dumps(out, indent=2))
    if args.json:
        print_json(out)
    else:
        print_table([(f"{c['mode']:9s} mu {c['friction']:g}, amplitude x{c['amplitude_scale']:g}",
                      f"rolling {c['rolling']:.4f}, conical {c['conical']:.4f}, ratio "
                      + ("-" if c["ratio"] is None else f"{c['ratio']:.2f}")) for c in cells],
                    title="snake experiment rolling-advantage (flat ground)")
    return 0
