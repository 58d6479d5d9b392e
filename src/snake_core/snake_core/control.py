"""The control period shared by the gait, the simulated twin and the experiments."""

from __future__ import annotations

CONTROL_PERIOD_S = 0.02  # s: 003's Algorithm 1 time step; joint_commands at 50 Hz
CONTROL_RATE_HZ = round(1.0 / CONTROL_PERIOD_S)  # Hz
