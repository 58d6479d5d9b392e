"""``snake demo``: the README's main job on the embedded default (no robot needed).

Runs the stack as it runs on the robot, with the MuJoCo twin in place of the servos:
``twin_node`` (simulated T-Snake, publishes ``/clock``, ``joint_states`` and ground
truth) and ``gait_node`` (on simulated time) as separate processes over DDS, driven by a
scripted ``cmd_vel`` sequence (translate, turn, turn in place, stop). Writes a summary
(distance, heading change, achieved vs commanded speed per segment) and figures of the
trajectory and of the joint commands.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from snake_core.analysis import body_heading, drive_twist
from snake_core.kinematics import chain_points
from snake_core.robot import load_robot
from snake_tools.cli import float_in
from snake_tools.output import print_table

# (label, linear m/s, angular rad/s, simulated seconds)
_SCRIPT = (
    ("translate", 0.08, 0.0, 12.0),
    ("turn", 0.05, 0.08, 12.0),
    ("turn in place", 0.0, 0.15, 12.0),
    ("stop", 0.0, 0.0, 4.0),
)
_CMD_RATE_HZ = 20.0  # teleop-like republish rate, Hz of simulated time
_MEASURE_FROM = 0.4  # fraction of a segment after which its twist is measured (acceleration limits)
_START_TIMEOUT_S = 60.0  # wall s to wait for the nodes


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake demo``."""
    p = subparsers.add_parser("demo", help="T-Snake in the MuJoCo twin driven by scripted cmd_vel; summary + plots")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory")
    p.add_argument("--world", default="flat", help="world name in config/worlds or a YAML path")
    p.add_argument("--speed-factor", type=float_in(0.1, 20.0), default=1.0,
                   help="simulated seconds per wall second (1: real time)")
    p.set_defaults(func=run)


def _exe(name: str) -> str:
    return shutil.which(name) or os.path.join(os.path.dirname(sys.executable), name)


def run(args: argparse.Namespace) -> int:
    """Start the nodes, run the script, write the outputs."""
    import rclpy
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from snake_hardware.sim.worlds import load_world
    from snake_ros.qos import COMMAND_QOS, SENSOR_QOS

    if not np.isfinite(args.speed_factor) or not 0.1 <= args.speed_factor <= 20:
        raise ValueError(f"--speed-factor must be in [0.1, 20], got {args.speed_factor}")
    load_world(args.world)  # a bad world file is one line here, before any process starts
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ROS_DOMAIN_ID", str(30 + os.getpid() % 60))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    robot = load_robot("tsnake")
    mode = ["-p", "mode:=realtime"] if args.speed_factor == 1.0 else \
        ["-p", "mode:=fast", "-p", f"speed_factor:={args.speed_factor}"]
    procs = []
    logs = []
    for name, extra in (("twin_node", ["-p", "robot:=tsnake", "-p", f"world:={args.world}", *mode]),
                        ("gait_node", ["-p", "robot:=tsnake", "-p", "use_sim_time:=true"])):
        log = (args.out / f"{name}.log").open("wb")
        logs.append(log)
        procs.append(subprocess.Popen([_exe(name), "--ros-args", *extra], stdout=log, stderr=subprocess.STDOUT))
    rec: dict[str, list] = {"t": [], "centre": [], "heading": [], "points": [], "t_cmd": [], "q_cmd": []}
    latest_q: list[np.ndarray] = []
    segments: list[tuple[str, float, float, float, float]] = []
    try:
        with rclpy.init():
            node = rclpy.create_node("snake_demo", parameter_overrides=[Parameter("use_sim_time", value=True)])

            def now() -> float:
                return node.get_clock().now().nanoseconds * 1e-9

            def on_states(msg: JointState) -> None:
                index = dict(zip(msg.name, msg.position, strict=False))
                latest_q[:] = [np.array([index[n] for n in robot.joint_names])]

            def on_base(msg: PoseStamped) -> None:
                if not latest_q:
                    return
                p, o = msg.pose.position, msg.pose.orientation
                pts = chain_points(robot, np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z]), latest_q[0])
                rec["t"].append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
                rec["centre"].append(pts[:, :2].mean(axis=0))
                rec["heading"].append(body_heading(pts))
                rec["points"].append(pts[:, :2])

            def on_cmd(msg: JointState) -> None:
                rec["t_cmd"].append(now())
                rec["q_cmd"].append(list(msg.position))

            node.create_subscription(JointState, "joint_states", on_states, SENSOR_QOS)
            node.create_subscription(PoseStamped, "ground_truth/base_pose", on_base, SENSOR_QOS)
            node.create_subscription(JointState, "joint_commands", on_cmd, COMMAND_QOS)
            pub = node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
            deadline = time.monotonic() + _START_TIMEOUT_S
            while (pub.get_subscription_count() == 0 or not rec["t"] or not rec["t_cmd"]) \
                    and time.monotonic() < deadline:
                if any(p.poll() is not None for p in procs):
                    break
                rclpy.spin_once(node, timeout_sec=0.05)
            if not rec["t"] or not rec["t_cmd"]:
                raise OSError(f"the nodes did not start; see {args.out}/twin_node.log and gait_node.log")
            for label, v, w, seconds in _SCRIPT:
                start = now()
                print(f"demo: {label}: cmd_vel v={v} m/s, omega={w} rad/s for {seconds} s (sim)", flush=True)
                next_pub = start
                while now() < start + seconds:
                    if now() >= next_pub and label != "stop":
                        msg = TwistStamped()
                        msg.header.stamp = node.get_clock().now().to_msg()
                        msg.twist.linear.x, msg.twist.angular.z = v, w
                        pub.publish(msg)
                        next_pub = now() + 1.0 / _CMD_RATE_HZ
                    rclpy.spin_once(node, timeout_sec=0.005)
                segments.append((label, v, w, start, now()))
            node.destroy_node()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()
    summary = _summarise(rec, segments)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    _figures(args.out, robot.joint_names, rec, segments, summary)
    rows: list[tuple[str, object]] = []
    for s in summary["segments"]:
        rows.append((f"{s['label']}: commanded v / omega", f"{s['v_cmd']:.3f} m/s / {s['omega_cmd']:.3f} rad/s"))
        rows.append((f"{s['label']}: achieved  v / omega", f"{s['v']:.3f} m/s / {s['omega']:.3f} rad/s"))
    rows += [("distance travelled, m", summary["distance_m"]), ("net displacement, m", summary["displacement_m"]),
             ("heading change, deg", summary["heading_change_deg"]), ("outputs", str(args.out))]
    print_table(rows, title="snake demo: T-Snake in the MuJoCo twin, gait node driven by scripted cmd_vel")
    return 0


