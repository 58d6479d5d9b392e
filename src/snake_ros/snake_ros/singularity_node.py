"""Singularity monitor: ``joint_states`` in, singularity margin and diagnostics out (002).

Thin wrapper around :mod:`snake_core.singularity`: maps the named lateral joints onto
the planar passive-wheel model of the robot YAML (``wheel_d``/``wheel_l`` per link),
evaluates the margin of the Jacobian J_s of Eq. (10) and the wheel axes' meeting
point (Theorem 4) on every joint state with the fast path, and publishes.

Topics:
    joint_states (sensor_msgs/JointState, in): joint angles by name, rad; relative
        angles phi_2..phi_n are the configured joints in head-to-tail order.
    slipping_links (std_msgs/Int32MultiArray, in): 1-based side-slipping links (lifted or
        wheel retracted), e.g. from a gait that lifts links; replaces the current set
        (the ``slipping_links`` parameter sets it too; the last one received wins).
    singularity_margin (std_msgs/Float64): sigma_2/sigma_1 of the normalised J_s, 0 at a
        singularity, on every valid joint state.
    diagnostics (diagnostic_msgs/DiagnosticArray): OK above ``warn_margin``, WARN at or
        below it, ERROR at or below ``error_margin``; with the margin, the meeting
        point and the nearest-singularity description; at ``diagnostics_rate_hz``.
        STALE when no valid joint state arrived within ``stale_after_s`` (wall-clock
        seconds; messages with missing joints or NaN positions are not valid), with
        the age and the last margin, never a repeated OK.
    singularity_markers (visualization_msgs/MarkerArray): each non side-slipping
        wheel axis as a line (in ``frame_id``, the first link's wheel frame), and the
        meeting point as a sphere while the margin is at or below ``warn_margin``.
    gait_speed_scale (std_msgs/Float64, only with ``publish_speed_scale:=true``): in
        [0, 1], 0 at or below ``error_margin``, 1 at or above ``warn_margin``, linear
        in between, for a gait node to scale its speed near singularities.

Bad joint states (missing joints, NaN, names and positions of different lengths)
are reported with a throttled warning and skipped, never fatal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor, SetParametersResult
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Int32MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from snake_core.errors import SnakeCoreError
from snake_core.robot import load_robot
from snake_core.singularity import FastEvaluator, FastResult, geometry, make_params
from snake_core.singularity.fast import describe_fast, speed_scale
from snake_core.singularity.model import check_slipping
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node

_WARN_PERIOD_S = 2.0  # s, throttle of bad-input warnings


def _float_desc(text: str, lo: float, hi: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=text, floating_point_range=[FloatingPointRange(from_value=lo, to_value=hi, step=0.0)])


class SingularityNode(Node):
    """Watches the snake's shape for singular configurations of its passive wheels."""

    def __init__(self) -> None:
        super().__init__("singularity_monitor")
        self.declare_parameter("robot", "wheeled_snake", ParameterDescriptor(
            description="robot name in config/robots or a YAML path", read_only=True))
        self.declare_parameter("joints", Parameter.Type.STRING_ARRAY, ParameterDescriptor(
            description="joints giving phi_2..phi_n head to tail (default: the planar robot's joints, "
                        "else its lateral joints)", read_only=True))
        self.declare_parameter("wheel_d", Parameter.Type.DOUBLE_ARRAY, ParameterDescriptor(
            description="d_i per link, m (default: body.wheel_d of the robot YAML)", read_only=True))
        self.declare_parameter("wheel_l", Parameter.Type.DOUBLE_ARRAY, ParameterDescriptor(
            description="l_i per link, m (default: body.wheel_l of the robot YAML)", read_only=True))
        self.declare_parameter("slipping_links", Parameter.Type.INTEGER_ARRAY, ParameterDescriptor(
            description="1-based side-slipping links (lifted or wheel retracted)"))
        self.declare_parameter("warn_margin", 0.05, _float_desc("margin at or below which diagnostics WARN", 0.0, 1.0))
        self.declare_parameter("error_margin", 0.01, _float_desc("margin at or below which diagnostics ERROR",
                                                                 0.0, 1.0))
        self.declare_parameter("publish_speed_scale", False, ParameterDescriptor(
            description="publish gait_speed_scale in [0, 1] (off by default)"))
        self.declare_parameter("diagnostics_rate_hz", 10.0, _float_desc("diagnostics and markers rate, Hz",
                                                                        0.1, 100.0))
        self.declare_parameter("stale_after_s", 1.0, _float_desc(
            "s without a valid joint state before diagnostics go STALE", 0.01, 3600.0))
        self.declare_parameter("frame_id", "wheel_1", ParameterDescriptor(
            description="frame of the markers: origin at the wheel of link 1, x along link 1 towards the tail"))
        self.declare_parameter("axis_half_length", 0.5, _float_desc("half length of the drawn wheel axes, m",
                                                                    0.0, 100.0))

        robot = load_robot(self.get_parameter("robot").value)
        joints = self._array_param("joints")
        if not joints:
            joints = robot.joint_names if robot.kind == "planar_wheeled" else [
                j.name for j in robot.joints_of_type("lateral")]
        n = len(joints) + 1
        d = self._array_param("wheel_d")
        ell = self._array_param("wheel_l")
        if not d or not ell:
            if robot.kind != "planar_wheeled":
                raise SnakeCoreError(f"robot {robot.name}: no wheel_d/wheel_l in its YAML; set the wheel_d and "
                                     "wheel_l parameters")
            d, ell = list(robot.wheel_d), list(robot.wheel_l)
        self.params = make_params(n, d, ell)
        self.joint_names = joints
        self.robot_name = robot.name
        slipping = self._array_param("slipping_links")
        self.evaluator = FastEvaluator(self.params, check_slipping(n, slipping))
        self._slipping = sorted(check_slipping(n, slipping))
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.pub_margin = self.create_publisher(Float64, "singularity_margin", STATUS_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.pub_markers = self.create_publisher(MarkerArray, "singularity_markers", STATUS_QOS)
        self.pub_scale = self.create_publisher(Float64, "gait_speed_scale", COMMAND_QOS)
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_QOS)
        self.create_subscription(Int32MultiArray, "slipping_links", self._on_slipping, COMMAND_QOS)
        self._index_cache: tuple[tuple[str, ...], list[int] | None] = ((), None)
        self._last: tuple[np.ndarray, FastResult] | None = None
        self._last_valid = -math.inf  # time.monotonic() of the last valid joint state, s
        self._last_warn = -math.inf
        self.bad_messages = 0
        self.create_timer(1.0 / float(self.get_parameter("diagnostics_rate_hz").value), self._publish_status)
        self.get_logger().info(
            f"singularity monitor on {robot.name}: {n} links, joints {', '.join(joints)}, slipping {self._slipping}")

    # ---------------------------------------------------------------- parameters
    def _array_param(self, name: str) -> list:
        """An array parameter declared without default: [] when not given."""
        try:
            return list(self.get_parameter(name).value or [])
        except ParameterUninitializedException:
            return []

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        warn = float(changes.get("warn_margin", self.get_parameter("warn_margin").value))
        err = float(changes.get("error_margin", self.get_parameter("error_margin").value))
        if err > warn:
            return SetParametersResult(successful=False,
                                       reason=f"error_margin ({err}) must not exceed warn_margin ({warn})")
        if "slipping_links" in changes:
            try:
                self._set_slipping(list(changes["slipping_links"] or []))
            except (SnakeCoreError, TypeError, ValueError) as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _set_slipping(self, links: Sequence[int]) -> None:
        slip = check_slipping(self.params.n, links)
        self.evaluator.set_slipping(slip)
        self._slipping = sorted(slip)
        self._last = None

    # ---------------------------------------------------------------- callbacks
    def _warn(self, text: str) -> None:
        self.bad_messages += 1
        now = self.get_clock().now().nanoseconds * 1e-9
        if now - self._last_warn >= _WARN_PERIOD_S:
            self._last_warn = now
            self.get_logger().warning(f"{text} ({self.bad_messages} bad messages so far)")

    def _on_slipping(self, msg: Int32MultiArray) -> None:
        try:
            self._set_slipping(list(msg.data))
        except (SnakeCoreError, ValueError) as exc:
            self._warn(f"slipping_links ignored: {exc}")

    def _indices(self, names: Sequence[str]) -> list[int] | None:
        key = tuple(names)
        if key != self._index_cache[0]:
            lookup = {name: k for k, name in enumerate(names)}
            idx = [lookup.get(j, -1) for j in self.joint_names]
            self._index_cache = (key, None if min(idx, default=0) < 0 else idx)
        return self._index_cache[1]

    def _on_joint_states(self, msg: JointState) -> None:
        if len(msg.position) != len(msg.name):
            self._warn(f"joint_states ignored: {len(msg.name)} names but {len(msg.position)} positions")
            return
        idx = self._indices(msg.name)
        if idx is None:
            missing = [j for j in self.joint_names if j not in set(msg.name)]
            self._warn(f"joint_states ignored: missing joints {missing}")
            return
        phi = [msg.position[k] for k in idx]
        if not all(math.isfinite(x) for x in phi):
            self._warn("joint_states ignored: non-finite joint position")
            return
        result = self.evaluator.evaluate(phi)
        self._last = (np.asarray(phi), result)
        self._last_valid = time.monotonic()
        self.pub_margin.publish(Float64(data=float(result.margin)))
        if self.get_parameter("publish_speed_scale").value:
            scale = speed_scale(result.margin, float(self.get_parameter("warn_margin").value),
                                float(self.get_parameter("error_margin").value))
            self.pub_scale.publish(Float64(data=scale))

    # ---------------------------------------------------------------- outputs
    def _publish_status(self) -> None:
        status = DiagnosticStatus(name="singularity_monitor", hardware_id=self.robot_name)
        warn = float(self.get_parameter("warn_margin").value)
        err = float(self.get_parameter("error_margin").value)
        age = time.monotonic() - self._last_valid
        stale_after = float(self.get_parameter("stale_after_s").value)
        if self._last is None:
            status.level = DiagnosticStatus.STALE
            status.message = "no valid joint_states yet"
            status.values = [KeyValue(key="bad_messages", value=str(self.bad_messages))]
        elif age > stale_after:
            status.level = DiagnosticStatus.STALE
            status.message = f"no valid joint_states for {age:.1f} s (stale_after_s {stale_after:g})"
            values = {"age_s": f"{age:.3f}", "last_margin": f"{self._last[1].margin:.6g}",
                      "bad_messages": str(self.bad_messages)}
            status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        else:
            phi, res = self._last
            status.level = (DiagnosticStatus.ERROR if res.margin <= err else
                            DiagnosticStatus.WARN if res.margin <= warn else DiagnosticStatus.OK)
            status.message = describe_fast(res, self.evaluator.n_grounded)
            values = {"margin": f"{res.margin:.6g}", "sigma_min": f"{res.sigma_min:.6g}",
                      "sigma_max": f"{res.sigma_max:.6g}", "parallel": str(res.parallel).lower(),
                      "meeting_x": f"{res.meeting_x:.6g}", "meeting_y": f"{res.meeting_y:.6g}",
                      "slipping_links": " ".join(map(str, self._slipping)),
                      "bad_messages": str(self.bad_messages)}
            status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
            self.pub_markers.publish(self._markers(phi, res, res.margin <= warn))
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [status]
        self.pub_diag.publish(arr)

    def _markers(self, phi: np.ndarray, res: FastResult, near: bool) -> MarkerArray:
        frame = str(self.get_parameter("frame_id").value)
        half = float(self.get_parameter("axis_half_length").value)
        stamp = self.get_clock().now().to_msg()
        geo = geometry(self.params, phi)
        axes = Marker(ns="wheel_axes", id=0, type=Marker.LINE_LIST, action=Marker.ADD)
        axes.header.frame_id = frame
        axes.header.stamp = stamp
        axes.scale.x = 0.004
        axes.color.r, axes.color.g, axes.color.b, axes.color.a = (1.0, 0.3, 0.1, 1.0) if near else (0.2, 0.6, 1.0, 0.8)
        axes.pose.orientation.w = 1.0
        slipping = set(self._slipping)
        for i in range(self.params.n):
            if (i + 1) in slipping:
                continue
            nx, ny = -math.sin(geo.theta[i]), math.cos(geo.theta[i])
            px, py = geo.wheels[i]
            axes.points.append(Point(x=float(px - half * nx), y=float(py - half * ny), z=0.0))
            axes.points.append(Point(x=float(px + half * nx), y=float(py + half * ny), z=0.0))
        point = Marker(ns="meeting_point", id=1, type=Marker.SPHERE)
        point.header.frame_id = frame
        point.header.stamp = stamp
        point.pose.orientation.w = 1.0
        if near and math.isfinite(res.meeting_x):
            point.action = Marker.ADD
            point.pose.position.x, point.pose.position.y = float(res.meeting_x), float(res.meeting_y)
            point.scale.x = point.scale.y = point.scale.z = 0.03
            point.color.r, point.color.a = 1.0, 1.0
        else:
            point.action = Marker.DELETE
        return MarkerArray(markers=[axes, point])


def main(args: list[str] | None = None) -> int:
    """Run the singularity monitor until shutdown."""
    return run_node(SingularityNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
