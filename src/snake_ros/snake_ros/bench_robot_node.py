"""The bench robot as a process: emulated servos on a pty with a body, and its motion capture.

Serves Protocol 2.0 on a pseudo-terminal (the ``link`` path; point the bridge's ``port``
at it, backend ``dynamixel``) with the servos attached to the bench robot's body
(:mod:`snake_hardware.emulator.body`, stepped in real time), and publishes the head's pose
as a lab's motion-capture driver does on ``mocap/head_pose`` (geometry_msgs/PoseStamped,
frame ``world``, stamped at capture time; remap it, e.g. to ``/vrpn_mocap/snake_head/pose``).
Every second ``diagnostics`` carries ``bench robot: real time`` (simulated seconds per wall
second, skips ahead, the physics' real-time factor), a WARN and a throttled warning as soon as
the body falls behind the wall clock.
The same robot runs from the command line: ``snake servo-emulator --body tsnake
--mocap-topic TOPIC``. See docs/hardware.md, "Rehearse on the bench robot".
"""

from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.logging import LoggingSeverity
from rclpy.node import Node
from rclpy.time import Time

from snake_hardware.emulator.body import BenchRobot, write_truth
from snake_hardware.emulator.mocap import MocapSystem
from snake_hardware.realtime import KeepingUp, apply_realtime, apply_realtime_to_process, scheduling
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled

MOCAP_FRAME = "world"
"""Frame of the published poses."""

REPORT_PERIOD_S = 1.0
"""s between the real-time reports on ``diagnostics``."""
_BEHIND_THROTTLE_S = 10.0  # s between repeated falling-behind warnings

PARAMETERS = ParameterTable("bench_robot", [
    Param("robot", "tsnake", "robot name in config/robots or a YAML path (kind tsnake)", read_only=True),
    Param("seed", 0, "seed of the robot's variation (servos, links, ground friction)", lo=0, read_only=True),
    Param("world", "", "world name in config/worlds or a YAML path, plane ground ('': flat)", read_only=True),
    Param("lifted", False, "hold the robot by its head, body hanging down (contacts off)", read_only=True),
    Param("link", "/tmp/snake_bench_robot", "symlink to the pty made at start (the bridge's port)", read_only=True),
    Param("truth", "", "write what was drawn to this YAML file at start ('': do not)", read_only=True),
    Param("rt_priority", 0, "SCHED_FIFO priority of every thread of the process: body, bus, node, DDS's (1-99; the "
          "robot's servos never wait for a busy computer); 0: the normal scheduler", lo=0, hi=99, read_only=True),
])
"""Parameters of ``bench_robot``."""


class MocapPublisher:
    """Publishes motion-capture samples as ``geometry_msgs/PoseStamped`` (a vrpn_mocap-like driver).

    Args:
        node: The node that owns the publisher.
        topic: Topic name.
    """

    def __init__(self, node: Node, topic: str) -> None:
        """Create the publisher."""
        self._pub = node.create_publisher(PoseStamped, topic, SENSOR_PUB_QOS)

    def deliver(self, stamp_s: float, position: np.ndarray, quaternion: np.ndarray) -> None:
        """Publish one sample stamped ``stamp_s`` (``time.time()`` seconds of the capture)."""
        msg = PoseStamped()
        msg.header.stamp = Time(nanoseconds=round(stamp_s * 1e9)).to_msg()
        msg.header.frame_id = MOCAP_FRAME
        p, q = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z = (float(v) for v in position)
        q.w, q.x, q.y, q.z = (float(v) for v in quaternion)
        self._pub.publish(msg)


class BenchRobotNode(StackNode):
    """The bench robot and its motion capture (see the module docstring)."""

    def __init__(self) -> None:
        """Build the robot, start its bus, body and mocap."""
        super().__init__("bench_robot")
        p = PARAMETERS.declare(self)
        self._publisher = MocapPublisher(self, "mocap/head_pose")
        self._mocap = MocapSystem(self._publisher.deliver, seed=p["seed"])
        self._bench = BenchRobot(p["robot"], seed=p["seed"], world=p["world"] or None, lifted=p["lifted"],
                                 link=p["link"], on_pose=self._mocap.offer)
        if p["truth"]:
            write_truth(p["truth"], self._bench)
        if p["rt_priority"] > 0:  # before the threads start: they inherit it
            for problem in apply_realtime(p["rt_priority"], []):
                self.get_logger().warning(problem)
            self.get_logger().info(f"body and bus: {scheduling()}")
        self._mocap.start()
        self._bench.start()
        if p["rt_priority"] > 0:   # and the threads started before (DDS's): a starved one stalls the others
            for problem in apply_realtime_to_process(p["rt_priority"]):
                self.get_logger().warning(problem)
        self._keeping_up = KeepingUp(time.monotonic())
        self._pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.create_timer(REPORT_PERIOD_S, self._report)
        self.get_logger().info(f"bench robot {self._bench.robot.name} (seed {p['seed']}) on {self._bench.port}")

    def _report(self) -> None:
        """``bench robot: real time`` on diagnostics; a warning (throttled) as soon as the body falls behind."""
        stats = self._bench.stats
        ratio, skips = self._keeping_up.report(time.monotonic(), stats.sim_time_s, stats.lag_events)
        st = DiagnosticStatus(name="bench robot: real time", hardware_id=f"bench robot {self._bench.robot.name}")
        if KeepingUp.behind(ratio, skips):
            st.level = DiagnosticStatus.WARN
            st.message = (f"behind real time: {ratio:.2f} simulated s per s, {skips} skips in the last "
                          f"{REPORT_PERIOD_S:g} s (a busy computer: the servos and the motion capture run slow)")
            log_throttled(self.get_logger(), st.message, _BEHIND_THROTTLE_S, LoggingSeverity.WARN)
        else:
            st.level, st.message = DiagnosticStatus.OK, "keeping up with real time"
        values = {"sim_per_wall": f"{ratio:.3f}", "skips": skips, "skips_total": stats.lag_events,
                  "sim_time_s": f"{stats.sim_time_s:.2f}", "realtime_factor": f"{stats.realtime_factor:.2f}"}
        st.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        msg = DiagnosticArray(status=[st])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._pub_diag.publish(msg)

    def stop_safely(self) -> None:
        """Stop the body, the bus and the motion capture."""
        self._bench.stop()
        self._mocap.stop()


def main(args: list[str] | None = None) -> int:
    """Run the bench robot until shutdown."""
    return run_node(BenchRobotNode, args, on_exit=BenchRobotNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
