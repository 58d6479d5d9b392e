"""``snake gait``: generate N seconds of a gait offline and summarise it."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from snake_core.gait import make_gait
from snake_core.gait.rolling import RollingVectorGait
from snake_core.robot import load_robot
from snake_tools.cli import finite_float, positive_float
from snake_tools.output import print_json, print_table

_DEFAULT_ROBOT = {"rolling": "tsnake", "conical": "tsnake", "serpenoid": "wheeled_snake"}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake gait``."""
    p = subparsers.add_parser("gait", help="generate a gait offline and summarise it")
    p.add_argument("--gait", choices=sorted(_DEFAULT_ROBOT), default="rolling", help="gait to generate")
    p.add_argument("--robot", default=None, help="robot name or YAML (default: tsnake, wheeled_snake for serpenoid)")
    p.add_argument("--omega-h", type=finite_float, default=0.0, help="rolling: head rolling speed, rad/s")
    p.add_argument("--omega-t", type=finite_float, default=0.0, help="rolling: tail rolling speed, rad/s")
    p.add_argument("--omega-c", type=finite_float, default=0.0, help="rolling: helix wave speed, rad/s")
    p.add_argument("--omega-s", type=finite_float, default=0.0, help="conical: wave speed, rad/s")
    p.add_argument("--taper", type=finite_float, default=0.0, help="conical: amplitude taper")
    p.add_argument("--omega", type=finite_float, default=0.0, help="serpenoid: wave speed, rad/s")
    p.add_argument("--head-offset", type=finite_float, default=0.0, help="serpenoid: head offset, rad")
    p.add_argument("--duration", type=positive_float, default=10.0, help="seconds of gait to generate")
    p.add_argument("--dt", type=positive_float, default=None, help="time step, s (default: the gait's, 0.02)")
    p.add_argument("--no-phase-reset", action="store_true", help="rolling: disable Algorithm 1's phase resetting")
    p.add_argument("--no-blend", action="store_true", help="rolling: paper-exact output at resets (no blending)")
    p.add_argument("--reset-threshold", type=positive_float, default=None,
                   help="rolling: |phi_h - phi_t| that triggers a reset, rad (default from the YAML: 2 pi as in 003)")
    p.add_argument("--out", type=Path, default=None, help="write the joint trajectory (.csv or .npz)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Generate the gait and print the summary."""
    if not np.isfinite(args.duration) or args.duration <= 0:
        raise ValueError(f"--duration must be positive, got {args.duration}")
    robot = load_robot(args.robot or _DEFAULT_ROBOT[args.gait])
    options: dict[str, object] = {}
    if args.gait == "rolling":
        options = {"phase_reset": not args.no_phase_reset, "ramp_time": 0.0}
        if args.no_blend:
            options["reset_blend_time"] = 0.0
        if args.reset_threshold is not None:
            options["reset_threshold"] = args.reset_threshold
    gait = make_gait(args.gait, robot, **options)
    command = {
        "rolling": (args.omega_h, args.omega_t, args.omega_c),
        "conical": (args.omega_s, args.taper),
        "serpenoid": (args.omega, args.head_offset),
    }[args.gait]
    dt = args.dt if args.dt is not None else float(robot.gaits.get("rolling", {}).get("dt", 0.02))
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"--dt must be positive, got {dt}")
    n = round(args.duration / dt)
    q = np.empty((n + 1, len(robot.joints)))
    q[0] = gait.step(0.0, command)
    phase_diff = 0.0
    for k in range(1, n + 1):
        q[k] = gait.step(dt, command)
        if isinstance(gait, RollingVectorGait):
            phase_diff = max(phase_diff, abs(gait.state.phi_h - gait.state.phi_t))
    t = dt * np.arange(n + 1)
    non_twist = np.array([j.type != "twist" for j in robot.joints])
    summary: dict[str, object] = {
        "gait": args.gait,
        "robot": robot.name,
        "command": dict(zip(gait.command_names, command, strict=True)),
        "duration_s": float(t[-1]),
        "dt_s": dt,
        "steps": n,
        "max_phase_difference": phase_diff,
        "twist_cycles": int(gait.state.twist_cycles) if isinstance(gait, RollingVectorGait) else 0,
        "phase_resets": int(gait.state.resets) if isinstance(gait, RollingVectorGait) else 0,
        "max_joint_step": float(np.abs(np.diff(q, axis=0)).max()) if n else 0.0,
        "max_abs_joint": float(np.abs(q).max()),
        "max_abs_joint_non_twist": float(np.abs(q[:, non_twist]).max()) if non_twist.any() else 0.0,
        # cmd_vel -> native command coefficients (003 Eq. 9-10: k m/rad, d_prime m), calibration applied
        "reduction": dict(robot.gaits.get("reduction", {})),
    }
    if args.out is not None:
        _write(args.out, t, q, robot.joint_names)
        summary["out"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        print_table([(k, v) for k, v in summary.items() if k != "command"],
                    title=f"snake gait: {args.gait} on {robot.name}, command {summary['command']}")
    return 0


def _write(path: Path, t: np.ndarray, q: np.ndarray, names: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".npz":
        np.savez_compressed(path, t=t, q=q, joint_names=np.array(names))
    elif path.suffix == ".csv":
        np.savetxt(path, np.column_stack([t, q]), delimiter=",", header=",".join(["t", *names]), comments="")
    else:
        raise ValueError(f"--out must end in .csv or .npz, got {path}")
