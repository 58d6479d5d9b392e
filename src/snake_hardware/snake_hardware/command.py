"""Pure logic of the bridge: command filtering and clamping, goal shaping, command timeout, backoff, rate.

No ROS and no I/O here, so every rule the bridge enforces is testable on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from snake_core.robot import JointSpec

TIMEOUT_REACTIONS = ("hold", "torque_off")

ABSURD_TARGET_RAD = 1.0e6
"""Largest accepted joint target magnitude, rad; anything beyond is dropped, not clamped.

Limited joints are clamped to their YAML limits, so this bound only matters for
continuous joints (T-Snake twist), whose targets grow while the gait rolls one way:
1e6 rad is about 160 000 turns, i.e. about 58 hours of rolling at the YAML's 4.8 rad/s,
far beyond the servo's +-256 extended-position turns (which the backend handles) and
far below where a float64 angle loses its tick resolution (~1e11 rad). A value past it
is a broken publisher, never a pose.
"""


@dataclass
class FilteredCommand:
    """Result of :meth:`JointTargetFilter.filter`.

    Attributes:
        targets: Accepted targets by joint name, rad, clamped to the joint limits.
        unknown: Names that are not joints of the robot (dropped).
        not_finite: Joints whose target was NaN or infinite (dropped).
        absurd: Joints whose target magnitude exceeded :data:`ABSURD_TARGET_RAD` (dropped).
        clamped: Joints whose target was outside the limits (clamped, kept).
    """

    targets: dict[str, float] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    not_finite: list[str] = field(default_factory=list)
    absurd: list[str] = field(default_factory=list)
    clamped: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> bool:
        """True when anything was dropped."""
        return bool(self.unknown or self.not_finite or self.absurd)


class JointTargetFilter:
    """Match commands by joint name, drop NaN, absurd and unknown entries, clamp to the YAML limits.

    The limits are the safety envelope: no publisher can command a joint past them. A
    target whose magnitude exceeds :data:`ABSURD_TARGET_RAD` is dropped for that joint
    only (the other joints of the message are kept).

    Args:
        joints: The robot's joints.
    """

    def __init__(self, joints: Iterable[JointSpec]) -> None:
        """Index the joints by name."""
        self._joints = {j.name: j for j in joints}

    def filter(self, names: Sequence[str], positions: Sequence[float]) -> FilteredCommand:
        """Filter one command; ``names`` and ``positions`` pair up by index.

        Raises:
            ValueError: ``names`` and ``positions`` differ in length.
        """
        if len(names) != len(positions):
            raise ValueError(f"{len(names)} names but {len(positions)} positions")
        out = FilteredCommand()
        for name, value in zip(names, positions, strict=True):
            joint = self._joints.get(name)
            if joint is None:
                out.unknown.append(name)
                continue
            v = float(value)
            if not math.isfinite(v):
                out.not_finite.append(name)
                continue
            if abs(v) > ABSURD_TARGET_RAD:
                out.absurd.append(name)
                continue
            c = joint.clamp(v)
            if c != v:
                out.clamped.append(name)
            out.targets[name] = c
        return out


_EARLY_FRACTION = 1.0 - 1e-9
"""A step less than this fraction of the period after the previous one is early (round-off of
a test clock's sums is not)."""


class GoalShaper:
    """Goals actually sent to the actuators: a bounded approach to the commanded pose.

    Two rules, per joint i, at every cycle of period T (s):

    - Arming ramp. :meth:`start` sets the gap g_i = start_i - c_i between the pose the
      goals start from (the servos' present positions on arming) and the commanded pose
      c. The gap closes at ``arming_speed`` s (rad/s) at most,
      g_i <- g_i - clip(g_i, -s T, s T), and the desired goal is c_i + g_i. With a
      still command the goal moves toward it at s; with a moving command (a gait) it
      follows the command while the gap closes, so arming ends after |g_i| / s seconds
      whatever the gait's speed.
    - Rate limit. goal_i <- goal_i + clip(desired_i - goal_i, -v_i T, v_i T), with v_i the
      joint's YAML ``velocity`` (rad/s): no goal ever differs from the previous one by
      more than v_i T, through arming and after.

    T is the nominal period, so a late cycle moves less, never more. A cycle that comes
    sooner than T after the previous one (given its time) uses the time elapsed instead:
    an executor that queued several timer events behind a slow callback and runs them back
    to back moves the goals no faster than v_i, where a step of v_i T each would.

    Args:
        joints: The robot's joints (names and velocity limits).
        period_s: Cycle period T, s.
        arming_speed: Gap closing speed s, rad/s.

    Raises:
        ValueError: A non-positive period or arming speed.
    """

    def __init__(self, joints: Iterable[JointSpec], period_s: float, arming_speed: float) -> None:
        """No goals until :meth:`start`."""
        self._joints = {j.name: j for j in joints}
        self.configure(period_s, arming_speed)
        self._goals: dict[str, float] = {}
        self._command: dict[str, float] = {}
        self._gaps: dict[str, float] = {}
        self._last_step: float | None = None

    def configure(self, period_s: float, arming_speed: float) -> None:
        """Change the period T, s, and the arming speed s, rad/s."""
        if not (math.isfinite(period_s) and period_s > 0):
            raise ValueError(f"period_s: must be > 0, got {period_s}")
        if not (math.isfinite(arming_speed) and arming_speed > 0):
            raise ValueError(f"arming_speed: must be > 0, got {arming_speed}")
        self.period_s = period_s
        self.arming_speed = arming_speed

    def start(self, start_pose: Mapping[str, float], command: Mapping[str, float]) -> None:
        """Start from ``start_pose`` (rad, every joint) toward ``command`` (rad, any subset).

        Joints the command does not name are commanded to stay at their start pose.
        """
        self._goals = {n: float(start_pose[n]) for n in self._joints}
        self._last_step = None
        self._command = dict(self._goals)
        self._command.update({n: float(v) for n, v in command.items() if n in self._joints})
        self._gaps = {n: self._goals[n] - self._command[n] for n in self._joints}

    def set_command(self, targets: Mapping[str, float]) -> None:
        """New commanded targets, rad (joints not named keep theirs)."""
        for name, value in targets.items():
            if name in self._command:
                self._command[name] = float(value)

    def hold(self) -> None:
        """Freeze: the commanded pose becomes the present goals, no gap left."""
        self._command = dict(self._goals)
        self._gaps = dict.fromkeys(self._goals, 0.0)

    def revert(self, goals: Mapping[str, float]) -> None:
        """Put the named goals back (rad): a goal the actuator could not take is not kept."""
        for name, value in goals.items():
            if name in self._goals:
                self._goals[name] = float(value)

    def step(self, now: float | None = None) -> dict[str, float]:
        """Advance one cycle at ``now``, s (None: a whole period); returns the new goals, rad, by joint name."""
        dt = self.period_s
        if now is not None:
            if self._last_step is not None and now - self._last_step < dt * _EARLY_FRACTION:
                dt = max(now - self._last_step, 0.0)  # early: only the time elapsed since the last step
            self._last_step = now
        closing = self.arming_speed * dt
        for name, joint in self._joints.items():
            gap = self._gaps[name]
            gap -= min(max(gap, -closing), closing)
            self._gaps[name] = gap
            desired = self._command[name] + gap
            prev = self._goals[name]
            limit = joint.velocity * dt
            self._goals[name] = prev + min(max(desired - prev, -limit), limit)
        return dict(self._goals)

    @property
    def started(self) -> bool:
        """True after :meth:`start`."""
        return bool(self._goals)

    @property
    def arming(self) -> bool:
        """True while an arming gap remains on some joint."""
        return any(g != 0.0 for g in self._gaps.values())

    @property
    def goals(self) -> dict[str, float]:
        """The last goals, rad (a copy)."""
        return dict(self._goals)

    @property
    def largest_gap(self) -> float:
        """Largest remaining arming gap, rad."""
        return max((abs(g) for g in self._gaps.values()), default=0.0)


class CommandState(Enum):
    """States of :class:`CommandTimeout`."""

    WAITING = "waiting"      # no valid command yet
    ACTIVE = "active"        # commands arrive in time
    TIMED_OUT = "timed_out"  # the last command is older than the timeout


class CommandTimeout:
    """Command watchdog of the bridge.

    ``on_command`` records a valid command; ``poll`` returns the state at ``now``.
    Entering ``TIMED_OUT`` is reported once by ``poll`` (``just_timed_out``), so the
    caller applies its reaction (``hold``: keep the present positions as targets;
    ``torque_off``) exactly once; a new command makes it ``ACTIVE`` again.

    Args:
        timeout_s: Seconds without a valid command before timing out (<= 0: never).
        reaction: ``hold`` or ``torque_off``.
    """

    def __init__(self, timeout_s: float, reaction: str = "hold") -> None:
        """Start in ``WAITING``."""
        if reaction not in TIMEOUT_REACTIONS:
            raise ValueError(f"reaction: {reaction!r} is not one of {TIMEOUT_REACTIONS}")
        self.timeout_s = timeout_s
        self.reaction = reaction
        self.state = CommandState.WAITING
        self._last: float | None = None
        self.just_timed_out = False

    def on_command(self, now: float) -> None:
        """A valid command arrived at ``now``, s."""
        self._last = now
        self.state = CommandState.ACTIVE

    def poll(self, now: float) -> CommandState:
        """State at ``now``, s; sets ``just_timed_out`` on the transition."""
        self.just_timed_out = False
        if (self.state is CommandState.ACTIVE and self.timeout_s > 0 and self._last is not None
                and now - self._last > self.timeout_s):
            self.state = CommandState.TIMED_OUT
            self.just_timed_out = True
        return self.state

    def reset(self) -> None:
        """Back to ``WAITING`` (after an e-stop or a reconnect)."""
        self.state = CommandState.WAITING
        self._last = None
        self.just_timed_out = False


class Backoff:
    """Exponential backoff for reconnect attempts.

    Args:
        initial_s: First delay, s.
        maximum_s: Largest delay, s.
        factor: Growth per failed attempt.
    """

    def __init__(self, initial_s: float = 0.1, maximum_s: float = 2.0, factor: float = 2.0) -> None:
        """Ready for an immediate first attempt."""
        self.initial_s, self.maximum_s, self.factor = initial_s, maximum_s, factor
        self.delay_s = initial_s
        self._next = -math.inf
        self.attempts = 0

    def due(self, now: float) -> bool:
        """Whether an attempt may be made at ``now``, s."""
        return now >= self._next

    def failed(self, now: float) -> float:
        """Record a failed attempt at ``now``; returns the delay until the next, s."""
        self.attempts += 1
        delay = self.delay_s
        self._next = now + delay
        self.delay_s = min(self.delay_s * self.factor, self.maximum_s)
        return delay

    def reset(self) -> None:
        """After a success: the next loss retries immediately."""
        self.delay_s = self.initial_s
        self._next = -math.inf
        self.attempts = 0


class RateMeter:
    """Achieved loop rate, Hz, as an exponential moving average of cycle periods.

    Args:
        alpha: Weight of the newest period (0..1].
    """

    def __init__(self, alpha: float = 0.1) -> None:
        """No sample yet."""
        self.alpha = alpha
        self._last: float | None = None
        self._period: float | None = None

    def tick(self, now: float) -> None:
        """One cycle started at ``now``, s."""
        if self._last is not None:
            dt = now - self._last
            self._period = dt if self._period is None else (1 - self.alpha) * self._period + self.alpha * dt
        self._last = now

    @property
    def hz(self) -> float:
        """Achieved rate, Hz (0 before two ticks)."""
        return 1.0 / self._period if self._period else 0.0


CLOSING_SPEED = 0.2
"""rad/s toward its goals at which a joint out of its envelope counts as catching up (several
units of an X-series servo's Present Velocity, 0.024 rad/s each)."""


class TrackingEnvelope:
    """Whether each joint stays where the bridge sent it: the tracking envelope.

    The bridge writes rate-limited goals, so a healthy servo is always close to one of
    the goals written in the last ``lag_s`` seconds (its own dynamics: the position
    loop's time constant, the profile, the bus and the read latency, all within
    ``lag_s``). A joint's *gap* is its distance from the band between the smallest and
    the largest goal written in that window (0 inside the band, the latest goal is
    always in it). A joint whose gap exceeds ``tolerance_rad`` for longer than
    ``time_s`` is out of the envelope, whatever moved it: another program writing
    Goal Position, a hand, a stall, a load beyond the servo. A joint that is on its way
    back (its present velocity points at the band at :data:`CLOSING_SPEED` or faster) is
    a servo running behind goals that move faster than its load lets it (a twist joint
    at the velocity limit, a dorsal joint lifting the body): its time out of the band does
    not count while it closes in. One that stands still, or moves away, counts.

    Args:
        names: The joints, in the order of the goal and position vectors.
        tolerance_rad: Largest gap accepted, rad.
        lag_s: How far back written goals count, s.
        time_s: How long a gap beyond the tolerance is accepted, s.
    """

    def __init__(self, names: Sequence[str], tolerance_rad: float, lag_s: float, time_s: float) -> None:
        """No goal written yet: nothing is checked."""
        self.names = tuple(names)
        self.tolerance_rad, self.lag_s, self.time_s = tolerance_rad, lag_s, time_s
        self._index = {n: i for i, n in enumerate(self.names)}
        self._goals: list[tuple[float, np.ndarray]] = []   # (time written, every joint's goal)
        self._outside: dict[str, float] = {}                # joint -> since when beyond the tolerance

    def reset(self) -> None:
        """Forget the goals (torque off, or on again: the servos start where they are)."""
        self._goals.clear()
        self._outside.clear()

    def restart_timers(self) -> None:
        """Time out of the band starts afresh (the goals are kept): after a loop that did not run."""
        self._outside.clear()

    def wrote(self, goals: Mapping[str, float], now: float) -> None:
        """Goals written at ``now``, s (joints not named keep their previous goal)."""
        latest = self._goals[-1][1].copy() if self._goals else np.full(len(self.names), np.nan)
        for name, goal in goals.items():
            i = self._index.get(name)
            if i is not None:
                latest[i] = float(goal)
        self._goals.append((now, latest))
        cut = now - self.lag_s
        while len(self._goals) > 1 and self._goals[1][0] <= cut:   # keep the newest goal older than the window
            self._goals.pop(0)

    def _band(self) -> tuple[np.ndarray, np.ndarray]:
        """Least and greatest goal of each joint written in the window (NaN: never written)."""
        stack = np.array([g for _, g in self._goals])
        filled = np.where(np.isnan(stack), stack[-1], stack)   # a joint not yet written then: its latest goal
        return filled.min(axis=0), filled.max(axis=0)

    def gaps(self, present: Mapping[str, float]) -> dict[str, float]:
        """Each joint's distance from the band of goals written in the window, rad (joints with a goal only)."""
        if not self._goals:
            return {}
        lo, hi = self._band()
        out: dict[str, float] = {}
        index = self._index
        for name, x in present.items():
            i = index.get(name)
            if i is not None and lo[i] == lo[i]:   # NaN: never written
                out[name] = max(lo[i] - x, x - hi[i], 0.0)
        return out

    def closing(self, present: Mapping[str, float], velocity: Mapping[str, float]) -> set[str]:
        """Joints outside the band of goals that move toward it at :data:`CLOSING_SPEED` or faster.

        Only the joints named in ``velocity`` are looked at (give those beyond the tolerance).
        """
        if not self._goals or not velocity:
            return set()
        lo, hi = self._band()
        out: set[str] = set()
        for name, v in velocity.items():
            i = self._index.get(name)
            x = present.get(name)
            if i is None or x is None:
                continue
            if (x < lo[i] and v >= CLOSING_SPEED) or (x > hi[i] and v <= -CLOSING_SPEED):
                out.add(name)
        return out

    def check(self, gaps: Mapping[str, float], now: float, closing: Set[str] = frozenset()) -> dict[str, float]:
        """Joints out of the envelope at ``now``, s, with their gap, rad (empty: every joint tracks).

        Args:
            gaps: This cycle's :meth:`gaps`.
            now: The cycle's time, s.
            closing: This cycle's :meth:`closing`: joints catching up, whose time out of the
                band starts afresh.
        """
        out: dict[str, float] = {}
        for name, gap in gaps.items():
            if gap <= self.tolerance_rad or name in closing:
                self._outside.pop(name, None)
                continue
            since = self._outside.setdefault(name, now)
            if now - since >= self.time_s:
                out[name] = gap
        return out
