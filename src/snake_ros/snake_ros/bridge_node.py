"""Hardware bridge: the only node that touches actuators.

Subscribes ``joint_commands`` (sensor_msgs/JointState, names + positions), publishes
``joint_states`` and ``diagnostics``; services ``~/torque`` (std_srvs/SetBool),
``~/emergency_stop`` and ``~/reboot`` (std_srvs/Trigger). Backends (parameter
``backend``): ``dynamixel`` (servos on ``port``), ``emulated`` (the same Dynamixel
code path against the Protocol 2.0 servo emulator started in-process on a pty),
``mujoco`` (next: plug a :class:`snake_hardware.backend.Backend` in
:func:`make_backend`). All rules (filtering, clamping, command timeout, backoff)
live in :mod:`snake_hardware.command`; this file only wires them to ROS.
"""

from __future__ import annotations

import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from snake_core.robot import RobotModel, load_robot
from snake_hardware.backend import (
    Backend,
    BackendError,
    CommError,
    DeviceLostError,
    JointHealth,
    NotReadyError,
    describe_hw_error,
)
from snake_hardware.command import TIMEOUT_REACTIONS, Backoff, CommandFilter, CommandState, CommandTimeout, RateMeter
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator
from snake_ros.joint_commands import filter_joint_command
from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.runtime import run_node

_BACKENDS = ("dynamixel", "emulated", "mujoco")
_EMULATED_MIN_LATENCY_MS = 20.0  # ms, read timeout margin when the emulator shares our GIL
_WARN_THROTTLE_S = 2.0           # s between repeated warnings of one kind
_DIAG_PERIOD_S = 0.5             # s between diagnostics messages
_OK, _WARN, _ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


def make_backend(kind: str, robot: RobotModel, params: dict[str, Any]) -> tuple[Backend, Any]:
    """Build the backend (and the emulator it owns, if any).

    Returns:
        (backend, emulator or None). The backend is not opened yet.
    """
    emulator = None
    port = params["port"] or str(robot.bus.get("port", "/dev/ttyUSB0"))
    baud = int(params["baud_rate"] or robot.bus.get("baud_rate", 1_000_000))
    latency = params["latency_ms"]
    if kind == "emulated":
        emulator = ServoBusEmulator([j.servo_id for j in robot.joints],
                                    models={j.servo_id: j.model for j in robot.joints}).start()
        port = emulator.port
        latency = max(latency, _EMULATED_MIN_LATENCY_MS)
    elif kind == "mujoco":
        # Next session: return MujocoBackend(robot, ...) implementing snake_hardware.backend.Backend.
        raise BackendError("backend 'mujoco' is not implemented yet (use dynamixel or emulated)")
    settings = DynamixelSettings(
        port=port, baud_rate=baud, retries=params["retries"], latency_ms=latency,
        return_delay_us=params["return_delay_us"], profile_velocity=params["profile_velocity"],
        watchdog_s=params["watchdog_s"])
    return DynamixelBackend(robot, settings), emulator


