"""The bridge's states and the supervisor's answers and records (ROS-free, no logic).

:class:`BridgeState` names the states of :class:`snake_hardware.supervisor.Supervisor`
(their meaning and transitions are in that module's docstring); :data:`TORQUE_STATES` and
:data:`MOVING_STATES` group them as the state machine tests them. :class:`Outcome` is the
answer to a request (arm, disarm, e-stop, clear, reboot) and :class:`Transition` one
recorded state change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class BridgeState(Enum):
    """States of the bridge (see the module docstring of ``snake_hardware.supervisor``)."""

    DISARMED = "DISARMED"
    ARMING = "ARMING"
    ARMED = "ARMED"
    HOLDING = "HOLDING"
    ESTOPPED = "ESTOPPED"
    FAULT = "FAULT"


TORQUE_STATES = (BridgeState.ARMING, BridgeState.ARMED, BridgeState.HOLDING)
"""States in which the bridge holds torque on and writes goals."""
MOVING_STATES = (BridgeState.ARMING, BridgeState.ARMED)
"""States in which the goals move (ramp, or following the commands)."""


@dataclass(frozen=True)
class Outcome:
    """Answer to a request.

    Attributes:
        accepted: True when the request was carried out.
        message: What was done, or why it was refused.
    """

    accepted: bool
    message: str


@dataclass(frozen=True)
class Transition:
    """One state change: ``source`` -> ``target`` because of ``reason``."""

    source: BridgeState
    target: BridgeState
    reason: str
