"""``snake experiment phase-reset``: 003 Sec. IV-A.1 in the MuJoCo twin.

omega_h = 1, omega_t = 3 rad/s (omega_c = 0) for 100 s, with and without Algorithm 1's
phase resetting. With resetting the head trajectory should stay a circle; without it,
it should distort (003 Fig. 6). Reported: RMS residual of a circle fitted to the whole
head trajectory, and the drift of the circle's centre between the first and second
half of the run (a circle fitted to each half).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from snake_core.analysis import fit_circle
from snake_core.gait import make_gait
from snake_core.robot import load_robot
from snake_tools.cli import positive_float
from snake_tools.experiment._runner import GaitRun, make_twin, savefig
from snake_tools.output import print_json, print_table


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake experiment phase-reset``."""
    p = subparsers.add_parser("phase-reset", help="003 IV-A.1: head trajectory with / without phase resetting")
    p.add_argument("--duration", type=positive_float, default=100.0, help="simulated seconds per run")
    p.add_argument("--world", default="flat", help="world name in config/worlds or a YAML path")
    p.add_argument("--out", type=Path, default=Path("out/experiments/phase_reset"), help="output directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def one_run(phase_reset: bool, duration: float, world: str) -> dict[str, object]:
    """Simulate one turning run and fit circles to its head trajectory."""
    robot = load_robot("tsnake")
    gait = make_gait("rolling", robot, phase_reset=phase_reset, ramp_time=1.0)
    run = GaitRun(make_twin(robot, world), gait)
    run.run(lambda _r: (1.0, 3.0, 0.0), duration)
    tr = run.trace.arrays()
    settle = tr["t"] >= 5.0  # after the start-up ramp
    head = tr["head"][settle]
    half = len(head) // 2
    whole, first, second = fit_circle(head), fit_circle(head[:half]), fit_circle(head[half:])
    return {
        "circle_residual_m": whole.rms_residual,
        "circle_radius_m": whole.radius,
        "centre_drift_m": float(np.linalg.norm(second.centre - first.centre)),
        "radius_change_m": second.radius - first.radius,
        "heading_change_rad": float(tr["heading"][-1] - tr["heading"][0]),
        "_head": tr["head"],
    }


def run(args: argparse.Namespace) -> int:
    """Both runs, table, JSON and a figure."""
    if not np.isfinite(args.duration) or args.duration < 20:
        raise ValueError(f"--duration must be >= 20 s, got {args.duration}")
    results = {name: one_run(flag, args.duration, args.world)
               for name, flag in (("with_reset", True), ("without_reset", False))}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 5))
    for ax, (name, res) in zip(axes, results.items(), strict=True):
        head = res.pop("_head")
        ax.plot(head[:, 0], head[:, 1], lw=0.7)
        ax.plot(*head[0], "go", label="start")
        ax.plot(*head[-1], "rs", label="end")
        ax.set_aspect("equal")
        ax.set_title(f"{name.replace('_', ' ')}: residual {res['circle_residual_m']:.3f} m, "
                     f"drift {res['centre_drift_m']:.3f} m", fontsize=9)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.legend(fontsize=8)
    fig.suptitle(f"T-Snake head, omega_h = 1, omega_t = 3 rad/s, {args.duration:g} s ({args.world})")
    fig.tight_layout()
    out = {"duration_s": args.duration, "world": args.world, **results,
           "figure": savefig(fig, args.out, "phase_reset.png")}
    (args.out / "phase_reset.json").write_text(json.dumps(out, indent=2))
    if args.json:
        print_json(out)
    else:
        rows = [(f"{n}: {k}", v) for n, r in results.items() for k, v in r.items()]
        print_table(rows, title="snake experiment phase-reset (003 Sec. IV-A.1, Fig. 6)")
    return 0
