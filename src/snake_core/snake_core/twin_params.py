"""The twin's physics as data: servo and contact parameters of the MuJoCo twin.

The MuJoCo twin (``snake_hardware.sim``) models each servo as a position actuator on a
hinge joint, and every contact with Coulomb friction. The numbers of that model that the
robot YAML does not state live here, per joint type (``dorsal``, ``twist``, ``lateral``),
optionally per joint (by its name: a servo that differs from the others of its type), and
for the contacts, with the documented defaults below. A calibration file
(``config/calibration/<robot>/<target>.yaml``) may hold a ``twin:`` block that overrides
them (:func:`parse_twin_block`); ``snake twin identify`` fits that block from a recording
of the real robot. A twin built with no block is the twin built with the defaults. This
module is the one place that decides a joint's servo values (:meth:`ServoParams.resolve`):
a value the block writes for the joint (``twin.joint.<name>``), else for its type
(``twin.servo.<type>``), else the one derived from the joint's servo model.

Servo model of one joint (MuJoCo ``position`` actuator on a ``hinge`` joint; units SI):

    tau = clamp(kp (q_goal(t - latency) - q) - kv qdot, -effort, effort)
          - damping qdot - frictionloss sign(qdot),   with rotor inertia ``armature``

Its defaults are derived, not assumed: the joint's servo model (``config/servos/<model>.yaml``,
the robot YAML's joint ``model``; :mod:`snake_core.servo.model`) at the registers the bridge
writes to it and the supply voltage, through
:func:`snake_core.servo.actuator.position_actuator` (Eqs. (1)-(2) there: the firmware's P loop
driving a voltage-controlled DC motor):

* ``kp`` (N m/rad) ``= (k_t V / R) (P / div_p) / (theta_tick pwm_full)``: the duty per rad of
  error times the stall torque at ``V``;
* ``kv`` (N m s/rad) ``= (k_t V / R) (D / div_d) / (theta_tick pwm_full) x 1 ms``: the
  firmware's D term (0 at the X-series' factory D gain);
* ``damping`` (N m s/rad) ``= k_t^2 / R + b``: the motor's back-EMF plus the gear train's
  viscous friction;
* ``armature`` (kg m^2) ``= rotor_inertia x gear_ratio^2``;
* ``frictionloss`` (N m) ``= c``, the gear train's Coulomb friction;
* effort (N m) ``= (k_t V / R) (pwm_limit / pwm_full)``, at most ``k_t I_limit``, times
  ``effort_scale`` (default 1).

For an XM430-W350 at its factory P gain 800 and 12 V: kp 18.9 N m/rad, kv 0, damping
0.851 N m s/rad, armature 0.0112 kg m^2, effort 4.10 N m. The registers are the joint's
(``registers:`` of the robot YAML, :attr:`snake_core.robot.JointSpec.registers`: the servo
model's factory ones where it sets none; the I gain and the motion profile are not part of
this model); the supply voltage is :attr:`TwinParams.supply_voltage` (``None``: each servo
model's ``nominal_voltage``).

Three more, which the servo model does not give (defaults: none):

* ``latency_s`` (s): delay from a goal written to the servo acting on it (USB latency
  timer, bus, firmware), default 0; the twin rounds it to whole physics steps.
* ``backlash_rad`` (rad): total play of the gear train, default 0 (none: the model above,
  unchanged). With a play ``b > 0`` the joint is two hinges in series: a motor-side hinge,
  on which the actuator, ``armature`` and ``damping`` act, carrying the link through a
  link-side hinge free within ``[-b/2, +b/2]`` (its limits close the play); the joint's angle
  (what the encoder on the output shaft reads) is the sum of the two, the servo's position
  loop holds that angle (the play inside the loop, as on the servo), and ``frictionloss`` acts
  on it (the loaded gear train's friction; the rotor crosses the play without it).
  An X-series gear train has 0.1 to 0.4 deg of play; at most :data:`MAX_BACKLASH_RAD`.
* ``load_friction`` (dimensionless, N m of friction per N m of torque): dry friction that
  rises with the torque the gears pass on, BAM's load-dependent Coulomb friction (model m3;
  Duclusaud & Passault, "Better Actuator Models"; Eq. (3) of :mod:`snake_core.servo.actuator`
  with its ``l``, the servo-model library's ``load_dependent`` ``load``), default 0 (none: the
  model above, unchanged). With ``l > 0`` the joint's dry friction before every physics step is

      frictionloss(t) = frictionloss + l |tau(t)|,
      tau = clamp(kp (clamp(q_goal, ctrlrange) - q) - kv qdot, -effort, effort)

  ``tau`` the actuator's torque on the joint at the step's state (MuJoCo ``dof_frictionloss``
  of the hinge, set per step; :class:`snake_hardware.sim.twin.SimTwin`). Physical range: BAM's
  m3 fit of the XL330 gives ``l = 0.12``; ``snake servo-model identify`` on the eight XL330 logs
  0.14 to 0.21; at most :data:`MAX_LOAD_FRICTION`.

One more per joint, never per type (``twin.joint.<name>.zero_offset_rad``):

* ``zero_offset_rad`` (rad): where the servo's zero lies from the link's, default 0. A horn is
  mounted on its spline within a fraction of a degree, so the angle the servo reads and holds
  is ``q`` while the link stands at ``q - zero_offset_rad`` from its straight configuration:
  the goals and the readings are unchanged, the body's shape (and where gravity pulls) is
  not. The twin's hinge gets MuJoCo's ``ref`` (MuJoCo documentation, XML reference,
  ``joint/ref``: the joint value at the model's initial configuration), so its ``qpos`` is
  the servo's angle and the geometry turns by ``qpos - ref``. At most
  :data:`MAX_ZERO_OFFSET_RAD`.

Torque off (:attr:`ServoModel.limp_damping`): the motor's terminals are open, so neither
the actuator nor the back-EMF acts; the armature, the dry friction and the viscous part of
the damping (``damping - k_t^2 / R``, at least 0) remain.

Contact model: ``ground_friction`` is the sliding friction coefficient of the ground against
the body (default: the world file's ``friction``; MuJoCo takes the ground's coefficient for
the T-Snake's skin, whose geoms have a lower priority; pegs keep the world file's own),
``wheel_friction`` that of the wheeled snake's tyres (default 1.5, rubber; the tyres have
the higher priority, so theirs applies on the ground). How a contact resists, in MuJoCo's terms
(MuJoCo documentation, "Computation": "Contact", "Solver parameters"):

* ``cone``: the friction cone, ``pyramidal`` (default: cheaper, a polyhedral approximation of
  Coulomb's cone) or ``elliptic`` (the cone itself; the pyramid's edges give a slipping body a
  friction direction its velocity does not have);
* ``torsional_friction`` (m): friction against spinning about the contact normal, the torque
  ``torsional_friction x`` the normal force at most (a contact patch's radius times the sliding
  coefficient, roughly); 0 (default): none, sliding friction alone (MuJoCo ``condim`` 3, else 4);
* ``solref`` ``[time constant s, damping ratio]`` (default MuJoCo's ``[0.02, 1]``): the
  penetration's mass-spring-damper; a shorter time constant is a stiffer contact (MuJoCo raises
  one below two physics steps to two);
* ``solimp`` ``[dmin, dmax, width m, midpoint, power]`` (default MuJoCo's
  ``[0.9, 0.95, 0.001, 0.5, 2]``): the impedance, how much of the constraint force the contact
  gives as it sinks from 0 to ``width``.

They apply to every contact of the robot with the ground, the pegs and the obstacles. The
defaults are the twin as it was built before these fields existed, bit for bit.

Links weighed (``twin.link.<link>.mass``, kg): the mass of a rigid part between two joints (a
servo with its brackets, weighed before assembly), by link name (:func:`link_names`: ``head``,
then ``<joint>_link`` behind each joint). The twin spreads it over the link's shape as it spreads
the robot YAML's nominal mass (the inertia scales with it, the centre of mass stays); a link not
named keeps the nominal mass (the T-Snake's ``module_mass / L0`` per metre of backbone, the
wheeled snake's ``link_mass``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from snake_core.errors import RobotConfigError
from snake_core.schema import Fail, check_keys, mapping, number, suggest
from snake_core.servo.actuator import position_actuator
from snake_core.servo.model import Registers, ServoModelError, ServoSpec, load_servo_model


class RegistersLike(Protocol):
    """What the servo model reads of a joint's registers (:class:`snake_core.robot.ServoRegisters` has it)."""

    def firmware_registers(self) -> Registers:
        """The registers the firmware's position loop reads."""


