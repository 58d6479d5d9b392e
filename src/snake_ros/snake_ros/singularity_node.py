"""Singularity monitor: ``joint_states`` in, singularity margin and diagnostics out (002).

Thin wrapper around :mod:`snake_core.singularity`: maps the named lateral joints onto
the planar passive-wheel model of the robot YAML (``wheel_d``/``wheel_l`` per link),
evaluates the margin of the Jacobian J_s of Eq. (10) and the wheel axes' meeting
point (Theorem 4) with the fast path, at most ``max_rate`` times a second (every valid
joint state is checked; the first one after each period is evaluated), and publishes.

Topics:
    joint_states (sensor_msgs/JointState, in): joint angles by name, rad; relative
        angles phi_2..phi_n are the configured joints in head-to-tail order.
    slipping_links (std_msgs/Int32MultiArray, in): 1-based side-slipping links (lifted or
        wheel retracted), e.g. from a gait that lifts links; replaces the current set
        (the ``slipping_links`` parameter sets it too; the last one received wins).
    singularity_margin (std_msgs/Float64): sigma_2/sigma_1 of the normalised J_s, 0 at a
        singularity, on every evaluated joint state (at most ``max_rate``).
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
        in between, for a gait node to scale its speed near singularities; with each margin.

Bad joint states (missing joints, NaN, names and positions of different lengths)
are reported with a throttled warning and skipped, never fatal.

The passive-wheel model needs a robot with passive wheels: a robot YAML of another kind
(the T-Snake) with none of ``joints``, ``wheel_d``, ``wheel_l`` given makes the monitor say
once that it does not apply and stay quiet (no subscription, no output) until it exits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Int32MultiArray
from visualization_msgs.msg import Marker, MarkerArray

from snake_core.errors import SnakeCoreError
from snake_core.robot import load_robot
from snake_core.singularity import FastEvaluator, FastResult, geometry, make_params
from snake_core.singularity.fast import describe_fast, speed_scale
from snake_core.singularity.model import check_slipping
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled

_WARN_PERIOD_S = 2.0  # s, throttle of bad-input warnings


PARAMETERS = ParameterTable("singularity_monitor", [
    Param("robot", "wheeled_snake", "robot name in config/robots or a YAML path", read_only=True),
    Param("joints", [], "joints giving phi_2..phi_n head to tail (default: the planar robot's joints, else its "
          "lateral joints)", item=str, read_only=True),
    Param("wheel_d", [], "d_i per link, m (default: body.wheel_d of the robot YAML)", item=float, read_only=True),
    Param("wheel_l", [], "l_i per link, m (default: body.wheel_l of the robot YAML)", item=float, read_only=True),
    Param("slipping_links", [], "1-based side-slipping links (lifted or wheel retracted)", item=int),
    Param("warn_margin", 0.05, "margin at or below which diagnostics WARN", lo=0.0, hi=1.0),
    Param("error_margin", 0.01, "margin at or below which diagnostics ERROR", lo=0.0, hi=1.0),
    Param("publish_speed_scale", False, "publish gait_speed_scale in [0, 1]"),
    Param("max_rate", 20.0, "largest evaluation rate (singularity_margin, gait_speed_scale), Hz; joint states "
          "in between are checked, not evaluated", lo=0.1, hi=1000.0),
    Param("diagnostics_rate_hz", 10.0, "diagnostics and markers rate, Hz", lo=0.1, hi=100.0),
    Param("stale_after_s", 1.0, "s without a valid joint state before diagnostics go STALE", lo=0.01, hi=3600.0),
    Param("frame_id", "wheel_1", "frame of the markers: origin at the wheel of link 1, x along link 1 towards "
          "the tail"),
    Param("axis_half_length", 0.5, "half length of the drawn wheel axes, m", lo=0.0, hi=100.0),
], summary="Watches the shape of a snake with passive wheels for singular configurations (002); publishes "
           "singularity_margin, diagnostics and markers.")


def _check_margins(values: dict[str, object]) -> None:
    """Refuse an ``error_margin`` above ``warn_margin`` (ValueError naming both)."""
    warn, err = float(values["warn_margin"]), float(values["error_margin"])  # type: ignore[arg-type]
    if err > warn:
        raise ValueError(f"parameter error_margin ({err}) must not exceed warn_margin ({warn})")


class SingularityNode(StackNode):
    """Watches the snake's shape for singular configurations of its passive wheels."""

    def __init__(self) -> None:
        super().__init__("singularity_monitor")
        params = PARAMETERS.declare(self)
        _check_margins(params)
        robot = load_robot(params["robot"])
        self.robot_name = robot.name
        self.applies = (robot.kind == "planar_wheeled"
                        or any(params[name] for name in ("joints", "wheel_d", "wheel_l")))
        if not self.applies:
            self.get_logger().info(
                f"singularity monitor: robot {robot.name} ({robot.kind}) has no passive wheels, so the passive-wheel "
                "singularity does not apply; staying quiet (set robot to a planar_wheeled YAML to monitor one)")
            return
        joints = list(params["joints"])
        if not joints:
            joints = robot.joint_names if robot.kind == "planar_wheeled" else [
                j.name for j in robot.joints_of_type("lateral")]
        n = len(joints) + 1
        d = list(params["wheel_d"])
        ell = list(params["wheel_l"])
        if not d or not ell:
            if robot.kind != "planar_wheeled":
                raise SnakeCoreError(f"robot {robot.name}: no wheel_d/wheel_l in its YAML; set the wheel_d and "
                                     "wheel_l parameters")
            d, ell = list(robot.wheel_d), list(robot.wheel_l)
        self.params = make_params(n, d, ell)
        self.joint_names = joints
        self.robot_name = robot.name
        slipping = list(params["slipping_links"])
        self.evaluator = FastEvaluator(self.params, check_slipping(n, slipping))
        self._slipping = sorted(check_slipping(n, slipping))
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.pub_margin = self.create_publisher(Float64, "singularity_margin", STATUS_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.pub_markers = self.create_publisher(MarkerArray, "singularity_markers", STATUS_QOS)
        self.pub_scale = self.create_publisher(Float64, "gait_speed_scale", COMMAND_QOS)
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_QOS)
        self.create_subscription(Int32MultiArray, "slipping_links", self._on_slipping, COMMAND_QOS)
        self._index_cache: tuple[tuple[str, ...], list[int] | None] = ((), None)
        self._last: tuple[np.ndarray, FastResult] | None = None
        self._last_valid = -math.inf  # time.monotonic() of the last valid joint state, s
        self._last_eval = -math.inf  # time.monotonic() of the last evaluation, s
        self.bad_messages = 0
        self.create_timer(1.0 / float(params["diagnostics_rate_hz"]), self._publish_status)
        self.get_logger().info(
            f"singularity monitor on {robot.name}: {n} links, joints {', '.join(joints)}, slipping {self._slipping}")

    # ---------------------------------------------------------------- parameters
    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        reason = PARAMETERS.check(changes)
        if reason is None:
            try:
                _check_margins({name: changes.get(name, self.get_parameter(name).value)
                                for name in ("warn_margin", "error_margin")})
                if "slipping_links" in changes:
                    check_slipping(self.params.n, list(changes["slipping_links"] or []))
            except (SnakeCoreError, ValueError) as exc:
                reason = str(exc)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _apply_parameters(self, params: list[Parameter]) -> None:
        for p in params:
            if p.name == "slipping_links":
                self._set_slipping(list(p.value or []))

    def _set_slipping(self, links: Sequence[int]) -> None:
        slip = check_slipping(self.params.n, links)
        self.evaluator.set_slipping(slip)
        self._slipping = sorted(slip)
        self._last = None
        self._last_eval = -math.inf  # the next valid joint state is evaluated with the new set

    # ---------------------------------------------------------------- callbacks
    def _warn(self, text: str) -> None:
        self.bad_messages += 1
        log_throttled(self.get_logger(), f"{text} ({self.bad_messages} bad messages so far)", _WARN_PERIOD_S)

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
        now = time.monotonic()
        self._last_valid = now
        if now - self._last_eval < 1.0 / float(self.get_parameter("max_rate").value):
            return
        self._last_eval = now
        result = self.evaluator.evaluate(phi)
        self._last = (np.asarray(phi), result)
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


    def stop_safely(self) -> None:
        """Safe exit: a final STALE diagnostic, so that no tool keeps showing the last margin as live."""
        if not self.applies:
            return
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [DiagnosticStatus(level=DiagnosticStatus.STALE, name="singularity_monitor",
                                       hardware_id=self.robot_name, message="stopped: monitor exiting")]
        self.pub_diag.publish(arr)
        self.get_logger().info("singularity monitor stopped")


def main(args: list[str] | None = None) -> int:
    """Run the singularity monitor until shutdown."""
    return run_node(SingularityNode, args, on_exit=SingularityNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
