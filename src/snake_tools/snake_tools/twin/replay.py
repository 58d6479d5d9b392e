"""Replay a recorded run through the MuJoCo twin and say how far the twin is from the robot.

The twin is driven by what the robot was told, on the bag's own time base
(:mod:`snake_tools.bag.series`: simulated time when the bag has ``/clock``, else receive
time; on simulated time, the header stamps of the JointState and pose topics stamped by
the clock, :meth:`~snake_tools.bag.series.BagSeries.stamped_times`), from the recorded
initial joint angles (the first ``joint_states``, else the first command):

* ``joint_commands`` drive: each recorded command applied at its time;
* ``cmd_vel`` drive: the recorded ``cmd_vel`` through the same gait as ``gait_node``
  (:class:`GaitDriver`: its twist conditioner with ``gait_node``'s default limits, the
  gait's mapping and step every control period), each twist taken at its time.

The default (``auto``) is ``joint_commands`` when the bag has them, else ``cmd_vel``. The twin's head pose is
sampled at the times of the robot's recorded pose (the pose source of
:func:`snake_tools.bag.series.pose_sources`) and its joint angles at the times of the
recorded ``joint_states``. The twin's trajectory is moved rigidly (in the plane) so that
its first sample lies on the robot's first one; then:

* per segment (the spans of constant ``cmd_vel`` when the bag has it, else windows of
  :data:`SEGMENT_S`): achieved speed (net head displacement over the span's duration) and
  turn rate (change of the head's heading over the duration) of robot and twin, and their
  ratios twin / robot (``None`` where the robot hardly moved or turned);
* trajectory divergence: the planar distance between twin and robot head at the end
  (m), its maximum, and the end value per metre the robot travelled;
* heading drift: twin heading minus robot heading at the end, rad in (-pi, pi];
* joint tracking residual: RMS of twin minus recorded joint angle over every
  ``joint_states`` sample and joint, rad (overall and per joint type).

Heading is the yaw of the head frame's x axis (the body axis), which a roll about that
axis leaves unchanged.

The twin's servos run at the supply voltage the robot's did (their gains and torque limit
scale with it, :mod:`snake_core.twin_params`): the median of the bag's ``/battery_state``
voltage (the bridge's median of its servos' Present Input Voltage) where it holds one, else
each servo model's nominal voltage; ``supply_voltage_v`` and ``supply_voltage_source`` say which
(:func:`at_recorded_voltage`).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snake_core.control import CONTROL_PERIOD_S
from snake_core.gait import make_gait
from snake_core.gait.command import TwistConditioner, TwistLimits
from snake_core.robot import RobotModel
from snake_core.twin_params import TwinParams
from snake_tools.bag.series import BagSeries, read_series
from snake_tools.twin.path_rates import span_rates

SEGMENT_S = 5.0
"""Length of a replay segment when the bag has no ``cmd_vel``, s."""
_MIN_SEGMENT_S = 1.0        # s, shorter spans of constant cmd_vel are merged into the next one
_MIN_SPEED = 0.005          # m/s, below this the robot's speed gives no ratio
_MIN_TURN_RATE = 0.02       # rad/s, below this the robot's turn rate gives no ratio
_MIN_TRAVEL_M = 0.01        # m, below this no divergence per metre travelled
_PATH_SAMPLE_S = 0.5        # s, the travelled distance sums displacements at this spacing (mocap noise)
_CMD_TOLERANCE = 1e-6       # m/s, rad/s: cmd_vel values that differ by less are one segment
_MIN_COMMANDS = 2           # joint_commands (or cmd_vel) messages a replay needs
DRIVES = ("auto", "joint_commands", "cmd_vel")
"""What drives the twin in a replay (module docstring)."""
GAIT_NODE_LIMITS = TwistLimits(max_linear=0.1, max_angular=0.2, max_linear_accel=0.3, max_angular_accel=1.0,
                               timeout=0.5)
"""``gait_node``'s default twist limits (m/s, rad/s, m/s^2, rad/s^2, s): docs/parameters.md."""


