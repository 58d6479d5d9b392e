"""``snake bag``: record, inspect, analyse, replay, recover and calibrate from rosbags.

- ``snake bag record --out DIR [--storage mcap|sqlite3] [--topics T ...|--all] [--duration S]
  [--max-duration S] [--max-size MB] [--pose-topic TOPIC|tf:FRAME]``
- ``snake bag info BAG [--json]``
- ``snake bag analyze BAG --out DIR [--robot NAME] [--pose-topic TOPIC|tf:FRAME] [--json]``
- ``snake bag recover BAG [--out DIR]``
- ``snake bag play BAG [--rate R] [--loop] [--clock] [--topics T ...] [--remap FROM:=TO ...]``
- ``snake bag calibrate BAG --robot NAME --target NAME [--pose-topic TOPIC|tf:FRAME] [--write]``

Bad input (not a bag, truncated, empty, unknown type) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from snake_tools.output import print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bag`` and its subcommands."""
    parser = subparsers.add_parser("bag", help="record, inspect, analyse, replay rosbags of the stack")
    sub = parser.add_subparsers(dest="bag_command", metavar="ACTION")
    sub.required = True

    p = sub.add_parser("record", help="record topics of the graph into a rosbag2 bag (raw, no re-serialisation)")
    p.add_argument("--out", type=Path, required=True, help="bag directory to create")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--topics", nargs="+", metavar="T", help="topics to record (default: the stack's topics)")
    group.add_argument("--all", action="store_true", help="record every topic in the graph")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (0: until Ctrl-C)")
    p.add_argument("--max-duration", type=float, default=0.0, help="start a new file after this many seconds")
    p.add_argument("--max-size", type=float, default=0.0, help="start a new file after this many MB")
    p.add_argument("--pose-topic", default=None, metavar="TOPIC|tf:FRAME",
                   help="also record this pose source (a mocap driver's topic; tf:FRAME records /tf and /tf_static)")
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.set_defaults(func=_record)

    p = sub.add_parser("info", help="topics, types, counts, duration, rates of a bag")
    p.add_argument("bag", type=Path)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_info)

    p = sub.add_parser("analyze", help="report.html, summary.json and figures of a recorded session")
    p.add_argument("bag", type=Path)
    p.add_argument("--out", type=Path, default=None, help="output directory (default: <bag>_report)")
    p.add_argument("--robot", default=None, help="robot name or YAML (default: from gait_state, else tsnake)")
    p.add_argument("--recompute", action="store_true",
                   help="also recompute the singularity margin from joint_states (planar wheeled robots)")
    p.add_argument("--pose-topic", default=None, metavar="TOPIC|tf:FRAME",
                   help="PoseStamped topic or /tf child frame of the robot (default: see docs/bags.md)")
    p.add_argument("--twin-target", default=None, metavar="TARGET",
                   help="also replay the bag through the twin of this calibration target: a 'twin vs robot' "
                        "section (see docs/twin_identification.md)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_analyze)

    p = sub.add_parser("recover", help="write what an incomplete bag (recorder killed) holds to a complete bag")
    p.add_argument("bag", type=Path)
    p.add_argument("--out", type=Path, default=None, help="new bag directory (default: <bag>_recovered)")
    p.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_recover)

    from snake_tools.bag import calibrate, play

    play.register(sub)
    calibrate.register(sub)


def _record(args: argparse.Namespace) -> int:
    from snake_tools.bag.record import STACK_TOPICS, pose_topic_to_record, record

    for flag in ("duration", "max_duration", "max_size"):
        value = getattr(args, flag)
        if not value >= 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be >= 0, got {value}")
    if not args.out.parent.is_dir():   # refused before anything starts; the bag directory itself is created
        raise ValueError(f"--out {args.out}: the directory {args.out.parent} does not exist")
    topics = None if args.all else (args.topics or list(STACK_TOPICS))
    if args.pose_topic is not None:
        extra = pose_topic_to_record(args.pose_topic)
        if topics is not None:
            topics += [t for t in extra if t not in topics]
    result = record(args.out, args.storage, topics, args.duration, args.max_duration,
                    int(args.max_size * 1e6), quiet=args.quiet)
    print(json.dumps(result))
    return 0


def _info(args: argparse.Namespace) -> int:
    from snake_tools.bag.storage import human_summary, summarize

    summary = summarize(args.bag)
    if args.json:
        print_json(summary.as_dict())
    else:
        print(human_summary(summary), end="")
    return 0


def _analyze(args: argparse.Namespace) -> int:
    from snake_tools.bag.analyze import analyze
    from snake_tools.bag.report import write_report
    from snake_tools.output import print_table

    out = args.out or args.bag.with_name(args.bag.name + "_report")
    an = analyze(args.bag, robot=args.robot, progress=not args.json, recompute=args.recompute,
                 pose_topic=args.pose_topic, twin_target=args.twin_target)
    written = write_report(an, out)
    if args.json:
        print_json(an.summary)
        return 0
    s = an.summary
    rows: list[tuple[str, object]] = [("bag", s["bag"]), ("time base", s["time_base"]),
                                      ("duration, s", s["duration_s"])]
    if "trajectory" in s:
        rows.append(("pose source", s["trajectory"]["pose_topic"]))
    for k, g in enumerate(s["segments"]):
        rows.append((f"{k + 1} {g['label']}: cmd v / omega", f"{g['v_cmd']:.3f} m/s / {g['omega_cmd']:.3f} rad/s"))
        if g.get("flag"):
            rows.append((f"{k + 1} {g['label']}: achieved v / omega", f"not measured: {g['flag']}"))
            continue
        v, w = (float("nan") if g[k2] is None else g[k2] for k2 in ("v", "omega"))
        rows.append((f"{k + 1} {g['label']}: achieved v / omega", f"{v:.3f} m/s / {w:.3f} rad/s"))
    for key in ("distance_m", "displacement_m", "heading_change_deg"):
        if key in s:
            rows.append((key, s[key]))
    rms = s["joint_tracking_rms_rad"]
    if rms:
        worst = max(rms, key=lambda n: rms[n] if rms[n] == rms[n] else -1)
        rows.append(("worst joint tracking RMS, rad", f"{rms[worst]:.4f} ({worst})"))
    if "twin_vs_robot" in s:
        tw = s["twin_vs_robot"]
        rows.append((f"twin ({tw['target']}) vs robot: divergence at the end, m", tw["divergence_end_m"]))
    for section, need in s["missing"].items():
        rows.append((f"{section}", f"not analysed: {need}"))
    rows.append(("report", str(written["report"])))
    print_table(rows, title="snake bag analyze")
    return 0


def _recover(args: argparse.Namespace) -> int:
    from snake_tools.bag.storage import human_summary, recover

    out = args.out or args.bag.with_name(args.bag.name + "_recovered")
    summary = recover(args.bag, out, args.storage)
    if args.json:
        print_json(summary.as_dict())
    else:
        print(human_summary(summary), end="")
    return 0
