"""MJCF generation from the robot YAML (and a world description).

Nothing here is a hand-copied dimension: every length, mass, joint axis and limit comes from
:func:`snake_core.robot.load_robot`, every servo's gains, torque limit, damping and inertia from
its servo model (:mod:`snake_core.twin_params`); what is added are the modelling choices
neither states (contact and solver settings), each a named private constant below with its
unit and reason. See ``docs/simulation.md``.

Frames (the convention of :mod:`snake_core.urdf` and the gaits): every link frame has x
along the backbone from head to tail (the arc-length direction s of 003), z dorsal (up
when the snake lies flat) and y = z x x; a joint's YAML ``axis`` is written unchanged in
that frame. The head is the root body and carries the free joint (the "base"); its origin
is the head tip, s = 0, and at zero joint angles the body lies along the head frame's +x
axis, so the head-first direction of travel is the head frame's -x.

T-Snake (003 Sec. III-D, IV): n modules of length L0; every joint sits at its module's
``body.joint_positions`` (the same arc positions as
:meth:`snake_core.robot.RobotModel.joint_arc_positions`). The backbone is cut at the
joints into rigid segments, each a capsule of the module radius from joint to joint,
with mass ``module_mass / L0`` per metre of segment (so the total is n x module_mass), or the
link's weighed mass where the twin's block gives one (``twin.link``, :mod:`snake_core.twin_params`).

Planar wheeled snake (002 Fig. 2): link i is a box of length L_i = d_i + l_i from its
front joint; at d_i behind the front joint it carries an axle with two free-spinning
passive wheels (hinges without actuator, high-friction cylinders) whose contact with the
ground is the only thing that stops sideways sliding: the non-holonomic constraint
comes from the physics, not from an equation.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from snake_core.robot import JointSpec, RobotModel
from snake_core.twin_params import (
    DEFAULT_GROUND_FRICTION,
    HEAD_LINK,
    MUJOCO_SOLIMP,
    MUJOCO_SOLREF,
    ContactParams,
    TwinParams,
    link_names,
)
from snake_hardware.sim.worlds import World

# --- names shared with the twin ---------------------------------------------------------
# Body names are those of the URDF links (snake_core.urdf.link_names, from
# snake_core.twin_params.link_names, which a twin block's weighed links name): ``head``, then
# ``<joint>_link`` for the body after each joint.
HEAD_BODY = HEAD_LINK  # root body (the base, carrying the free joint); the head segment / link 1
FREE_JOINT = "base_free"  # free joint of the root body
HEAD_TIP_SITE = "head_tip"  # backbone point s = 0
TAIL_TIP_SITE = "tail_tip"  # backbone point s = L
HEAD_MARKER_SITES = ("head_marker_0", "head_marker_1", "head_marker_2")  # synthetic mocap markers
GROUND_GEOM = "ground"

# --- servo model ------------------------------------------------------------------------
# The servo model (position gain, damping, armature, friction loss, torque limit, latency) is
# data: snake_core.twin_params derives it from each joint's servo model file (config/servos/,
# through snake_core.servo.actuator.position_actuator: firmware registers and supply voltage),
# and a calibration target's ``twin:`` block overrides what it names.
# Gear play (a servo's ``backlash_rad`` > 0): the joint becomes a motor-side hinge (named as the
# joint; the actuator, armature and damping act on it) on a rotor body, carrying the link through
# a link-side hinge ``<joint>_play`` limited to +-play/2. The actuator pushes the motor side, but
# its loop reads the output shaft (the encoder of an X-series servo sits on it): SimTwin shifts
# the control by the play's angle before every step (twin.OutputLoop). The dry friction acts on
# the output shaft too, a fixed tendon ``<joint>_output`` over both hinges (their sum): it is the
# loaded gear train's, and the rotor crosses the play against its inertia and its back-EMF (the
# motor side's damping) alone. The play's limits are soft constraints: reference time constant
# two physics steps (the least MuJoCo keeps stable; it clamps shorter ones) and damping ratio 1
# (critical: the link meets the gear's flank without bouncing off it); impedance 0.99 to 0.999
# over 1e-4 rad (a flank under a static load sinks by (1 - d) / d of what the default 0.9-0.95
# lets it: well within the play). The play hinge has the servo's armature and no damping or
# friction of its own. That armature is numerics, not physics: an inertia on the relative motion
# across the play, it pulls the link along with the rotor while the play is open (the link's
# acceleration about J / (J + I_link) of the rotor's), where a physical play leaves the link still
# until the rotor meets the other flank. Without it the light link rattles between the flanks at
# the 4 ms step: with the loop and the friction on the output (8 s of the lifted multisine,
# friction loss 0.02 N m) a 0.1 mrad play moves the joints by 0.08 mrad RMS with the armature
# (0.04 at 1 ms) and 0.44 without (0.30 at 1 ms); a 6 mrad play by 1.59 (1.51 at 1 ms) and 1.93
# (1.66). docs/simulation.md, "Gear play", gives the measurements.
PLAY_SUFFIX = "_play"  # link-side hinge of a joint with gear play
OUTPUT_SUFFIX = "_output"  # fixed tendon of a joint with gear play: its output angle, carrying its dry friction
ROTOR_SUFFIX = "_rotor"  # body between the motor-side and the link-side hinge
_PLAY_SOLREF_STEPS = 2.0  # time constant of the play's limits, physics steps
_PLAY_DAMPRATIO = 1.0  # damping ratio of the play's limits (critical: no bounce)
_PLAY_SOLIMP = (0.99, 0.999, 1e-4)  # impedance of the play's limits: dmin, dmax, width (rad)
_PLAY_DAMPING = 0.0  # N m s/rad, no viscous coupling across the play
_ROTOR_MASS = 1e-4  # kg, the rotor body's own mass (on the axis; its inertia is the motor hinge's armature)
_ROTOR_INERTIA = 1e-9  # kg m^2, the rotor body's principal inertias (MuJoCo needs a moving body to have some)

# --- contact ----------------------------------------------------------------------------
# Contact bits: robot geoms touch the world only (no self-collision: cheaper, and the gaits
# never fold the body onto itself); wheeled-snake link boxes touch obstacles, not the ground.
_ROBOT_CONTYPE = 1  # geoms that touch ground and obstacles
_LINK_BOX_CONTYPE = 2  # wheeled-snake link boxes: obstacles only
_GROUND_CONAFFINITY = 1
_OBSTACLE_CONAFFINITY = 3
# MuJoCo mixes friction of two geoms by max unless priorities differ (then the higher wins):
# the ground and pegs have priority 1 so the world file's friction applies to the T-Snake's
# skin; wheels have priority 2 so their tyre friction applies.
_WORLD_PRIORITY = 1
_WHEEL_PRIORITY = 2
_SKIN_FRICTION = (0.5, 0.005, 0.0001)  # sliding, torsional (m), rolling (m): used only if world priority is lost
_TORSIONAL_ROLLING = (0.005, 0.0001)  # torsional (m), rolling (m) friction of the ground, pegs and tyres
_CONDIM = 3  # sliding friction only, where the contact model has no torsional friction (TwinParams.contact)

# --- wheeled snake geometry not in the YAML -------------------------------------------
_WHEEL_HALF_THICKNESS = 0.004  # m
_WHEEL_MASS_FRACTION = 0.1  # of link_mass, per wheel (two wheels per link)
_WHEEL_DAMPING = 1e-5  # N m s/rad, bearing friction of a free-spinning wheel
_WHEEL_ARMATURE = 1e-6  # kg m^2, keeps the light wheel hinge well conditioned
_LINK_BOX_HALF_HEIGHT_FRACTION = 0.5  # of wheel_radius
_LINK_BOX_GAP = 0.002  # m, clearance between the link box and each wheel

# --- markers and spawn ------------------------------------------------------------------
_MARKER_STALK = 0.015  # m, markers sit this far above the head's top surface
_SPAWN_CLEARANCE = 0.005  # m, gap between the lowest point of the body and the ground at spawn
_SPAWN_SAMPLES = 64  # points along the body checked against the ground at spawn
_MIN_SEGMENT = 1e-6  # m, shorter backbone segments become spheres
_HFIELD_BASE = 0.1  # m, thickness of the height field's solid base below its lowest point
LIFT_HEIGHT = 2.0
"""Height a lifted robot's head is held above its spawn point, m (its body, hanging down, clears the ground)."""


