"""Synthetic sessions of the stack written as rosbag2 bags (for tests and ``snake bench bag``).

The bag has the layout ``ros2 bag record`` writes (rosbags' writer: ``metadata.yaml``
version 8 as Jazzy or 9 as Kilted, one MCAP or sqlite3 file), with known motion:

- ``cmd_vel`` (TwistStamped, 20 Hz) follows a script of (v m/s, omega rad/s, seconds),
  every segment published, a stop included;
- the body stays straight and its reduced drive does exactly the commanded twist
  (forward = body axis + 90 deg, the T-Snake's rolling frame), integrated in closed form;
- ``joint_commands`` (50 Hz) move the twist joints only, ``amplitude sin(2 pi f t + j)``,
  which turn about the backbone and leave the body straight; ``joint_states`` carry the
  same signal ``lag_periods`` command periods late, at the command times, with the
  signal's velocity and known efforts when ``effort_amplitude`` is set (else zeros);
- ``/clock`` runs ``clock_factor`` times faster than receive time (a twin in fast mode);
- the motion capture's position has gaussian noise of ``mocap_noise_m`` per axis (seeded);
- with ``bridge`` set, the bridge's ``bridge: bus`` status names its state and reason
  (``state`` key, ``"<STATE>: <reason>"``) and ``/rosout`` carries its change lines
  (``"<FROM> -> <TO>: <reason>"``, logger ``bridge``), as the bridge publishes them;
- ``gait_state`` carries numbers as strings, its native command (omega_h, omega_t) the
  one that gives the motion through 003 Eq. 10 with ``k`` and ``d_prime``; ``diagnostics`` carry the bridge's servo
  statuses (temperature rising 1 C per minute of simulated time from 30 C, 12 V).

The writer streams: messages are built, sorted and written ``_CHUNK_S`` simulated seconds
at a time, so a bag of an hour needs no more memory than one of a minute.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.analysis.session import chain_points_batch
from snake_core.robot import RobotModel

# The stack's rates (Hz): teleop, gait node, twin (state, mocap, clock), bridge diagnostics.
_RATES_HZ = {"cmd_vel": 20.0, "joint_commands": 50.0, "ground_truth": 50.0, "mocap": 50.0,
             "gait_state": 50.0, "diagnostics": 2.0, "clock": 100.0}
_TEMP_START_C = 30.0  # C
_TEMP_RISE_C_PER_S = 1.0 / 60.0  # C per simulated s
_VOLTAGE_V = 12.0  # V
_CHUNK_S = 10.0  # simulated s of messages built, sorted and written at once (the writer streams)


@dataclass(frozen=True)
class SyntheticSession:
    """Parameters of a synthetic session.

    Attributes:
        script: (v m/s, omega rad/s, simulated seconds) per segment.
        amplitude: Twist-joint command amplitude, rad.
        frequency: Twist-joint command frequency, Hz.
        lag_periods: joint_states delay, in command periods (1 / 50 Hz).
        clock_factor: Simulated seconds per receive-time second.
        start_ns: Receive time of the first message, ns since the epoch.
        k: Reduction's velocity transmission coefficient the motion obeys, m/rad (003 Eq. 10).
        d_prime: Reduction's equivalent wheel separation, m.
        effort_amplitude: Twist-joint effort amplitude, N m (:func:`twist_efforts`); 0 writes
            zero velocities and efforts in ``joint_states``.
        effort_phase: Phase of the twist-joint effort ahead of the joint's velocity, rad.
        mocap_noise_m: Std of the gaussian noise on each coordinate of the motion capture's
            position, m (ground truth stays exact).
        seed: Seed of that noise.
        bridge: The bridge's state changes (simulated s, state, reason), in time order; empty:
            the bus status names no state and ``/rosout`` is not written.
    """

    script: tuple[tuple[float, float, float], ...] = ((0.08, 0.0, 6.0), (0.05, 0.1, 6.0), (0.0, 0.15, 6.0),
                                                      (0.0, 0.0, 2.0))
    amplitude: float = 0.3
    frequency: float = 0.5
    lag_periods: int = 2
    clock_factor: float = 1.0
    start_ns: int = 1_700_000_000_000_000_000
    k: float = 0.05
    d_prime: float = 1.0
    effort_amplitude: float = 0.0
    effort_phase: float = 0.5
    mocap_noise_m: float = 0.0
    seed: int = 0
    bridge: tuple[tuple[float, str, str], ...] = ()

    @property
    def duration(self) -> float:
        """Simulated seconds."""
        return float(sum(s[2] for s in self.script))


def drive_pose(session: SyntheticSession, t: np.ndarray, psi0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Body centre (n, 2) m and body-axis yaw (n,) rad at simulated times ``t`` (closed form)."""
    t = np.asarray(t, dtype=float)
    centre = np.zeros((len(t), 2))
    psi = np.zeros(len(t))
    c, heading, t0 = np.zeros(2), psi0, 0.0
    for v, w, seconds in session.script:
        sel = (t >= t0) & (t <= t0 + seconds + 1e-12)
        dt = t[sel] - t0
        theta = heading + np.pi / 2
        if abs(w) > 1e-12:
            dx = (v / w) * (np.sin(theta + w * dt) - np.sin(theta))
            dy = -(v / w) * (np.cos(theta + w * dt) - np.cos(theta))
        else:
            dx, dy = v * dt * np.cos(theta), v * dt * np.sin(theta)
        centre[sel] = c + np.column_stack([dx, dy])
        psi[sel] = heading + w * dt
        if abs(w) > 1e-12:
            c = c + (v / w) * np.array([np.sin(theta + w * seconds) - np.sin(theta),
                                        -(np.cos(theta + w * seconds) - np.cos(theta))])
        else:
            c = c + v * seconds * np.array([np.cos(theta), np.sin(theta)])
        heading += w * seconds
        t0 += seconds
    return centre, psi