class JointLike(Protocol):
    """What the servo model reads of a joint (:class:`snake_core.robot.JointSpec` has it)."""

    @property
    def name(self) -> str:
        """Joint name (the robot YAML's)."""
    @property
    def type(self) -> str:
        """Joint type (``dorsal``, ``twist``, ``lateral``)."""
    @property
    def effort(self) -> float:
        """Stall torque, N m."""
    @property
    def velocity(self) -> float:
        """No-load speed, rad/s."""
    @property
    def model(self) -> str:
        """Servo model name (``config/servos/<model>.yaml``)."""
    @property
    def registers(self) -> RegistersLike:
        """The registers the bridge writes to the joint's servo."""


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

WHEEL_FRICTION = 1.5
"""Default sliding friction coefficient of a rubber tyre."""
DEFAULT_GROUND_FRICTION = 0.8
"""Ground friction of the twin without a world file (a flat plane)."""
MAX_BACKLASH_RAD = math.radians(5.0)
"""Largest gear play a ``twin:`` block accepts, rad (a worn hobby servo has a degree or two)."""
MAX_LOAD_FRICTION = 1.0
"""Largest load-dependent friction a ``twin:`` block accepts, N m per N m (BAM's m3 XL330: 0.12)."""
MAX_ZERO_OFFSET_RAD = math.radians(5.0)
"""Largest zero offset a ``twin:`` block accepts, rad (a horn a whole spline tooth off is a mounting to redo)."""

