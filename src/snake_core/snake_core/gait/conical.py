"""Conical sidewinding: the baseline locomotive reduction of 003 (refs [7], [12]).

Sidewinding as a gait equation (Gong et al. 2013, "Extended gait equation for
sidewinding"): dorsal and lateral joints carry travelling sine waves a quarter period
apart; tapering both amplitudes linearly along the body turns the elliptical helix
into a conical one, and the sidewinding then follows an arc whose curvature grows
with the taper (Gong et al. derive the analytic map; Xiao et al. 2015 use it to
reduce the snake to a differential-drive car). Here, with x_i in [-1, 1] the joint's
normalised position along the body (head -1) and psi = int omega_s dt::

    theta_lat,i = A_lat (1 + taper x_i) sin(nu s_i / L0 + psi)
    theta_dor,i = A_dor (1 + taper x_i) sin(nu s_i / L0 + psi + delta)
    theta_twi,i = 0            (the baseline uses undulation only)

Native command (omega_s rad/s, taper in [-taper_max, taper_max]). The twist mapping
is the locomotive reduction: speed along the arc v = k omega_s and path curvature
kappa = curvature_max * taper / taper_max, so omega = v kappa. The coefficients k
and curvature_max are measured in simulation (the twin calibration, docs/gait.md), not taken
from Gong's FFT fit, which was for a different robot. Like the original, this gait
cannot turn on the spot: a pure rotation command runs the tightest arc.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snake_core.errors import GaitError
from snake_core.gait.base import Gait, GaitCommand
from snake_core.gait.reduction import TwistMapping
from snake_core.robot import RobotModel


class ConicalMapping(TwistMapping):
    """cmd_vel <-> (omega_s, taper) of conical sidewinding (Xiao et al. 2015 style reduction).

    Args:
        k: Speed along the arc per unit of omega_s, m/rad.
        curvature_max: Path curvature at full taper, 1/m.
        taper_max: Largest relative amplitude change from body centre to an end.
        omega_max: Largest |omega_s|, rad/s.
    """

    def __init__(self, k: float, curvature_max: float, taper_max: float, omega_max: float) -> None:
        self.k, self.curvature_max, self.taper_max, self.omega_max = k, curvature_max, taper_max, omega_max

    def to_command(self, v: float, omega: float) -> tuple[float, float]:
        """(v, omega) -> (omega_s, taper); a pure rotation runs the tightest arc."""
        if abs(v) < 1e-9 and abs(omega) < 1e-9:
            return 0.0, 0.0
        if abs(v) < 1e-9 or abs(omega / v) > self.curvature_max:
            speed = abs(omega) / self.curvature_max
            kappa = self.curvature_max * np.sign(omega) * (np.sign(v) if v != 0 else 1.0)
            v = speed if v >= 0 else -speed
        else:
            kappa = omega / v
        omega_s = float(np.clip(v / self.k, -self.omega_max, self.omega_max))
        return omega_s, float(self.taper_max * kappa / self.curvature_max)

    def to_twist(self, command: tuple[float, ...]) -> tuple[float, float]:
        """(omega_s, taper) -> (v, omega)."""
        v = self.k * command[0]
        return v, v * self.curvature_max * command[1] / self.taper_max


class ConicalSidewindingGait(Gait):
    """Conical sidewinding on a T-Snake (twist joints held at zero).

    Args:
        robot: A ``tsnake`` description; parameters from ``gaits.conical``.
        **overrides: Replace any ``gaits.conical`` entry.
    """

    command_names = ("omega_s", "taper")
    robot_kinds = ("tsnake",)

    def __init__(self, robot: RobotModel, **overrides: Any) -> None:
        if robot.kind != "tsnake":
            raise GaitError(f"conical sidewinding needs a tsnake robot, got kind {robot.kind!r}")
        super().__init__(robot)
        cfg = {**robot.gait("conical"), **overrides}
        self.amp_dorsal = float(cfg["amplitude_dorsal"])
        self.amp_lateral = float(cfg["amplitude_lateral"])
        self.nu = float(cfg["spatial_frequency"])
        self.delta = float(cfg["phase_offset"])
        self.taper_max = float(cfg["taper_max"])
        if not 0 <= self.taper_max < 1:
            raise GaitError(f"gaits.conical.taper_max must be in [0, 1), got {self.taper_max}")
        self.mapping = ConicalMapping(
            float(cfg["k"]), float(cfg["curvature_max"]), self.taper_max, float(cfg["omega_max"])
        )
        s = robot.joint_arc_positions()
        self._phase0 = self.nu * s / robot.tsnake_body.module_length
        self._x = 2.0 * s / robot.length - 1.0
        types = np.array([j.type for j in robot.joints])
        self._amp = np.where(types == "dorsal", self.amp_dorsal, np.where(types == "lateral", self.amp_lateral, 0.0))
        self._shift = np.where(types == "dorsal", self.delta, 0.0)
        self.psi = 0.0
        self.taper = 0.0

    def reset(self) -> None:
        """Phase back to zero, no taper."""
        self.psi, self.taper = 0.0, 0.0

    def step(self, dt: float, command: GaitCommand) -> np.ndarray:
        """Advance by ``dt`` s with (omega_s, taper); return joint targets, rad."""
        omega_s, taper = self.check_command(command)
        self.psi += omega_s * dt
        self.taper = float(np.clip(taper, -self.taper_max, self.taper_max))
        return self._amp * (1.0 + self.taper * self._x) * np.sin(self._phase0 + self.psi + self._shift)

    def state_dict(self) -> dict[str, float]:
        """Wave phase and taper."""
        return {"psi": self.psi, "taper": self.taper}
