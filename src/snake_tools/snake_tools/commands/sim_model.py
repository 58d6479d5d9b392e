"""``snake sim-model``: the MuJoCo model generated from a robot YAML and a world file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from snake_tools.cli import non_negative_float
from snake_tools.output import print_json, print_table


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake sim-model``."""
    p = subparsers.add_parser(
        "sim-model", help="generate the MuJoCo model (MJCF) of a robot in a world and summarise it"
    )
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path")
    p.add_argument("--world", default="flat", help="world name in config/worlds or a YAML path")
    p.add_argument("--calibration-target", default=None, metavar="TARGET",
                   help="calibration target whose twin: block sets the servo and contact model "
                        "(config/calibration/<robot>/<target>.yaml; default $SNAKE_CALIBRATION_TARGET, else twin)")
    p.add_argument("--out", type=Path, default=None, help="write the MJCF to this file")
    p.add_argument("--xml", action="store_true", help="print the MJCF to stdout instead of the summary")
    p.add_argument("--rtf", type=non_negative_float, default=0.0, metavar="SECONDS",
                   help="also measure the real-time factor over this many simulated seconds of an exercise wave")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the model, write / print it, print the summary."""
    # Imported here: every `snake` invocation imports all command modules, and mujoco is slow to load.
    from snake_core.robot import load_robot, load_twin_params
    from snake_hardware.sim.twin import SimTwin, exercise_wave, measure_realtime_factor

    if args.rtf < 0:
        raise ValueError(f"--rtf: must be >= 0 s, got {args.rtf}")
    robot = load_robot(args.robot)
    twin_params, twin_file = load_twin_params(robot, args.calibration_target,
                                              must_exist=args.calibration_target is not None)
    twin = SimTwin(robot, args.world, twin_params=twin_params)
    if args.out is not None:
        args.out.write_text(twin.xml)
    if args.xml:
        sys.stdout.write(twin.xml)
        return 0
    m = twin.model
    summary: dict[str, object] = {
        "robot": twin.robot.name,
        "world": twin.world.name if twin.world else "plane",
        "bodies": int(m.nbody - 1),
        "dof": int(m.nv),
        "actuators": int(m.nu),
        "passive_joints": int(m.njnt - 1 - m.nu),
        "total_mass_kg": twin.total_mass(),
        "backbone_length_m": float(
            ((twin.site_position("head_tip") - twin.site_position("tail_tip")) ** 2).sum() ** 0.5
        ),
        "timestep_s": twin.timestep,
        "integrator": twin.options.integrator,
        "solver": f"{twin.options.solver} (iterations {twin.options.iterations}, ls {twin.options.ls_iterations})",
        "cone": twin.twin_params.contact.cone,
        "twin_params_file": str(twin_file) if twin_file is not None else None,
    }
    terrain = twin.world.terrain if twin.world else None
    if terrain is not None:
        summary["terrain_seed"] = terrain.seed
        summary["terrain_max_height_variation_m"] = terrain.max_height_variation
        summary["terrain_height_std_m"] = terrain.height_std
    if twin.world is not None and twin.world.pegs is not None:
        summary["pegs"] = len(twin.world.pegs.centres)
    if args.rtf > 0:
        wave = exercise_wave(twin)
        twin.advance(0.5, wave)  # drop onto the ground first
        summary["realtime_factor"] = measure_realtime_factor(twin, args.rtf, wave)
    if args.out is not None:
        summary["mjcf_file"] = str(args.out)
    if args.json:
        print_json(summary)
    else:
        print_table(list(summary.items()), title=f"MuJoCo model of {summary['robot']} in {summary['world']}")
    return 0
