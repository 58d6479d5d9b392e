"""Line-of-sight path following with the head-angle PD law (001 Sec. IV, Eq. 11; flow chart Fig. 1.5).

The head looks at a target on the current branch of the plan: the intersection of a
circle of radius R around the head with the branch, the one farthest along the path.
``Delta-theta`` is the angle from the head vector to the line head -> target; the head
command is ``u = P Delta-theta + D d(Delta-theta)/dt`` with a first-order filtered
derivative (Eq. 11). The command goes out two ways:

- serpenoid gait: a head-angle offset (rad) that the gait makes travel along the body;
- T-Snake: ``cmd_vel`` of its reduced differential drive, angular rate ``u`` (the same gains
  read per second) and a linear speed scheduled down as ``|Delta-theta|`` grows.

Branches switch when the head comes within the switch radius of the branch's end vertex
or passes it; the goal counts as reached within a tolerance; if the head's speed stays
under a threshold for a time window the follower reports ``stuck`` with the branch it was
on, so the caller can backtrack and replan without it, as the paper's flow chart does.
A robot that moves but gets no nearer the goal (orbiting a peg, pushing against one while
the head swings) is caught by :class:`StallDetector`: no progress along the path for a time
or over a travelled distance is ``stalled``, handled like ``stuck`` (stop, replan).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from snake_core.angles import wrap_to_pi
from snake_core.errors import SnakeCoreError

# Joint-sign convention (URDF/twin, viscous model): a positive lateral angle turns the tail-side
# link counter-clockwise, i.e. the head clockwise relative to the body. A left turn (Delta-theta > 0)
# therefore needs a negative head offset.
_OFFSET_SIGN = -1.0


class FollowerError(SnakeCoreError, ValueError):
    """Bad follower settings or path (the message names the field)."""


class FollowerStatus(StrEnum):
    """What the follower is doing."""

    IDLE = "idle"
    FOLLOWING = "following"
    GOAL_REACHED = "goal_reached"
    STUCK = "stuck"
    STALLED = "stalled"
    NO_POSE = "no_pose"


_STOPPED = (FollowerStatus.IDLE, FollowerStatus.GOAL_REACHED, FollowerStatus.STUCK, FollowerStatus.STALLED)


@dataclass(frozen=True)
class FollowerConfig:
    """Follower settings.

    Attributes:
        lookahead: Line-of-sight circle radius R, m.
        kp: P of Eq. (11), rad of head offset per rad of Delta-theta (per second for cmd_vel).
        kd: D of Eq. (11), s (rad per rad/s).
        derivative_tau: Time constant of the derivative's low-pass filter, s.
        angle_tau: Time constant of a low-pass filter on Delta-theta itself, s (0: off). The
            head of an undulating snake swings with the gait; filtering over about half a
            wave period keeps the P term from chasing that swing.
        switch_radius: Distance to a branch's end vertex at which the next branch is taken, m.
        goal_tolerance: Distance to the goal that counts as arrived, m.
        stuck_speed: Head speed below which the robot counts as not moving, m/s.
        stuck_time: Time the speed must stay below ``stuck_speed`` to report stuck, s.
        stall_time: Time without ``stall_progress`` of progress along the path that reports
            stalled, s.
        stall_progress: Progress along the path that counts, m (the path coordinate of the
            tracked point's projection must beat its best so far by this much).
        stall_distance: Distance the tracked point may travel without that progress before it
            reports stalled (orbiting), m (0: off).
        offset_max: Largest |head offset| for the serpenoid gait, rad.
        max_linear: Largest T-Snake linear speed, m/s.
        max_angular: Largest T-Snake yaw rate, rad/s.
        slowdown_angle: |Delta-theta| at which the T-Snake's linear speed reaches zero, rad.
    """

    lookahead: float = 0.4
    kp: float = 0.6
    kd: float = 0.1
    derivative_tau: float = 0.3
    angle_tau: float = 0.5
    switch_radius: float = 0.2
    goal_tolerance: float = 0.15
    stuck_speed: float = 0.01
    stuck_time: float = 6.0
    stall_time: float = 30.0
    stall_progress: float = 0.05
    stall_distance: float = 1.5
    offset_max: float = 0.8
    max_linear: float = 0.15
    max_angular: float = 0.6
    slowdown_angle: float = 1.2

    def __post_init__(self) -> None:
        for name in ("lookahead", "switch_radius", "goal_tolerance", "stuck_time", "stall_time", "stall_progress",
                     "offset_max", "max_linear", "max_angular", "slowdown_angle"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise FollowerError(f"{name}: must be a positive number, got {v!r}")
        for name in ("kp", "kd", "derivative_tau", "angle_tau", "stuck_speed", "stall_distance"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise FollowerError(f"{name}: must be a number >= 0, got {v!r}")


@dataclass(frozen=True)
class FollowerOutput:
    """One update's result.

    Attributes:
        status: Follower status.
        delta_theta: Angle from the head vector to the line of sight, rad (CCW positive).
        command: ``u`` of Eq. (11), rad.
        head_offset: Head-angle offset for the serpenoid gait, rad (0 unless following).
        linear: T-Snake forward speed, m/s (0 unless following).
        angular: T-Snake yaw rate, rad/s (0 unless following).
        target: Line-of-sight target, m (NaN when none).
        branch: Index of the current branch (segment ``branch`` -> ``branch + 1`` of the path).
        cross_track: Distance from the head to the current branch, m (NaN when none).
    """

    status: FollowerStatus
    delta_theta: float = 0.0
    command: float = 0.0
    head_offset: float = 0.0
    linear: float = 0.0
    angular: float = 0.0
    target: tuple[float, float] = (math.nan, math.nan)
    branch: int = 0
    cross_track: float = math.nan


def line_of_sight(head: np.ndarray, a: np.ndarray, b: np.ndarray, radius: float) -> np.ndarray | None:
    """Farthest-along intersection of the circle (head, radius) with segment a -> b (001 Sec. IV).

    Args:
        head: Head position, m.
        a: Branch start, m.
        b: Branch end, m.
        radius: R, m.

    Returns:
        The intersection with the largest segment parameter, or None if the circle misses the segment.
    """
    d = b - a
    f = a - head
    qa = float(d @ d)
    if qa == 0.0:
        return None
    qb = 2.0 * float(f @ d)
    qc = float(f @ f) - radius * radius
    disc = qb * qb - 4.0 * qa * qc
    if disc < 0.0:
        return None
    s = (-qb + math.sqrt(disc)) / (2.0 * qa)
    if 0.0 <= s <= 1.0:
        return a + s * d
    return None


def _project(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Segment parameter of the projection of ``p`` (unclipped) and distance to the segment, m."""
    d = b - a
    den = float(d @ d)
    s = float((p - a) @ d) / den if den > 0 else 0.0
    q = a + min(max(s, 0.0), 1.0) * d
    return s, float(np.linalg.norm(p - q))


class StallDetector:
    """No progress toward the goal for a time or over a travelled distance.

    Progress is the path coordinate ``sigma`` (arc length from the start of the path to the
    tracked point's projection, m, :func:`path_coordinate`). The detector keeps the best
    ``sigma`` so far; a new best counts only when it beats the old one by ``progress``, and
    it restarts both the clock and the travelled distance. Stalled when ``time`` has passed
    since the last counted progress, or when the point has travelled ``distance`` since then.
    Travel is counted in steps of at least ``progress``: the distance from the last counted
    point is added once it reaches ``progress`` (``L = sum |p_k - p_{k-1}|`` over those points),
    so that measurement noise and a swing smaller than a step add nothing.

    Args:
        time: s.
        progress: m.
        distance: m (0: the distance test is off).
    """

    def __init__(self, time: float, progress: float, distance: float) -> None:
        self.time, self.progress, self.distance = time, progress, distance
        self.reset()

    def reset(self) -> None:
        """Forget the history: the next update starts a new window."""
        self.best: float | None = None
        self.t_best = 0.0
        self.travelled = 0.0
        self._last: tuple[float, float] | None = None
        self.reason = ""

    def update(self, t: float, position: tuple[float, float] | np.ndarray, sigma: float) -> bool:
        """Add a sample; True once stalled (``reason`` then says which test fired).

        Args:
            t: Time, s.
            position: Tracked point, m.
            sigma: Its path coordinate, m.
        """
        x, y = float(position[0]), float(position[1])
        if self.best is None or self._last is None:
            self.best, self.t_best, self.travelled, self._last = sigma, t, 0.0, (x, y)
            return False
        step = math.hypot(x - self._last[0], y - self._last[1])
        if step >= self.progress:
            self.travelled += step
            self._last = (x, y)
        if sigma >= self.best + self.progress:
            self.best, self.t_best, self.travelled, self._last = sigma, t, 0.0, (x, y)
            return False
        if t - self.t_best >= self.time:
            self.reason = f"no progress of {self.progress:g} m along the path in {t - self.t_best:.1f} s"
            return True
        if self.distance > 0 and self.travelled >= self.distance:
            self.reason = (f"no progress of {self.progress:g} m along the path over {self.travelled:.2f} m "
                           "travelled")
            return True
        return False


def path_coordinate(path: np.ndarray, branch: int, point: np.ndarray) -> float:
    """Arc length from the path's start to ``point``'s projection on branch ``branch``, m.

    ``sigma = sum_{i < branch} |p_{i+1} - p_i| + clip(s, 0, 1) |p_{branch+1} - p_branch|`` with
    ``s`` the projection parameter on the branch.

    Args:
        path: Waypoints, m, ``(K, 2)``.
        branch: Index of the branch (segment ``branch`` -> ``branch + 1``).
        point: Tracked point, m.

    Returns:
        sigma, m.
    """
    lengths = np.linalg.norm(np.diff(path, axis=0), axis=1)
    s, _ = _project(point, path[branch], path[branch + 1])
    return float(lengths[:branch].sum() + min(max(s, 0.0), 1.0) * lengths[branch])


class PathFollower:
    """Head-angle PD follower of a polyline path (001 Eq. 11).

    Args:
        config: Settings.
    """

    def __init__(self, config: FollowerConfig | None = None) -> None:
        self.config = config or FollowerConfig()
        self.path = np.zeros((0, 2))
        self.branch = 0
        self.status = FollowerStatus.IDLE
        self._reset_filter()
        self._history: deque[tuple[float, float, float]] = deque()
        self.stall = StallDetector(self.config.stall_time, self.config.stall_progress, self.config.stall_distance)

    def _reset_filter(self) -> None:
        self._prev_dtheta: float | None = None
        self._prev_t: float | None = None
        self._dfilt = 0.0
        self._afilt: float | None = None

    def set_path(self, points: np.ndarray) -> None:
        """Start following a new path (``(K, 2)`` waypoints, m, K >= 2)."""
        pts = np.asarray(points, dtype=float)
        if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 2 or not np.isfinite(pts).all():
            raise FollowerError(f"path: need at least two finite (x, y) waypoints, got shape {pts.shape}")
        keep = np.concatenate([[True], np.linalg.norm(np.diff(pts, axis=0), axis=1) > 1e-9])
        self.path = pts[keep] if keep.sum() >= 2 else pts[[0, -1]]
        self.branch = 0
        self.status = FollowerStatus.FOLLOWING
        self._reset_filter()
        self._history.clear()
        self._new_stall_detector()

    def _new_stall_detector(self) -> None:
        cfg = self.config
        self.stall = StallDetector(cfg.stall_time, cfg.stall_progress, cfg.stall_distance)

    @property
    def stop_reason(self) -> str:
        """Why the follower stopped short of the goal ('' unless stuck or stalled)."""
        if self.status is FollowerStatus.STALLED:
            return self.stall.reason
        if self.status is FollowerStatus.STUCK:
            cfg = self.config
            return f"speed under {cfg.stuck_speed:g} m/s for {cfg.stuck_time:g} s"
        return ""

    @property
    def blocked_branch(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The branch the robot got stuck or stalled on (its two vertices, m)."""
        if self.status not in (FollowerStatus.STUCK, FollowerStatus.STALLED):
            return None
        return self.path[self.branch].copy(), self.path[self.branch + 1].copy()

    def _advance_branch(self, head: np.ndarray) -> None:
        cfg = self.config
        last = len(self.path) - 2
        while self.branch < last:
            a, b = self.path[self.branch], self.path[self.branch + 1]
            s, _ = _project(head, a, b)
            if float(np.linalg.norm(head - b)) < cfg.switch_radius or s > 1.0:
                self.branch += 1
                self._reset_filter()
            else:
                break

    def target(self, head: np.ndarray) -> np.ndarray:
        """Line-of-sight target on the current branch for a head position, m."""
        a, b = self.path[self.branch], self.path[self.branch + 1]
        if float(np.linalg.norm(b - head)) <= self.config.lookahead:
            return b.copy()
        hit = line_of_sight(head, a, b, self.config.lookahead)
        if hit is not None:
            return hit
        s, _ = _project(head, a, b)
        return a + min(max(s, 0.0), 1.0) * (b - a)

    def _stuck(self, t: float, head: np.ndarray) -> bool:
        cfg = self.config
        self._history.append((t, float(head[0]), float(head[1])))
        while len(self._history) > 2 and t - self._history[1][0] >= cfg.stuck_time:
            self._history.popleft()
        t0, x0, y0 = self._history[0]
        span = t - t0
        if span < cfg.stuck_time:
            return False
        return math.hypot(head[0] - x0, head[1] - y0) < cfg.stuck_speed * span

    def update(self, t: float, pose: tuple[float, float, float] | np.ndarray | None) -> FollowerOutput:
        """One control step.

        Args:
            t: Time, s (monotonic).
            pose: Head pose ``(x m, y m, yaw rad)``, or None when no valid pose is available
                (motion-capture dropout): the output is then a stop.

        Returns:
            Status and commands.
        """
        if self.status in _STOPPED:
            return FollowerOutput(self.status, branch=self.branch)
        if pose is None:
            self._reset_filter()
            self.stall.reset()  # a dropout is not a stall: the window starts again with the pose
            return FollowerOutput(FollowerStatus.NO_POSE, branch=self.branch)
        cfg = self.config
        head = np.array([pose[0], pose[1]], dtype=float)
        yaw = float(pose[2])
        self._advance_branch(head)
        goal = self.path[-1]
        a, b = self.path[self.branch], self.path[self.branch + 1]
        _, cross = _project(head, a, b)
        if self.branch == len(self.path) - 2 and float(np.linalg.norm(head - goal)) <= cfg.goal_tolerance:
            self.status = FollowerStatus.GOAL_REACHED
            return FollowerOutput(self.status, branch=self.branch, cross_track=cross)
        if self._stuck(t, head):
            self.status = FollowerStatus.STUCK
            return FollowerOutput(self.status, branch=self.branch, cross_track=cross)
        if (self.stall.time, self.stall.progress, self.stall.distance) != (cfg.stall_time, cfg.stall_progress,
                                                                          cfg.stall_distance):
            self._new_stall_detector()  # settings changed at run time
        if self.stall.update(t, head, path_coordinate(self.path, self.branch, head)):
            self.status = FollowerStatus.STALLED
            return FollowerOutput(self.status, branch=self.branch, cross_track=cross)
        tgt = self.target(head)
        dtheta = wrap_to_pi(math.atan2(tgt[1] - head[1], tgt[0] - head[0]) - yaw)
        if cfg.angle_tau > 0:
            if self._afilt is None or self._prev_t is None or t <= self._prev_t:
                self._afilt = dtheta
            else:
                dt = t - self._prev_t
                self._afilt = wrap_to_pi(self._afilt + dt / (cfg.angle_tau + dt) * wrap_to_pi(dtheta - self._afilt))
            dtheta = self._afilt
        if self._prev_dtheta is not None and self._prev_t is not None and t > self._prev_t:
            dt = t - self._prev_t
            raw = wrap_to_pi(dtheta - self._prev_dtheta) / dt
            self._dfilt += dt / (cfg.derivative_tau + dt) * (raw - self._dfilt)
        self._prev_dtheta, self._prev_t = dtheta, t
        u = cfg.kp * dtheta + cfg.kd * self._dfilt
        offset = float(np.clip(_OFFSET_SIGN * u, -cfg.offset_max, cfg.offset_max))
        angular = float(np.clip(u, -cfg.max_angular, cfg.max_angular))
        linear = cfg.max_linear * max(0.0, 1.0 - abs(dtheta) / cfg.slowdown_angle)
        return FollowerOutput(FollowerStatus.FOLLOWING, delta_theta=dtheta, command=u, head_offset=offset,
                              linear=linear, angular=angular, target=(float(tgt[0]), float(tgt[1])),
                              branch=self.branch, cross_track=cross)
