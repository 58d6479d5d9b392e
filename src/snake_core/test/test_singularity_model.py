"""Singularity analysis of the passive-wheel snake (002): paper numbers and independent checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from snake_core.singularity import (
    FIGURE_CASES,
    TABLE3_CASES,
    FastEvaluator,
    SingularityInputError,
    evaluate,
    figure_case_solutions,
    jacobian_g,
    jacobian_s,
    make_params,
    singular_set_3link,
    singular_set_4link,
    solve_free_angle,
)
from snake_core.singularity.model import check_slipping, eq11, eq15, geometry, svd_margin

# --- an independent geometric model, written here from Fig. 2 of 002 ---------------


def wheel_axes(d, ell, phi):
    """Wheel positions and absolute angles, built link by link from the figure (not the library)."""
    theta = [0.0]
    for p in phi:
        theta.append(theta[-1] + p)
    pos = [(0.0, 0.0)]
    for i in range(1, len(d)):
        x, y = pos[-1]
        x += ell[i - 1] * math.cos(theta[i - 1]) + d[i] * math.cos(theta[i])
        y += ell[i - 1] * math.sin(theta[i - 1]) + d[i] * math.sin(theta[i])
        pos.append((x, y))
    return pos, theta


def intersect(p1, t1, p2, t2):
    """Intersection of the wheel axes (lines through p normal to (cos t, sin t)) by Cramer's rule."""
    a11, a12, b1 = math.cos(t1), math.sin(t1), math.cos(t1) * p1[0] + math.sin(t1) * p1[1]
    a21, a22, b2 = math.cos(t2), math.sin(t2), math.cos(t2) * p2[0] + math.sin(t2) * p2[1]
    det = a11 * a22 - a12 * a21
    return ((b1 * a22 - a12 * b2) / det, (a11 * b2 - b1 * a21) / det)


def concurrency_gap(d, ell, phi, grounded):
    """Signed distance of the last grounded axis from the meeting point of the two before it, m."""
    pos, th = wheel_axes(d, ell, phi)
    a, b, c = (g - 1 for g in grounded[-3:])
    px, py = intersect(pos[a], th[a], pos[b], th[b])
    return math.cos(th[c]) * (px - pos[c][0]) + math.sin(th[c]) * (py - pos[c][1])


def random_params(rng, n):
    return rng.uniform(0.1, 1.0, n), rng.uniform(0.1, 1.0, n)


# --- the paper's numbers -------------------------------------------------------------


@pytest.mark.parametrize("fc", FIGURE_CASES, ids=lambda fc: f"fig{fc.figure}")
def test_figures_12_to_15_reproduced(fc):
    d, ell = TABLE3_CASES[fc.case]
    params = make_params(4, d, ell)
    best = figure_case_solutions(fc)[0]
    # The paper prints 2 decimals (3 in the example's 1.381): agree to its rounding.
    np.testing.assert_allclose(best[len(fc.given):], fc.paper, atol=0.0051)
    rep = evaluate(params, best, fc.slipping)
    assert rep.singular and rep.margin < 1e-12 and rep.rank == 1
    assert rep.geometric_singular and rep.meeting.point is not None
    # Every grounded axis passes through the reported meeting point (Theorem 2 / 4).
    assert rep.meeting.spread < 1e-12


def test_contract_example_evaluate_and_solve():
    params = make_params(4, 0.7, 0.5)
    rep = evaluate(params, [1.2, 1.381, 1.694])
    assert rep.singular and rep.margin < 1e-3
    assert rep.meeting.point is not None
    # Figure 12: axes meet on the axis of link 1 (x = 0), independent intersection of axes 1 and 2.
    pos, th = wheel_axes([0.7] * 4, [0.5] * 4, [1.2, 1.381, 1.694])
    np.testing.assert_allclose(rep.meeting.point, intersect(pos[0], th[0], pos[1], th[1]), atol=2e-3)
    sol = solve_free_angle(params, [1.2, 1.381])
    assert any(abs(s - 1.69) < 0.01 for s in sol.solutions)
    assert not evaluate(params, [1.2, 1.381, 1.0]).singular


