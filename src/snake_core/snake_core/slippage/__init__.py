"""Pushing and slippage analysis of a planar snake touching one object (paper 004, Reyes & Ma).

- :mod:`~snake_core.slippage.model`: kinematics, inertia, constraint / grasp matrices (Eq. 3-11).
- :mod:`~snake_core.slippage.dynamics`: projectors, accelerations, norms, slippage ratio,
  input ellipsoid and the bounded (friction-limited) problem (Eq. 12-31).
- :mod:`~snake_core.slippage.studies`: the paper's case studies (sweeps, Table 2 summary).
"""

from __future__ import annotations

from snake_core.slippage.dynamics import (
    Evaluation,
    constraint_metric,
    constraint_projector,
    ellipsoid_inputs,
    equality_solution,
    evaluate,
    input_ellipsoid,
    input_maps,
    norm_tensors,
    orthogonal_projector,
    solve_box_lcp,
    unit_directions,
)
from snake_core.slippage.model import (
    SCENARIOS,
    ConstrainedSystem,
    SlippageError,
    SnakeObjectParams,
    build_system,
    feasible,
    kinematics,
    mass_matrix,
    polar_com,
)

__all__ = [
    "SCENARIOS",
    "ConstrainedSystem",
    "Evaluation",
    "SlippageError",
    "SnakeObjectParams",
    "build_system",
    "constraint_metric",
    "constraint_projector",
    "ellipsoid_inputs",
    "equality_solution",
    "evaluate",
    "feasible",
    "input_ellipsoid",
    "input_maps",
    "kinematics",
    "mass_matrix",
    "norm_tensors",
    "orthogonal_projector",
    "polar_com",
    "solve_box_lcp",
    "unit_directions",
]
