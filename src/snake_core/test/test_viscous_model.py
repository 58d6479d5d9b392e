"""Viscous N-link model (001 Eq. 1-10): against a literal per-link implementation, physics checks, density trend."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.following.viscous import (
    ViscousModelError,
    ViscousParams,
    ViscousSnake,
    equal_link_robot,
    lateral_friction,
    peg_field_for,
    run_serpenoid,
    shape_terms,
    simulate,
)
from snake_core.following.viscous.model import head_velocity
from snake_core.gait.serpenoid import SerpenoidGait


def _se2(x: float, y: float, th: float) -> np.ndarray:
    c, s = math.cos(th), math.sin(th)
    return np.array([[c, -s, x], [s, c, y], [0.0, 0.0, 1.0]])


def _adjoint(g: np.ndarray) -> np.ndarray:
    """Ad_g of SE(2) acting on body velocities (v_x, v_y, omega)."""
    r, p = g[:2, :2], g[:2, 2]
    ad = np.eye(3)
    ad[:2, :2] = r
    ad[0, 2], ad[1, 2] = p[1], -p[0]
    return ad


def _literal_head_velocity(alpha, alpha_dot, pose, pegs, prm: ViscousParams) -> np.ndarray:
    """Eq. (1-10) built link by link with 3x3 adjoints and finite-difference body Jacobians."""
    n, ell = prm.n_links, prm.link_length

    def frames(al):
        gs = [np.eye(3)]
        for j in range(n - 1):
            # rear end of link j, rotate by alpha_j+1, then half a link back to the next centre
            gs.append(gs[-1] @ _se2(-ell / 2, 0, 0) @ _se2(0, 0, al[j]) @ _se2(-ell / 2, 0, 0))
        return gs

    g0 = frames(alpha)
    eps = 1e-6
    big_a = np.zeros((3, 3))
    rhs = np.zeros(3)
    gw = _se2(*pose)
    for i in range(n):
        # Body Jacobian column k: body velocity of link i relative to the head for unit alpha_dot_k (Eq. 1-2).
        jac = np.zeros((3, n - 1))
        for k in range(n - 1):
            da = np.zeros(n - 1)
            da[k] = eps
            gp, gm = frames(alpha + da)[i], frames(alpha - da)[i]
            gdot = (gp - gm) / (2 * eps)
            xi_hat = np.linalg.inv(g0[i]) @ gdot
            jac[:, k] = [xi_hat[0, 2], xi_hat[1, 2], xi_hat[1, 0]]
        ad = _adjoint(np.linalg.inv(g0[i]))  # Ad_{g_0i^-1}: head body velocity -> link i body velocity (Eq. 3)
        centre = (gw @ g0[i])[:2, 2]
        ky = prm.ky_ground + sum(prm.hump_amplitude * math.exp(-float(((centre - q) ** 2).sum()) / (2 * prm.sigma**2))
                                 for q in pegs)
        k = np.diag([prm.kx, ky, ky * ell**2 / 12])
        big_a += ad.T @ k @ ad  # Eq. (9) left
        rhs += ad.T @ k @ jac @ alpha_dot  # Eq. (9) right
    return -np.linalg.solve(big_a, rhs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_head_velocity_matches_literal_eq_1_to_10(seed):
    rng = np.random.default_rng(seed)
    prm = ViscousParams(n_links=6, link_length=0.1, hump_amplitude=30.0)
    alpha = rng.uniform(-0.8, 0.8, 5)
    alpha_dot = rng.uniform(-2, 2, 5)
    pose = np.array([0.2, -0.1, 0.7])
    pegs = rng.uniform(-0.4, 0.4, (6, 2))
    terms = shape_terms(alpha[None], alpha_dot[None], prm)
    got = head_velocity(terms, 0, pose, pegs, prm)
    want = _literal_head_velocity(alpha, alpha_dot, pose, pegs, prm)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_gaussian_hump_has_peg_diameter_as_full_width_at_half_maximum():
    prm = ViscousParams(peg_diameter=0.1, ky_ground=4.0, hump_amplitude=10.0)
    peg = np.array([[1.0, 2.0]])
    assert lateral_friction(np.array([1.0, 2.0]), peg, prm) == pytest.approx(14.0)
    assert lateral_friction(np.array([1.05, 2.0]), peg, prm) == pytest.approx(9.0)
    assert lateral_friction(np.array([5.0, 5.0]), peg, prm) == pytest.approx(4.0)


def test_isotropic_friction_gives_no_net_motion():
    """kx = ky: the link forces sum to -k sum(v_i) = 0, so the centroid of the links cannot move."""
    iso = run_serpenoid(9, 20.0, params=ViscousParams(n_links=9, ky_ground=1.0, kx=1.0))
    aniso = run_serpenoid(9, 20.0)
    assert np.linalg.norm(iso.trajectory.com - iso.trajectory.com[0], axis=1).max() < 1e-3
    assert aniso.trajectory.mean_speed > 100 * iso.trajectory.mean_speed


def test_lateral_friction_above_longitudinal_moves_the_snake_head_first():
    run = run_serpenoid(9, 20.0)
    tr = run.trajectory
    # body axis (tail centre -> head centre) in the world, averaged over the run
    from snake_core.following.viscous.model import link_frames
    centres, _ = link_frames(tr.alpha, run.params.link_length)
    axis_local = centres[:, 0] - centres[:, -1]
    c, s = np.cos(tr.head[:, 2]), np.sin(tr.head[:, 2])
    axis = np.stack([c * axis_local[:, 0] - s * axis_local[:, 1], s * axis_local[:, 0] + c * axis_local[:, 1]], 1)
    disp = tr.com[-1] - tr.com[0]
    assert float(disp @ axis.mean(axis=0)) > 0.5 * np.linalg.norm(disp) * np.linalg.norm(axis.mean(axis=0))
    assert tr.mean_speed > 0.02


def test_reversed_shape_sequence_retraces_the_path_without_pegs():
    run = run_serpenoid(7, 5.0)
    tr = run.trajectory
    back = simulate(tr.alpha[::-1], 0.05, run.params, None, tuple(tr.head[-1]))
    np.testing.assert_allclose(back.head[-1], tr.head[0], atol=1e-9)


def test_stepper_matches_batched_simulation_among_pegs():
    prm = ViscousParams(n_links=9)
    pegs = peg_field_for(9, 5.0, 20.0, 3, link_length=prm.link_length, diameter=prm.peg_diameter)
    run = run_serpenoid(9, 5.0, pegs, params=prm)
    snake = ViscousSnake(prm, pegs, run.trajectory.alpha[0])
    for a in run.trajectory.alpha[1:]:
        snake.step(a, 0.05)
    np.testing.assert_allclose(snake.pose, run.trajectory.head[-1], atol=1e-9)


def test_closed_form_shapes_equal_the_serpenoid_gait():
    robot = equal_link_robot(9)
    gait = SerpenoidGait(robot)
    want = np.array([gait.step(0.05, (3.0, 0.0)) for _ in range(40)])
    got = run_serpenoid(9, 2.0, robot=robot, omega=3.0).trajectory.alpha[1:]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_mean_speed_grows_with_peg_density():
    """001 Sec. VI: 'the speed of the snake robot increases with increase in the density of the pegs'."""
    speeds = []
    for rho in (0.0, 10.0, 40.0):
        runs = [run_serpenoid(9, 10.0, peg_field_for(9, 10.0, rho, seed, link_length=0.12, diameter=0.06))
                for seed in range(3)]
        speeds.append(np.mean([r.trajectory.mean_speed for r in runs]))
    assert speeds[0] < speeds[1] < speeds[2]


@pytest.mark.parametrize(("field", "kwargs"), [("n_links", {"n_links": 1}), ("link_length", {"link_length": -1.0}),
                                               ("hump_amplitude", {"hump_amplitude": -2.0})])
def test_bad_parameters_name_the_field(field, kwargs):
    with pytest.raises(ViscousModelError, match=field):
        ViscousParams(**kwargs)