def test_case1_uniform_links_singular_only_on_arcs():
    """Case 1 (d = l): the classical result, straight line or arc (or the folded Lemma 1 pose)."""
    params = make_params(3, 1.0, 1.0)
    grid = np.linspace(-2.5, 2.5, 11)
    pts = singular_set_3link(params, grid)
    for p2, p3 in pts:
        assert math.isclose(p3, p2, abs_tol=1e-9) or math.isclose(abs(p3), math.pi, abs_tol=1e-9)
    assert evaluate(make_params(6, 1.0, 1.0), [0.4] * 5).margin < 1e-12
    assert evaluate(make_params(6, 1.0, 1.0), [0.0] * 5).meeting.parallel
    # Non-uniform links: the arc is no longer singular (the paper's first contribution).
    assert evaluate(make_params(3, 0.7, 0.5), [1.5, 1.5]).margin > 0.05


# --- Jacobian vs geometry, independent ------------------------------------------------


@pytest.mark.parametrize("n,slipping", [(3, ()), (4, ()), (5, (3,)), (6, (1, 4)), (7, (2, 3, 6)), (8, (8,))])
def test_rank_test_agrees_with_independent_axis_geometry(n, slipping):
    rng = np.random.default_rng(100 + n)
    slip = check_slipping(n, slipping)
    grounded = [i for i in range(1, n + 1) if i not in slip]
    checked = 0
    for _ in range(40):
        d, ell = random_params(rng, n)
        params = make_params(n, d, ell)
        phi = rng.uniform(-2.0, 2.0, n - 1)
        # Regular at random: both criteria say so.
        rep = evaluate(params, phi, slipping)
        assert rep.margin > 1e-6 and rep.meeting.residual > 1e-6
        if len(grounded) > 3:
            continue  # one free angle cannot make >= 4 random axes concurrent
        # Make it singular with the independent geometry: root of the concurrency gap in the
        # angle of the joint in front of the last grounded link.
        j = grounded[-1] - 2

        def gap(x, phi=phi, j=j, d=d, ell=ell):
            q = phi.copy()
            q[j] = x
            return concurrency_gap(d, ell, q, grounded)

        xs = np.linspace(-math.pi + 1e-3, math.pi - 1e-3, 721)
        vals = [gap(x) for x in xs]
        for k in range(len(xs) - 1):
            if vals[k] * vals[k + 1] < 0 and abs(vals[k]) + abs(vals[k + 1]) < 1.0:
                q = phi.copy()
                q[j] = brentq(gap, xs[k], xs[k + 1], xtol=1e-14)
                rep = evaluate(params, q, slipping)
                assert rep.margin < 1e-9, (q, rep.margin)
                assert rep.rank == 1 and rep.singular and rep.geometric_singular
                checked += 1
    assert checked >= 10 or len(grounded) > 3


def test_det_jacobian_vanishes_exactly_where_axes_meet_along_a_path():
    """eta = 3: det J_s and the independent concurrency gap have the same roots on a random path."""
    rng = np.random.default_rng(7)
    for slipping in ((), (2,), (3, 4)):
        n = 3 + len(slipping)
        grounded = [i for i in range(1, n + 1) if i not in slipping]
        d, ell = random_params(rng, n)
        params = make_params(n, d, ell)
        a, b = rng.uniform(-2, 2, n - 1), rng.uniform(-2, 2, n - 1)
        ts = np.linspace(0.0, 1.0, 801)

        def det_j(t, params=params, a=a, b=b, slip=frozenset(slipping)):
            return np.linalg.det(jacobian_s(params, a + t * (b - a), slip))

        det = [det_j(t) for t in ts]
        for k in range(len(ts) - 1):
            if det[k] * det[k + 1] < 0:
                t = brentq(det_j, ts[k], ts[k + 1], xtol=1e-14)
                assert abs(concurrency_gap(d, ell, a + t * (b - a), grounded)) < 1e-8


