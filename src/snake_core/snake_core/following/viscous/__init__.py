"""Viscous-friction kinematic model of an N-link snake among pegs (001 Sec. II, Eq. 1-10)."""

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
