"""``snake twin``: the MuJoCo twin against the robot (replay a recording through the twin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from snake_tools.output import print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake twin`` and its subcommands."""
    parser = subparsers.add_parser("twin", help="the MuJoCo twin against the robot: excite, replay a recorded run")
    sub = parser.add_subparsers(dest="twin_command", metavar="ACTION")
    sub.required = True
    _register_replay(sub)
    _register_excite(sub)


def _register_replay(sub: argparse._SubParsersAction) -> None:
    from snake_core.gait import GAIT_NAMES

    p = sub.add_parser("replay", help="drive the twin with a bag's joint_commands and compare with the robot")
    p.add_argument("bag", type=Path, help="rosbag2 bag (directory or file) with joint_commands and a pose")
    p.add_argument("--target", default=None, metavar="TARGET",
                   help="calibration target whose twin: block sets the twin's physics "
                        "(config/calibration/<robot>/<target>.yaml; default $SNAKE_CALIBRATION_TARGET, else twin)")
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path")
    p.add_argument("--world", default="flat", help="world of the twin: name in config/worlds or a YAML path")
    p.add_argument("--drive", choices=("auto", "joint_commands", "cmd_vel"), default="auto",
                   help="what drives the twin: the recorded joint_commands, or cmd_vel through --gait "
                        "(auto: joint_commands when the bag has them)")
    p.add_argument("--gait", default="rolling", choices=GAIT_NAMES,
                   help="gait of the cmd_vel drive (as gait_node's gait parameter)")
    p.add_argument("--pose-topic", default=None, metavar="TOPIC|tf:FRAME",
                   help="PoseStamped topic or /tf child frame of the robot (default: see docs/bags.md)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_replay)


def replay_target(bag: Path, robot_name: str, target: str | None, world: str | None = "flat",
                  pose_topic: str | None = None, drive: str = "auto", gait: str = "rolling") -> dict[str, Any]:
    """Replay ``bag`` through the twin of a calibration target (the file read is in the result).

    Raises:
        RobotConfigError: Unknown robot, a target without a file (other than the default
            ``twin``, whose absence means the defaults), a bad ``twin:`` block.
        ReplayError, BagError: A bag that cannot be replayed.
    """
    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_target, load_robot, load_twin_params
    from snake_tools.twin.replay import replay

    name = calibration_target(target)
    robot = load_robot(robot_name, target=name)  # the gait of the cmd_vel drive uses the target's coefficients
    params, path = load_twin_params(robot, name, must_exist=name != DEFAULT_CALIBRATION_TARGET)
    result = replay(bag, robot, params, world=world, pose_topic=pose_topic, drive=drive, gait=gait)
    return {"target": name, "twin_params_file": str(path) if path is not None else None, **result}


def _replay(args: argparse.Namespace) -> int:
    from snake_tools.output import print_table

    result = replay_target(args.bag, args.robot, args.target, args.world, args.pose_topic, args.drive, args.gait)
    if args.json:
        print_json(result)
        return 0
    rows: list[tuple[str, object]] = [
        ("bag", result["bag"]), ("twin physics", result["twin_params_file"] or "defaults (no calibration file)"),
        ("drive", result["drive"]), ("pose source", result["pose_source"]), ("duration, s", result["duration_s"])]
    for k, g in enumerate(result["segments"]):
        rows.append((f"segment {k + 1} ({g['t_start_s']:.1f}-{g['t_end_s']:.1f} s) speed / turn rate twin/robot",
                     f"{_fmt(g['speed_ratio'])} / {_fmt(g['turn_rate_ratio'])}"))
    for key in ("distance_travelled_m", "divergence_end_m", "divergence_max_m", "divergence_per_m",
                "heading_drift_rad", "joint_residual_rms_rad", "replay_realtime_factor"):
        rows.append((key, _fmt(result[key])))
    print_table(rows, title=f"snake twin replay (target {result['target']})")
    sys.stdout.flush()
    return 0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _register_excite(sub: argparse._SubParsersAction) -> None:
    from snake_core.excitation import SIGNALS, VARIANTS

    p = sub.add_parser("excite", help="publish an identification motion (chirp or multisine) on joint_commands "
                                      "from the present pose; never arms the bridge")
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path")
    p.add_argument("--signal", choices=SIGNALS, default="multisine", help="excitation signal per joint")
    p.add_argument("--variant", choices=VARIANTS, default="lifted",
                   help="lifted: robot hanging free, wide band; ground: lying on the ground, small slow motion")
    p.add_argument("--duration", type=float, default=60.0, help="length of the motion, s")
    p.add_argument("--amplitude", type=float, default=None,
                   help="requested amplitude, rad (default: the variant's; reduced to fit limits and velocities)")
    p.add_argument("--rate", type=float, default=50.0, help="publishing rate of joint_commands, Hz")
    p.add_argument("--seed", type=int, default=0, help="seed of the multisine's per-joint phases")
    p.add_argument("--pose-timeout", type=float, default=10.0,
                   help="how long to wait for the first joint_states, s")
    p.add_argument("--json", action="store_true", help="print what was published as JSON")
    p.set_defaults(func=_excite)


def _excite(args: argparse.Namespace) -> int:
    from snake_core.robot import load_robot
    from snake_tools.twin.excite import run_excitation

    robot = load_robot(args.robot)
    result = run_excitation(robot, args.signal, args.variant, args.duration, args.amplitude, args.rate,
                            args.seed, args.pose_timeout,
                            report=lambda line: print(line, file=sys.stderr if args.json else sys.stdout,
                                                      flush=True))
    if args.json:
        print_json(result)
    else:
        state = "stopped early, holding the last pose" if result["interrupted"] else "done, back at the start pose"
        print(f"{result['published']} joint_commands published: {state}", flush=True)
    return 130 if result["interrupted"] else 0
