"""The head's speed and turn rate per span of constant ``cmd_vel``: the on-ground statistic of how the body moves.

The head's path itself is not a fit statistic: contact makes it chaotic (a 1 % change of any
parameter moves the head by centimetres over a run) and a turn rate a few per cent off
accumulates into a heading error that the rest of the run carries. The rates over a span of one
command are local: per span ``(a, b)`` of :attr:`~snake_tools.twin.data.Recording.spans`,

    v = |p(b) - p(a)| / (b - a),    w = (h(b) - h(a)) / (b - a),

``p`` the head's position and ``h`` its unwrapped heading, interpolated at the span's ends (as
``snake twin replay`` reports them per segment), and the residual of twin against robot is
``((v_twin - v_robot) / SIGMA_SPEED, (w_twin - w_robot) / SIGMA_TURN)`` per span. Both rates are
those of the twin's own path: no rigid alignment of the two paths is needed.

``snake twin replay`` reports its segments' rates with :func:`span_rates`. Measured on the bench
robot (docs/twin_identification.md, "With a ground run that covers the drive"): on a ground run
that covers the turn rates of the held-out teleop run, the contact models whose turn rates are
within 2-3 mrad/s of the robot's replay that run at 0.4-0.6 times the default twin's distance at
60 s, where the windowed tracking errors of :mod:`snake_tools.twin.ground` barely tell them apart.
"""

from __future__ import annotations

import numpy as np

from snake_tools.twin.data import Recording

SIGMA_SPEED = 0.001
"""Scale of a span's speed residual, m/s (the motion capture's millimetre over a span of a few seconds)."""
SIGMA_TURN = 0.002
"""Scale of a span's turn-rate residual, rad/s."""


def span_rates(t: np.ndarray, xy: np.ndarray, heading: np.ndarray,
               spans: tuple[tuple[float, float], ...]) -> np.ndarray:
    """Speed (m/s) and turn rate (rad/s) over each span within ``t``, (spans, 2) (module docstring)."""
    rows = []
    for a, b in spans:
        if b <= a or t[0] > a or t[-1] < b:
            continue
        p0, p1 = (np.array([np.interp(s, t, xy[:, i]) for i in range(2)]) for s in (a, b))
        h0, h1 = (float(np.interp(s, t, heading)) for s in (a, b))
        rows.append((float(np.linalg.norm(p1 - p0)) / (b - a), (h1 - h0) / (b - a)))
    return np.array(rows, dtype=float).reshape(-1, 2)


def path_residual(rec: Recording, xy: np.ndarray, heading: np.ndarray) -> np.ndarray:
    """Twin minus robot speed and turn rate per span, over :data:`SIGMA_SPEED` and :data:`SIGMA_TURN` (flat).

    Empty where the recording has no heading or no span within its poses.
    """
    if not len(rec.heading_pose) or not rec.spans:
        return np.empty(0)
    twin = span_rates(rec.t_pose, xy, heading, rec.spans)
    robot = span_rates(rec.t_pose, rec.xy_pose, rec.heading_pose, rec.spans)
    return ((twin - robot) / np.array([SIGMA_SPEED, SIGMA_TURN])).ravel()
