"""The bench robot: the servo emulator's servos attached to a rigid-body model of the robot.

A stand-in for the real robot, for rehearsing hardware workflows (bring-up, teleop,
excitation, bag recording, the follow loop) through the real bridge and a motion-capture
topic. It is written apart from the MuJoCo twin (:mod:`snake_hardware.sim`), which it never
imports (and which never imports it): two models of one robot, so that what is fitted or
tuned on the twin meets physics it does not contain. See docs/hardware.md, "Rehearse on
the bench robot".

What differs from the twin on purpose:

- Servos: torque (``motor``) actuators driven by the X-series firmware and a DC-motor
  model (:mod:`snake_hardware.emulator.firmware`: PID in register units, PWM and current
  limits, back-EMF from the YAML's stall torque and no-load speed, backlash), read by a
  4096-tick encoder; the twin uses MuJoCo position actuators (kp, kv, effort clamp).
- Every robot is a little different: :func:`draw_variation` draws per-servo gains, motor
  constants, friction, backlash, rotor inertia and horn mounting error, and per-link mass,
  inertia and centre of mass, within :data:`VARIATION` (``--seed``; ``--truth`` writes them).
- Gear friction rises with the torque the gears pass on (BAM's load-dependent Coulomb
  friction, its model m3): each step, a joint's dry friction is ``c + l |tau|``, ``c`` its
  drawn ``frictionloss_nm``, ``l`` its drawn ``load_friction`` and ``tau`` the torque the
  servo drives through its gear train (MuJoCo ``frictionloss`` of the hinge, set per step).
  The twin's friction is a constant per joint.
- Contact (:data:`CONTACT`): elliptic friction cones with torsional friction (condim 4), a
  stiffer and less damped contact (solref 0.01 s / 0.8), a softer impedance (solimp) and a
  drawn ground-friction factor; the twin's defaults are pyramidal cones, condim 3 and MuJoCo's
  default solref/solimp (a target's ``twin.contact`` may set others).
- Integration: semi-implicit Euler at :data:`TIMESTEP` s; the twin uses implicitfast at 4 ms.

The body is stepped in real time against the wall clock in its own thread; the bus
(:class:`snake_hardware.emulator.bus.ServoBusEmulator`, simulated clock) keeps serving the
protocol on its pty from its own thread meanwhile.
"""

from __future__ import annotations

import math
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from snake_core.config_files import resolve
from snake_core.robot import JointSpec, RobotModel, load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator.bus import ServoBusEmulator
from snake_hardware.emulator.firmware import RAD_PER_TICK, BodyServo, Firmware, MotorParams, read_registers

TIMESTEP = 0.004
"""Physics and firmware step, s."""
CHUNK_STEPS = 2
"""Physics steps between two exchanges with the control tables (8 ms: goals in, encoders out)."""
LIFT_HEIGHT_M = 1.5
"""Height of the held head above the ground when ``lifted``, m (the body hangs clear of it)."""
SUPPLY_RESISTANCE_OHM = 0.1
"""Supply and cable resistance shared by every servo, ohm: the bus voltage sags with the total current."""
MAX_LAG_S = 0.25
"""Simulated time behind the wall clock beyond which the body skips ahead (counted in ``lag_events``)."""

VARIATION: Mapping[str, tuple[float, float]] = {
    "gain_scale": (0.9, 1.1),            # drive electronics: applied duty per commanded duty
    "stall_torque_scale": (0.92, 1.08),  # motor constant: stall torque / YAML effort
    "no_load_speed_scale": (0.95, 1.05),  # no-load speed / YAML velocity
    "frictionloss_nm": (0.02, 0.08),     # dry friction of the gear train, N m
    "load_friction": (0.05, 0.15),       # more dry friction per N m passed through the gears (BAM m3)
    "damping_nm_s": (0.005, 0.02),       # viscous gear loss, N m s/rad (back-EMF is the motor's)
    "backlash_rad": (math.radians(0.1), math.radians(0.4)),  # total gear play
    "rotor_inertia_kg_m2": (0.008, 0.014),  # reflected rotor inertia (joint armature)
    "zero_error_rad": (-math.radians(0.2), math.radians(0.2)),  # horn mounting error
    "mass_scale": (0.9, 1.1),            # per link
    "inertia_scale": (0.8, 1.2),         # per link, every principal moment
    "com_offset_m": (-0.003, 0.003),     # per link, along the backbone
    "ground_friction_scale": (0.8, 1.2),  # the world's friction coefficient times this
}
"""Uniform ranges of what :func:`draw_variation` draws, per servo or per link (docs/hardware.md)."""

