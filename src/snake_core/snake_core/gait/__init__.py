"""Gaits of the stack.

- :mod:`~snake_core.gait.rolling`: the T-Snake rolling-vector sidewinding gait with
  phase resetting (003 Eq. 1-8, 11, Algorithm 1).
- :mod:`~snake_core.gait.reduction`: locomotive reduction to a differential-drive car
  (003 Eq. 9-10), both directions.
- :mod:`~snake_core.gait.conical`: the conical-sidewinding baseline that 003 compares
  against (Gong et al. 2013, Xiao et al. 2015).
- :mod:`~snake_core.gait.serpenoid`: serpenoid lateral undulation with a head-angle
  offset that travels along the body (001 Sec. IV).

All gaits share :class:`~snake_core.gait.base.Gait`: ``step(dt, command)`` advances by
``dt`` seconds and returns joint targets (rad) in the robot YAML's joint order.
:mod:`~snake_core.gait.registry` builds them by name (:func:`make_gait`, :data:`GAITS`).
"""

from __future__ import annotations

from snake_core.gait.base import Gait, GaitCommand
from snake_core.gait.registry import GAIT_NAMES, GAITS, make_gait

__all__ = ["GAITS", "GAIT_NAMES", "Gait", "GaitCommand", "make_gait"]