class GaitDriver:
    """``cmd_vel`` -> joint targets as ``gait_node`` computes them, one control period at a time.

    ``gait_node`` also ticks early when a ``cmd_vel`` changes the command (at least a quarter
    period after its last tick); the driver keeps whole control periods, so a change takes
    effect here up to three quarters of a period later than on the robot.

    Args:
        robot: The robot (with the calibration target's gait coefficients).
        gait: Gait name.
        limits: Twist limits of the conditioner.
    """

    def __init__(self, robot: RobotModel, gait: str = "rolling", limits: TwistLimits = GAIT_NODE_LIMITS) -> None:
        self.gait = make_gait(gait, robot)
        self.filter = TwistConditioner(limits)
        where = {n: i for i, n in enumerate(self.gait.joint_names)}
        self._order = np.array([where[n] for n in robot.joint_names])

    def submit(self, t: float, v: float, omega: float) -> None:
        """A ``cmd_vel`` received at time ``t`` (s): linear m/s, angular rad/s."""
        self.filter.submit(t, v, omega)

    def tick(self, t: float, dt: float = CONTROL_PERIOD_S) -> np.ndarray:
        """Joint targets at time ``t`` after ``dt`` s of the gait, rad, the robot's joint order."""
        v, omega = self.filter.ramp(t, dt)
        return np.asarray(self.gait.step(dt, self.gait.mapping.to_command(v, omega)), dtype=float)[self._order]


def _gait_commands(bs: BagSeries, robot: RobotModel, gait: str, t_end: float) -> tuple[np.ndarray, np.ndarray]:
    """Times (s) and joint targets (n, joints) of the gait driven by the bag's ``cmd_vel``."""
    cmd = bs.series["/cmd_vel"]
    t_vel = cmd.times()
    vel = np.asarray(cmd.rows, dtype=float).reshape(-1, 2)
    driver = GaitDriver(robot, gait)
    ticks = np.arange(0.0, t_end + 1e-9, CONTROL_PERIOD_S)
    out = np.zeros((len(ticks), len(robot.joints)))
    k = 0
    for i, t in enumerate(ticks):
        while k < len(t_vel) and t_vel[k] <= t + 1e-9:
            driver.submit(float(t_vel[k]), float(vel[k, 0]), float(vel[k, 1]))
            k += 1
        out[i] = driver.tick(float(t))
    return ticks, out


class ReplayError(ValueError):
    """A recording that cannot be replayed (one line naming the bag and what is missing)."""


@dataclass(frozen=True)
class Trajectory:
    """Planar head trajectory: times (n,) s, positions (n, 2) m, headings (n,) rad (unwrapped)."""

    t: np.ndarray
    xy: np.ndarray
    heading: np.ndarray


def heading_of(quat_wxyz: np.ndarray) -> np.ndarray:
    """Yaw of the x axis of frames with quaternions (n, 4) (w, x, y, z), rad.

    The x column of the rotation matrix is (1 - 2(y^2 + z^2), 2(xy + wz), 2(xz - wy));
    the heading is atan2 of its y and x components.
    """
    q = np.asarray(quat_wxyz, dtype=float).reshape(-1, 4)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.arctan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z))


def _wrap(angle: float) -> float:
    """Angle in (-pi, pi], rad."""
    return float(math.atan2(math.sin(angle), math.cos(angle)))


def _joint_matrix(rows: list[Any], names: list[str], topic: str, bag: Path) -> np.ndarray:
    """JointState rows -> (n, joints) positions in ``names`` order."""
    out = np.empty((len(rows), len(names)))
    order: dict[tuple[str, ...], np.ndarray] = {}
    for k, (msg_names, pos) in enumerate(rows):
        idx = order.get(msg_names)
        if idx is None:
            where = {n: i for i, n in enumerate(msg_names)}
            missing = [n for n in names if n not in where]
            if missing:
                raise ReplayError(f"{bag}: {topic} lacks joints of the robot: {', '.join(missing[:4])}"
                                  f"{' ...' if len(missing) > 4 else ''} (wrong --robot?)")
            idx = np.array([where[n] for n in names])
            order[msg_names] = idx
        if len(pos) != len(msg_names):
            raise ReplayError(f"{bag}: {topic}: a message has {len(msg_names)} names and {len(pos)} positions")
        out[k] = pos[idx]
    return out


