"""Gait node: ``cmd_vel`` in, ``joint_commands`` out.

Thin wrapper around :mod:`snake_core.gait`: reads parameters, converts messages, runs
the command filter and the gait at ``rate_hz``, publishes.

A ``cmd_vel`` that changes the commanded twist does not wait for the next tick: the gait
ticks at once (or, when its last tick was less than a quarter period ago, as soon as a
quarter period has passed) and its period restarts from that tick. Every tick integrates
the time since the previous one, so the gait's phases follow the clock as before; a
command change shortens one interval instead of waiting up to a whole period, and ticks
are never closer than a quarter period.

Topics:
    cmd_vel (geometry_msgs/TwistStamped, or Twist with ``stamped:=false``): linear.x m/s, angular.z rad/s,
        in the robot's own frame. A stamped command is refused (throttled warning) when its stamp is
        more than ``cmd_max_age`` from both this node's clock and the wall clock; a zero stamp is taken
        as "not stamped". Publishers of the other type never connect: the node warns about them.
    head_offset (std_msgs/Float64, serpenoid gait only): head-angle offset, rad (001 Sec. IV, the path
        follower's ``head_offset`` output); while one arrived within ``cmd_timeout`` it replaces the turn
        the cmd_vel mapping would give (the wave frequency still comes from cmd_vel).
    joint_states (sensor_msgs/JointState, in): the measured joint positions (the bridge's or the twin's);
        on exit the node publishes these as its last targets, where the body is (``stop_safely``).
    joint_commands (sensor_msgs/JointState): joint position targets, rad, named from the robot YAML.
        The node checks the graph every second and warns (throttled) while another publisher shares
        the topic: two commanders would interleave their poses on the bridge.
    gait_state (diagnostic_msgs/DiagnosticStatus, every tick): message = motion mode; numeric values:
        ``v`` (m/s) and ``yaw_rate`` (rad/s) of the achieved twist, the gait's native command (rolling:
        omega_h, omega_t, omega_c; conical: omega_s, taper; serpenoid: omega = wave frequency,
        head_offset), its state (phases, twist cycles, resets), ``rejected_commands`` and
        ``joint_states_received``.
    diagnostics (diagnostic_msgs/DiagnosticArray, ``diagnostics_rate_hz``): the same entry for the
        diagnostic aggregator and rqt_robot_monitor.
    robot_description_yaml (std_msgs/String, latched): the robot YAML the node loaded, as text, so that
        a recording holds its own robot (``snake bag analyze`` reads it).

Parameters: the table below (``gait_node --help``, docs/parameters.md).
"""

from __future__ import annotations

import math
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist, TwistStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String

from snake_core.angles import wrap_to_pi
from snake_core.control import CONTROL_RATE_HZ
from snake_core.errors import SnakeCoreError
from snake_core.gait import GAIT_NAMES, Gait, make_gait
from snake_core.gait.command import TwistConditioner, TwistLimits, stamp_problem
from snake_core.gait.reduction import motion_mode
from snake_core.robot import calibration_path, describe_calibration, load_robot, resolve_robot_path
from snake_ros.joint_commands import UNDISCOVERED, node_names
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import COMMAND_QOS, LATCHED_QOS, SENSOR_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled

_WARN_PERIOD_S = 2.0  # s, throttle of bad-input warnings
_MEASURED_MAX_AGE_S = 0.5  # s, joint_states older than this before the last tick: the stop keeps the targets
_TYPE_CHECK_PERIOD_S = 0.5  # s (wall), how often publishers on cmd_vel are checked for the other type
_COMMANDER_CHECK_PERIOD_S = 1.0  # s (wall), how often the publishers of joint_commands are counted
_UNNAMED_GRACE_CHECKS = 5  # checks the "another commander" warning waits for a publisher's node name
_COMMANDER_WARN_PERIOD_S = 10.0  # s, throttle of the "another commander" warning
_EXPECTED_FRAMES = ("", "base_link", "base", "base_footprint")  # cmd_vel frames taken without a note
_PROMPT_MIN_PERIODS = 0.25  # shortest interval between ticks that a changed command may cause, tick periods

