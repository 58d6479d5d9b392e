"""The noise model of a recording's joint angles: what its ``joint_states`` can tell, per sample.

Per joint sample ``sigma^2 = res^2 / 12 + qdot^2 (s_t^2 + h^2 / 12) + s_rest^2``
(:func:`noise_model`): the encoder's rounding (uniform over one tick, ``res = 2 pi / ticks``), the
angle's change over the stamp's error (a timing error propagated through the joint velocity: ``s_t``
the stamps' spread about their regular grid, :func:`stamp_spread`, and the twin's physics step ``h``
to which it rounds them) and the angles' spread at rest. Each term is a variance of independent
errors; where the errors are correlated in time (an angle rounded to the same tick over many slow
samples), the fit's intervals account for it (:mod:`snake_tools.twin.uncertainty`), not ``sigma``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from snake_tools.twin.data import Recording

ENCODER_TICKS = 4096
"""Encoder ticks per turn of the servos' position reading (Dynamixel X-series), the noise model's resolution."""


@dataclass(frozen=True)
class NoiseModel:
    """What a recording's ``joint_states`` can tell, per sample (module docstring, "Noise model").

    Attributes:
        resolution_rad: Encoder resolution, rad (``2 pi / ENCODER_TICKS``).
        stamp_std_s: Standard deviation of the stamps about their regular grid, s.
        rest_std_rad: Standard deviation of the angles at rest beyond the resolution, rad.
        step_s: The twin's physics step (it samples at stamps rounded to it), s.
        sigma: Standard deviation of each sample (samples, joints), rad.
    """

    resolution_rad: float
    stamp_std_s: float
    rest_std_rad: float
    step_s: float
    sigma: np.ndarray

    @property
    def floor_rad(self) -> float:
        """The noise floor: RMS of the per-sample standard deviations, rad."""
        return float(np.sqrt(np.mean(self.sigma ** 2)))

    def as_dict(self) -> dict[str, float]:
        """Plain data (the per-sample sigma left out)."""
        return {"resolution_rad": self.resolution_rad, "stamp_std_s": self.stamp_std_s,
                "rest_std_rad": self.rest_std_rad, "step_s": self.step_s, "noise_floor_rad": self.floor_rad}


def stamp_spread(t: np.ndarray) -> tuple[float, float]:
    """``(period, std)`` of stamps, s: the median interval, and the stamps' spread about a regular grid.

    The intervals of stamps ``t_k = k T + e_k`` with independent errors are ``T + e_{k+1} - e_k``,
    of variance ``2 s^2``; the spread is read from their median absolute deviation about the median
    interval, ``1.4826 MAD / sqrt 2``, so a dropped sample (an interval of two periods) is an
    outlier that moves it little, and no grid has to be fitted (counting grid steps drifts, and
    reads a saturated spread, once the errors reach a third of the period). Exact for gaussian
    errors (uniform errors of half-width ``a``: ``0.61 a`` where their std is ``0.58 a``); with a
    tenth of the samples dropped it reads up to a quarter high; it keeps growing with the errors up
    to about a period (beyond, the samples reorder).
    """
    t = np.asarray(t, dtype=float)
    if len(t) < 2:
        return math.nan, 0.0
    dt = np.diff(np.sort(t))
    period = float(np.median(dt))
    if len(t) < 3:
        return period, 0.0
    return period, float(1.4826 * np.median(np.abs(dt - period)) / np.sqrt(2.0))


def noise_model(rec: Recording, step_s: float, ticks: int = ENCODER_TICKS) -> NoiseModel:
    """The noise model of a recording's joint angles (module docstring, "Noise model").

    ``sigma^2 = res^2 / 12 + qdot^2 (s_t^2 + h^2 / 12) + s_rest^2`` per sample and joint:
    the encoder's rounding (uniform over one tick, ``res = 2 pi / ticks``), the angle's change
    over the stamp's error (``s_t``: the stamps' spread about their regular grid,
    :func:`stamp_spread`; ``h``: the twin's physics step, to which it rounds every stamp) at the
    recorded speed ``qdot`` (central differences on the stamps), and what the angles show at
    rest (``s_rest``: the spread of the first differences, over sqrt 2, of samples whose
    command did not move over the last 0.2 s, less the resolution's part; 0 without rest).
    """
    res = 2.0 * math.pi / ticks
    t = rec.t_state
    stamp_std = stamp_spread(t)[1]
    qdot = np.gradient(rec.q_state, t, axis=0) if len(t) > 2 else np.zeros_like(rec.q_state)
    held = np.clip(np.searchsorted(rec.t_cmd, t, side="right") - 1, 0, len(rec.t_cmd) - 1)
    since = np.clip(np.searchsorted(rec.t_cmd, t - 0.2, side="right") - 1, 0, len(rec.t_cmd) - 1)
    still = np.all(np.abs(rec.q_cmd[held] - rec.q_cmd[since]) < 1e-9, axis=1)
    rest = still[1:] & still[:-1]
    rest_std = 0.0
    if rest.sum() >= 10:
        spread2 = float(np.mean(np.diff(rec.q_state, axis=0)[rest] ** 2)) / 2.0
        rest_std = math.sqrt(max(spread2 - res ** 2 / 12.0, 0.0))
    sigma = np.sqrt(res ** 2 / 12.0 + qdot ** 2 * (stamp_std ** 2 + step_s ** 2 / 12.0) + rest_std ** 2)
    return NoiseModel(res, stamp_std, rest_std, step_s, sigma)
