"""Solving for singular configurations and sweeping them (002 Sec. 5, Figures 8-15).

The free angle is phi_n, the joint in front of the last link. Only the last link's
wheel axis moves with it, and its front joint J stays fixed, so the singular values
of phi_n follow in closed form from Theorems 2/4: the axis of link n must pass
through the point P where the axes of the previous two non side-slipping links meet
(the triple condition Eq. (11)/(15) that involves phi_n). With the wheel at
``p_n = J + d_n e_n`` that is ``e_n . (P - J) = d_n``: at most two solutions.
Each candidate is then checked with the full Jacobian rank test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from snake_core.angles import wrap_to_pi
from snake_core.singularity.model import (
    DEFAULT_TOL,
    SingularityInputError,
    SnakeParams,
    check_slipping,
    evaluate,
    geometry,
    grounded_links,
    line_matrix,
    make_params,
)

_COINCIDE_TOL = 1e-10  # sigma_2 / sigma_1 of two axes' line matrix below which they coincide


@dataclass(frozen=True)
class FreeAngleSolution:
    """Singular values of the free angle phi_n.

    Attributes:
        solutions: phi_n values in (-pi, pi] at which the robot is singular, rad.
        margins: The Jacobian margin at each solution (0 up to rounding of the inputs).
        candidates: Closed-form candidates before the full rank check, rad.
        every_value: Singular whatever phi_n (link n side-slips, or too few other axes).
        note: How the answer was found, for humans.
    """

    solutions: list[float]
    margins: list[float]
    candidates: list[float] = field(default_factory=list)
    every_value: bool = False
    note: str = ""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready dictionary."""
        return {"solutions": self.solutions, "margins": self.margins, "candidates": self.candidates,
                "every_value": self.every_value, "note": self.note}


def free_angle_candidates(params: SnakeParams, phi_fixed: Sequence[float] | np.ndarray, slipping: frozenset[int]
                          ) -> tuple[list[float], str]:
    """Closed-form phi_n making the last axis pass through the previous two axes' meeting point.

    Args:
        params: Link parameters (n links).
        phi_fixed: phi_2..phi_(n-1), rad.
        slipping: 1-based side-slipping links.

    Returns:
        (candidates, status) with status ``"ok"``, ``"every_value"`` (phi_n cannot
        change the verdict: link n slips or fewer than two other axes remain, or they
        coincide) or ``"none"`` (no real solution).
    """
    n = params.n
    if n in slipping:
        return [], "every_value"
    fixed = [g for g in grounded_links(n, slipping) if g != n]
    if len(fixed) < 2:
        return [], "every_value"
    phi = np.concatenate([np.asarray(phi_fixed, dtype=float), [0.0]])
    geo = geometry(params, phi)
    scale = params.length_scale
    last_two = line_matrix(params, geo, fixed[-2:])
    _, s2, vt2 = np.linalg.svd(last_two)
    if s2[1] > _COINCIDE_TOL * s2[0]:
        h = vt2[-1]  # meeting point of the last two fixed axes (homogeneous, L_bar units)
    else:
        # The last two axes coincide (Lemma 1/3): use every fixed axis.
        m = line_matrix(params, geo, fixed)
        _, s, vt = np.linalg.svd(m)
        if s.size < 2 or s[1] <= _COINCIDE_TOL * s[0]:
            return [], "every_value"
        h = vt[-1]
    joint = geo.front_joints[n - 1] / scale
    u = h[:2] - joint * h[2]
    radius = math.hypot(float(u[0]), float(u[1]))
    rhs = params.d[n - 1] / scale * float(h[2])
    if radius == 0.0 or abs(rhs) > radius:
        return [], "none"
    alpha = math.atan2(float(u[1]), float(u[0]))
    beta = math.acos(max(-1.0, min(1.0, rhs / radius)))
    theta_prev = float(geo.theta[n - 2])
    cands = sorted({round(wrap_to_pi(alpha + sgn * beta - theta_prev), 15) for sgn in (1.0, -1.0)})
    return [float(c) for c in cands], "ok"


def solve_free_angle(params: SnakeParams, phi_fixed: Sequence[float], slipping: Iterable[int] | None = None,
                     tol: float = DEFAULT_TOL) -> FreeAngleSolution:
    """Every phi_n in (-pi, pi] that makes the robot singular, given phi_2..phi_(n-1).

    Args:
        params: Link parameters (n links).
        phi_fixed: The n-2 fixed relative angles phi_2..phi_(n-1), rad.
        slipping: 1-based side-slipping links.
        tol: A candidate is kept when the full Jacobian margin there is <= tol.

    Returns:
        The solutions, the margin at each, and the closed-form candidates.
    """
    fixed = np.asarray(phi_fixed, dtype=float).reshape(-1)
    if fixed.shape != (params.n - 2,):
        raise SingularityInputError(
            f"angles: solve takes phi_2..phi_(n-1), {params.n - 2} values for {params.n} links, got {fixed.size}")
    if not np.all(np.isfinite(fixed)):
        raise SingularityInputError("angles: values must be finite")
    slip = check_slipping(params.n, slipping)
    cands, status = free_angle_candidates(params, fixed, slip)
    if status == "every_value":
        rep = evaluate(params, np.concatenate([fixed, [0.0]]), slip, tol)
        if rep.singular:
            return FreeAngleSolution([], [], [], every_value=True,
                                     note="singular for every phi_n: phi_n moves no constraining wheel axis")
        return FreeAngleSolution([], [], [], note="phi_n moves no constraining wheel axis and the rest is regular")
    sols, margins = [], []
    for c in cands:
        rep = evaluate(params, np.concatenate([fixed, [c]]), slip, tol)
        if rep.singular:
            sols.append(c)
            margins.append(rep.margin)
    if not cands:
        note = "the last wheel axis can never pass through the meeting point of the previous two"
    elif not sols:
        note = "the fixed links' wheel axes do not meet at one point: no phi_n makes the robot singular"
    else:
        note = "last axis through the meeting point of the previous two (Eq. (15)), checked by the rank of J_s"
    return FreeAngleSolution(sols, margins, cands, note=note)


