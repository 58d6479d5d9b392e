"""Settings of the bridge's safety state machine, and their validation (ROS-free).

:class:`SupervisorConfig` holds the settings of :class:`snake_hardware.supervisor.Supervisor`
(the bridge's parameters of the same names); :meth:`SupervisorConfig.validate` checks them
all before the supervisor takes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from snake_hardware.command import TIMEOUT_REACTIONS


@dataclass(frozen=True)
class SupervisorConfig:
    """Settings of :class:`Supervisor` (the bridge's parameters of the same names).

    Attributes:
        period_s: Cycle period, s (goal rate limit and arming ramp use it).
        arming_speed: Speed at which the arming gap closes, rad/s.
        auto_arm: Arm by itself whenever the bus becomes ready (start-up, reconnect),
            unless an emergency stop is latched.
        command_timeout_s: Seconds without a valid command before the timeout reaction;
            0 disables.
        timeout_reaction: ``hold`` (HOLDING) or ``torque_off`` (DISARMED).
        fault_reaction: On a servo hardware error or a tracking fault: ``hold`` (FAULT holding
            the last goals) or ``torque_off`` (FAULT, limp). A servo in hardware error has
            already turned its own torque off (its Shutdown register); ``hold`` keeps the rest
            of the body where it is instead of dropping it. Servos that another program wrote
            go limp whatever this says.
        max_consecutive_failures: Failed cycles in a row before the bus can count as lost.
        bus_loss_timeout_s: Seconds of failed cycles in a row (from the first failure's
            ``now``) before the bus can count as lost; both this and
            ``max_consecutive_failures`` must be reached (0: the count alone).
        health_period_s: Seconds between health polls.
        tracking_tolerance_rad: Tracking envelope: the largest distance, rad, of a joint
            from the goals written in the last ``tracking_lag_s`` (see
            :class:`~snake_hardware.command.TrackingEnvelope`).
        tracking_lag_s: Tracking envelope: how far back written goals count, s (the
            servo's own lag behind its goal).
        tracking_time_s: Tracking envelope: how long a joint may stay beyond the tolerance
            before FAULT, s.
    """

    period_s: float = 0.01
    arming_speed: float = 0.3
    auto_arm: bool = False
    command_timeout_s: float = 0.5
    timeout_reaction: str = "hold"
    fault_reaction: str = "hold"
    max_consecutive_failures: int = 5
    health_period_s: float = 0.5
    bus_loss_timeout_s: float = 0.5
    tracking_tolerance_rad: float = 0.5
    tracking_lag_s: float = 0.25
    tracking_time_s: float = 0.5

    def validate(self) -> None:
        """Check every field.

        Raises:
            ValueError: Naming the first bad field.
        """
        for name in ("period_s", "arming_speed", "health_period_s", "tracking_tolerance_rad", "tracking_lag_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be > 0, got {value}")
        if not (math.isfinite(self.command_timeout_s) and self.command_timeout_s >= 0):
            raise ValueError(f"command_timeout_s: must be >= 0, got {self.command_timeout_s}")
        for name in ("timeout_reaction", "fault_reaction"):
            if getattr(self, name) not in TIMEOUT_REACTIONS:
                raise ValueError(f"{name}: {getattr(self, name)!r} is not one of {TIMEOUT_REACTIONS}")
        if self.max_consecutive_failures < 1:
            raise ValueError(f"max_consecutive_failures: must be >= 1, got {self.max_consecutive_failures}")
        if not (math.isfinite(self.bus_loss_timeout_s) and self.bus_loss_timeout_s >= 0):
            raise ValueError(f"bus_loss_timeout_s: must be >= 0, got {self.bus_loss_timeout_s}")
        if not (math.isfinite(self.tracking_time_s) and self.tracking_time_s >= 0):
            raise ValueError(f"tracking_time_s: must be >= 0, got {self.tracking_time_s}")

