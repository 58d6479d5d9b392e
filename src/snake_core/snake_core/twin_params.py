"""The twin's physics as data: servo and contact parameters of the MuJoCo twin.

The MuJoCo twin (``snake_hardware.sim``) models each servo as a position actuator on a
hinge joint, and every contact with Coulomb friction. The numbers of that model that the
robot YAML does not state live here, per joint type (``dorsal``, ``twist``, ``lateral``)
and for the contacts, with the documented defaults below. A calibration file
(``config/calibration/<robot>/<target>.yaml``) may hold a ``twin:`` block that overrides
them (:func:`parse_twin_block`); ``snake twin identify`` fits that block from a recording
of the real robot. A twin built with no block is the twin built with the defaults.

Servo model of one joint (MuJoCo ``position`` actuator on a ``hinge`` joint; units SI):

    tau = clamp(kp (q_goal(t - latency) - q) - kv qdot, -effort, effort)
          - damping qdot - frictionloss sign(qdot),   with rotor inertia ``armature``

* ``kp`` (N m/rad): default ``effort / 0.1 rad``: an X-series servo under its default
  position PID reaches its torque limit a few degrees (0.1 rad) from the target;
* ``damping`` (N m s/rad): default ``effort / velocity``: back-EMF, torque falls from stall
  to zero at the no-load speed (the YAML ``velocity``);
* ``kv`` (N m s/rad): default tops the back-EMF up to critical damping of ``kp`` against the
  armature, ``max(2 sqrt(kp armature) - damping, 0)`` (X-series default D gain is 0);
* ``armature`` (kg m^2): default 0.011, the coreless rotor (~9e-8 kg m^2) times the gear
  ratio (~353.5) squared;
* ``frictionloss`` (N m): dry friction of the gear train, default 0;
* ``effort_scale``: the torque limit is ``effort_scale`` times the YAML ``effort``, default 1;
* ``latency_s`` (s): delay from a goal written to the servo acting on it (USB latency
  timer, bus, firmware), default 0; the twin rounds it to whole physics steps.
* ``backlash_rad`` (rad): total play of the gear train, default 0 (none: the model above,
  unchanged). With a play ``b > 0`` the joint is two hinges in series: a motor-side hinge,
  on which the actuator, ``armature``, ``damping`` and ``frictionloss`` act, carrying the
  link through a link-side hinge free within ``[-b/2, +b/2]`` (its limits close the play);
  the joint's angle (what the encoder on the output shaft reads) is the sum of the two.
  An X-series gear train has 0.1 to 0.4 deg of play; at most :data:`MAX_BACKLASH_RAD`.

Contact model: ``ground_friction`` is the sliding friction coefficient of the ground against
the body (default: the world file's ``friction``; MuJoCo takes the ground's coefficient for
the T-Snake's skin, whose geoms have a lower priority; pegs keep the world file's own),
``wheel_friction`` that of the wheeled snake's tyres (default 1.5, rubber; the tyres have
the higher priority, so theirs applies on the ground).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from snake_core.errors import RobotConfigError
from snake_core.schema import check_keys, mapping, number


class JointLike(Protocol):
    """What the servo model reads of a joint (:class:`snake_core.robot.JointSpec` has it)."""

    @property
    def type(self) -> str:
        """Joint type (``dorsal``, ``twist``, ``lateral``)."""
    @property
    def effort(self) -> float:
        """Stall torque, N m."""
    @property
    def velocity(self) -> float:
        """No-load speed, rad/s."""


class RobotLike(Protocol):
    """What :meth:`TwinParams.flat` reads of a robot (:class:`snake_core.robot.RobotModel` has it)."""

    @property
    def kind(self) -> str:
        """Robot kind (``tsnake`` or a wheeled snake)."""
    @property
    def joints(self) -> Sequence[JointLike]:
        """Joints, head to tail."""


JOINT_TYPES = ("dorsal", "twist", "lateral")
"""Joint types a ``twin.servo`` block may name (those of the robot YAML)."""

SATURATION_ERROR = 0.1
"""Default position error at which a servo reaches its torque limit, rad (kp = effort / this)."""
SERVO_ARMATURE = 0.011
"""Default reflected rotor inertia, kg m^2."""
DAMPING_RATIO = 1.0
"""Default total damping (back-EMF + kv) as a fraction of critical damping of kp against the armature."""
WHEEL_FRICTION = 1.5
"""Default sliding friction coefficient of a rubber tyre."""
DEFAULT_GROUND_FRICTION = 0.8
"""Ground friction of the twin without a world file (a flat plane)."""
MAX_BACKLASH_RAD = math.radians(5.0)
"""Largest gear play a ``twin:`` block accepts, rad (a worn hobby servo has a degree or two)."""

_SERVO_KEYS = ("kp", "kv", "damping", "armature", "frictionloss", "effort_scale", "latency_s", "backlash_rad")
_CONTACT_KEYS = ("ground_friction", "wheel_friction")
_TWIN_KEYS = ("servo", "contact", "provenance")  # provenance: free-form record of the fit, not read
# Plausibility bounds of a twin block (a value outside is a typo or a unit error, not a servo).
_MAX_GAIN = 1e4            # N m/rad, N m s/rad
_MAX_ARMATURE = 10.0       # kg m^2
_MAX_FRICTIONLOSS = 100.0  # N m
_MAX_EFFORT_SCALE = 10.0
_MAX_LATENCY_S = 0.5       # s
_MAX_FRICTION = 5.0        # sliding coefficient


class TwinParamsError(RobotConfigError):
    """A ``twin:`` block with an unknown key or a value out of range (one line, file and field)."""


@dataclass(frozen=True)
class ServoModel:
    """The servo model of one joint, every value resolved (units as in the module docstring)."""

    kp: float
    kv: float
    damping: float
    armature: float
    frictionloss: float
    effort: float
    latency_s: float
    backlash_rad: float = 0.0


@dataclass(frozen=True)
class ServoParams:
    """Servo parameters of one joint type; ``None`` means the default derived from the joint's YAML.

    Attributes:
        kp: Position gain, N m/rad (``None``: effort / :data:`SATURATION_ERROR`).
        kv: Actuator velocity gain, N m s/rad (``None``: the critical-damping top-up).
        damping: Joint damping, N m s/rad (``None``: back-EMF, effort / velocity).
        armature: Reflected rotor inertia, kg m^2.
        frictionloss: Dry friction, N m.
        effort_scale: Torque limit over the YAML ``effort``.
        latency_s: Command latency, s.
        backlash_rad: Total gear play, rad (0: none).
    """

    kp: float | None = None
    kv: float | None = None
    damping: float | None = None
    armature: float = SERVO_ARMATURE
    frictionloss: float = 0.0
    effort_scale: float = 1.0
    latency_s: float = 0.0
    backlash_rad: float = 0.0

    def resolve(self, joint: JointLike) -> ServoModel:
        """The servo model of ``joint`` (the defaults computed from its YAML effort and velocity)."""
        kp = joint.effort / SATURATION_ERROR if self.kp is None else self.kp
        damping = joint.effort / joint.velocity if self.damping is None else self.damping
        armature = self.armature
        kv = max(DAMPING_RATIO * 2.0 * math.sqrt(kp * armature) - damping, 0.0) if self.kv is None else self.kv
        return ServoModel(kp=kp, kv=kv, damping=damping, armature=armature, frictionloss=self.frictionloss,
                          effort=joint.effort * self.effort_scale, latency_s=self.latency_s,
                          backlash_rad=self.backlash_rad)


@dataclass(frozen=True)
class ContactParams:
    """Contact parameters of the twin.

    Attributes:
        ground_friction: Sliding friction of the ground (``None``: the world file's).
        wheel_friction: Sliding friction of the wheeled snake's tyres.
    """

    ground_friction: float | None = None
    wheel_friction: float = WHEEL_FRICTION


@dataclass(frozen=True)
class TwinParams:
    """Servo parameters per joint type and contact parameters of the twin (defaults: no ``twin:`` block).

    Attributes:
        servo: Joint type -> its servo parameters (a type not named has the defaults).
        contact: Contact parameters.
    """

    servo: Mapping[str, ServoParams] = field(default_factory=dict)
    contact: ContactParams = field(default_factory=ContactParams)

    def servo_of(self, joint_type: str) -> ServoParams:
        """The servo parameters of ``joint_type`` (the defaults when the block does not name it)."""
        return self.servo.get(joint_type, ServoParams())

    def servo_model(self, joint: JointLike) -> ServoModel:
        """The resolved servo model of ``joint``."""
        return self.servo_of(joint.type).resolve(joint)

    def is_default(self) -> bool:
        """True when every value is the default (the twin is the one built without a block)."""
        return all(p == ServoParams() for p in self.servo.values()) and self.contact == ContactParams()

    def flat(self, robot: RobotLike, world_friction: float = DEFAULT_GROUND_FRICTION) -> dict[str, float]:
        """Every parameter of ``robot``'s twin as ``{name: value}``, resolved to numbers.

        Names are ``servo.<type>.<field>`` for each joint type the robot has (the values of
        the type's first joint, head to tail) and ``contact.ground_friction`` (and
        ``contact.wheel_friction`` for a wheeled robot). ``world_friction`` is the world
        file's ground friction, used when the block does not set one.
        """
        out: dict[str, float] = {}
        for jtype in joint_types(robot):
            joint = next(j for j in robot.joints if j.type == jtype)
            model = self.servo_model(joint)
            p = self.servo_of(jtype)
            for key in _SERVO_KEYS:
                value = p.effort_scale if key == "effort_scale" else getattr(model, key)
                out[f"servo.{jtype}.{key}"] = float(value)
        ground = self.contact.ground_friction
        out["contact.ground_friction"] = float(world_friction if ground is None else ground)
        if robot.kind != "tsnake":
            out["contact.wheel_friction"] = float(self.contact.wheel_friction)
        return out

    def with_flat(self, values: Mapping[str, float]) -> TwinParams:
        """A copy with the parameters named as in :meth:`flat` set to ``values``.

        Raises:
            KeyError: A name that is not ``servo.<type>.<field>`` or ``contact.<field>``.
        """
        servo = dict(self.servo)
        contact = self.contact
        for name, value in values.items():
            parts = name.split(".")
            if len(parts) == 3 and parts[0] == "servo" and parts[1] in JOINT_TYPES and parts[2] in _SERVO_KEYS:
                servo[parts[1]] = dataclasses.replace(self._servo_in(servo, parts[1]), **{parts[2]: float(value)})
            elif len(parts) == 2 and parts[0] == "contact" and parts[1] in _CONTACT_KEYS:
                contact = dataclasses.replace(contact, **{parts[1]: float(value)})
            else:
                raise KeyError(f"not a twin parameter: {name!r} (servo.<type>.<field> or contact.<field>)")
        return TwinParams(servo=servo, contact=contact)

    @staticmethod
    def _servo_in(servo: Mapping[str, ServoParams], jtype: str) -> ServoParams:
        return servo.get(jtype, ServoParams())

    def to_yaml_dict(self) -> dict[str, Any]:
        """The ``twin:`` block as plain data: only the values that differ from the defaults."""
        out: dict[str, Any] = {}
        default = ServoParams()
        servo = {}
        for jtype in JOINT_TYPES:
            if jtype not in self.servo:
                continue
            p = self.servo[jtype]
            block = {k: getattr(p, k) for k in _SERVO_KEYS if getattr(p, k) != getattr(default, k)}
            if block:
                servo[jtype] = block
        if servo:
            out["servo"] = servo
        contact = {k: getattr(self.contact, k) for k in _CONTACT_KEYS
                   if getattr(self.contact, k) != getattr(ContactParams(), k)}
        if contact:
            out["contact"] = contact
        return out


def joint_types(robot: RobotLike) -> list[str]:
    """Joint types of ``robot``, in the order they first appear head to tail."""
    return list(dict.fromkeys(j.type for j in robot.joints))


def parse_twin_block(data: Any, source: str) -> TwinParams:
    """Validate a ``twin:`` block (strict: unknown keys and values out of range are errors).

    Args:
        data: The block as read from YAML (``None``: the defaults).
        source: The file, for messages.

    Returns:
        The parameters.

    Raises:
        TwinParamsError: One line naming the file and the field.
    """

    def fail(field_name: str, msg: str) -> TwinParamsError:
        return TwinParamsError(f"{source}: {field_name}: {msg}")

    block = mapping(data, "twin", fail, required=False)
    check_keys(block, _TWIN_KEYS, "twin", fail, " of a twin block")
    mapping(block.get("provenance"), "twin.provenance", fail, required=False)
    servo: dict[str, ServoParams] = {}
    types = mapping(block.get("servo"), "twin.servo", fail, required=False)
    check_keys(types, JOINT_TYPES, "twin.servo", fail, " (joint types)")
    bounds = {"kp": (0.0, _MAX_GAIN, True), "kv": (0.0, _MAX_GAIN, False), "damping": (0.0, _MAX_GAIN, False),
              "armature": (0.0, _MAX_ARMATURE, True), "frictionloss": (0.0, _MAX_FRICTIONLOSS, False),
              "effort_scale": (0.0, _MAX_EFFORT_SCALE, True), "latency_s": (0.0, _MAX_LATENCY_S, False),
              "backlash_rad": (0.0, MAX_BACKLASH_RAD, False)}
    for jtype, values in types.items():
        where = f"twin.servo.{jtype}"
        entry = mapping(values, where, fail)
        check_keys(entry, _SERVO_KEYS, where, fail, f" of a servo of type {jtype}")
        checked = {k: number(v, f"{where}.{k}", fail, low=bounds[k][0], high=bounds[k][1], low_open=bounds[k][2])
                   for k, v in entry.items()}
        servo[str(jtype)] = ServoParams(**checked)
    contact_block = mapping(block.get("contact"), "twin.contact", fail, required=False)
    check_keys(contact_block, _CONTACT_KEYS, "twin.contact", fail, " of the contact model")
    contact = ContactParams(**{k: number(v, f"twin.contact.{k}", fail, low=0.0, high=_MAX_FRICTION, low_open=True)
                               for k, v in contact_block.items()})
    return TwinParams(servo=servo, contact=contact)