def test_svd_margin_is_unit_free():
    rng = np.random.default_rng(3)
    d, ell = random_params(rng, 6)
    phi = rng.uniform(-1, 1, 5)
    m1 = evaluate(make_params(6, d, ell), phi, [3]).margin
    m2 = evaluate(make_params(6, 7.5 * d, 7.5 * ell), phi, [3]).margin
    assert math.isclose(m1, m2, rel_tol=1e-12) and 0.0 < m1 <= 1.0


# --- pairwise conditions, Eq. (11) and (15) -------------------------------------------


def test_eq11_is_the_determinant_of_jg_for_three_links():
    rng = np.random.default_rng(11)
    for _ in range(20):
        d, ell = random_params(rng, 3)
        params = make_params(3, d, ell)
        phi = rng.uniform(-3, 3, 2)
        # J_2 = Jbar_2 A_2 A_1 (proof of Theorem 1); |A_2| = -l_1/d_2 and Jbar's first row is scaled by d_2/l_1.
        assert math.isclose(np.linalg.det(jacobian_g(params, phi)), -ell[0] / d[1] * eq11(params, phi, 2),
                            rel_tol=1e-9, abs_tol=1e-12)


def test_eq15_reduces_to_eq11_and_vanishes_at_singularities():
    rng = np.random.default_rng(12)
    d, ell = random_params(rng, 5)
    params = make_params(5, d, ell)
    phi = rng.uniform(-2, 2, 4)
    geo = geometry(params, phi)
    for i in (2, 3, 4):
        assert math.isclose(eq15(params, geo, i - 1, i, i + 1), eq11(params, phi, i), rel_tol=1e-12)
    fc = FIGURE_CASES[2]  # Figure 14, link 3 slipping
    params = make_params(4, *TABLE3_CASES[fc.case])
    best = figure_case_solutions(fc)[0]
    rep = evaluate(params, best, fc.slipping)
    assert len(rep.pairwise) == 1 and abs(rep.pairwise[0]) < 1e-12


# --- degenerate cases of the lemmas ---------------------------------------------------


def test_lemma1_overlapping_axes_named_and_verdicts_agree():
    # l_1 = d_2 and phi_2 = pi: wheels of links 1 and 2 coincide, their axes overlap.
    params = make_params(4, [0.3, 0.4, 0.5, 0.6], [0.4, 0.7, 0.2, 0.3])
    rep = evaluate(params, [math.pi, 0.7, -0.4])
    assert "overlapping_axes:1-2" in rep.degenerate
    # Three distinct lines remain (the overlapped one counted once): not concurrent here.
    assert rep.singular == rep.geometric_singular
    rep3 = evaluate(make_params(3, [0.3, 0.4, 0.5], [0.4, 0.7, 0.2]), [math.pi, 0.9])
    assert "overlapping_axes:1-2" in rep3.degenerate and rep3.singular and rep3.geometric_singular


def test_lemma2_b_singular_named():
    # l_1 = 0: the joint of link 2 sits on the axis of link 1, A_2 (= B_2) is singular.
    params = make_params(4, [0.5, 0.4, 0.6, 0.3], [0.0, 0.5, 0.4, 0.3])
    rep = evaluate(params, [0.5, -0.3, 0.8])
    assert "b_singular:1-2" in rep.degenerate and rep.pairwise[0] is None
    assert rep.singular == rep.geometric_singular
    # With a side-slipping link in between: the joint of link 3 on the axis of link 1.
    params = make_params(3, [0.5, 0.4, 0.6], [0.3, 0.5, 0.4])
    # joint 3 at p1 + l1 e1 + L2 e2; on the axis of link 1 iff l1 + L2 cos(phi_2) = 0.
    phi2 = math.acos(-0.3 / 0.9)
    rep = evaluate(params, [phi2, 0.4], [2])
    assert "b_singular:1-3" in rep.degenerate


