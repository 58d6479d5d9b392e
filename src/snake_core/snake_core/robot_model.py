"""The robot model: the typed description a robot YAML is loaded into, and what the servos allow.

:class:`RobotModel` (body, joints, bus, gait defaults, path-following presets) with its
parts: a body dataclass per robot kind (:class:`TSnakeBody`, :class:`WheeledBody`),
:class:`JointSpec` per actuated joint with the :class:`ServoRegisters` the bridge writes
to its servo, and :class:`FollowingPresets`. Beside them, the numbers of the servos a
description must respect (:data:`SERVO_RANGES`, :data:`SERVO_REGISTERS`, tick ranges,
baud rates) and the helpers that map a joint onto its servo (:func:`servo_ticks`,
:func:`joint_actuator`).

The YAML is read and checked by :mod:`snake_core.robot_yaml`, and loaded with its
calibration by :mod:`snake_core.robot_calibration`; :mod:`snake_core.robot` re-exports all
three.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from snake_core.errors import RobotConfigError
from snake_core.following.follower import FollowerConfig
from snake_core.servo.model import Registers, ServoSpec, load_servo_model

if TYPE_CHECKING:
    from snake_core.servo.actuator import PositionActuator

_RPM = 2.0 * math.pi / 60.0  # rad/s per rev/min


@dataclass(frozen=True)
class ServoRange:
    """What one servo model can follow, as far as a robot description must respect it.

    The core keeps these numbers because it must not import ``snake_hardware``; a test
    checks them against ``snake_hardware.dynamixel.control_table``, where the bridge
    reads them. The position ranges are those of every X-series servo (ROBOTIS e-Manual:
    4096 ticks per revolution, servo angle 0 at tick 2048).

    Attributes:
        max_velocity: No-load speed at the model's recommended supply (12 V for the X430
            series, 24 V for the XH430-V, 5 V for the XL330), rad/s: the fastest a joint can be
            asked to move.
        stall_torque: Stall torque at that supply, N m: the largest effort the servo can give.
    """

    max_velocity: float
    stall_torque: float


SERVO_RANGES: dict[str, ServoRange] = {
    "XH430-V210": ServoRange(52 * _RPM, 2.6),    # at 24 V
    "XH430-V350": ServoRange(31 * _RPM, 3.3),    # at 24 V
    "XH430-W210": ServoRange(52 * _RPM, 2.5),
    "XH430-W350": ServoRange(30 * _RPM, 3.4),
    "XL430-W250": ServoRange(57 * _RPM, 1.5),
    "XM430-W210": ServoRange(77 * _RPM, 3.0),
    "XM430-W350": ServoRange(46 * _RPM, 4.1),
    "XL330-M288": ServoRange(103 * _RPM, 0.52),   # at 5 V
}
"""Per servo model: speed and torque it can give (``control_table.MODELS``; a test keeps them equal)."""
SERVO_MODELS = tuple(SERVO_RANGES)
"""Servo models with a control table in ``snake_hardware.dynamixel.control_table.MODELS`` (a test keeps them equal)."""
TICKS_PER_REV = 4096
"""Position ticks per revolution of an X-series servo (``control_table.TICKS_PER_REV``)."""
TICKS_CENTER = 2048
"""Position register value at servo angle 0, ticks (``control_table.TICKS_CENTER``)."""
POSITION_MODE_TICKS = (0, TICKS_PER_REV - 1)
"""Range of the Min/Max Position Limit registers in position mode: one revolution, ticks."""
EXTENDED_MODE_TICKS = (-1_048_575, 1_048_575)
"""Goal Position range in extended position mode, ticks (+-256 revolutions)."""
ZERO_OFFSET_RANGE = (-math.pi, math.pi)
"""Allowed ``zero_offset``, rad: the horn's servo angle at joint zero, within one turn (as ``snake servo`` reads it)."""
BAUD_RATES = (9600, 57600, 115200, 1_000_000, 2_000_000, 3_000_000, 4_000_000, 4_500_000)
"""Baud rates the servos' Baud Rate register can hold, bps (``control_table.BAUD_INDEX``; a test keeps them equal)."""


@dataclass(frozen=True)
class TSnakeBody:
    """Body of a T-Snake (``kind: tsnake``, 003 Sec. III-D): identical modules in a row.

    Attributes:
        n_modules: Number of modules, head to tail.
        module_length: L0, length of one module, m.
        joint_order: Joint types of one module, head to tail (e.g. dorsal, twist, lateral).
        joint_positions: Arc-length position of each ``joint_order`` joint from the module's
            front end, m (003 Fig. 5).
        radius: Radius of the module's cylindrical shell, m.
        module_mass: Mass of one module, kg.
    """

    n_modules: int
    module_length: float
    joint_order: tuple[str, ...]
    joint_positions: tuple[float, ...]
    radius: float
    module_mass: float


