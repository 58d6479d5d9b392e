"""Hardware bridge: the only node that touches actuators.

Subscribes ``joint_commands`` (sensor_msgs/JointState, names + positions), publishes
``joint_states``, ``diagnostics`` and ``battery_state`` (sensor_msgs/BatteryState: the
servos' supply voltage, the median of their Present Input Voltage read by the health poll,
NaN when none answered; each servo's own value is in its diagnostics entry); services ``~/arm``, ``~/disarm``,
``~/emergency_stop``, ``~/clear_estop``, ``~/reboot`` (std_srvs/Trigger), ``~/torque``
(std_srvs/SetBool: true arms, false disarms) and ``~/status`` (std_srvs/Trigger whose message is
a JSON object: state, reason, torque, connected, faulted servos). ``snake robot <verb>`` calls
them without a ``ros2`` install (:mod:`snake_tools.commands.robot`). Backends (parameter ``backend``) come from
the registry :data:`snake_hardware.backends.BACKENDS`: ``dynamixel`` (servos on ``port``)
and ``emulated`` (the same Dynamixel code path against the Protocol 2.0 servo emulator
started in-process on a pty). The safety state
machine (arming, torque, e-stop, command timeout, faults, reconnect) is
:class:`snake_hardware.supervisor.Supervisor` and the command rules live in
:mod:`snake_hardware.command`; this file only wires them to ROS.

Torque comes on only by arming: the ``~/arm`` service (or ``~/torque true``), or
``auto_arm``, whose default is the backend's (:attr:`snake_hardware.backends.BackendKind.auto_arm`):
false for ``dynamixel`` (real servos never move until someone arms them), true for
``emulated`` (unattended runs). A latched e-stop is left only by ``~/clear_estop``
(to DISARMED); ``~/arm`` is a separate, second request.

One commander at a time: ``~/arm`` is refused while more than one node publishes
``joint_commands``, and while the subscription has matched more than one writer (its
matched event) the bridge holds its last goals (ARMING/ARMED -> HOLDING) and ignores the
commands, with a warning naming the publishers; with one left, the next command resumes.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.logging import LoggingSeverity
from rclpy.parameter import Parameter
from sensor_msgs.msg import BatteryState, JointState
from std_srvs.srv import SetBool, Trigger

from snake_core.robot import (
    CALIBRATION_TARGET_ENV,
    DEFAULT_CALIBRATION_TARGET,
    calibration_target,
    describe_calibration,
    load_robot,
)
from snake_hardware.backend import JointReading, supply_voltage
from snake_hardware.backends import BACKEND_NAMES, BACKENDS, BusOptions, make_backend
from snake_hardware.command import TIMEOUT_REACTIONS, JointTargetFilter, RateMeter
from snake_hardware.emulator import ServoBusEmulator
from snake_hardware.realtime import CycleLateness, apply_realtime, apply_realtime_to_process, scheduling
from snake_hardware.supervisor import BridgeState, Outcome, Supervisor, SupervisorConfig
from snake_ros.joint_commands import CommanderWatch, filter_joint_command, node_names
from snake_ros.parameters import Param, ParameterTable, parameter_value
from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS, STATUS_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled

_WARN_THROTTLE_S = 2.0           # s between repeated warnings of one kind
_BUS_ERROR_THROTTLE_S = 30.0     # s between repeated "bus not ready" errors (retried every <= 2 s)
_BUS_NOT_READY = "bus not ready"  # prefix of the supervisor's repeated connect error
# Parameters that decide how the robot stops or arms: refused at run time while torque is on.
_SAFETY_PARAMETERS = ("auto_arm", "arming_speed", "command_timeout_s", "timeout_reaction", "fault_reaction",
                      "exit_reaction", "max_consecutive_failures", "bus_loss_timeout_s", "health_rate_hz",
                      "tracking_tolerance_rad", "tracking_lag_s", "tracking_time_s")
_TORQUE_ON_STATES = (BridgeState.ARMING, BridgeState.ARMED, BridgeState.HOLDING)
_DIAG_PERIOD_S = 0.5             # s between diagnostics messages
# Bus counters whose growth since the last report makes the bus entry WARN (retried or late answers).
_TROUBLE_COUNTERS = ("timeouts", "crc_errors", "stale_packets")
_OK, _WARN, _ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR

PARAMETERS = ParameterTable("bridge_node", [
    # dynamixel by default, as config/bridge.yaml: disarmed until ~/arm, and a missing robot is reported
    # (disconnected) instead of an emulator silently standing in for it.
    Param("backend", "dynamixel", "actuators: " + " or ".join(f"{name} ({b.summary})" for name, b in BACKENDS.items()),
          choices=BACKEND_NAMES, read_only=True),
    Param("auto_arm", False, "arm by itself when the bus becomes ready (start-up, reconnect) unless e-stopped; "
          "when not given: " + ", ".join(f"{str(b.auto_arm).lower()} for {name}" for name, b in BACKENDS.items())),
    Param("arming_speed", 0.3, "on arming, goals close the gap to the commanded pose at most this fast, rad/s",
          lo=0.01, hi=10.0),
    Param("robot", "tsnake", "robot name in config/robots or a YAML path", read_only=True),
    Param("port", "", "serial device; empty: the robot YAML's bus.port", read_only=True),
    Param("baud_rate", 0, "bps; 0: the robot YAML's bus.baud_rate", lo=0, hi=4_500_000, read_only=True),
    Param("rate_hz", 100.0, "loop rate, Hz", lo=1.0, hi=1000.0, read_only=True),
    Param("health_rate_hz", 2.0, "health poll rate, Hz", lo=0.1, hi=50.0),
    Param("command_timeout_s", 0.5, "s without joint_commands before timeout_reaction; 0 disables",
          lo=0.0, hi=60.0),
    Param("timeout_reaction", "hold", "on a command timeout: hold the last goals or torque off",
          choices=TIMEOUT_REACTIONS),
    Param("fault_reaction", "hold", "on a servo hardware error or a tracking fault: hold the last goals or torque "
          "off (servos another program wrote go limp whatever this says)", choices=TIMEOUT_REACTIONS),
    Param("exit_reaction", "torque_off", "on shutdown: hold the last goals or torque off", choices=TIMEOUT_REACTIONS),
    Param("max_consecutive_failures", 5, "failed cycles in a row before ERROR, torque off and reconnect "
          "(together with bus_loss_timeout_s)", lo=1, hi=1000),
    Param("bus_loss_timeout_s", 0.5, "s of failed cycles in a row before ERROR, torque off and reconnect "
          "(together with max_consecutive_failures; a gone device faults at once)", lo=0.0, hi=5.0),
    Param("tracking_tolerance_rad", 0.5, "tracking envelope: largest distance of a joint from the goals written in "
          "the last tracking_lag_s, rad", lo=0.01, hi=3.2),
    Param("tracking_lag_s", 0.25, "tracking envelope: how far back written goals count (the servo's lag), s",
          lo=0.01, hi=5.0),
    Param("tracking_time_s", 0.5, "tracking envelope: longest time a joint may stay beyond the tolerance "
          "before FAULT, s", lo=0.0, hi=5.0),
    Param("retries", 2, "extra attempts per bus transaction", lo=0, hi=10, read_only=True),
    Param("latency_ms", 1.0, "USB adapter latency timer, ms", lo=0.0, hi=50.0, read_only=True),
    Param("return_delay_us", 0, "Return Delay Time written to every servo, us", lo=0, hi=508, read_only=True),
    Param("profile_velocity", 0.0, "servo Profile Velocity, rad/s; 0: none", lo=0.0, hi=20.0, read_only=True),
    Param("watchdog_s", 0.1, "Bus Watchdog timeout, s; 0 disables", lo=0.0, hi=2.54, read_only=True),
    Param("rt_priority", 50, "SCHED_FIFO priority of the bus loop's thread and the process's others (1-99; "
          "50 as ros2_control's controller_manager); 0: the normal scheduler. "
          "Where the process may not, one warning and the loop runs at normal priority", lo=0, hi=99,
          read_only=True),
    Param("cpu_affinity", [], "CPUs the bus loop's thread may run on; empty: any", item=int, read_only=True),
], summary="The hardware bridge: joint_commands in, joint_states and diagnostics out; a safety state machine "
           "(arm, disarm, e-stop, clear-e-stop, reboot services) around Dynamixel servos or their emulator.")


class BridgeNode(StackNode):
    """ROS side of the hardware bridge (see the module docstring)."""

    def __init__(self) -> None:
        """Declare parameters, build the backend and its supervisor, start the loop."""
        super().__init__("bridge_node")
        p = self._declare_parameters()
        self._robot = load_robot(p["robot"])
        self._filter = JointTargetFilter(self._robot.joints)
        self._rate = RateMeter()
        self._lateness = CycleLateness(1.0 / p["rate_hz"])
        built = make_backend(p["backend"], self._robot, _bus_options(p))
        self._backend, self._emulator = built.backend, built.emulator
        # After the backend: this thread, which spins the executor and so runs the bus loop, and the threads
        # started before it (DDS's, the in-process emulator's, which stands in for servos that wait for no computer).
        self._apply_realtime(p["rt_priority"], p["cpu_affinity"])
        self._log_calibration(p["backend"], real=built.emulator is None)
        self._supervisor = Supervisor(self._backend, self._robot.joints, _supervisor_config(p), log=self._log)
        self._last_diag = -math.inf
        self._last_counters: dict[str, int] = {}
        self._last_late = 0

        self._pub_states = self.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
        self._pub_diag = self.create_publisher(DiagnosticArray, "diagnostics", STATUS_QOS)
        self._pub_battery = self.create_publisher(BatteryState, "battery_state", SENSOR_PUB_QOS)
        self._commanders = CommanderWatch(self, "joint_commands", self._on_commanders)
        self.create_subscription(JointState, "joint_commands", self._on_command, COMMAND_QOS,
                                 event_callbacks=self._commanders.event_callbacks)
        self.create_service(Trigger, "~/arm", self._on_arm)
        self.create_service(Trigger, "~/disarm", self._on_disarm)
        self.create_service(SetBool, "~/torque", self._on_torque)
        self.create_service(Trigger, "~/emergency_stop", self._on_estop)
        self.create_service(Trigger, "~/clear_estop", self._on_clear_estop)
        self.create_service(Trigger, "~/reboot", self._on_reboot)
        self.create_service(Trigger, "~/status", self._on_status)
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)
        self._supervisor.step(time.monotonic())  # open the bus now (auto_arm arms here)
        if self._supervisor.state is BridgeState.DISARMED:
            self.get_logger().info(
                f"DISARMED: torque off; to arm: snake robot arm --bridge {self.get_fully_qualified_name()} "
                f"(or: ros2 service call {self.get_fully_qualified_name()}/arm std_srvs/srv/Trigger)")
        self._timer = self.create_timer(1.0 / p["rate_hz"], self._cycle)

    def _apply_realtime(self, priority: int, cpus: list[int]) -> None:
        """Real-time priority and CPUs for this thread (it spins the executor: the bus loop); a warning where not.

        The priority also goes to the threads the process started before (DDS's): one of them
        starved by a busy computer kept the loop waiting as long (docs/hardware.md).
        """
        if priority <= 0 and not cpus:
            return
        problems = apply_realtime(priority, cpus)
        if priority > 0 and not any(p.startswith("rt_priority") for p in problems):
            problems += apply_realtime_to_process(priority)
        for problem in problems:
            self.get_logger().warning(problem)
        self.get_logger().info(f"bus loop: {scheduling()}")

    def _log_calibration(self, backend: str, real: bool) -> None:
        """One INFO line naming the calibration target and its file; a WARN when real servos run on the twin's."""
        self.get_logger().info(describe_calibration(self._robot.name))
        if real and calibration_target() == DEFAULT_CALIBRATION_TARGET:
            self.get_logger().warning(
                f"backend {backend} drives real servos with the twin's calibration {DEFAULT_CALIBRATION_TARGET!r}: "
                f"set {CALIBRATION_TARGET_ENV}=<robot target> (and gait_node's calibration_target) to use "
                f"config/calibration/{self._robot.name}/<robot target>.yaml, written by snake bag calibrate")

    # --- parameters -------------------------------------------------------------------------
    def _declare_parameters(self) -> dict[str, Any]:
        """Declare the table's parameters; ``auto_arm`` not given follows the backend."""
        p = PARAMETERS.declare(self)
        if "auto_arm" not in self._parameter_overrides:  # neither -p nor a params file set it
            p["auto_arm"] = BACKENDS[p["backend"]].auto_arm
            self.set_parameters([Parameter("auto_arm", value=p["auto_arm"])])
        return p

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        reason = self._run_time_guard(params) or PARAMETERS.check({prm.name: prm.value for prm in params})
        if reason is None:
            try:
                self._config({prm.name: prm.value for prm in params}).validate()
            except ValueError as err:
                reason = str(err)
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _run_time_guard(self, params: list[Parameter]) -> str | None:
        """Why a run-time change of a safety setting is refused, or None.

        The deadman (``command_timeout_s``) cannot be switched off at run time, and no safety
        setting changes while any servo may hold torque: ARMING, ARMED, HOLDING, and FAULT with
        ``fault_reaction: hold`` (servos stiff). Disarm first (or reboot the faulted servos).
        """
        state = self._supervisor.state
        changed = sorted(prm.name for prm in params if prm.name in _SAFETY_PARAMETERS)
        if changed and (state in _TORQUE_ON_STATES or self._supervisor.torque_on):
            way_out = "call ~/disarm first" if state in _TORQUE_ON_STATES else "call ~/disarm or ~/reboot first"
            return f"{changed[0]} is a safety setting: refused while {state.value} with torque on; {way_out}"
        for prm in params:
            if prm.name == "command_timeout_s" and prm.value == 0:
                return "command_timeout_s: 0 (no deadman) is only accepted at start-up"
        return None

    def _apply_parameters(self, params: list[Parameter]) -> None:
        self._supervisor.configure(self._config({}))

    def _config(self, changes: dict[str, Any]) -> SupervisorConfig:
        """The supervisor's settings from the current parameters with ``changes`` applied."""
        return _supervisor_config({name: changes[name] if name in changes else parameter_value(self, name)
                                   for name in PARAMETERS.names})

    def _log(self, level: str, text: str) -> None:
        """Log sink of the supervisor (which throttles its repeated lines itself)."""
        logger = self.get_logger()
        if level == "info":  # one call site per severity (rclpy ties a call site to its severity)
            logger.info(text)
        elif level == "warning":
            logger.warning(text)
        elif text.startswith(_BUS_NOT_READY):  # a missing port retries for ever: say so rarely
            log_throttled(logger, text, _BUS_ERROR_THROTTLE_S, LoggingSeverity.ERROR)
        else:
            logger.error(text)

    # --- loop -------------------------------------------------------------------------------------
    def _cycle(self) -> None:
        now = time.monotonic()
        self._rate.tick(now)
        self._lateness.tick(now)
        try:
            reading = self._supervisor.step(now)
        except Exception as err:  # never let one bad cycle kill the node: report and go on
            log_throttled(self.get_logger(), f"unexpected error in the bridge loop: {err!r}", _WARN_THROTTLE_S,
                          LoggingSeverity.ERROR)
            reading = None
        if reading is not None:
            self._publish_states(reading)
        self._maybe_diagnostics(now)

    def _publish_states(self, reading: JointReading) -> None:
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
        if cmd is not None and cmd.targets:
            self._supervisor.on_command(cmd.targets, time.monotonic())

    def _on_commanders(self, crowd: str) -> None:
        """More than one writer matched on joint_commands: hold and ignore commands until one is left."""
        if crowd:
            why = f"{crowd}: holding the last goals until one commander is left"
            self.get_logger().warning(why)
            self._supervisor.refuse_commands(why)
        else:
            self._supervisor.accept_commands()

    def _other_commanders(self) -> str | None:
        """Why arming is refused because several nodes publish joint_commands, or None."""
        topic = self.resolve_topic_name("joint_commands")
        publishers = self.get_publishers_info_by_topic(topic)
        if len(publishers) <= 1:
            return None
        names = ", ".join(node_names(publishers))
        return f"refused: {len(publishers)} publishers on {topic} ({names}); one commander at a time"

    def _duplicate(self) -> str | None:
        """Why arming is refused because another node of this name runs on the graph, or None."""
        me = (self.get_name(), self.get_namespace())
        count = sum(1 for pair in self.get_node_names_and_namespaces() if pair == me)
        if count <= 1:
            return None
        return (f"refused: {count} nodes named {self.get_fully_qualified_name()} run; one bridge per name "
                "(stop the other)")

    def _arm_refusal(self) -> str | None:
        """Why arming is refused by the graph (a duplicate bridge, several commanders), or None."""
        return self._duplicate() or self._other_commanders()

    def _on_arm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        crowd = self._arm_refusal()
        if crowd is not None:
            response.success, response.message = False, crowd
            return response
        return _answer(response, self._supervisor.arm())

    def _on_disarm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self._supervisor.disarm())

    def _on_torque(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        crowd = self._arm_refusal() if request.data else None
        if crowd is not None:
            response.success, response.message = False, crowd
            return response
        outcome = self._supervisor.arm("torque true") if request.data else self._supervisor.disarm("torque false")
        return _answer(response, outcome)

    def _on_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self._supervisor.emergency_stop())

    def _on_clear_estop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self._supervisor.clear_estop())

    def _on_reboot(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        return _answer(response, self._supervisor.reboot())

    def _on_status(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        sup = self._supervisor
        response.success = True
        response.message = json.dumps({"state": sup.state.value, "reason": sup.reason, "torque": sup.torque_on,
                                       "connected": sup.connected, "faulted": list(sup.faulted),
                                       "foreign": sorted(sup.foreign),
                                       "registers_not_taken": dict(self._backend.register_mismatches),
                                       "needs_reboot": {j.name: j.servo_id for j in self._robot.joints
                                                        if j.name in sup.faulted or j.name in sup.foreign
                                                        or j.name in self._backend.register_mismatches}})
        return response

    # --- diagnostics ----------------------------------------------------------------------------------
    def _maybe_diagnostics(self, now: float) -> None:
        if now - self._last_diag < _DIAG_PERIOD_S:
            return
        self._last_diag = now
        sup = self._supervisor
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        bus = DiagnosticStatus(name="bridge: bus", hardware_id=str(self.get_parameter("backend").value))
        state = sup.state
        counters = sup.counters.as_dict()
        troubles = {k: counters.get(k, 0) - self._last_counters.get(k, 0) for k in _TROUBLE_COUNTERS}
        troubles = {k: n for k, n in troubles.items() if n > 0}
        late = self._lateness.late - self._last_late  # counted until a report says them
        self._last_counters = counters
        if not sup.connected:
            bus.level, bus.message = _ERROR, f"disconnected: {sup.bus_error or sup.reason}"
        elif state is BridgeState.FAULT:
            bus.level, bus.message = _ERROR, f"FAULT: {sup.reason}"
        elif sup.failed_cycles:
            bus.level, bus.message = _WARN, f"{sup.failed_cycles} failed cycles in a row"
        elif state in (BridgeState.HOLDING, BridgeState.ESTOPPED):
            bus.level, bus.message = _WARN, f"{state.value}: {sup.reason}"
        elif troubles:  # every cycle went through, but only after retries or with late answers
            bus.level = _WARN
            bus.message = f"{state.value}: bus trouble since the last report: " + ", ".join(
                f"{n} {k.replace('_', ' ')}" for k, n in troubles.items())
        elif late > 0:  # the computer kept the loop waiting
            self._last_late = self._lateness.late
            bus.level = _WARN
            bus.message = (f"{state.value}: {late} late cycles since the last report (worst "
                           f"{self._lateness.worst_s * 1e3:.0f} ms late): a busy computer; rt_priority and "
                           "cpu_affinity give the loop precedence")
        else:
            bus.level, bus.message = _OK, f"{state.value}: {sup.reason}"
        values = {"state": state.value, **counters, "failed_cycles": sup.failed_cycles,
                  "loop_rate_hz": f"{self._rate.hz:.1f}", "rate_hz": str(self.get_parameter("rate_hz").value),
                  "torque": str(sup.torque_on), "command_state": sup.command_state.value,
                  "arming_gap_rad": f"{sup.arming_gap:.4f}", "rejected_goals": sup.rejected_goals,
                  "hardware_errors": " ".join(sup.faulted), "foreign_settings": " ".join(sorted(sup.foreign)),
                  "health_polls": sup.health_polls, "late_cycles": self._lateness.late,
                  "worst_late_ms": f"{self._lateness.worst_s * 1e3:.1f}",
                  "cycle_p99_ms": f"{self._lateness.p99_s * 1e3:.1f}"}
        bus.values = [KeyValue(key=k, value=str(v)) for k, v in values.items()]
        arr.status.append(bus)
        health = {h.name: h for h in sup.health}
        foreign = sup.foreign
        untaken = self._backend.register_mismatches
        describe = self._backend.describe_hardware_error
        for j in self._robot.joints:
            st = DiagnosticStatus(name=f"bridge: {j.name}", hardware_id=f"dynamixel id {j.servo_id}")
            h = health.get(j.name)
            if h is None:
                st.level, st.message = (_WARN if sup.connected else _ERROR), "no health data yet"
            elif h.rebooting:
                st.level, st.message = _WARN, "rebooting"
            elif h.hardware_error < 0:
                st.level, st.message = _ERROR, "no answer"
            elif h.hardware_error > 0:
                st.level, st.message = _ERROR, f"hardware error: {describe(h.hardware_error)}"
            elif j.name in foreign:
                st.level, st.message = _ERROR, f"not written by the bridge: {foreign[j.name]}; ~/reboot restores"
            elif j.name in untaken:
                st.level, st.message = _ERROR, f"registers did not take: {untaken[j.name]}; ~/reboot writes them again"
            elif h.goal_refused:
                st.level, st.message = _ERROR, "goal refused by the servo (outside its range?)"
            elif h.pending_error:
                st.level, st.message = _WARN, f"unconfirmed error bits: {describe(h.pending_error)}"
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
        self._publish_battery(health.values() if sup.connected else ())

    def _publish_battery(self, health: Any) -> None:
        """``battery_state``: the servos' supply voltage (median of their readings; NaN when none answered)."""
        msg = BatteryState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.voltage = supply_voltage(health)
        for name in ("temperature", "current", "charge", "capacity", "design_capacity", "percentage"):
            setattr(msg, name, math.nan)   # unknown (BatteryState: NaN where not measured)
        msg.power_supply_status = BatteryState.POWER_SUPPLY_STATUS_UNKNOWN
        msg.power_supply_health = BatteryState.POWER_SUPPLY_HEALTH_UNKNOWN
        msg.power_supply_technology = BatteryState.POWER_SUPPLY_TECHNOLOGY_UNKNOWN
        msg.present = True
        self._pub_battery.publish(msg)

    # --- shutdown -----------------------------------------------------------------------------------------
    def shutdown_safely(self) -> str:
        """Leave the servos safe (``exit_reaction``: torque off, or hold the last goals); close the bus.

        Returns:
            What the servos were left in, for the node's exit line.
        """
        reaction = str(self.get_parameter("exit_reaction").value)
        sup = self._supervisor
        connected, torque_on, state = sup.connected, sup.torque_on, sup.state.value
        left = ""
        try:
            error = self._supervisor.shutdown(reaction)
            if error:
                self.get_logger().error(f"safe shutdown incomplete: {error}")
            left = _left_in(reaction, connected, torque_on, error, state)
            arr = DiagnosticArray()
            arr.header.stamp = self.get_clock().now().to_msg()
            arr.status = [DiagnosticStatus(
                level=_ERROR if error else DiagnosticStatus.STALE, name="bridge: bus",
                hardware_id=str(self.get_parameter("backend").value),
                message=f"stopped: bridge exiting, {reaction}" + (f" incomplete: {error}" if error else ""))]
            self._pub_diag.publish(arr)
        finally:
            if self._emulator is not None:
                self._emulator.stop()
        return left

    @property
    def supervisor(self) -> Supervisor:
        """The safety state machine."""
        return self._supervisor

    @property
    def emulator(self) -> ServoBusEmulator | None:
        """The in-process emulator of the ``emulated`` backend (None otherwise)."""
        return self._emulator


def _left_in(reaction: str, connected: bool, torque_on: bool, error: str, state: str) -> str:
    """What the servos were left in on exit, in words."""
    if not connected:
        return f"servos not reached (bus not connected, {state}): the Bus Watchdog stops any that held torque"
    if error:
        return f"servos in an unknown state: {reaction} failed ({error}); the Bus Watchdog stops them"
    if reaction == "torque_off":
        return f"servos left torque off (was {state})"
    if torque_on:
        return f"servos left holding their last goals, torque on (was {state}; the Bus Watchdog stops them)"
    return f"servos left torque off (exit_reaction hold, but they were limp: {state})"


def _answer(response: Any, outcome: Outcome) -> Any:
    """Fill a Trigger/SetBool response from an :class:`Outcome`."""
    response.success, response.message = outcome.accepted, outcome.message
    return response


def _bus_options(p: dict[str, Any]) -> BusOptions:
    """The backend's bus settings from the node's parameters."""
    return BusOptions(port=p["port"], baud_rate=p["baud_rate"], retries=p["retries"], latency_ms=p["latency_ms"],
                      return_delay_us=p["return_delay_us"], profile_velocity=p["profile_velocity"],
                      watchdog_s=p["watchdog_s"])


def _supervisor_config(p: dict[str, Any]) -> SupervisorConfig:
    """The supervisor's settings from the node's parameters."""
    return SupervisorConfig(
        period_s=1.0 / p["rate_hz"], arming_speed=p["arming_speed"], auto_arm=p["auto_arm"],
        command_timeout_s=p["command_timeout_s"], timeout_reaction=p["timeout_reaction"],
        fault_reaction=p["fault_reaction"], max_consecutive_failures=p["max_consecutive_failures"],
        health_period_s=1.0 / p["health_rate_hz"], bus_loss_timeout_s=p["bus_loss_timeout_s"],
        tracking_tolerance_rad=p["tracking_tolerance_rad"], tracking_lag_s=p["tracking_lag_s"],
        tracking_time_s=p["tracking_time_s"])


def main(args: list[str] | None = None) -> int:
    """Run the bridge until Ctrl-C; the servos are left safe on the way out."""
    return run_node(BridgeNode, args, on_exit=BridgeNode.shutdown_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
