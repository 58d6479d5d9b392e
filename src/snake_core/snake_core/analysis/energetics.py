"""Energetics and locomotion objectives of a run: actuator power, cost of transport, speed, turn rate.

Pure functions of sampled time series (numpy arrays), shared by the twin's gait search
and by the analysis of recorded sessions that hold joint efforts.

Power convention: the actuators' *positive mechanical power*,
``P(t) = sum_i max(tau_i(t) * qdot_i(t), 0)`` [W]. A servo spends energy to do positive
work, but the negative work done on it (a joint braking a falling link) is dissipated in
its gearbox and driver, not recovered; counting ``|tau * qdot|`` would charge the robot
for braking as if it were driving, and the signed sum would let braking cancel driving.
Positive work is the usual convention of locomotion energetics (Tucker 1975; the
"mechanical cost of transport" of legged and snake robots). :func:`absolute_power` is
kept for comparison (an upper bound that counts braking as spent).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

_G = 9.80665  # standard gravity, m/s^2
_MIN_DISTANCE_M = 1e-9  # below this displacement the cost of transport is infinite


def _tau_qdot(effort: ArrayLike, velocity: ArrayLike) -> np.ndarray:
    tau = np.atleast_2d(np.asarray(effort, dtype=float))
    qdot = np.atleast_2d(np.asarray(velocity, dtype=float))
    if tau.shape != qdot.shape:
        raise ValueError(f"effort {tau.shape} and velocity {qdot.shape} must have the same shape (samples, joints)")
    return tau * qdot


def positive_power(effort: ArrayLike, velocity: ArrayLike) -> np.ndarray:
    """Positive mechanical power of all actuators per sample, ``P = sum_i max(tau_i * qdot_i, 0)``.

    Args:
        effort: Joint torques tau, shape (samples, joints), N m.
        velocity: Joint velocities qdot, same shape, rad/s.

    Returns:
        P per sample, W.
    """
    return np.asarray(np.clip(_tau_qdot(effort, velocity), 0.0, None).sum(axis=1))


def absolute_power(effort: ArrayLike, velocity: ArrayLike) -> np.ndarray:
    """Absolute mechanical power per sample, ``P = sum_i |tau_i * qdot_i|`` (braking counted as spent), W."""
    return np.asarray(np.abs(_tau_qdot(effort, velocity)).sum(axis=1))


def energy(t: ArrayLike, power: ArrayLike) -> float:
    """Energy ``E = integral P dt`` by the trapezoidal rule, J.

    Args:
        t: Sample times, s (increasing).
        power: Power at those times, W.
    """
    return float(np.trapezoid(np.asarray(power, dtype=float), np.asarray(t, dtype=float)))


def displacement(xy: ArrayLike) -> float:
    """Net planar displacement of the base, ``d = ||p(T) - p(0)||``, m (xy: (samples, 2) positions, m)."""
    p = np.asarray(xy, dtype=float)
    return float(np.linalg.norm(p[-1, :2] - p[0, :2]))


def mean_speed(t: ArrayLike, xy: ArrayLike) -> float:
    """Net planar speed ``v = ||p(T) - p(0)|| / (T - t0)``, m/s."""
    times = np.asarray(t, dtype=float)
    duration = float(times[-1] - times[0])
    if duration <= 0.0:
        raise ValueError("mean_speed needs samples spanning a positive duration")
    return displacement(xy) / duration


def turn_rate(t: ArrayLike, yaw: ArrayLike) -> float:
    """Mean yaw rate ``omega = (psi(T) - psi(0)) / (T - t0)`` of the unwrapped heading psi, rad/s."""
    times = np.asarray(t, dtype=float)
    duration = float(times[-1] - times[0])
    if duration <= 0.0:
        raise ValueError("turn_rate needs samples spanning a positive duration")
    psi = np.unwrap(np.asarray(yaw, dtype=float))
    return float((psi[-1] - psi[0]) / duration)


def cost_of_transport(work_j: float, mass_kg: float, distance_m: float) -> float:
    """Dimensionless cost of transport ``COT = E / (m g d)``.

    Args:
        work_j: Energy spent E, J (e.g. :func:`energy` of :func:`positive_power`).
        mass_kg: Robot mass m, kg.
        distance_m: Net distance travelled d, m.

    Returns:
        COT (lower is better); ``inf`` when the robot did not move.
    """
    if mass_kg <= 0.0:
        raise ValueError(f"mass must be > 0 kg, got {mass_kg}")
    if distance_m < _MIN_DISTANCE_M:
        return float("inf")
    return float(work_j / (mass_kg * _G * distance_m))


def run_cost_of_transport(t: ArrayLike, effort: ArrayLike, velocity: ArrayLike, xy: ArrayLike,
                          mass_kg: float) -> float:
    """COT of a sampled run: ``integral sum_i max(tau_i qdot_i, 0) dt / (m g ||p(T) - p(0)||)``."""
    return cost_of_transport(energy(t, positive_power(effort, velocity)), mass_kg, displacement(xy))