@dataclass(frozen=True)
class WheeledBody:
    """Body of a planar snake on passive wheels (``kind: planar_wheeled``, 002 Fig. 2).

    Attributes:
        n_links: Number of links, head to tail (one fewer joint).
        wheel_d: d_i, wheel axle of link i from its front joint, m.
        wheel_l: l_i, wheel axle of link i to its rear joint, m (link length d_i + l_i).
        width: Body width, m.
        wheel_radius: Wheel radius, m.
        link_mass: Mass of one link, kg.
    """

    n_links: int
    wheel_d: tuple[float, ...]
    wheel_l: tuple[float, ...]
    width: float
    wheel_radius: float
    link_mass: float


RobotBody = TSnakeBody | WheeledBody
"""A robot's body dimensions: one dataclass per robot kind."""


SERVO_REGISTERS: dict[str, tuple[int, int, int]] = {
    "position_p_gain": (84, 0, 16_383),
    "position_i_gain": (82, 0, 16_383),
    "position_d_gain": (80, 0, 16_383),
    "profile_velocity": (112, 0, 32_767),
    "profile_acceleration": (108, 0, 32_767),
    "pwm_limit": (36, 0, 885),
    "current_limit": (38, 0, 0),
}
"""The servo registers a robot description sets: key -> (address, least, greatest value), register units.

ROBOTIS e-Manual, X-series control table (XM430-W350, XL430-W250, XH430-W350: the same
addresses and ranges). The greatest PWM Limit is the servo model's ``pwm_full`` and the
greatest Current Limit its factory Current Limit (the e-Manual's maximum; 0 where the model
has no Current Limit register), both read from ``config/servos/<model>.yaml``; the numbers
written here for those two are the X430 series'. ``control_table`` in ``snake_hardware``
holds the same addresses (a test keeps them equal).
"""


@dataclass(frozen=True)
class ServoRegisters:
    """The control-table registers the bridge writes to one joint's servo (register units).

    The ``registers:`` block of a joint type or a joint; a key it leaves out is the servo
    model's factory value (``firmware.factory`` of ``config/servos/<model>.yaml``; Position I
    Gain, Profile Velocity and Profile Acceleration, which that file does not hold, ship as 0
    on every X-series servo, ROBOTIS e-Manual).

    Attributes:
        position_p_gain: Position P Gain(84).
        position_i_gain: Position I Gain(82).
        position_d_gain: Position D Gain(80).
        profile_velocity: Profile Velocity(112), 0.229 rev/min (0: no profile, the fastest).
        profile_acceleration: Profile Acceleration(108), 214.577 rev/min^2 (0: unlimited).
        pwm_limit: PWM Limit(36), 0.113 % per unit (EEPROM: written only with torque off).
        current_limit: Current Limit(38), the model's current unit (EEPROM; 0 on a model without one).
    """

    position_p_gain: int
    position_i_gain: int = 0
    position_d_gain: int = 0
    profile_velocity: int = 0
    profile_acceleration: int = 0
    pwm_limit: int = 885
    current_limit: int = 0

    def as_dict(self) -> dict[str, int]:
        """The registers by key (:data:`SERVO_REGISTERS` order)."""
        return {k: int(getattr(self, k)) for k in SERVO_REGISTERS}

    def firmware_registers(self) -> Registers:
        """The registers the firmware's position loop reads (:class:`snake_core.servo.model.Registers`).

        What :func:`snake_core.servo.actuator.position_actuator` takes to build the twin's
        actuator of this servo (the I gain and the profile are not part of that model).
        """
        return Registers(position_p_gain=self.position_p_gain, position_d_gain=self.position_d_gain,
                         pwm_limit=self.pwm_limit, current_limit=self.current_limit)

    @staticmethod
    def factory(spec: ServoSpec) -> ServoRegisters:
        """A servo model's registers as shipped (its ``firmware.factory``, 0 for the rest)."""
        f = spec.firmware.factory
        return ServoRegisters(position_p_gain=f.position_p_gain, position_d_gain=f.position_d_gain,
                              pwm_limit=f.pwm_limit, current_limit=f.current_limit)


