"""Closed loop with synthetic motion capture: plant -> noisy markers -> filter -> follower -> gait -> plant.

The hook for the closed-loop experiments of 001: any plant with the
:class:`MocapPlant` methods can be driven, in particular the MuJoCo twin
(:class:`snake_hardware.sim.twin.SimTwin` has ``time``, ``set_targets``, ``advance`` and
``head_markers``; its head frame's x axis points to the tail, so pass ``yaw_offset=pi``) and the
viscous model (:class:`snake_core.following.viscous.closed_loop.ViscousPlant`).

Each control period: the plant's head markers are captured by the synthetic motion capture
(:class:`~snake_core.following.synthetic_mocap.MocapModel`, the twin node's model: noise,
whole-frame outliers, latency, dropouts, one capture per period), the samples it releases
(stamped with their release time, as the twin node publishes them) are fitted and filtered
(:class:`~snake_core.following.head_pose.HeadPoseFilter`, 001 Sec. VI), the follower
computes Eq. (11), and the gait turns the result into joint targets: the head offset
for the serpenoid gait (``drive="offset"``), or ``cmd_vel`` through the gait's differential-drive
mapping (``drive="cmd_vel"``, the T-Snake). Without a valid pose, or once stuck, stalled or at the goal,
the gait is commanded to stop.

The point that follows the path need not be the head frame's origin: ``reference_offset``
moves it along the head frame's x axis (:func:`reference_pose`). The T-Snake's head segment is
the *left wheel* of its reduced differential drive (003 Eq. 9-10), so the head itself stops or
backs up whenever the drive turns left faster than ``2 v / d'``; steering the drive's centre,
``(s_h + s_t) / 2`` along the body, is the textbook unicycle set-up instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from snake_core.errors import SnakeCoreError
from snake_core.following.follower import FollowerConfig, FollowerStatus, PathFollower
from snake_core.following.head_pose import HeadPoseFilter, HeadPoseFilterConfig, fit_markers
from snake_core.following.synthetic_mocap import MocapConfig, MocapModel

_DRIVES = ("offset", "cmd_vel")
_DEFAULT_NOISE_M = 0.0005  # m, marker noise of the default motion capture (the twin node's default)
_RATE_RTOL = 1e-6  # relative tolerance between the capture rate and 1 / dt


class MocapPlant(Protocol):
    """What the loop needs from a simulated robot (the twin's method names)."""

    @property
    def time(self) -> float:
        """Simulated time, s."""

    def set_targets(self, targets: np.ndarray) -> None:
        """Joint position targets, rad."""

    def advance(self, duration: float) -> None:
        """Advance by ``duration`` s."""

    def head_markers(self) -> np.ndarray:
        """True world positions of the head markers, m, ``(K, 3)``."""


@dataclass
class LoopResult:
    """Outcome of one closed-loop run.

    Attributes:
        status: Final follower status (``goal_reached`` on success).
        time: Simulated time until the end, s.
        head: True planar poses ``(x, y, heading)`` of the tracked point every period (noiseless
            marker fit; the head itself unless ``reference_offset``), ``(T, 3)``.
        cross_track: True distance from the tracked point to the path polyline every period, m.
        mocap: Filter counters (accepted, rejected_nan, rejected_jump, rejected_fit).
        branch: Index of the branch the follower was on at the end (``path[branch] -> path[branch + 1]``).
        pose: Last measured (filtered) pose of the tracked point ``(x m, y m, heading rad)``, or None.
        reason: Why the follower stopped short of the goal (stuck or stalled; '' otherwise).
    """

    status: FollowerStatus
    time: float
    head: np.ndarray
    cross_track: np.ndarray
    mocap: dict[str, int] = field(default_factory=dict)
    branch: int = 0
    pose: tuple[float, float, float] | None = None
    reason: str = ""


def polyline_distance(p: np.ndarray, path: np.ndarray) -> float:
    """Distance from a point to a polyline, m."""
    a, b = path[:-1], path[1:]
    d = b - a
    den = np.maximum((d * d).sum(axis=1), 1e-18)
    t = np.clip(((p - a) * d).sum(axis=1) / den, 0.0, 1.0)
    return float(np.linalg.norm(a + t[:, None] * d - p, axis=1).min())


def reference_pose(pose: tuple[float, float, float], yaw_offset: float,
                   reference_offset: float) -> tuple[float, float, float]:
    """The tracked point's pose from the head pose.

    Args:
        pose: Head pose ``(x m, y m, heading rad)`` with ``heading = yaw + yaw_offset`` (the
            robot's forward direction; ``yaw`` is the head frame's x axis).
        yaw_offset: rad.
        reference_offset: Distance of the tracked point from the head frame's origin along its
            x axis, m.

    Returns:
        ``(x + r cos(yaw), y + r sin(yaw), heading)``.
    """
    x, y, heading = pose
    yaw = heading - yaw_offset
    return x + reference_offset * math.cos(yaw), y + reference_offset * math.sin(yaw), heading


def run_follow_loop(plant: MocapPlant, gait: Any, path: np.ndarray, template: np.ndarray, *, drive: str = "offset",
                    omega: float = 3.0, yaw_offset: float = 0.0, reference_offset: float = 0.0,
                    dt: float = 0.05, time_limit: float = 120.0,
                    follower: FollowerConfig | None = None, mocap_filter: HeadPoseFilterConfig | None = None,
                    mocap: MocapModel | None = None) -> LoopResult:
    """Follow ``path`` with ``plant`` in closed loop through synthetic motion capture (001 Sec. IV, VI).

    Args:
        plant: The simulated robot.
        gait: A :class:`~snake_core.gait.base.Gait` for the plant's joints (``step(dt, command)``;
            with ``drive="cmd_vel"`` also ``mapping.to_command(v, omega)``).
        path: Waypoints, m, ``(K, 2)``.
        template: Head markers in the head frame, m, ``(K, 3)`` (the plant's marker order).
        drive: ``offset`` (serpenoid: command ``(omega, head_offset)``) or ``cmd_vel``.
        omega: Wave frequency for ``drive="offset"``, rad/s.
        yaw_offset: Added to the fitted yaw to get the head's forward direction, rad.
        reference_offset: The point that follows the path lies this far along the head frame's x
            axis from its origin, m (see :func:`reference_pose`).
        dt: Control period, s.
        time_limit: s.
        follower: Follower settings.
        mocap_filter: Pose filter settings.
        mocap: The motion capture, captured once per period (its ``rate_hz`` must be ``1 / dt``);
            its latency delays the samples the filter sees. Default: 0.5 mm noise per
            coordinate, nothing else, seed 0.

    Returns:
        The result.

    Raises:
        SnakeCoreError: Unknown ``drive``, or a capture rate other than ``1 / dt``.
    """
    if drive not in _DRIVES:
        raise SnakeCoreError(f"drive: must be one of {_DRIVES}, got {drive!r}")
    path = np.asarray(path, dtype=float)
    if mocap is None:
        mocap = MocapModel(MocapConfig(position_noise_m=_DEFAULT_NOISE_M, rate_hz=1.0 / dt), 0)
    elif not math.isclose(mocap.config.rate_hz * dt, 1.0, rel_tol=_RATE_RTOL):
        raise SnakeCoreError(f"mocap: rate_hz must be 1 / dt = {1.0 / dt:g} Hz (one capture per control "
                             f"period), got {mocap.config.rate_hz:g}")
    fol = PathFollower(follower)
    fol.set_path(path)
    filt = HeadPoseFilter(mocap_filter)
    t0 = plant.time
    heads, cross = [], []
    status = FollowerStatus.FOLLOWING
    branch = 0
    ref: tuple[float, float, float] | None = None
    while plant.time - t0 < time_limit:
        t = plant.time
        truth = plant.head_markers()
        fit = fit_markers(template, truth)
        hx, hy, hyaw = fit.planar()
        x, y, yaw = reference_pose((hx, hy, hyaw + yaw_offset), yaw_offset, reference_offset)
        heads.append((x, y, yaw))
        cross.append(polyline_distance(np.array([x, y]), path))
        qx, qy, qz, qw = fit.rotation.as_quat()
        mocap.capture(t, fit.translation, np.array([qw, qx, qy, qz]), truth)
        for sample in mocap.release(t):  # stamped on arrival, as the twin node stamps (vrpn_mocap's default)
            filt.offer_markers(sample.release_time, template, sample.markers, yaw_offset)
        pose = filt.current(t)
        ref = None if pose is None else reference_pose(pose, yaw_offset, reference_offset)
        out = fol.update(t, ref)
        status, branch = out.status, out.branch
        if status in (FollowerStatus.GOAL_REACHED, FollowerStatus.STUCK, FollowerStatus.STALLED):
            break
        moving = status is FollowerStatus.FOLLOWING
        if drive == "offset":
            command: tuple[float, ...] = (omega if moving else 0.0, out.head_offset)
        else:
            command = tuple(gait.mapping.to_command(out.linear, out.angular))
        plant.set_targets(np.asarray(gait.step(dt, command), dtype=float))
        plant.advance(dt)
    counters = {"accepted": filt.accepted, "rejected_nan": filt.rejected_nan, "rejected_jump": filt.rejected_jump,
                "rejected_fit": filt.rejected_fit}
    return LoopResult(status=status, time=plant.time - t0, head=np.array(heads), cross_track=np.array(cross),
                      mocap=counters, branch=branch, pose=ref, reason=fol.stop_reason)


@dataclass
class ReplanResult:
    """Outcome of :func:`run_with_replanning`.

    Attributes:
        status: Final follower status (``goal_reached`` on success).
        time: Simulated time until the end, s.
        legs: One :class:`LoopResult` per plan followed.
        paths: The plans followed, m.
        blocked: Branches left out after the robot got stuck on them, m.
        error: Why the last replan failed ('' if it did not).
    """

    status: FollowerStatus
    time: float
    legs: list[LoopResult]
    paths: list[np.ndarray]
    blocked: list[tuple[np.ndarray, np.ndarray]]
    error: str = ""

    @property
    def head(self) -> np.ndarray:
        """True track of the tracked point over all legs, ``(T, 3)``."""
        return np.concatenate([leg.head for leg in self.legs])

    @property
    def cross_track(self) -> np.ndarray:
        """True distance to the plan being followed, every period, m."""
        return np.concatenate([leg.cross_track for leg in self.legs])


def run_with_replanning(plant: MocapPlant, gait: Any, plan: Any, start: np.ndarray, template: np.ndarray, *,
                        max_replans: int = 3, time_limit: float = 120.0, **loop: Any) -> ReplanResult:
    """Follow plans, replanning without the branch whenever the robot gets stuck (001 Fig. 1.5).

    The paper's flow chart: when the snake's speed stays below the threshold on a branch (stuck),
    or it makes no progress along the path (stalled), the branch is marked impassable and a new
    path is searched from where the snake is.

    Args:
        plant: The simulated robot.
        gait: Its gait (see :func:`run_follow_loop`).
        plan: ``plan(start, blocked) -> (K, 2)`` waypoints; raises
            :class:`~snake_core.errors.SnakeCoreError` when there is no path.
        start: Where the first plan starts, m.
        template: Head markers in the head frame, m.
        max_replans: Largest number of replans after the first plan.
        time_limit: Total simulated time, s.
        **loop: Further keyword arguments of :func:`run_follow_loop` (shared by all legs; give
            ``mocap`` so one motion capture runs on through the legs instead of restarting).

    Returns:
        The result; ``status`` is ``stuck`` or ``stalled`` if the robot stopped short with no
        replans left or no new plan (``error`` says why).
    """
    blocked: list[tuple[np.ndarray, np.ndarray]] = []
    path = np.asarray(plan(np.asarray(start, dtype=float), blocked), dtype=float)
    legs: list[LoopResult] = []
    paths = [path]
    t0 = plant.time
    while True:
        res = run_follow_loop(plant, gait, path, template, time_limit=time_limit - (plant.time - t0), **loop)
        legs.append(res)
        if res.status not in (FollowerStatus.STUCK, FollowerStatus.STALLED) or len(legs) > max_replans \
                or res.pose is None:
            return ReplanResult(res.status, plant.time - t0, legs, paths, blocked)
        blocked.append((path[res.branch].copy(), path[res.branch + 1].copy()))
        try:
            path = np.asarray(plan(np.array(res.pose[:2]), blocked), dtype=float)
        except SnakeCoreError as err:
            return ReplanResult(res.status, plant.time - t0, legs, paths, blocked, error=str(err))
        paths.append(path)
