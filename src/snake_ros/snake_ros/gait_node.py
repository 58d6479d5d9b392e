"""Gait node: ``cmd_vel`` in, ``joint_commands`` out.

Thin wrapper around :mod:`snake_core.gait`: reads parameters, converts messages, runs
the command filter and the gait at ``rate_hz``, publishes.

Topics:
    cmd_vel (geometry_msgs/TwistStamped, or Twist with ``stamped:=false``): linear.x m/s, angular.z rad/s.
    joint_commands (sensor_msgs/JointState): joint position targets, rad, named from the robot YAML.
    gait_state (diagnostic_msgs/DiagnosticStatus): mode, phases, twist cycle counter, achieved twist.

Parameters: see ``config/gait_node.yaml`` and the descriptors below.
"""

from __future__ import annotations

import math

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist, TwistStamped
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from snake_core.errors import SnakeCoreError
from snake_core.gait import Gait, make_gait
from snake_core.gait.command import CommandFilter, TwistLimits
from snake_core.gait.reduction import motion_mode
from snake_core.robot import load_robot
from snake_ros.qos import COMMAND_QOS, STATUS_QOS
from snake_ros.runtime import run_node

_WARN_PERIOD_S = 2.0  # throttle for bad-input warnings


def _float_desc(text: str, lo: float, hi: float) -> ParameterDescriptor:
    return ParameterDescriptor(
        description=text, floating_point_range=[FloatingPointRange(from_value=lo, to_value=hi, step=0.0)]
    )


class GaitNode(Node):
    """Runs one gait of ``snake_core`` from differential-drive commands."""

    def __init__(self) -> None:
        super().__init__("gait_node")
        self.declare_parameter("robot", "tsnake", ParameterDescriptor(
            description="robot name in config/robots or a YAML path", read_only=True))
        self.declare_parameter("gait", "rolling", ParameterDescriptor(
            description="rolling | conical | serpenoid", read_only=True))
        self.declare_parameter("rate_hz", 50, ParameterDescriptor(
            description="control rate, Hz", read_only=True,
            integer_range=[IntegerRange(from_value=1, to_value=1000, step=1)]))
        self.declare_parameter("stamped", True, ParameterDescriptor(
            description="cmd_vel is TwistStamped (true, Jazzy-era teleop default) or Twist", read_only=True))
        self.declare_parameter("cmd_timeout", 0.5, _float_desc("deadman: stop after this long without cmd_vel, s",
                                                               0.01, 60.0))
        self.declare_parameter("max_linear", 0.1, _float_desc("|v| limit, m/s", 0.0, 5.0))
        self.declare_parameter("max_angular", 0.2, _float_desc("|omega| limit, rad/s", 0.0, 10.0))
        self.declare_parameter("max_linear_accel", 0.3, _float_desc("|dv/dt| limit, m/s^2", 0.0, 100.0))
        self.declare_parameter("max_angular_accel", 1.0, _float_desc("|domega/dt| limit, rad/s^2", 0.0, 100.0))

        robot = load_robot(self.get_parameter("robot").value)
        self.gait: Gait = make_gait(self.get_parameter("gait").value, robot)
        self.filter = CommandFilter(self._limits_from({}))
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self.rate_hz = int(self.get_parameter("rate_hz").value)
        self.pub_cmd = self.create_publisher(JointState, "joint_commands", COMMAND_QOS)
        self.pub_state = self.create_publisher(DiagnosticStatus, "gait_state", STATUS_QOS)
        if self.get_parameter("stamped").value:
            self.create_subscription(TwistStamped, "cmd_vel", lambda m: self._on_twist(m.twist), COMMAND_QOS)
        else:
            self.create_subscription(Twist, "cmd_vel", self._on_twist, COMMAND_QOS)
        self._last_tick: float | None = None
        self._last_warn = -math.inf
        self.create_timer(1.0 / self.rate_hz, self._tick)
        self.get_logger().info(
            f"gait {self.get_parameter('gait').value} on {robot.name} ({len(robot.joints)} joints) "
            f"at {self.rate_hz} Hz")

    # ---------------------------------------------------------------- parameters
    def _limits_from(self, changes: dict[str, float]) -> TwistLimits:
        def get(name: str) -> float:
            return float(changes.get(name, self.get_parameter(name).value))

        return TwistLimits(get("max_linear"), get("max_angular"), get("max_linear_accel"),
                           get("max_angular_accel"), get("cmd_timeout"))

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {p.name: p.value for p in params}
        try:
            limits = self._limits_from(changes)
        except (SnakeCoreError, TypeError, ValueError) as err:
            return SetParametersResult(successful=False, reason=str(err))
        self.filter.limits = limits
        return SetParametersResult(successful=True)

    # ---------------------------------------------------------------- callbacks
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_twist(self, twist: Twist) -> None:
        reason = self.filter.submit(self._now(), twist.linear.x, twist.angular.z)
        if reason is not None:
            self._warn(f"cmd_vel rejected: {reason}")

    def _warn(self, text: str) -> None:
        now = self._now()
        if now - self._last_warn >= _WARN_PERIOD_S:
            self._last_warn = now
            self.get_logger().warning(text)

    def _tick(self) -> None:
        now = self._now()
        nominal = 1.0 / self.rate_hz
        dt = nominal if self._last_tick is None else min(max(now - self._last_tick, 0.0), 4.0 * nominal)
        self._last_tick = now
        v, omega = self.filter.update(now, dt)
        command = self.gait.mapping.to_command(v, omega)
        try:
            q = self.gait.step(dt, command)
        except SnakeCoreError as err:  # never publish a target from a failed step
            self._warn(f"gait step failed, holding: {err}")
            return
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = self.gait.joint_names
        msg.position = [float(x) for x in q]
        self.pub_cmd.publish(msg)
        self._publish_state(command, v, omega)

    def _publish_state(self, command: tuple[float, ...], v: float, omega: float) -> None:
        status = DiagnosticStatus(name="gait", hardware_id=self.gait.robot.name)
        status.level = DiagnosticStatus.OK
        mode = motion_mode(command[0], command[1]) if self.gait.command_names[:2] == ("omega_h", "omega_t") else (
            "stopped" if all(c == 0 for c in command) else "moving")
        status.message = "deadman: stopping" if self.filter.timed_out(self._now()) and (v or omega) else mode
        values = {"v": v, "omega": omega, **dict(zip(self.gait.command_names, command, strict=True)),
                  **self.gait.state_dict(), "rejected_commands": float(self.filter.rejected)}
        status.values = [KeyValue(key=k, value=f"{x:.9g}") for k, x in values.items()]
        self.pub_state.publish(status)


def main(args: list[str] | None = None) -> int:
    """Run the gait node until shutdown.

    On exit the last published targets stay in force at the bridge, whose own command
    timeout then holds or relaxes the servos as configured.
    """
    return run_node(GaitNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