PARAMETERS = ParameterTable("gait_node", [
    Param("robot", "tsnake", "robot name in config/robots or a YAML path", read_only=True),
    Param("calibration_target", "", "calibration of the reduction (003 Eq. 10) to load: config/calibration/"
          "<robot>/<target>.yaml ('': $SNAKE_CALIBRATION_TARGET, else twin)", read_only=True),
    Param("gait", "rolling", "gait to run", choices=GAIT_NAMES, read_only=True),
    Param("rate_hz", CONTROL_RATE_HZ, "control rate, Hz (joint_commands)", lo=1, hi=1000, read_only=True),
    Param("stamped", True, "cmd_vel is geometry_msgs/TwistStamped (true) or Twist (false)", read_only=True),
    Param("cmd_timeout", 0.5, "deadman: ramp to a stop after this long without cmd_vel, s", lo=0.01, hi=60.0),
    Param("max_linear", 0.1, "|v| limit, m/s", lo=1e-6, hi=5.0),
    Param("max_angular", 0.2, "|omega| limit, rad/s", lo=1e-6, hi=10.0),
    Param("max_linear_accel", 0.3, "|dv/dt| limit, m/s^2", lo=1e-6, hi=100.0),
    Param("max_angular_accel", 1.0, "|domega/dt| limit, rad/s^2", lo=1e-6, hi=100.0),
    Param("cmd_max_age", 1.0, "TwistStamped: refuse a command whose stamp is further than this from both the "
          "node's clock and the wall clock (stale or in the future), s; 0: accept every stamp (a zero stamp is "
          "always accepted)", lo=0.0, hi=3600.0),
    Param("diagnostics_rate_hz", 1.0, "rate of the gait's entry on /diagnostics, Hz (wall clock)", lo=0.1,
          hi=50.0, read_only=True),
], summary="Runs one gait of snake_core from differential-drive cmd_vel; publishes joint_commands and gait_state.")

_LIMIT_PARAMS = ("max_linear", "max_angular", "max_linear_accel", "max_angular_accel", "cmd_timeout")