def _segments(bs: BagSeries, t_end: float) -> list[tuple[float, float, tuple[float, float] | None]]:
    """(start s, end s, cmd_vel (v, omega) or None) of each segment."""
    cmd = bs.series.get("/cmd_vel")
    if cmd is None or not len(cmd.t):
        edges = [*(float(e) for e in np.arange(0.0, t_end, SEGMENT_S)), t_end]
        return [(a, b, None) for a, b in itertools.pairwise(edges) if b - a > 1e-9]
    t = cmd.times()
    values = np.asarray(cmd.rows, dtype=float).reshape(-1, 2)
    starts = [0]
    for k in range(1, len(t)):
        if np.abs(values[k] - values[starts[-1]]).max() > _CMD_TOLERANCE:
            starts.append(k)
    out: list[tuple[float, float, tuple[float, float] | None]] = []
    for i, k in enumerate(starts):
        a = float(t[k])
        b = float(t[starts[i + 1]]) if i + 1 < len(starts) else t_end
        b = float(min(b, t_end))
        if b - a >= _MIN_SEGMENT_S:
            out.append((a, b, (float(values[k, 0]), float(values[k, 1]))))
    return out


def _span(traj: Trajectory, a: float, b: float) -> tuple[float, float] | None:
    """(speed m/s, turn rate rad/s) of a trajectory between times a and b (:func:`span_rates`)."""
    rates = span_rates(traj.t, traj.xy, traj.heading, ((a, b),))
    return (float(rates[0, 0]), float(rates[0, 1])) if len(rates) else None


def _ratio(twin: float, robot: float, floor: float) -> float | None:
    return twin / robot if abs(robot) >= floor else None


def _travelled(traj: Trajectory) -> float:
    """Path length of the trajectory sampled every :data:`_PATH_SAMPLE_S`, m."""
    grid = np.arange(traj.t[0], traj.t[-1], _PATH_SAMPLE_S)
    grid = np.append(grid, traj.t[-1])
    xy = np.column_stack([np.interp(grid, traj.t, traj.xy[:, i]) for i in range(2)])
    return float(np.linalg.norm(np.diff(xy, axis=0), axis=1).sum())


def compare(robot_traj: Trajectory, twin_traj: Trajectory,
            segments: list[tuple[float, float, tuple[float, float] | None]]) -> dict[str, Any]:
    """Twin-versus-robot numbers of two trajectories sampled at the same times (module docstring).

    The twin's trajectory is first moved rigidly so that its first sample coincides with
    the robot's (position and heading).
    """
    dh = robot_traj.heading[0] - twin_traj.heading[0]
    c, s = math.cos(dh), math.sin(dh)
    rel = twin_traj.xy - twin_traj.xy[0]
    moved = Trajectory(t=twin_traj.t, xy=robot_traj.xy[0] + rel @ np.array([[c, s], [-s, c]]),
                       heading=twin_traj.heading + dh)
    err = np.linalg.norm(moved.xy - robot_traj.xy, axis=1)
    travelled = _travelled(robot_traj)
    rows = []
    for a, b, cmd in segments:
        r, w = _span(robot_traj, a, b), _span(moved, a, b)
        if r is None or w is None:
            continue
        rows.append({"t_start_s": a, "t_end_s": b, "cmd_v_mps": cmd[0] if cmd else None,
                     "cmd_omega_radps": cmd[1] if cmd else None,
                     "robot_speed_mps": r[0], "twin_speed_mps": w[0], "speed_ratio": _ratio(w[0], r[0], _MIN_SPEED),
                     "robot_turn_rate_radps": r[1], "twin_turn_rate_radps": w[1],
                     "turn_rate_ratio": _ratio(w[1], r[1], _MIN_TURN_RATE)})
    return {
        "segments": rows,
        "distance_travelled_m": travelled,
        "divergence_end_m": float(err[-1]),
        "divergence_max_m": float(err.max()),
        "divergence_per_m": float(err[-1] / travelled) if travelled >= _MIN_TRAVEL_M else None,
        "heading_drift_rad": _wrap(float(moved.heading[-1] - robot_traj.heading[-1])),
    }


def at_recorded_voltage(bs: BagSeries, robot: RobotModel, twin_params: TwinParams | None,
                        window: tuple[float, float] | None = None) -> tuple[TwinParams, dict[str, Any]]:
    """The twin's physics at the supply voltage a recording's servos had.

    Args:
        bs: The recording.
        robot: The robot recorded.
        twin_params: The twin's physics (``None``: the defaults).
        window: Only the ``/battery_state`` messages stamped within (start, end), s.

    Returns:
        The physics at the median ``voltage`` of ``/battery_state`` (finite values; a bag without
        any: unchanged, each servo model's nominal voltage), and ``supply_voltage_v`` (V, the
        median over the servos in effect) and ``supply_voltage_source`` (``recorded /battery_state
        (N messages)`` or ``nominal (no /battery_state in the bag)``).
    """
    params = twin_params or TwinParams()
    volts = np.empty(0)
    if bs.has("/battery_state"):
        series = bs.series["/battery_state"]
        volts = np.asarray(series.rows, dtype=float)
        if window is not None:
            t = series.times()
            volts = volts[(t >= window[0]) & (t <= window[1])]
        volts = volts[np.isfinite(volts) & (volts > 0)]
    if volts.size:
        params = params.at_voltage(float(np.median(volts)))
        source = f"recorded /battery_state ({volts.size} messages)"
    else:
        source = "nominal (no /battery_state in the bag)"
    return params, {"supply_voltage_v": float(np.median(params.servo_voltages(robot.joints))),
                    "supply_voltage_source": source}


