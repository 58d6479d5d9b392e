"""A servo on a pendulum bench, rolled out against its logs (the rig of BAM's identification).

The rig (Duclusaud & Passault, BAM: "Better Actuator Models", ``Pendulum`` test bench): a
mass ``m`` at length ``l`` on the servo's horn, angle 0 hanging down, so that

    (m l^2 + J_a) qddot = tau_m + tau_e + tau_f,   tau_e = -m g l sin(q + q_0)                  (5)

with the servo's torque ``tau_m`` (Eqs. (1)-(2b) of :mod:`snake_core.servo.actuator`, zero
while the torque is off), the friction ``tau_f`` (Eqs. (3)-(4)), the armature ``J_a`` and
``q_0`` the rig's mounting offset. The rollout closes the firmware's loop on the simulated
angle (not the recorded one) from the first recorded angle at rest, and steps BAM's
integrator (``qdot += qddot dt``, ``q += qdot dt + qddot dt^2 / 2``) on the logs' common grid
of :data:`GRID_S`, every log and every parameter set of a batch at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from snake_core.servo.actuator import current_limited, duty_cycle, friction_budget, motor_torque, stopping_friction

GRAVITY = 9.80665
"""Standard gravity, m/s^2."""
GRID_S = 0.005
"""Grid the logs are resampled to and the rollout's step, s (BAM's ``process.py``)."""

PARAMETERS = ("torque_constant", "resistance", "armature", "p_gain_divisor", "slow_decay", "max_current", "coulomb",
              "viscous", "load", "stribeck_torque", "stribeck_load", "stribeck_velocity", "offset")
"""What a rollout needs per parameter set (units: N m/A, ohm, kg m^2, -, -, A (``inf``: no limit), N m, N m s/rad,
-, N m, -, rad/s, rad)."""


@dataclass(frozen=True)
class BenchLog:
    """One run of one servo on the pendulum, as recorded.

    Attributes:
        name: Where it came from (a file name).
        mass: Pendulum mass, kg.
        length: Pendulum length, m.
        p_gain: Position P Gain register during the run.
        time: Sample times, s (increasing).
        position: Present angle, rad.
        goal: Goal angle, rad.
        torque_enable: Torque on (1) or off (0) per sample.
        voltage: Supply voltage per sample, V.
        trajectory: Name of the commanded trajectory.
        motor: The servo model named by the log.
    """

    name: str
    mass: float
    length: float
    p_gain: float
    time: np.ndarray
    position: np.ndarray
    goal: np.ndarray
    torque_enable: np.ndarray
    voltage: np.ndarray
    trajectory: str = ""
    motor: str = ""


@dataclass(frozen=True)
class Batch:
    """Logs resampled to :data:`GRID_S` and padded to one length (arrays of shape (logs, steps))."""

    logs: tuple[BenchLog, ...]
    position: np.ndarray
    goal: np.ndarray
    torque_enable: np.ndarray
    voltage: np.ndarray
    mask: np.ndarray
    mass: np.ndarray
    length: np.ndarray
    p_gain: np.ndarray


def resample(log: BenchLog, dt: float = GRID_S) -> dict[str, np.ndarray]:
    """A log linearly interpolated onto ``0, dt, 2 dt, ...`` from its first stamp (torque on above 0.5)."""
    t = log.time - log.time[0]
    grid = np.arange(0.0, t[-1], dt)
    out = {k: np.interp(grid, t, getattr(log, k)) for k in ("position", "goal", "voltage")}
    out["torque_enable"] = (np.interp(grid, t, log.torque_enable) > 0.5).astype(float)
    return out


def batch(logs: Sequence[BenchLog], dt: float = GRID_S) -> Batch:
    """Resample ``logs`` and pad each to the longest with its last sample (masked out)."""
    series = [resample(log, dt) for log in logs]
    n = max(len(s["position"]) for s in series)

    def pad(key: str) -> np.ndarray:
        return np.stack([np.concatenate([s[key], np.full(n - len(s[key]), s[key][-1])]) for s in series])

    mask = np.stack([np.arange(n) < len(s["position"]) for s in series]).astype(float)
    return Batch(logs=tuple(logs), position=pad("position"), goal=pad("goal"), torque_enable=pad("torque_enable"),
                 voltage=pad("voltage"), mask=mask, mass=np.array([lg.mass for lg in logs]),
                 length=np.array([lg.length for lg in logs]), p_gain=np.array([lg.p_gain for lg in logs]))


def rollout(data: Batch, params: Mapping[str, np.ndarray], pwm_full: float = 885.0, pwm_limit: float = 885.0,
            dt: float = GRID_S) -> np.ndarray:
    """Simulated angles of every log under every parameter set, Eq. (5).

    Args:
        data: The logs.
        params: Each of :data:`PARAMETERS` -> an array of shape (sets,).
        pwm_full: PWM units at 100 % duty.
        pwm_limit: PWM Limit register.
        dt: Step, s (the batch's grid).

    Returns:
        Angles, rad, shape (sets, logs, steps).
    """
    p = {k: np.asarray(params[k], dtype=float)[:, None] for k in PARAMETERS}
    sets, (logs, steps) = len(p["torque_constant"]), data.position.shape
    q = np.repeat(data.position[None, :, 0], sets, axis=0)
    dq = np.zeros_like(q)
    inertia = data.mass * data.length ** 2 + p["armature"]
    weight = data.mass * GRAVITY * data.length
    out = np.empty((sets, logs, steps))
    for k in range(steps):
        out[:, :, k] = q
        duty = duty_cycle(data.goal[:, k] - q, data.p_gain, p["p_gain_divisor"], pwm_full, pwm_limit)
        tau_m = motor_torque(duty, data.voltage[:, k], dq, p["torque_constant"], p["resistance"], p["slow_decay"])
        tau_m = current_limited(tau_m, p["torque_constant"], p["max_current"]) * data.torque_enable[:, k]
        tau_e = -weight * np.sin(q + p["offset"])
        budget = friction_budget(p["coulomb"], p["viscous"], p["load"], p["stribeck_torque"], p["stribeck_load"],
                                 p["stribeck_velocity"], tau_m, tau_e, dq)
        net = tau_m + tau_e
        net = net + stopping_friction(budget, inertia, dq, net, dt)
        acc = net / inertia
        dq = dq + acc * dt
        q = q + dq * dt + 0.5 * acc * dt * dt
    return out


def mean_absolute_error(data: Batch, angles: np.ndarray) -> np.ndarray:
    """Mean absolute error of simulated ``angles`` (sets, logs, steps) per set and log, rad."""
    err = np.abs(angles - data.position[None]) * data.mask[None]
    return err.sum(axis=-1) / data.mask.sum(axis=-1)
