"""Angle helpers shared by the core (rad).

One wrap for every place that reduces an angle to a single turn: the path follower's heading
error and angle filter (001 Eq. 11), the head-pose filter's yaw jump, the singular values of
the free angle (002), the servo zero offsets of continuous joints.
"""

from __future__ import annotations

import math

_TWO_PI = 2.0 * math.pi  # rad, one turn


def wrap_to_pi(angle: float) -> float:
    """The angle equal to ``angle`` modulo 2 pi in the half-open interval (-pi, pi], rad.

    Computed with the IEEE remainder (``math.remainder``, exact: the result differs from
    ``angle`` by a multiple of the float ``2 pi`` with no rounding), so small angles come back
    unchanged. The end point is fixed: both ``pi`` and ``-pi`` map to ``+pi`` (the free-angle
    solver of 002 relies on it to list each singular value once); a consumer that only
    compares magnitudes or takes sines and cosines may use either end.

    Args:
        angle: rad (finite).

    Returns:
        rad, in (-pi, pi].
    """
    wrapped = math.remainder(angle, _TWO_PI)
    return math.pi if wrapped <= -math.pi else wrapped