_SERVO_KEYS = ("kp", "kv", "damping", "armature", "frictionloss", "effort_scale", "latency_s", "backlash_rad",
               "load_friction")
_JOINT_KEYS = (*_SERVO_KEYS, "zero_offset_rad")   # a joint's own values: its servo's, and its zero offset
_CONTACT_KEYS = ("ground_friction", "wheel_friction")   # the contact block's numbers (flat names)
_CONTACT_MODEL_KEYS = ("torsional_friction", "cone", "solref", "solimp")   # how a contact resists (module docstring)
CONES = ("pyramidal", "elliptic")
"""Friction cones of the contact model (MuJoCo ``option/cone``)."""
MUJOCO_SOLREF = (0.02, 1.0)
"""MuJoCo's default ``solref``: time constant s, damping ratio."""
MUJOCO_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
"""MuJoCo's default ``solimp``: dmin, dmax, width m, midpoint, power."""
_TWIN_KEYS = ("servo", "joint", "link", "contact", "provenance")  # provenance: a record of the fit, not read
_LINK_KEYS = ("mass",)     # what a link's entry may set (module docstring, "Links weighed")
HEAD_LINK = "head"
"""The head's link name (the twin's root body)."""
# Plausibility bounds of a twin block (a value outside is a typo or a unit error, not a servo).
_MAX_GAIN = 1e4            # N m/rad, N m s/rad
_MAX_ARMATURE = 10.0       # kg m^2
_MAX_FRICTIONLOSS = 100.0  # N m
_MAX_EFFORT_SCALE = 10.0
_MAX_LATENCY_S = 0.5       # s
_MAX_FRICTION = 5.0        # sliding coefficient
_MAX_TORSIONAL = 0.1       # m: a contact patch 10 cm across is no longer a point contact
_MAX_SOLREF_TIME_S = 1.0   # s: a contact that takes a second to push back is no ground
_MAX_DAMPING_RATIO = 10.0
_MAX_SOLIMP_POWER = 10.0
_MAX_LINK_MASS = 100.0     # kg: a link heavier than a person is a unit error (grams for kilograms)


class TwinParamsError(RobotConfigError):
    """A ``twin:`` block with an unknown key or a value out of range (one line, file and field)."""


@dataclass(frozen=True)
class ServoModel:
    """The servo model of one joint, every value resolved (units as in the module docstring).

    Attributes:
        limp_damping: Joint damping with torque off, N m s/rad: ``damping`` less the motor's
            back-EMF ``k_t^2 / R`` (open terminals), at least 0.
        load_friction: Dry friction per N m of actuator torque (module docstring), dimensionless.
    """

    kp: float
    kv: float
    damping: float
    armature: float
    frictionloss: float
    effort: float
    latency_s: float
    backlash_rad: float = 0.0
    limp_damping: float = 0.0
    load_friction: float = 0.0
    zero_offset_rad: float = 0.0


