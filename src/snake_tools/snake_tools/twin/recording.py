"""A run of the twin written as a rosbag2 bag, as the stack would record it (tests, benchmarks).

The twin (with given physics) follows a controller; every control period it is told the
controller's targets, which go out on ``/joint_commands``; ``/joint_states`` (the twin's
joint angles), ``/ground_truth/head_pose`` and ``/mocap/head_pose`` (the head pose, with
Gaussian position noise when asked) and ``/clock`` are written at the same period, each
at its simulated time (receive time = simulated time + ``start_ns``). A recording made
with some physics is the "robot" that a replay or a fit with other physics is judged
against.

Robot-like sensing (:class:`Sensing`, optional): the angles of ``/joint_states`` rounded to
an encoder's resolution, each message's stamp (header and receive time) moved by a uniform
jitter, and a fraction of the messages dropped, as a servo bus read by the bridge gives them.

The bridge's state (optional, ``bridge``): its ``bridge: bus`` status on ``/diagnostics``
every :data:`STATUS_PERIOD_S` (key ``state``, message ``"<STATE>: <reason>"``) and its change
lines on ``/rosout`` (``"<FROM> -> <TO>: <reason>"``), as the bridge publishes them; while the
state is not ``ARMED`` the servos hold the last targets they applied and the commands still go
out on ``/joint_commands`` (a bridge HOLDING or in FAULT with ``fault_reaction: hold``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams

_START_NS = 1_700_000_000_000_000_000  # receive time of the first message, ns since the epoch
STATUS_PERIOD_S = 0.5
"""Period of the bridge's ``bridge: bus`` status written with ``bridge``, s."""


@dataclass(frozen=True)
class Sensing:
    """How ``/joint_states`` is measured: encoder resolution, stamp jitter, dropped messages.

    Attributes:
        ticks_per_turn: Encoder ticks per turn (angles rounded to ``2 pi / ticks``; 0: exact).
        stamp_jitter_s: Half-width of the uniform jitter of each stamp, s.
        drop: Fraction of ``/joint_states`` messages dropped (at random).
    """

    ticks_per_turn: int = 0
    stamp_jitter_s: float = 0.0
    drop: float = 0.0


ROBOT_SENSING = Sensing(ticks_per_turn=4096, stamp_jitter_s=0.0015, drop=0.03)
"""A Dynamixel X-series bus read by the bridge: 4096 ticks per turn, stamps +-1.5 ms, 3 % dropped."""