def run_recorded(twin: Any, t_cmd: np.ndarray, q_cmd: np.ndarray, t_pose: np.ndarray, t_state: np.ndarray,
          t0: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Run ``twin`` through recorded commands and sample it at recorded times (all s, from ``t0``).

    Every time is rounded to the twin's physics step; at one step, the command is applied
    before the samples are taken.

    Returns:
        Head positions in the plane (n_pose, 2), m; head quaternions (n_pose, 4) (w, x, y, z);
        joint angles (n_state, joints), rad; physics steps run.
    """
    dt = twin.timestep
    events = sorted([(round((t - t0) / dt), 0, k) for k, t in enumerate(t_cmd)]
                    + [(round((t - t0) / dt), 1, k) for k, t in enumerate(t_pose)]
                    + [(round((t - t0) / dt), 2, k) for k, t in enumerate(t_state)])
    xy = np.zeros((len(t_pose), 2))
    quat = np.zeros((len(t_pose), 4))
    q = np.zeros((len(t_state), len(twin.joint_names)))
    steps = 0
    for step, kind, k in events:
        if step > steps:
            twin.step(step - steps)
            steps = step
        if kind == 0:
            twin.set_targets(q_cmd[k])
        elif kind == 1:
            pos, quat[k] = twin.head_pose()
            xy[k] = pos[:2]
        else:
            q[k] = twin.joint_positions()
    return xy, quat, q, steps


def replay(bag: Path | BagSeries, robot: RobotModel, twin_params: TwinParams | None = None,
           world: str | Path | None = "flat", pose_topic: str | None = None, drive: str = "auto",
           gait: str = "rolling", window: tuple[float, float] | None = None,
           start_offset_rad: float = 0.0) -> dict[str, Any]:
    """Drive the twin with what a recording told the robot and compare with the recorded robot.

    Args:
        bag: Bag directory or file, or its series already read (with ``/joint_commands``,
            a pose source, and ``/joint_states`` and ``/cmd_vel`` when present).
        robot: The robot that was recorded.
        twin_params: The twin's physics (default: the defaults), run at the recorded supply voltage
            (:func:`at_recorded_voltage`).
        world: World of the twin (name or YAML path; ``None``: a flat plane).
        pose_topic: Pose source (``--pose-topic`` of ``snake bag analyze``).
        drive: One of :data:`DRIVES`.
        gait: The gait of the ``cmd_vel`` drive.
        window: Replay only the commands, poses and joint states stamped within (start, end), s
            (the span in which the bridge applied the commands, :func:`snake_tools.twin.checks.armed_window`),
            the twin starting there from the recorded angles; ``cmd_vel`` drives the gait from the
            bag's start either way (the gait's phase).
        start_offset_rad: Added to every recorded initial joint angle (a start the encoders do not
            tell from the recorded one: :mod:`snake_tools.twin.spread`).

    Returns:
        The numbers of the module docstring plus ``drive``, ``duration_s``, ``supply_voltage_v``,
        ``supply_voltage_source``, ``time_base``,
        ``pose_source``, ``joint_residual_rms_rad``, ``joint_residual_rms_rad_by_type``,
        ``latency_steps`` (command latency of the twin per joint type, physics steps),
        ``timestep_s`` (the physics step),
        ``replay_wall_s`` and ``replay_realtime_factor``.

    Raises:
        ReplayError: The bag lacks the commands or a pose, or names other joints.
        BagError: The bag cannot be read.
    """
    from snake_hardware.sim.twin import SimTwin  # mujoco: imported only when replaying

    bs = bag if isinstance(bag, BagSeries) else read_series(Path(bag), progress=False, pose_topic=pose_topic)
    path = bs.summary.path
    if drive not in DRIVES:
        raise ReplayError(f"drive {drive!r}: one of {', '.join(DRIVES)}")

    def enough(topic: str) -> bool:
        return bs.has(topic) and len(bs.series[topic].t) >= _MIN_COMMANDS

    if drive == "auto":
        drive = "joint_commands" if enough("/joint_commands") else "cmd_vel"
    if not enough(f"/{drive}"):
        raise ReplayError(f"{path}: nothing to drive the twin with: no /{drive} (at least {_MIN_COMMANDS} messages)")
    if not bs.pose_topics:
        raise ReplayError(f"{path}: no pose of the robot to compare with (no mocap, ground truth or /tf pose)")
    names = robot.joint_names
    pose = bs.series[bs.pose_topics[0]]
    if drive == "joint_commands":
        cmd = bs.series["/joint_commands"]
        q_cmd = _joint_matrix(cmd.rows, names, "/joint_commands", path)
        t_cmd = bs.stamped_times("/joint_commands")
    else:
        t_cmd, q_cmd = _gait_commands(bs, robot, gait, float(pose.t[-1]))
    t_pose = bs.stamped_times(bs.pose_topics[0])
    rows = np.asarray(pose.rows, dtype=float).reshape(-1, 7)
    states = bs.series.get("/joint_states")
    q_state = _joint_matrix(states.rows, names, "/joint_states", path) if states is not None and len(states.t) else None
    t_state = bs.stamped_times("/joint_states") if q_state is not None else np.empty(0)

    t0 = 0.0
    if window is not None:
        t0, t1 = window
        keep_cmd, keep_pose, keep_state = ((x >= t0) & (x <= t1) for x in (t_cmd, t_pose, t_state))
        t_cmd, q_cmd, t_pose, rows = t_cmd[keep_cmd], q_cmd[keep_cmd], t_pose[keep_pose], rows[keep_pose]
        if q_state is not None:
            t_state, q_state = t_state[keep_state], q_state[keep_state]
        if len(t_cmd) < _MIN_COMMANDS or len(t_pose) < 2:
            raise ReplayError(f"{path}: too few commands or poses in {t0:.1f}-{t1:.1f} s to replay")
    twin_params, supply = at_recorded_voltage(bs, robot, twin_params, window)
    twin = SimTwin(robot, world, twin_params=twin_params)
    q0 = q_state[0] if q_state is not None and len(q_state) else q_cmd[0]
    twin.reset(targets=np.asarray(q0, dtype=float) + start_offset_rad)
    dt = twin.timestep
    wall = time.perf_counter()
    twin_xy, twin_quat, twin_q, steps = run_recorded(twin, t_cmd, q_cmd, t_pose, t_state, t0)
    wall = time.perf_counter() - wall
    robot_traj = Trajectory(t=t_pose, xy=rows[:, :2], heading=np.unwrap(heading_of(rows[:, 3:])))
    twin_traj = Trajectory(t=t_pose, xy=twin_xy, heading=np.unwrap(heading_of(twin_quat)))
    t_end = float(max(t_pose[-1], t_cmd[-1]))
    out: dict[str, Any] = {
        "bag": str(path),
        "robot": robot.name,
        "drive": drive if drive == "joint_commands" else f"cmd_vel through the {gait} gait",
        "time_base": bs.time_base,
        "pose_source": bs.pose_topics[0],
        "duration_s": t_end,
        **supply,
        **compare(robot_traj, twin_traj, [(max(a, t0), b, c) for a, b, c in _segments(bs, float(t_pose[-1]))
                                          if b > t0 and b - max(a, t0) >= _MIN_SEGMENT_S]),
    }
    if window is not None:
        out["window_s"] = [t0, float(window[1])]
    if q_state is not None:
        residual = twin_q - q_state
        out["joint_residual_rms_rad"] = float(np.sqrt(np.mean(residual ** 2)))
        types = np.array([j.type for j in robot.joints])
        out["joint_residual_rms_rad_by_type"] = {
            str(jt): float(np.sqrt(np.mean(residual[:, types == jt] ** 2))) for jt in dict.fromkeys(types)}
    else:
        out["joint_residual_rms_rad"] = None
        out["joint_residual_rms_rad_by_type"] = {}
    steps_of = twin.latency_steps
    out["latency_steps"] = {str(j.type): float(steps_of[i]) for i, j in enumerate(robot.joints)}
    out["timestep_s"] = dt
    out["replay_wall_s"] = wall
    out["replay_realtime_factor"] = float(steps * dt / wall) if wall > 0 else None
    return out
