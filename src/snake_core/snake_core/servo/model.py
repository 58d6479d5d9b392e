"""Servo model files: a Dynamixel model's motor, firmware conversions and friction, as data.

One file per servo model, ``config/servos/<model>.yaml`` (the robot YAML's joint ``model``
names it)::

    model: XM430-W350
    motor:    {nominal_voltage, stall_torque, no_load_speed, gear_ratio, rotor_inertia}
    firmware: {p_gain_divisor, d_gain_divisor, pwm_full, current_unit_a[, slow_decay][, max_current_a],
               factory: {position_p_gain, position_d_gain, pwm_limit, current_limit}}
    friction: {structure, coulomb, viscous[, load][, stribeck_torque[, stribeck_load], stribeck_velocity]}
    provenance: {...}   # free-form record of a fit, not read

Every value is output side (after the gear train), SI units. The motor is the linear DC
motor of the datasheet's two points at ``nominal_voltage``: the torque constant (equal to
the back-EMF constant in SI units) ``k_t = V_nom / omega_0`` and the winding resistance
``R = k_t V_nom / tau_stall``, so that ``tau = k_t (V - k_t omega) / R`` passes through the
stall torque at rest and through zero at the no-load speed (Duclusaud & Passault, BAM:
"Better Actuator Models", the voltage-controlled actuator; ROBOTIS e-Manual's
performance graph). The reflected rotor inertia is ``armature = rotor_inertia x gear_ratio^2``.

Strict like every config file: an unknown key, a missing value or a non-physical one
(negative resistance, a zero gear ratio) is one line naming the file and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snake_core.errors import RobotConfigError
from snake_core.schema import check_keys, load_yaml, mapping, number

FRICTION_STRUCTURES = ("coulomb_viscous", "stribeck", "load_dependent", "load_stribeck")
"""Friction structures a servo model may name (:func:`snake_core.servo.actuator.friction_budget`)."""

_TOP_KEYS = ("model", "motor", "firmware", "friction", "provenance")
_MOTOR_KEYS = ("nominal_voltage", "stall_torque", "no_load_speed", "gear_ratio", "rotor_inertia")
_FIRMWARE_KEYS = ("p_gain_divisor", "d_gain_divisor", "pwm_full", "current_unit_a", "factory", "slow_decay",
                  "max_current_a")
_OPTIONAL_FIRMWARE_KEYS = ("slow_decay", "max_current_a")
_REGISTER_KEYS = ("position_p_gain", "position_d_gain", "pwm_limit", "current_limit")
_FRICTION_KEYS = {
    "coulomb_viscous": ("structure", "coulomb", "viscous"),
    "stribeck": ("structure", "coulomb", "viscous", "stribeck_torque", "stribeck_velocity"),
    "load_dependent": ("structure", "coulomb", "viscous", "load"),
    "load_stribeck": ("structure", "coulomb", "viscous", "load", "stribeck_torque", "stribeck_load",
                      "stribeck_velocity"),
}
# Plausibility bounds (a value outside is a typo or a unit error, not a servo).
_MAX_VOLTAGE = 48.0        # V
_MAX_TORQUE = 200.0        # N m
_MAX_SPEED = 200.0         # rad/s
_MAX_GEAR_RATIO = 1e4
_MAX_ROTOR_INERTIA = 1e-3  # kg m^2, motor side
_MAX_DIVISOR = 1e6
_MAX_REGISTER = 32767      # 2-byte registers
_MAX_FRICTION = 50.0       # N m, N m s/rad
_MAX_LOAD = 1.0            # friction per N m of gear-train torque
_MAX_CURRENT = 100.0       # A
RAD_PER_TICK = 2.0 * math.pi / 4096
"""Encoder resolution of an X-series servo, rad per tick (4096 ticks per revolution)."""


class ServoModelError(RobotConfigError):
    """A servo model file with an unknown key or a value out of range (one line, file and field)."""


@dataclass(frozen=True)
class Motor:
    """The DC motor and gear train, output side.

    Attributes:
        nominal_voltage: Supply voltage of the two datasheet values, V.
        stall_torque: Torque at rest and full duty at ``nominal_voltage``, N m.
        no_load_speed: Speed with no load at full duty at ``nominal_voltage``, rad/s.
        gear_ratio: Motor turns per output turn.
        rotor_inertia: Rotor inertia on the motor side, kg m^2.
    """

    nominal_voltage: float
    stall_torque: float
    no_load_speed: float
    gear_ratio: float
    rotor_inertia: float

    @property
    def torque_constant(self) -> float:
        """``k_t = V_nom / omega_0``, N m/A (= V s/rad, the back-EMF constant)."""
        return self.nominal_voltage / self.no_load_speed

    @property
    def resistance(self) -> float:
        """Winding resistance ``R = k_t V_nom / tau_stall``, ohm."""
        return self.torque_constant * self.nominal_voltage / self.stall_torque

    @property
    def armature(self) -> float:
        """Reflected rotor inertia ``rotor_inertia x gear_ratio^2``, kg m^2."""
        return self.rotor_inertia * self.gear_ratio ** 2

    @staticmethod
    def from_constants(torque_constant: float, resistance: float, nominal_voltage: float, gear_ratio: float,
                       armature: float) -> Motor:
        """The motor of ``k_t`` (N m/A), ``R`` (ohm) and the reflected ``armature`` (kg m^2)."""
        return Motor(nominal_voltage=nominal_voltage, stall_torque=torque_constant * nominal_voltage / resistance,
                     no_load_speed=nominal_voltage / torque_constant, gear_ratio=gear_ratio,
                     rotor_inertia=armature / gear_ratio ** 2)


@dataclass(frozen=True)
class Registers:
    """The control-table registers the position loop reads (register units).

    Attributes:
        position_p_gain: Position P Gain(84).
        position_d_gain: Position D Gain(80).
        pwm_limit: PWM Limit(36), PWM units (``pwm_full`` = 100 %).
        current_limit: Current Limit(38), current units (0: none).
    """

    position_p_gain: int
    position_d_gain: int = 0
    pwm_limit: int = 885
    current_limit: int = 0


@dataclass(frozen=True)
class Firmware:
    """The firmware's conversions of its registers (ROBOTIS e-Manual, "Position PID Gain").

    Attributes:
        p_gain_divisor: PWM units per tick of position error = Position P Gain / this.
        d_gain_divisor: PWM units per tick/ms of error rate = Position D Gain / this.
        pwm_full: PWM units at 100 % duty.
        current_unit_a: A per Current Limit unit (0: the model has no current limit).
        factory: Registers as shipped.
        slow_decay: Fraction of the PWM off-time the H-bridge shorts the motor (back-EMF braking,
            Eq. (2) of :mod:`snake_core.servo.actuator`); 1: the averaged DC motor.
        max_current_a: The most current the drive gives the motor in position mode, A (Eq. (2b) of
            :mod:`snake_core.servo.actuator`; ``inf``: none). Not a register: the e-Manual applies
            Current Limit only in the current-based modes; this is what a fit on bench logs finds.
    """

    p_gain_divisor: float
    d_gain_divisor: float
    pwm_full: float
    current_unit_a: float
    factory: Registers
    slow_decay: float = 1.0
    max_current_a: float = math.inf


@dataclass(frozen=True)
class Friction:
    """Friction of the gear train (:func:`snake_core.servo.actuator.friction_budget`).

    Attributes:
        structure: ``coulomb_viscous``, ``stribeck``, ``load_dependent`` or ``load_stribeck``.
        coulomb: Dry friction, N m.
        viscous: Viscous friction, N m s/rad (on top of the motor's back-EMF).
        load: Dry friction per N m of torque through the gear train (``load_dependent``).
        stribeck_torque: Extra dry friction at rest, N m (``stribeck``).
        stribeck_load: Extra load-dependent friction at rest per N m (``load_stribeck``).
        stribeck_velocity: Speed over which the extra friction fades, rad/s (``stribeck``, ``load_stribeck``).
    """

    structure: str = "coulomb_viscous"
    coulomb: float = 0.0
    viscous: float = 0.0
    load: float = 0.0
    stribeck_torque: float = 0.0
    stribeck_load: float = 0.0
    stribeck_velocity: float = 0.1


@dataclass(frozen=True)
class ServoSpec:
    """One servo model: its motor, firmware and friction.

    Attributes:
        model: Model name (``XM430-W350``).
        motor: The DC motor and gear train.
        firmware: The register conversions and factory registers.
        friction: The gear train's friction.
        provenance: Free-form record of where the values come from.
    """

    model: str
    motor: Motor
    firmware: Firmware
    friction: Friction = Friction()
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def to_yaml_dict(self) -> dict[str, Any]:
        """The file's content as plain data (round-trips through :func:`parse_servo_model`)."""
        m, fw, fr = self.motor, self.firmware, self.friction
        friction = {k: getattr(fr, k) for k in _FRICTION_KEYS[fr.structure]}
        out: dict[str, Any] = {
            "model": self.model,
            "motor": {k: float(getattr(m, k)) for k in _MOTOR_KEYS},
            "firmware": {"p_gain_divisor": float(fw.p_gain_divisor), "d_gain_divisor": float(fw.d_gain_divisor),
                         "pwm_full": float(fw.pwm_full), "current_unit_a": float(fw.current_unit_a),
                         "factory": {k: int(getattr(fw.factory, k)) for k in _REGISTER_KEYS},
                         "slow_decay": float(fw.slow_decay)},
            "friction": {k: (v if k == "structure" else float(v)) for k, v in friction.items()},
        }
        if math.isfinite(fw.max_current_a):
            out["firmware"]["max_current_a"] = float(fw.max_current_a)
        if self.provenance:
            out["provenance"] = dict(self.provenance)
        return out


def parse_servo_model(data: Any, source: str) -> ServoSpec:
    """Validate a servo model file's content.

    Args:
        data: The file as read from YAML.
        source: The file, for messages.

    Returns:
        The servo model.

    Raises:
        ServoModelError: One line naming the file and the field.
    """

    def fail(field_name: str, msg: str) -> ServoModelError:
        return ServoModelError(f"{source}: {field_name}: {msg}")

    top = mapping(data, "", fail)
    check_keys(top, _TOP_KEYS, "", fail, " of a servo model")
    for key in ("model", "motor", "firmware"):
        if key not in top:
            raise fail(key, "missing")
    name = top["model"]
    if not isinstance(name, str) or not name:
        raise fail("model", f"must be a model name, got {name!r}")
    mapping(top.get("provenance"), "provenance", fail, required=False)

    motor_block = mapping(top["motor"], "motor", fail)
    check_keys(motor_block, _MOTOR_KEYS, "motor", fail, " of a servo motor")
    highs = {"nominal_voltage": _MAX_VOLTAGE, "stall_torque": _MAX_TORQUE, "no_load_speed": _MAX_SPEED,
             "gear_ratio": _MAX_GEAR_RATIO, "rotor_inertia": _MAX_ROTOR_INERTIA}
    motor_values = {}
    for key in _MOTOR_KEYS:
        if key not in motor_block:
            raise fail(f"motor.{key}", "missing")
        motor_values[key] = number(motor_block[key], f"motor.{key}", fail, low=0.0, low_open=True, high=highs[key])
    motor = Motor(**motor_values)

    fw_block = mapping(top["firmware"], "firmware", fail)
    check_keys(fw_block, _FIRMWARE_KEYS, "firmware", fail, " of a servo firmware")
    for key in _FIRMWARE_KEYS:
        if key not in fw_block and key not in _OPTIONAL_FIRMWARE_KEYS:
            raise fail(f"firmware.{key}", "missing")
    divisors = {k: number(fw_block[k], f"firmware.{k}", fail, low=0.0, low_open=True, high=_MAX_DIVISOR)
                for k in ("p_gain_divisor", "d_gain_divisor", "pwm_full")}
    current_unit = number(fw_block["current_unit_a"], "firmware.current_unit_a", fail, low=0.0, high=1.0)
    reg_block = mapping(fw_block["factory"], "firmware.factory", fail)
    check_keys(reg_block, _REGISTER_KEYS, "firmware.factory", fail, " (registers)")
    regs = {}
    for key in _REGISTER_KEYS:
        if key not in reg_block:
            raise fail(f"firmware.factory.{key}", "missing")
        regs[key] = int(number(reg_block[key], f"firmware.factory.{key}", fail, low=0, high=_MAX_REGISTER,
                               integer=True))
    if regs["pwm_limit"] > divisors["pwm_full"]:
        raise fail("firmware.factory.pwm_limit", f"{regs['pwm_limit']} exceeds pwm_full {divisors['pwm_full']:g}")
    slow_decay = number(fw_block.get("slow_decay", 1.0), "firmware.slow_decay", fail, low=0.0, high=1.0)
    max_current = (math.inf if "max_current_a" not in fw_block else
                   number(fw_block["max_current_a"], "firmware.max_current_a", fail, low=0.0, low_open=True,
                          high=_MAX_CURRENT))
    firmware = Firmware(factory=Registers(**regs), current_unit_a=current_unit, slow_decay=slow_decay,
                        max_current_a=max_current, **divisors)

    friction = parse_friction(top.get("friction"), "friction", fail)
    return ServoSpec(model=name, motor=motor, firmware=firmware, friction=friction,
                     provenance=dict(top.get("provenance") or {}))


def parse_friction(data: Any, where: str, fail: Any) -> Friction:
    """Validate a ``friction`` block (its ``structure`` decides which keys it may hold)."""
    block = mapping(data, where, fail, required=False)
    if not block:
        return Friction()
    structure = block.get("structure", "coulomb_viscous")
    if structure not in FRICTION_STRUCTURES:
        raise fail(f"{where}.structure", f"unknown friction structure {structure!r}; "
                   f"valid: {', '.join(FRICTION_STRUCTURES)}")
    check_keys(block, _FRICTION_KEYS[structure], where, fail, f" of {structure} friction")
    values: dict[str, float] = {}
    for key in _FRICTION_KEYS[structure][1:]:
        high = (_MAX_LOAD if key in ("load", "stribeck_load")
                else _MAX_SPEED if key == "stribeck_velocity" else _MAX_FRICTION)
        low_open = key == "stribeck_velocity"
        values[key] = number(block.get(key, 0.0 if not low_open else None), f"{where}.{key}", fail, low=0.0,
                             low_open=low_open, high=high)
    return Friction(structure=structure, **values)


def load_servo_model(name_or_path: str | Path) -> ServoSpec:
    """Load a servo model by name (``config/servos/<name>.yaml``) or path.

    Raises:
        ServoModelError: No such file, or a bad one (one line naming the file and the field).
    """
    from snake_core.config_files import resolve

    path = resolve("servo", name_or_path, ServoModelError)
    spec = parse_servo_model(load_yaml(path, ServoModelError, "servo model file"), str(path))
    if Path(str(name_or_path)).suffix == "" and spec.model != str(name_or_path):
        raise ServoModelError(f"{path}: model: {spec.model!r} in a file named {path.name}")
    return spec
