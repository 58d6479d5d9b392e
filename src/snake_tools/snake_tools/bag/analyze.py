"""``snake bag analyze``: what a recorded session did, from the topics the bag holds.

The math is :mod:`snake_core.analysis.session` (pure); this module turns a bag's series
(:mod:`snake_tools.bag.series`, whose docstring states the time base) into arrays for it
and collects one JSON-friendly summary. Each section lists the topics it needs; a
section whose topics are missing says so instead of a result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from snake_core.analysis.bridge_states import FOLLOWING, spans_overlapping, state_spans
from snake_core.analysis.energetics import cost_of_transport, displacement, energy
from snake_core.analysis.session import (
    body_centres_headings,
    chain_points_batch,
    command_segments,
    cross_track,
    flag_short_segments,
    hold_previous,
    segment_twists,
    tracking_errors,
)
from snake_core.analysis.smoothing import METHOD as SMOOTHING_METHOD
from snake_core.analysis.smoothing import smooth_path
from snake_core.robot import RobotModel, load_robot
from snake_tools.bag.series import BagSeries, GaitRows, JointRows, bridge_state_samples, read_series

_CMD_TIMEOUT_S = 0.5  # s, the gait node's default deadman (config/gait_node.yaml cmd_timeout)
_MEASURE_FROM = 0.4  # fraction of a segment skipped before measuring its twist (acceleration limits)
_MAX_LAG_S = 0.5  # s, largest command -> state lag searched
_LAG_STEP_S = 0.005  # s, lag grid
_MIN_SEGMENT_S = 1.0  # s, shortest segment measured when the gait has no period (the rolling gait rolls on)
_MIN_SEGMENT_SAMPLES = 10  # pose samples in a segment's measured part
_GOAL_TOLERANCE_M = 0.15  # m, head within this of the plan's end counts as at the goal (path_following.yaml)
_HEAD_FIRST = ("/mocap/head_pose", "/ground_truth/head_pose", "/ground_truth/base_pose")
_BODY_CHUNK = 2048  # pose samples whose body points are computed at once (bounds the memory of long bags)
BODY_POSES = 4000
"""Body poses (every joint's point) kept for the figures at most: every k-th pose sample of a long bag."""
_POSE_NEED = "a pose source (--pose-topic; default order in snake_tools.bag.series)"

SECTION_TOPICS: dict[str, tuple[str, ...]] = {
    "bridge_states": ("/diagnostics (status 'bridge: bus') or /rosout (the bridge's state changes)",),
    "segments": ("/cmd_vel", _POSE_NEED),
    "trajectory": (_POSE_NEED, "/joint_states"),
    "joint_tracking": ("/joint_commands", "/joint_states"),
    "gait_state": ("/gait_state",),
    "servo_health": ("/diagnostics (statuses named 'bridge: ...')",),
    "singularity_margin": ("/singularity_margin",),
    "slippage_ratio": ("/slippage/ratio",),
    "path_following": ("/plan", _POSE_NEED),
    "twin_vs_robot": ("/joint_commands or /cmd_vel", _POSE_NEED),
    "cost_of_transport": ("/joint_states with effort and velocity of every joint", _POSE_NEED),
}
"""What each section of the analysis needs."""


@dataclass
class Analysis:
    """The summary (JSON-friendly) plus the arrays the figures draw."""

    summary: dict[str, Any]
    robot: RobotModel
    arrays: dict[str, Any] = field(default_factory=dict)
    twin_target: str | None = None
    """Calibration target of the "twin vs robot" section (``None``: the section is not run)."""


def forward_offset(robot: RobotModel) -> float:
    """Direction of travel relative to the head-to-tail body axis, rad.

    T-Snake rolls sideways: the reduced drive's forward is the axis turned by +90 deg
    (head segment = left wheel, 003 Eq. 9). Other snakes crawl head first (axis + 180 deg).
    """
    return float(np.pi / 2) if robot.kind == "tsnake" else float(np.pi)


def joint_matrix(robot: RobotModel, rows: Sequence[tuple[tuple[str, ...], np.ndarray]]) -> np.ndarray:
    """(n, joints) positions in robot joint order; NaN where a message lacks a joint.

    The result may be a view of the rows' own array (when the messages are already in robot
    order): callers must not write into it.
    """
    names = robot.joint_names
    if isinstance(rows, JointRows) and (uniform := rows.uniform()) is not None:  # same names throughout
        if rows.names[0] == tuple(names):
            return uniform  # already in robot order: the read-only view, no copy
        out = np.full((len(rows), len(names)), np.nan)
        where = {n: i for i, n in enumerate(rows.names[0])}
        cols = np.array([i for i, n in enumerate(names) if n in where], dtype=int)
        out[:, cols] = uniform[:, np.array([where[names[i]] for i in cols], dtype=int)]
        return out
    out = np.full((len(rows), len(names)), np.nan)
    cache: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
    for k, (msg_names, pos) in enumerate(rows):
        if msg_names not in cache:
            where = {n: i for i, n in enumerate(msg_names)}
            cols = np.array([i for i, n in enumerate(names) if n in where], dtype=int)
            src = np.array([where[names[i]] for i in cols], dtype=int)
            cache[msg_names] = (cols, src)
        cols, src = cache[msg_names]
        if len(pos) >= len(msg_names):
            out[k, cols] = pos[src]
    return out


def gait_period_s(robot: RobotModel) -> float | None:
    """Period of the robot's periodic gait, s: 2 pi / serpenoid ``temporal_frequency`` (rad/s).

    None for a robot without one (the T-Snake's rolling gait turns its wheels-like
    segments continuously: its twist is measurable over any stretch of steady rolling).
    """
    serpenoid = robot.gaits.get("serpenoid") or {}
    omega = serpenoid.get("temporal_frequency")
    if robot.kind == "tsnake" or not isinstance(omega, (int, float)) or omega == 0:
        return None
    return float(2 * np.pi / abs(omega))


ROBOT_TOPIC = "/robot_description_yaml"
"""Latched std_msgs/String of the gait node: the robot YAML it loaded, recorded with the run."""


def robot_in_bag(path: Path) -> RobotModel | None:
    """The robot recorded in the bag (its last ``/robot_description_yaml``), or None when there is none.

    The description is validated like a file; the calibration of the robot's name in this
    workspace (if any) is overlaid as :func:`load_robot` does.

    Raises:
        RobotConfigError: The recorded description is invalid (named ``<bag>:/robot_description_yaml``).
    """
    from snake_core.robot import RobotConfigError, apply_calibration, calibration_path, robot_from_dict
    from snake_tools.bag.storage import iter_raw, summarize, typestore_for

    summary = summarize(Path(path))
    if not summary.complete or ROBOT_TOPIC not in summary.topics:
        return None
    info = summary.topics[ROBOT_TOPIC]
    if info.type != "std_msgs/msg/String":
        return None
    store = typestore_for(summary.topics.values())
    text = None
    for _, msgtype, _, data in iter_raw(Path(path), {ROBOT_TOPIC}):
        text = store.deserialize_cdr(data, msgtype).data
    if text is None:
        return None
    where = Path(f"{path}:{ROBOT_TOPIC}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RobotConfigError(f"{where}: not YAML: {' '.join(str(err).split())}") from err
    robot = robot_from_dict(data, source=where)
    return apply_calibration(robot, calibration_path(robot.name))


def _robot_of(bs: BagSeries, robot: str | None, recorded: RobotModel | None = None) -> RobotModel:
    """``--robot``, else the robot recorded in the bag, else the gait node's robot name, else tsnake."""
    from snake_core.robot import RobotConfigError

    if robot:
        return load_robot(robot)
    if recorded is not None:
        return recorded
    gait = bs.series.get("/gait_state")
    if gait and gait.rows and gait.rows[0][1]:
        name = str(gait.rows[0][1])
        try:
            return load_robot(name)
        except RobotConfigError as err:
            raise RobotConfigError(f"{err}; the bag names robot {name!r} (gait_state) but does not hold its "
                                   f"YAML ({ROBOT_TOPIC}): give --robot PATH") from err
    return load_robot("tsnake")


def analyze(path: Path, robot: str | None = None, progress: bool = True, recompute: bool = False,
            pose_topic: str | None = None, twin_target: str | None = None) -> Analysis:
    """Analyse a bag: every section its topics allow.

    Args:
        path: Bag directory or storage file.
        robot: Robot name or YAML (default: the robot recorded in the bag on
            ``/robot_description_yaml``, else the gait node's ``hardware_id`` in ``gait_state``,
            else ``tsnake``).
        progress: Progress bar on a terminal.
        recompute: Also recompute the singularity margin from ``joint_states`` (and the
            recorded ``slipping_links``) with the monitor's evaluator (002 Eq. 10).
        pose_topic: PoseStamped topic or ``tf:<child frame>`` of the robot's pose
            (default: the order of :func:`snake_tools.bag.series.pose_sources`).
        twin_target: Replay the bag through the twin of this calibration target and add
            the "twin vs robot" section (:mod:`snake_tools.twin.replay`).

    Raises:
        BagError: Unreadable, empty or unexpected-type input.
        RobotConfigError: The robot description is invalid, ``twin_target`` has no file
            (other than the default ``twin``) or a bad ``twin:`` block.
    """
    recorded = None if robot else robot_in_bag(Path(path))
    return analyze_series(read_series(Path(path), progress=progress, pose_topic=pose_topic), robot, recompute,
                          twin_target, recorded)


def analyze_series(bs: BagSeries, robot: str | None = None, recompute: bool = False,
                   twin_target: str | None = None, recorded: RobotModel | None = None) -> Analysis:
    """:func:`analyze` of series already read (same arguments; ``recorded``: :func:`robot_in_bag`)."""
    rob = _robot_of(bs, robot, recorded)
    s = bs.summary
    end_t = max((float(x.t[-1]) for x in bs.series.values() if len(x.t)), default=0.0)
    summary: dict[str, Any] = {
        "bag": str(s.path), "storage": s.storage, "metadata_version": s.version, "ros_distro": s.ros_distro,
        "robot": rob.name, "start_utc": _utc(s.start_ns), "time_base": bs.time_base, "duration_s": float(end_t),
        "receive_duration_s": s.duration_s, "message_count": s.message_count,
        "topics": s.as_dict()["topics"], "unreadable_topics": bs.unreadable, "missing": {},
        "segments": [], "joint_tracking_rms_rad": {},
    }
    an = Analysis(summary=summary, robot=rob, twin_target=twin_target)
    for section in SECTIONS:
        if section is not _recompute_margin or recompute:
            section(bs, an)
    return an


def _utc(stamp_ns: int) -> str | None:
    """A receive time as ``YYYY-MM-DD HH:MM:SS UTC`` (None for 0: unknown)."""
    import datetime

    if not stamp_ns:
        return None
    when = datetime.datetime.fromtimestamp(stamp_ns * 1e-9, tz=datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _missing(an: Analysis, section: str) -> None:
    text = "needs " + ", ".join(SECTION_TOPICS[section])
    odd = [f"{t}: {why}" for t, why in an.summary["unreadable_topics"].items()
           if any(t in need for need in SECTION_TOPICS[section])]
    an.summary["missing"][section] = text + (f" (not readable here: {'; '.join(odd)})" if odd else "")


def _pose_topic(bs: BagSeries, prefer: tuple[str, ...] = ()) -> str | None:
    """The first present pose source: ``prefer``'s order among the stack's topics, then the documented order."""
    order = [t for t in prefer if t in bs.pose_topics] + list(bs.pose_topics)
    return next((t for t in order if bs.has(t)), None)


def _trajectory(bs: BagSeries, an: Analysis) -> None:
    topic = _pose_topic(bs)
    if topic is None:
        _missing(an, "trajectory")
        return
    rob = an.robot
    t_all = bs.series[topic].times()
    pose_all = np.asarray(bs.series[topic].rows, dtype=float)
    if bs.has("/joint_states"):
        js = bs.series["/joint_states"]
        js_t, q_js = js.times(), joint_matrix(rob, js.rows)
        body_from = "/joint_states"
    else:
        body_from = "none: body drawn straight (no /joint_states)"
    parts = []  # (t, centre, heading, t of the kept poses, their points, head xy) of the kept samples of each chunk
    stride = max(1, -(-len(t_all) // BODY_POSES))
    for a in range(0, len(t_all), _BODY_CHUNK):  # per chunk: the body's 3-D points never exist for a whole bag
        t, pose = t_all[a: a + _BODY_CHUNK], pose_all[a: a + _BODY_CHUNK]
        if body_from == "/joint_states":
            q, valid = hold_previous(js_t, q_js, t)
            keep = valid & np.all(np.isfinite(q), axis=1)
        else:
            q, keep = np.zeros((len(t), len(rob.joints))), np.ones(len(t), dtype=bool)
        if keep.any():
            pts = chain_points_batch(rob, pose[keep, :3], pose[keep, 3:], q[keep])
            pose_kept = (np.arange(a, a + len(t))[keep] % stride) == 0
            parts.append((t[keep], *body_centres_headings(pts), t[keep][pose_kept], pts[pose_kept, :, :2].copy(),
                          pts[:, 0, :2].copy()))
    if sum(len(p[0]) for p in parts) < 2:
        _missing(an, "trajectory")
        return
    t, centre = (np.concatenate([p[k] for p in parts]) for k in range(2))
    heading = np.unwrap(np.concatenate([p[2] for p in parts]))  # each chunk's own unwrap joined: exact within one
    t_points, points, head = (np.concatenate([p[k] for p in parts]) for k in (3, 4, 5))
    an.arrays.update(t_body=t, centre=centre, heading=heading, t_points=t_points, points=points)
    # Path lengths of the curves with the measurement noise removed (snake_core.analysis.smoothing):
    # the polylines through the raw samples grow with the noise and the sample rate.
    # The head is the pose source's position: its path is that of the source's own samples (every one,
    # also those before the first joint_states), smoothed once for both blocks.
    centre_s, head_paths = smooth_path(t, centre), _head_paths(bs)
    head_block = head_paths[topic] if topic in head_paths else _path_block(t, head)
    an.arrays["centre_smooth"] = (centre_s.t, centre_s.xy)
    # The followed point is the body centre (mean of the backbone points); the head's path
    # differs from it (sidewinding sweeps the head side to side), so both are named.
    an.summary["trajectory"] = {
        "pose_topic": topic, "body_from": body_from, "samples": len(t), "point": TRAJECTORY_POINT,
        "distance_m": centre_s.length_m, "displacement_m": float(np.linalg.norm(centre[-1] - centre[0])),
        "head_path_length_m": head_block["path_length_m"],
        "heading_change_deg": float(np.degrees(heading[-1] - heading[0])),
        "start_xy_m": centre[0].tolist(), "end_xy_m": centre[-1].tolist(),
        "path_method": SMOOTHING_METHOD,
        "centre_noise_sigma_mm": 1e3 * centre_s.noise_sigma_m, "head_noise_sigma_mm": head_block["noise_sigma_mm"],
        "distance_raw_polyline_m": centre_s.raw_length_m,
        "head_path_length_raw_polyline_m": head_block["path_length_raw_polyline_m"],
    }
    for key in ("distance_m", "displacement_m", "head_path_length_m", "heading_change_deg"):
        an.summary[key] = an.summary["trajectory"][key]
    an.summary["head_paths"] = head_paths


def _path_block(t: np.ndarray, xy: np.ndarray) -> dict[str, Any]:
    """Samples, rate and path length (noise removed, :mod:`snake_core.analysis.smoothing`) of a planar track."""
    r = smooth_path(t, xy)
    duration = float(t[-1] - t[0])
    return {"samples": len(t), "rate_hz": (len(t) - 1) / duration if duration > 0 else None,
            "path_length_m": r.length_m, "noise_sigma_mm": 1e3 * r.noise_sigma_m,
            "displacement_m": r.displacement_m, "path_length_raw_polyline_m": r.raw_length_m,
            "outliers": r.outliers}


def _head_paths(bs: BagSeries) -> dict[str, dict[str, Any]]:
    """Head path length from every pose source of the bag, noise removed (mocap and ground truth side by side)."""
    out: dict[str, dict[str, Any]] = {}
    for topic in bs.pose_topics:
        ser = bs.series.get(topic)
        if ser is not None and len(ser.rows) >= 2:
            out[topic] = _path_block(ser.times(), np.asarray(ser.rows, dtype=float)[:, :2])
    return out


TRAJECTORY_POINT = "body centre (mean of the backbone points)"
"""The point the trajectory, ``distance_m`` (its path length) and ``displacement_m`` (net) follow."""


def _segments(bs: BagSeries, an: Analysis) -> None:
    if not bs.has("/cmd_vel"):
        _missing(an, "segments")
        return
    cmd = bs.series["/cmd_vel"]
    vw = np.asarray(cmd.rows, dtype=float)
    segs = command_segments(cmd.times(), vw[:, 0], vw[:, 1], _CMD_TIMEOUT_S, end_s=an.summary["duration_s"])
    an.arrays["segments"] = segs
    if "centre" not in an.arrays:
        an.summary["segments"] = [{"label": g.label, "v_cmd": g.v_cmd, "omega_cmd": g.omega_cmd, "v": None,
                                   "omega": None, "start_s": g.start_s, "end_s": g.end_s, "samples": 0}
                                  for g in segs]
        _missing(an, "segments")
        return
    rows = segment_twists(segs, an.arrays["t_body"], an.arrays["centre"], an.arrays["heading"],
                          _MEASURE_FROM, forward_offset(an.robot))
    an.summary["segments"] = rows
    an.summary["segments_measured_from"] = _MEASURE_FROM
    min_s = max(_MIN_SEGMENT_S, gait_period_s(an.robot) or 0.0)
    spans = an.arrays.get("bridge_spans", [])
    left_out: dict[int, str] = {}
    for k, g in enumerate(segs):
        over = spans_overlapping(g.start_s, g.end_s, spans)
        if over:
            left_out[k] = "bridge not ARMED: " + "; ".join(
                f"{sp.state} {sp.start_s:.2f}-{sp.end_s:.2f} s" + (f" ({sp.reason})" if sp.reason else "")
                for sp in over)
    an.summary["segment_means"] = flag_short_segments(rows, min_s, _MIN_SEGMENT_SAMPLES, left_out)
    an.summary["segments_bridge_not_armed"] = [
        {"index": k + 1, "label": rows[k]["label"], "start_s": rows[k]["start_s"], "end_s": rows[k]["end_s"],
         "v_cmd": rows[k]["v_cmd"], "v": rows[k]["v"], "omega_cmd": rows[k]["omega_cmd"],
         "omega": rows[k]["omega"], "why": why} for k, why in left_out.items()]


def _bridge_states(bs: BagSeries, an: Analysis) -> None:
    """The bridge's states over the recording (:mod:`snake_core.analysis.bridge_states`).

    Adds ``bridge_states`` (every span that is not ARMED, seconds per state, sources) and
    ``bridge_faults`` (the FAULT spans with their reasons) to the summary.
    """
    samples = bridge_state_samples(bs)
    if not samples:
        _missing(an, "bridge_states")
        an.summary["bridge_faults"] = None
        return
    spans = state_spans(samples, an.summary["duration_s"])
    an.arrays["bridge_spans"] = spans
    seconds: dict[str, float] = {}
    for sp in spans:
        seconds[sp.state] = seconds.get(sp.state, 0.0) + sp.duration_s
    an.summary["bridge_states"] = {
        "sources": sorted({src for sp in spans for src in sp.source.split(", ")}),
        "first_seen_s": spans[0].start_s, "seconds": seconds,
        "not_armed": [{"state": sp.state, "start_s": sp.start_s, "end_s": sp.end_s, "duration_s": sp.duration_s,
                       "reason": sp.reason, "source": sp.source} for sp in spans if sp.state != FOLLOWING],
    }
    an.summary["bridge_faults"] = [{"start_s": sp.start_s, "end_s": sp.end_s, "duration_s": sp.duration_s,
                                    "reason": sp.reason} for sp in spans if sp.state == "FAULT"]


def _tracking(bs: BagSeries, an: Analysis) -> None:
    rob = an.robot
    if bs.has("/joint_commands"):
        jc = bs.series["/joint_commands"]
        an.arrays["t_cmd"], an.arrays["q_cmd"] = jc.times(), joint_matrix(rob, jc.rows)
    if bs.has("/joint_states"):
        js = bs.series["/joint_states"]
        an.arrays["t_state"], an.arrays["q_state"] = js.times(), joint_matrix(rob, js.rows)
    if not bs.has("/joint_commands", "/joint_states"):
        _missing(an, "joint_tracking")
        return
    res = tracking_errors(an.arrays["t_cmd"], an.arrays["q_cmd"], an.arrays["t_state"], an.arrays["q_state"],
                          _MAX_LAG_S, _LAG_STEP_S)
    names = rob.joint_names
    an.summary["joint_tracking_rms_rad"] = {n: r.rms_rad for n, r in zip(names, res, strict=True)}
    an.summary["joint_tracking"] = {n: {"rms_rad": r.rms_rad, "max_rad": r.max_rad, "lag_s": r.lag_s,
                                        "rms_at_lag_rad": r.rms_at_lag_rad} for n, r in zip(names, res, strict=True)}
    an.summary["joint_commands_messages"] = len(an.arrays["t_cmd"])


def _gait_state(bs: BagSeries, an: Analysis) -> None:
    if not bs.has("/gait_state"):
        _missing(an, "gait_state")
        return
    g = bs.series["/gait_state"]
    t = g.times()
    if isinstance(g.rows, GaitRows):  # the columns read_series keeps: NaN where absent or text
        text_keys = {key for _k, key in g.rows.text}
        keys = sorted(k for k, c in g.rows.columns.items() if _has_float(g.rows, k, c, k in text_keys))
        values = {k: g.rows.columns[k] for k in keys}
        modes = g.rows.modes
    else:
        keys = sorted({k for _m, _h, values in g.rows for k, v in values.items() if isinstance(v, float)})
        values = {k: np.array([row[2].get(k, np.nan) if isinstance(row[2].get(k), float) else np.nan
                               for row in g.rows]) for k in keys}
        modes = [row[0] for row in g.rows]
    dt = np.diff(np.append(t, t[-1]))
    mode_s: dict[str, float] = {}
    for m, d in zip(modes, dt, strict=True):
        mode_s[m] = mode_s.get(m, 0.0) + float(d)
    out: dict[str, Any] = {"messages": len(t), "mode_seconds": mode_s, "last_mode": modes[-1], "keys": keys}
    for k in ("resets", "twist_cycles", "rejected_commands"):
        if k in values and np.isfinite(values[k]).any():
            v = values[k][np.isfinite(values[k])]
            out[k] = float(v[-1] - v[0])
    out["last"] = {k: float(v[-1]) for k, v in values.items() if np.isfinite(v[-1])}
    an.summary["gait_state"] = out
    an.arrays["gait"] = (t, values)


def _has_float(rows: GaitRows, key: str, column: np.ndarray, has_text: bool) -> bool:
    """Some row holds ``key`` as a number (NaN included: the text ``nan`` is one)."""
    if not has_text:
        return bool(rows.present[key].any())
    mask = rows.present[key].copy()
    mask[[k for k, name in rows.text if name == key]] = False
    return bool(mask.any())


def _servo_health(bs: BagSeries, an: Analysis) -> None:
    if not bs.has("/diagnostics"):
        _missing(an, "servo_health")
        return
    d = bs.series["/diagnostics"]
    servos: dict[str, dict[str, Any]] = {}
    bus: dict[str, Any] = {"failed_cycles_max": 0.0, "states": {}, "worst_level": 0, "messages": 0}
    traces: dict[str, list[tuple[float, float, float]]] = {}
    for t, statuses in zip(d.t, d.rows, strict=True):
        for name, level, message, values in statuses:
            if not name.startswith("bridge: "):
                continue
            what = name[len("bridge: "):]
            if what == "bus":
                bus["messages"] += 1
                bus["worst_level"] = max(bus["worst_level"], level)
                fc = values.get("failed_cycles")
                if isinstance(fc, float):
                    bus["failed_cycles_max"] = max(bus["failed_cycles_max"], fc)
                st = str(values.get("command_state", message))
                bus["states"][st] = bus["states"].get(st, 0) + 1
                continue
            s = servos.setdefault(what, {"worst_level": 0, "error_bits": 0, "temperature_max_c": None,
                                         "voltage_min_v": None, "voltage_max_v": None, "messages": set()})
            s["worst_level"] = max(s["worst_level"], level)
            if level:
                s["messages"].add(message)
            temp, volt, err = (values.get(k) for k in ("temperature_c", "voltage_v", "hardware_error"))
            if isinstance(err, float):
                s["error_bits"] |= int(err)
            if isinstance(temp, float) and isinstance(volt, float):
                traces.setdefault(what, []).append((t, temp, volt))
                s["temperature_max_c"] = max(temp, s["temperature_max_c"] or -np.inf)
                s["voltage_min_v"] = min(volt, s["voltage_min_v"] or np.inf)
                s["voltage_max_v"] = max(volt, s["voltage_max_v"] or -np.inf)
    if not servos and not bus["messages"]:
        _missing(an, "servo_health")
        return
    for s in servos.values():
        s["messages"] = sorted(s["messages"])
    an.summary["servo_health"] = {"bus": bus, "servos": servos}
    an.arrays["servo_traces"] = {k: np.asarray(v) for k, v in traces.items()}


def _monitors(bs: BagSeries, an: Analysis) -> None:
    for topic, section in (("/singularity_margin", "singularity_margin"), ("/slippage/ratio", "slippage_ratio")):
        if not bs.has(topic):
            _missing(an, section)
            continue
        t, v = bs.series[topic].times(), np.asarray(bs.series[topic].rows, dtype=float)
        fin = v[np.isfinite(v)]
        an.summary[section] = {"messages": len(v), "min": float(fin.min()) if len(fin) else None,
                               "mean": float(fin.mean()) if len(fin) else None,
                               "max": float(fin.max()) if len(fin) else None}
        an.arrays[section] = (t, v)


def _recompute_margin(bs: BagSeries, an: Analysis) -> None:
    """Singularity margin at every joint_states sample, as ``singularity_monitor`` computes it."""
    from snake_core.singularity.fast import FastEvaluator
    from snake_core.singularity.model import check_slipping, make_params

    rob = an.robot
    if rob.kind != "planar_wheeled" or "q_state" not in an.arrays:
        an.summary["singularity_margin_recomputed"] = {
            "skipped": "needs /joint_states of a planar wheeled robot (wheel_d / wheel_l in its YAML)"}
        return
    n = len(rob.joints) + 1
    evaluator = FastEvaluator(make_params(n, list(rob.wheel_d), list(rob.wheel_l)))
    t, q = an.arrays["t_state"], an.arrays["q_state"]
    slips = bs.series.get("/slipping_links")
    slip_t = slips.times() if slips else np.empty(0)
    margin = np.full(len(t), np.nan)
    current: frozenset[int] | None = None
    for k in range(len(t)):
        i = int(np.searchsorted(slip_t, t[k], side="right")) - 1
        wanted = check_slipping(n, slips.rows[i]) if slips and i >= 0 else frozenset()
        if wanted != current:
            evaluator.set_slipping(wanted)
            current = wanted
        if np.all(np.isfinite(q[k])):
            margin[k] = evaluator.evaluate(q[k].tolist()).margin
    fin = margin[np.isfinite(margin)]
    an.summary["singularity_margin_recomputed"] = {
        "messages": len(t), "min": float(fin.min()) if len(fin) else None,
        "mean": float(fin.mean()) if len(fin) else None, "max": float(fin.max()) if len(fin) else None}
    an.arrays["singularity_margin_recomputed"] = (t, margin)


def _path_following(bs: BagSeries, an: Analysis) -> None:
    head = _pose_topic(bs, _HEAD_FIRST)
    if not bs.has("/plan") or head is None:
        _missing(an, "path_following")
        return
    plans = bs.series["/plan"]
    plan_t, plan = plans.t[-1], plans.rows[-1]
    first_plan_t = plans.t[0]
    if len(plan) == 0:
        _missing(an, "path_following")
        return
    t = bs.series[head].times()
    xy = np.asarray(bs.series[head].rows, dtype=float)[:, :2]
    after = t >= first_plan_t
    if not after.any():
        _missing(an, "path_following")
        return
    dist = cross_track(plan, xy[after])
    to_goal = np.linalg.norm(xy[after] - plan[-1], axis=1)
    reached = np.flatnonzero(to_goal <= _GOAL_TOLERANCE_M)
    an.summary["path_following"] = {
        "plans": len(plans.rows), "plan_length_m": float(np.sum(np.linalg.norm(np.diff(plan, axis=0), axis=1))),
        "cross_track_rms_m": float(np.sqrt(np.mean(dist**2))), "cross_track_max_m": float(dist.max()),
        "goal_tolerance_m": _GOAL_TOLERANCE_M,
        "time_to_goal_s": float(t[after][reached[0]] - first_plan_t) if len(reached) else None,
        "final_distance_to_goal_m": float(to_goal[-1]), "head_topic": head, "last_plan_at_s": float(plan_t),
    }
    an.arrays["path"] = (plan, xy[after])


def _twin_vs_robot(bs: BagSeries, an: Analysis) -> None:
    """Replay the bag through the twin of ``an.twin_target`` (when asked) and compare."""
    if an.twin_target is None:
        return
    from snake_core.robot import DEFAULT_CALIBRATION_TARGET, calibration_target, load_twin_params
    from snake_tools.twin.replay import replay

    name = calibration_target(an.twin_target)
    params, path = load_twin_params(an.robot, name, must_exist=name != DEFAULT_CALIBRATION_TARGET)
    if not (bs.has("/joint_commands") or bs.has("/cmd_vel")) or not bs.pose_topics:
        _missing(an, "twin_vs_robot")
        return
    r = replay(bs, an.robot, params)
    keys = ("drive", "pose_source", "distance_travelled_m", "divergence_end_m", "divergence_max_m",
            "divergence_per_m", "heading_drift_rad", "joint_residual_rms_rad", "replay_realtime_factor")
    an.summary["twin_vs_robot"] = {
        "target": name, "twin_params_file": str(path) if path is not None else "defaults (no calibration file)",
        **{k: r[k] for k in keys},
        "speed_ratio_per_segment": [g["speed_ratio"] for g in r["segments"]],
        "turn_rate_ratio_per_segment": [g["turn_rate_ratio"] for g in r["segments"]],
    }
    an.summary["twin_vs_robot_segments"] = r["segments"]


def robot_mass(robot: RobotModel) -> float:
    """The robot's mass from its YAML, kg: modules x module_mass (T-Snake) or links x link_mass."""
    body: Any = robot.body
    if hasattr(body, "module_mass"):
        return float(body.n_modules * body.module_mass)
    return float(body.n_links * body.link_mass)


def _cot_block(t: np.ndarray, power: np.ndarray, t_body: np.ndarray | None, centre: np.ndarray | None,
               mass: float) -> dict[str, Any]:
    """Energy, mean power and cost of transport of one stretch (energetics' formulas)."""
    work = energy(t, power) if len(t) >= 2 else 0.0
    duration = float(t[-1] - t[0]) if len(t) >= 2 else 0.0
    out: dict[str, Any] = {"power_samples": len(t), "energy_j": work,
                           "mean_power_w": work / duration if duration > 0 else None,
                           "peak_power_w": float(power.max()) if len(power) else None,
                           "displacement_m": None, "cost_of_transport": None}
    if t_body is not None and centre is not None and len(t) >= 2:
        sel = (t_body >= t[0]) & (t_body <= t[-1])
        if sel.sum() >= 2:
            d = displacement(centre[sel])
            cot = cost_of_transport(work, mass, d)
            out.update(displacement_m=d, cost_of_transport=cot if np.isfinite(cot) else None)
    return out


def _cost_of_transport(bs: BagSeries, an: Analysis) -> None:
    """Actuator power from ``joint_states`` efforts and velocities; cost of transport per segment and run.

    Power is the positive mechanical power ``P = sum_i max(tau_i qdot_i, 0)`` and
    ``COT = integral P dt / (m g d)`` with d the body centre's net displacement
    (:mod:`snake_core.analysis.energetics`); m is the robot YAML's mass.
    """
    js = bs.series.get("/joint_states")
    rows = js.rows if js is not None else None
    if not isinstance(rows, JointRows) or not len(rows) or not np.isfinite(rows.power).any():
        _missing(an, "cost_of_transport")
        an.summary["missing"]["cost_of_transport"] = "no efforts recorded: " + an.summary["missing"][
            "cost_of_transport"]
        return
    assert js is not None
    ok = np.isfinite(rows.power)
    t, power = js.times()[ok], rows.power[ok]
    mass = robot_mass(an.robot)
    t_body, centre = an.arrays.get("t_body"), an.arrays.get("centre")
    block = {"mass_kg": mass, "messages_without_effort": int((~ok).sum()),
             **_cot_block(t, power, t_body, centre, mass)}
    if centre is None:
        block["cost_of_transport_note"] = "no pose: displacement unknown"
    an.summary["cost_of_transport"] = block
    segments = []
    for seg in an.arrays.get("segments", []):
        sel = (t >= seg.start_s) & (t <= seg.end_s)
        segments.append({"label": seg.label, "start_s": seg.start_s, "end_s": seg.end_s,
                         **_cot_block(t[sel], power[sel], t_body, centre, mass)})
    an.summary["cost_of_transport_segments"] = segments
    an.arrays["power"] = (t, power)


SECTIONS: list[Callable[[BagSeries, Analysis], None]] = [
    _bridge_states, _trajectory, _segments, _tracking, _gait_state, _servo_health, _monitors, _recompute_margin,
    _path_following,
    _twin_vs_robot,
    _cost_of_transport,
]
"""The analysis' sections, run in this order on every bag. A new section is a function of
(series, analysis) that adds its block to ``analysis.summary`` (and arrays for its
figures), or calls ``_missing``; appending it here, and its block to
:data:`snake_tools.bag.report.SUMMARY_BLOCKS`, puts it in the summary and the report."""
