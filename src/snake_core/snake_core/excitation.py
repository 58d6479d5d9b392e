"""Excitation signals for identifying the servo model: chirps and multisines inside joint limits.

Each joint follows ``q_j(t) = q0_j + w(t) * A_j * s_j(t)`` from its present angle ``q0_j``:

- ``s_j`` is a unit signal, ``|s_j(t)| <= 1`` for every ``t``:
  a linear chirp ``s(t) = sin(2 pi (f0 t + (f1 - f0) t^2 / (2 T)))`` (instantaneous frequency
  ``f0 + (f1 - f0) t / T``), or a multisine ``s(t) = sum_k a_k cos(2 pi f_k t + phi_k) / sum_k a_k``
  with Schroeder's low-crest-factor phases ``phi_k = -pi k (k - 1) / K`` (Schroeder, "Synthesis of
  low-peak-factor signals and binary sequences with low autocorrelation", IEEE Trans. Inf. Theory
  16(1), 1970, Eq. 11), each joint's phases shifted by a seeded random offset per component so the
  joints are not excited in lock-step.
- ``w`` is a raised-cosine envelope, ``w = (1 - cos(pi t / T_r)) / 2`` over the first ``T_r`` seconds,
  1 in between, and the mirror image over the last ``T_r`` seconds: the motion starts and ends
  at the present pose with zero velocity.

Bounds (why the motion is safe by construction):

- position: ``|q_j - q0_j| <= A_j``, and ``A_j`` is at most the distance from ``q0_j`` to each limit
  less a margin;
- velocity: ``|dq_j/dt| <= A_j (max|w'| + max|s_j'|)`` with ``max|w'| = pi / (2 T_r)`` and
  ``max|s'| <= 2 pi f1`` (chirp) or ``2 pi sum_k a_k f_k / sum_k a_k`` (multisine), and ``A_j`` is
  reduced until that bound is at most a fraction of the joint's velocity limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

SIGNALS = ("multisine", "chirp")
VARIANTS = ("lifted", "ground")

_LIMIT_MARGIN_RAD = 0.1  # rad kept clear of each position limit
_VELOCITY_FRACTION = 0.5  # of the joint's velocity limit, the most the excitation asks for
_MULTISINE_COMPONENTS = 12  # sine components of a multisine, log-spaced over the band


class ExcitationError(ValueError):
    """An excitation that cannot be built (bad duration, band, amplitude or pose)."""


@dataclass(frozen=True)
class ExcitationVariant:
    """Amplitude and band of an excitation for one way of holding the robot.

    Attributes:
        amplitude: Largest requested deviation from the present pose, rad.
        f_min: Lowest frequency, Hz.
        f_max: Highest frequency, Hz.
        ramp: Raised-cosine fade in and out, s.
    """

    amplitude: float
    f_min: float
    f_max: float
    ramp: float


#: ``lifted``: robot hanging free (no ground contact), wide band and amplitude, servo physics only.
#: ``ground``: robot lying on the ground, small slow motion so that it wriggles without rolling away.
PRESETS: dict[str, ExcitationVariant] = {
    "lifted": ExcitationVariant(amplitude=0.4, f_min=0.1, f_max=3.0, ramp=2.0),
    "ground": ExcitationVariant(amplitude=0.2, f_min=0.05, f_max=1.0, ramp=3.0),
}


@dataclass(frozen=True)
class JointBounds:
    """The limits an excitation of one joint must stay inside.

    Attributes:
        lower: Lower position limit, rad (``-inf`` for continuous joints).
        upper: Upper position limit, rad (``+inf`` for continuous joints).
        velocity: Velocity limit, rad/s.
    """

    lower: float
    upper: float
    velocity: float


@dataclass(frozen=True)
class Excitation:
    """A planned excitation: per-joint amplitudes of a unit signal around the present pose.

    Attributes:
        signal: ``multisine`` or ``chirp``.
        q0: Present pose (start and end of the motion), rad, one per joint.
        amplitude: Amplitude per joint, rad (0 for a joint with no room to move).
        duration: Length of the motion, s.
        variant: Band and ramp.
        frequencies: Multisine component frequencies, Hz (chirp: ``(f_min, f_max)``).
        phases: Per-joint component phases, rad, shape ``(joints, components)`` (chirp: empty).
    """

    signal: str
    q0: npt.NDArray[np.float64]
    amplitude: npt.NDArray[np.float64]
    duration: float
    variant: ExcitationVariant
    frequencies: npt.NDArray[np.float64]
    phases: npt.NDArray[np.float64]

    def envelope(self, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Raised-cosine fade ``w(t)`` (module docstring), dimensionless, 0 outside ``[0, duration]``."""
        t = np.asarray(t, dtype=float)
        ramp = self.variant.ramp
        rise = np.clip(t / ramp, 0.0, 1.0)
        fall = np.clip((self.duration - t) / ramp, 0.0, 1.0)
        return 0.5 * (1.0 - np.cos(np.pi * np.minimum(rise, fall)))

    def unit(self, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Unit signals ``s_j(t)``, shape ``(len(t), joints)``, each within [-1, 1]."""
        t = np.asarray(t, dtype=float)
        n = len(self.q0)
        if self.signal == "chirp":
            f0, f1 = self.frequencies
            phase = 2.0 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2.0 * self.duration))
            sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
            return np.sin(phase)[:, None] * sign[None, :]
        arg = 2.0 * np.pi * t[:, None, None] * self.frequencies[None, None, :] + self.phases[None, :, :]
        return np.cos(arg).mean(axis=2)  # equal weights a_k

    def positions(self, t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Commanded joint angles at times ``t`` (s from the start), rad, shape ``(len(t), joints)``."""
        t = np.asarray(t, dtype=float)
        return self.q0[None, :] + self.envelope(t)[:, None] * self.amplitude[None, :] * self.unit(t)

    def velocity_bound(self) -> npt.NDArray[np.float64]:
        """The analytic bound on ``|dq_j/dt|`` of the module docstring, rad/s, per joint."""
        return self.amplitude * (math.pi / (2.0 * self.variant.ramp) + _unit_rate_bound(self.signal, self.frequencies))


def _unit_rate_bound(signal: str, frequencies: npt.NDArray[np.float64]) -> float:
    """Bound on ``|s'(t)|``, 1/s: ``2 pi f1`` (chirp) or ``2 pi mean(f_k)`` (equal-weight multisine)."""
    if signal == "chirp":
        return 2.0 * math.pi * float(frequencies[1])
    return 2.0 * math.pi * float(np.mean(frequencies))


def plan_excitation(q0: Sequence[float], bounds: Sequence[JointBounds], signal: str = "multisine",
                    variant: str | ExcitationVariant = "lifted", duration: float = 60.0,
                    amplitude: float | None = None, seed: int = 0) -> Excitation:
    """Plan an excitation from the present pose that stays inside the limits and velocities.

    Args:
        q0: Present joint angles, rad (read from ``joint_states``).
        bounds: Limits of each joint, in the order of ``q0``.
        signal: ``multisine`` or ``chirp`` (module docstring).
        variant: ``lifted`` or ``ground`` (:data:`PRESETS`), or an explicit variant.
        duration: Length of the motion, s; at least twice the ramp (identification wants many periods of
            the lowest frequency: docs/twin_identification.md).
        amplitude: Requested amplitude, rad (default: the variant's).
        seed: Seed of the multisine's per-joint phase offsets.

    Returns:
        The plan: position amplitude per joint is ``min(amplitude, q0 - lower - margin,
        upper - margin - q0)``, then scaled down so the velocity bound is at most
        ``0.5 * velocity`` limit.

    Raises:
        ExcitationError: Unknown signal or variant, a duration too short, a pose outside the limits.
    """
    if signal not in SIGNALS:
        raise ExcitationError(f"--signal: {signal!r} is not one of {', '.join(SIGNALS)}")
    if isinstance(variant, str):
        if variant not in PRESETS:
            raise ExcitationError(f"--variant: {variant!r} is not one of {', '.join(VARIANTS)}")
        var = PRESETS[variant]
    else:
        var = variant
    req = var.amplitude if amplitude is None else float(amplitude)
    if not (math.isfinite(req) and req > 0.0):
        raise ExcitationError(f"--amplitude: {amplitude!r} must be a positive angle, rad")
    min_duration = 2.0 * var.ramp
    if not (math.isfinite(duration) and duration >= min_duration):
        raise ExcitationError(f"--duration: {duration!r} s is shorter than the fade in and out "
                              f"({var.ramp:g} s each)")
    q = np.asarray(q0, dtype=float)
    if len(q) != len(bounds):
        raise ExcitationError(f"present pose has {len(q)} joints, the robot {len(bounds)}")
    if len(q) == 0 or not np.all(np.isfinite(q)):
        raise ExcitationError("present pose: joint angles must be finite numbers")
    if signal == "chirp":
        freqs = np.array([var.f_min, var.f_max])
        phases = np.zeros((len(q), 0))
    else:
        freqs = np.geomspace(var.f_min, var.f_max, _MULTISINE_COMPONENTS)
        k = np.arange(1, _MULTISINE_COMPONENTS + 1)
        schroeder = -np.pi * k * (k - 1) / _MULTISINE_COMPONENTS
        rng = np.random.default_rng(seed)
        phases = schroeder[None, :] + rng.uniform(0.0, 2.0 * np.pi, size=(len(q), _MULTISINE_COMPONENTS))
    rate = math.pi / (2.0 * var.ramp) + _unit_rate_bound(signal, freqs)
    amps = np.empty(len(q))
    for j, (angle, b) in enumerate(zip(q, bounds, strict=True)):
        if angle < b.lower - 1e-9 or angle > b.upper + 1e-9:
            raise ExcitationError(f"present pose: joint {j} at {angle:.3f} rad is outside its limits "
                                  f"[{b.lower:g}, {b.upper:g}] rad")
        room = min(req, angle - b.lower - _LIMIT_MARGIN_RAD, b.upper - _LIMIT_MARGIN_RAD - angle)
        amps[j] = max(0.0, min(room, _VELOCITY_FRACTION * b.velocity / rate))
    return Excitation(signal=signal, q0=q, amplitude=amps, duration=float(duration), variant=var,
                      frequencies=freqs, phases=phases)
