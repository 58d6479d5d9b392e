"""``snake demo``: the README's main job on the embedded default (no robot needed).

Runs the stack as it runs on the robot, with the MuJoCo twin in place of the servos:
``twin_node`` (simulated T-Snake, publishes ``/clock``, ``joint_states`` and ground
truth) and ``gait_node`` (on simulated time) as separate processes over DDS, driven by a
scripted ``cmd_vel`` sequence (translate, turn, turn in place, stop).

The run is recorded into ``<out>/bag`` (MCAP, :class:`snake_tools.bag.record.BagRecorder`)
and everything it reports comes from that bag through ``snake bag analyze``'s code: the
summary (distance, heading change, achieved vs commanded twist per segment, joint
tracking), ``summary.json``, ``report.html`` and the figures (``trajectory.png``,
``joint_angles.png``, ...). The same code analyses a bag recorded on the robot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

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
_RECORDED = ("/clock", "/cmd_vel", "/joint_commands", "/joint_states", "/gait_state",
             "/ground_truth/head_pose", "/ground_truth/base_pose", "/mocap/head_pose", "/mocap/markers",
             "/robot_description_yaml")
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
    """Start the nodes, record the run, drive the script, analyse the bag."""
    import rclpy
    from geometry_msgs.msg import TwistStamped
    from rclpy.parameter import Parameter

    from snake_hardware.sim.worlds import load_world
    from snake_ros.qos import COMMAND_QOS
    from snake_tools.bag.analyze import analyze
    from snake_tools.bag.record import BagRecorder
    from snake_tools.bag.report import write_report

    if not np.isfinite(args.speed_factor) or not 0.1 <= args.speed_factor <= 20:
        raise ValueError(f"--speed-factor must be in [0.1, 20], got {args.speed_factor}")
    load_world(args.world)  # a bad world file is one line here, before any process starts
    args.out.mkdir(parents=True, exist_ok=True)
    bag = args.out / "bag"
    if bag.exists():
        shutil.rmtree(bag)
    os.environ.setdefault("ROS_DOMAIN_ID", str(30 + os.getpid() % 60))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    load_robot("tsnake")  # a bad robot description fails here, before any process starts
    mode = ["-p", "mode:=realtime"] if args.speed_factor == 1.0 else \
        ["-p", "mode:=fast", "-p", f"speed_factor:={args.speed_factor}"]
    procs = []
    logs = []
    for name, extra in (("twin_node", ["-p", "robot:=tsnake", "-p", f"world:={args.world}", *mode]),
                        ("gait_node", ["-p", "robot:=tsnake", "-p", "use_sim_time:=true"])):
        log = (args.out / f"{name}.log").open("wb")
        logs.append(log)
        procs.append(subprocess.Popen([_exe(name), "--ros-args", *extra], stdout=log, stderr=subprocess.STDOUT))
    try:
        with rclpy.init():
            node = rclpy.create_node("snake_demo", parameter_overrides=[Parameter("use_sim_time", value=True)])
            recorder = BagRecorder(node, bag, "mcap", list(_RECORDED))
            try:
                def now() -> float:
                    return node.get_clock().now().nanoseconds * 1e-9

                def spin(timeout: float) -> None:
                    recorder.tick()
                    rclpy.spin_once(node, timeout_sec=timeout)

                pub = node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
                deadline = time.monotonic() + _START_TIMEOUT_S
                ready = ("/ground_truth/base_pose", "/joint_states", "/joint_commands", "/clock")
                while (pub.get_subscription_count() == 0 or not all(recorder.counts.get(t) for t in ready)
                       or "/cmd_vel" not in recorder.counts) and time.monotonic() < deadline:
                    if any(p.poll() is not None for p in procs):
                        break
                    spin(0.05)
                if not all(recorder.counts.get(t) for t in ready):
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
                        spin(0.005)
            finally:
                recorder.close()
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
    an = analyze(bag, robot="tsnake", progress=False)
    written = write_report(an, args.out)
    summary = an.summary
    rows: list[tuple[str, object]] = []
    for s in summary["segments"]:
        rows.append((f"{s['label']}: commanded v / omega", f"{s['v_cmd']:.3f} m/s / {s['omega_cmd']:.3f} rad/s"))
        rows.append((f"{s['label']}: achieved  v / omega", f"{_num(s['v']):.3f} m/s / {_num(s['omega']):.3f} rad/s"))
    rows += [("body centre: net displacement, m", summary.get("displacement_m", float("nan"))),
             ("body centre: path length, m", summary.get("distance_m", float("nan"))),
             ("head: path length, m", summary.get("head_path_length_m", float("nan"))),
             ("heading change, deg", summary.get("heading_change_deg", float("nan"))),
             ("bag", str(bag)), ("report", str(written["report"])), ("outputs", str(args.out))]
    print_table(rows, title="snake demo: T-Snake in the MuJoCo twin, gait node driven by scripted cmd_vel")
    return 0


def _num(x: object) -> float:
    return float(x) if isinstance(x, (int, float)) else float("nan")