def twist_commands(robot: RobotModel, session: SyntheticSession, t: np.ndarray) -> np.ndarray:
    """Joint commands (n, joints) at simulated times: twist joints sinusoidal, others zero, rad."""
    q = np.zeros((len(t), len(robot.joints)))
    for k, j in enumerate(robot.joints):
        if j.type == "twist":
            q[:, k] = session.amplitude * np.sin(2 * np.pi * session.frequency * np.asarray(t) + k)
    return q


def twist_velocities(robot: RobotModel, session: SyntheticSession, t: np.ndarray) -> np.ndarray:
    """Time derivative of :func:`twist_commands` (n, joints), rad/s.

    ``2 pi f amplitude cos(2 pi f t + j)`` on twist joint j, zero elsewhere.
    """
    w = 2 * np.pi * session.frequency
    qd = np.zeros((len(t), len(robot.joints)))
    for k, j in enumerate(robot.joints):
        if j.type == "twist":
            qd[:, k] = w * session.amplitude * np.cos(w * np.asarray(t) + k)
    return qd


def twist_efforts(robot: RobotModel, session: SyntheticSession, t: np.ndarray) -> np.ndarray:
    """Joint efforts (n, joints), N m.

    ``effort_amplitude cos(2 pi f t + j + effort_phase)`` on twist joint j (so tau * qdot is
    negative for part of each period), zero elsewhere.
    """
    tau = np.zeros((len(t), len(robot.joints)))
    for k, j in enumerate(robot.joints):
        if j.type == "twist":
            tau[:, k] = session.effort_amplitude * np.cos(2 * np.pi * session.frequency * np.asarray(t) + k
                                                          + session.effort_phase)
    return tau


