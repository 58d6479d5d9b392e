"""The interface every gait implements.

Gaits are built by name through :mod:`snake_core.gait.registry` (:func:`make_gait`), which
imports the gait modules; this module imports none of them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from snake_core.errors import GaitError
from snake_core.robot import RobotModel

if TYPE_CHECKING:
    from snake_core.gait.reduction import TwistMapping

GaitCommand = Sequence[float]
"""A gait's native command: one rate per name in ``Gait.command_names`` (rad/s unless stated)."""


class Gait(ABC):
    """A joint-space gait driven by a small native command vector.

    Subclasses set ``command_names`` (and ``robot_kinds`` when they fit only some robot
    kinds), build their own ``mapping`` in ``__init__`` and implement :meth:`step`,
    :meth:`reset` and :meth:`state_dict`. ``mapping`` converts between the native command
    and a differential-drive twist (v in m/s, omega in rad/s), so that ``cmd_vel`` drives
    every gait the same way. :meth:`from_options` builds a gait from keyword overrides
    (what :func:`snake_core.gait.registry.make_gait` calls).

    Args:
        robot: The robot the gait runs on.
    """

    command_names: tuple[str, ...] = ()
    robot_kinds: tuple[str, ...] = ()
    """Robot kinds (``RobotModel.kind``) the gait runs on; empty: any."""
    mapping: TwistMapping

    def __init__(self, robot: RobotModel) -> None:
        self.robot = robot

    @classmethod
    def from_options(cls, robot: RobotModel, **options: Any) -> Gait:
        """Build the gait for ``robot`` with keyword overrides of its YAML defaults.

        Raises:
            GaitError: An option or robot the gait cannot take.
        """
        return cls(robot, **options)

    @property
    def joint_names(self) -> list[str]:
        """Names of the joints :meth:`step` returns, in order."""
        return self.robot.joint_names

    def check_command(self, command: GaitCommand) -> tuple[float, ...]:
        """Validate a native command; raise GaitError naming the bad entry."""
        values = tuple(map(float, command))
        if len(values) != len(self.command_names):
            raise GaitError(f"command needs {len(self.command_names)} values {self.command_names}, got {len(values)}")
        if not all(map(math.isfinite, values)):  # the common case in one pass; then name the bad entry
            for name, value in zip(self.command_names, values, strict=True):
                if not math.isfinite(value):
                    raise GaitError(f"command {name} must be finite, got {value!r}")
        return values

    @abstractmethod
    def step(self, dt: float, command: GaitCommand) -> np.ndarray:
        """Advance ``dt`` seconds under ``command``; return joint targets, rad."""

    @abstractmethod
    def reset(self) -> None:
        """Return to the initial state."""

    @abstractmethod
    def state_dict(self) -> dict[str, float]:
        """Internal state (phases, counters) as named floats, for logging."""
