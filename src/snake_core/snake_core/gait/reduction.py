"""Locomotive reduction of the T-Snake to a differential-drive car (003 Eq. 9-10).

The head and tail segments act as the left and right wheels: v'_l = k omega_h,
v'_r = k omega_t (Eq. 9), separated by d' = s_t - s_h with s_h = L_h / 2 and
s_t = (L_t + L) / 2, so (Eq. 10)::

    v = k (omega_h + omega_t) / 2,    omega = k (omega_t - omega_h) / d'

and inversely omega_h = (v - omega d'/2) / k, omega_t = (v + omega d'/2) / k.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from snake_core.errors import GaitError
from snake_core.robot import RobotModel


class TwistMapping(ABC):
    """Maps a differential-drive twist (v m/s, omega rad/s) to a gait's native command and back."""

    @abstractmethod
    def to_command(self, v: float, omega: float) -> tuple[float, ...]:
        """Native command realising (v, omega), saturated to the gait's limits."""

    @abstractmethod
    def to_twist(self, command: tuple[float, ...]) -> tuple[float, float]:
        """Twist (v, omega) that a native command produces."""


@dataclass(frozen=True)
class ReductionParams:
    """Coefficients of 003 Eq. 9-10.

    Attributes:
        k: Velocity transmission coefficient, m per rad (Eq. 9).
        d_prime: Equivalent wheel separation d', m (Eq. 10).
        omega_max: Limit on |omega_h|, |omega_t|, rad/s.
        omega_c_ratio: omega_c = ratio * (omega_h + omega_t) / 2: the helix wave runs
            with the translational part of the rolling (003 Sec. IV-A.2 uses
            omega_c = 1 with omega_h = omega_t = 2, i.e. 0.5, and omega_c = 0 when
            turning in place).
    """

    k: float
    d_prime: float
    omega_max: float
    omega_c_ratio: float = 0.5

    def __post_init__(self) -> None:
        for name in ("k", "d_prime", "omega_max"):
            value = getattr(self, name)
            if not np.isfinite(value) or value <= 0:
                raise GaitError(f"reduction {name} must be a positive number, got {value!r}")
        if not np.isfinite(self.omega_c_ratio) or self.omega_c_ratio < 0:
            raise GaitError(f"reduction omega_c_ratio must be >= 0, got {self.omega_c_ratio!r}")

    @classmethod
    def from_robot(cls, robot: RobotModel, **overrides: Any) -> ReductionParams:
        """Read ``gaits.reduction`` (and L_h, L_t from ``gaits.rolling``) of a T-Snake."""
        red = robot.gait("reduction")
        roll = robot.gait("rolling")
        d_prime = red.get("d_prime")
        if d_prime is None:
            d_prime = segment_separation(float(roll["head_end"]), float(roll["tail_start"]), robot.length)
        params: dict[str, Any] = {
            "k": float(red["k"]),
            "d_prime": float(d_prime),
            "omega_max": float(red["omega_max"]),
            "omega_c_ratio": float(red.get("omega_c_ratio", 0.5)),
        }
        params.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**params)

    def mapping(self) -> DifferentialDrive:
        """The twist mapping these coefficients define."""
        return DifferentialDrive(self)


def segment_separation(head_end: float, tail_start: float, length: float) -> float:
    """D' = s_t - s_h with s_h = L_h / 2, s_t = (L_t + L) / 2 (003 Sec. III-C.2), m."""
    return 0.5 * (tail_start + length) - 0.5 * head_end


def twist_from_rates(omega_h: float, omega_t: float, k: float, d_prime: float) -> tuple[float, float]:
    """Forward reduction, 003 Eq. 10: (omega_h, omega_t) -> (v m/s, omega rad/s)."""
    return 0.5 * k * (omega_h + omega_t), k * (omega_t - omega_h) / d_prime


def rates_from_twist(v: float, omega: float, k: float, d_prime: float) -> tuple[float, float]:
    """Inverse of 003 Eq. 10: (v, omega) -> (omega_h, omega_t), rad/s."""
    return (v - 0.5 * omega * d_prime) / k, (v + 0.5 * omega * d_prime) / k


class DifferentialDrive(TwistMapping):
    """cmd_vel <-> (omega_h, omega_t, omega_c) for the rolling-vector gait (003 Eq. 9-10).

    Saturation keeps the ratio omega_h : omega_t (hence the turning radius R' = v / omega
    of Eq. 10) and scales both down until the larger magnitude is ``omega_max``.
    """

    def __init__(self, params: ReductionParams) -> None:
        self.params = params

    def to_command(self, v: float, omega: float) -> tuple[float, float, float]:
        """(v, omega) -> (omega_h, omega_t, omega_c), saturated."""
        p = self.params
        oh, ot = rates_from_twist(v, omega, p.k, p.d_prime)
        peak = max(abs(oh), abs(ot))
        if peak > p.omega_max:
            oh, ot = oh * p.omega_max / peak, ot * p.omega_max / peak
        return oh, ot, p.omega_c_ratio * 0.5 * (oh + ot)

    def to_twist(self, command: tuple[float, ...]) -> tuple[float, float]:
        """(omega_h, omega_t, ...) -> (v, omega) by Eq. 10."""
        return twist_from_rates(command[0], command[1], self.params.k, self.params.d_prime)


def motion_mode(omega_h: float, omega_t: float, tol: float = 1e-9) -> str:
    """Name the motion mode of (omega_h, omega_t) (003 Sec. III-C.2, IV-A.2).

    Returns:
        ``stopped``, ``translating`` (omega_h = omega_t, R' -> inf), ``turning_in_place``
        (omega_h = -omega_t, R' = 0), ``head_anchored`` (omega_h = 0) or ``turning``.
    """
    if abs(omega_h) <= tol and abs(omega_t) <= tol:
        return "stopped"
    if abs(omega_h - omega_t) <= tol:
        return "translating"
    if abs(omega_h + omega_t) <= tol:
        return "turning_in_place"
    if abs(omega_h) <= tol:
        return "head_anchored"
    return "turning"
