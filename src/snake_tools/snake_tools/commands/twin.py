"""``snake twin``: the MuJoCo twin against the robot (replay a recording through the twin)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from snake_tools.output import print_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake twin`` and its subcommands."""
    parser = subparsers.add_parser("twin", help="the MuJoCo twin against the robot: excite, identify, "
                                                "replay a recorded run")
    sub = parser.add_subparsers(dest="twin_command", metavar="ACTION")
    sub.required = True
    _register_replay(sub)
    _register_excite(sub)
    _register_identify(sub)


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
    p.add_argument("--lifted", action="store_true",
                   help="the recording is of the lifted robot: compare joints only, through the lifted twin "
                        "(the default for a bag without a pose)")
    p.add_argument("--spread", type=int, default=0, metavar="N",
                   help="replay N more times from starts within the encoders' resolution and report each head "
                        "figure's least, median and largest value (the twin's chaos on the ground; default 0)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_replay)


def replay_target(bag: Path, robot_name: str, target: str | None, world: str | None = "flat",
                  pose_topic: str | None = None, drive: str = "auto", gait: str = "rolling",
                  lifted: bool = False, report: Any = None, spread: int = 0) -> dict[str, Any]:
    """Replay ``bag`` through the twin of a calibration target (the file read is in the result).

    A lifted recording (``lifted``, or a bag with joint commands and no pose) is compared
    joint by joint through the lifted twin (:func:`snake_tools.twin.identify.joint_replay`).
    Only the span in which the bridge applied the commands is replayed, and its sampling is
    checked (:mod:`snake_tools.twin.checks`); ``report(line)`` gets a line per part left out.
    With ``spread`` > 0 an on-ground replay is run that many more times from starts within the
    encoders' resolution (``spread`` in the result: :func:`snake_tools.twin.spread.replay_spread`).

    Raises:
        RobotConfigError: Unknown robot, a target without a file (other than the default
            ``twin``, whose absence means the defaults), a bad ``twin:`` block.
        ReplayError, BagError: A bag that cannot be replayed, or a spread asked of a lifted one.
        ValueError: A spread out of range.
    """
    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_target, load_robot, load_twin_params
    from snake_tools.bag.series import read_series
    from snake_tools.twin.checks import armed_window, check_sampling, screen
    from snake_tools.twin.identify import joint_replay, read_recording
    from snake_tools.twin.replay import ReplayError, at_recorded_voltage, replay
    from snake_tools.twin.spread import replay_spread, start_offsets

    start_offsets(spread)   # out of range: one line before any work
    name = calibration_target(target)
    robot = load_robot(robot_name, target=name)  # the gait of the cmd_vel drive uses the target's coefficients
    params, path = load_twin_params(robot, name, must_exist=name != DEFAULT_CALIBRATION_TARGET)
    bs = read_series(Path(bag), progress=False, pose_topic=pose_topic)
    if lifted or (not bs.pose_topics and bs.has("/joint_commands") and drive != "cmd_vel"):
        if spread:
            raise ReplayError(f"{bag}: --spread: a lifted replay has no head path (its joints are compared, "
                              "and a lifted twin is not chaotic)")
        params, supply = at_recorded_voltage(bs, robot, params)
        result = {**joint_replay(screen(bs, read_recording(bs, robot), report, pose=False, what="a replay"), robot,
                                 params), **supply}
    else:
        ends = [float(bs.stamped_times(t)[-1]) for t in ("/joint_commands", "/cmd_vel", *bs.pose_topics[:1])
                if bs.has(t)]
        window, lines = armed_window(bs, 0.0, max(ends, default=0.0), "a replay")
        a, b = window if window is not None else (float("-inf"), float("inf"))
        for topic in ("/joint_states", *bs.pose_topics[:1]):
            if bs.has(topic):
                t = bs.stamped_times(topic)
                check_sampling(bs.summary.path, topic, t[(t >= a) & (t <= b)])
        result = replay(bs, robot, params, world=world, pose_topic=pose_topic, drive=drive, gait=gait,
                        window=window)
        if spread:
            result["spread"] = replay_spread(
                lambda offset: replay(bs, robot, params, world=world, pose_topic=pose_topic, drive=drive, gait=gait,
                                      window=window, start_offset_rad=offset), result, spread)
        for line in lines if report is not None else ():  # once replayed: a refusal is one line
            report(line)
    fits = _fits_recorded(path)
    if report is not None and params.is_default() and fits:   # a fit recorded, but no value written
        said = "; ".join(f"{variant} fit {'adequate' if e.get('adequate') else 'NOT adequate'}"
                         + (f" ({e['adequacy_ratio']:.3g} x the noise floor)" if "adequacy_ratio" in e else "")
                         for variant, e in fits.items())
        report(f"target {name!r}: its twin: block sets no value ({said}): this replay is the default twin's")
    return {"target": name, "twin_params_file": str(path) if path is not None else None,
            "twin_params_default": params.is_default(), "fits": fits, **result}


def _physics_row(result: dict[str, Any]) -> str:
    """What a replay's twin physics were: the file, and whether its block set anything."""
    if result["twin_params_file"] is None:
        return "defaults (no calibration file)"
    if result.get("twin_params_default"):
        return f"{result['twin_params_file']} (its twin: block sets no value: the default twin)"
    return str(result["twin_params_file"])


def _fits_recorded(path: Path | None) -> dict[str, dict[str, Any]]:
    """Per fit variant of a target file's ``twin.provenance``: its verdict, what it left unidentified or wrote so."""
    from snake_tools.twin.report import recorded_fits

    keys = ("adequate", "adequacy_ratio", "not_identified", "written_not_identified")
    return {str(v): {k: e[k] for k in keys if k in e} for v, e in recorded_fits(path).items() if isinstance(e, dict)}


def _replay(args: argparse.Namespace) -> int:
    from snake_tools.output import print_table

    result = replay_target(args.bag, args.robot, args.target, args.world, args.pose_topic, args.drive, args.gait,
                           args.lifted, report=lambda line: print(line, file=sys.stderr, flush=True),
                           spread=args.spread)
    if args.json:
        print_json(result)
        return 0
    if result.get("variant") == "lifted":
        rows_l: list[tuple[str, object]] = [
            ("bag", result["bag"]), ("twin physics", _physics_row(result)),
            ("supply voltage, V", f"{result['supply_voltage_v']:g}: {result['supply_voltage_source']}"),
            ("joint residual rms, rad", _fmt(result["joint_residual_rms_rad"])),
            ("noise floor, rad", _fmt(result["noise_floor_rad"])), ("ratio to noise", _fmt(result["ratio_to_noise"]))]
        rows_l += [(f"{j}, rad", _fmt(v)) for j, v in result["joint_rms_rad"].items()]
        print_table(rows_l, title=f"snake twin replay, lifted (target {result['target']})")
        return 0
    rows: list[tuple[str, object]] = [
        ("bag", result["bag"]), ("twin physics", _physics_row(result)),
        ("supply voltage, V", f"{result['supply_voltage_v']:g}: {result['supply_voltage_source']}"),
        ("drive", result["drive"]), ("pose source", result["pose_source"]), ("duration, s", result["duration_s"])]
    for k, g in enumerate(result["segments"]):
        rows.append((f"segment {k + 1} ({g['t_start_s']:.1f}-{g['t_end_s']:.1f} s) speed / turn rate twin/robot",
                     f"{_fmt(g['speed_ratio'])} / {_fmt(g['turn_rate_ratio'])}"))
    for key in ("distance_travelled_m", "divergence_end_m", "divergence_max_m", "divergence_per_m",
                "heading_drift_rad", "joint_residual_rms_rad", "replay_realtime_factor"):
        rows.append((key, _fmt(result[key])))
    spread: dict[str, Any] = result.get("spread") or {}
    for key in ("divergence_max_m", "divergence_end_m", "heading_drift_rad"):
        if key in spread:
            band = spread[key]
            rows.append((f"{key} over {spread['n'] + 1} starts: least / median / largest"
                         + (" (absolute)" if key == "heading_drift_rad" else ""),
                         f"{_fmt(band['min'])} / {_fmt(band['median'])} / {_fmt(band['max'])}"))
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
    p.add_argument("--subscribers", type=int, default=1, metavar="N",
                   help="start once joint_commands has N subscribers (the bridge; 2 with the recorder running)")
    p.add_argument("--use-sim-time", action="store_true",
                   help="run on the twin's /clock: the rate is one of simulated time (a lock-step twin runs the "
                        "motion one control period per command)")
    p.add_argument("--json", action="store_true", help="print what was published as JSON")
    p.set_defaults(func=_excite)


def _excite(args: argparse.Namespace) -> int:
    from snake_core.robot import load_robot
    from snake_tools.twin.excite import run_excitation

    robot = load_robot(args.robot)
    result = run_excitation(robot, args.signal, args.variant, args.duration, args.amplitude, args.rate,
                            args.seed, args.pose_timeout,
                            report=lambda line: print(line, file=sys.stderr if args.json else sys.stdout,
                                                      flush=True),
                            subscribers=args.subscribers, use_sim_time=args.use_sim_time)
    if args.json:
        print_json(result)
    else:
        state = "stopped early, holding the last pose" if result["interrupted"] else "done, back at the start pose"
        print(f"{result['published']} joint_commands published: {state}", flush=True)
    return 130 if result["interrupted"] else 0


def _register_identify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="fit a calibration target's twin: block (servo model, latency, ground "
                                        "friction) to a recorded run")
    p.add_argument("bag", type=Path, help="rosbag2 bag with joint_commands, joint_states (and a pose on the ground)")
    p.add_argument("--robot", default="tsnake", help="robot name in config/robots or a YAML path")
    p.add_argument("--target", default=None, metavar="TARGET",
                   help="calibration target to fit from and (--write) into: config/calibration/<robot>/<target>.yaml "
                        "(default $SNAKE_CALIBRATION_TARGET, else twin; a new target needs --write)")
    p.add_argument("--lifted", action="store_true",
                   help="the recording is of the robot held by its head off the ground (snake twin excite "
                        "--variant lifted): fit the servo model and latency; without it, fit the ground friction")
    p.add_argument("--world", default="flat", help="world of an on-ground recording: name or YAML path")
    p.add_argument("--pose-topic", default=None, metavar="TOPIC|tf:FRAME",
                   help="PoseStamped topic or /tf child frame of the robot (default: see docs/bags.md)")
    p.add_argument("--report", type=Path, default=None, metavar="HTML",
                   help="HTML report (default out/twin/identify_<robot>_<target>.html)")
    p.add_argument("--write", action="store_true", help="write the identified values into the target's twin: block")
    p.add_argument("--validate", type=Path, default=None, metavar="BAG",
                   help="a held-out recording of the same kind (not fitted): its joint residual with the fitted "
                        "and the starting twin, against its noise floor")
    p.add_argument("--structure", choices=("auto", "none", "backlash", "load_friction"), default="auto",
                   help="servo model structure of a lifted fit: none (today's model), backlash (and a gear play per "
                        "joint type), load_friction (and a dry friction growing with the servo's torque, per joint "
                        "type), or auto (default): fit each and keep the one of the least BIC")
    p.add_argument("--servos", choices=("auto", "type"), default="auto",
                   help="servo models of a lifted fit: type (one per joint type) or auto (default): then one per "
                        "joint for each joint type whose BIC says the recording tells its servos apart, and each "
                        "joint's zero offset (its horn's mounting) where BIC keeps them")
    p.add_argument("--contact", choices=("keep", "choose"), default="keep",
                   help="contact model of an on-ground fit: keep the target's (default), or choose one (cone, "
                        "torsional friction, stiffness) by BIC on the recording before the friction is fitted; "
                        "--write writes the choice")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_identify)


