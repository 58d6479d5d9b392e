"""``snake bench gait``: gait step time, and cmd_vel -> joint_commands latency over DDS."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.gait import make_gait
from snake_core.robot import load_robot
from snake_tools.cli import count
from snake_tools.output import print_json, print_table

_NODE_RATE_HZ = 200  # Hz; a Python node at 1 kHz starves its own executor on 2 busy cores


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snake bench gait``."""
    p = subparsers.add_parser("gait", help="gait step time (18-joint T-Snake) and DDS latency")
    p.add_argument("--steps", type=count, default=5000, help="gait steps to time")
    p.add_argument("--samples", type=count, default=300, help="cmd_vel -> joint_commands round trips")
    p.add_argument("--no-dds", action="store_true", help="skip the DDS latency part")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def step_times(steps: int) -> np.ndarray:
    """Wall time of each rolling-vector gait step on the T-Snake (turning, so resets happen), s."""
    gait = make_gait("rolling", load_robot("tsnake"))
    command = (1.0, 3.0, 0.5)
    for _ in range(200):  # warm-up
        gait.step(CONTROL_PERIOD_S, command)
    out = np.empty(steps)
    for k in range(steps):
        t0 = time.perf_counter()
        gait.step(CONTROL_PERIOD_S, command)
        out[k] = time.perf_counter() - t0
    return out


def dds_latency(samples: int) -> np.ndarray:
    """cmd_vel publish -> first joint_commands computed from it, s (real gait node process).

    The gait node runs at ``_NODE_RATE_HZ``; the latency includes the wait for its next
    tick (up to one period), as a teleop user would see it. Each sample sends a new
    linear.x and waits for the gait state (published with the joint_commands of the
    same tick) that shows it.
    """
    import rclpy
    from diagnostic_msgs.msg import DiagnosticStatus
    from geometry_msgs.msg import TwistStamped
    from sensor_msgs.msg import JointState

    from snake_ros.qos import COMMAND_QOS, STATUS_QOS

    env = os.environ.copy()
    env.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    exe = shutil.which("gait_node") or os.path.join(os.path.dirname(sys.executable), "gait_node")
    proc = subprocess.Popen(
        [exe, "--ros-args", "-p", f"rate_hz:={_NODE_RATE_HZ}", "-p", "max_linear_accel:=100.0",
         "-p", "cmd_timeout:=5.0"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latencies: list[float] = []
    try:
        with rclpy.init():
            node = rclpy.create_node("bench_gait_latency")
            pub = node.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
            state: dict[str, float] = {"v": -1.0, "got": 0.0}  # v: last reported linear speed, m/s

            def on_state(msg: DiagnosticStatus) -> None:
                for kv in msg.values:
                    if kv.key == "v":
                        state["v"] = float(kv.value)

            def on_cmd(_msg: JointState) -> None:
                state["got"] = time.perf_counter()

            node.create_subscription(DiagnosticStatus, "gait_state", on_state, STATUS_QOS)
            node.create_subscription(JointState, "joint_commands", on_cmd, COMMAND_QOS)
            deadline = time.monotonic() + 30
            while (pub.get_subscription_count() == 0 or state["got"] == 0.0) and time.monotonic() < deadline:
                rclpy.spin_once(node, timeout_sec=0.05)
            for i in range(samples):
                v = 0.01 + 0.0001 * (i % 50)
                msg = TwistStamped()
                msg.twist.linear.x = v
                t0 = time.perf_counter()
                pub.publish(msg)
                # The state with this v and the joint_commands of the same tick arrive together.
                end = time.monotonic() + 2.0
                while abs(state["v"] - v) > 1e-9 and time.monotonic() < end:
                    rclpy.spin_once(node, timeout_sec=0.001)
                if abs(state["v"] - v) <= 1e-9:
                    latencies.append(time.perf_counter() - t0)
            node.destroy_node()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return np.asarray(latencies)


def run(args: argparse.Namespace) -> int:
    """Time the gait step and, unless ``--no-dds``, the DDS round trip."""
    st = step_times(args.steps) * 1e6
    result: dict[str, object] = {
        "robot": "tsnake",
        "joints": 18,
        "step_us_median": float(np.median(st)),
        "step_us_p99": float(np.percentile(st, 99)),
        "step_us_goal_median": 100.0,
    }
    if not args.no_dds:
        lat = dds_latency(args.samples) * 1e3
        result.update({
            "dds_samples": int(lat.size),
            "dds_node_rate_hz": _NODE_RATE_HZ,
            "dds_latency_ms_p50": float(np.median(lat)) if lat.size else None,
            "dds_latency_ms_p99": float(np.percentile(lat, 99)) if lat.size else None,
        })
    if args.json:
        print_json(result)
    else:
        print_table(list(result.items()), title="snake bench gait")
    return 0
