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
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.gait import make_gait
from snake_core.robot import load_robot
from snake_hardware.sim.worlds import world_from_dict
from snake_tools.cli import positive_float
from snake_tools.experiment._parallel import add_workers_argument, map_trials
from snake_tools.experiment._runner import GaitRun, make_twin, savefig
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


def measure(gait_name: str, mode: str, friction: float, amplitude_scale: float, duration: float) -> float:
    """One run: COM speed (m/s, translate) or |yaw rate| (rad/s, turn) after the start-up."""
    robot = load_robot("tsnake")
    world = world_from_dict({"name": f"flat_mu{friction:g}", "description": "flat ground (rolling-advantage)",
                             "ground": {"type": "plane", "friction": float(friction),
                                        "size": [_GROUND_SIZE, _GROUND_SIZE]}})
    twin = make_twin(robot, world)
    if gait_name == "rolling":
        gait = make_gait("rolling", robot)
        command: tuple[float, ...] = _ROLLING[mode]
    else:
        cfg = robot.gait("conical")
        gait = make_gait("conical", robot, amplitude_dorsal=float(cfg["amplitude_dorsal"]) * amplitude_scale,
                         amplitude_lateral=float(cfg["amplitude_lateral"]) * amplitude_scale)
        command = (_CONICAL_SPEED, float(cfg["taper_max"]) if mode == "turn" else 0.0)
    run = GaitRun(twin, gait)
    run.run(lambda _r: command, _SETTLE_S)
    run.trace.heading.clear()
    run.trace.com.clear()
    run.trace.t.clear()
    run.run(lambda _r: command, duration)
    if mode == "translate":
        return run.com_displacement() / duration
    return abs(run.heading_change()) / duration


def run(args: argparse.Namespace) -> int:
    """All runs, the ratio table, JSON and a figure."""
    if not np.isfinite(args.duration) or args.duration < 5:
        raise ValueError(f"--duration must be >= 5 s, got {args.duration}")
    modes = ("translate", "turn")
    tasks = [("rolling", m, f, 1.0, args.duration) for m in modes for f in args.frictions]
    tasks += [("conical", m, f, a, args.duration)
              for m in modes for f in args.frictions for a in args.amplitude_scales]
    values = dict(zip(tasks, map_trials(measure, tasks, args.workers, desc="rolling-advantage",
                                        progress=not args.json), strict=True))
    cells: list[dict[str, Any]] = []
    for m, f, a in itertools.product(modes, args.frictions, args.amplitude_scales):
        roll = values[("rolling", m, f, 1.0, args.duration)]
        con = values[("conical", m, f, a, args.duration)]
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