def identify_target(bag: Path, robot_name: str, target: str | None, lifted: bool, world: str | None = "flat",
                    pose_topic: str | None = None, write: bool = False, report: Path | None = None,
                    progress: Any = None, validate_bag: Path | None = None, structure: str = "auto",
                    servos: str = "auto", contact: str = "keep") -> dict[str, Any]:
    """Fit the twin: block of a calibration target to ``bag`` (see :mod:`snake_tools.twin.identify`).

    Raises:
        RobotConfigError: Unknown robot, a target without a file (unless ``write``), a bad block.
        IdentifyError, BagError: A recording the fit cannot use (``contact`` ``choose`` with ``lifted``).
    """
    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_target, load_robot, load_twin_params
    from snake_hardware.sim.worlds import load_world
    from snake_tools.bag.series import read_series
    from snake_tools.twin.checks import check_kind, gait_driven, screen
    from snake_tools.twin.data import IdentifyError
    from snake_tools.twin.identify import html_report, identify, read_recording, validate, write_block
    from snake_tools.twin.report import recorded_std

    if lifted and contact != "keep":
        raise IdentifyError(f"{bag}: --contact {contact}: a lifted recording has no contact (the contact model is "
                            "chosen on an on-ground run)")
    name = calibration_target(target)
    robot = load_robot(robot_name, target=name)
    start, path = load_twin_params(robot, name, must_exist=not write and name != DEFAULT_CALIBRATION_TARGET)
    world_friction = load_world(world).friction if world is not None and not lifted else 0.8

    lines: list[str] = []   # said once every check has passed: a refusal is one line

    def checked(bag_path: Path, role: str) -> tuple[Any, list[str]]:
        bs = read_series(Path(bag_path), progress=False, pose_topic=pose_topic)
        return (screen(bs, read_recording(bs, robot, pose_topic), lines.append, pose=not lifted, what=role),
                gait_driven(bs))

    def kind_checked(rec: Any, gait_topics: list[str], role: str) -> None:
        undecided = check_kind(rec, robot, start, world, lifted, role, gait_topics)
        if undecided is not None:
            lines.append(undecided)

    rec, gait_topics = checked(bag, "a fit")
    if lifted:  # before any line: a refusal is one line
        kind_checked(rec, gait_topics, "--lifted")
    held_out = None
    if validate_bag is not None:
        held_out, held_gait = checked(validate_bag, "--validate")
        kind_checked(held_out, held_gait, f"--validate of {'a lifted' if lifted else 'an on-ground'} fit")
    std = {} if lifted else recorded_std(path)
    for line in lines if progress is not None else ():
        progress(line)
    if not lifted and progress is not None:
        progress(f"servo model held with the standard deviations of {len(std)} values recorded by the lifted fit "
                 f"in {path}: carried into the ground friction's interval" if std else
                 "servo model held as exact: its target records no lifted fit's standard deviations "
                 "(snake twin identify --lifted --write records them)")
    fit = identify(rec, robot, start, world=world, lifted=lifted, world_friction=world_friction, progress=progress,
                   structure=structure, servos=servos, start_std=std or None, contact=contact)
    if held_out is not None:
        fit.validation = validate(fit, held_out, robot, start, world)
    out: dict[str, Any] = {"bag": str(rec.path), "robot": robot.name, "target": name,
                           "twin_params_file": str(path) if path is not None else None,
                           "duration_s": rec.duration, "span_s": [rec.start, rec.start + rec.duration],
                           "checks": lines, **fit.as_dict()}
    out["report"] = str(html_report(fit, rec, robot, start,
                                    report or Path("out") / "twin" / f"identify_{robot.name}_{name}.html", world))
    if write:
        written, copied = write_block(fit, robot, name, rec.path)
        out["written"] = str(written)
        # What the block did not take, and why (a fit that is not adequate writes no servo value).
        out["not_written"] = {n: fit.reasons.get(n, "") for n in fit.names if not fit.writes(n)}
        if progress is not None:
            ad = fit.adequacy_after
            kept = len(fit.names) - len(out["not_written"])
            why = (f"the model is not adequate (residual {ad['ratio']:.3g} x the noise floor, threshold "
                   f"{ad['threshold']:g}): no value identified" if fit.variant == "lifted" and not ad.get("adequate")
                   else "each not identified (see its why)")
            best = len(out["written_not_identified"])
            progress(f"written to {written}: {kept} of {len(fit.names)} fitted values"
                     + (f" ({best} of them not identified: the adequate fit's twin, see their why)" if best else "")
                     + f" and the provenance; not written: {len(out['not_written'])} ({why}); the block keeps what "
                       "it had for them")
        if copied is not None:
            out["gaits_copied_from"] = str(copied)
            if progress is not None:
                progress(f"new target {name!r}: gait calibration (gaits:) copied from {copied}")
    return out