@dataclass(frozen=True)
class JointSpec:
    """One actuated joint of the robot.

    Attributes:
        name: Joint name used in ``joint_states`` / ``joint_commands``.
        type: ``dorsal``, ``twist`` or ``lateral``.
        index: Position in the robot's joint list (head to tail).
        servo_id: Dynamixel ID on the bus.
        model: Servo model name (e.g. ``XM430-W350``).
        axis: Rotation axis in the parent link frame (x forward, z up).
        lower: Lower position limit, rad (``-inf`` for continuous joints).
        upper: Upper position limit, rad (``+inf`` for continuous joints).
        velocity: Velocity limit, rad/s.
        effort: Torque limit, N m.
        continuous: True for joints that turn without end (T-Snake twist joints).
        operating_mode: ``position``, ``extended_position`` or ``velocity``.
        zero_offset: Servo angle at joint zero, rad.
        direction: +1 or -1, sign between joint angle and servo angle.
        registers: Gains, profile and limits the bridge writes to the servo (the model's
            factory registers where the description sets none).
    """

    name: str
    type: str
    index: int
    servo_id: int
    model: str
    axis: tuple[float, float, float]
    lower: float
    upper: float
    velocity: float
    effort: float
    continuous: bool
    operating_mode: str
    zero_offset: float
    direction: int
    registers: ServoRegisters = ServoRegisters(position_p_gain=800, pwm_limit=885, current_limit=0)

    def clamp(self, position: float) -> float:
        """Clamp a target position to the joint's limits, rad."""
        return min(max(position, self.lower), self.upper)


@dataclass(frozen=True)
class FollowingPresets:
    """How the robot follows a path (001 Sec. IV): the ``following:`` block of its YAML.

    Read by ``planner_node``, ``path_follower``, ``follow.launch.py`` and ``snake experiment
    follow``, so that naming the robot is enough.

    Attributes:
        gait: Gait that moves the robot while following (``rolling``, ``serpenoid``, ...).
        drive: ``offset`` (serpenoid: the follower's head-angle offset travels along the body)
            or ``cmd_vel`` (the T-Snake's reduced differential drive).
        yaw_offset: Added to the head frame's yaw to get the robot's forward direction, rad.
        reference_offset: The tracked point lies this far along the head frame's x axis from
            its origin, m (:func:`snake_core.following.loop.reference_pose`).
        half_width: Half-width of the band the moving body sweeps around the tracked point: the
            planner's footprint, m.
        follower: :class:`~snake_core.following.follower.FollowerConfig` fields that differ from its defaults
            (gains, speed schedule, stuck detection).
        marker_template: The three head markers in the head frame, m, ``((x, y, z), ...)``: the
            motion-capture template the follower fits, and where the twin puts its marker sites;
            None: the twin's default triangle on the head, read off the twin.
    """

    gait: str
    drive: str
    yaw_offset: float
    reference_offset: float
    half_width: float
    follower: Mapping[str, float] = field(default_factory=dict)
    marker_template: tuple[tuple[float, float, float], ...] | None = None

    def follower_config(self) -> FollowerConfig:
        """The follower's settings: its defaults with this robot's values over them."""
        return FollowerConfig(**self.follower)