# --- sweeps: Figures 8-11 ------------------------------------------------------------


TABLE3_CASES: dict[int, tuple[float, float]] = {1: (1.0, 1.0), 2: (0.7, 0.5), 3: (0.2, 0.8)}
"""Table 3 of 002: case -> (d_i, l_i), m, for every link."""


def singular_set_3link(params: SnakeParams, phi2_grid: np.ndarray) -> np.ndarray:
    """Singular set of a 3-link robot without side-slipping (Figure 8): rows (phi_2, phi_3), rad."""
    if params.n != 3:
        raise SingularityInputError("d/l: the 3-link singular set needs 3 links")
    rows: list[tuple[float, float]] = []
    for p2 in phi2_grid:
        cands, _ = free_angle_candidates(params, [float(p2)], frozenset())
        rows.extend((float(p2), c) for c in cands)
    return np.array(rows).reshape(-1, 2)


def singular_set_4link(params: SnakeParams, phi2_grid: np.ndarray, slipping: Iterable[int] | None = None,
                       phi3_grid: np.ndarray | None = None) -> np.ndarray:
    """Singular set of a 4-link robot (Figures 9-11): rows (phi_2, phi_3, phi_4), rad.

    Without side-slipping (Figure 9) the set is a curve: phi_3 from the triple
    (1, 2, 3), then phi_4 from (2, 3, 4). With link 3 side-slipping (Figures 10-11)
    the axes of links 1, 2, 4 always have a closed-form phi_4 per (phi_2, phi_3): a
    surface sampled on ``phi2_grid`` x ``phi3_grid``.
    """
    if params.n != 4:
        raise SingularityInputError("d/l: the 4-link singular set needs 4 links")
    slip = check_slipping(4, slipping)
    rows: list[tuple[float, float, float]] = []
    if not slip:
        head = make_params(3, params.d[:3], params.ell[:3])
        for p2 in phi2_grid:
            for p3 in free_angle_candidates(head, [float(p2)], frozenset())[0]:
                for p4 in free_angle_candidates(params, [float(p2), p3], slip)[0]:
                    rows.append((float(p2), p3, p4))
        return np.array(rows).reshape(-1, 3)
    grid3 = phi2_grid if phi3_grid is None else phi3_grid
    for p2 in phi2_grid:
        for p3 in grid3:
            cands, status = free_angle_candidates(params, [float(p2), float(p3)], slip)
            if status == "every_value":
                raise SingularityInputError("slipping: every phi_4 is singular for this slipping set")
            rows.extend((float(p2), float(p3), c) for c in cands)
    return np.array(rows).reshape(-1, 3)


@dataclass(frozen=True)
class FigureCase:
    """One of the axis drawings of Figures 12-15.

    Attributes:
        figure: Figure number in 002.
        case: Table 3 case.
        slipping: Side-slipping links (1-based).
        given: The angles the paper fixes, phi_2.. , rad.
        paper: The angles the paper reports for the singular configuration, rad.
    """

    figure: int
    case: int
    slipping: tuple[int, ...]
    given: tuple[float, ...]
    paper: tuple[float, ...]


FIGURE_CASES: tuple[FigureCase, ...] = (
    FigureCase(12, 2, (), (1.2,), (1.38, 1.69)),
    FigureCase(13, 3, (), (math.pi / 3,), (0.81, 0.68)),
    FigureCase(14, 2, (3,), (1.2, -1.2), (1.98,)),
    FigureCase(15, 3, (3,), (math.pi / 3, -1.2), (-1.50,)),
)
"""Figures 12-15 of 002: 4-link robots, Case 2/3, without and with link 3 side-slipping."""


def figure_case_solutions(fc: FigureCase) -> list[tuple[float, ...]]:
    """All singular completions (phi_2, phi_3, phi_4) of a Figure 12-15 setting, rad.

    The paper shows one of them; the others are the second root of each closed-form
    step. Sorted by distance from the paper's numbers, nearest first.
    """
    d, ell = TABLE3_CASES[fc.case]
    params = make_params(4, d, ell)
    slip = frozenset(fc.slipping)
    found: list[tuple[float, ...]] = []
    if len(fc.given) == 2:
        for p4 in free_angle_candidates(params, list(fc.given), slip)[0]:
            found.append((*fc.given, p4))
    else:
        head = make_params(3, d, ell)
        for p3 in free_angle_candidates(head, list(fc.given), frozenset())[0]:
            for p4 in free_angle_candidates(params, [fc.given[0], p3], slip)[0]:
                found.append((fc.given[0], p3, p4))
    target = np.array([*fc.given, *fc.paper])
    return sorted(found, key=lambda s: float(np.sum(np.abs(np.array(s) - target))))
