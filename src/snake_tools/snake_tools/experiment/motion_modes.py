"""``snake experiment motion-modes``: 003 Sec. IV-A.2 in the MuJoCo twin.

Translating (omega_c = 1, omega_h = omega_t = 2), turning in place (omega_h = -omega_t = 2)
and head-anchored turning (omega_h = 0, omega_t = 2), 20 s each, flat ground. Each run is
checked against what its mode means:

- translating: the body moves (> 1 m) and its heading stays (< 20 deg);
- turning in place: the heading turns (> 60 deg) and the centre of mass stays (< 0.2 m);
- head-anchored: the heading turns (> 30 deg) and the head moves less than half as far as the tail.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np

from snake_core.gait import Gait, make_gait
from snake_core.robot import RobotModel
from snake_hardware.sim.twin import SimTwin
from snake_tools.cli import positive_float
from snake_tools.experiment import cache
from snake_tools.experiment._plot import savefig
from snake_tools.experiment.executor import add_workers_argument, map_trials
from snake_tools.experiment.task import Command, GaitTask, Trace, run_task, twin_at_spawn
from snake_tools.output import print_json, print_table

MODES: dict[str, Command] = {  # rad/s, (omega_h, omega_t, omega_c) of 003 Sec. IV-A.2
    "translating": (2.0, 2.0, 1.0),
    "turning_in_place": (2.0, -2.0, 0.0),
    "head_anchored": (0.0, 2.0, 0.0),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment motion-modes``."""
    p = subparsers.add_parser("motion-modes", help="003 IV-A.2: translating, turning in place, head-anchored")
    p.add_argument("--duration", type=positive_float, default=20.0, help="simulated seconds per mode")
    p.add_argument("--out", type=Path, default=Path("out/experiments/motion_modes"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_workers_argument(p)
    p.set_defaults(func=run)


class ModeRun(TypedDict):
    """One mode's command, rad/s, what the body did (m, deg, m/s) and whether that fits the mode."""

    omega_h: float
    omega_t: float
    omega_c: float
    com_displacement_m: float
    head_displacement_m: float
    tail_displacement_m: float
    heading_change_deg: float
    mean_speed_m_s: float
    matches_mode: bool
    _trace: NotRequired[dict[str, np.ndarray]]  # the run's trace arrays; taken out before the JSON is written


@dataclass
class MotionModeTask(GaitTask[ModeRun]):
    """Hold one mode's command on flat ground with the rolling-vector gait; score what the body did.

    Attributes:
        mode: A key of :data:`MODES`.
        duration: Simulated s.
    """

    mode: str
    duration: float

    @property
    def time_limit(self) -> float:
        """The run's length, s."""
        return self.duration

    def build_twin(self) -> SimTwin:
        """The T-Snake on flat ground at its spawn pose."""
        return twin_at_spawn(cache.robot("tsnake"), "flat")

    def build_gait(self, robot: RobotModel) -> Gait:
        """The rolling-vector gait with a 1 s ramp-in."""
        return make_gait("rolling", robot, ramp_time=1.0)

    def command(self, trace: Trace) -> Command:
        """The mode's command all run."""
        return MODES[self.mode]

    def score(self, outcome: Trace) -> ModeRun:
        """Displacements of centre of mass, head and tail, m, heading change, deg, and the mode's check."""
        tr = outcome.arrays()
        tail0, tail1 = outcome.body[0][-1, :2], outcome.body[-1][-1, :2]
        com_d = float(np.linalg.norm(tr["com"][-1] - tr["com"][0]))
        head_d = float(np.linalg.norm(tr["head"][-1] - tr["head"][0]))
        tail_d = float(np.linalg.norm(tail1 - tail0))
        turn = float(np.degrees(tr["heading"][-1] - tr["heading"][0]))
        matches = {
            "translating": com_d > 1.0 and abs(turn) < 20.0,
            "turning_in_place": abs(turn) > 60.0 and com_d < 0.2,
            "head_anchored": abs(turn) > 30.0 and head_d < 0.5 * tail_d,
        }[self.mode]
        cmd = MODES[self.mode]
        return ModeRun(omega_h=cmd[0], omega_t=cmd[1], omega_c=cmd[2],
                       com_displacement_m=com_d, head_displacement_m=head_d, tail_displacement_m=tail_d,
                       heading_change_deg=turn, mean_speed_m_s=com_d / self.duration, matches_mode=bool(matches),
                       _trace=tr)


def run(args: argparse.Namespace) -> int:
    """All three modes; table, JSON, figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [(MotionModeTask(mode, args.duration),) for mode in MODES]
    runs = map_trials(run_task, tasks, args.workers, desc="motion-modes", progress=not args.json,
                      scheduler=args.scheduler)
    results = dict(zip(MODES, runs, strict=True))
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, (mode, res) in zip(axes, results.items(), strict=True):
        tr = res.pop("_trace")
        ax.plot(tr["com"][:, 0], tr["com"][:, 1], label="centre of mass")
        ax.plot(tr["head"][:, 0], tr["head"][:, 1], lw=0.6, label="head")
        ax.set_aspect("equal")
        ax.set_title(f"{mode}: {res['com_displacement_m']:.2f} m, {res['heading_change_deg']:.0f} deg", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    out = {"duration_s": args.duration, **results, "figure": savefig(fig, args.out, "motion_modes.png")}
    (args.out / "motion_modes.json").write_text(json.dumps(out, indent=2))
    if args.json:
        print_json(out)
    else:
        print_table([(f"{m}: {k}", v) for m, r in results.items() for k, v in r.items()],
                    title="snake experiment motion-modes (003 Sec. IV-A.2, Fig. 7)")
    return 0 if all(r["matches_mode"] for r in results.values()) else 1
