"""The head-angle PD follower closing the loop on the viscous model (001 Sec. IV-V, kinematic simulator).

Used by the depth-first planner to test branches (:class:`ViscousBranchTester`) and on its
own to follow a whole plan (:func:`follow_path`).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from snake_core.following.follower import FollowerConfig, FollowerStatus, PathFollower
from snake_core.following.viscous.model import ViscousParams, ViscousSnake
from snake_core.following.viscous.serpenoid_run import equal_link_robot
from snake_core.gait.serpenoid import SerpenoidGait
from snake_core.robot import RobotModel

_DT_S = 0.05  # s, simulation and control step (the paper's simulation step)


@dataclass
class SnakeState:
    """Everything that evolves in a closed-loop run: the model, the gait and the clock."""

    snake: ViscousSnake
    gait: SerpenoidGait

    def copy(self) -> SnakeState:
        """A deep copy (for backtracking)."""
        return SnakeState(copy.deepcopy(self.snake), copy.deepcopy(self.gait))


@dataclass
class FollowResult:
    """Outcome of following a path in the model.

    Attributes:
        status: Final follower status.
        time: Simulated time, s.
        head: Head poses ``(x, y, yaw)`` every step, ``(T, 3)``.
        com: Centre of mass every step, m, ``(T, 2)``.
        cross_track: Distance from the head to the current branch every step, m.
        mean_speed: Net displacement of the centre of mass over the time, m/s.
    """

    status: FollowerStatus
    time: float
    head: np.ndarray
    com: np.ndarray
    cross_track: np.ndarray
    mean_speed: float


class ViscousClosedLoop:
    """Serpenoid snake in the viscous model, steered by :class:`PathFollower`.

    Args:
        n_links: Links N.
        pegs: Peg centres, m.
        params: Model parameters (default: N links of the robot's mean link length).
        follower: Follower settings.
        robot: Robot description for the gait (default: :func:`equal_link_robot`).
        dt: Step, s.
    """

    def __init__(self, n_links: int = 9, pegs: np.ndarray | None = None, params: ViscousParams | None = None,
                 follower: FollowerConfig | None = None, robot: RobotModel | None = None,
                 dt: float = _DT_S) -> None:
        self.robot = robot or equal_link_robot(n_links)
        self.params = params or ViscousParams(n_links=n_links, link_length=float(np.mean(self.robot.link_lengths)))
        self.pegs = np.zeros((0, 2)) if pegs is None else np.asarray(pegs, dtype=float).reshape(-1, 2)
        self.follower_config = follower or FollowerConfig()
        self.omega = float(self.robot.gait("serpenoid")["temporal_frequency"])
        self.dt = dt

    def initial_state(self, start: np.ndarray, heading: float) -> SnakeState:
        """The snake with its head at ``start`` (m) pointing along ``heading`` (rad), body behind it."""
        gait = SerpenoidGait(self.robot)
        alpha0 = gait.step(0.0, (0.0, 0.0))
        snake = ViscousSnake(self.params, self.pegs, alpha0, (float(start[0]), float(start[1]), heading))
        return SnakeState(snake, gait)

    def run(self, state: SnakeState, path: np.ndarray, time_limit: float,
            stop_at_end: bool = True) -> tuple[FollowResult, SnakeState]:
        """Follow ``path`` from ``state`` until the goal, stuck or ``time_limit`` s.

        Args:
            state: Start state (not modified).
            path: Waypoints, m, ``(K, 2)``.
            time_limit: s.
            stop_at_end: If False, a branch test: stop as soon as the head is within the
                switch radius of the last waypoint.

        Returns:
            The result and the final state.
        """
        st = state.copy()
        fol = PathFollower(self.follower_config)
        fol.set_path(path)
        end = np.asarray(path[-1], dtype=float)
        steps = max(1, math.ceil(time_limit / self.dt))
        heads, coms, cross = [st.snake.pose.copy()], [st.snake.com()], []
        status = FollowerStatus.FOLLOWING
        t = 0.0
        for _ in range(steps):
            pose = st.snake.pose
            out = fol.update(t, pose)
            status = out.status
            if status is not FollowerStatus.FOLLOWING:
                break
            if not stop_at_end and math.hypot(pose[0] - end[0], pose[1] - end[1]) < self.follower_config.switch_radius:
                status = FollowerStatus.GOAL_REACHED
                break
            cross.append(out.cross_track)
            alpha = st.gait.step(self.dt, (self.omega, out.head_offset))
            st.snake.step(alpha, self.dt)
            t += self.dt
            heads.append(st.snake.pose.copy())
            coms.append(st.snake.com())
        com = np.array(coms)
        speed = float(np.linalg.norm(com[-1] - com[0]) / t) if t > 0 else 0.0
        return FollowResult(status=status, time=t, head=np.array(heads), com=com, cross_track=np.array(cross),
                            mean_speed=speed), st


def follow_path(path: np.ndarray, pegs: np.ndarray | None = None, n_links: int = 9, time_limit: float = 120.0,
                follower: FollowerConfig | None = None, params: ViscousParams | None = None) -> FollowResult:
    """Follow a whole plan in the viscous model, head starting at its first waypoint facing the second."""
    loop = ViscousClosedLoop(n_links, pegs, params, follower)
    path = np.asarray(path, dtype=float)
    d = path[1] - path[0]
    state = loop.initial_state(path[0], math.atan2(d[1], d[0]))
    result, _ = loop.run(state, path, time_limit)
    return result


class ViscousBranchTester:
    """Tests one branch of a candidate path in the viscous model (001 Sec. V).

    A branch passes when the follower reaches its end vertex within the time limit and the
    centre of mass's speed "does not fall below a certain limit at any particular point"
    (001 Sec. III): its displacement over every window of one wave period, divided by the
    period, is at least ``min_speed`` (over the whole branch if it is shorter than a period).

    Args:
        loop: The closed-loop model.
        min_speed: Speed threshold, m/s.
        time_factor: Time limit per branch = ``time_factor * length / min_speed`` s.
    """

    def __init__(self, loop: ViscousClosedLoop, min_speed: float = 0.03, time_factor: float = 1.5) -> None:
        self.loop, self.min_speed, self.time_factor = loop, min_speed, time_factor
        self.window_steps = max(1, round(2.0 * math.pi / abs(loop.omega) / loop.dt)) if loop.omega else 1
        self.simulated_s = 0.0

    def slowest_speed(self, com: np.ndarray) -> float:
        """Smallest centre-of-mass speed over one-period windows of a run, m/s."""
        n = len(com) - 1
        if n <= 0:
            return 0.0
        w = min(self.window_steps, n)
        disp = np.linalg.norm(com[w:] - com[:-w], axis=1)
        return float(disp.min() / (w * self.loop.dt))

    def initial_state(self, start: np.ndarray, towards: np.ndarray) -> SnakeState:
        """Snake at ``start`` facing ``towards``."""
        d = np.asarray(towards, dtype=float) - np.asarray(start, dtype=float)
        return self.loop.initial_state(start, math.atan2(d[1], d[0]))

    def try_branch(self, state: SnakeState, a: np.ndarray, b: np.ndarray,
                   last: bool) -> tuple[bool, SnakeState, float]:
        """Simulate following a -> b from ``state``.

        Returns:
            ``(passed, state at the end, slowest one-period speed m/s)``; a branch whose end is
            already within the switch radius of the head passes untested (speed NaN).
        """
        pose = state.snake.pose
        if not last and math.hypot(pose[0] - b[0], pose[1] - b[1]) < self.loop.follower_config.switch_radius:
            return True, state, math.nan  # the head is already at the branch's end: nothing to test
        length = float(np.linalg.norm(np.asarray(b) - np.asarray(a)))
        limit = self.time_factor * max(length, self.loop.follower_config.lookahead) / self.min_speed
        res, st = self.loop.run(state, np.array([a, b]), limit, stop_at_end=last)
        self.simulated_s += res.time
        speed = self.slowest_speed(res.com)
        ok = res.status is FollowerStatus.GOAL_REACHED and speed >= self.min_speed
        return ok, st, speed


class ViscousPlant:
    """The viscous model behind the :class:`~snake_core.following.loop.MocapPlant` interface.

    Joint targets are reached exactly (the model is kinematic): the shape moves to the
    target over the next :meth:`advance`. Head markers are the template carried by the head
    link (x forward, so the loop needs no yaw offset).

    Args:
        snake: The model (its current shape and pose are the start).
        template: Head markers in the head frame, m, ``(K, 3)``.
    """

    def __init__(self, snake: ViscousSnake, template: np.ndarray) -> None:
        self.snake = snake
        self.template = np.asarray(template, dtype=float)
        self._target = snake.alpha.copy()

    @property
    def time(self) -> float:
        """Simulated time, s."""
        return self.snake.time

    def set_targets(self, targets: np.ndarray) -> None:
        """Joint angles to reach over the next advance, rad."""
        self._target = np.asarray(targets, dtype=float).copy()

    def advance(self, duration: float) -> None:
        """Move the shape to the targets over ``duration`` s."""
        self.snake.step(self._target, duration)

    def head_markers(self) -> np.ndarray:
        """World marker positions, m."""
        x, y, yaw = self.snake.pose
        c, s = math.cos(yaw), math.sin(yaw)
        t = self.template
        return np.column_stack([x + c * t[:, 0] - s * t[:, 1], y + s * t[:, 0] + c * t[:, 1], t[:, 2]])