@dataclass(frozen=True)
class SimOptions:
    """Solver settings written into ``<option>`` (choices explained in docs/simulation.md).

    Attributes:
        timestep: Physics step, s. 4 ms keeps the stiffest element, a servo (kp against
            the armature, natural period about 0.15 s at the XM430-W350's factory gain, 0.1 s
            at twice it), and the 20 ms contact time constant well resolved, at 250 steps per
            simulated second.
        integrator: ``implicitfast``: actuator kv and joint damping are integrated
            implicitly, so damping never limits the step.
        solver: ``Newton``: converges in a few iterations on small contact problems.
        iterations: Cap of solver iterations (Newton rarely needs more than 5).
        ls_iterations: Cap of line-search iterations.
        lifted: The robot held by its head off the ground, as on a stand for identifying its
            servos: the head has no free joint and is held :data:`LIFT_HEIGHT` above its spawn
            point with the body hanging straight down from it (gravity along the body axis,
            so the servos carry no static load), and contacts are off.
    """

    timestep: float = 0.004
    integrator: str = "implicitfast"
    solver: str = "Newton"
    iterations: int = 20
    ls_iterations: int = 10
    lifted: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timestep) and 0 < self.timestep <= 0.01):
            raise ValueError(f"timestep: must be in (0, 0.01] s, got {self.timestep}")
        if self.iterations < 1 or self.ls_iterations < 1:
            raise ValueError("iterations, ls_iterations: must be >= 1")


