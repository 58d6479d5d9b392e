"""The interface every gait implements, and the factory that builds one by name."""

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

    Subclasses set ``command_names`` and implement :meth:`step`, :meth:`reset` and
    :meth:`state_dict`. ``mapping`` converts between the native command and a
    differential-drive twist (v in m/s, omega in rad/s), so that ``cmd_vel`` drives
    every gait the same way.

    Args:
        robot: The robot the gait runs on.
    """

    command_names: tuple[str, ...] = ()
    mapping: TwistMapping

    def __init__(self, robot: RobotModel) -> None:
        self.robot = robot

    @property
    def joint_names(self) -> list[str]:
        """Names of the joints :meth:`step` returns, in order."""
        return self.robot.joint_names

    def check_command(self, command: GaitCommand) -> tuple[float, ...]:
        """Validate a native command; raise GaitError naming the bad entry."""
        values = tuple(float(c) for c in command)
        if len(values) != len(self.command_names):
            raise GaitError(f"command needs {len(self.command_names)} values {self.command_names}, got {len(values)}")
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


GAIT_NAMES = ("rolling", "conical", "serpenoid")
"""Names :func:`make_gait` builds."""


def make_gait(name: str, robot: RobotModel, **options: Any) -> Gait:
    """Build a gait by name: ``rolling``, ``conical`` or ``serpenoid``.

    Args:
        name: Gait name.
        robot: Robot description.
        **options: Gait-specific parameter overrides.

    Raises:
        GaitError: Unknown gait, or a gait that does not fit the robot.
    """
    from snake_core.gait.conical import ConicalSidewindingGait
    from snake_core.gait.reduction import ReductionParams
    from snake_core.gait.rolling import RollingParams, RollingVectorGait
    from snake_core.gait.serpenoid import SerpenoidGait

    if name in ("rolling", "conical") and robot.kind != "tsnake":
        raise GaitError(f"{name} gait needs a tsnake robot, got {robot.name} of kind {robot.kind!r}")
    if name == "rolling":
        red_keys = {"k", "d_prime", "omega_max", "omega_c_ratio"}
        red = {k: options.pop(k) for k in list(options) if k in red_keys}
        gait: Gait = RollingVectorGait(robot, RollingParams.from_robot(robot, **options))
        gait.mapping = ReductionParams.from_robot(robot, **red).mapping()
        return gait
    if name == "conical":
        return ConicalSidewindingGait(robot, **options)
    if name == "serpenoid":
        return SerpenoidGait(robot, **options)
    raise GaitError(f"unknown gait {name!r}; choose rolling, conical or serpenoid")
