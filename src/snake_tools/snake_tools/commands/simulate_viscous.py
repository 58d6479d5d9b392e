"""``snake simulate-viscous``: the 001 viscous-friction model of an N-link snake among random pegs.

Every parameter of the run is a flag: the serpenoid gait (``--amplitude``,
``--spatial-frequency``, ``--omega``, ``--head-offset``), the body (``--links``,
``--link-length``), the friction model (``--kx``, ``--ky-ratio``, ``--hump``,
``--peg-diameter``), the field (``--pegs`` density, ``--seed``) and the start pose
(``--start X Y YAW``). The JSON output lists them back, with the peg positions.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from snake_tools.cli import count, finite_float, int_at_least, non_negative_float, non_negative_int, positive_float
from snake_tools.output import print_json, print_table

_SAMPLE_S = 0.5  # s, spacing of the trajectory samples printed with --json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake simulate-viscous``."""
    p = subparsers.add_parser("simulate-viscous",
                              help="serpenoid snake in the viscous-friction model among seeded random pegs (001)")
    p.add_argument("--links", type=int_at_least(2), default=9, help="number of links N (default 9, as in the paper)")
    p.add_argument("--pegs", type=non_negative_float, default=0.0, metavar="DENSITY", help="peg density, pegs per m^2")
    p.add_argument("--duration", type=positive_float, default=30.0, help="simulated time, s")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the peg field")
    p.add_argument("--dt", type=positive_float, default=0.05, help="time step, s (the paper's 0.05 s)")
    p.add_argument("--peg-diameter", type=positive_float, default=0.06, help="peg diameter, m (hump FWHM)")
    p.add_argument("--ky-ratio", type=positive_float, default=4.0, help="ground lateral/longitudinal friction ratio")
    p.add_argument("--hump", type=non_negative_float, default=40.0, help="peg hump amplitude A (Eq. 5), in units of kx")
    p.add_argument("--head-offset", type=finite_float, default=0.0, help="constant head-angle offset, rad")
    p.add_argument("--amplitude", type=positive_float, default=None,
                   help="serpenoid amplitude alpha, rad (default: wheeled_snake.yaml, 0.6)")
    p.add_argument("--spatial-frequency", type=positive_float, default=None,
                   help="serpenoid beta, rad per joint (default: wheeled_snake.yaml, 0.8)")
    p.add_argument("--omega", type=positive_float, default=None,
                   help="serpenoid temporal frequency, rad/s (default: wheeled_snake.yaml, 3.0)")
    p.add_argument("--link-length", type=positive_float, default=None,
                   help="link length, m (default: the mean link length of wheeled_snake.yaml)")
    p.add_argument("--kx", type=positive_float, default=1.0, help="longitudinal viscous coefficient k_x, N s/m")
    p.add_argument("--start", type=finite_float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("X", "Y", "YAW"),
                   help="initial head pose: m, m, rad (the peg field is laid out for 0 0 0)")
    p.add_argument("--sweep", type=str, default=None, metavar="D1,D2,...",
                   help="instead of one run: mean speed for each density over --seeds fields")
    p.add_argument("--seeds", type=count, default=5, help="fields per density with --sweep")
    p.add_argument("--csv", type=Path, default=None, help="write the full trajectory (t, head x y yaw, com x y)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if args.links < 2:
        raise ValueError(f"--links: need >= 2, got {args.links}")
    for flag, v in (("--duration", args.duration), ("--dt", args.dt), ("--peg-diameter", args.peg_diameter),
                    ("--ky-ratio", args.ky_ratio)):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{flag}: must be a positive number, got {v}")
    if not (math.isfinite(args.pegs) and args.pegs >= 0):
        raise ValueError(f"--pegs: density must be >= 0 pegs/m^2, got {args.pegs}")
    if not (math.isfinite(args.hump) and args.hump >= 0):
        raise ValueError(f"--hump: must be >= 0, got {args.hump}")
    if args.seeds < 1:
        raise ValueError(f"--seeds: need >= 1, got {args.seeds}")


def run(args: argparse.Namespace) -> int:
    """Run one simulation (or a density sweep) and print the numbers."""
    from snake_core.following.viscous import (
        ViscousParams,
        density_sweep,
        equal_link_robot,
        peg_field_for,
        run_serpenoid,
    )

    _check(args)
    robot = equal_link_robot(args.links)
    link_length = args.link_length if args.link_length is not None else float(np.mean(robot.link_lengths))
    params = ViscousParams(n_links=args.links, link_length=link_length, kx=args.kx,
                           ky_ground=args.ky_ratio * args.kx, hump_amplitude=args.hump * args.kx,
                           peg_diameter=args.peg_diameter)
    gait_overrides = {k: v for k, v in (("amplitude", args.amplitude), ("spatial_frequency", args.spatial_frequency))
                      if v is not None}
    if args.sweep is not None:
        try:
            densities = [float(v) for v in args.sweep.split(",") if v.strip()]
        except ValueError as err:
            raise ValueError(f"--sweep: need comma-separated densities, got {args.sweep!r}") from err
        rows = density_sweep(densities, args.links, args.duration, args.seeds, params)
        if args.json:
            print_json({"links": args.links, "duration_s": args.duration, "seeds": args.seeds, "rows": rows})
        else:
            print(f"mean speed vs peg density ({args.links} links, {args.duration} s, {args.seeds} seeds)")
            for r in rows:
                print(f"  {r['density']:8.2f} pegs/m^2  {r['mean_speed']:.4f} m/s  (std {r['std']:.4f})")
        return 0
    pegs = peg_field_for(args.links, args.duration, args.pegs, args.seed, link_length=params.link_length,
                         diameter=args.peg_diameter)
    t0 = time.perf_counter()
    result = run_serpenoid(args.links, args.duration, pegs, dt=args.dt, head_offset=args.head_offset,
                           omega=args.omega, params=params, robot=robot, start=tuple(args.start), **gait_overrides)
    serp = robot.gait("serpenoid")
    wall = time.perf_counter() - t0
    tr = result.trajectory
    if args.csv is not None:
        data = np.column_stack([tr.t, tr.head, tr.com])
        np.savetxt(args.csv, data, delimiter=",", header="t,head_x,head_y,head_yaw,com_x,com_y", comments="")
    every = max(1, round(_SAMPLE_S / args.dt))
    summary: dict[str, object] = {
        "links": args.links,
        "link_length_m": params.link_length,
        "gait": {"amplitude_rad": float(gait_overrides.get("amplitude", serp["amplitude"])),
                 "spatial_frequency_rad": float(gait_overrides.get("spatial_frequency", serp["spatial_frequency"])),
                 "omega_rad_s": float(args.omega if args.omega is not None else serp["temporal_frequency"]),
                 "head_offset_rad": args.head_offset},
        "friction": {"kx": params.kx, "ky_ground": params.ky_ground, "hump_amplitude": params.hump_amplitude,
                     "peg_diameter_m": params.peg_diameter},
        "start_pose": list(args.start),
        "peg_density": args.pegs,
        "pegs": len(pegs),
        "duration_s": tr.duration,
        "seed": args.seed,
        "mean_speed": tr.mean_speed,
        "path_speed": tr.path_speed,
        "displacement_m": (tr.com[-1] - tr.com[0]).tolist(),
        "final_head_pose": tr.head[-1].tolist(),
        "realtime_factor": tr.duration / wall if wall > 0 else None,
    }
    if args.json:
        summary["trajectory"] = {"t": tr.t[::every], "head": tr.head[::every], "com": tr.com[::every]}
        summary["peg_positions"] = np.asarray(pegs).reshape(-1, 2).tolist()
        print_json(summary)
    else:
        print_table([(k, v) for k, v in summary.items() if not isinstance(v, (list, dict))],
                    title="snake simulate-viscous")
    return 0