_SPECS: dict[tuple[str, str], tuple[tuple[int, int], ServoSpec]] = {}  # (file, model) -> ((mtime ns, size), spec)


def servo_spec(model: str) -> ServoSpec:
    """The servo model ``model`` (:func:`snake_core.servo.model.load_servo_model`), read once per file version.

    Raises:
        ServoModelError: No such file, or a bad one (one line naming the file and the field).
    """
    from snake_core.config_files import resolve

    path = resolve("servo", model, ServoModelError)
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = (-1, -1)
    key = (str(path), model)
    hit = _SPECS.get(key)
    if hit is None or hit[0] != stamp:
        hit = (stamp, load_servo_model(model))
        _SPECS[key] = hit
    return hit[1]


@dataclass(frozen=True)
class ServoParams:
    """Servo parameters of one joint type; ``None`` means the value derived from the joint's servo model.

    Attributes:
        kp: Position gain, N m/rad (``None``: the firmware's P gain through the motor).
        kv: Actuator velocity gain, N m s/rad (``None``: the firmware's D term).
        damping: Joint damping, N m s/rad (``None``: back-EMF plus viscous friction).
        armature: Reflected rotor inertia, kg m^2 (``None``: the servo model's).
        frictionloss: Dry friction, N m (``None``: the servo model's Coulomb friction).
        effort_scale: Torque limit over the servo model's at the supply voltage.
        latency_s: Command latency, s.
        backlash_rad: Total gear play, rad (0: none).
        load_friction: Dry friction per N m of actuator torque, ``frictionloss + load_friction |tau|``
            (module docstring; BAM m3), dimensionless (0: none).
        zero_offset_rad: The servo's zero from the link's, rad (module docstring; a joint's own value only).
    """

    kp: float | None = None
    kv: float | None = None
    damping: float | None = None
    armature: float | None = None
    frictionloss: float | None = None
    effort_scale: float = 1.0
    latency_s: float = 0.0
    backlash_rad: float = 0.0
    load_friction: float = 0.0
    zero_offset_rad: float = 0.0

    def resolve(self, joint: JointLike, voltage: float | None = None) -> ServoModel:
        """The servo model of ``joint``: the values set here, the rest derived, Eqs. (1)-(2).

        Derived: :func:`snake_core.servo.actuator.position_actuator` of the joint's servo model
        at the registers the bridge writes to it and ``voltage`` (what
        :func:`snake_core.robot.joint_actuator` gives).

        Args:
            joint: The joint.
            voltage: Supply voltage, V (``None``: the servo model's nominal voltage).
        """
        spec = servo_spec(joint.model)
        act = position_actuator(spec, joint.registers.firmware_registers(), voltage)
        damping = act.damping if self.damping is None else self.damping
        back_emf = spec.motor.torque_constant ** 2 / spec.motor.resistance  # N m s/rad, gone with torque off
        return ServoModel(kp=act.kp if self.kp is None else self.kp, kv=act.kv if self.kv is None else self.kv,
                          damping=damping, armature=act.armature if self.armature is None else self.armature,
                          frictionloss=act.frictionloss if self.frictionloss is None else self.frictionloss,
                          effort=act.effort * self.effort_scale, latency_s=self.latency_s,
                          backlash_rad=self.backlash_rad, limp_damping=max(damping - back_emf, 0.0),
                          load_friction=self.load_friction, zero_offset_rad=self.zero_offset_rad)


@dataclass(frozen=True)
class ContactParams:
    """Contact parameters of the twin.

    Attributes:
        ground_friction: Sliding friction of the ground (``None``: the world file's).
        wheel_friction: Sliding friction of the wheeled snake's tyres.
        torsional_friction: Torsional friction of every contact, m (0: none; module docstring).
        cone: Friction cone, one of :data:`CONES`.
        solref: Contact time constant (s) and damping ratio.
        solimp: Contact impedance (dmin, dmax, width m, midpoint, power).
    """

    ground_friction: float | None = None
    wheel_friction: float = WHEEL_FRICTION
    torsional_friction: float = 0.0
    cone: str = "pyramidal"
    solref: tuple[float, float] = MUJOCO_SOLREF
    solimp: tuple[float, float, float, float, float] = MUJOCO_SOLIMP


