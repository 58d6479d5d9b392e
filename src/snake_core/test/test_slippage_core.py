"""Invariants of the slippage model (paper 004) and checks against independent computations."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.slippage import (
    SlippageError,
    SnakeObjectParams,
    build_system,
    constraint_metric,
    constraint_projector,
    ellipsoid_inputs,
    equality_solution,
    evaluate,
    input_ellipsoid,
    input_maps,
    norm_tensors,
    orthogonal_projector,
    polar_com,
    solve_box_lcp,
    unit_directions,
)
from snake_core.slippage.studies import joint_grid, load_case_study, params_from_config, sweep, table_2


def random_params(rng: np.random.Generator, n_joints: int, **kw: object) -> SnakeObjectParams:
    n_l = n_joints + 1
    lengths = tuple(rng.uniform(0.08, 0.3, n_l))
    contact = int(rng.integers(0, n_l))
    base: dict[str, object] = dict(
        masses=tuple(rng.uniform(0.3, 2.0, n_l)), lengths=lengths, inertias=tuple(rng.uniform(5e-4, 5e-3, n_l)),
        kappa=float(rng.uniform(0.5, 200)), mu_s=float(rng.uniform(0.02, 0.5)), contact_link=contact,
        contact_offset=float(rng.uniform(-0.4, 0.4) * lengths[contact]), contact_side=int(rng.choice([-1, 1])),
        object_com_distance=float(rng.uniform(0.02, 0.3)), object_com_lateral=float(rng.uniform(-0.05, 0.05)),
        object_gyration=float(rng.uniform(0.03, 0.2)))
    base.update(kw)
    return SnakeObjectParams(**base)  # type: ignore[arg-type]


def random_q(rng: np.random.Generator, params: SnakeObjectParams, count: int) -> np.ndarray:
    q = np.empty((count, params.n_s))
    q[:, :2] = rng.uniform(-2, 2, (count, 2))
    q[:, 2] = rng.uniform(-np.pi, np.pi, count)
    q[:, 3:] = rng.uniform(-2.4, 2.4, (count, params.n_a))
    return q


CASES = [(seed, n_j) for seed in range(3) for n_j in (1, 2, 3, 5)]


# --- independent model: finite-difference kinematics + KKT ----------------------------
def fk(params: SnakeObjectParams, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """COM positions and headings written directly from the geometry (no Jacobians)."""
    heads = q[2] + np.concatenate([[0.0], np.cumsum(q[3:])])
    coms = [q[:2].copy()]
    for i in range(1, params.n_links):
        prev = coms[-1] + 0.5 * params.lengths[i - 1] * np.array([np.cos(heads[i - 1]), np.sin(heads[i - 1])])
        coms.append(prev + 0.5 * params.lengths[i] * np.array([np.cos(heads[i]), np.sin(heads[i])]))
    return np.array(coms), heads


def contact_point(params: SnakeObjectParams, q: np.ndarray) -> np.ndarray:
    coms, heads = fk(params, q)
    c = params.contact_link
    return coms[c] + params.contact_offset * np.array([np.cos(heads[c]), np.sin(heads[c])])


def fd_jac(fun, q: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = []
    for i in range(q.size):
        dq = np.zeros_like(q)
        dq[i] = h
        cols.append((np.asarray(fun(q + dq)) - np.asarray(fun(q - dq))).ravel() / (2 * h))
    return np.stack(cols, axis=-1)


def kkt_reference(params: SnakeObjectParams, q: np.ndarray, scenario: int, tau: np.ndarray):
    """Constrained dynamics from a Lagrange-multiplier (KKT) system, all constraints active."""
    n_s = params.n_s
    m = np.zeros((n_s, n_s))
    for i in range(params.n_links):
        jv = fd_jac(lambda x, i=i: fk(params, x)[0][i], q)
        jw = fd_jac(lambda x, i=i: fk(params, x)[1][i], q)
        m += params.masses[i] * jv.T @ jv + params.inertias[i] * jw.T @ jw
    _, heads = fk(params, q)
    hc = heads[params.contact_link]
    nrm = params.contact_side * np.array([-np.sin(hc), np.cos(hc)])
    pc = contact_point(params, q)
    p_obj = pc + params.object_com_distance * nrm + params.object_com_lateral * np.array([np.cos(hc), np.sin(hc)])
    r = pc - p_obj
    rows = [np.concatenate([-nrm @ fd_jac(lambda x: contact_point(params, x), q),
                            [nrm[0], nrm[1], r[0] * nrm[1] - r[1] * nrm[0]]])]
    if scenario in (2, 3):
        for k in params.wheels:
            lat = np.array([-np.sin(heads[k]), np.cos(heads[k])])
            rows.append(np.concatenate([-lat @ fd_jac(lambda x, k=k: fk(params, x)[0][k], q), np.zeros(3)]))
    a = np.array(rows)
    i_obj = params.kappa * params.m_ref * np.diag([1, 1, params.object_gyration**2])
    big = np.zeros((params.n, params.n))
    big[:n_s, :n_s] = m
    big[n_s:, n_s:] = i_obj
    nc = a.shape[0]
    kkt = np.block([[big, -a.T], [a, np.zeros((nc, nc))]])
    f = np.zeros(params.n)
    f[3:n_s] = tau
    sol = np.linalg.solve(kkt, np.concatenate([f, np.zeros(nc)]))
    return sol[:params.n], sol[params.n:], m


@pytest.mark.parametrize(("seed", "n_joints", "scenario"), [(s, n, sc) for s, n in CASES[:8] for sc in (1, 3)])
def test_projector_solution_matches_kkt(seed: int, n_joints: int, scenario: int) -> None:
    rng = np.random.default_rng(seed)
    params = random_params(rng, n_joints)
    q = random_q(rng, params, 1)[0]
    tau = rng.normal(0, 0.1, params.n_a)
    acc_ref, lam_ref, m_ref = kkt_reference(params, q, scenario, tau)
    system = build_system(params, q, scenario)
    np.testing.assert_allclose(system.mass, m_ref, rtol=1e-6, atol=1e-8)
    f = np.zeros((1, params.n))
    f[0, 3:params.n_s] = tau
    lam, acc = equality_solution(system, f)
    np.testing.assert_allclose(acc[0], acc_ref, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(lam[0], lam_ref, rtol=1e-5, atol=1e-8)
    # Eq. (22)-(25) and (28)-(29) give the same accelerations and norms.
    maps = input_maps(system)
    np.testing.assert_allclose(maps.qdd_tau @ tau, acc_ref[:params.n_s], rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(maps.aobj_tau @ tau, acc_ref[params.n_s:], rtol=1e-5, atol=1e-8)
    xi, omega = norm_tensors(system)
    i_obj = system.inertia[params.n_s:, params.n_s:]
    assert tau @ xi @ tau == pytest.approx(acc_ref[:params.n_s] @ m_ref @ acc_ref[:params.n_s], rel=1e-5)
    assert tau @ omega @ tau == pytest.approx(acc_ref[params.n_s:] @ i_obj @ acc_ref[params.n_s:], rel=1e-5)
    # The inequality-aware solver agrees whenever the contact pushes.
    ev = evaluate(system, tau[None, :] * (1 if lam_ref[0] > 0 else -1))
    assert ev.lam[0, 0] > 0
    np.testing.assert_allclose(np.abs(ev.qdd[0]), np.abs(acc_ref[:params.n_s]), rtol=1e-5, atol=1e-8)


def test_object_wrench_maps_match_kkt() -> None:
    """Eq. (23) and (25): response to a wrench on the object, against the KKT system."""
    rng = np.random.default_rng(7)
    params = random_params(rng, 3)
    q = random_q(rng, params, 1)[0]
    system = build_system(params, q, 3)
    fo = np.array([0.3, -0.2, 0.05])
    f = np.zeros((1, params.n))
    f[0, params.n_s:] = fo
    _, acc = equality_solution(system, f)
    maps = input_maps(system)
    np.testing.assert_allclose(maps.qdd_fobj @ fo, acc[0, :params.n_s], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(maps.aobj_fobj @ fo, acc[0, params.n_s:], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("seed", "n_joints"), CASES)
@pytest.mark.parametrize("scenario", [1, 2, 3])
def test_projectors_are_projectors(seed: int, n_joints: int, scenario: int) -> None:
    rng = np.random.default_rng(seed)
    params = random_params(rng, n_joints)
    system = build_system(params, random_q(rng, params, 5), scenario)
    phi = constraint_projector(system)
    perp = orthogonal_projector(system)
    at = np.swapaxes(system.constraint, -1, -2)
    eye_c = np.broadcast_to(np.eye(system.n_c), phi[..., :, :system.n_c].shape)
    np.testing.assert_allclose(phi @ at, eye_c, atol=1e-9)  # Eq. (15): left inverse of A^T
    np.testing.assert_allclose(perp @ perp, perp, atol=1e-9)  # Eq. (19) idempotent
    np.testing.assert_allclose(system.constraint @ system.inertia_inv @ perp, 0, atol=1e-9)  # A a = 0
    assert np.all(np.linalg.eigvalsh(constraint_metric(system)) > 0)


@pytest.mark.parametrize(("seed", "n_joints"), CASES)
@pytest.mark.parametrize("scenario", [1, 2, 3])
def test_slippage_ratio_in_unit_interval(seed: int, n_joints: int, scenario: int) -> None:
    rng = np.random.default_rng(100 + seed)
    params = random_params(rng, n_joints)
    system = build_system(params, random_q(rng, params, 20), scenario)
    tau = ellipsoid_inputs(system, unit_directions(params.n_a, 24), (0.2, 1.0, 5.0 / 5.0)) * rng.uniform(0.1, 30)
    ev = evaluate(system, tau)
    assert np.all(ev.sr >= 0) and np.all(ev.sr <= 1)
    assert np.all(ev.a_obj_norm >= 0) and np.all(ev.qdd_norm >= 0)
    assert np.all(ev.lam[..., 0] >= -1e-12)  # the contact only pushes
    # the contact never penetrates and is complementary with its force
    assert np.all(ev.constraint_accel[..., 0] >= -1e-8 * (1 + np.abs(ev.qdd).max()))
    np.testing.assert_allclose(ev.lam[..., 0] * ev.constraint_accel[..., 0], 0, atol=1e-9)


@pytest.mark.parametrize(("seed", "n_joints"), CASES)
def test_ideal_wheels_stop_lateral_motion(seed: int, n_joints: int) -> None:
    rng = np.random.default_rng(200 + seed)
    params = random_params(rng, n_joints)
    system = build_system(params, random_q(rng, params, 10), 3)
    tau = ellipsoid_inputs(system, unit_directions(params.n_a, 16))
    ev = evaluate(system, tau)
    scale = np.abs(ev.qdd).max()
    np.testing.assert_allclose(ev.constraint_accel[..., 1:], 0, atol=1e-9 * scale)
    pushing = ev.lam[..., 0] > 0
    np.testing.assert_allclose(ev.constraint_accel[..., 0][pushing], 0, atol=1e-9 * scale)


@pytest.mark.parametrize(("seed", "n_joints"), CASES)
@pytest.mark.parametrize("scenario", [1, 2, 3])
def test_independent_of_world_frame(seed: int, n_joints: int, scenario: int) -> None:
    rng = np.random.default_rng(300 + seed)
    params = random_params(rng, n_joints)
    q = random_q(rng, params, 6)
    alpha = rng.uniform(-np.pi, np.pi)
    shift = rng.uniform(-5, 5, 2)
    rot = np.array([[np.cos(alpha), -np.sin(alpha)], [np.sin(alpha), np.cos(alpha)]])
    q2 = q.copy()
    q2[:, :2] = q[:, :2] @ rot.T + shift
    q2[:, 2] += alpha
    tau = rng.normal(0, 0.2, (6, 12, params.n_a))
    s1, s2 = build_system(params, q, scenario), build_system(params, q2, scenario)
    e1, e2 = evaluate(s1, tau), evaluate(s2, tau)
    for name in ("a_obj_norm", "qdd_norm", "lam_norm", "sr", "lam"):
        np.testing.assert_allclose(getattr(e2, name), getattr(e1, name), rtol=1e-7, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(input_ellipsoid(s2), input_ellipsoid(s1), rtol=1e-9)
    for a, b in zip(polar_com(params, s1.kin, s1.geometry), polar_com(params, s2.kin, s2.geometry), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


@pytest.mark.parametrize(("seed", "n_joints"), CASES)
def test_friction_limits_are_scenarios_1_and_3(seed: int, n_joints: int) -> None:
    """mu_s -> infinity gives the ideal wheels (scenario 3); mu_s = 0 gives no friction (scenario 1)."""
    rng = np.random.default_rng(400 + seed)
    params = random_params(rng, n_joints)
    q = random_q(rng, params, 8)
    tau_unit = ellipsoid_inputs(build_system(params, q, 3), unit_directions(params.n_a, 12))
    tau = tau_unit * 50.0  # large enough to saturate friction at moderate mu_s
    e3 = evaluate(build_system(params, q, 3), tau)
    e2_inf = evaluate(build_system(params.with_(mu_s=1e9), q, 2), tau)
    for name in ("a_obj_norm", "qdd_norm", "sr"):
        np.testing.assert_allclose(getattr(e2_inf, name), getattr(e3, name), rtol=1e-7, atol=1e-12)
    e1 = evaluate(build_system(params, q, 1), tau)
    e2_zero = evaluate(build_system(params.with_(mu_s=0.0), q, 2), tau)
    for name in ("a_obj_norm", "qdd_norm", "sr"):
        np.testing.assert_allclose(getattr(e2_zero, name), getattr(e1, name), rtol=1e-7, atol=1e-12)
    # in between, some wheels slide at their bound with friction opposing the sliding
    e2 = evaluate(build_system(params.with_(mu_s=0.05), q, 2), tau)
    bound = 0.05 * np.asarray(params.masses)[list(params.wheels)] * params.gravity
    slide = np.abs(e2.constraint_accel[..., 1:]) > 1e-9 * np.abs(e2.qdd).max()
    assert slide.any()
    np.testing.assert_allclose(np.abs(e2.lam[..., 1:])[slide], np.broadcast_to(bound, slide.shape)[slide], rtol=1e-9)
    assert np.all(e2.lam[..., 1:][slide] * e2.constraint_accel[..., 1:][slide] < 0)


@pytest.mark.parametrize("n_c", [2, 3, 4, 5])
def test_box_lcp_enumeration_matches_bvls(n_c: int) -> None:
    rng = np.random.default_rng(n_c)
    x = rng.normal(size=(30, n_c, n_c))
    gc = x @ np.swapaxes(x, -1, -2) + 0.1 * np.eye(n_c)
    b = rng.normal(size=(30, 7, n_c)) * 3
    lo = np.concatenate([[0.0], -rng.uniform(0.2, 2, n_c - 1)])
    hi = np.concatenate([[np.inf], rng.uniform(0.2, 2, n_c - 1)])
    l1 = solve_box_lcp(gc, b, lo, hi, method="enumerate")
    l2 = solve_box_lcp(gc, b, lo, hi, method="bvls")
    np.testing.assert_allclose(l1, l2, atol=1e-8)
    w = np.einsum("nij,nkj->nki", gc, l1) + b
    assert np.all(l1 >= lo - 1e-12) and np.all(l1 <= hi + 1e-12)
    free = (l1 > lo + 1e-9) & (l1 < hi - 1e-9)
    np.testing.assert_allclose(w[free], 0, atol=1e-9)
    assert np.all(w[np.isclose(l1, lo)] >= -1e-9) and np.all(w[np.isclose(l1, hi)] <= 1e-9)


@pytest.mark.parametrize("n_c", [1, 2, 4, 5])
def test_box_lcp_of_one_configuration_matches_the_batched_enumeration_and_bvls(n_c: int) -> None:
    """One G_c with many right-hand sides (a monitor's case) is solved for every pattern at once."""
    rng = np.random.default_rng(10 + n_c)
    for _ in range(5):
        x = rng.normal(size=(n_c, n_c))
        gc = x @ x.T + 0.1 * np.eye(n_c)
        b = rng.normal(size=(40, n_c)) * 3
        lo = np.concatenate([[0.0], -rng.uniform(0.2, 2, n_c - 1)])
        hi = np.concatenate([[np.inf], rng.uniform(0.2, 2, n_c - 1)])
        one = solve_box_lcp(gc, b, lo, hi, method="enumerate")
        batched = solve_box_lcp(np.stack([gc, gc]), np.stack([b, b]), lo, hi, method="enumerate")
        np.testing.assert_allclose(one, batched[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(one, solve_box_lcp(gc, b, lo, hi, method="bvls"), atol=1e-8)
        assert np.all(one[:, 1:] <= hi[1:]) and np.all(one >= lo)
        assert np.any((one[:, 1:] == hi[1:]) | (one[:, 1:] == lo[1:])) or n_c == 1  # bounds met exactly


def test_ellipsoid_levels_and_free_robot() -> None:
    """Eq. (31) levels; with the contact open and no ground contact, ||qdd||^2 = tau^T E tau / m."""
    params = SnakeObjectParams.uniform(2, 1.3, 0.15, 0.002)
    system = build_system(params, np.array([0.0, 0, 0, -1.0, 0.7]), 1)
    tau = ellipsoid_inputs(system, unit_directions(2, 36), (0.5, 1.0))
    e = input_ellipsoid(system)
    lev = np.einsum("ki,ij,kj->k", tau, e, tau)
    np.testing.assert_allclose(lev, np.repeat([0.25, 1.0], 36), rtol=1e-12)
    ev = evaluate(system, tau)
    free = ~ev.in_contact
    assert free.any() and ev.in_contact.any()
    np.testing.assert_allclose(ev.qdd_norm[free], lev[free] / params.m_ref, rtol=1e-9)
    np.testing.assert_allclose(ev.a_obj_norm[free], 0, atol=1e-15)
    np.testing.assert_allclose(ev.sr[free], 0, atol=1e-15)


def test_polar_com_straight_snake() -> None:
    params = SnakeObjectParams.uniform(2, 1.0, 0.15, 0.002)
    system = build_system(params, np.array([0.3, -0.1, 0.8, 0.0, 0.0]), 1)
    r, ang = polar_com(params, system.kin, system.geometry)
    assert r == pytest.approx(0.15) and ang == pytest.approx(0.0, abs=1e-12)
    system = build_system(params, np.array([0.0, 0.0, 0.0, np.pi / 2, 0.0]), 1)
    r, ang = polar_com(params, system.kin, system.geometry)
    # COMs (0, 0), (0.075, 0.075), (0.075, 0.225) -> snake COM (0.05, 0.1) from the middle of link 0
    assert r == pytest.approx(np.hypot(0.05, 0.1)) and ang == pytest.approx(np.arctan2(0.1, 0.05))


def test_bad_input_names_the_field() -> None:
    with pytest.raises(SlippageError, match="contact_link"):
        SnakeObjectParams.uniform(2, 1.0, 0.15, 0.002, contact_link=5)
    with pytest.raises(SlippageError, match="kappa"):
        SnakeObjectParams.uniform(2, 1.0, 0.15, 0.002, kappa=-1.0)
    with pytest.raises(SlippageError, match="wheel_links"):
        SnakeObjectParams.uniform(2, 1.0, 0.15, 0.002, wheel_links=(0, 1))
    params = SnakeObjectParams.uniform(2, 1.0, 0.15, 0.002)
    with pytest.raises(SlippageError, match="q: last dimension"):
        build_system(params, np.zeros(4), 1)
    with pytest.raises(SlippageError, match="scenario"):
        build_system(params, np.zeros(5), 4)


def test_case_study_1_sweep_and_parallel_agree() -> None:
    cfg = load_case_study("case_study_1")
    params = params_from_config(cfg)
    q = joint_grid(2, cfg["joint_min_deg"], cfg["joint_max_deg"], cfg["joint_step_deg"])
    assert q.shape == (784, 5)
    sub = q[::7]
    r1 = sweep(params, sub, 2, n_directions=36, workers=1)
    r2 = sweep(params, sub, 2, n_directions=36, workers=2)
    np.testing.assert_array_equal(r1.a_obj_max, r2.a_obj_max)
    np.testing.assert_array_equal(r1.sr_max, r2.sr_max)
    # Scenario 1/3 are homogeneous in tau: the best ||a_obj||^2 over the ellipsoid is the
    # rank-one Rayleigh quotient c^T E^{-1} c with Omega = c c^T (Eq. 29, 31).
    res = table_2({1: sweep(params, sub, 1, n_directions=720, radii=(1.0,))})
    system = build_system(params, sub, 1)
    _, omega = norm_tensors(system)
    e_inv = np.linalg.inv(input_ellipsoid(system))
    exact = np.einsum("nij,nji->n", e_inv, omega)  # trace(E^-1 c c^T) = c^T E^-1 c
    assert res["1"]["best_a_obj"] == pytest.approx(exact.max(), rel=1e-4)
    assert res["1"]["worst_a_obj"] == pytest.approx(exact.min(), rel=1e-4)


def test_feasible_configurations() -> None:
    from snake_core.slippage import feasible

    params = SnakeObjectParams.uniform(3, 1.0, 0.15, 0.002, object_com_distance=0.1)
    q = np.array([
        [0, 0, 0, 0.0, 0.0, 0.0],  # straight: fine
        [0, 0, 0, -2.5, -2.5, -2.5],  # folded back on itself: link 3 crosses link 0 (below, away from the object)
        [0, 0, 0, 1.9, 1.2, 0.0],  # folds over the object (on the left of link 0)
        [0, 0, 0, -0.5, 0.5, -0.5],  # gentle zig-zag away from the object: fine
    ])
    system = build_system(params, q, 1)
    np.testing.assert_array_equal(feasible(params, system.kin, system.geometry), [True, False, False, True])
