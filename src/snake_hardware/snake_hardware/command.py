"""Pure logic of the bridge: command filtering and clamping, command timeout, backoff, rate.

No ROS and no I/O here, so every rule the bridge enforces is testable on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from snake_core.robot import JointSpec

TIMEOUT_REACTIONS = ("hold", "torque_off")


@dataclass
class FilteredCommand:
    """Result of :meth:`CommandFilter.filter`.

    Attributes:
        targets: Accepted targets by joint name, rad, clamped to the joint limits.
        unknown: Names that are not joints of the robot (dropped).
        not_finite: Joints whose target was NaN or infinite (dropped).
        clamped: Joints whose target was outside the limits (clamped, kept).
    """

    targets: dict[str, float] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    not_finite: list[str] = field(default_factory=list)
    clamped: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> bool:
        """True when anything was dropped."""
        return bool(self.unknown or self.not_finite)


class CommandFilter:
    """Match commands by joint name, drop NaN and unknown names, clamp to the YAML limits.

    The limits are the safety envelope: no publisher can command a joint past them.

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
            c = joint.clamp(v)
            if c != v:
                out.clamped.append(name)
            out.targets[name] = c
        return out


class CommandState(Enum):
    """States of :class:`CommandTimeout`."""

    WAITING = "waiting"      # no valid command yet
    ACTIVE = "active"        # commands arrive in time
    TIMED_OUT = "timed_out"  # the last command is older than the timeout


class CommandTimeout:
    """Command watchdog of the bridge.

    ``on_command`` records a valid command; ``update`` returns the state at ``now``.
    Entering ``TIMED_OUT`` is reported once by ``update`` (``just_timed_out``), so the
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

    def update(self, now: float) -> CommandState:
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
