"""``snake twin``: the MuJoCo twin against the robot (replay a recording through the twin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from snake_tools.output import print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake twin`` and its subcommands."""
    parser = subparsers.add_parser("twin", help="the MuJoCo twin against the robot: replay a recorded run")
    sub = parser.add_subparsers(dest="twin_command", metavar="ACTION")
    sub.required = True
    _register_replay(sub)


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