@dataclass(frozen=True)
class TwinParams:
    """Servo parameters per joint type (and per joint) and contact parameters of the twin (defaults: no block).

    Attributes:
        servo: Joint type -> its servo parameters (a type not named has the defaults).
        joint: Joint name -> the servo values set for that joint alone (``{field: value}``, fields
            of :class:`ServoParams`), over its type's; a joint not named has its type's.
        contact: Contact parameters.
        link: Link name -> its weighed values (``{"mass": kg}``; module docstring, "Links weighed");
            a link not named has the robot YAML's nominal mass.
        supply_voltage: Voltage on the servos, V (``None``: each servo model's nominal voltage).
            An operating condition, not a value of the ``twin:`` block: the derived gains and
            torque limit scale with it (Eq. (2) of :mod:`snake_core.servo.actuator`).
    """

    servo: Mapping[str, ServoParams] = field(default_factory=dict)
    contact: ContactParams = field(default_factory=ContactParams)
    joint: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    supply_voltage: float | None = None
    link: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def link_mass(self, name: str, nominal: float) -> float:
        """The mass of link ``name``, kg: its weighed mass, else ``nominal`` (the robot YAML's)."""
        return float(self.link.get(name, {}).get("mass", nominal))

    def servo_of(self, joint_type: str) -> ServoParams:
        """The servo parameters of ``joint_type`` (the defaults when the block does not name it)."""
        return self.servo.get(joint_type, ServoParams())

    def servo_params(self, joint: JointLike) -> ServoParams:
        """The servo parameters of ``joint``: its own values (:attr:`joint`) over its type's."""
        own = self.joint.get(joint.name)
        base = self.servo_of(joint.type)
        return dataclasses.replace(base, **own) if own else base

    def servo_model(self, joint: JointLike) -> ServoModel:
        """The resolved servo model of ``joint`` at :attr:`supply_voltage` (its own values over its type's)."""
        return self.servo_params(joint).resolve(joint, self.supply_voltage)

    def at_voltage(self, voltage: float | None) -> TwinParams:
        """A copy with the servos supplied at ``voltage``, V (``None``: each servo model's nominal)."""
        return dataclasses.replace(self, supply_voltage=None if voltage is None else float(voltage))

    def servo_voltages(self, joints: Sequence[JointLike]) -> list[float]:
        """The supply voltage of each joint's servo, V: :attr:`supply_voltage`, else its servo model's nominal."""
        if self.supply_voltage is not None:
            return [self.supply_voltage] * len(joints)
        return [servo_spec(j.model).motor.nominal_voltage for j in joints]

    def is_default(self) -> bool:
        """True when every value of the block is the default (the twin is the one built without a block).

        The supply voltage is not part of the block and does not count.
        """
        return (all(p == ServoParams() for p in self.servo.values()) and not any(self.joint.values())
                and not any(self.link.values()) and self.contact == ContactParams())

    def flat(self, robot: RobotLike, world_friction: float = DEFAULT_GROUND_FRICTION) -> dict[str, float]:
        """Every parameter of ``robot``'s twin as ``{name: value}``, resolved to numbers.

        Names are ``servo.<type>.<field>`` for each joint type the robot has (the type's
        values resolved on its first joint, head to tail; a joint's own values are in
        :meth:`joint_flat`) and ``contact.ground_friction`` (and ``contact.wheel_friction`` for
        a wheeled robot). ``world_friction`` is the world file's ground friction, used when the
        block does not set one.
        """
        out: dict[str, float] = {}
        for jtype in joint_types(robot):
            joint = next(j for j in robot.joints if j.type == jtype)
            model = self.servo_of(jtype).resolve(joint, self.supply_voltage)
            p = self.servo_of(jtype)
            for key in _SERVO_KEYS:
                value = p.effort_scale if key == "effort_scale" else getattr(model, key)
                out[f"servo.{jtype}.{key}"] = float(value)
        ground = self.contact.ground_friction
        out["contact.ground_friction"] = float(world_friction if ground is None else ground)
        if robot.kind != "tsnake":
            out["contact.wheel_friction"] = float(self.contact.wheel_friction)
        return out

    def joint_flat(self, robot: RobotLike) -> dict[str, float]:
        """Every joint's servo values as ``{joint.<name>.<field>: value}`` (resolved: its own over its type's)."""
        out: dict[str, float] = {}
        for joint in robot.joints:
            model = self.servo_model(joint)
            p = self.servo_params(joint)
            for key in _JOINT_KEYS:
                out[f"joint.{joint.name}.{key}"] = float(p.effort_scale if key == "effort_scale" else
                                                         getattr(model, key))
        return out

    def with_flat(self, values: Mapping[str, float]) -> TwinParams:
        """A copy with the parameters named as in :meth:`flat` and :meth:`joint_flat` set to ``values``.

        Raises:
            KeyError: A name that is not ``servo.<type>.<field>``, ``joint.<name>.<field>`` or
                ``contact.<field>``.
        """
        servo = dict(self.servo)
        own = {k: dict(v) for k, v in self.joint.items()}
        contact = self.contact
        for name, value in values.items():
            parts = name.split(".")
            if len(parts) == 3 and parts[0] == "servo" and parts[1] in JOINT_TYPES and parts[2] in _SERVO_KEYS:
                servo[parts[1]] = dataclasses.replace(self._servo_in(servo, parts[1]), **{parts[2]: float(value)})
            elif len(parts) == 3 and parts[0] == "joint" and parts[1] and parts[2] in _JOINT_KEYS:
                own.setdefault(parts[1], {})[parts[2]] = float(value)
            elif len(parts) == 2 and parts[0] == "contact" and parts[1] in _CONTACT_KEYS:
                changed: dict[str, Any] = {parts[1]: float(value)}
                contact = dataclasses.replace(contact, **changed)
            else:
                raise KeyError(f"not a twin parameter: {name!r} (servo.<type>.<field>, joint.<name>.<field> or "
                               "contact.<field>)")
        return dataclasses.replace(self, servo=servo, contact=contact, joint=own)

    def without_joints(self, names: Sequence[str] | None = None) -> TwinParams:
        """A copy without the own values of the joints ``names`` (``None``: of every joint)."""
        keep = {} if names is None else {k: v for k, v in self.joint.items() if k not in set(names)}
        return dataclasses.replace(self, joint=keep)

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
        own = {name: dict(values) for name, values in self.joint.items() if values}
        if own:
            out["joint"] = own
        links = {name: dict(values) for name, values in self.link.items() if values}
        if links:
            out["link"] = links
        contact = {k: list(v) if isinstance(v, tuple) else v
                   for k in _CONTACT_KEYS + _CONTACT_MODEL_KEYS
                   if (v := getattr(self.contact, k)) != getattr(ContactParams(), k)}
        if contact:
            out["contact"] = contact
        return out