def _identify(args: argparse.Namespace) -> int:
    from snake_tools.output import print_table
    from snake_tools.twin.structure import DECISIVE_BIC, where_chosen

    def progress(message: str) -> None:
        print(message, file=sys.stderr)

    result = identify_target(args.bag, args.robot, args.target, args.lifted, args.world, args.pose_topic,
                             args.write, args.report, progress, args.validate, args.structure, args.servos,
                             args.contact)
    if args.json:
        print_json(result)
        return 0
    rows: list[tuple[str, object]] = [("bag", result["bag"]), ("variant", result["variant"]),
                                      ("start", result["twin_params_file"] or "defaults")]
    for name, p in result["parameters"].items():
        rows.append((name, f"{p['start']:.4g} -> {p['fitted']:.4g} (std {p['relative_std']:.2g}"
                           f"{'' if p['identified'] else ', not identified'})"))
    before, after = result["residual_rms_before"], result["residual_rms_after"]
    ad = result["adequacy"]
    rows += [("residual rms before / after", f"{before:.4g} / {after:.4g}"),
             ("noise floor, rad", f"{result['noise_floor_rad']:.3g}"),
             ("adequacy (residual / noise floor)", f"{result['adequacy_before']:.3g} -> {ad['ratio']:.3g}: "
                                                   f"{'adequate' if ad['adequate'] else 'NOT adequate'} "
                                                   f"(threshold {ad['threshold']:g})")]
    st = result["structure"]
    if st.get("candidates"):
        rows.append((f"structure (least {st['criterion']}{where_chosen(st)})", st["chosen"]))
        rows += [(f"  {c['name']}: k / |r|^2 / AIC / BIC",
                  f"{c['parameters']} / {c['cost']:.6g} / {c['aic']:.6g} / {c['bic']:.6g}") for c in st["candidates"]]
    else:
        rows.append(("structure", f"{st['chosen']} (held)"))
    ct = result["contact"]
    if ct is not None:
        chosen = ct["chosen"]
        how = "" if ct["decisive"] else f", {ct['within_margin']} others within {DECISIVE_BIC:g}: not decisive"
        rows.append((f"contact model (least {ct['criterion']})",
                     f"{chosen['cone']} cone, torsional friction {chosen['torsional_friction']:g} m, solref "
                     f"{chosen['solref'][0]:g} s; BIC {ct['margin']:.3g} below the next{how}"))
    if "validation" in result:
        v = result["validation"]
        rows.append(("held-out joint rms, rad (start -> fitted)",
                     f"{v['joint_rms_start_rad']:.4g} -> {v['joint_rms_rad']:.4g} "
                     f"({v['ratio_to_noise']:.3g} x its noise floor)"))
    rows.append(("report", result["report"]))
    if "written" in result:
        rows.append(("written", result["written"]))
        rows.append(("not written", ", ".join(result["not_written"]) or "none"))
        if result["written_not_identified"]:
            rows.append(("written, not identified (the adequate fit's twin)",
                         ", ".join(result["written_not_identified"])))
    per_servo = st.get("per_servo") or {}
    where = (f" on the first {per_servo['seconds']:.0f} s" if per_servo.get("on") == "head" else
             f" on the whole recording (the first {per_servo['head']['seconds']:.0f} s not decisive)"
             if per_servo.get("head") else "")
    for t, r in (per_servo.get("types") or {}).items():
        rows.append((f"servos of {t} (least BIC{where})", f"{r['chosen']} (BIC per type {r['per_type']['bic']:.6g}, "
                                                   f"per joint {r['per_joint']['bic']:.6g})"))
    if "second_minima_checks" in per_servo:
        rows.append(("per-type second minima's checks", per_servo["second_minima_checks"]))
    print_table(rows, title=f"snake twin identify (target {result['target']})")
    return 0
