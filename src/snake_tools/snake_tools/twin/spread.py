"""How much of a replay's head divergence is the twin's own chaos (:func:`replay_spread`).

On the ground the rolling gait's contacts make the twin's path chaotic: a start that differs by
less than an encoder resolves moves the head by centimetres over a minute (on the bench robot, a
0.1 % change of the ground friction moves the largest head distance of a 60 s teleop replay by 10
to 15 %: docs/twin_identification.md, "The contact model"). One replay's distance is one draw, and
two targets whose distances differ by less than their spread are not told apart by it.

The spread replays the recording ``n`` more times, each from the recorded start with every joint
angle moved by one of :func:`start_offsets`: multiples of :data:`OFFSET_STEP_RAD`, at most
:data:`MAX_SPREAD` of them so that every start stays within half a count of a 4096-count encoder
(:data:`snake_core.servo.model.RAD_PER_TICK`), a start the robot's own recording cannot tell from
the one replayed.
Each figure of :data:`FIGURES` is reported over the ``n + 1`` replays (the recorded start's
included) as its least, median and largest value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from snake_core.servo.model import RAD_PER_TICK

OFFSET_STEP_RAD = 1e-4
"""Step between two starts of the spread, rad."""
MAX_SPREAD = 2 * int(RAD_PER_TICK / 2 / OFFSET_STEP_RAD)
"""Most replays a spread adds: their starts stay within half an encoder count of the recorded one."""
FIGURES = ("divergence_max_m", "divergence_end_m", "heading_drift_rad")
"""The replay's figures whose spread is reported."""


def start_offsets(n: int, flag: str = "--spread") -> list[float]:
    """The ``n`` start offsets of a spread, rad: +1, -1, +2, -2, ... times :data:`OFFSET_STEP_RAD`.

    Raises:
        ValueError: ``n`` negative or above :data:`MAX_SPREAD` (the line names ``flag``).
    """
    if not 0 <= n <= MAX_SPREAD:
        raise ValueError(f"{flag} {n}: from 0 to {MAX_SPREAD} replays (their starts stay within half an encoder "
                         f"count, {RAD_PER_TICK / 2:.2g} rad, of the recorded one)")
    return [(1 if k % 2 == 0 else -1) * (k // 2 + 1) * OFFSET_STEP_RAD for k in range(n)]


def replay_spread(run: Callable[[float], Mapping[str, Any]], recorded: Mapping[str, Any], n: int) -> dict[str, Any]:
    """The spread of a replay's figures over ``n`` starts within the encoders' resolution (module docstring).

    Args:
        run: Replays the recording from its start with every joint angle moved by the offset
            given (rad) and returns the replay's figures
            (:func:`snake_tools.twin.replay.replay` with ``start_offset_rad``).
        recorded: The replay from the recorded start.
        n: Replays added.

    Returns:
        ``{n, start_offsets_rad, <figure>: {min, median, max}}`` for every figure of
        :data:`FIGURES` the replays give (a heading drift by its absolute value).

    Raises:
        ValueError: ``n`` out of range (:func:`start_offsets`).
    """
    offsets = start_offsets(n)
    replays = [recorded, *(run(offset) for offset in offsets)]
    out: dict[str, Any] = {"n": n, "start_offsets_rad": offsets}
    for figure in FIGURES:
        values = [r.get(figure) for r in replays]
        if any(v is None for v in values):
            continue
        x = np.abs(np.asarray(values, dtype=float)) if figure == "heading_drift_rad" else np.asarray(values, float)
        out[figure] = {"min": float(x.min()), "median": float(np.median(x)), "max": float(x.max())}
    return out
