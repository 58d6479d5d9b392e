"""A teleop-like run of the bench robot written as a rosbag2 bag, and how far the default twin replays it.

The bench robot (:class:`snake_hardware.emulator.body.BenchRobot`, seeded) is stepped in this
process as fast as it goes (not against the wall clock: the figures do not depend on the
machine's load); every control period the rolling gait, driven by a ``cmd_vel`` script as
``gait_node`` would drive it (:class:`snake_tools.twin.replay.GaitDriver`), gives joint targets
that are written to the servos' Goal Position registers as the bridge would write them, and
``/joint_commands``, ``/joint_states`` (from the encoders), ``/mocap/head_pose`` (the head
pose with the motion capture's position noise), ``/cmd_vel`` and ``/clock`` go to the bag.
``snake twin replay`` of that bag with the default twin measures the distance the bench robot
creates on purpose: head-path divergence and joint RMS.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.robot import RobotModel
from snake_core.twin_params import ContactParams, parse_twin_block

_START_NS = 1_700_000_000_000_000_000  # receive time of the first message, ns since the epoch


def teleop_script(t: float) -> tuple[float, float]:
    """A teleop-like ``cmd_vel`` (m/s, rad/s): forward, left turn, forward, right turn, in 15 s spans."""
    span = int(t // 15.0) % 4
    return ((0.08, 0.0), (0.05, 0.15), (0.08, 0.0), (0.05, -0.15))[span]


def ground_fit_script(t: float) -> tuple[float, float]:
    """The ground fit's ``cmd_vel`` (m/s, rad/s), another drive than :func:`teleop_script`'s.

    0.03 and 0.1 m/s in turn every 4 s, turning at -0.15 rad/s for 10 s, then straight, then at
    0.15 rad/s, and again: both speeds, straight and both turning directions up to the teleop
    run's turn rate, as docs/twin_identification.md asks of a ground run for the contact's choice.
    """
    return (0.03, 0.1)[int(t // 4.0) % 2], (-0.15, 0.0, 0.15)[int(t // 10.0) % 3]


def record_bench_run(out: Path, robot: RobotModel, duration: float, seed: int = 0,
                     cmd_vel: Callable[[float], tuple[float, float]] = teleop_script, lifted: bool = False,
                     targets: Callable[[float], np.ndarray] | None = None) -> dict[str, float]:
    """Run the bench robot under ``cmd_vel`` for ``duration`` simulated s; write the bag to ``out``.

    With ``targets`` (joint targets at time t, rad, YAML order; ``snake twin excite``'s motion)
    the joints follow it instead of the gait (``/cmd_vel`` is not written); ``lifted`` holds
    the bench robot by its head.

    Returns:
        ``realtime_factor`` (simulated s per wall s of the body, firmware and bus, without the
        ROS side) and ``travelled_m`` (the head's net displacement).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from snake_hardware.dynamixel import control_table as ct
    from snake_hardware.emulator import body as bench_body
    from snake_hardware.emulator.firmware import RAD_PER_TICK
    from snake_hardware.emulator.mocap import POSITION_NOISE_M
    from snake_tools.twin.replay import GaitDriver

    bench = bench_body.BenchRobot(robot, seed=seed, lifted=lifted)
    joints = robot.joints
    servos = [bench.bus.servos[j.servo_id] for j in joints]
    zero = np.array([j.zero_offset for j in joints])
    direction = np.array([float(j.direction) for j in joints])
    for j, s in zip(joints, servos, strict=True):
        if j.continuous:
            s.write(ct.OPERATING_MODE, bytes([ct.MODE_EXTENDED_POSITION]))
        s.write(ct.TORQUE_ENABLE, b"\x01")
    rng = np.random.default_rng(seed)
    driver = GaitDriver(robot, "rolling")
    ts = get_typestore(Stores.ROS2_KILTED)
    cls = ts.types
    js, ps, clk, tw = ("sensor_msgs/msg/JointState", "geometry_msgs/msg/PoseStamped", "rosgraph_msgs/msg/Clock",
                       "geometry_msgs/msg/TwistStamped")
    names = [j.name for j in joints]

    def stamp(t: float) -> Any:
        sec, nsec = divmod(round(t * 1e9), 1_000_000_000)
        return cls["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)

    def header(t: float) -> Any:
        return cls["std_msgs/msg/Header"](stamp=stamp(t), frame_id="world")

    def joint_msg(t: float, q: np.ndarray) -> Any:
        return cls[js](header=header(t), name=names, position=np.asarray(q, dtype=float), velocity=np.zeros(0),
                       effort=np.zeros(0))

    chunk_s = bench_body.CHUNK_STEPS * bench_body.TIMESTEP
    chunks_per_period = max(1, round(CONTROL_PERIOD_S / chunk_s))
    start_pos, _ = bench.head_pose()
    busy = 0.0
    with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = {topic: writer.add_connection(topic, typ, typestore=ts) for topic, typ in (
            ("/clock", clk), ("/joint_commands", js), ("/joint_states", js), ("/mocap/head_pose", ps),
            ("/cmd_vel", tw))}

        def write(topic: str, t: float, msg: Any, typ: str) -> None:
            writer.write(conn[topic], _START_NS + round(t * 1e9), ts.serialize_cdr(msg, typ))

        t = 0.0
        for _ in range(round(duration / (chunks_per_period * chunk_s)) + 1):
            write("/clock", t, cls[clk](clock=stamp(t)), clk)
            ticks = np.array([s.present_ticks for s in servos], dtype=float)
            write("/joint_states", t, joint_msg(t, ((ticks - ct.TICKS_CENTER) * RAD_PER_TICK - zero) * direction), js)
            pos, quat = bench.head_pose()
            noisy = pos + rng.normal(0.0, POSITION_NOISE_M, 3)
            p = cls["geometry_msgs/msg/Point"](x=float(noisy[0]), y=float(noisy[1]), z=float(noisy[2]))
            o = cls["geometry_msgs/msg/Quaternion"](w=float(quat[0]), x=float(quat[1]), y=float(quat[2]),
                                                    z=float(quat[3]))
            write("/mocap/head_pose", t, cls[ps](header=header(t), pose=cls["geometry_msgs/msg/Pose"](
                position=p, orientation=o)), ps)
            if targets is None:
                v, omega = cmd_vel(t)
                vec = cls["geometry_msgs/msg/Vector3"]
                write("/cmd_vel", t, cls[tw](header=header(t), twist=cls["geometry_msgs/msg/Twist"](
                    linear=vec(x=v, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=omega))), tw)
                driver.submit(t, v, omega)
                goal = np.asarray(driver.tick(t), dtype=float)
            else:
                goal = np.asarray(targets(t), dtype=float)
            write("/joint_commands", t, joint_msg(t, goal), js)
            goals = np.round(ct.TICKS_CENTER + (zero + direction * goal) / RAD_PER_TICK).astype(int)
            for s, g in zip(servos, goals, strict=True):
                s.write(ct.GOAL_POSITION, int(g).to_bytes(4, "little", signed=True))
            wall = time.perf_counter()
            for _ in range(chunks_per_period):
                bench.step_chunk()
            busy += time.perf_counter() - wall
            t += chunks_per_period * chunk_s
    end_pos, _ = bench.head_pose()
    return {"realtime_factor": t / busy if busy > 0 else math.inf,
            "travelled_m": float(np.linalg.norm((end_pos - start_pos)[:2]))}


def bench_robot_figures(duration: float = 60.0, seed: int = 0) -> dict[str, float]:
    """``snake bench twin``'s ``bench_robot`` block: a ``duration`` s teleop-like run, replayed by the default twin.

    Returns:
        ``realtime_factor`` (simulated s per wall s of the bench robot alone, in-process),
        ``divergence_default_m`` (largest head distance twin-robot), ``joint_rms_default_rad``
        (joint tracking residual of the twin), ``travelled_m``, ``duration_s``, ``seed``.
    """
    import tempfile

    from snake_core.robot import load_robot
    from snake_tools.twin.replay import replay

    robot = load_robot("tsnake")
    with tempfile.TemporaryDirectory() as tmp:
        bag = Path(tmp) / "bench"
        run = record_bench_run(bag, robot, duration, seed=seed)
        default = replay(bag, robot, None)
    return _teleop_figures(run, default) | {"duration_s": duration, "seed": seed}


def _teleop_figures(run: dict[str, Any], default: dict[str, Any]) -> dict[str, float]:
    """The teleop-like run's figures: its recording (``record_bench_run``) and its default twin's replay."""
    return {"realtime_factor": run["realtime_factor"], "divergence_default_m": default["divergence_max_m"],
            "joint_rms_default_rad": default["joint_residual_rms_rad"], "travelled_m": run["travelled_m"]}


def bench_contact(ground_friction: float) -> ContactParams:
    """The bench robot's own contact model (:data:`snake_hardware.emulator.body.CONTACT`) in the twin's terms.

    A :class:`snake_core.twin_params.ContactParams` with the bench robot's cone, torsional
    friction, ``solref``, ``solimp`` and the given ground friction (its drawn coefficient), read
    as a target's ``twin.contact`` block is (:func:`snake_core.twin_params.parse_twin_block`): the
    contact a choice of the twin's contact parameters aims at, so that a replay with it shows
    what the servo model and the body leave. Only a benchmark that knows the bench robot's truth
    builds it.
    """
    from snake_hardware.emulator.body import CONTACT

    block = {"ground_friction": ground_friction, "cone": CONTACT["cone"],
             "torsional_friction": float(CONTACT["torsional_friction_m"]) if CONTACT["condim"] == "4" else 0.0,
             "solref": [float(x) for x in CONTACT["solref"].split()],
             "solimp": [float(x) for x in CONTACT["solimp"].split()]}
    return parse_twin_block({"contact": block}, "snake_hardware.emulator.body.CONTACT").contact


SCALE_RESOLUTION_KG = 0.001
"""Resolution of the scale the bench robot's links are weighed on, kg (a kitchen or postal scale)."""


def weighed_links(robot: RobotModel, seed: int) -> dict[str, dict[str, float]]:
    """The bench robot's links weighed, as a target's ``twin.link`` block holds them (kg, to the scale's resolution).

    What a researcher weighs before assembling the robot: each rigid part between two joints
    (:mod:`snake_core.twin_params`, "Links weighed"), here the bench robot's drawn link masses
    rounded to :data:`SCALE_RESOLUTION_KG`. A scale gives the mass only: the drawn inertia and
    centre of mass stay the bench robot's own. Only a benchmark that knows the bench robot's
    truth calls it.
    """
    from snake_hardware.emulator.body import draw_variation

    links = draw_variation(robot, seed).links
    return {name: {"mass": round(link.mass_kg / SCALE_RESOLUTION_KG) * SCALE_RESOLUTION_KG}
            for name, link in links.items()}


def _follow(motion: Any) -> Callable[[float], np.ndarray]:
    """Joint targets of an excitation plan at time t."""
    return lambda t: np.asarray(motion.positions(np.array([t]))[0], dtype=float)


def bench_robot_fit_figures(duration: float = 60.0, teleop_duration: float = 60.0, seed: int = 0,
                            ground_duration: float = 20.0, structure: str = "auto",
                            servos: str = "auto", spread: int = 0) -> dict[str, Any]:
    """The twin fitted to the bench robot, checked on runs the fit did not see (``snake bench twin --bench-robot``).

    Four runs of one bench robot (``seed``), fitted as a researcher fits the twin
    (docs/twin_identification.md): a lifted run of ``duration`` s under ``snake twin excite``'s
    lifted multisine (phases of seed 0) fits the servo model (:func:`identify`, from the default
    twin with the links weighed: :func:`weighed_links`); an on-ground run of ``ground_duration`` s
    under :func:`ground_fit_script` fits the ground friction with that servo model held. Held
    out: a second lifted run of ``duration`` s (phases of seed 1) and a teleop-like run on the
    ground of ``teleop_duration`` s (:func:`teleop_script`, another drive than the ground fit's).

    Returns:
        ``adequacy_default`` / ``adequacy_fitted`` (the lifted fit run's joint residual over its
        noise floor, default and fitted twin), ``adequacy_fitted_by_type`` (each joint type's: the
        fit is adequate when the whole and every type's are within the threshold), ``adequate``,
        ``heldout_joint_rms_default_rad`` /
        ``heldout_joint_rms_fitted_rad`` (the held-out lifted run), ``heldout_ratio_fitted``,
        ``heldout_noise_floor_rad`` (that run's noise floor),
        ``divergence_default_m`` / ``divergence_fitted_m`` (largest twin-robot head distance of
        the teleop run's replay with the default twin and with the target the documented path
        leaves: what the lifted fit's ``--write`` writes, then what the ground fit from that
        target writes, its contact model chosen by the ground run: ``--contact choose``,
        :mod:`snake_tools.twin.contact`; ``contact`` the choice's report),
        ``divergence_lifted_only_m`` (the same with what the lifted fit writes
        alone, the ground friction the world's), ``divergence_best_fit_m`` (the lifted fit's own twin,
        ``Fit.params``, and the ground fit's contact model and friction: where the fit is not adequate, every value it
        reached, none of which a user can write), ``divergence_bench_contact_m`` (what the lifted fit writes,
        with the bench robot's own contact and ground friction: :func:`bench_contact`),
        ``divergence_weighed_m`` (the default twin with the links weighed alone),
        ``ground_friction`` (the ground fit's ``fitted``, ``interval``,
        ``identified``, ``why`` and the bench robot's drawn ``true`` coefficient),
        ``identify_s``, ``identify_cpu_s`` (the lifted fit's wall and CPU time, its rollout workers' included),
        ``identify_ground_s``, ``rollouts``, ``not_identified`` and ``written`` (of the lifted
        fit), ``fitted`` (the lifted fit's values), ``duration_s``, ``teleop_duration_s``,
        ``ground_duration_s``, ``seed``, ``divergence_spread`` (with ``spread`` > 0: the teleop run's
        largest head distance over ``spread`` more starts within half an encoder count,
        :mod:`snake_tools.twin.spread`, ``{default, fitted}``, each ``{min, median, max}``; else
        ``None``), ``structure`` (the lifted fit's choice of servo model
        structure, :func:`snake_tools.twin.identify.choose_structure`, with ``per_servo``: the choice of
        one servo model per joint or per type, :mod:`snake_tools.twin.per_servo`; ``structure`` and
        ``servos`` here fix them),
        and the teleop run's figures of :func:`bench_robot_figures` (``realtime_factor``,
        ``joint_rms_default_rad``, ``travelled_m``), so that a caller needs no second run.
    """
    import tempfile

    from snake_core.excitation import JointBounds, plan_excitation
    from snake_core.robot import load_robot
    from snake_core.twin_params import TwinParams
    from snake_hardware.emulator.body import draw_variation
    from snake_tools.twin.ground import start_std
    from snake_tools.twin.identify import identify, read_recording, validate
    from snake_tools.twin.replay import replay
    from snake_tools.twin.report import written_params, written_values
    from snake_tools.twin.rollout_pool import cpu_s

    robot = load_robot("tsnake")
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motions = [plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=duration, seed=k)
               for k in (0, 1)]
    with tempfile.TemporaryDirectory() as tmp:
        bags = []
        for k, motion in enumerate(motions):
            bag = Path(tmp) / f"lifted{k}"
            record_bench_run(bag, robot, duration, seed=seed, lifted=True, targets=_follow(motion))
            bags.append(bag)
        ground = Path(tmp) / "ground"
        record_bench_run(ground, robot, ground_duration, seed=seed, cmd_vel=ground_fit_script)
        teleop = Path(tmp) / "teleop"
        teleop_run = record_bench_run(teleop, robot, teleop_duration, seed=seed)
        wall = time.perf_counter()
        cpu = cpu_s()   # this process's and its rollout workers'
        # The documented path starts from a target holding the links weighed before assembly.
        weighed = TwinParams(link=weighed_links(robot, seed))
        fit = identify(read_recording(bags[0], robot), robot, weighed, lifted=True, structure=structure,
                       servos=servos)
        identify_s, identify_cpu_s = time.perf_counter() - wall, cpu_s() - cpu
        wall = time.perf_counter()
        # The documented path: the lifted fit writes what it writes into a target, and the
        # ground fit starts from that target and writes into it in turn.
        lifted_written = written_params(fit, weighed)
        written = sorted(written_values(fit))
        ground_fit = identify(read_recording(ground, robot), robot, lifted_written, world="flat",
                              start_std=start_std(fit.intervals, written), contact="choose")
        identify_ground_s = time.perf_counter() - wall
        mu = "contact.ground_friction"
        held = validate(fit, read_recording(bags[1], robot), robot, TwinParams(), world=None)
        default = replay(teleop, robot, None)
        weighed_only = replay(teleop, robot, weighed)
        lifted_only = replay(teleop, robot, lifted_written)
        target = written_params(ground_fit, lifted_written)
        fitted = replay(teleop, robot, target)
        best_fit = replay(teleop, robot, dataclasses.replace(fit.params, contact=ground_fit.params.contact))
        true_mu = draw_variation(robot, seed).ground_friction
        bench_contact_run = replay(teleop, robot, dataclasses.replace(lifted_written, contact=bench_contact(true_mu)))
        spreads = None if not spread else {
            name: _divergence_spread(teleop, robot, params, run, spread)
            for name, params, run in (("default", None, default), ("fitted", target, fitted))}
    lo, hi = ground_fit.intervals[mu]
    return _teleop_figures(teleop_run, default) | {
            "adequacy_default": fit.adequacy_before.get("ratio"), "adequacy_fitted": fit.adequacy_after.get("ratio"),
            "adequacy_fitted_by_type": {t: v["ratio"] for t, v in fit.adequacy_after.get("by_type", {}).items()},
            "adequate": fit.adequacy_after.get("adequate"),
            "heldout_joint_rms_default_rad": held["joint_rms_start_rad"],
            "heldout_joint_rms_fitted_rad": held["joint_rms_rad"], "heldout_ratio_fitted": held["ratio_to_noise"],
            "heldout_noise_floor_rad": held["noise_floor_rad"],
            "divergence_default_m": default["divergence_max_m"], "divergence_fitted_m": fitted["divergence_max_m"],
            "divergence_lifted_only_m": lifted_only["divergence_max_m"],
            "divergence_best_fit_m": best_fit["divergence_max_m"],
            "divergence_bench_contact_m": bench_contact_run["divergence_max_m"],
            "divergence_weighed_m": weighed_only["divergence_max_m"],
            "ground_friction": {"fitted": ground_fit.fitted[mu], "interval": [lo, hi if math.isfinite(hi) else None],
                                "identified": ground_fit.identified[mu], "why": ground_fit.reasons.get(mu, ""),
                                "true": true_mu},
            "identify_s": identify_s, "identify_cpu_s": identify_cpu_s, "identify_ground_s": identify_ground_s,
            "rollouts": fit.rollouts,
            "not_identified": [n for n in fit.names if not fit.identified[n]],
            "written": written,
            "fitted": {n: fit.fitted[n] for n in fit.names},
            "duration_s": duration, "teleop_duration_s": teleop_duration, "ground_duration_s": ground_duration,
            "seed": seed, "structure": fit.structure, "contact": ground_fit.contact, "divergence_spread": spreads}


def _divergence_spread(bag: Path, robot: RobotModel, params: Any, recorded: dict[str, Any], n: int) -> dict[str, float]:
    """Least, median and largest head distance of ``bag``'s replay over ``n`` more starts (its ``spread``)."""
    from snake_tools.bag.series import read_series
    from snake_tools.twin.replay import replay
    from snake_tools.twin.spread import replay_spread

    bs = read_series(bag, progress=False)
    band: dict[str, float] = replay_spread(lambda offset: replay(bs, robot, params, start_offset_rad=offset),
                                           recorded, n)["divergence_max_m"]
    return band
