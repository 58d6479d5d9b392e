"""Seeded random peg fields for closed-loop trials (001 Sec. VI: "randomly placed pegs").

A field is drawn by :func:`snake_core.following.viscous.model.random_pegs` (uniform, no two pegs
closer than one diameter plus a gap) inside a rectangle; pegs that fall in a keep-out disc
(around the start, where the robot is spawned, and the goal) are then removed, so the
count can be below ``density * area``. Everything comes from the given
``numpy.random.Generator``, so a seed reproduces the field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from snake_core.errors import PlanningError
from snake_core.following.viscous.model import random_pegs


@dataclass(frozen=True)
class PegFieldSpec:
    """Where and how densely pegs are drawn.

    Attributes:
        xlim: x range of peg centres, m.
        ylim: y range of peg centres, m.
        density: Pegs per square metre before the keep-out discs are cleared.
        diameter: Peg diameter, m.
        gap: Smallest free space between two pegs, m.
    """

    xlim: tuple[float, float]
    ylim: tuple[float, float]
    density: float
    diameter: float
    gap: float

    def __post_init__(self) -> None:
        if not (self.xlim[1] > self.xlim[0] and self.ylim[1] > self.ylim[0]):
            raise PlanningError(f"peg field: need xlim and ylim increasing, got {self.xlim}, {self.ylim}")
        for name in ("density", "gap"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise PlanningError(f"peg field {name}: must be a number >= 0, got {v!r}")
        if not (math.isfinite(self.diameter) and self.diameter > 0):
            raise PlanningError(f"peg field diameter: must be a positive number of metres, got {self.diameter!r}")


def peg_field(spec: PegFieldSpec, rng: np.random.Generator,
              keep_out: Sequence[tuple[Sequence[float], float]] = ()) -> np.ndarray:
    """A seeded random peg field with clear discs.

    Args:
        spec: Area, density, diameter and gap.
        rng: Random generator (the only source of randomness).
        keep_out: ``((x, y), radius)`` discs, m, that no peg *surface* may enter
            (a peg is removed when its centre is closer than ``radius + diameter / 2``).

    Returns:
        Peg centres, m, ``(P, 2)``.
    """
    pegs = random_pegs(spec.density, spec.xlim, spec.ylim, spec.diameter, rng, gap=spec.gap)
    keep = np.ones(len(pegs), dtype=bool)
    for centre, radius in keep_out:
        dist = np.linalg.norm(pegs - np.asarray(centre, dtype=float), axis=1)
        keep &= dist >= radius + spec.diameter / 2
    return pegs[keep]
