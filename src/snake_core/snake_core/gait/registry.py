"""Gaits by name: the registry the nodes, the ``snake`` command and the experiments build from.

:data:`GAITS` maps a name to its :class:`~snake_core.gait.base.Gait` class; the class is the
builder (:meth:`~snake_core.gait.base.Gait.from_options`) and owns its twist mapping. A new
gait is one module with one class and one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from snake_core.errors import GaitError
from snake_core.gait.base import Gait
from snake_core.gait.conical import ConicalSidewindingGait
from snake_core.gait.rolling import RollingVectorGait
from snake_core.gait.serpenoid import SerpenoidGait
from snake_core.robot import RobotModel

GAITS: Mapping[str, type[Gait]] = {
    "rolling": RollingVectorGait,
    "conical": ConicalSidewindingGait,
    "serpenoid": SerpenoidGait,
}
"""Gait name -> class, in the order the names are offered."""

GAIT_NAMES = tuple(GAITS)
"""Names :func:`make_gait` builds."""


def make_gait(name: str, robot: RobotModel, **options: Any) -> Gait:
    """Build a gait by name: ``rolling``, ``conical`` or ``serpenoid``.

    Args:
        name: Gait name (a key of :data:`GAITS`).
        robot: Robot description.
        **options: Gait-specific parameter overrides (:meth:`Gait.from_options`).

    Raises:
        GaitError: Unknown gait, or a gait that does not fit the robot.
    """
    cls = GAITS.get(name)
    if cls is None:
        raise GaitError(f"unknown gait {name!r}; choose {', '.join(GAIT_NAMES[:-1])} or {GAIT_NAMES[-1]}")
    if cls.robot_kinds and robot.kind not in cls.robot_kinds:
        raise GaitError(f"{name} gait needs a {' or '.join(cls.robot_kinds)} robot, "
                        f"got {robot.name} of kind {robot.kind!r}")
    return cls.from_options(robot, **options)