class BridgeNode(Node):
    """ROS side of the hardware bridge (see the module docstring)."""

    def __init__(self) -> None:
        """Declare parameters, build the backend, start the loop (torque stays off)."""
        super().__init__("bridge_node")
        self._declare_parameters()
        p = self._params()
        self._robot = load_robot(p["robot"])
        self._filter = CommandFilter(self._robot.joints)
        self._timeout = CommandTimeout(p["command_timeout_s"], p["timeout_reaction"])
        self._backoff = Backoff()
        self._rate = RateMeter()
        self._backend, self._emulator = make_backend(p["backend"], self._robot, p)
        self._connected = False
        self._ever_connected = False
        self._connect_error = ""
        self._targets: dict[str, float] = {}
        self._present: dict[str, float] = {}
        self._torque_on = False
        self._torque_request = False   # first valid command or the service asked for torque
        self._estopped = False
        self._health: list[JointHealth] = []
        self._faulted: set[str] = set()
        self._last_health = 0.0
        self._last_diag = 0.0
        self._bus_error = ""
        self._cycles = 0
        self._failed_cycles = 0      # cycles in a row whose read or write failed

        self._pub_states = self.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
        self._pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self.create_subscription(JointState, "joint_commands", self._on_command, COMMAND_QOS)
        self.create_service(SetBool, "~/torque", self._on_torque)
        self.create_service(Trigger, "~/emergency_stop", self._on_estop)
        self.create_service(Trigger, "~/reboot", self._on_reboot)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._try_connect(time.monotonic())
        self._timer = self.create_timer(1.0 / p["rate_hz"], self._cycle)

    # --- parameters -------------------------------------------------------------------------
    def _declare_parameters(self) -> None:
        def fr(lo: float, hi: float) -> list[FloatingPointRange]:
            return [FloatingPointRange(from_value=lo, to_value=hi)]

        def ir(lo: int, hi: int) -> list[IntegerRange]:
            return [IntegerRange(from_value=lo, to_value=hi, step=1)]

        d = ParameterDescriptor
        self.declare_parameter("backend", "emulated", d(description=f"one of {_BACKENDS}"))
        self.declare_parameter("robot", "tsnake", d(description="robot name in config/robots or a YAML path"))
        self.declare_parameter("port", "", d(description="serial device; empty: the robot YAML's bus.port"))
        self.declare_parameter("baud_rate", 0, d(description="bps; 0: the robot YAML's bus.baud_rate",
                                                            integer_range=ir(0, 4_500_000)))
        self.declare_parameter("rate_hz", 100.0, d(description="loop rate, Hz", floating_point_range=fr(1.0, 1000.0)))
        self.declare_parameter("health_rate_hz", 2.0, d(description="health poll rate, Hz",
                                                        floating_point_range=fr(0.1, 50.0)))
        self.declare_parameter("command_timeout_s", 0.5, d(description="s without commands before the "
                                                           "timeout reaction; 0 disables",
                                                           floating_point_range=fr(0.0, 60.0)))
        self.declare_parameter("timeout_reaction", "hold", d(description=f"one of {TIMEOUT_REACTIONS}"))
        self.declare_parameter("fault_reaction", "hold", d(description="reaction to a servo hardware "
                                                           f"error, one of {TIMEOUT_REACTIONS}"))
        self.declare_parameter("exit_reaction", "torque_off", d(description="on shutdown, one of "
                                                                f"{TIMEOUT_REACTIONS}"))
        self.declare_parameter("max_consecutive_failures", 5, d(description="failed cycles before ERROR, "
                                                                "safe state and reconnect", integer_range=ir(1, 1000)))
        self.declare_parameter("retries", 2, d(description="extra attempts per bus transaction",
                                                        integer_range=ir(0, 10)))
        self.declare_parameter("latency_ms", 1.0, d(description="USB adapter latency timer, ms",
                                                    floating_point_range=fr(0.0, 50.0)))
        self.declare_parameter("return_delay_us", 0, d(description="Return Delay Time written to servos, us",
                                                                integer_range=ir(0, 508)))
        self.declare_parameter("profile_velocity", 0.0, d(description="servo Profile Velocity, rad/s; 0: none",
                                                          floating_point_range=fr(0.0, 20.0)))
        self.declare_parameter("watchdog_s", 0.1, d(description="Bus Watchdog timeout, s; 0 disables",
                                                    floating_point_range=fr(0.0, 2.54)))

    def _params(self) -> dict[str, Any]:
        names = ("backend", "robot", "port", "baud_rate", "rate_hz", "health_rate_hz", "command_timeout_s",
                 "timeout_reaction", "fault_reaction", "exit_reaction", "max_consecutive_failures",
                 "retries", "latency_ms", "return_delay_us", "profile_velocity", "watchdog_s")
        p = {n: self.get_parameter(n).value for n in names}
        problem = _check_params(p)
        if problem:
            raise ValueError(problem)
        return p

    def _on_set_parameters(self, params: list[Any]) -> SetParametersResult:
        live = {"command_timeout_s", "timeout_reaction", "fault_reaction", "exit_reaction",
                "max_consecutive_failures", "health_rate_hz"}
        current = self._params()
        for prm in params:
            if prm.name not in live:
                return SetParametersResult(successful=False, reason=f"{prm.name} is fixed at start-up")
            current[prm.name] = prm.value
        problem = _check_params(current)
        if problem:
            return SetParametersResult(successful=False, reason=problem)
        self._timeout.timeout_s = current["command_timeout_s"]
        self._timeout.reaction = current["timeout_reaction"]
        return SetParametersResult(successful=True)

    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    # --- connection -------------------------------------------------------------------------
    def _try_connect(self, now: float) -> None:
        if not self._backoff.due(now):
            return
        try:
            if self._ever_connected:
                self._backend.reconnect()
            else:
                self._backend.open()
        except BackendError as err:
            delay = self._backoff.failed(now)
            self._connect_error = str(err)
            self.get_logger().error(f"bus not ready ({err}); retrying in {delay:.2f} s",
                                    throttle_duration_sec=_WARN_THROTTLE_S)
            return
        self._backoff.reset()
        self._connected = True
        self._ever_connected = True
        self._connect_error = ""
        self._bus_error = ""
        # Resume only from present positions: no target survives a (re)connect.
        self._targets.clear()
        self._torque_on = False
        self._torque_request = False
        self._timeout.reset()
        self.get_logger().info(f"bus ready: {len(self._robot.joints)} servos on "
                               f"{getattr(self._backend, 'settings', None) and self._backend.settings.port}")

    def _lost(self, why: str) -> None:
        self._connected = False
        self._torque_on = False
        self._bus_error = why
        self.get_logger().error(f"bus lost: {why}", throttle_duration_sec=_WARN_THROTTLE_S)
        self._backend.close()

    # --- loop -------------------------------------------------------------------------------------
    def _cycle(self) -> None:
        try:
            self._cycle_body()
        except Exception as err:
            self.get_logger().error(f"unexpected error in the bridge loop: {err!r}",
                                    throttle_duration_sec=_WARN_THROTTLE_S)
            self._backend.counters.failures += 1
            self._on_comm_failure(repr(err))

    def _cycle_body(self) -> None:
        now = time.monotonic()
        self._rate.tick(now)
        self._cycles += 1
        if not self._connected:
            self._try_connect(now)
            self._maybe_diagnostics(now)
            return
        try:
            reading = self._backend.read()
        except DeviceLostError as err:
            self._lost(str(err))
            return
        except CommError as err:
            self._on_comm_failure(str(err))
            if self._connected:
                self._guarded_health_poll(now)  # tells which servo is silent
            self._maybe_diagnostics(now)
            return
        self._present = dict(zip(reading.names, reading.position.tolist(), strict=True))
        self._publish_states(reading)
        try:
            self._apply_command_state(now)
            if self._torque_on and self._targets:
                self._backend.write_goals(self._targets)
            self._failed_cycles = 0
            self._health_if_due(now)
        except DeviceLostError as err:
            self._lost(str(err))
            return
        except (CommError, NotReadyError) as err:
            self._on_comm_failure(str(err))
        self._maybe_diagnostics(now)

    def _apply_command_state(self, now: float) -> None:
        state = self._timeout.update(now)
        if self._torque_request and not self._torque_on and not self._estopped:
            self._torque_request = False
            goals = {n: self._present[n] for n in self._present}
            goals.update(self._targets)
            self._backend.set_torque(True)
            self._targets = goals
            self._torque_on = True
            self.get_logger().info("torque on")
        if self._timeout.just_timed_out:
            if self._timeout.reaction == "hold":
                self._targets = dict(self._present)
                self.get_logger().warning("command timeout: holding present positions")
            else:
                self._torque_off("command timeout")
        if state is CommandState.TIMED_OUT and self._timeout.reaction == "hold" and not self._targets:
            self._targets = dict(self._present)

    def _on_comm_failure(self, why: str) -> None:
        self._failed_cycles += 1
        failures = self._failed_cycles
        self.get_logger().warning(f"bus error ({failures} failed cycles in a row): {why}",
                                  throttle_duration_sec=_WARN_THROTTLE_S)
        if failures >= self._p("max_consecutive_failures"):
            self._failed_cycles = 0
            self._bus_error = f"{failures} consecutive failed cycles: {why}"
            try:
                self._backend.set_torque(False)
            except BackendError:
                pass  # the Bus Watchdog stops the servos when we cannot reach them
            self._lost(self._bus_error)

    def _health_if_due(self, now: float) -> None:
        if now - self._last_health >= 1.0 / self._p("health_rate_hz"):
            self._last_health = now
            self._poll_health()

    def _guarded_health_poll(self, now: float) -> None:
        try:
            self._health_if_due(now)
        except DeviceLostError as err:
            self._lost(str(err))
        except BackendError as err:
            self.get_logger().warning(f"health poll failed: {err}", throttle_duration_sec=_WARN_THROTTLE_S)

    def _poll_health(self) -> None:
        self._health = self._backend.health()
        bad = {h.name for h in self._health if h.hardware_error > 0}
        new = bad - self._faulted
        self._faulted = bad
        if new:
            detail = "; ".join(f"{h.name}: {describe_hw_error(h.hardware_error)}"
                               for h in self._health if h.name in new)
            self.get_logger().error(f"servo hardware error: {detail}")
            if self._p("fault_reaction") == "torque_off":
                self._torque_off(f"hardware error ({detail})")
            else:
                self._targets = dict(self._present)
                self._timeout.reset()

    def _torque_off(self, why: str) -> None:
        self._backend.set_torque(False)
        self._torque_on = False
        self._torque_request = False
        self._targets.clear()
        self._timeout.reset()
        self.get_logger().warning(f"torque off: {why}")

    def _publish_states(self, reading: Any) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(reading.names)
        msg.position = reading.position.tolist()
        msg.velocity = reading.velocity.tolist()
        msg.effort = reading.effort.tolist()
        self._pub_states.publish(msg)

    # --- callbacks ------------------------------------------------------------------------------------
    def _on_command(self, msg: JointState) -> None:
        cmd = filter_joint_command(msg, self._filter, self.get_logger())
        if cmd is None:
            return
        if self._faulted:
            self.get_logger().warning(f"joint_commands ignored: hardware error on {sorted(self._faulted)}; "
                                      "call ~/reboot", throttle_duration_sec=_WARN_THROTTLE_S)
            return
        if not cmd.targets or not self._connected:
            return
        self._targets.update(cmd.targets)
        self._timeout.on_command(time.monotonic())
        if not self._torque_on and not self._estopped:
            self._torque_request = True

    def _on_torque(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        try:
            if request.data:
                self._backend.read()
                self._estopped = False
                self._backend.set_torque(True)
                self._targets = dict(zip(self._backend.joint_names,
                                         self._backend.read().position.tolist(), strict=True))
                self._torque_on = True
            else:
                self._torque_off("service request")
        except BackendError as err:
            response.success, response.message = False, str(err)
            return response
        response.success, response.message = True, f"torque {'on' if request.data else 'off'}"
        return response

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._estopped = True
        try:
            self._torque_off("emergency stop")
        except BackendError as err:
            response.success = False
            response.message = f"emergency stop sent, bus error: {err}; the Bus Watchdog stops the servos"
            return response
        response.success, response.message = True, "torque off on every servo; call ~/torque true to resume"
        return response

    def _on_reboot(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        names = [h.name for h in self._health if h.hardware_error > 0]
        try:
            self._backend.reboot(names)
            self._backend.read()
        except BackendError as err:
            response.success, response.message = False, str(err)
            return response
        self._faulted -= set(names)
        self._torque_on = False
        self._targets.clear()
        self._timeout.reset()
        response.success = True
        response.message = f"rebooted {names}" if names else "no servo in hardware-error state"
        return response

    # --- diagnostics ----------------------------------------------------------------------------------
    def _maybe_diagnostics(self, now: float) -> None:
        if now - self._last_diag < _DIAG_PERIOD_S:
            return
        self._last_diag = now
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        c = self._backend.counters
        bus = DiagnosticStatus(name="bridge: bus", hardware_id=str(self._p("backend")))
        if not self._connected:
            why = " | ".join(x for x in (self._connect_error, self._bus_error) if x)
            bus.level, bus.message = _ERROR, f"disconnected: {why}"
        elif self._failed_cycles:
            bus.level, bus.message = _WARN, f"{self._failed_cycles} failed cycles in a row"
        else:
            bus.level, bus.message = _OK, "ok"
        values = {**c.as_dict(), "failed_cycles": self._failed_cycles,
                  "loop_rate_hz": f"{self._rate.hz:.1f}", "rate_hz": str(self._p("rate_hz")),
                  "torque": str(self._torque_on), "estopped": str(self._estopped),
                  "command_state": self._timeout.state.value}
        bus.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        arr.status.append(bus)
        health = {h.name: h for h in self._health}
        for j in self._robot.joints:
            st = DiagnosticStatus(name=f"bridge: {j.name}", hardware_id=f"dynamixel id {j.servo_id}")
            h = health.get(j.name)
            if h is None:
                st.level, st.message = (_WARN if self._connected else _ERROR), "no health data yet"
            elif h.hardware_error < 0:
                st.level, st.message = _ERROR, "no answer"
            elif h.hardware_error > 0:
                st.level, st.message = _ERROR, f"hardware error: {describe_hw_error(h.hardware_error)}"
            elif h.watchdog_tripped:
                st.level, st.message = _WARN, "bus watchdog tripped (re-armed)"
            else:
                st.level, st.message = _OK, "ok"
            if h is not None:
                st.values = [KeyValue(key="hardware_error", value=str(h.hardware_error)),
                             KeyValue(key="temperature_c", value=f"{h.temperature:.0f}"),
                             KeyValue(key="voltage_v", value=f"{h.voltage:.1f}"),
                             KeyValue(key="torque", value=str(h.torque_enabled))]
            arr.status.append(st)
        self._pub_diag.publish(arr)

    # --- shutdown -----------------------------------------------------------------------------------------
    def shutdown_safely(self) -> None:
        """Leave the servos safe: torque off, or hold present positions; close the bus."""
        try:
            if self._connected:
                if self._p("exit_reaction") == "torque_off":
                    self._backend.set_torque(False)
                elif self._torque_on:
                    reading = self._backend.read()
                    self._backend.write_goals(dict(zip(reading.names, reading.position.tolist(), strict=True)))
        except BackendError as err:
            self.get_logger().error(f"safe shutdown incomplete: {err}")
        finally:
            self._backend.close()
            if self._emulator is not None:
                self._emulator.stop()

    @property
    def emulator(self) -> Any:
        """The in-process emulator of the ``emulated`` backend (None otherwise)."""
        return self._emulator


def _check_params(p: dict[str, Any]) -> str:
    """A reason why the parameter set is invalid, or ''."""
    if p["backend"] not in _BACKENDS:
        return f"backend: {p['backend']!r} is not one of {_BACKENDS}"
    for key in ("timeout_reaction", "fault_reaction", "exit_reaction"):
        if p[key] not in TIMEOUT_REACTIONS:
            return f"{key}: {p[key]!r} is not one of {TIMEOUT_REACTIONS}"
    if p["rate_hz"] <= 0 or p["health_rate_hz"] <= 0:
        return "rate_hz / health_rate_hz: must be > 0"
    if p["command_timeout_s"] < 0:
        return "command_timeout_s: must be >= 0"
    if p["max_consecutive_failures"] < 1 or p["retries"] < 0:
        return "max_consecutive_failures must be >= 1 and retries >= 0"
    return ""


def main(args: list[str] | None = None) -> int:
    """Run the bridge until Ctrl-C; the servos are left safe on the way out."""
    return run_node(BridgeNode, args, on_exit=BridgeNode.shutdown_safely)


if __name__ == "__main__":
    raise SystemExit(main())
