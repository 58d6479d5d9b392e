"""Differential-drive command conditioning: validation, deadman, velocity and acceleration limits.

Pure logic used by the gait node (and testable without ROS): a commanded twist is
checked (finite, not absurd), clamped to the velocity limits, and the output twist
ramps towards it within the acceleration limits. If no valid command arrives for
``timeout`` seconds the target becomes zero, so the gait ramps down to a stop and
holds its shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from snake_core.errors import GaitError

_ABSURD_FACTOR = 10.0  # a command beyond 10x the limit is a fault, not a request


@dataclass(frozen=True)
class TwistLimits:
    """Limits on the differential-drive twist.

    Attributes:
        max_linear: |v| limit, m/s.
        max_angular: |omega| limit, rad/s.
        max_linear_accel: |dv/dt| limit, m/s^2.
        max_angular_accel: |d omega/dt| limit, rad/s^2.
        timeout: Deadman time without a valid command before stopping, s.
    """

    max_linear: float
    max_angular: float
    max_linear_accel: float
    max_angular_accel: float
    timeout: float

    def __post_init__(self) -> None:
        for name in ("max_linear", "max_angular", "max_linear_accel", "max_angular_accel", "timeout"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise GaitError(f"{name} must be a positive number, got {value!r}")


class TwistConditioner:
    """Validated, rate-limited twist with a deadman.

    Args:
        limits: Velocity, acceleration and timeout limits.
    """

    def __init__(self, limits: TwistLimits) -> None:
        self.limits = limits
        self._target = (0.0, 0.0)
        self._last_valid: float | None = None
        self.output = (0.0, 0.0)
        self.rejected = 0

    def submit(self, now: float, v: float, omega: float) -> str | None:
        """Offer a commanded twist received at time ``now`` (s).

        Returns:
            None if accepted (clamped to the limits), else the reason it was rejected.
        """
        lim = self.limits
        for name, value, limit in (("linear.x", v, lim.max_linear), ("angular.z", omega, lim.max_angular)):
            if not math.isfinite(value):
                self.rejected += 1
                return f"{name} is {value!r}"
            if abs(value) > _ABSURD_FACTOR * limit:
                self.rejected += 1
                return f"{name} = {value:g} is beyond {_ABSURD_FACTOR:g}x its limit {limit:g}"
        self._target = (
            max(-lim.max_linear, min(lim.max_linear, v)),
            max(-lim.max_angular, min(lim.max_angular, omega)),
        )
        self._last_valid = now
        return None

    def target(self, now: float) -> tuple[float, float]:
        """The twist the output ramps towards at time ``now`` (s): the last command, zero after a timeout."""
        return (0.0, 0.0) if self.timed_out(now) else self._target

    def timed_out(self, now: float) -> bool:
        """True when no valid command arrived in the last ``timeout`` seconds."""
        return self._last_valid is None or now - self._last_valid > self.limits.timeout

    def ramp(self, now: float, dt: float) -> tuple[float, float]:
        """Ramp the output twist towards the target (zero after a timeout) over ``dt`` s."""
        lim = self.limits
        target = self.target(now)
        dv = max(-lim.max_linear_accel * dt, min(lim.max_linear_accel * dt, target[0] - self.output[0]))
        dw = max(-lim.max_angular_accel * dt, min(lim.max_angular_accel * dt, target[1] - self.output[1]))
        self.output = (self.output[0] + dv, self.output[1] + dw)
        return self.output


def stamp_problem(stamp_s: float, clocks_s: Sequence[float], max_age_s: float) -> str | None:
    """Why a command with header stamp ``stamp_s`` is not fresh, or None when it is.

    A stamped command is fresh when its stamp lies within ``max_age_s`` of at least
    one of the given clock readings (s): the receiver's ROS clock and the host's
    wall clock, since a teleop on the host stamps wall time while a controller on
    simulated time stamps simulated time. A zero stamp (a publisher that does not
    stamp) is accepted; ``max_age_s <= 0`` accepts every stamp.

    Args:
        stamp_s: Header stamp of the command, s.
        clocks_s: Clock readings at reception, s.
        max_age_s: Largest accepted |clock - stamp|, s (stale or in the future).
    """
    if stamp_s == 0.0 or max_age_s <= 0.0:
        return None
    offsets = [now - stamp_s for now in clocks_s]
    if any(abs(off) <= max_age_s for off in offsets):
        return None
    nearest = min(offsets, key=abs)
    when = "in the future" if nearest < 0 else "old"
    return f"stamp is {abs(nearest):.3g} s {when} (accepted: within {max_age_s:g} s)"
