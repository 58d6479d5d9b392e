"""Singularity analysis of planar snakes with passive wheels (002: Nansai, Iwase, Itoh 2018).

- :mod:`.model`: link parameters, the joint kinematics of Eq. (4)-(7), the Jacobians
  J_g (Eq. (8)) and J_s (Eq. (9)-(10)), their SVD margin, the pairwise conditions
  Eq. (11)/(15), the wheel-axis criterion of Theorems 2/4 and the lemma cases.
- :mod:`.fast`: the same margin and meeting point in one scalar pass (monitor rate).
- :mod:`.solve`: the free angle phi_n in closed form, the singular sets of
  Figures 8-11 and the configurations of Figures 12-15.
"""

from __future__ import annotations

from snake_core.singularity.fast import FastEvaluator, FastResult
from snake_core.singularity.model import (
    DEFAULT_TOL,
    SingularityInputError,
    SingularityReport,
    SnakeParams,
    evaluate,
    geometry,
    jacobian_g,
    jacobian_s,
    make_params,
)
from snake_core.singularity.solve import (
    FIGURE_CASES,
    TABLE3_CASES,
    FreeAngleSolution,
    figure_case_solutions,
    singular_set_3link,
    singular_set_4link,
    solve_free_angle,
)

__all__ = [
    "DEFAULT_TOL",
    "FIGURE_CASES",
    "TABLE3_CASES",
    "FastEvaluator",
    "FastResult",
    "FreeAngleSolution",
    "SingularityInputError",
    "SingularityReport",
    "SnakeParams",
    "evaluate",
    "figure_case_solutions",
    "geometry",
    "jacobian_g",
    "jacobian_s",
    "make_params",
    "singular_set_3link",
    "singular_set_4link",
    "solve_free_angle",
]