CONTACT: Mapping[str, str] = {
    "condim": "4",             # sliding + torsional friction
    "cone": "elliptic",
    "solref": "0.01 0.8",      # time constant s, damping ratio
    "solimp": "0.8 0.95 0.002 0.5 2",
    "torsional_friction_m": "0.01",
}
"""Contact settings of the bench robot (the twin uses none of them)."""


@dataclass(frozen=True)
class ServoVariation:
    """What one servo of this robot is (drawn)."""

    servo_id: int
    gain_scale: float
    stall_torque_nm: float
    no_load_speed_rad_s: float
    frictionloss_nm: float
    damping_nm_s: float
    backlash_rad: float
    rotor_inertia_kg_m2: float
    zero_error_rad: float
    load_friction: float = 0.0


@dataclass(frozen=True)
class LinkVariation:
    """What one link of this robot is (drawn)."""

    mass_kg: float
    inertia_scale: float
    com_offset_m: float


@dataclass(frozen=True)
class Variation:
    """Everything drawn for one bench robot (``--truth`` writes it)."""

    seed: int
    servos: dict[str, ServoVariation]
    links: dict[str, LinkVariation]
    ground_friction: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for YAML."""
        return {"seed": self.seed,
                "servos": {k: {f: getattr(v, f) for f in v.__dataclass_fields__} for k, v in self.servos.items()},
                "links": {k: {f: getattr(v, f) for f in v.__dataclass_fields__} for k, v in self.links.items()},
                "ground_friction": self.ground_friction}


@dataclass(frozen=True)
class WorldSpec:
    """The parts of a ``config/worlds`` file the bench robot models."""

    name: str
    friction: float
    size: tuple[float, float]
    spawn: tuple[float, float, float]
    pegs: list[tuple[float, float]] = field(default_factory=list)
    peg_diameter: float = 0.0
    peg_height: float = 0.0
    peg_friction: float = 0.0


def load_world_spec(name_or_path: str) -> WorldSpec:
    """Read a world file (plane ground, pegs, spawn).

    Raises:
        ValueError: A height-field world (not modelled by the bench robot) or a bad file.
    """
    path = resolve("world", name_or_path, ValueError)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    try:
        ground = data["ground"]
        if ground.get("type", "plane") != "plane":
            raise ValueError(f"{path}: ground.type {ground.get('type')!r}: the bench robot models plane ground only")
        spawn = data.get("spawn") or {}
        pegs = (data.get("obstacles") or {}).get("pegs") or {}
        return WorldSpec(
            name=str(data.get("name", path.stem)), friction=float(ground["friction"]),
            size=(float(ground["size"][0]), float(ground["size"][1])),
            spawn=(float(spawn.get("x", 0.0)), float(spawn.get("y", 0.0)), float(spawn.get("yaw", 0.0))),
            pegs=[(float(c[0]), float(c[1])) for c in pegs.get("centres", [])],
            peg_diameter=float(pegs.get("diameter", 0.0)), peg_height=float(pegs.get("height", 0.0)),
            peg_friction=float(pegs.get("friction", 0.0)))
    except (KeyError, TypeError, IndexError) as err:
        raise ValueError(f"{path}: not a world file the bench robot can read ({err})") from None


FLAT = WorldSpec("flat", 0.8, (20.0, 20.0), (0.0, 0.0, 0.0))
"""Flat ground, friction 0.8, head at the origin (the default world)."""


def _uniform(rng: np.random.Generator, key: str) -> float:
    lo, hi = VARIATION[key]
    return float(rng.uniform(lo, hi))


def link_names(robot: RobotModel) -> list[str]:
    """Body names, head to tail: ``head`` then ``<joint>_link``."""
    return ["head", *(f"{j.name}_link" for j in robot.joints)]


def _segments(robot: RobotModel) -> np.ndarray:
    """Arc positions cutting the backbone into rigid links, m: [0, joints..., L]."""
    return np.concatenate([[0.0], robot.joint_arc_positions(), [robot.length]])


def draw_variation(robot: RobotModel, seed: int, world: WorldSpec = FLAT) -> Variation:
    """Draw one robot: per-servo and per-link values within :data:`VARIATION`."""
    rng = np.random.default_rng([seed, 0x5EED])
    servos = {}
    for j in robot.joints:
        servos[j.name] = ServoVariation(
            servo_id=j.servo_id, gain_scale=_uniform(rng, "gain_scale"),
            stall_torque_nm=j.effort * _uniform(rng, "stall_torque_scale"),
            no_load_speed_rad_s=j.velocity * _uniform(rng, "no_load_speed_scale"),
            frictionloss_nm=_uniform(rng, "frictionloss_nm"), damping_nm_s=_uniform(rng, "damping_nm_s"),
            backlash_rad=_uniform(rng, "backlash_rad"), rotor_inertia_kg_m2=_uniform(rng, "rotor_inertia_kg_m2"),
            zero_error_rad=_uniform(rng, "zero_error_rad"))
    b = _segments(robot)
    density = robot.tsnake_body.module_mass / robot.tsnake_body.module_length
    links = {}
    for k, name in enumerate(link_names(robot)):
        nominal = density * float(b[k + 1] - b[k])
        links[name] = LinkVariation(mass_kg=nominal * _uniform(rng, "mass_scale"),
                                    inertia_scale=_uniform(rng, "inertia_scale"),
                                    com_offset_m=_uniform(rng, "com_offset_m"))
    ground_friction = world.friction * _uniform(rng, "ground_friction_scale")
    # Drawn from a stream of its own, so that the values above stay those of every earlier seed.
    load_rng = np.random.default_rng([seed, 0x10AD])
    servos = {name: replace(sv, load_friction=_uniform(load_rng, "load_friction")) for name, sv in servos.items()}
    return Variation(seed=seed, servos=servos, links=links, ground_friction=ground_friction)


def _f(*values: float) -> str:
    return " ".join(f"{float(v):.9g}" for v in values)


def bench_mjcf(robot: RobotModel, variation: Variation, world: WorldSpec = FLAT, lifted: bool = False) -> str:
    """MJCF of the bench robot (T-Snake kinds only), written from the RobotModel.

    Links are cylinders of the module radius between consecutive joints (capsule
    collision geoms), with the drawn mass, a centre of mass shifted along the backbone and
    principal moments of a solid cylinder times the drawn inertia factor. Each joint is a
    hinge with the drawn dry friction, gear loss and rotor inertia, driven by a ``motor``
    actuator (torque, no limits: the firmware limits it).
    """
    if robot.kind != "tsnake":
        raise ValueError(f"bench robot: robot kind {robot.kind!r} is not modelled (tsnake only)")
    radius = robot.tsnake_body.radius
    root = ET.Element("mujoco", model=f"bench_{robot.name}")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    option = ET.SubElement(root, "option", timestep=_f(TIMESTEP), integrator="Euler", cone=CONTACT["cone"],
                           solver="Newton", iterations="30", ls_iterations="10")
    ET.SubElement(root, "default").append(ET.Element("geom", solref=CONTACT["solref"], solimp=CONTACT["solimp"],
                                                     condim=CONTACT["condim"]))
    worldbody = ET.SubElement(root, "worldbody")
    tors = float(CONTACT["torsional_friction_m"])
    ET.SubElement(worldbody, "geom", name="ground", type="plane", size=_f(world.size[0] / 2, world.size[1] / 2, 0.1),
                  friction=_f(variation.ground_friction, tors, 0.0001), contype="0", conaffinity="1", priority="1")
    for i, (cx, cy) in enumerate(world.pegs):
        ET.SubElement(worldbody, "geom", name=f"peg_{i}", type="cylinder",
                      pos=_f(cx, cy, world.peg_height / 2), size=_f(world.peg_diameter / 2, world.peg_height / 2),
                      friction=_f(world.peg_friction, tors, 0.0001), contype="0", conaffinity="1", priority="1")
    x, y, yaw = world.spawn
    if lifted:
        pos = (x, y, LIFT_HEIGHT_M + robot.length)
        quat = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # body axis (x) straight down
        ET.SubElement(option, "flag", contact="disable")
    else:
        pos = (x, y, radius + 0.003)
        quat = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
    b = _segments(robot)
    names = link_names(robot)
    parent = worldbody
    for k, name in enumerate(names):
        seg = float(b[k + 1] - b[k])
        lv = variation.links[name]
        if k == 0:
            body = ET.SubElement(parent, "body", name=name, pos=_f(*pos), quat=_f(*quat))
            if not lifted:
                ET.SubElement(body, "freejoint", name="root")
        else:
            j = robot.joints[k - 1]
            body = ET.SubElement(parent, "body", name=name, pos=_f(b[k] - b[k - 1], 0, 0))
            _hinge(body, j, variation.servos[j.name])
        axial = 0.5 * lv.mass_kg * radius ** 2 * lv.inertia_scale
        transverse = lv.mass_kg * (3 * radius ** 2 + seg ** 2) / 12.0 * lv.inertia_scale
        ET.SubElement(body, "inertial", pos=_f(seg / 2 + lv.com_offset_m, 0, 0), mass=_f(lv.mass_kg),
                      diaginertia=_f(axial, transverse, transverse))
        ET.SubElement(body, "geom", name=f"{name}_shell", type="capsule", fromto=_f(0, 0, 0, max(seg, 1e-4), 0, 0),
                      size=_f(radius), contype="1", conaffinity="0",
                      friction=_f(variation.ground_friction, tors, 0.0001), mass="0")
        if k == 0:
            ET.SubElement(body, "site", name="head_frame", pos="0 0 0", size=_f(radius / 4))
        parent = body
    actuator = ET.SubElement(root, "actuator")
    for j in robot.joints:
        ET.SubElement(actuator, "motor", name=j.name, joint=j.name, gear="1")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode")


def _hinge(body: ET.Element, j: JointSpec, sv: ServoVariation) -> None:
    attrs = {"name": j.name, "type": "hinge", "axis": _f(*j.axis), "damping": _f(sv.damping_nm_s),
             "armature": _f(sv.rotor_inertia_kg_m2), "frictionloss": _f(sv.frictionloss_nm)}
    if not j.continuous:
        attrs["range"] = _f(j.lower, j.upper)
    ET.SubElement(body, "joint", attrs)


@dataclass
class BenchStats:
    """Real-time bookkeeping of a running bench robot.

    Attributes:
        sim_time_s: Simulated time so far.
        busy_s: Wall time spent computing physics and firmware.
        lag_events: Times the body fell :data:`MAX_LAG_S` behind the wall clock and skipped ahead.
    """

    sim_time_s: float = 0.0
    busy_s: float = 0.0
    lag_events: int = 0

    @property
    def realtime_factor(self) -> float:
        """Simulated s per busy wall s: how many times faster than real time the body could run."""
        return self.sim_time_s / self.busy_s if self.busy_s > 0 else math.inf


PoseCallback = Callable[[float, np.ndarray, np.ndarray], None]
"""``callback(capture_s, position (3,), quaternion w x y z (4,))`` of the head frame; ``capture_s`` is the
``time.time()`` at which the body was in that state (the wall clock the simulated time is stepped against)."""


class BenchRobot:
    """Emulated servos on a pty, attached to a body stepped in real time.

    Args:
        robot: Robot name, YAML path or a loaded RobotModel (kind ``tsnake``).
        seed: Seed of the robot's variation (:func:`draw_variation`).
        world: World name or path in ``config/worlds`` (``None``: flat ground).
        lifted: Hold the robot by its head, body hanging down (contacts off).
        link: Optional symlink to the pty (as :class:`ServoBusEmulator`).
        on_pose: Called from the physics thread after every chunk with the head frame's pose.
    """

    def __init__(self, robot: str | Path | RobotModel, seed: int = 0, world: str | None = None,
                 lifted: bool = False, link: str | Path | None = None, on_pose: PoseCallback | None = None) -> None:
        """Build the body and its bus (nothing runs until :meth:`start`)."""
        import mujoco

        self.robot = robot if isinstance(robot, RobotModel) else load_robot(robot)
        if self.robot.kind != "tsnake":
            raise ValueError(f"{self.robot.name}: kind {self.robot.kind!r}: the bench robot models kind tsnake only")
        self.world = load_world_spec(world) if world else FLAT
        self.lifted = lifted
        self.variation = draw_variation(self.robot, seed, self.world)
        self.model = mujoco.MjModel.from_xml_string(bench_mjcf(self.robot, self.variation, self.world, lifted))
        self.data = mujoco.MjData(self.model)
        self._mj_step = mujoco.mj_step
        mujoco.mj_forward(self.model, self.data)
        joints = self.robot.joints
        self._qadr = np.array([self.model.jnt_qposadr[self.model.joint(j.name).id] for j in joints])
        self._vadr = np.array([self.model.jnt_dofadr[self.model.joint(j.name).id] for j in joints])
        self._head = self.model.body("head").id
        sv = [self.variation.servos[j.name] for j in joints]
        self._coulomb = np.array([s.frictionloss_nm for s in sv])      # N m
        self._load_friction = np.array([s.load_friction for s in sv])  # N m per N m through the gears
        models = [ct.model(j.model) for j in joints]
        self._motors = MotorParams(
            stall_torque=np.array([s.stall_torque_nm for s in sv]),
            no_load_speed=np.array([s.no_load_speed_rad_s for s in sv]),
            torque_constant=np.array([m.torque_constant for m in models]),
            gain_scale=np.array([s.gain_scale for s in sv]),
            backlash=np.array([s.backlash_rad for s in sv]),
            rotor_inertia=np.array([s.rotor_inertia_kg_m2 for s in sv]),
            direction=np.array([float(j.direction) for j in joints]),
            zero=np.array([j.zero_offset + s.zero_error_rad for j, s in zip(joints, sv, strict=True)]))
        self.firmware = Firmware(self._motors, TIMESTEP)
        positions = {j.servo_id: int(t) for j, t in zip(joints, self._encoder(), strict=True)}
        self.bus = ServoBusEmulator([j.servo_id for j in joints], models={j.servo_id: j.model for j in joints},
                                    positions=positions, link=link, seed=seed, sim_time=True, servo_class=BodyServo)
        self._servos = [_body_servo(self.bus.servos[j.servo_id]) for j in joints]
        self._on_pose = on_pose
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.stats = BenchStats()
        self.chunks = 0

    # --- state ---------------------------------------------------------------------------
    def joint_positions(self) -> np.ndarray:
        """Joint angles, rad (the body's truth, not the encoders')."""
        return np.array(self.data.qpos[self._qadr])

    def head_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Head frame (origin at the head tip, x along the body) in the world: position, quaternion w x y z."""
        return np.array(self.data.xpos[self._head]), np.array(self.data.xquat[self._head])

    def _servo_ticks(self) -> np.ndarray:
        """Shaft angles, continuous physical ticks (servo angle 0 at 2048)."""
        servo_angle = self._motors.zero + self._motors.direction * self.data.qpos[self._qadr]
        return ct.TICKS_CENTER + servo_angle / RAD_PER_TICK

    def _encoder(self) -> np.ndarray:
        return np.round(self._servo_ticks())

    @property
    def port(self) -> str:
        """Path of the pty (or its link)."""
        return self.bus.port

    # --- running -------------------------------------------------------------------------
    def start(self) -> BenchRobot:
        """Serve the bus and step the body in real time (own thread); returns self."""
        self.bus.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="bench-robot-body", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the body and the bus."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.bus.stop()

    def __enter__(self) -> BenchRobot:
        """Start."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """Stop."""
        self.stop()

    def step_chunk(self) -> None:
        """Exchange with the control tables, then :data:`CHUNK_STEPS` physics steps (any thread)."""
        with self.bus.lock:
            reg = read_registers(self._servos)
        d, fw = self.data, self.firmware
        fw.prepare(reg)
        for _ in range(CHUNK_STEPS):
            d.ctrl[:] = fw.step(self._encoder(), d.qvel[self._vadr])
            self.model.dof_frictionloss[self._vadr] = gear_friction(self._coulomb, self._load_friction, d.ctrl)
            self._mj_step(self.model, d)
            fw.supply[:] = _supply_voltage(fw.current)
        ticks = self._servo_ticks()
        qd = self._motors.direction * d.qvel[self._vadr] / RAD_PER_TICK
        with self.bus.lock:
            for i, s in enumerate(self._servos):
                s.position = float(ticks[i])
                s.velocity = float(qd[i])
                s.effort = float(fw.motor_torque[i])
                s.voltage = float(fw.supply[i])
            self.bus.advance(CHUNK_STEPS * TIMESTEP)
        self.chunks += 1

    def _run(self) -> None:
        dt = CHUNK_STEPS * TIMESTEP
        t0 = time.monotonic()
        sim = 0.0
        while not self._stop.is_set():
            ahead = t0 + sim - time.monotonic()
            if ahead > 0:
                self._stop.wait(ahead)
                continue
            if -ahead > MAX_LAG_S:
                t0 = time.monotonic() - sim
                self.stats.lag_events += 1
            started = time.perf_counter()
            self.step_chunk()
            sim += dt
            if self._on_pose is not None:
                pos, quat = self.head_pose()
                self._on_pose(time.time() - (time.monotonic() - (t0 + sim)), pos, quat)
            self.stats.busy_s += time.perf_counter() - started
            self.stats.sim_time_s = sim


def gear_friction(coulomb: np.ndarray, load: np.ndarray, torque: np.ndarray) -> np.ndarray:
    """Dry friction of the gear trains, N m: ``c + l |tau|`` (BAM, load-dependent Coulomb friction, m3).

    Args:
        coulomb: ``c``, the friction with nothing passed through the gears, N m.
        load: ``l``, more friction per N m passed through them.
        torque: ``tau``, the torque each servo drives through its gears onto the joint, N m.
    """
    return coulomb + load * np.abs(torque)


def _body_servo(servo: object) -> BodyServo:
    if not isinstance(servo, BodyServo):
        raise TypeError(f"expected a BodyServo, got {type(servo).__name__}")
    return servo


def _supply_voltage(current: np.ndarray) -> np.ndarray:
    """Bus voltage at the servos, V: nominal minus the drop of the total current over the shared supply."""
    total = float(np.sum(np.abs(current)))
    return np.full_like(current, 12.0 - SUPPLY_RESISTANCE_OHM * total)


def write_truth(path: str | Path, bench: BenchRobot) -> None:
    """Write what was drawn for ``bench`` (and its fixed settings) as YAML."""
    data = {"robot": bench.robot.name, "world": bench.world.name, "lifted": bench.lifted,
            **bench.variation.to_dict(),
            "fixed": {"timestep_s": TIMESTEP, "supply_resistance_ohm": SUPPLY_RESISTANCE_OHM, "contact": dict(CONTACT)}}
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
