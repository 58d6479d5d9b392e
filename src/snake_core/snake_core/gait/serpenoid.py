"""Serpenoid lateral undulation with a travelling head-angle offset (001 Sec. IV).

Joint i (1-based from the head) follows::

    theta_i = alpha sin(psi - (i - 1) beta) + gamma_i,   psi = int omega dt

and the head-angle command gamma of 001's PD law (Eq. 11) "travels through the whole
body": joint i takes the value the head had when the wave was (i - 1) beta earlier,
gamma_i(psi) = gamma_1(psi - (i - 1) beta). Delaying in gait phase rather than in time
keeps the offset locked to the body wave when omega changes, so every link passes the
same point with the same bend (follow-the-leader).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snake_core.errors import GaitError
from snake_core.gait.base import Gait, GaitCommand
from snake_core.gait.reduction import TwistMapping
from snake_core.robot import RobotModel


class SerpenoidMapping(TwistMapping):
    """cmd_vel <-> (omega, head_offset): forward speed from the wave frequency, turning from the offset.

    Args:
        k: Forward speed per unit of wave frequency, m/rad.
        turn_gain: Head offset per unit of commanded yaw rate, rad per (rad/s).
        omega_max: Largest |omega|, rad/s.
        offset_max: Largest |head offset|, rad.
    """

    def __init__(self, k: float, turn_gain: float, omega_max: float, offset_max: float) -> None:
        self.k, self.turn_gain, self.omega_max, self.offset_max = k, turn_gain, omega_max, offset_max

    def to_command(self, v: float, omega: float) -> tuple[float, float]:
        """(v, omega) -> (wave frequency rad/s, head offset rad)."""
        return (
            float(np.clip(v / self.k, -self.omega_max, self.omega_max)),
            float(np.clip(omega * self.turn_gain, -self.offset_max, self.offset_max)),
        )

    def to_twist(self, command: tuple[float, ...]) -> tuple[float, float]:
        """(omega, offset) -> (v, omega) of the linear model."""
        return self.k * command[0], command[1] / self.turn_gain


class SerpenoidGait(Gait):
    """Lateral undulation for the planar wheeled snake (001 Sec. IV).

    Native command: (omega rad/s, head_offset rad).

    Args:
        robot: A description with lateral joints; parameters from ``gaits.serpenoid``.
        **overrides: Replace any ``gaits.serpenoid`` entry.
    """

    command_names = ("omega", "head_offset")

    def __init__(self, robot: RobotModel, **overrides: Any) -> None:
        super().__init__(robot)
        cfg = {**robot.gait("serpenoid"), **overrides}
        self.alpha = float(cfg["amplitude"])
        self.beta = float(cfg["spatial_frequency"])
        if self.beta <= 0:
            raise GaitError(f"gaits.serpenoid.spatial_frequency must be positive, got {self.beta}")
        self.mapping = SerpenoidMapping(
            float(cfg.get("k", 0.05)), float(cfg.get("turn_gain", 0.5)),
            float(cfg["omega_max"]), float(cfg.get("offset_max", 0.8)),
        )
        self.n = len(robot.joints)
        self._lag = self.beta * np.arange(self.n)
        self.reset()

    def reset(self) -> None:
        """Phase zero, straight offsets."""
        self.psi = 0.0
        self._hist_psi: list[float] = [0.0]
        self._hist_gamma: list[float] = [0.0]

    def offsets(self) -> np.ndarray:
        """gamma_i for every joint: the head offset delayed by (i - 1) beta of phase, rad."""
        hp = np.asarray(self._hist_psi)
        hg = np.asarray(self._hist_gamma)
        query = self.psi - self._lag
        if hp[-1] < hp[0]:  # running backwards: phase history decreasing
            hp, hg, query = -hp[::-1], hg[::-1], -(self.psi + self._lag)
        return np.interp(query, hp, hg, left=hg[0], right=hg[-1])

    def step(self, dt: float, command: GaitCommand) -> np.ndarray:
        """Advance by ``dt`` s; return joint targets, rad."""
        omega, gamma = self.check_command(command)
        self.psi += omega * dt
        if abs(self.psi - self._hist_psi[-1]) > 1e-12 or gamma != self._hist_gamma[-1]:
            if (self.psi - self._hist_psi[-1]) * (self._hist_psi[-1] - self._hist_psi[0]) < 0:
                self._hist_psi, self._hist_gamma = [self._hist_psi[-1]], [self._hist_gamma[-1]]  # direction change
            if abs(self.psi - self._hist_psi[-1]) > 1e-12:
                self._hist_psi.append(self.psi)
                self._hist_gamma.append(gamma)
            else:
                self._hist_gamma[-1] = gamma
        horizon = self._lag[-1] + 1.0
        while len(self._hist_psi) > 2 and abs(self.psi - self._hist_psi[1]) > horizon:
            self._hist_psi.pop(0)
            self._hist_gamma.pop(0)
        return self.alpha * np.sin(self.psi - self._lag) + self.offsets()

    def state_dict(self) -> dict[str, float]:
        """Wave phase and current head offset."""
        return {"psi": self.psi, "head_offset": self._hist_gamma[-1]}
