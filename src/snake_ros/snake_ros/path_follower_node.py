"""Path follower node: plan + motion-capture head pose in, head-angle command out (001 Sec. IV, Eq. 11).

Thin wrapper around :mod:`snake_core.following.follower` and :mod:`snake_core.following.head_pose`: the head pose comes
from a rigid body or from three markers fitted to the head's marker template, goes through the
outlier / dropout filter, and the line-of-sight PD law turns it into a command at ``rate_hz``.

Topics:
    plan (nav_msgs/Path, in, latched): the path to follow; an empty path stops the robot.
    mocap/head_pose (geometry_msgs/PoseStamped, in): rigid-body head pose (vrpn_mocap convention).
    mocap/markers (geometry_msgs/PoseArray, in): positions of the head markers, in the order of
        ``marker_template``.
    cmd_vel (geometry_msgs/TwistStamped, out; ``output`` cmd_vel or both): the T-Snake's reduced
        differential drive: angular from the PD, linear scheduled down with |Delta-theta|. Zero
        on dropout, at the goal, when stuck or stalled and when the plan is empty.
    head_offset (std_msgs/Float64, out; ``output`` head_offset or both): head-angle offset for the
        serpenoid gait, rad (it travels along the body); 0 when not following.
    follower_status (diagnostic_msgs/DiagnosticStatus, out): state (message), Delta-theta, command,
        branch, cross-track error, target, mocap counters; ``stalled`` (WARN) with ``stop_reason``
        when the robot made no progress along the path for ``stall_time`` or over ``stall_distance``.
    diagnostics (diagnostic_msgs/DiagnosticArray, out, ``diagnostics_rate_hz``): the same entry, named
        ``<node>: path following``, for the diagnostic aggregator and rqt_robot_monitor.
    blocked_branch (nav_msgs/Path, out): the branch (two poses) the robot got stuck or stalled on.
    /tf (tf2_msgs/TFMessage, out, ``publish_tf``): ``world_frame -> base_frame`` from the measured head
        pose, where tf2_msgs is installed (:mod:`snake_ros.transforms`).

With ``robot`` set, the robot YAML's ``following:`` presets give ``output``, ``yaw_offset``,
``reference_offset``, the follower's gains and ``marker_template`` (the markers the twin carries
too), unless a params file or ``-p`` gives them. The
tracked point is ``reference_offset`` along the head frame's x axis
(:func:`snake_core.following.loop.reference_pose`); with ``mocap_y_up`` poses and markers are
taken from a y-up capture frame to the z-up world (:func:`snake_core.frames.y_up_to_z_up`).

With ``replan_on_stuck`` the node then calls the planner's ``replan`` service (std_srvs/Trigger),
the backtrack-and-replan step of the paper's flow chart, and logs its answer (the new plan, or
the planner's reason for refusing). The log says "goal reached" once per plan, with the time since
the plan arrived and the position.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseArray, PoseStamped, TwistStamped
from nav_msgs.msg import Path
from rcl_interfaces.msg import SetParametersResult
from rclpy.client import Client
from rclpy.clock import Clock, ClockType
from rclpy.parameter import Parameter
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from snake_core.following.follower import FollowerConfig, FollowerError, FollowerOutput, FollowerStatus, PathFollower
from snake_core.following.head_pose import (
    HeadPoseFilter,
    HeadPoseFilterConfig,
    MocapError,
    fit_markers,
    pose_from_rigid_body,
)
from snake_core.following.loop import reference_pose
from snake_core.frames import FrameError, pose_to_transform, y_up_to_z_up
from snake_core.robot import load_robot
from snake_ros.following import apply_robot_presets, follower_presets, subscribe_latched
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import COMMAND_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.transforms import TfPublisher, mocap_pose, path_msg

_OUTPUTS = ("cmd_vel", "head_offset", "both")
# Marker template without a robot: the wheeled snake's triangle on the head, m, head frame (x along the head link).
_DEFAULT_TEMPLATE = [0.024, 0.0, 0.0, 0.096, 0.014, 0.0, 0.096, -0.014, 0.0]
_FOLLOWER = FollowerConfig()  # the defaults live in the core's dataclasses
_FILTER = HeadPoseFilterConfig()
# Follower and mocap-filter parameters: name -> (default from the core, description, low, high).
_FOLLOWER_PARAMS = {
    "lookahead": (_FOLLOWER.lookahead, "line-of-sight circle radius R, m", 1e-3, 100.0),
    "kp": (_FOLLOWER.kp, "P of Eq. 11 (rad/rad; 1/s for cmd_vel)", 0.0, 100.0),
    "kd": (_FOLLOWER.kd, "D of Eq. 11, s", 0.0, 100.0),
    "derivative_tau": (_FOLLOWER.derivative_tau, "derivative low-pass time constant, s", 0.0, 10.0),
    "angle_tau": (_FOLLOWER.angle_tau, "Delta-theta low-pass time constant, s (0: off)", 0.0, 10.0),
    "switch_radius": (_FOLLOWER.switch_radius, "distance to a branch end that switches to the next branch, m",
                      1e-3, 100.0),
    "goal_tolerance": (_FOLLOWER.goal_tolerance, "distance to the goal that counts as arrived, m", 1e-3, 100.0),
    "stuck_speed": (_FOLLOWER.stuck_speed, "speed below which the robot counts as not moving, m/s", 0.0, 10.0),
    "stuck_time": (_FOLLOWER.stuck_time, "time below stuck_speed before reporting stuck, s", 1e-3, 600.0),
    "stall_time": (_FOLLOWER.stall_time, "time without stall_progress along the path before reporting stalled, s",
                   1e-3, 3600.0),
    "stall_progress": (_FOLLOWER.stall_progress, "progress along the path that resets the stall window, m",
                       1e-4, 100.0),
    "stall_distance": (_FOLLOWER.stall_distance, "distance travelled without progress before reporting stalled "
                       "(orbiting), m (0: off)", 0.0, 1000.0),
    "offset_max": (_FOLLOWER.offset_max, "largest |head offset|, rad", 1e-3, 3.0),
    "max_linear": (_FOLLOWER.max_linear, "T-Snake linear speed, m/s", 1e-3, 5.0),
    "max_angular": (_FOLLOWER.max_angular, "T-Snake |yaw rate| limit, rad/s", 1e-3, 10.0),
    "slowdown_angle": (_FOLLOWER.slowdown_angle, "|Delta-theta| at which linear speed reaches zero, rad",
                       1e-3, 3.2),
}
_FILTER_PARAMS = {  # node parameter -> (HeadPoseFilterConfig field, description, low, high)
    "max_speed": ("max_speed", "mocap: largest believable head speed, m/s", 1e-3, 100.0),
    "max_yaw_rate": ("max_yaw_rate", "mocap: largest believable yaw rate, rad/s", 1e-3, 1000.0),
    "pose_timeout": ("timeout", "mocap: dropout longer than this stops the robot, s", 1e-3, 60.0),
    "max_marker_rms": ("max_rms", "mocap: largest marker-fit residual, m", 1e-5, 1.0),
}

PARAMETERS = ParameterTable("path_follower", [
    Param("robot", "", "robot name in config/robots or a YAML path whose following: presets set output, "
          "yaw_offset, reference_offset and the gains not given otherwise ('': none)", read_only=True),
    Param("output", "cmd_vel", "what to command", choices=_OUTPUTS),
    Param("rate_hz", 20, "control rate, Hz", lo=1, hi=500, read_only=True),
    Param("yaw_offset", math.pi, "added to the mocap yaw to get the head's forward direction, rad (pi: head "
          "frame x points to the tail, the URDF convention)", lo=-math.pi, hi=math.pi),
    Param("reference_offset", 0.0, "tracked point along the head frame's x axis from its origin, m (T-Snake: "
          "the drive's centre)", lo=-10.0, hi=10.0),
    Param("mocap_y_up", False, "motion capture streams a y-up frame (OptiTrack's default): turn it to z-up"),
    Param("publish_tf", True, "publish world_frame -> base_frame on /tf from the measured head pose (needs "
          "tf2_msgs)", read_only=True),
    Param("world_frame", "world", "fixed frame of the plan and the motion capture", read_only=True),
    Param("base_frame", "head", "the robot model's root link (the mocap rigid body's frame)", read_only=True),
    Param("diagnostics_rate_hz", 1.0, "rate of the follower's entry on /diagnostics, Hz (wall clock)", lo=0.1,
          hi=50.0, read_only=True),
    Param("marker_template", _DEFAULT_TEMPLATE, "head markers in the head frame, m, flattened "
          "[x0 y0 z0 x1 y1 z1 x2 y2 z2] (default: the robot's following.marker_template, else the wheeled "
          "snake's)"),
    Param("replan_on_stuck", True, "call the planner's replan service when stuck"),
    *(Param(name, default, text, lo=lo, hi=hi) for name, (default, text, lo, hi) in _FOLLOWER_PARAMS.items()),
    *(Param(name, float(getattr(_FILTER, fld)), text, lo=lo, hi=hi)
      for name, (fld, text, lo, hi) in _FILTER_PARAMS.items()),
], summary="Steers the head along the plan from motion-capture poses (001 Eq. 11); publishes cmd_vel or "
           "head_offset.")


class PathFollowerNode(StackNode):
    """Steers the head along the plan from motion-capture poses."""

    def __init__(self) -> None:
        super().__init__("path_follower")
        params = PARAMETERS.declare(self)
        if params["robot"]:
            presets = apply_robot_presets(self, follower_presets(load_robot(params["robot"]).following_presets))
            params.update(presets)
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.follower = PathFollower(self._follower_config({}))
        self.filter = HeadPoseFilter(self._filter_config({}))
        self.template = self._template(params["marker_template"])
        self._last_status: FollowerStatus | None = None
        self._last_out: FollowerOutput | None = None
        self._last_status_msg: DiagnosticStatus | None = None
        self._plan_time = 0.0  # s, when the plan being followed arrived
        self.bad_messages = 0

        self.pub_cmd = self.create_publisher(TwistStamped, "cmd_vel", COMMAND_QOS)
        self.pub_offset = self.create_publisher(Float64, "head_offset", COMMAND_QOS)
        self.pub_status = self.create_publisher(DiagnosticStatus, "follower_status", STATUS_QOS)
        self.pub_blocked = self.create_publisher(Path, "blocked_branch", COMMAND_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.tf = TfPublisher(self) if params["publish_tf"] else None
        self.replan_client: Client[Trigger.Request, Trigger.Response] = self.create_client(Trigger, "replan")
        subscribe_latched(self, Path, "plan", self._on_plan)
        self.create_subscription(PoseStamped, "mocap/head_pose", self._on_pose, SENSOR_QOS)
        self.create_subscription(PoseArray, "mocap/markers", self._on_markers, SENSOR_QOS)
        self.create_timer(1.0 / int(params["rate_hz"]), self._tick)
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # runs on simulated time before the first /clock too
        self.create_timer(1.0 / float(params["diagnostics_rate_hz"]), self._publish_diagnostics, clock=steady)
        self.get_logger().info(f"path follower{' for ' + params['robot'] if params['robot'] else ''}: output "
                               f"{self.get_parameter('output').value}, reference offset "
                               f"{self.get_parameter('reference_offset').value:g} m")

    # ---------------------------------------------------------------- parameters
    def _value(self, changes: dict[str, Any], name: str) -> Any:
        return changes[name] if name in changes else self.get_parameter(name).value

    def _follower_config(self, changes: dict[str, Any]) -> FollowerConfig:
        return FollowerConfig(**{k: float(self._value(changes, k)) for k in _FOLLOWER_PARAMS})

    def _filter_config(self, changes: dict[str, Any]) -> HeadPoseFilterConfig:
        return HeadPoseFilterConfig(**{fld: float(self._value(changes, name))
                               for name, (fld, *_rest) in _FILTER_PARAMS.items()})

    @staticmethod
    def _template(values: list[float]) -> np.ndarray:
        v = np.asarray(list(values), dtype=float)
        if v.size < 9 or v.size % 3 or not np.isfinite(v).all():
            raise MocapError(f"marker_template: need 3 x K >= 9 finite numbers, got {v.size}")
        return v.reshape(-1, 3)

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        reason = PARAMETERS.check(changes)
        if reason is None:
            try:
                self._follower_config(changes)
                self._filter_config(changes)
                if "marker_template" in changes:
                    self._template(changes["marker_template"])
            except (FollowerError, MocapError) as exc:
                reason = str(exc)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _apply_parameters(self, params: list[Parameter]) -> None:
        names = {p.name for p in params}
        self.follower.config = self._follower_config({})
        self.filter.config = self._filter_config({})
        if "marker_template" in names:
            self.template = self._template(self.get_parameter("marker_template").value)

    # ---------------------------------------------------------------- inputs
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_plan(self, msg: Path) -> None:
        pts = np.array([[p.pose.position.x, p.pose.position.y] for p in msg.poses]).reshape(-1, 2)
        if len(pts) < 2:
            self.follower = PathFollower(self.follower.config)  # idle: empty plan means stop
            self.publish_stop()
            self.get_logger().info("empty plan: stopped")
            return
        try:
            self.follower.set_path(pts)
        except FollowerError as exc:
            self.get_logger().warning(f"plan ignored: {exc}")
            return
        self._plan_time = self._now()
        self.get_logger().info(f"following a plan of {len(pts)} waypoints")

    def _on_pose(self, msg: PoseStamped) -> None:
        position, quat = mocap_pose(msg, bool(self.get_parameter("mocap_y_up").value))
        try:
            x, y, yaw = pose_from_rigid_body(position, quat)
        except MocapError:
            self.filter.rejected_nan += 1
            return
        if self.filter.offer(self._now(), (x, y, yaw + float(self.get_parameter("yaw_offset").value))):
            self._send_tf(msg, lambda stamp: pose_to_transform(self._world, self._base, stamp, position, quat))

    def _on_markers(self, msg: PoseArray) -> None:
        pts = np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses]).reshape(-1, 3)
        if pts.shape != self.template.shape:
            self.bad_messages += 1
            return
        if self.get_parameter("mocap_y_up").value:
            pts = y_up_to_z_up(pts)[0]
        yaw_offset = float(self.get_parameter("yaw_offset").value)
        if self.filter.offer_markers(self._now(), self.template, pts, yaw_offset):
            def transform(stamp: int) -> Any:
                fit = fit_markers(self.template, pts)
                q = fit.rotation.as_quat()  # (x, y, z, w)
                return pose_to_transform(self._world, self._base, stamp, fit.translation, q)

            self._send_tf(msg, transform)

    @property
    def _world(self) -> str:
        return str(self.get_parameter("world_frame").value)

    @property
    def _base(self) -> str:
        return str(self.get_parameter("base_frame").value)

    def _send_tf(self, msg: Any, transform: Any) -> None:
        """``world_frame -> base_frame`` at the measurement's stamp (an accepted pose only)."""
        if self.tf is None or not self.tf.enabled:
            return
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        try:
            self.tf.send(transform(stamp or self.get_clock().now().nanoseconds))
        except (FrameError, MocapError):
            return

    def _tracked(self, now: float) -> tuple[float, float, float] | None:
        """The filtered pose of the tracked point (``reference_offset`` along the head's x axis)."""
        pose = self.filter.current(now)
        if pose is None:
            return None
        return reference_pose(pose, float(self.get_parameter("yaw_offset").value),
                              float(self.get_parameter("reference_offset").value))

    # ---------------------------------------------------------------- control
    def publish_stop(self) -> None:
        """Command the robot to stop (zero cmd_vel and/or zero head offset, per ``output``)."""
        out = str(self.get_parameter("output").value)
        if out in ("cmd_vel", "both"):
            msg = TwistStamped()
            msg.header.stamp = self.get_clock().now().to_msg()
            self.pub_cmd.publish(msg)
        if out in ("head_offset", "both"):
            self.pub_offset.publish(Float64(data=0.0))

    def _tick(self) -> None:
        now = self._now()
        out = self.follower.update(now, self._tracked(now))
        self._last_out = out
        active = out.status in (FollowerStatus.FOLLOWING, FollowerStatus.NO_POSE)
        if active or out.status != self._last_status:
            mode = str(self.get_parameter("output").value)
            if mode in ("cmd_vel", "both"):
                msg = TwistStamped()
                msg.header.stamp = self.get_clock().now().to_msg()
                msg.twist.linear.x, msg.twist.angular.z = out.linear, out.angular
                self.pub_cmd.publish(msg)
            if mode in ("head_offset", "both"):
                self.pub_offset.publish(Float64(data=out.head_offset))
        if out.status in (FollowerStatus.STUCK, FollowerStatus.STALLED) and out.status != self._last_status:
            self._on_stuck(out.status)
        if out.status is FollowerStatus.GOAL_REACHED and self._last_status is not FollowerStatus.GOAL_REACHED:
            pose = self._tracked(now)
            where = f" at ({pose[0]:.3f}, {pose[1]:.3f}) m" if pose is not None else ""
            self.get_logger().info(f"goal reached{where} after {now - self._plan_time:.1f} s")
        self._last_status = out.status
        self._publish_status()

    def _on_stuck(self, status: FollowerStatus) -> None:
        branch = self.follower.blocked_branch
        if branch is None:
            return
        self.pub_blocked.publish(path_msg(branch, self._world, self.get_clock().now().to_msg()))
        self.get_logger().warning(f"{status.value} on branch {branch[0].round(3)} -> {branch[1].round(3)}: "
                                  f"{self.follower.stop_reason}; zero command sent")
        if not bool(self.get_parameter("replan_on_stuck").value):
            self.get_logger().warning("not replanning (replan_on_stuck is false): send a new goal")
        elif not self.replan_client.service_is_ready():
            self.get_logger().warning("cannot replan: no planner offers the replan service")
        else:
            self.get_logger().info("replan requested")
            self.replan_client.call_async(Trigger.Request()).add_done_callback(self._on_replan_done)

    def _on_replan_done(self, future: Any) -> None:
        resp = future.result()
        if resp is None:
            return
        if resp.success:
            self.get_logger().info(f"replanned: {resp.message}")
        else:
            self.get_logger().error(f"replan refused: {resp.message}; the robot stays stopped")

    def _publish_diagnostics(self) -> None:
        """The follower's entry on /diagnostics (for the aggregator and rqt_robot_monitor)."""
        last = self._last_status_msg or DiagnosticStatus(level=DiagnosticStatus.STALE, message="no tick yet")
        entry = DiagnosticStatus(level=last.level, name=f"{self.get_name()}: path following", message=last.message,
                                 hardware_id=str(self.get_parameter("robot").value), values=last.values)
        arr = DiagnosticArray(status=[entry])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)

    def _publish_status(self) -> None:
        o = self._last_out
        assert o is not None
        st = DiagnosticStatus(name="path_follower", message=o.status.value)
        st.level = DiagnosticStatus.OK if o.status in (FollowerStatus.FOLLOWING, FollowerStatus.GOAL_REACHED,
                                                       FollowerStatus.IDLE) else DiagnosticStatus.WARN
        f = self.filter
        values = {"delta_theta": o.delta_theta, "command": o.command, "head_offset": o.head_offset,
                  "linear": o.linear, "angular": o.angular, "branch": o.branch, "cross_track": o.cross_track,
                  "target_x": o.target[0], "target_y": o.target[1], "mocap_accepted": f.accepted,
                  "mocap_rejected_jump": f.rejected_jump, "mocap_rejected_nan": f.rejected_nan,
                  "mocap_rejected_fit": f.rejected_fit, "stop_reason": self.follower.stop_reason}
        st.values = [KeyValue(key=k, value=f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in values.items()]
        self._last_status_msg = st
        self.pub_status.publish(st)


    def stop_safely(self) -> None:
        """Safe exit: command a stop and say so on ``follower_status``."""
        self.publish_stop()
        self.pub_status.publish(DiagnosticStatus(level=DiagnosticStatus.STALE, name="path_follower",
                                                 message="stopped: path follower exiting"))
        self.get_logger().info("path follower stopped: zero command sent")


def main(args: list[str] | None = None) -> int:
    """Run the path follower until shutdown; stop the robot on the way out."""
    return run_node(PathFollowerNode, args, on_exit=PathFollowerNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