def _summarise(rec: dict[str, list], segments: list) -> dict[str, object]:
    t = np.asarray(rec["t"])
    centre = np.asarray(rec["centre"])
    heading = np.unwrap(np.asarray(rec["heading"]))
    out_segments = []
    for label, v_cmd, w_cmd, start, end in segments:
        keep = (t >= start + _MEASURE_FROM * (end - start)) & (t <= end)
        v, w = drive_twist(t[keep], centre[keep], heading[keep]) if keep.sum() > 2 else (float("nan"),) * 2
        out_segments.append({"label": label, "v_cmd": v_cmd, "omega_cmd": w_cmd, "v": v, "omega": w,
                             "start_s": start, "end_s": end})
    return {
        "distance_m": float(np.sum(np.linalg.norm(np.diff(centre, axis=0), axis=1))),
        "displacement_m": float(np.linalg.norm(centre[-1] - centre[0])),
        "heading_change_deg": float(np.degrees(heading[-1] - heading[0])),
        "sim_seconds": float(t[-1] - t[0]),
        "joint_commands_messages": len(rec["t_cmd"]),
        "segments": out_segments,
    }


def _figures(out: Path, names: list[str], rec: dict[str, list], segments: list, summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.asarray(rec["t"])
    centre = np.asarray(rec["centre"])
    fig, ax = plt.subplots(figsize=(7, 7))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, _v, _w, start, end) in enumerate(segments):
        sel = (t >= start) & (t <= end)
        if not sel.any():
            continue
        ax.plot(centre[sel, 0], centre[sel, 1], color=colours[k], lw=2, label=label)
        last = int(np.flatnonzero(sel)[-1])
        body = rec["points"][last]
        ax.plot(body[:, 0], body[:, 1], color=colours[k], lw=1, alpha=0.6)
        ax.plot(*body[0], "o", color=colours[k], ms=4)
    ax.plot(*rec["points"][0].T, "k-", lw=1, alpha=0.5, label="start pose (head: dot)")
    ax.plot(*rec["points"][0][0], "ko", ms=4)
    ax.set_aspect("equal")
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.legend(fontsize=8)
    ax.set_title(f"T-Snake in the twin: {summary['distance_m']:.2f} m travelled, "
                 f"{summary['heading_change_deg']:.0f} deg turned", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "trajectory.png", dpi=120)
    plt.close(fig)

    q = np.asarray(rec["q_cmd"])
    tc = np.asarray(rec["t_cmd"])
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for ax, jt in zip(axes, ("dorsal", "twist", "lateral"), strict=True):
        for k, n in enumerate(names):
            if n.endswith(jt):
                ax.plot(tc, q[:, k], lw=0.8, label=n)
        ax.set_ylabel(f"{jt} [rad]")
        for label, _v, _w, start, _end in segments:
            ax.axvline(start, color="k", lw=0.5, ls=":")
            if jt == "dorsal":
                ax.text(start, ax.get_ylim()[1], f" {label}", va="top", fontsize=8)
        ax.legend(fontsize=6, ncol=6, loc="lower left")
    axes[-1].set_xlabel("simulated time [s]")
    fig.suptitle("joint_commands from the gait node")
    fig.tight_layout()
    fig.savefig(out / "joint_angles.png", dpi=120)
    plt.close(fig)