def test_too_few_wheels_always_singular():
    params = make_params(5, 0.5, 0.4)
    rep = evaluate(params, [0.3, -0.2, 0.5, 0.1], [2, 3, 4])
    assert rep.singular and rep.margin == 0.0
    assert any(c.startswith("fewer_than_three_wheels") for c in rep.degenerate)
    sol = solve_free_angle(params, [0.3, -0.2, 0.5], [2, 3, 4])
    assert sol.every_value


# --- fast path, solve, sweeps, input errors ---------------------------------------------


@pytest.mark.parametrize("n", [4, 8, 16])
def test_fast_path_matches_reference(n):
    rng = np.random.default_rng(n)
    for slipping in ((), (1,), (2, 3), tuple(range(2, n, 3))):
        d, ell = random_params(rng, n)
        params = make_params(n, d, ell)
        fast = FastEvaluator(params, slipping)
        for _ in range(5):
            phi = rng.uniform(-2.5, 2.5, n - 1)
            ref = evaluate(params, phi, slipping)
            got = fast.evaluate(list(phi))
            assert math.isclose(got.margin, ref.margin, rel_tol=1e-9, abs_tol=1e-12)
            sv, _ = svd_margin(params, jacobian_s(params, phi, frozenset(slipping)))
            assert math.isclose(got.sigma_max, sv[0], rel_tol=1e-9)
            if ref.meeting.point is not None:
                np.testing.assert_allclose((got.meeting_x, got.meeting_y), ref.meeting.point, rtol=1e-7, atol=1e-9)


def test_solve_finds_every_root_of_the_independent_gap():
    rng = np.random.default_rng(21)
    for slipping in ((), (3,), (2, 4)):
        n = 3 + len(slipping)
        grounded = [i for i in range(1, n + 1) if i not in slipping]
        d, ell = random_params(rng, n)
        params = make_params(n, d, ell)
        fixed = rng.uniform(-1.5, 1.5, n - 2)
        sol = solve_free_angle(params, fixed, slipping, tol=1e-9)
        xs = np.linspace(-math.pi, math.pi, 2001)

        def gap(x, d=d, ell=ell, fixed=fixed, grounded=grounded):
            return concurrency_gap(d, ell, np.append(fixed, x), grounded)

        vals = [gap(x) for x in xs]
        roots = [brentq(gap, xs[k], xs[k + 1])
                 for k in range(len(xs) - 1) if vals[k] * vals[k + 1] < 0 and abs(vals[k] - vals[k + 1]) < 1.0]
        assert len(roots) == len(sol.solutions)
        for r in roots:
            assert min(abs(math.remainder(r - s, 2 * math.pi)) for s in sol.solutions) < 1e-8


def test_sweep_4link_points_are_singular():
    rng = np.random.default_rng(5)
    for case, slipping in ((2, ()), (3, ()), (2, (3,)), (3, (3,))):
        params = make_params(4, *TABLE3_CASES[case])
        grid = np.linspace(-3.0, 3.0, 13)
        pts = singular_set_4link(params, grid, slipping)
        assert len(pts) > 10
        for row in pts[rng.choice(len(pts), 8, replace=False)]:
            assert evaluate(params, row, slipping).margin < 1e-9


def test_bad_input_names_the_field():
    with pytest.raises(SingularityInputError, match="d:"):
        make_params(4, [0.5, 0.5], 0.5)
    with pytest.raises(SingularityInputError, match="d:"):
        make_params(3, [0.5, 0.0, 0.5], 0.5)
    with pytest.raises(SingularityInputError, match="angles"):
        evaluate(make_params(4, 0.5, 0.5), [0.1, 0.2])
    with pytest.raises(SingularityInputError, match="angles"):
        evaluate(make_params(3, 0.5, 0.5), [0.1, float("nan")])
    with pytest.raises(SingularityInputError, match="slipping"):
        evaluate(make_params(3, 0.5, 0.5), [0.1, 0.2], [4])
    with pytest.raises(SingularityInputError, match="angles"):
        solve_free_angle(make_params(4, 0.5, 0.5), [0.1, 0.2, 0.3])