def record_twin_run(out: Path, robot: RobotModel, duration: float, twin_params: TwinParams | None = None,
                    controller: Callable[[Any], np.ndarray] | None = None, world: str | Path | None = "flat",
                    mocap_noise_m: float = 0.0, seed: int = 0,
                    cmd_vel: Callable[[float], tuple[float, float]] | None = None, gait: str = "rolling",
                    lifted: bool = False, sensing: Sensing | None = None,
                    applied: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None, pose: bool = True,
                    bridge: tuple[tuple[float, str, str], ...] = ()) -> Path:
    """Run the twin for ``duration`` simulated seconds and write what the stack records to ``out``.

    Args:
        out: Bag directory to create (must not exist).
        robot: The robot.
        duration: Simulated seconds.
        twin_params: The twin's physics (default: the defaults).
        controller: ``controller(twin) -> targets`` (rad, YAML order), called every
            control period (default :func:`snake_hardware.sim.twin.exercise_wave`).
        world: World of the twin.
        mocap_noise_m: Standard deviation of the mocap position noise, m.
        seed: Seed of the noise.
        cmd_vel: ``cmd_vel(t) -> (v m/s, omega rad/s)``: instead of ``controller``, the twin
            runs ``gait`` driven by this twist as ``gait_node`` would
            (:class:`snake_tools.twin.replay.GaitDriver`), and ``/cmd_vel`` is written too.
        gait: The gait of ``cmd_vel``.
        lifted: The robot held by its head off the ground (:class:`snake_hardware.sim.mjcf.SimOptions`).
        sensing: How ``/joint_states`` is measured (default: exact, every period, on time).
        applied: ``applied(targets, q) -> targets`` the servos act on, from the targets sent and
            the present angles: a servo structure the twin's servo model lacks (a dead band, a
            rate limit), to make a recording that model cannot explain; ``/joint_commands``
            keeps the targets sent.
        pose: Write the head pose topics (without: a recording with no motion capture).
        bridge: The bridge's state changes (simulated s, state, reason) in time order (module
            docstring); empty: no bridge state is written and every command is applied.

    Returns:
        ``out``.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    from snake_hardware.sim.mjcf import SimOptions
    from snake_hardware.sim.twin import SimTwin, exercise_wave
    from snake_tools.twin.replay import GaitDriver

    twin = SimTwin(robot, world, control_dt=CONTROL_PERIOD_S, twin_params=twin_params,
                   options=SimOptions(lifted=lifted))
    twin.reset()
    control = controller or exercise_wave(twin)
    rng = np.random.default_rng(seed)
    with_pose = pose
    sense_rng = np.random.default_rng([seed, 1])  # its own stream: the mocap noise stays as without sensing
    ts = get_typestore(Stores.ROS2_KILTED)
    cls = ts.types
    driver = GaitDriver(robot, gait) if cmd_vel is not None else None
    js, ps, clk = "sensor_msgs/msg/JointState", "geometry_msgs/msg/PoseStamped", "rosgraph_msgs/msg/Clock"
    tw = "geometry_msgs/msg/TwistStamped"
    names = list(twin.joint_names)

    def stamp(t: float) -> Any:
        sec, nsec = divmod(round(t * 1e9), 1_000_000_000)
        return cls["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)

    def header(t: float) -> Any:
        return cls["std_msgs/msg/Header"](stamp=stamp(t), frame_id="world")

    def pose_msg(t: float, pos: np.ndarray, quat: np.ndarray) -> Any:
        p = cls["geometry_msgs/msg/Point"](x=float(pos[0]), y=float(pos[1]), z=float(pos[2]))
        o = cls["geometry_msgs/msg/Quaternion"](w=float(quat[0]), x=float(quat[1]), y=float(quat[2]),
                                                z=float(quat[3]))
        return cls[ps](header=header(t), pose=cls["geometry_msgs/msg/Pose"](position=p, orientation=o))

    def joints(t: float, q: np.ndarray) -> Any:
        return cls[js](header=header(t), name=names, position=np.asarray(q, dtype=float),
                       velocity=np.zeros(0), effort=np.zeros(0))

    def measured(t: float, q: np.ndarray) -> tuple[float, np.ndarray] | None:
        """The stamp and angles ``/joint_states`` gets under ``sensing``, or None when dropped."""
        if sensing is None:
            return t, q
        jitter = sense_rng.uniform(-sensing.stamp_jitter_s, sensing.stamp_jitter_s)
        if sense_rng.random() < sensing.drop:
            return None
        if sensing.ticks_per_turn:
            tick = 2.0 * np.pi / sensing.ticks_per_turn
            q = np.round(np.asarray(q) / tick) * tick
        return t + jitter, q

    with Writer(out, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = {topic: writer.add_connection(topic, typ, typestore=ts) for topic, typ in (
            ("/clock", clk), ("/joint_commands", js), ("/joint_states", js),
            ("/ground_truth/head_pose", ps), ("/mocap/head_pose", ps), ("/cmd_vel", tw))
            if with_pose or not topic.endswith("head_pose")}
        if bridge:
            conn["/diagnostics"] = writer.add_connection("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray",
                                                         typestore=ts)
            conn["/rosout"] = writer.add_connection("/rosout", "rcl_interfaces/msg/Log", typestore=ts)
        changes = list(bridge)
        state = ["DISARMED", ""]
        next_status = [0.0]
        held: list[np.ndarray | None] = [None]

        def bridge_at(t: float) -> bool:
            """Write the bridge's messages due by ``t``; whether it applies commands now."""
            while changes and changes[0][0] <= t + 1e-9:
                tc, new, why = changes.pop(0)
                log = cls["rcl_interfaces/msg/Log"](stamp=stamp(tc), level=30, name="bridge",
                                                    msg=f"{state[0]} -> {new}: {why}", file="", function="",
                                                    line=0)
                write("/rosout", tc, log, "rcl_interfaces/msg/Log")
                state[:] = [new, why]
            if bridge and t + 1e-9 >= next_status[0]:
                kv = cls["diagnostic_msgs/msg/KeyValue"]
                status = cls["diagnostic_msgs/msg/DiagnosticStatus"](
                    level=0 if state[0] == "ARMED" else 2 if state[0] == "FAULT" else 1, name="bridge: bus",
                    message=f"{state[0]}: {state[1]}", hardware_id="twin", values=[kv(key="state", value=state[0])])
                write("/diagnostics", t, cls["diagnostic_msgs/msg/DiagnosticArray"](header=header(t), status=[status]),
                      "diagnostic_msgs/msg/DiagnosticArray")
                next_status[0] += STATUS_PERIOD_S
            return not bridge or state[0] == "ARMED"

        def write(topic: str, t: float, msg: Any, typ: str) -> None:
            writer.write(conn[topic], _START_NS + round(t * 1e9), ts.serialize_cdr(msg, typ))

        periods = round(duration / CONTROL_PERIOD_S)
        for _ in range(periods + 1):
            t = twin.time
            write("/clock", t, cls[clk](clock=stamp(t)), clk)
            sample = measured(t, twin.joint_positions())
            if sample is not None:
                write("/joint_states", sample[0], joints(*sample), js)
            pos, quat = twin.head_pose()
            noisy = pos + rng.normal(0.0, mocap_noise_m, 3) if mocap_noise_m > 0 else pos
            if with_pose:
                write("/ground_truth/head_pose", t, pose_msg(t, pos, quat), ps)
                write("/mocap/head_pose", t, pose_msg(t, noisy, quat), ps)
            if driver is not None and cmd_vel is not None:
                v, omega = cmd_vel(t)
                vec = cls["geometry_msgs/msg/Vector3"]
                write("/cmd_vel", t, cls[tw](header=header(t), twist=cls["geometry_msgs/msg/Twist"](
                    linear=vec(x=v, y=0.0, z=0.0), angular=vec(x=0.0, y=0.0, z=omega))), tw)
                driver.submit(t, v, omega)
                targets = driver.tick(t)
            else:
                targets = np.asarray(control(twin), dtype=float)
            current = held[0]
            if bridge_at(t):
                current = targets if applied is None else applied(targets, twin.joint_positions())
            elif current is None:
                current = twin.joint_positions()
            held[0] = current
            twin.set_targets(current)
            write("/joint_commands", t, joints(t, targets), js)
            twin.step(twin.substeps)
    return out
