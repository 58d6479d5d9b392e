"""Whole turns of continuous joints: the command's equivalent angle nearest where the joint is (pure).

A continuous joint (no position limits) reaches a commanded angle ``q`` at any ``q + 2 pi k``.
:class:`ContinuousTurns` picks ``k`` when an arming ramp starts, so that arming moves the
joint at most half a turn whatever turns it has left from earlier runs, and keeps it until
the next ramp, so that the commands' own winding is followed, never unwound. Used by
:class:`snake_hardware.supervisor.Supervisor`; ROS-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

_TURN = 2.0 * math.pi   # rad per turn of a continuous joint


class ContinuousTurns:
    """Whole turns added to the commands of the continuous joints ``names`` during one ramp."""

    def __init__(self, names: Iterable[str]) -> None:
        """No ramp yet: no turns chosen."""
        self._continuous = frozenset(names)
        self._shift: dict[str, float] = {}   # joint -> whole turns added to its commands, rad

    def start(self, start_pose: Mapping[str, float], command: Mapping[str, float]) -> None:
        """Choose the turns of a ramp from ``start_pose`` toward ``command`` (rad).

        Each continuous joint's goal is the command's equivalent angle nearest its start:
        command + 2 pi k with k = round((start - command) / 2 pi).
        """
        self._shift = {n: _TURN * round((start_pose[n] - q) / _TURN)
                       for n, q in command.items() if n in self._continuous and n in start_pose}

    def shifted(self, targets: Mapping[str, float], near: Callable[[str, float], float]) -> dict[str, float]:
        """Commands (rad) with each continuous joint's whole turns of the current ramp added.

        Args:
            targets: Commands by joint name, rad.
            near: ``near(joint, command)``: the angle, rad, whose nearest turns a continuous
                joint first commanded after the ramp started gets (its current goal).
        """
        out = dict(targets)
        for n, q in targets.items():
            if n in self._continuous:
                if n not in self._shift:
                    goal = near(n, q)
                    self._shift[n] = _TURN * round((goal - q) / _TURN)
                out[n] = q + self._shift[n]
        return out