@dataclass(frozen=True)
class RobotModel:
    """A robot description loaded from its YAML file.

    Attributes:
        name: Robot name.
        kind: ``tsnake`` or ``planar_wheeled``.
        description: One line of text.
        body: Body dimensions, one dataclass per kind (:class:`TSnakeBody`,
            :class:`WheeledBody`); :attr:`tsnake_body` and :attr:`wheeled_body` give them typed.
        joints: Actuated joints, head to tail.
        bus: Servo bus settings (port, baud rate, protocol).
        gaits: Gait defaults per gait name.
        source: Path of the file the model was loaded from (``None`` if built in memory).
        following: Path-following presets from the ``following:`` block, or None when the
            file has none (:attr:`following_presets` then gives the defaults).
    """

    name: str
    kind: str
    description: str
    body: RobotBody
    joints: tuple[JointSpec, ...]
    bus: Mapping[str, Any]
    gaits: Mapping[str, Mapping[str, Any]]
    source: Path | None = field(default=None, compare=False)
    following: FollowingPresets | None = None

    @property
    def following_presets(self) -> FollowingPresets:
        """The ``following:`` block, or defaults where the file has none.

        Defaults: the head tracked (``yaw_offset`` pi: the head frame's x axis points to the
        tail), half-width from the body (``width / 2``, or the T-Snake's ``radius``), the first
        gait, ``cmd_vel``, the follower's defaults.
        """
        if self.following is not None:
            return self.following
        half = self.body.width / 2.0 if isinstance(self.body, WheeledBody) else self.body.radius
        return FollowingPresets(gait=next(iter(self.gaits), "serpenoid"), drive="cmd_vel", yaw_offset=math.pi,
                                reference_offset=0.0, half_width=half)

    @property
    def tsnake_body(self) -> TSnakeBody:
        """The body of a ``tsnake`` robot; raises RobotConfigError for another kind."""
        if not isinstance(self.body, TSnakeBody):
            raise RobotConfigError(f"{self._where()}: body: a tsnake body is needed, this robot is {self.kind!r}")
        return self.body

    @property
    def wheeled_body(self) -> WheeledBody:
        """The body of a ``planar_wheeled`` robot; raises RobotConfigError for another kind."""
        if not isinstance(self.body, WheeledBody):
            raise RobotConfigError(
                f"{self._where()}: body: a planar_wheeled body is needed, this robot is {self.kind!r}")
        return self.body

    @property
    def joint_names(self) -> list[str]:
        """Joint names, head to tail."""
        return [j.name for j in self.joints]

    def joint(self, name: str) -> JointSpec:
        """The joint called ``name``; raises ``KeyError`` if there is none."""
        for j in self.joints:
            if j.name == name:
                return j
        raise KeyError(f"{self.name}: no joint named {name!r}")

    def joints_of_type(self, joint_type: str) -> list[JointSpec]:
        """Joints of one type (``dorsal``, ``twist``, ``lateral``), head to tail."""
        return [j for j in self.joints if j.type == joint_type]

    def gait(self, gait_name: str) -> Mapping[str, Any]:
        """Gait defaults for ``gait_name``; raises RobotConfigError if absent."""
        try:
            return self.gaits[gait_name]
        except KeyError as err:
            raise RobotConfigError(f"{self._where()}: gaits.{gait_name}: missing") from err

    # --- T-Snake geometry -------------------------------------------------------
    @property
    def length(self) -> float:
        """Body length, m (L = n L0 for the T-Snake, sum of link lengths otherwise)."""
        if isinstance(self.body, TSnakeBody):
            return self.body.n_modules * self.body.module_length
        return float(np.sum(self.link_lengths))

    def joint_arc_positions(self) -> np.ndarray:
        """Arc-length position s_i of every joint along the backbone, m (T-Snake only).

        Module m (0-based) spans [m L0, (m+1) L0]; its joints sit at the module's
        ``joint_positions`` (003 Sec. III-D, Fig. 5).
        """
        if not isinstance(self.body, TSnakeBody):
            raise RobotConfigError(f"{self._where()}: joint arc positions are defined for tsnake only")
        l0 = self.body.module_length
        order = list(self.body.joint_order)
        offsets = self.body.joint_positions
        out = []
        for j in self.joints:
            module = j.index // len(order)
            out.append(module * l0 + offsets[order.index(j.type)])
        return np.asarray(out, dtype=float)

    # --- planar wheeled snake geometry (002) -------------------------------------
    @property
    def wheel_d(self) -> np.ndarray:
        """d_i: wheel position from each link's front joint, m (002 Fig. 2)."""
        return np.asarray(self.wheeled_body.wheel_d, dtype=float)

    @property
    def wheel_l(self) -> np.ndarray:
        """l_i: wheel position to each link's rear joint, m (002 Fig. 2)."""
        return np.asarray(self.wheeled_body.wheel_l, dtype=float)

    @property
    def link_lengths(self) -> np.ndarray:
        """Link lengths, m: L_i = d_i + l_i for the wheeled snake, L0 for T-Snake modules."""
        if isinstance(self.body, TSnakeBody):
            return np.full(self.body.n_modules, self.body.module_length)
        return self.wheel_d + self.wheel_l

    def _where(self) -> str:
        return str(self.source.name) if self.source else self.name


def joint_actuator(joint: JointSpec, voltage: float | None = None) -> PositionActuator:
    """The twin's actuator of a joint: its servo model at the registers the bridge writes to it.

    :func:`snake_core.servo.actuator.position_actuator` of the joint's ``model``
    (``config/servos/<model>.yaml``) at ``joint.registers``.

    Args:
        joint: A joint of a loaded robot.
        voltage: Supply voltage, V (``None``: the servo model's nominal voltage).

    Raises:
        ServoModelError: The joint's servo model file is missing or bad.
    """
    from snake_core.servo.actuator import position_actuator

    return position_actuator(load_servo_model(joint.model), joint.registers.firmware_registers(), voltage)


def servo_ticks(servo_angle: float) -> int:
    """Position register value of a servo angle, rad -> ticks (rounded; 4096 per turn, 2048 at 0)."""
    return round(servo_angle * TICKS_PER_REV / (2.0 * math.pi)) + TICKS_CENTER