class GaitNode(StackNode):
    """Runs one gait of ``snake_core`` from differential-drive commands."""

    def __init__(self) -> None:
        super().__init__("gait_node")
        params = PARAMETERS.declare(self)
        target = params["calibration_target"] or None
        robot = load_robot(params["robot"], target=target)
        self.gait: Gait = make_gait(params["gait"], robot)
        self.filter = TwistConditioner(self._limits(params))
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.rate_hz = int(params["rate_hz"])
        self.pub_cmd = self.create_publisher(JointState, "joint_commands", COMMAND_QOS)
        self.pub_state = self.create_publisher(DiagnosticStatus, "gait_state", STATUS_QOS)
        self.pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.pub_robot = self.create_publisher(String, "robot_description_yaml", LATCHED_QOS)
        self.pub_robot.publish(String(data=resolve_robot_path(params["robot"]).read_text()))
        self._cmd_type = TwistStamped if params["stamped"] else Twist
        if params["stamped"]:
            self.create_subscription(TwistStamped, "cmd_vel", self._on_twist_stamped, COMMAND_QOS)
        else:
            self.create_subscription(Twist, "cmd_vel", self._on_twist, COMMAND_QOS)
        self._head_offset: tuple[float, float] | None = None  # (received at s, offset rad)
        if self.gait.command_names == ("omega", "head_offset"):
            self.create_subscription(Float64, "head_offset", self._on_head_offset, COMMAND_QOS)
        self._last_tick: float | None = None
        self._last_targets: list[float] | None = None
        self._last_targets_at = 0.0   # monotonic s of the last tick's targets
        # The body's measured joint positions (bridge or twin), for the stop: (received at, rad by joint).
        self._measured: tuple[float, dict[str, float]] | None = None
        self._measured_count = 0
        self.create_subscription(JointState, "joint_states", self._on_joint_states, SENSOR_QOS)
        self._last_status: DiagnosticStatus | None = None
        self._frames_noted: set[str] = set()
        self._wrong_type_seen: set[bytes] = set()
        self._period_ns = round(1e9 / self.rate_hz)  # ns, the tick period on the node's clock
        self._tick_timer = self.create_timer(1.0 / self.rate_hz, self._tick)
        self._restart_period = False  # the next tick restarts the tick period (a changed command)
        # Wall-clock timers: they run on simulated time before the first /clock too.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(_TYPE_CHECK_PERIOD_S, self._check_cmd_vel_types, clock=steady)
        self._unnamed_checks = 0  # consecutive checks that found a publisher of joint_commands not yet named
        self.create_timer(_COMMANDER_CHECK_PERIOD_S, self._check_other_commanders, clock=steady)
        self.create_timer(1.0 / float(params["diagnostics_rate_hz"]), self._publish_diagnostics, clock=steady)
        self.get_logger().info(
            f"gait {params['gait']} on {robot.name} ({len(robot.joints)} joints) at {self.rate_hz} Hz")
        calibration = describe_calibration(robot.name, target)
        if calibration_path(robot.name, target).is_file():
            self.get_logger().info(calibration)
        else:
            self.get_logger().warning(calibration)

    # ---------------------------------------------------------------- parameters
    def _limits(self, values: dict[str, object]) -> TwistLimits:
        return TwistLimits(*(float(values[name]) for name in _LIMIT_PARAMS))  # type: ignore[arg-type]

    def _current(self, changes: dict[str, object]) -> dict[str, object]:
        return {name: changes.get(name, self.get_parameter(name).value) for name in _LIMIT_PARAMS}

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        reason = PARAMETERS.check(changes)
        if reason is None:
            try:
                self._limits(self._current(changes))
            except SnakeCoreError as err:
                reason = str(err)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _apply_parameters(self, params: list[Parameter]) -> None:
        if any(p.name in _LIMIT_PARAMS for p in params):
            self.filter.limits = self._limits(self._current({}))

    # ---------------------------------------------------------------- callbacks
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_twist_stamped(self, msg: TwistStamped) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        clocks = (self._now(), time.time())
        problem = stamp_problem(stamp, clocks, float(self.get_parameter("cmd_max_age").value))
        if problem is not None:
            self.filter.rejected += 1
            self._warn(f"cmd_vel rejected: {problem}")
            return
        frame = msg.header.frame_id
        if frame not in _EXPECTED_FRAMES and frame not in self._frames_noted:
            self._frames_noted.add(frame)
            self.get_logger().info(f"cmd_vel in frame {frame!r}: taken as the robot's own frame (linear.x forward, "
                                   "angular.z yaw rate), as for base_link")
        self._on_twist(msg.twist)

    def _check_cmd_vel_types(self) -> None:
        """Warn about publishers on cmd_vel of the other type: they never connect."""
        wanted = "geometry_msgs/msg/" + self._cmd_type.__name__
        for info in self.get_publishers_info_by_topic(self.resolve_topic_name("cmd_vel")):
            gid = bytes(info.endpoint_gid)
            if info.topic_type != wanted and gid not in self._wrong_type_seen:  # once per publisher
                self._wrong_type_seen.add(gid)
                self.get_logger().warning(
                    f"cmd_vel: {info.node_namespace.rstrip('/')}/{info.node_name} publishes {info.topic_type}, "
                    f"this node subscribes {wanted}; those messages never arrive. Publish "
                    f"{self._cmd_type.__name__} or restart the gait node with "
                    f"stamped:={'false' if self._cmd_type is TwistStamped else 'true'}")

    def _check_other_commanders(self) -> None:
        """Warn (throttled) while another publisher shares joint_commands (this node's is one of them)."""
        topic = self.resolve_topic_name("joint_commands")
        if self.count_publishers(topic) <= 1:
            self._unnamed_checks = 0
            return
        names = node_names(self.get_publishers_info_by_topic(topic))
        # A writer is often seen before its node's name (discovery sends them apart): wait a
        # few checks for the name rather than spend the throttled warning on "not discovered".
        if UNDISCOVERED in names and self._unnamed_checks < _UNNAMED_GRACE_CHECKS:
            self._unnamed_checks += 1
            return
        log_throttled(
            self.get_logger(),
            f"{len(names)} publishers on {topic} ({', '.join(names)}): another node commands the joints too; "
            "the bridge and the twin hold their last targets while more than one publishes. Stop the other commander",
            _COMMANDER_WARN_PERIOD_S)

    def _on_twist(self, twist: Twist) -> None:
        now = self._now()
        before = self.filter.target(now)
        reason = self.filter.submit(now, twist.linear.x, twist.angular.z)
        if reason is not None:
            self._warn(f"cmd_vel rejected: {reason}")
        elif self.filter.target(now) != before:
            self._tick_soon(now)

    def _tick_soon(self, now: float) -> None:
        """A changed command at ``now`` (s): tick now, or once ``_PROMPT_MIN_PERIODS`` passed since the last tick.

        The tick restarts the period (the next regular tick comes a full period after it).
        """
        if self._last_tick is None:
            return  # not ticking yet (the first tick takes the command)
        wait = self._last_tick + _PROMPT_MIN_PERIODS / self.rate_hz - now
        self._restart_period = True
        if wait <= 0.0:
            self._tick()
        else:  # the timer fires after ``wait`` instead; the tick sets its period back
            self._tick_timer.timer_period_ns = max(1, round(wait * 1e9))
            self._tick_timer.reset()

    def _on_head_offset(self, msg: Float64) -> None:
        if not math.isfinite(msg.data):
            self._warn(f"head_offset rejected: {msg.data}")
            return
        self._head_offset = (self._now(), float(msg.data))

    def _warn(self, text: str) -> None:
        log_throttled(self.get_logger(), text, _WARN_PERIOD_S)

    def _tick(self) -> None:
        if self._restart_period:
            self._restart_period = False
            if self._tick_timer.timer_period_ns != self._period_ns:
                self._tick_timer.timer_period_ns = self._period_ns
            self._tick_timer.reset()
        now = self._now()
        nominal = 1.0 / self.rate_hz
        dt = nominal if self._last_tick is None else min(max(now - self._last_tick, 0.0), 4.0 * nominal)
        self._last_tick = now
        v, omega = self.filter.ramp(now, dt)
        command = self.gait.mapping.to_command(v, omega)
        fresh_for = float(self.get_parameter("cmd_timeout").value)
        if self._head_offset is not None and now - self._head_offset[0] <= fresh_for:
            limit = float(getattr(self.gait.mapping, "offset_max", math.inf))
            command = (command[0], min(max(self._head_offset[1], -limit), limit))
        try:
            q = self.gait.step(dt, command)
        except SnakeCoreError as err:  # never publish a target from a failed step
            self._warn(f"gait step failed, holding: {err}")
            return
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self.gait.joint_names
        msg.position = [float(x) for x in q]
        self._last_targets = list(msg.position)
        self._last_targets_at = time.monotonic()
        self.pub_cmd.publish(msg)
        self._publish_state(command, v, omega)

    def _publish_state(self, command: tuple[float, ...], v: float, omega: float) -> None:
        status = DiagnosticStatus(name="gait", hardware_id=self.gait.robot.name)
        status.level = DiagnosticStatus.OK
        mode = motion_mode(command[0], command[1]) if self.gait.command_names[:2] == ("omega_h", "omega_t") else (
            "stopped" if all(c == 0 for c in command) else "moving")
        status.message = "deadman: stopping" if self.filter.timed_out(self._now()) and (v or omega) else mode
        # The achieved twist under names of its own; the gait's native command and state
        # (e.g. the serpenoid's wave frequency ``omega``) under theirs.
        values = {"v": v, "yaw_rate": omega, **dict(zip(self.gait.command_names, command, strict=True)),
                  **self.gait.state_dict(), "rejected_commands": float(self.filter.rejected),
                  "joint_states_received": float(self._measured_count)}
        status.values = [KeyValue(key=k, value=f"{x:.9g}") for k, x in values.items()]
        self._last_status = status
        self.pub_state.publish(status)

    def _publish_diagnostics(self) -> None:
        """The gait's entry on /diagnostics (for the aggregator and rqt_robot_monitor)."""
        status = self._last_status or DiagnosticStatus(level=DiagnosticStatus.STALE, message="no tick yet",
                                                       hardware_id=self.gait.robot.name)
        entry = DiagnosticStatus(level=status.level, name=f"{self.get_name()}: gait", message=status.message,
                                 hardware_id=status.hardware_id, values=status.values)
        arr = DiagnosticArray(status=[entry])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)


    def _on_joint_states(self, msg: JointState) -> None:
        self._measured = (time.monotonic(), dict(zip(msg.name, msg.position, strict=False)))
        self._measured_count += 1

    def _stop_pose(self) -> list[float]:
        """Where the body is, rad, joint by joint.

        Each joint's measured position in the winding of its last target, t + wrap(m - t), when
        ``joint_states`` were received at most ``_MEASURED_MAX_AGE_S`` before the last tick (a
        node the computer starved has old targets too: the newer knowledge wins); else its last
        target.
        """
        assert self._last_targets is not None
        if self._measured is None or self._last_targets_at - self._measured[0] > _MEASURED_MAX_AGE_S:
            return list(self._last_targets)
        measured = self._measured[1]
        return [t + wrap_to_pi(measured[n] - t) if n in measured and math.isfinite(measured[n]) else t
                for n, t in zip(self.gait.joint_names, self._last_targets, strict=True)]

    def stop_safely(self) -> None:
        """Safe exit: hold the body's shape where it is and say so on ``gait_state``.

        The joints' measured positions are published as the last targets (the last targets
        themselves where none were measured lately): a loaded joint lagging its target stops
        where it is instead of being driven on to a pose its load may not let it reach (the
        bridge would then fault it out of its tracking envelope before its command timeout
        holds); the bridge's own command timeout then holds or relaxes the servos.
        """
        if self._last_targets is not None:
            msg = JointState(name=self.gait.joint_names, position=self._stop_pose())
            msg.header.stamp = self.get_clock().now().to_msg()
            self.pub_cmd.publish(msg)
        self.pub_state.publish(DiagnosticStatus(
            level=DiagnosticStatus.STALE, name="gait", hardware_id=self.gait.robot.name,
            message="stopped: gait node exiting, last shape held"))
        self.get_logger().info("gait stopped: last shape held")


def main(args: list[str] | None = None) -> int:
    """Run the gait node until shutdown; on exit it holds the last shape (``stop_safely``)."""
    return run_node(GaitNode, args, on_exit=GaitNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
