"""``snake demo``: the README's main job on the embedded default (no robot needed).

Starts the real gait node as its own process, drives it over DDS with a scripted
``cmd_vel`` sequence (translate, turn, turn in place, stop), records
``joint_commands`` and ``gait_state``, and writes a summary plus figures of the joint
angles and the backbone curve.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from snake_tools.output import print_table

# (label, linear m/s, angular rad/s, seconds)
_SCRIPT = (
    ("translate", 0.05, 0.0, 8.0),
    ("turn", 0.03, 0.25, 8.0),
    ("turn in place", 0.0, 0.4, 8.0),
    ("stop", 0.0, 0.0, 3.0),
)
_CMD_RATE_HZ = 20.0  # teleop-like republish rate


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake demo``."""
    p = subparsers.add_parser("demo", help="run the gait node with scripted cmd_vel; write summary and figures")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="output directory")
    p.add_argument("--robot", default="tsnake")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the scripted session and write its outputs."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticStatus
    from geometry_msgs.msg import TwistStamped
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS, STATUS_QOS

    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ROS_DOMAIN_ID", str(30 + os.getpid() % 60))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    exe = shutil.which("gait_node") or os.path.join(os.path.dirname(sys.executable), "gait_node")
    log = (args.out / "gait_node.log").open("wb")
    proc = subprocess.Popen([exe, "--ros-args", "-p", f"robot:={args.robot}", "-p", "cmd_timeout:=0.5"],
                            stdout=log, stderr=subprocess.STDOUT)
    t_cmd: list[float] = []
    q_cmd: list[list[float]] = []
    names: list[str] = []
    states: list[tuple[float, str, dict[str, float]]] = []
    segments: list[tuple[str, float, float]] = []
    try:
        with rclpy.init():
            node = rclpy.create_node("snake_demo")
            t0 = time.monotonic()

            def on_cmd(msg: JointState) -> None:
                names[:] = list(msg.name)
                t_cmd.append(time.monotonic() - t0)
                q_cmd.append(list(msg.position))

            def on_state(msg: DiagnosticStatus) -> None:
                states.append((time.monotonic() - t0, msg.message, {kv.key: float(kv.value) for kv in msg.values}))

            node.create_subscription(JointState, "joint_commands", on_cmd, COMMAND_QOS)
            node.create_subscription(DiagnosticStatus, "gait_state", on_state, STATUS_QOS)
            pub = node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
            deadline = time.monotonic() + 30.0
            while (pub.get_subscription_count() == 0 or not t_cmd) and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            if not t_cmd:
                raise OSError(f"gait node did not start; see {args.out / 'gait_node.log'}")
            for label, v, w, seconds in _SCRIPT:
                start = time.monotonic() - t0
                print(f"demo: {label}: cmd_vel v={v} m/s, omega={w} rad/s for {seconds} s", flush=True)
                end = time.monotonic() + seconds
                next_pub = 0.0
                while time.monotonic() < end:
                    if time.monotonic() >= next_pub and label != "stop":
                        msg = TwistStamped()
                        msg.header.stamp = node.get_clock().now().to_msg()
                        msg.twist.linear.x, msg.twist.angular.z = v, w
                        pub.publish(msg)
                        next_pub = time.monotonic() + 1.0 / _CMD_RATE_HZ
                    rclpy.spin_once(node, timeout_sec=0.01)
                segments.append((label, start, time.monotonic() - t0))
            node.destroy_node()
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    summary = _summarise(np.asarray(t_cmd), np.asarray(q_cmd), names, states, segments)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    _figures(args.out, args.robot, np.asarray(t_cmd), np.asarray(q_cmd), names, states, segments)
    rows = [(f"{s['label']}: mode / v / omega / omega_h / omega_t",
             f"{s['mode']} / {s['v']:.3f} / {s['omega']:.3f} / {s['omega_h']:.2f} / {s['omega_t']:.2f}")
            for s in summary["segments"]]
    rows += [("joint_commands messages", summary["messages"]), ("achieved rate, Hz", summary["rate_hz"]),
             ("max joint step, rad", summary["max_joint_step"]), ("phase resets", summary["phase_resets"]),
             ("outputs", str(args.out))]
    print_table(rows, title="snake demo: gait node driven by scripted cmd_vel")
    return 0


def _summarise(t: np.ndarray, q: np.ndarray, names: list[str], states: list, segments: list) -> dict:
    out_segments = []
    for label, start, end in segments:
        mid = [s for s in states if start + 0.5 * (end - start) <= s[0] <= end]
        last = mid[-1] if mid else states[-1]
        vals = last[2]
        out_segments.append({"label": label, "start_s": start, "end_s": end, "mode": last[1],
                             "v": vals.get("v", 0.0), "omega": vals.get("omega", 0.0),
                             "omega_h": vals.get("omega_h", 0.0), "omega_t": vals.get("omega_t", 0.0)})
    return {
        "joint_names": names,
        "messages": len(t),
        "rate_hz": float((len(t) - 1) / (t[-1] - t[0])) if len(t) > 1 else 0.0,
        "max_joint_step": float(np.abs(np.diff(q, axis=0)).max()) if len(q) > 1 else 0.0,
        "phase_resets": int(states[-1][2].get("resets", 0)) if states else 0,
        "twist_cycles": int(states[-1][2].get("twist_cycles", 0)) if states else 0,
        "segments": out_segments,
    }


def _figures(out: Path, robot_name: str, t: np.ndarray, q: np.ndarray, names: list[str], states: list,
             segments: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from snake_core.gait.rolling import RollingVectorGait
    from snake_core.robot import load_robot

    robot = load_robot(robot_name)
    types = [robot.joint(n).type for n in names]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for ax, jt in zip(axes, ("dorsal", "twist", "lateral"), strict=True):
        for k, n in enumerate(names):
            if types[k] == jt:
                ax.plot(t, q[:, k], lw=0.8, label=n)
        ax.set_ylabel(f"{jt} [rad]")
        for label, start, _end in segments:
            ax.axvline(start, color="k", lw=0.5, ls=":")
            if jt == "dorsal":
                ax.text(start, ax.get_ylim()[1], f" {label}", va="top", fontsize=8)
        ax.legend(fontsize=6, ncol=6, loc="lower left")
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("joint_commands from the gait node (scripted cmd_vel)")
    fig.tight_layout()
    fig.savefig(out / "joint_angles.png", dpi=120)
    plt.close(fig)

    if robot.kind != "tsnake":
        return
    gait = RollingVectorGait(robot)
    fig = plt.figure(figsize=(10, 4))
    for k, (label, _start, end) in enumerate(segments[:3]):
        snap = [s for s in states if s[0] <= end][-1][2]
        gait.state.phi_h, gait.state.phi_t, gait.state.wave_phase = snap["phi_h"], snap["phi_t"], snap["wave_phase"]
        bb = gait.backbone(120)
        ax = fig.add_subplot(1, 3, k + 1, projection="3d")
        p = bb["points"]
        ax.plot(p[:, 0], p[:, 1], p[:, 2], "k-", lw=2)
        step = 10
        ax.quiver(p[::step, 0], p[::step, 1], p[::step, 2], *(0.03 * bb["ea"][::step]).T, color="tab:red", lw=0.8)
        ax.set_title(f"{label}\nbackbone + dorsal normal e_a", fontsize=9)
        ax.set_box_aspect((1.2, 0.3, 0.2))
    fig.tight_layout()
    fig.savefig(out / "backbone.png", dpi=120)
    plt.close(fig)
