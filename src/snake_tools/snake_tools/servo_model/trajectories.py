"""The pendulum bench's trajectories: goal angle and torque enable over time, as BAM records them.

Rhoban/bam (``bam/trajectory.py``, Apache-2.0) identifies a servo from four 6 s runs on a
pendulum; this module writes the same four for ``snake servo-model record`` so that its logs
and BAM's published ones are alike:

- ``lift_and_drop``: a cubic move from 0 to -pi/2 in 2 s, then torque off (the pendulum falls
  limp: back-driving, low-speed friction);
- ``sin_time_square``: sin(t^2), ever faster (a wide range of speeds in one run);
- ``up_and_down``: a slow cubic path 0 -> pi/2 (3 s) -> 0.8 pi/2 (6 s) (static and
  load-dependent friction);
- ``sin_sin``: sin(t) pi/2 + 0.5 sin(5 t) sin(2 t) (many frequencies).

The cubic paths are Hermite splines through keyframes (time, angle, rate), held at the ends
(scipy's ``CubicHermiteSpline``, the same cubic BAM solves for per segment).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.interpolate import CubicHermiteSpline

DURATION_S = 6.0
"""Length of every trajectory, s (BAM's)."""

Trajectory = Callable[[float], tuple[float, bool]]
"""``trajectory(t)`` -> (goal angle, rad; torque enabled) at ``t`` s from the start."""


def _hermite(keyframes: list[tuple[float, float, float]]) -> Callable[[float], float]:
    t, x, dx = (np.array(c, dtype=float) for c in zip(*keyframes, strict=True))
    spline = CubicHermiteSpline(t, x, dx)
    return lambda s: float(spline(min(max(s, t[0]), t[-1])))


_LIFT = _hermite([(0.0, 0.0, 0.0), (2.0, -math.pi / 2, 0.0)])
_UP_DOWN = _hermite([(0.0, 0.0, 0.0), (3.0, math.pi / 2, 0.0), (6.0, 0.8 * math.pi / 2, 0.0)])

TRAJECTORIES: dict[str, Trajectory] = {
    "lift_and_drop": lambda t: (_LIFT(t), t < 2.0),
    "sin_time_square": lambda t: (math.sin(t * t), True),
    "up_and_down": lambda t: (_UP_DOWN(t), True),
    "sin_sin": lambda t: (math.sin(t) * math.pi / 2 + 0.5 * math.sin(5.0 * t) * math.sin(2.0 * t), True),
}
"""The four trajectories by BAM's names."""