def _f(*values: float) -> str:
    """MJCF number list."""
    return " ".join(f"{float(v):.9g}" for v in values)


def yaw_quat(yaw: float) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation by ``yaw`` rad about z."""
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def servo_gains(joint: JointSpec, twin: TwinParams | None = None) -> dict[str, float]:
    """Position-servo parameters of one joint (:meth:`snake_core.twin_params.TwinParams.servo_model`).

    Args:
        joint: The joint (its servo model gives the defaults).
        twin: The twin's parameters (``None``: the defaults).

    Returns:
        ``kp`` (N m/rad), ``kv`` (N m s/rad), ``damping`` (N m s/rad, back-EMF and viscous
        friction), ``limp_damping`` (N m s/rad, with torque off), ``armature`` (kg m^2),
        ``frictionloss`` (N m), ``effort`` (N m, the force limit) and ``latency_s`` (s).
    """
    model = (twin or TwinParams()).servo_model(joint)
    return {"kp": model.kp, "kv": model.kv, "damping": model.damping, "limp_damping": model.limp_damping,
            "armature": model.armature, "frictionloss": model.frictionloss, "effort": model.effort,
            "latency_s": model.latency_s}


def backbone_boundaries(robot: RobotModel) -> np.ndarray:
    """Arc positions cutting the body into rigid segments, m: [0, joints..., L].

    For the T-Snake the joints sit at :meth:`RobotModel.joint_arc_positions`; for the
    wheeled snake at the cumulative link lengths.
    """
    if robot.kind == "tsnake":
        inner = robot.joint_arc_positions()
    else:
        inner = np.cumsum(robot.link_lengths)[:-1]
    return np.concatenate([[0.0], inner, [robot.length]])


def spawn_pose(robot: RobotModel, world: World | None, x: float, y: float, yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """Pose of the root body for a straight robot lying just above the ground.

    Args:
        robot: The robot.
        world: The world (``None``: flat ground at z = 0).
        x: Head position, m.
        y: Head position, m.
        yaw: Yaw of the head frame, rad (the body lies along (cos yaw, sin yaw) from the head).

    Returns:
        Position (m) and quaternion (w, x, y, z) of the root body.
    """
    s = np.linspace(0.0, robot.length, _SPAWN_SAMPLES)
    px, py = x + s * math.cos(yaw), y + s * math.sin(yaw)
    ground = float(np.max(world.ground_height(px, py))) if world is not None else 0.0
    lift = robot.tsnake_body.radius if robot.kind == "tsnake" else robot.wheeled_body.wheel_radius
    return np.array([x, y, ground + lift + _SPAWN_CLEARANCE]), yaw_quat(yaw)


def build_mjcf(robot: RobotModel, world: World | None = None, options: SimOptions | None = None,
               twin: TwinParams | None = None) -> str:
    """MJCF text of ``robot`` in ``world``.

    Args:
        robot: Robot loaded with :func:`snake_core.robot.load_robot`.
        world: World loaded with :func:`snake_hardware.sim.worlds.load_world`
            (``None``: a flat plane with friction 0.8).
        options: Solver settings.
        twin: Servo and contact parameters (``None``: the defaults; the command latency is
            the twin's business, :class:`snake_hardware.sim.twin.SimTwin`, not the model's).

    Returns:
        The MJCF document (compiles with ``mujoco.MjModel.from_xml_string``).
    """
    options = options or SimOptions()
    twin = twin or TwinParams()
    root = ET.Element("mujoco", model=f"{robot.name}_{world.name if world else 'plane'}")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true", inertiafromgeom="true")
    option = ET.SubElement(
        root,
        "option",
        timestep=_f(options.timestep),
        integrator=options.integrator,
        solver=options.solver,
        iterations=str(options.iterations),
        ls_iterations=str(options.ls_iterations),
        cone=twin.contact.cone,
    )
    if twin.contact.solref != MUJOCO_SOLREF or twin.contact.solimp != MUJOCO_SOLIMP:
        # Every geom's: a contact mixes its two geoms' (MuJoCo averages solref and solimp).
        ET.SubElement(ET.SubElement(root, "default"), "geom", solref=_f(*twin.contact.solref),
                      solimp=_f(*twin.contact.solimp))
    asset = ET.SubElement(root, "asset")
    worldbody = ET.SubElement(root, "worldbody")
    ET.SubElement(worldbody, "light", pos="0 0 5", dir="0 0 -1", directional="true")
    _add_world(world, asset, worldbody, twin.contact)
    spawn = world.spawn if world is not None else None
    x, y, yaw = (spawn.x, spawn.y, spawn.yaw) if spawn is not None else (0.0, 0.0, 0.0)
    pos, quat = spawn_pose(robot, world, x, y, yaw)
    if options.lifted:  # hanging from the head, body axis (head frame x) straight down
        pos = pos + np.array([0.0, 0.0, LIFT_HEIGHT])
        quat = np.array([math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0])
        ET.SubElement(option, "flag", contact="disable")
    actuator = ET.SubElement(root, "actuator")
    if robot.kind == "tsnake":
        _add_tsnake(robot, worldbody, pos, quat, twin, options)
    else:
        _add_wheeled(robot, worldbody, pos, quat, twin, options)
    _add_output_friction(root, robot, twin)
    for j in robot.joints:
        g = servo_gains(j, twin)
        attrs = {
            "name": j.name,
            "joint": j.name,
            "kp": _f(g["kp"]),
            "kv": _f(g["kv"]),
            "forcerange": _f(-g["effort"], g["effort"]),
        }
        # A joint with gear play closes its loop on the output shaft: the twin shifts its control
        # by the play's angle each step (SimTwin, OutputLoop), after clamping the target to the
        # joint's range itself; MuJoCo's clamp would cut the shift at the range's ends.
        if not j.continuous and twin.servo_model(j).backlash_rad <= 0:
            attrs["ctrlrange"] = _f(j.lower, j.upper)
        ET.SubElement(actuator, "position", attrs)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def _contact(contact: ContactParams, sliding: float) -> dict[str, str]:
    """A geom's ``friction`` and ``condim`` under the twin's contact model (torsional friction: condim 4)."""
    if contact.torsional_friction > 0:
        return {"friction": _f(sliding, contact.torsional_friction, _TORSIONAL_ROLLING[1]), "condim": "4"}
    return {"friction": _f(sliding, *_TORSIONAL_ROLLING), "condim": str(_CONDIM)}


def _add_world(world: World | None, asset: ET.Element, worldbody: ET.Element, contact: ContactParams) -> None:
    friction = world.friction if world is not None else DEFAULT_GROUND_FRICTION
    if contact.ground_friction is not None:
        friction = contact.ground_friction
    common = {
        "name": GROUND_GEOM,
        "contype": "0",
        "conaffinity": str(_GROUND_CONAFFINITY),
        "priority": str(_WORLD_PRIORITY),
        **_contact(contact, friction),
    }
    if world is None or world.terrain is None:
        half_x, half_y = (world.size_x / 2, world.size_y / 2) if world else (10.0, 10.0)
        ET.SubElement(worldbody, "geom", {"type": "plane", "size": _f(half_x, half_y, 0.1), **common})
    else:
        t = world.terrain
        h = t.heights
        lo, span = float(h.min()), float(np.ptp(h))
        # MJCF elevation rows run from +y to -y (image order); ours run from -y: flip.
        elevation = np.flipud((h - lo) / span) if span > 0 else np.zeros_like(h)
        ET.SubElement(
            asset,
            "hfield",
            name="terrain",
            nrow=str(h.shape[0]),
            ncol=str(h.shape[1]),
            size=_f(t.size_x / 2, t.size_y / 2, max(span, 1e-6), _HFIELD_BASE),
            elevation=" ".join(f"{v:.6f}" for v in elevation.ravel()),
        )
        ET.SubElement(worldbody, "geom", {"type": "hfield", "hfield": "terrain", "pos": _f(0, 0, lo), **common})
    if world is not None and world.pegs is not None:
        p = world.pegs
        peg = _contact(contact, p.friction)
        for i, (cx, cy) in enumerate(p.centres):
            base = float(world.ground_height(cx, cy)) - (float(np.ptp(world.terrain.heights)) if world.terrain else 0.0)
            top = float(world.ground_height(cx, cy)) + p.height
            ET.SubElement(
                worldbody,
                "geom",
                name=f"peg_{i}",
                type="cylinder",
                pos=_f(cx, cy, (base + top) / 2),
                size=_f(p.diameter / 2, (top - base) / 2),
                contype="0",
                conaffinity=str(_OBSTACLE_CONAFFINITY),
                priority=str(_WORLD_PRIORITY),
                friction=peg["friction"],
                condim=peg["condim"],
            )


def _jointed_body(parent: ET.Element, j: JointSpec, pos: str, twin: TwinParams, options: SimOptions) -> ET.Element:
    """The body ``<joint>_link`` behind joint ``j``, jointed to ``parent`` (with its gear play, if any).

    Without play: one hinge named as the joint. With a play ``b > 0``: a rotor body on the
    motor-side hinge (named as the joint), and the link on a hinge ``<joint>_play`` limited to
    ``[-b/2, b/2]`` (module constants, "Gear play").
    """
    play = twin.servo_model(j).backlash_rad
    if play <= 0:
        body = ET.SubElement(parent, "body", name=link_names([j.name])[1], pos=pos)
        _joint_element(body, j, twin)
        return body
    rotor = ET.SubElement(parent, "body", name=f"{j.name}{ROTOR_SUFFIX}", pos=pos)
    _joint_element(rotor, j, twin, friction=False)   # the dry friction is the output's (_add_output_friction)
    ET.SubElement(rotor, "inertial", pos="0 0 0", mass=_f(_ROTOR_MASS), diaginertia=_f(*[_ROTOR_INERTIA] * 3))
    body = ET.SubElement(rotor, "body", name=link_names([j.name])[1], pos="0 0 0")
    ET.SubElement(body, "joint", {
        "name": f"{j.name}{PLAY_SUFFIX}", "type": "hinge", "pos": "0 0 0", "axis": _f(*j.axis),
        "damping": _f(_PLAY_DAMPING), "armature": _f(servo_gains(j, twin)["armature"]),
        "range": _f(-play / 2, play / 2),
        "solreflimit": _f(_PLAY_SOLREF_STEPS * options.timestep, _PLAY_DAMPRATIO), "solimplimit": _f(*_PLAY_SOLIMP)})
    return body


def _add_output_friction(root: ET.Element, robot: RobotModel, twin: TwinParams) -> None:
    """A fixed tendon ``<joint>_output`` per joint with gear play, carrying the servo's dry friction.

    The tendon's length is the joint's output angle, the motor side plus the play (module
    constants, "Gear play").
    """
    played = [j for j in robot.joints if twin.servo_model(j).backlash_rad > 0]
    if not played:
        return
    tendon = ET.SubElement(root, "tendon")
    for j in played:
        friction = servo_gains(j, twin)["frictionloss"]
        attrs = {"name": f"{j.name}{OUTPUT_SUFFIX}"}
        if friction > 0:
            attrs["frictionloss"] = _f(friction)
        fixed = ET.SubElement(tendon, "fixed", attrs)
        ET.SubElement(fixed, "joint", joint=j.name, coef="1")
        ET.SubElement(fixed, "joint", joint=f"{j.name}{PLAY_SUFFIX}", coef="1")


def _joint_element(parent: ET.Element, j: JointSpec, twin: TwinParams, friction: bool = True) -> None:
    g = servo_gains(j, twin)
    attrs = {
        "name": j.name,
        "type": "hinge",
        "pos": "0 0 0",
        "axis": _f(*j.axis),
        "damping": _f(g["damping"]),
        "armature": _f(g["armature"]),
    }
    if friction and g["frictionloss"] > 0:
        attrs["frictionloss"] = _f(g["frictionloss"])
    if not j.continuous:
        attrs["range"] = _f(j.lower, j.upper)
    zero = twin.servo_model(j).zero_offset_rad
    if zero != 0.0:
        # The servo's angle is qpos, the link turns by qpos - ref (snake_core.twin_params, "zero_offset_rad").
        attrs["ref"] = _f(zero)
    ET.SubElement(parent, "joint", attrs)


def _add_tsnake(robot: RobotModel, worldbody: ET.Element, pos: np.ndarray, quat: np.ndarray,
                twin: TwinParams, options: SimOptions) -> None:
    lifted = options.lifted
    body_dims = robot.tsnake_body
    radius = body_dims.radius
    skin = _contact(twin.contact, _SKIN_FRICTION[0])
    density = body_dims.module_mass / body_dims.module_length  # kg/m
    links = link_names(robot.joint_names)
    b = backbone_boundaries(robot)
    parent = worldbody
    for k in range(len(b) - 1):
        seg = float(b[k + 1] - b[k])
        if k == 0:
            body = ET.SubElement(parent, "body", name=HEAD_BODY, pos=_f(*pos), quat=_f(*quat))
            if not lifted:
                ET.SubElement(body, "freejoint", name=FREE_JOINT)
        else:
            body = _jointed_body(parent, robot.joints[k - 1], _f(b[k] - b[k - 1], 0, 0), twin, options)
        geom = {
            "name": f"segment_{k}",
            "size": _f(radius),
            "mass": _f(twin.link_mass(links[k], density * seg)),
            "contype": str(_ROBOT_CONTYPE),
            "conaffinity": "0",
            "condim": skin["condim"],
            "friction": skin["friction"],
        }
        if seg > _MIN_SEGMENT:
            ET.SubElement(body, "geom", {"type": "capsule", "fromto": _f(0, 0, 0, seg, 0, 0), **geom})
        else:
            ET.SubElement(body, "geom", {"type": "sphere", **geom})
        if k == 0:
            ET.SubElement(body, "site", name=HEAD_TIP_SITE, pos="0 0 0", size=_f(radius / 4))
            head_len = max(seg, radius)
            _markers(body, head_len, radius, radius, robot.following_presets.marker_template)
        if k == len(b) - 2:
            ET.SubElement(body, "site", name=TAIL_TIP_SITE, pos=_f(seg, 0, 0), size=_f(radius / 4))
        parent = body


def _markers(body: ET.Element, length: float, half_width: float, top: float,
             template: Sequence[Sequence[float]] | None = None) -> None:
    """Three mocap marker sites on the head, m, head frame.

    The robot's ``following.marker_template`` where its YAML gives one (the follower's template),
    else an isosceles triangle on top of the head.
    """
    z = top + _MARKER_STALK
    pts = [(0.2 * length, 0.0, z), (0.8 * length, 0.7 * half_width, z), (0.8 * length, -0.7 * half_width, z)]
    if template is not None:
        pts = [(float(p[0]), float(p[1]), float(p[2])) for p in template]
    for name, p in zip(HEAD_MARKER_SITES, pts, strict=True):
        ET.SubElement(body, "site", name=name, pos=_f(*p), size="0.005")


def _add_wheeled(robot: RobotModel, worldbody: ET.Element, pos: np.ndarray, quat: np.ndarray,
                 twin: TwinParams, options: SimOptions) -> None:
    lifted = options.lifted
    body_dims = robot.wheeled_body
    width = body_dims.width
    r_wheel = body_dims.wheel_radius
    tyre = _contact(twin.contact, twin.contact.wheel_friction)
    link_mass = body_dims.link_mass
    lengths = robot.link_lengths
    wheel_y = width / 2 - _WHEEL_HALF_THICKNESS
    box_half_w = width / 2 - 2 * _WHEEL_HALF_THICKNESS - _LINK_BOX_GAP
    box_half_h = _LINK_BOX_HALF_HEIGHT_FRACTION * r_wheel
    parent = worldbody
    n = body_dims.n_links
    links = link_names(robot.joint_names)
    for i in range(n):
        length = float(lengths[i])
        mass = twin.link_mass(links[i], link_mass)   # the box and its wheels, weighed together
        if i == 0:
            body = ET.SubElement(parent, "body", name=HEAD_BODY, pos=_f(*pos), quat=_f(*quat))
            if not lifted:
                ET.SubElement(body, "freejoint", name=FREE_JOINT)
            ET.SubElement(body, "site", name=HEAD_TIP_SITE, pos="0 0 0", size="0.005")
            _markers(body, length, box_half_w, box_half_h, robot.following_presets.marker_template)
        else:
            body = _jointed_body(parent, robot.joints[i - 1], _f(float(lengths[i - 1]), 0, 0), twin, options)
        ET.SubElement(
            body,
            "geom",
            name=f"link{i + 1}_box",
            type="box",
            pos=_f(length / 2, 0, 0),
            size=_f(length / 2, box_half_w, box_half_h),
            mass=_f(mass * (1 - 2 * _WHEEL_MASS_FRACTION)),
            contype=str(_LINK_BOX_CONTYPE),
            conaffinity="0",
        )
        d_i = float(robot.wheel_d[i])
        ET.SubElement(body, "site", name=f"link{i + 1}_axle", pos=_f(d_i, 0, 0), size="0.004")
        for side, sign in (("left", 1.0), ("right", -1.0)):
            wname = f"link{i + 1}_wheel_{side}"
            wheel = ET.SubElement(body, "body", name=wname, pos=_f(d_i, sign * wheel_y, 0))
            ET.SubElement(
                wheel, "joint", name=wname, type="hinge", axis="0 1 0",
                damping=_f(_WHEEL_DAMPING), armature=_f(_WHEEL_ARMATURE),
            )
            ET.SubElement(
                wheel,
                "geom",
                name=wname,
                type="cylinder",
                size=_f(r_wheel, _WHEEL_HALF_THICKNESS),
                zaxis="0 1 0",
                mass=_f(mass * _WHEEL_MASS_FRACTION),
                contype=str(_ROBOT_CONTYPE),
                conaffinity="0",
                condim=tyre["condim"],
                priority=str(_WHEEL_PRIORITY),
                friction=tyre["friction"],
            )
        if i == n - 1:
            ET.SubElement(body, "site", name=TAIL_TIP_SITE, pos=_f(length, 0, 0), size="0.005")
        parent = body
