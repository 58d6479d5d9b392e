"""Viscous-friction kinematic model of an N-link snake among pegs (001 Sec. II, Eq. 1-10).

- :mod:`~snake_core.following.viscous.model`: the model itself: body Jacobians, viscous forces
  with a Gaussian hump of lateral friction per peg, the force balance solved for the head's
  velocity (001 Eq. 1-10), open-loop integration.
- :mod:`~snake_core.following.viscous.serpenoid_run`: the model driven by the serpenoid gait,
  open-loop runs and peg-density sweeps (001 Sec. II, VI).
- :mod:`~snake_core.following.viscous.closed_loop`: the head-angle PD follower closing the loop
  on the model (001 Sec. IV-V), as a whole-plan run and as the DFS's branch tester.
"""

from __future__ import annotations

from snake_core.following.viscous.model import (
    Trajectory,
    ViscousModelError,
    ViscousParams,
    ViscousSnake,
    lateral_friction,
    random_pegs,
    shape_terms,
    simulate,
)
from snake_core.following.viscous.serpenoid_run import density_sweep, equal_link_robot, peg_field_for, run_serpenoid

__all__ = [
    "Trajectory",
    "ViscousModelError",
    "ViscousParams",
    "ViscousSnake",
    "density_sweep",
    "equal_link_robot",
    "lateral_friction",
    "peg_field_for",
    "random_pegs",
    "run_serpenoid",
    "shape_terms",
    "simulate",
]
