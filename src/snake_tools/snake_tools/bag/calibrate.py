"""``snake bag calibrate``: the reduction's k and d' (003 Eq. 10) from a recorded session.

The twin experiment (``snake experiment calibrate``) commands (omega_h, omega_t) runs in
simulation; here the runs come from a recording of the robot driven by ``cmd_vel``
(teleop, a script): the gait node's ``gait_state`` gives the native command it executed
(omega_h, omega_t), a pose topic (motion capture on the robot; ground truth in the twin)
and ``joint_states`` give the body's centre and heading through the robot YAML's forward
kinematics. Every stretch of constant (omega_h, omega_t) at least ``_MIN_RUN_S`` long is
one run; its twist is measured after ``_SETTLE_S`` (the acceleration-limited ramp and the
body's transient), as in the twin experiment, and Eq. 10 is fitted by least squares
(:func:`snake_core.analysis.fit_reduction`).

With ``--write`` the coefficients go to the calibration target given by ``--target``
(``config/calibration/<robot>/<target>.yaml``), apart from the twin's: other entries
of that file (e.g. the conical baseline's) are kept.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from snake_core.analysis import drive_twist, fit_reduction
from snake_core.analysis.session import constant_runs
from snake_core.errors import SnakeCoreError
from snake_core.robot import calibration_path, calibration_target, load_robot
from snake_tools.bag.analyze import forward_offset, joint_matrix
from snake_tools.bag.series import read_series
from snake_tools.bag.storage import BagError
from snake_tools.output import print_json, print_table

_MIN_RUN_S = 4.0  # s, shortest constant-command stretch used as a run
_SETTLE_S = 2.0  # s, skipped at the start of each run


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bag calibrate``."""
    p = subparsers.add_parser("calibrate", help="fit k and d' of 003 Eq. 10 from a recorded session with mocap")
    p.add_argument("bag", type=Path)
    p.add_argument("--robot", default="tsnake", help="robot name or YAML")
    p.add_argument("--target", required=True, help="calibration target (e.g. the robot's name; 'twin' is the twin's)")
    p.add_argument("--write", action="store_true", help="write config/calibration/<robot>/<target>.yaml")
    p.add_argument("--pose-topic", default=None, metavar="TOPIC|tf:FRAME",
                   help="PoseStamped topic or /tf child frame of the robot (default: see docs/bags.md)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def runs_from_bag(bag: Path, robot_name: str, pose_topic: str | None = None) -> tuple[list[dict[str, float]], str]:
    """(omega_h, omega_t, v, omega) per constant-command run of a bag, and the pose topic used.

    Raises:
        BagError: The bag lacks ``gait_state``, a pose topic or ``joint_states``, or
            has no run long enough.
    """
    from snake_core.analysis.session import body_centres_headings, chain_points_batch, hold_previous

    bs = read_series(bag, progress=False, pose_topic=pose_topic)
    robot = load_robot(robot_name, calibrated=False)
    pose_topic = next((t for t in bs.pose_topics if bs.has(t)), None)
    needs = [n for n, ok in (("/gait_state", bs.has("/gait_state")), ("/joint_states", bs.has("/joint_states")),
                             ("a pose source (--pose-topic; default order in docs/bags.md)", pose_topic is not None))
             if not ok]
    if needs:
        raise BagError(f"{bag}: calibration needs {', '.join(needs)}")
    gait = bs.series["/gait_state"]
    rows = [r[2] for r in gait.rows]
    if not all(isinstance(r.get("omega_h"), float) and isinstance(r.get("omega_t"), float) for r in rows):
        raise BagError(f"{bag}: gait_state has no numeric omega_h / omega_t (not the rolling gait?)")
    native = np.array([[r["omega_h"], r["omega_t"]] for r in rows])
    assert pose_topic is not None
    t = bs.series[pose_topic].times()
    pose = np.asarray(bs.series[pose_topic].rows, dtype=float)
    js = bs.series["/joint_states"]
    q, valid = hold_previous(js.times(), joint_matrix(robot, js.rows), t)
    keep = valid & np.all(np.isfinite(q), axis=1)
    t, pose, q = t[keep], pose[keep], q[keep]
    centre, heading = body_centres_headings(chain_points_batch(robot, pose[:, :3], pose[:, 3:], q))
    out = []
    for start, end in constant_runs(gait.times(), native, _MIN_RUN_S):
        oh, ot = native[np.searchsorted(gait.times(), start)]
        if oh == 0 and ot == 0:
            continue
        sel = (t >= start + _SETTLE_S) & (t <= end)
        if sel.sum() < 3:
            continue
        v, w = drive_twist(t[sel], centre[sel], heading[sel] + forward_offset(robot) - np.pi / 2)
        out.append({"omega_h": float(oh), "omega_t": float(ot), "v": v, "omega": w,
                    "start_s": start, "end_s": end})
    if not out:
        raise BagError(f"{bag}: no run of constant (omega_h, omega_t) at least {_MIN_RUN_S} s long with motion")
    return out, pose_topic


def calibrate(bag: Path, robot_name: str, pose_topic: str | None = None) -> dict[str, Any]:
    """Fit Eq. 10 to the runs of a bag.

    Raises:
        BagError: Missing topics or runs, or runs that do not excite both terms of Eq. 10.
    """
    runs, pose_topic = runs_from_bag(bag, robot_name, pose_topic)
    arr = {k: np.array([r[k] for r in runs]) for k in ("omega_h", "omega_t", "v", "omega")}
    try:
        fit = fit_reduction(arr["omega_h"], arr["omega_t"], arr["v"], arr["omega"])
    except SnakeCoreError as err:
        raise BagError(f"{bag}: {err}") from err
    return {"bag": str(bag), "pose_topic": pose_topic, "runs": runs,
            "reduction": {"k": fit.k, "d_prime": fit.d_prime, "v_rms_error": fit.v_rms_error,
                          "omega_rms_error": fit.omega_rms_error}}


def write(result: dict[str, Any], robot_name: str, target: str) -> Path:
    """Write k and d' into the target's calibration file (other entries kept)."""
    robot = load_robot(robot_name, calibrated=False)
    path = calibration_path(robot.name, calibration_target(target))
    data: dict[str, Any] = {}
    if path.is_file():
        data = yaml.safe_load(path.read_text()) or {}
    red = result["reduction"]
    data.setdefault("gaits", {})["reduction"] = {"k": round(red["k"], 5), "d_prime": round(red["d_prime"], 4)}
    data["provenance"] = {
        "command": f"snake bag calibrate {result['bag']} --robot {robot.name} --target {target} --write",
        "target": target, "date": datetime.date.today().isoformat(), "pose_topic": result["pose_topic"],
        "runs_omega_h_omega_t": [[r["omega_h"], r["omega_t"]] for r in result["runs"]],
        "fit_rms_v_m_s": round(red["v_rms_error"], 5), "fit_rms_omega_rad_s": round(red["omega_rms_error"], 5),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Measured gait coefficients of {robot.name}, calibration target {target!r}; overlays gaits.* of\n"
              f"# config/robots/{robot.name}.yaml (snake_core.robot.load_robot(..., target={target!r})).\n"
              "# Units: k m/rad, d_prime m.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return path


def run(args: argparse.Namespace) -> int:
    """Entry point of ``snake bag calibrate``."""
    calibration_target(args.target)  # a bad name fails before the bag is read
    result = calibrate(args.bag, args.robot, args.pose_topic)
    if args.write:
        result["written"] = str(write(result, args.robot, args.target))
    if args.json:
        print_json(result)
        return 0
    red = result["reduction"]
    rows: list[tuple[str, object]] = [("k (m/rad)", red["k"]), ("d' (m)", red["d_prime"]),
                                      ("fit rms v (m/s)", red["v_rms_error"]),
                                      ("fit rms omega (rad/s)", red["omega_rms_error"]), ("runs", len(result["runs"]))]
    if "written" in result:
        rows.append(("written", result["written"]))
    print_table(rows, title=f"snake bag calibrate (003 Eq. 10), target {args.target}")
    return 0