def joint_types(robot: RobotLike) -> list[str]:
    """Joint types of ``robot``, in the order they first appear head to tail."""
    return list(dict.fromkeys(j.type for j in robot.joints))


def link_names(joints: Sequence[str]) -> list[str]:
    """The robot's link names, head to tail: :data:`HEAD_LINK`, then ``<joint>_link`` behind each joint."""
    return [HEAD_LINK, *(f"{j}_link" for j in joints)]


def parse_twin_block(data: Any, source: str, joints: Sequence[str] | None = None) -> TwinParams:
    """Validate a ``twin:`` block (strict: unknown keys and values out of range are errors).

    Args:
        data: The block as read from YAML (``None``: the defaults).
        source: The file, for messages.
        joints: The robot's joint names, which ``twin.joint`` may name, and whose links
            (:func:`link_names`) ``twin.link`` may name (``None``: not checked).

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
              "backlash_rad": (0.0, MAX_BACKLASH_RAD, False), "load_friction": (0.0, MAX_LOAD_FRICTION, False),
              "zero_offset_rad": (-MAX_ZERO_OFFSET_RAD, MAX_ZERO_OFFSET_RAD, False)}
    for jtype, values in types.items():
        where = f"twin.servo.{jtype}"
        entry = mapping(values, where, fail)
        check_keys(entry, _SERVO_KEYS, where, fail, f" of a servo of type {jtype}")
        checked = {k: number(v, f"{where}.{k}", fail, low=bounds[k][0], high=bounds[k][1], low_open=bounds[k][2])
                   for k, v in entry.items()}
        servo[str(jtype)] = ServoParams(**checked)
    own: dict[str, dict[str, float]] = {}
    named = mapping(block.get("joint"), "twin.joint", fail, required=False)
    for jname in named:
        if joints is not None and jname not in joints:
            raise fail(f"twin.joint.{jname}", f"not a joint of the robot{suggest(str(jname), set(joints), 'joints')}")
    for jname, values in named.items():
        where = f"twin.joint.{jname}"
        entry = mapping(values, where, fail)
        check_keys(entry, _JOINT_KEYS, where, fail, " of a joint's servo")
        own[str(jname)] = {k: number(v, f"{where}.{k}", fail, low=bounds[k][0], high=bounds[k][1],
                                     low_open=bounds[k][2]) for k, v in entry.items()}
    links = _links(block, None if joints is None else link_names(joints), fail)
    contact_block = mapping(block.get("contact"), "twin.contact", fail, required=False)
    check_keys(contact_block, _CONTACT_KEYS + _CONTACT_MODEL_KEYS, "twin.contact", fail, " of the contact model")
    frictions: dict[str, Any] = {k: number(v, f"twin.contact.{k}", fail, low=0.0, high=_MAX_FRICTION, low_open=True)
                                 for k, v in contact_block.items() if k in _CONTACT_KEYS}
    contact = ContactParams(**frictions, **_contact_model(contact_block, fail))
    return TwinParams(servo=servo, contact=contact, joint=own, link=links)


def _links(block: Mapping[str, Any], names: Sequence[str] | None, fail: Fail) -> dict[str, dict[str, float]]:
    """The weighed links of a ``twin`` block, checked (module docstring, "Links weighed")."""
    named = mapping(block.get("link"), "twin.link", fail, required=False)
    out: dict[str, dict[str, float]] = {}
    for name, values in named.items():
        where = f"twin.link.{name}"
        if names is not None and name not in names:
            raise fail(where, f"not a link of the robot{suggest(str(name), set(names), 'links')}")
        entry = mapping(values, where, fail)
        check_keys(entry, _LINK_KEYS, where, fail, " of a link")
        out[str(name)] = {k: number(v, f"{where}.{k}", fail, low=0.0, high=_MAX_LINK_MASS, low_open=True)
                          for k, v in entry.items()}
    return out


def _contact_model(block: Mapping[str, Any], fail: Fail) -> dict[str, Any]:
    """The contact model's fields of a ``twin.contact`` block, checked (module docstring, "Contact model")."""
    out: dict[str, Any] = {}
    if "torsional_friction" in block:
        out["torsional_friction"] = number(block["torsional_friction"], "twin.contact.torsional_friction", fail,
                                           low=0.0, high=_MAX_TORSIONAL)
    if "cone" in block:
        if block["cone"] not in CONES:
            raise fail("twin.contact.cone", f"must be one of {', '.join(CONES)}, got {block['cone']!r}")
        out["cone"] = str(block["cone"])
    # Per entry: (low, high, low_open) of MuJoCo's valid range (documentation, "Solver parameters").
    ranges = {"solref": ((0.0, _MAX_SOLREF_TIME_S, True), (0.0, _MAX_DAMPING_RATIO, True)),
              "solimp": ((0.0, 1.0, True), (0.0, 1.0, True), (0.0, 1.0, True), (0.0, 1.0, True),
                         (1.0, _MAX_SOLIMP_POWER, False))}
    for key, bounds in ranges.items():
        if key not in block:
            continue
        values = block[key]
        where = f"twin.contact.{key}"
        if not isinstance(values, list) or len(values) != len(bounds):
            raise fail(where, f"must be a list of {len(bounds)} numbers, got {values!r}")
        out[key] = tuple(number(v, f"{where}[{i}]", fail, low=lo, high=hi, low_open=open_)
                         for i, (v, (lo, hi, open_)) in enumerate(zip(values, bounds, strict=True)))
    for i in (0, 1, 3):   # impedances and the midpoint: within (0, 1), 1 excluded too
        if "solimp" in out and out["solimp"][i] >= 1.0:
            raise fail(f"twin.contact.solimp[{i}]", f"must be below 1, got {out['solimp'][i]!r}")
    return out
