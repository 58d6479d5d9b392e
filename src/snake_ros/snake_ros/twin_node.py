"""Twin node: the MuJoCo simulated twin behind the bridge's interface.

Same command interface as ``bridge_node``: subscribes ``joint_commands``
(sensor_msgs/JointState, matched by name; NaN, absurd (beyond
:data:`snake_hardware.command.ABSURD_TARGET_RAD`) and unknown entries dropped per joint
with a throttled warning before anything reaches MuJoCo, the rest clamped to the YAML
limits by :class:`snake_hardware.command.JointTargetFilter`), publishes ``joint_states``
(same QoS as the bridge). The twin starts with torque on (unattended runs need no ``arm``
call); ``~/torque`` (std_srvs/SetBool, as the bridge's) switches it: false leaves every
joint limp as a servo with torque off is (no actuator force, no back-EMF; the gear's
inertia and friction remain: :meth:`snake_hardware.sim.twin.SimTwin.set_torque`), true
holds each joint where it is. The servos' gains and torque limit are those of their servo
models at ``supply_voltage`` (:mod:`snake_core.twin_params`); the twin publishes that
voltage as the bridge publishes its servos' Present Input Voltage:

- ``battery_state`` (sensor_msgs/BatteryState, :data:`_BATTERY_RATE_HZ` of simulated time):
  ``voltage`` the servos' supply voltage (the median over the servos, as the bridge's),
  ``present`` true, every quantity the twin does not model NaN.

In addition:

- ``/clock`` (rosgraph_msgs/Clock): the simulated time; run the other nodes with
  ``use_sim_time:=true``;
- ``ground_truth/head_pose``, ``ground_truth/base_pose`` (geometry_msgs/PoseStamped,
  frame ``world``): the head rigid body and the root body (free joint) of the model;
- ``mocap/head_pose`` (geometry_msgs/PoseStamped, frame ``world``, as vrpn_mocap publishes
  a rigid body) and ``mocap/markers`` (geometry_msgs/PoseArray: the three head markers,
  orientation identity), from :class:`snake_core.following.synthetic_mocap.MocapModel` (noise,
  latency, dropouts; its whole-frame outliers stay off here; nothing is published for a lost sample);
- ``/tf`` (``publish_tf``, where tf2_msgs is installed): ``world -> base_frame`` (the URDF's root
  link, the head) from the ground truth, with the joint states.

With ``viewer`` the twin opens MuJoCo's own passive viewer (``mujoco.viewer.launch_passive``)
and syncs it every control period; without a display (no ``DISPLAY`` or ``WAYLAND_DISPLAY``)
it warns once and runs headless.

Every message is stamped with the simulated time. The node's own loop runs on a steady
(wall) clock, so it never waits on the clock it publishes. Modes (``mode``):
``realtime``; ``fast`` (``speed_factor`` x real time, as far as the machine keeps up);
``lockstep`` (exactly one control period per received ``joint_commands`` message, the
targets of that message applied first: deterministic tests). With ``lockstep_prime``
the twin runs one period at start-up without a command, so that a controller whose timer
runs on ``/clock`` (the gait node with ``use_sim_time``) gets its first tick; from then on
its commands and the twin's periods alternate one for one. Until the first command
arrives the priming period is repeated every ``_PRIME_RETRY_S`` of wall time: a first
command published before the twin's subscription was matched would otherwise be lost and
leave both sides waiting for each other. A command timeout (in
simulated time) holds the last targets. ``~/pause`` (std_srvs/SetBool: true pauses, false
resumes; ``start_paused`` starts paused) stops the simulated time: no period runs (the
clock is re-published unchanged), a command received meanwhile sets the targets and, in
lock-step, its period runs on resume (a primed lock-step twin with no command yet primes
then). Start a
recorder and the controller against a paused twin, then resume: the recording holds the run
from its first period. One commander at a time: while the
``joint_commands`` subscription has matched more than one writer, commands are ignored
(the last targets held; in ``lockstep`` the simulation waits) with a throttled warning
naming the publishers. Physics and measurement models live in
:mod:`snake_hardware.sim`; this file only wires them to ROS.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose, PoseArray, PoseStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.logging import LoggingSeverity
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import BatteryState, JointState
from std_srvs.srv import SetBool

from snake_core.control import CONTROL_PERIOD_S, CONTROL_RATE_HZ
from snake_core.following.synthetic_mocap import MocapConfig, MocapConfigError, MocapModel
from snake_core.frames import pose_to_transform
from snake_core.robot import load_robot, load_twin_params
from snake_hardware.command import CommandTimeout, JointTargetFilter
from snake_hardware.sim.mjcf import SimOptions
from snake_hardware.sim.twin import SimTwin
from snake_ros.joint_commands import CommanderWatch, filter_joint_command
from snake_ros.parameters import Param, ParameterTable
from snake_ros.qos import COMMAND_QOS, SENSOR_PUB_QOS
from snake_ros.runtime import run_node
from snake_ros.stack_node import StackNode
from snake_ros.throttled_log import log_throttled
from snake_ros.transforms import TfPublisher

_MODES = ("realtime", "fast", "lockstep")
_FRAME = "world"
_WARN_THROTTLE_S = 2.0       # s (wall) between repeated warnings of one kind
_MIN_WALL_TICK_S = 0.002     # s, shortest period of the pacing timer (fast mode)
_MAX_CATCH_UP = 25           # control periods run in one timer callback before giving up on the backlog
_LOCKSTEP_CLOCK_S = 0.1      # s (wall), lock-step: re-publish the (unchanged) /clock for late joiners
_PRIME_RETRY_S = 1.0         # s (wall), primed lock-step: repeat the priming period until a first command
_BATTERY_RATE_HZ = 2.0       # Hz of simulated time, battery_state (the bridge's default health poll rate)
_MOCAP_PARAMS = {            # ROS parameter -> MocapConfig field
    "mocap_position_noise_m": "position_noise_m",
    "mocap_orientation_noise_rad": "orientation_noise_rad",
    "mocap_latency_s": "latency_s",
    "mocap_dropout_probability": "dropout_probability",
    "mocap_dropout_burst_s": "dropout_burst_s",
}
_LIVE = {"speed_factor", "command_timeout_s", *_MOCAP_PARAMS}


PARAMETERS = ParameterTable("twin_node", [
    Param("robot", "tsnake", "robot name in config/robots or a YAML path", read_only=True),
    Param("world", "flat", "world name in config/worlds or a YAML path", read_only=True),
    Param("calibration_target", "", "calibration target whose twin: block sets the servo and contact model: "
          "config/calibration/<robot>/<target>.yaml ('': $SNAKE_CALIBRATION_TARGET, else twin)", read_only=True),
    Param("supply_voltage", 0.0, "servo supply voltage, V: sets the servos' gains and torque limit (their servo "
          "models' motor equation) and battery_state's voltage; 0: each servo model's nominal voltage",
          lo=0.0, hi=48.0, read_only=True),
    Param("lifted", False, "the robot held by its head off the ground, contacts off (identifying its servos: "
          "snake twin excite --variant lifted)", read_only=True),
    Param("mode", "realtime", "pacing of the simulation", choices=_MODES, read_only=True),
    Param("start_paused", False, "start with the simulated time stopped until ~/pause false", read_only=True),
    Param("speed_factor", 5.0, "fast mode: simulated s per wall s", lo=0.01, hi=1000.0),
    Param("lockstep_prime", False, "lockstep: run one period at start-up so a /clock-driven controller ticks "
          "first", read_only=True),
    Param("control_dt", CONTROL_PERIOD_S, "control period, s (whole physics steps of 4 ms); lockstep advances "
          "this much per command", lo=0.001, hi=0.5, read_only=True),
    Param("state_rate_hz", float(CONTROL_RATE_HZ), "joint_states and ground truth rate, Hz of simulated time "
          "(rounded to whole control periods)", lo=0.1, hi=1000.0, read_only=True),
    Param("mocap_rate_hz", float(CONTROL_RATE_HZ), "motion capture rate, Hz of simulated time (rounded to whole "
          "control periods); 0: off", lo=0.0, hi=1000.0, read_only=True),
    Param("seed", 0, "seed of spawn jitter and motion-capture noise", lo=0, hi=2**31 - 1, read_only=True),
    Param("command_timeout_s", 0.5, "simulated s without joint_commands before warning and holding the last "
          "targets; 0: never", lo=0.0, hi=3600.0),
    Param("mocap_position_noise_m", 0.0005, "mocap position noise std, m", lo=0.0, hi=1.0),
    Param("mocap_orientation_noise_rad", 0.002, "mocap orientation noise std per axis, rad", lo=0.0, hi=1.0),
    Param("mocap_latency_s", 0.0, "mocap latency, s (rounded up to control periods)", lo=0.0, hi=10.0),
    Param("mocap_dropout_probability", 0.0, "probability that a sample starts a dropout", lo=0.0, hi=0.99),
    Param("mocap_dropout_burst_s", 0.0, "mean dropout duration, s (0: single samples)", lo=0.0, hi=60.0),
    Param("publish_tf", True, "publish world -> base_frame on /tf from the ground truth (needs tf2_msgs)",
          read_only=True),
    Param("base_frame", "head", "the robot model's root link", read_only=True),
    Param("viewer", False, "open MuJoCo's passive viewer (needs a display; headless: one warning)",
          read_only=True),
], summary="The MuJoCo twin: joint_commands in (the bridge's interface); /clock, joint_states, ground truth "
           "and synthetic motion capture out.")


def _stamp(t: float) -> Time:
    """Simulated time t (s) as a message time."""
    ns = round(t * 1e9)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _pose(position: np.ndarray, quat_wxyz: np.ndarray) -> Pose:
    p = Pose()
    p.position.x, p.position.y, p.position.z = (float(v) for v in position)
    p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (float(v) for v in quat_wxyz)
    return p


def _every(rate_hz: float, period_s: float) -> int:
    """Publish every k control periods for a rate (Hz, simulated time); rate <= 0: never."""
    return max(1, round(1.0 / (rate_hz * period_s))) if rate_hz > 0 else 0


class TwinNode(StackNode):
    """ROS side of the simulated twin (see the module docstring).

    Raises:
        SnakeCoreError: A bad robot or world file (the message names the file and field).
        MocapConfigError, ValueError: A bad parameter (named).
    """

    def __init__(self) -> None:
        """Declare parameters, build the simulation, start the loop."""
        super().__init__("twin_node")
        p = PARAMETERS.declare(self)
        self._mode = p["mode"]
        self._speed = float(p["speed_factor"])
        robot = load_robot(p["robot"])
        twin_params, twin_file = load_twin_params(robot, p["calibration_target"] or None,
                                                  must_exist=bool(p["calibration_target"]))
        twin_params = twin_params.at_voltage(float(p["supply_voltage"]) or None)
        self._voltage = float(np.median(twin_params.servo_voltages(robot.joints)))
        self.get_logger().info(f"twin physics of {robot.name}: "
                               + (f"{twin_file}" if twin_file is not None else "defaults (no calibration file)")
                               + f"; servos at {self._voltage:g} V"
                               + ("" if p["supply_voltage"] else " (their servo models' nominal voltage)"))
        self.twin = SimTwin(robot, p["world"], control_dt=p["control_dt"], twin_params=twin_params,
                            options=SimOptions(lifted=bool(p["lifted"])))
        self.twin.reset(seed=p["seed"])
        self._period = self.twin.substeps * self.twin.timestep  # s, the control period actually run
        self._mocap_rate = 1.0 / (self._period * max(1, _every(p["mocap_rate_hz"], self._period)))
        self._mocap = MocapModel(self._mocap_config(p), np.random.default_rng(p["seed"]))
        self._state_every = _every(p["state_rate_hz"], self._period)
        self._battery_every = _every(_BATTERY_RATE_HZ, self._period)
        self._mocap_every = _every(p["mocap_rate_hz"], self._period)
        self._filter = JointTargetFilter(self.twin.robot.joints)
        self._timeout = CommandTimeout(p["command_timeout_s"], "hold")
        self._periods = 0
        self._commands = 0           # joint_commands messages received
        self._primed_at = -math.inf  # wall time (monotonic, s) of the last priming period
        self._prime = bool(p["lockstep_prime"])
        self._paused = bool(p["start_paused"])
        self._owed = False  # lock-step: a command arrived while paused, its period not run

        self._pub_clock = self.create_publisher(ClockMsg, "/clock", SENSOR_PUB_QOS)
        self._pub_states = self.create_publisher(JointState, "joint_states", SENSOR_PUB_QOS)
        self._pub_gt_head = self.create_publisher(PoseStamped, "ground_truth/head_pose", SENSOR_PUB_QOS)
        self._pub_gt_base = self.create_publisher(PoseStamped, "ground_truth/base_pose", SENSOR_PUB_QOS)
        self._pub_mocap = self.create_publisher(PoseStamped, "mocap/head_pose", SENSOR_PUB_QOS)
        self._pub_markers = self.create_publisher(PoseArray, "mocap/markers", SENSOR_PUB_QOS)
        self._pub_battery = self.create_publisher(BatteryState, "battery_state", SENSOR_PUB_QOS)
        self._commanders = CommanderWatch(self, "joint_commands", self._on_commanders)
        self.create_subscription(JointState, "joint_commands", self._on_command, COMMAND_QOS,
                                 event_callbacks=self._commanders.event_callbacks)
        self._tf = TfPublisher(self) if p["publish_tf"] else None
        self._base_frame = str(p["base_frame"])
        self._viewer = self._open_viewer() if p["viewer"] else None
        self.create_service(SetBool, "~/pause", self._on_pause)
        self.create_service(SetBool, "~/torque", self._on_torque)
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._publish_all()
        if self._mode == "lockstep":
            self._lockstep_idle()
            self.create_timer(_LOCKSTEP_CLOCK_S, self._lockstep_idle, clock=steady)
        else:
            self._wall0: float | None = None  # set by the first pacing tick
            self._done0 = 0
            self.create_timer(self._wall_tick(), self._pace, clock=steady)
        self.get_logger().info(
            f"twin of {self.twin.robot.name} in world {p['world']!r}{' (lifted)' if p['lifted'] else ''}: {self._mode}"
            f"{f' x{self._speed:g}' if self._mode == 'fast' else ''}, control period {self._period * 1e3:.0f} ms, "
            f"{len(self.twin.joint_names)} joints{', paused (~/pause false resumes)' if self._paused else ''}")

    def _open_viewer(self) -> Any:
        """MuJoCo's passive viewer on the twin's model, or None (with one warning) without a display."""
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            self.get_logger().warning("viewer: no display (DISPLAY and WAYLAND_DISPLAY unset): running without "
                                      "the MuJoCo viewer")
            return None
        try:
            import mujoco.viewer

            return mujoco.viewer.launch_passive(self.twin.model, self.twin.data)
        except Exception as err:  # any GUI failure (GLFW, X server) leaves the simulation running
            self.get_logger().warning(f"viewer: cannot open the MuJoCo viewer ({err}): running without it")
            return None

    # --- parameters -------------------------------------------------------------------------
    def _mocap_config(self, p: dict[str, Any]) -> MocapConfig:
        return MocapConfig(**{field: float(p[name]) for name, field in _MOCAP_PARAMS.items()},
                           rate_hz=self._mocap_rate)

    def _current(self) -> dict[str, Any]:
        return {n: self.get_parameter(n).value for n in PARAMETERS.names}

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        changes = {prm.name: prm.value for prm in params}
        fixed = sorted(set(changes) - _LIVE)
        reason = f"{fixed[0]} is fixed at start-up" if fixed else PARAMETERS.check(changes)
        if reason is None:
            try:
                self._mocap_config({**self._current(), **changes})
            except MocapConfigError as err:
                reason = f"mocap_{err}"
        return SetParametersResult(successful=reason is None, reason=reason or "")

    def _apply_parameters(self, params: list[Parameter]) -> None:
        current = self._current()
        self._mocap.config = self._mocap_config(current)
        self._timeout.timeout_s = float(current["command_timeout_s"])
        if float(current["speed_factor"]) != self._speed:
            self._rebase()
            self._speed = float(current["speed_factor"])

    # --- loop -------------------------------------------------------------------------------
    def _wall_tick(self) -> float:
        rate = 1.0 if self._mode == "realtime" else self._speed
        return max(self._period / rate, _MIN_WALL_TICK_S)

    def _rebase(self) -> None:
        """Pace from now on (after a speed change or a backlog that cannot be caught up)."""
        self._wall0 = time.monotonic()
        self._done0 = self._periods

    def _pace(self) -> None:
        rate = 1.0 if self._mode == "realtime" else self._speed
        if self._paused:
            self._wall0 = None  # paced afresh from the resume
            self._pub_clock.publish(ClockMsg(clock=_stamp(self.twin.time)))
            return
        if self._wall0 is None:
            self._rebase()
        assert self._wall0 is not None
        due = self._done0 + math.floor((time.monotonic() - self._wall0) * rate / self._period) - self._periods
        for _ in range(min(due, _MAX_CATCH_UP)):
            if not self.context.ok():  # shutting down (SIGINT / SIGTERM): publishers are gone
                return
            self._advance_one()
        if due > _MAX_CATCH_UP:
            log_throttled(self.get_logger(), f"{self._mode} x{rate:g}: cannot keep up, dropping a backlog of "
                          f"{due - _MAX_CATCH_UP} control periods", _WARN_THROTTLE_S)
            self._rebase()

    def _advance_one(self) -> None:
        """One control period: physics, then /clock and the due publications."""
        self._timeout.poll(self.twin.time)
        if self._timeout.just_timed_out:
            self.get_logger().warning(f"no joint_commands for {self._timeout.timeout_s:g} s (simulated): "
                                      "holding the last targets")
        self.twin.step(self.twin.substeps)
        self._periods += 1
        self._publish_all()
        if self._viewer is not None and self._viewer.is_running():
            self._viewer.sync()

    def _publish_all(self) -> None:
        t = self.twin.time
        stamp = _stamp(t)
        self._pub_clock.publish(ClockMsg(clock=stamp))
        if self._state_every and self._periods % self._state_every == 0:
            self._publish_states(stamp)
        if self._periods % self._battery_every == 0:
            self._publish_battery(stamp)
        if self._mocap_every and self._periods % self._mocap_every == 0:
            pos, quat = self.twin.head_pose()
            self._mocap.capture(t, pos, quat, self.twin.head_markers())
        for sample in self._mocap.release(t):
            if sample.valid:
                self._publish_mocap(stamp, sample.position, sample.quaternion, sample.markers)

    def _lockstep_idle(self) -> None:
        """Lock-step wall timer: prime (before the first command) or re-publish the clock."""
        now = time.monotonic()
        if not self._paused and self._prime and self._commands == 0 and now - self._primed_at >= _PRIME_RETRY_S:
            self._primed_at = now
            self._advance_one()
        else:
            self._pub_clock.publish(ClockMsg(clock=_stamp(self.twin.time)))

    def _publish_states(self, stamp: Time) -> None:
        msg = JointState()
        msg.header.stamp = stamp
        msg.name = list(self.twin.joint_names)
        msg.position = self.twin.joint_positions().tolist()
        msg.velocity = self.twin.joint_velocities().tolist()
        msg.effort = self.twin.joint_efforts().tolist()
        self._pub_states.publish(msg)
        for pub, (pos, quat) in ((self._pub_gt_head, self.twin.head_pose()),
                                 (self._pub_gt_base, self.twin.base_pose())):
            ps = PoseStamped()
            ps.header.stamp, ps.header.frame_id = stamp, _FRAME
            ps.pose = _pose(pos, quat)
            pub.publish(ps)
        if self._tf is not None and self._tf.enabled:
            pos, quat = self.twin.base_pose()  # (w, x, y, z)
            self._tf.send(pose_to_transform(_FRAME, self._base_frame, stamp.sec * 1_000_000_000 + stamp.nanosec,
                                            pos, np.array([quat[1], quat[2], quat[3], quat[0]])))

    def _publish_battery(self, stamp: Time) -> None:
        nan = math.nan
        msg = BatteryState(voltage=self._voltage, temperature=nan, current=nan, charge=nan, capacity=nan,
                           design_capacity=nan, percentage=nan, present=True)
        msg.header.stamp = stamp
        self._pub_battery.publish(msg)

    def _publish_mocap(self, stamp: Time, pos: np.ndarray, quat: np.ndarray, markers: np.ndarray) -> None:
        ps = PoseStamped()
        ps.header.stamp, ps.header.frame_id = stamp, _FRAME
        ps.pose = _pose(pos, quat)
        self._pub_mocap.publish(ps)
        arr = PoseArray()
        arr.header.stamp, arr.header.frame_id = stamp, _FRAME
        arr.poses = [_pose(m, np.array([1.0, 0.0, 0.0, 0.0])) for m in markers]
        self._pub_markers.publish(arr)

    # --- callbacks --------------------------------------------------------------------------
    def _on_commanders(self, crowd: str) -> None:
        if crowd:
            self.get_logger().warning(f"{crowd}: joint_commands ignored (the last targets held) until one "
                                      "commander is left")
        else:
            self.get_logger().info("one commander on joint_commands again: commands followed")

    def _on_command(self, msg: JointState) -> None:
        if self._commanders.crowd:
            log_throttled(self.get_logger(), f"joint_commands ignored: {self._commanders.crowd}", _WARN_THROTTLE_S)
            return
        self._commands += 1
        cmd = filter_joint_command(msg, self._filter, self.get_logger())
        if cmd is None:
            return
        if cmd.targets:
            self.twin.set_targets(cmd.targets)
            self._timeout.on_command(self.twin.time)
        if self._mode == "lockstep":
            if self._paused:
                self._owed = True  # its period runs on resume
                log_throttled(self.get_logger(), "paused: joint_commands set the targets; their period runs on resume",
                              _WARN_THROTTLE_S, LoggingSeverity.INFO)
            else:
                self._advance_one()

    def _on_torque(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """``~/torque``: false leaves every joint limp, true holds each where it is."""
        on = bool(request.data)
        self.twin.set_torque(on)
        response.success = True
        response.message = (f"torque {'on: each joint held where it is' if on else 'off: every joint limp'} at "
                            f"simulated t = {self.twin.time:.3f} s")
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """``~/pause``: true stops the simulated time, false lets it run again."""
        self._paused = bool(request.data)
        response.success = True
        response.message = f"{'paused' if self._paused else 'running'} at simulated t = {self.twin.time:.3f} s"
        self.get_logger().info(response.message)
        if not self._paused and self._mode == "lockstep":
            if self._owed:  # the period of a command received while paused
                self._owed = False
                self._advance_one()
            else:
                self._lockstep_idle()  # a primed twin that has had no command primes now
        return response


    def stop_safely(self) -> None:
        """Exit: close the viewer, say where the simulation stopped (nothing physical to make safe)."""
        if self._viewer is not None:
            self._viewer.close()
        self.get_logger().info(f"twin stopped at simulated t = {self.twin.time:.3f} s")


def main(args: list[str] | None = None) -> int:
    """Run the twin until Ctrl-C.

    Returns:
        The exit code: 0, or 2 when the robot / world files or the parameters are bad
        (the message naming the file and field is logged, no traceback).
    """
    return run_node(TwinNode, args, on_exit=TwinNode.stop_safely, parameters=PARAMETERS)


if __name__ == "__main__":
    raise SystemExit(main())