def _base_from_centre(robot: RobotModel, centre: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """Head-tip positions (n, 3) of a straight body with the given centre and axis yaw."""
    straight = chain_points_batch(robot, np.zeros((1, 3)), np.array([[1.0, 0, 0, 0]]),
                                  np.zeros((1, len(robot.joints))))[0]
    mean_offset = float(straight[:, 0].mean())
    base = np.zeros((len(centre), 3))
    base[:, 0] = centre[:, 0] - mean_offset * np.cos(psi)
    base[:, 1] = centre[:, 1] - mean_offset * np.sin(psi)
    return base


def write_session(out: Path, robot: RobotModel, session: SyntheticSession | None = None, storage: str = "mcap",
                  version: int = 9, rates: dict[str, float] | None = None,
                  mocap_topic: str = "/mocap/head_pose", robot_yaml: str | None = None) -> Path:
    """Write a synthetic session bag to ``out`` (which must not exist).

    Args:
        out: Bag directory to create.
        robot: The robot whose joints and body the session moves.
        session: The motion (default :class:`SyntheticSession`).
        storage: ``mcap`` or ``sqlite3``.
        version: metadata.yaml version.
        rates: Per-topic rates, Hz, over the defaults (0 leaves a topic out; ``rosout``: 0 leaves the
            bridge's change lines out, any other value writes them at the changes).
        mocap_topic: Topic of the motion-capture pose (PoseStamped), or ``tf:<frame>``
            for a ``/tf`` transform ``world`` -> frame (next to a second, unrelated one).
        robot_yaml: Robot YAML text to record once on ``/robot_description_yaml`` (as the
            gait node publishes it), or None for a bag without it.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    s = session or SyntheticSession()
    rates = {**_RATES_HZ, **(rates or {})}
    ts = get_typestore(Stores.ROS2_KILTED)
    classes = ts.types

    def mk(type_name: str, /, **fields: Any) -> Any:
        return classes[type_name](**fields)

    def stamp(t_sim: float) -> Any:
        sec, nsec = divmod(round(t_sim * 1e9), 1_000_000_000)
        return mk("builtin_interfaces/msg/Time", sec=sec, nanosec=nsec)

    def header(t_sim: float, frame: str = "") -> Any:
        return mk("std_msgs/msg/Header", stamp=stamp(t_sim), frame_id=frame)

    def kv(key: str, value: str) -> Any:
        return mk("diagnostic_msgs/msg/KeyValue", key=key, value=value)

    def vec(x: float, y: float, z: float, name: str = "geometry_msgs/msg/Vector3") -> Any:
        return mk(name, x=x, y=y, z=z)

    def grid(rate: float) -> np.ndarray:  # a rate of 0 leaves the topic out
        return np.arange(0.0, s.duration + 1e-9, 1.0 / rate) if rate > 0 else np.empty(0)

    names = robot.joint_names
    js = "sensor_msgs/msg/JointState"
    status = "diagnostic_msgs/msg/DiagnosticStatus"
    t_cmd = grid(rates["joint_commands"])
    q_cmd = twist_commands(robot, s, t_cmd)
    lagged = np.maximum(np.arange(len(t_cmd)) - s.lag_periods, 0)  # joint_states: the command lag_periods late
    qd_state = twist_velocities(robot, s, t_cmd[lagged]) if s.effort_amplitude else np.zeros((len(t_cmd), len(names)))
    tau_state = twist_efforts(robot, s, t_cmd[lagged]) if s.effort_amplitude else np.zeros((len(t_cmd), len(names)))
    t_seg = np.cumsum([0.0] + [x[2] for x in s.script])

    def command_at(t: float) -> tuple[float, float]:
        k = min(int(np.searchsorted(t_seg, t, side="right")) - 1, len(s.script) - 1)
        return s.script[k][0], s.script[k][1]

    def joint_command(k: int, t: float) -> dict[str, Any]:
        return {"header": header(t), "name": names, "position": q_cmd[k], "velocity": np.zeros(0),
                "effort": np.zeros(0)}

    def joint_state(k: int, t: float) -> dict[str, Any]:
        return {"header": header(t), "name": names, "position": q_cmd[lagged[k]], "velocity": qd_state[k],
                "effort": tau_state[k]}

    def cmd_vel(_k: int, t: float) -> dict[str, Any]:
        v, w = command_at(t)
        return {"header": header(t), "twist": mk("geometry_msgs/msg/Twist", linear=vec(v, 0.0, 0.0),
                                                 angular=vec(0.0, 0.0, w))}

    def pose_source(topic: str, rate: float, noise_m: float = 0.0) -> tuple[str, str, np.ndarray, Any]:
        t_pose = grid(rate)
        centre, psi = drive_pose(s, t_pose)
        base = _base_from_centre(robot, centre, psi)
        if noise_m > 0:
            base[:, :2] += np.random.default_rng(s.seed).normal(0.0, noise_m, (len(base), 2))

        def quat(k: int) -> Any:
            return mk("geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=float(np.sin(psi[k] / 2)),
                      w=float(np.cos(psi[k] / 2)))

        def tf(k: int, t: float) -> dict[str, Any]:
            moved = mk("geometry_msgs/msg/Transform", translation=vec(base[k, 0], base[k, 1], 0.028), rotation=quat(k))
            other = mk("geometry_msgs/msg/Transform", translation=vec(1.0, 2.0, 0.0),
                       rotation=mk("geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.0, w=1.0))
            return {"transforms": [
                mk("geometry_msgs/msg/TransformStamped", header=header(t, "world"), child_frame_id="camera",
                   transform=other),
                mk("geometry_msgs/msg/TransformStamped", header=header(t, "world"), child_frame_id=topic[3:],
                   transform=moved)]}

        def pose(k: int, t: float) -> dict[str, Any]:
            return {"header": header(t, "world"), "pose": mk(
                "geometry_msgs/msg/Pose", position=vec(base[k, 0], base[k, 1], 0.028, "geometry_msgs/msg/Point"),
                orientation=quat(k))}

        if topic.startswith("tf:"):
            return ("/tf", "tf2_msgs/msg/TFMessage", t_pose, tf)
        return (topic, "geometry_msgs/msg/PoseStamped", t_pose, pose)

    def gait_state(k: int, t: float) -> dict[str, Any]:
        v, w = command_at(t)
        # Eq. 10 inverted: the native command that gives (v, w) through (k, d').
        omega_h, omega_t = (v - w * s.d_prime / 2) / s.k, (v + w * s.d_prime / 2) / s.k
        values = {"v": v, "yaw_rate": w, "omega_h": omega_h, "omega_t": omega_t, "omega_c": 0.5 * v,
                  "phi_h": 0.1 * t, "phi_t": 0.2 * t, "twist_cycles": float(k // 50), "resets": float(k // 100),
                  "rejected_commands": 0.0}
        return {"level": 0, "name": "gait", "message": "translating" if v else "stopped",
                "hardware_id": robot.name, "values": [kv(key, f"{x:.9g}") for key, x in values.items()]}

    bridge_t = np.array([b[0] for b in s.bridge])

    def bridge_at(t: float) -> tuple[str, str] | None:
        k = int(np.searchsorted(bridge_t, t, side="right")) - 1
        return (s.bridge[k][1], s.bridge[k][2]) if k >= 0 else None

    def diagnostics(_k: int, t: float) -> dict[str, Any]:
        bus_values = [kv("failed_cycles", "0"), kv("command_state", "active")]
        message, level = "ok", 0
        if (now := bridge_at(t)) is not None:
            bus_values.insert(0, kv("state", now[0]))
            message, level = f"{now[0]}: {now[1]}", (2 if now[0] == "FAULT" else 0 if now[0] == "ARMED" else 1)
        statuses = [mk(status, level=level, name="bridge: bus", message=message, hardware_id="emulated",
                       values=bus_values)]
        temperature = f"{_TEMP_START_C + _TEMP_RISE_C_PER_S * t:.3f}"
        for j in robot.joints:
            statuses.append(mk(status, level=0, name=f"bridge: {j.name}", message="ok",
                               hardware_id=f"dynamixel id {j.servo_id}",
                               values=[kv("hardware_error", "0"), kv("temperature_c", temperature),
                                       kv("voltage_v", f"{_VOLTAGE_V:.1f}"), kv("torque", "True")]))
        return {"header": header(t), "status": statuses}

    # (topic, type, simulated times, fields of message k at time t); equal receive times keep this order.
    sources = [("/joint_commands", js, t_cmd, joint_command), ("/joint_states", js, t_cmd, joint_state),
               ("/cmd_vel", "geometry_msgs/msg/TwistStamped", grid(rates["cmd_vel"]), cmd_vel),
               pose_source("/ground_truth/base_pose", rates["ground_truth"]),
               pose_source(mocap_topic, rates["mocap"], s.mocap_noise_m),
               ("/gait_state", status, grid(rates["gait_state"]), gait_state),
               ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", grid(rates["diagnostics"]), diagnostics),
               ("/clock", "rosgraph_msgs/msg/Clock", grid(rates["clock"]),
                lambda _k, t: {"clock": stamp(t)})]
    if s.bridge and rates.get("rosout", 1.0) > 0:  # rates {"rosout": 0}: the bus status alone
        changes = [(t, f"{s.bridge[k - 1][1] if k else 'DISARMED'} -> {state}: {why}")
                   for k, (t, state, why) in enumerate(s.bridge)]
        sources.append(("/rosout", "rcl_interfaces/msg/Log", np.array([c[0] for c in changes]),
                        lambda k, t: {"stamp": stamp(t), "level": 30, "name": "bridge", "msg": changes[k][1],
                                      "file": "supervisor.py", "function": "_enter", "line": 1}))
    if robot_yaml is not None:
        sources.append(("/robot_description_yaml", "std_msgs/msg/String", np.zeros(1),
                        lambda _k, _t: {"data": robot_yaml}))
    sources = [src for src in sources if len(src[2])]
    edges = np.arange(0.0, s.duration + _CHUNK_S, _CHUNK_S)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(out, version=version, storage_plugin=plugin) as writer:  # type: ignore[arg-type]
        conns: dict[str, Any] = {}
        for topic, msgtype, _t, _f in sources:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
        for a, b in itertools.pairwise(edges):  # one chunk of simulated time at a time
            chunk: list[tuple[int, str, memoryview]] = []  # (receive time ns, topic, CDR)
            for topic, msgtype, times, fields in sources:
                last = b if b < edges[-1] else np.inf
                for k in range(int(np.searchsorted(times, a)), int(np.searchsorted(times, last))):
                    t = float(times[k])
                    rx = s.start_ns + round(t / s.clock_factor * 1e9)
                    chunk.append((rx, topic, ts.serialize_cdr(mk(msgtype, **fields(k, t)), msgtype)))
            chunk.sort(key=lambda m: m[0])
            for t_ns, topic, data in chunk:
                writer.write(conns[topic], t_ns, data)
    return out
