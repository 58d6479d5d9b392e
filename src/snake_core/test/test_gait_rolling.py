"""Rolling-vector gait (003): math checked against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from snake_core.gait.helix import EllipticalHelix, HelixParams
from snake_core.gait.rolling import (
    RollingParams,
    RollingVectorGait,
    frames_and_shape,
    phase_along_body,
)
from snake_core.robot import load_robot

PAPER_HELIX = HelixParams(k_a=0.02, k_b=0.06, k_theta=1.0 / (2.0 * np.pi))
L_H, L_T, LENGTH = 0.5430, 0.7485, 6 * 0.2055


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


def _shape_at(helix, s, wave, phi_h, phi_t):
    phi, dphi = phase_along_body(np.atleast_1d(s), phi_h, phi_t, L_H, L_T)
    return frames_and_shape(helix, np.atleast_1d(s), wave, phi, dphi)


@pytest.mark.parametrize("wave", [0.0, 0.7, 2.9])
def test_arc_length_matches_quadrature(wave):
    helix = EllipticalHelix(PAPER_HELIX)
    for theta in (0.3, 2.0, 7.5):
        s_quad, _ = quad(lambda a: float(helix.speed(np.array(a + wave))), 0.0, theta, epsabs=1e-12)
        s = np.array([s_quad])
        assert helix.theta_of_s(s, wave)[0] == pytest.approx(theta, abs=1e-7)  # 1e-7 rad ~ 2e-8 m


@pytest.mark.parametrize(("phi_h", "phi_t", "wave"), [(0.0, 0.0, 0.0), (0.4, 3.5, 1.1), (-2.0, 4.0, -0.3)])
def test_frames_orthonormal_right_handed(phi_h, phi_t, wave):
    helix = EllipticalHelix(PAPER_HELIX)
    s = np.linspace(0.0, LENGTH, 301)
    sh = _shape_at(helix, s, wave, phi_h, phi_t)
    frame = np.stack([sh["e1"], sh["ea"], sh["eb"]], axis=-1)  # columns e1, ea, eb
    eye = np.einsum("nij,nik->njk", frame, frame)
    assert np.allclose(eye, np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(frame), 1.0, atol=1e-12)


def test_shape_functions_match_finite_differences_of_frames():
    """Eq. 6 evaluated analytically vs numerically differentiated frames."""
    helix = EllipticalHelix(PAPER_HELIX)
    # h = 1e-4 m: large enough that the 1e-9 rad error of the tabulated inverse arc-length
    # map does not dominate the difference quotient, small enough for O(h^2) ~ 1e-8.
    phi_h, phi_t, wave, h = 0.9, 4.1, 0.6, 1e-4
    for s0 in (0.2, 0.62, 0.70, 1.0):  # head, buffer (twice), tail
        sh = _shape_at(helix, s0, wave, phi_h, phi_t)
        plus = _shape_at(helix, s0 + h, wave, phi_h, phi_t)
        minus = _shape_at(helix, s0 - h, wave, phi_h, phi_t)
        de1 = (plus["e1"] - minus["e1"]) / (2 * h)
        dea = (plus["ea"] - minus["ea"]) / (2 * h)
        assert sh["kappa_a"][0] == pytest.approx(-float(de1[0] @ sh["eb"][0]), abs=1e-4)
        assert sh["kappa_b"][0] == pytest.approx(float(de1[0] @ sh["ea"][0]), abs=1e-4)
        assert sh["tau"][0] == pytest.approx(float(dea[0] @ sh["eb"][0]), abs=1e-4)


@pytest.mark.parametrize(("phi_h", "phi_t", "wave"), [(0.0, 0.0, 0.0), (1.0, 5.5, 0.8)])
def test_integrating_shape_functions_rebuilds_the_helix(phi_h, phi_t, wave):
    """Eq. 1 integrated from the first frame with the computed shape functions gives Eq. 2 back."""
    helix = EllipticalHelix(PAPER_HELIX)

    def rhs(s, y):
        sh = _shape_at(helix, s, wave, phi_h, phi_t)
        ka, kb, tau = sh["kappa_a"][0], sh["kappa_b"][0], sh["tau"][0]
        e1, ea, eb = y[3:6], y[6:9], y[9:12]
        return np.concatenate([e1, kb * ea - ka * eb, -kb * e1 + tau * eb, ka * e1 - tau * ea])

    sh0 = _shape_at(helix, 0.0, wave, phi_h, phi_t)
    c0 = helix.point(helix.theta_of_s(np.array([0.0]), wave), wave)[0]
    y0 = np.concatenate([c0, sh0["e1"][0], sh0["ea"][0], sh0["eb"][0]])
    s_eval = np.linspace(0.0, LENGTH, 50)
    sol = solve_ivp(rhs, (0.0, LENGTH), y0, t_eval=s_eval, rtol=1e-10, atol=1e-12,
                    first_step=1e-3, max_step=0.01)
    expected = helix.point(helix.theta_of_s(s_eval, wave), wave)
    assert np.abs(sol.y[:3].T - expected).max() < 1e-6
    # ... and the rebuilt frames are the rolling-vector frames (Eq. 4-5).
    ea_expected = _shape_at(helix, s_eval, wave, phi_h, phi_t)["ea"]
    assert np.abs(sol.y[6:9].T - ea_expected).max() < 1e-5


def test_phase_along_body_is_eq8_for_constant_speeds():
    s = np.linspace(0.0, LENGTH, 97)
    omega_h, omega_t, t = 1.3, -0.4, 2.7
    phi, _ = phase_along_body(s, omega_h * t, omega_t * t, L_H, L_T)
    lam = (s - L_H) / (L_T - L_H)
    omega_r = np.where(s < L_H, omega_h, np.where(s < L_T, (1 - lam) * omega_h + lam * omega_t, omega_t))
    assert np.allclose(phi, omega_r * t)


def test_joint_angles_are_eq11_integrals(robot):
    """Gauss quadrature per joint vs scipy.quad of the same shape function over [s_i -/+ L0/2]."""
    gait = RollingVectorGait(robot)
    phi_h, phi_t, wave = 0.3, 2.2, 0.9
    q = gait.raw_angles(phi_h, phi_t, wave, 0)
    key = {"dorsal": "kappa_b", "twist": "tau", "lateral": "kappa_a"}
    for j, s_i in zip(robot.joints, gait.s_joints, strict=True):
        f = lambda s, k=key[j.type]: float(_shape_at(gait.helix, s, wave, phi_h, phi_t)[k][0])  # noqa: E731
        expected, _ = quad(f, s_i - 0.10275, s_i + 0.10275, points=[L_H, L_T], limit=200)
        assert q[j.index] == pytest.approx(expected, abs=1e-7), j.name


def test_twist_compensation_keeps_twist_joints_continuous_at_a_reset(robot):
    """Resetting phi_h by 2 pi with C_twist += sgn leaves the compensated twist joints unchanged.

    With the opposite compensation sign (Alg. 1 line 11 as printed), the two buffer twist
    joints would jump by 2 pi: this pins the derivation in snake_core.gait.rolling.
    """
    gait = RollingVectorGait(robot)
    twist = np.array([j.type == "twist" for j in robot.joints])
    buffer_twist = twist & (gait._twist_comp != 0)
    assert buffer_twist.sum() == 2  # the paper's geometry: twist joints on L_h and L_t
    assert np.allclose(gait._twist_comp[buffer_twist], np.pi)
    phi_t, wave = 1.0, 0.4
    phi_h = phi_t + 2 * np.pi  # reset triggers, sgn = +1
    before = gait.raw_angles(phi_h, phi_t, wave, 0)
    after = gait.raw_angles(phi_h - 2 * np.pi, phi_t, wave, 1)
    assert np.abs(after[twist] - before[twist]).max() < 1e-5  # quadrature error ~3e-7 rad
    printed_sign = after - 2 * gait._twist_comp
    assert np.abs(printed_sign[buffer_twist] - before[buffer_twist]).min() == pytest.approx(2 * np.pi, abs=1e-6)


def _run(robot, command, seconds, dt, **overrides):
    gait = RollingVectorGait(robot, RollingParams.from_robot(robot, ramp_time=0.0, **overrides))
    return gait, np.array([gait.step(dt, command) for _ in range(round(seconds / dt))])


def test_long_turning_run_bounded_and_periodic_only_with_phase_resetting(robot):
    """003 Sec. IV-A.1: omega_h = 1, omega_t = 3 for 100 s."""
    twist = np.array([j.type == "twist" for j in robot.joints])
    dt = 2 * np.pi / 400  # the motion's period (2 pi s) is a whole number of steps

    def period_error(q):
        wrap = lambda x: np.angle(np.exp(1j * x))  # noqa: E731
        a, b = q[400 * 2:400 * 3], q[400 * 15:400 * 16]
        return np.abs(a[:, ~twist] - b[:, ~twist]).max(), np.abs(wrap(a[:, twist] - b[:, twist])).max()

    gait, q = _run(robot, (1.0, 3.0, 0.0), 16 * 2 * np.pi, dt)
    assert abs(gait.state.phi_h - gait.state.phi_t) < 2 * np.pi
    assert gait.state.twist_cycles == -gait.state.resets  # omega_t > omega_h: sgn = -1 every time
    assert np.abs(q[:, ~twist]).max() < 0.6  # dorsal/lateral bounded by the helix curvature * L0
    err_body, err_twist = period_error(q)
    assert err_body < 0.03 and err_twist < 1e-6

    # Without resetting the twist joints wind up by whole turns every period and, with exact
    # integration of Eq. 11, the other joints stay within a few hundredths of a radian of
    # the earlier period (the buffer frames do not return: phi(s) changes by 2 pi + 4 pi
    # lambda per period); with one fixed 8-point rule per piece they drift far more (it
    # cannot follow the frame's windings).
    gait_nr, q_nr = _run(robot, (1.0, 3.0, 0.0), 16 * 2 * np.pi, dt, phase_reset=False)
    assert abs(gait_nr.state.phi_h - gait_nr.state.phi_t) > 100.0
    err_body_nr, err_twist_nr = period_error(q_nr)
    assert err_body_nr < 0.05 and err_twist_nr < 1e-6
    assert np.abs(q_nr[400 * 15:400 * 16, twist] - q_nr[400 * 2:400 * 3, twist]).max() > 6.0
    _, q_fixed = _run(robot, (1.0, 3.0, 0.0), 16 * 2 * np.pi, dt, phase_reset=False, integration="fixed")
    err_body_fixed, err_twist_fixed = period_error(q_fixed)
    assert err_body_fixed > 3 * err_body_nr and err_twist_fixed > 1.0


def test_output_is_continuous_through_resets_starts_and_command_changes(robot):
    gait = RollingVectorGait(robot)  # default: blending on, 2 s start-up ramp
    dt = 0.02
    commands = [(0.0, 0.0, 0.0)] * 50 + [(2.0, 2.0, 1.0)] * 300 + [(2.0, -2.0, 0.0)] * 300 \
        + [(1.0, 3.0, 0.0)] * 600 + [(0.0, 0.0, 0.0)] * 100
    q = np.array([gait.step(dt, c) for c in commands])
    assert np.abs(q[:50]).max() == 0.0  # straight until told to move
    assert gait.state.resets >= 5
    # Fastest joint motion the commands ask for is a few rad/s; a jump would be >> 0.1 rad.
    assert np.abs(np.diff(q, axis=0)).max() < 0.06
    assert np.allclose(q[-1], q[-2])  # stopped: holds its shape
    assert np.abs(q[-1]).max() > 0.1  # ... which is not straight


def test_paper_exact_mode_has_the_buffer_jump_that_blending_removes(robot):
    _, q_exact = _run(robot, (1.0, 3.0, 0.0), 20.0, 0.02, reset_blend_time=0.0)
    _, q_blend = _run(robot, (1.0, 3.0, 0.0), 20.0, 0.02)
    assert np.abs(np.diff(q_exact, axis=0)).max() > 0.2
    assert np.abs(np.diff(q_blend, axis=0)).max() < 0.05


def test_translation_after_a_turn_wraps_the_phase_difference_continuously(robot):
    """A turn leaves |phi_h - phi_t| up to 2 pi; translating wraps it once into (-pi, pi]."""
    gait = RollingVectorGait(robot, RollingParams.from_robot(robot, ramp_time=0.0))
    q = [gait.step(0.02, (2.0, -2.0, 0.0)) for _ in range(70)]  # 1.4 s: difference 5.6 rad, no reset yet
    assert np.pi < abs(gait.state.phi_h - gait.state.phi_t) < 2 * np.pi
    cycles = gait.state.twist_cycles
    q += [gait.step(0.02, (2.0, 2.0, 1.0)) for _ in range(100)]
    assert abs(gait.state.phi_h - gait.state.phi_t) <= np.pi
    assert gait.state.twist_cycles == cycles + 1  # one more reset, with its compensation
    assert np.abs(np.diff(np.array(q), axis=0)).max() < 0.1  # still continuous
    # While turning the paper's 2 pi threshold stands: no wrap at pi.
    turning = RollingVectorGait(robot, RollingParams.from_robot(robot, ramp_time=0.0))
    for _ in range(70):
        turning.step(0.02, (2.0, -2.0, 0.0))
    assert abs(turning.state.phi_h - turning.state.phi_t) > np.pi


def _quad_angles(gait, phi_h, phi_t, wave):
    key = {"dorsal": "kappa_b", "twist": "tau", "lateral": "kappa_a"}
    half = 0.5 * gait.module_length
    p = gait.params
    out = []
    for j, s_i in zip(gait.robot.joints, gait.s_joints, strict=True):
        f = lambda s, k=key[j.type]: float(_shape_at(gait.helix, s, wave, phi_h, phi_t)[k][0])  # noqa: E731
        pts = [x for x in (p.head_end, p.tail_start) if s_i - half < x < s_i + half]
        v, _ = quad(f, s_i - half, s_i + half, points=pts or None, limit=4000, epsabs=1e-11, epsrel=1e-11)
        out.append(v)
    return np.array(out)


@pytest.mark.parametrize("phase_difference", [2 * np.pi, 20.0, 50.0, 150.0])
def test_adaptive_integration_is_exact_at_any_phase_difference(robot, phase_difference):
    """Eq. 11 with panels of <= 1 rad of frame rotation vs scipy's adaptive quad; the fixed rule drifts."""
    adaptive = RollingVectorGait(robot, RollingParams.from_robot(robot, integration="adaptive"))
    fixed = RollingVectorGait(robot, RollingParams.from_robot(robot, integration="fixed"))
    wave = 0.8
    exact = _quad_angles(adaptive, phase_difference, 0.0, wave)
    assert np.abs(adaptive.raw_angles(phase_difference, 0.0, wave, 0) - exact).max() < 1e-9
    fixed_err = np.abs(fixed.raw_angles(phase_difference, 0.0, wave, 0) - exact).max()
    if phase_difference >= 20.0:
        assert fixed_err > 1e-3  # one 8-point rule cannot follow many windings of the frame
    else:
        assert fixed_err < 1e-4


def test_body_shape_error_is_a_rigid_fit_of_the_chain_to_the_backbone(robot):
    from snake_core.gait.rolling import body_shape_error
    from snake_core.kinematics import chain_points

    gait = RollingVectorGait(robot)
    wave = 1.3
    q = gait.raw_angles(0.0, 0.0, wave, 0)
    err = body_shape_error(gait, q, wave)
    # independent Kabsch by SVD
    pts = chain_points(robot, np.zeros(3), np.array([1.0, 0, 0, 0]), q)
    s = np.concatenate([[0.0], gait.s_joints, [robot.length]])
    ref = gait.helix.point(gait.helix.theta_of_s(s, wave), wave)
    a, b = pts - pts.mean(0), ref - ref.mean(0)
    u, _, vt = np.linalg.svd(a.T @ b)
    d = np.sign(np.linalg.det(u @ vt))
    rot = u @ np.diag([1, 1, d]) @ vt
    assert err == pytest.approx(np.sqrt(np.mean(np.sum((a @ rot - b) ** 2, axis=1))), rel=1e-9)
    # untwisted buffer: the joints follow the backbone to within the module discretisation
    assert err < 0.01
    # a wrong shape is far from it
    assert body_shape_error(gait, 2 * q, wave) > 5 * err


def test_shape_error_run_saturates_without_resetting(robot):
    """With exact integration the shape error does not grow with the accumulated phase difference."""
    from snake_core.gait.rolling import shape_error_run

    run = shape_error_run(robot, (1.0, 3.0, 0.0), 40.0, phase_reset=False, every=10)
    d = np.abs(run.phase_difference)
    early = run.shape_error[(d > 2 * np.pi) & (d < 30)].mean()
    late = run.shape_error[d > 50].mean()
    assert d.max() > 70
    assert late < 1.5 * early
    assert run.integration_error.max() > 0.1  # the fixed rule, measured on the same states


@pytest.mark.parametrize(("phi_h", "phi_t", "wave"), [(0.0, 0.0, 0.0), (0.4, 3.5, 1.1), (-2.0, 40.0, -0.3)])
def test_reduced_shape_functions_match_the_frame_products(phi_h, phi_t, wave):
    """The gait's closed-form kappa_a, kappa_b, tau equal Eq. 6's products of the full frames."""
    from snake_core.gait.rolling import _shape_functions

    helix = EllipticalHelix(PAPER_HELIX)
    s = np.linspace(0.0, LENGTH, 401)
    phi, dphi = phase_along_body(s, phi_h, phi_t, L_H, L_T)
    full = frames_and_shape(helix, s, wave, phi, dphi)
    u = helix.phase_at(s, wave, helix.unrolled_table(0.0, LENGTH))
    assert np.abs(u - (helix.theta_of_s(s, wave) + wave)).max() < 1e-12
    kappa_a, kappa_b, tau = _shape_functions(helix, u, phi, dphi)
    assert np.abs(kappa_a - full["kappa_a"]).max() < 1e-12
    assert np.abs(kappa_b - full["kappa_b"]).max() < 1e-12
    assert np.abs(tau - full["tau"]).max() < 1e-9  # tau ~ phi' up to 190 1/m here


def test_equal_phases_take_the_scalar_path_and_stay_eq11(robot):
    """Translation (phi_h = phi_t, one phase along the body) against scipy's adaptive quad."""
    gait = RollingVectorGait(robot)
    for phase, wave in ((0.0, 0.0), (1.7, 0.8), (-4.0, 2.5)):
        q = gait.raw_angles(phase, phase, wave, 0)
        assert np.abs(q - _quad_angles(gait, phase, phase, wave)).max() < 1e-9
        nudged = gait.raw_angles(phase + 1e-12, phase, wave, 0)  # the array path, a hair away
        assert np.abs(q - nudged).max() < 1e-9


def test_arc_length_table_is_exact_to_quadrature_precision():
    """G(u) of Eq. 3 vs scipy's adaptive quad of |dc/dtheta|: exact on the table's samples, 1e-9 m between."""
    helix = EllipticalHelix(PAPER_HELIX)
    step = np.pi / 4096  # the table's spacing
    for u in (37 * step, 2048 * step, 4096 * step + 5 * step, -700 * step, 0.1, 4.0, 9.7):
        expected, _ = quad(lambda a: float(helix.speed(np.array(a))), 0.0, u, epsabs=1e-13, epsrel=1e-13, limit=200)
        on_sample = abs(u / step - round(u / step)) < 1e-9
        tol = 1e-12 if on_sample else 1e-9  # between samples: linear interpolation, ~1e-10 m
        assert float(helix.arc_of_phase(u)) == pytest.approx(expected, abs=tol)
        assert helix.arc_of_phase_scalar(u) == pytest.approx(expected, abs=tol)


def test_unrolled_inverse_is_np_interp_of_the_table_without_a_search():
    """The step's direct-index look-up of u = G^-1(x) equals np.interp on the same table, nodes included."""
    from snake_core.gait.helix import UnrolledInverse

    helix = EllipticalHelix(PAPER_HELIX)
    table = helix.unrolled_table(0.0, LENGTH)
    inverse = UnrolledInverse(table)
    x = np.random.default_rng(3).uniform(table[0][0], table[0][-1], 50_000)
    x = np.concatenate([x, table[0][:-1], np.nextafter(table[0][1:-1], 0.0)])
    assert np.abs(inverse(x) - np.interp(x, *table)).max() < 1e-12
    # the step's form: cell positions of fixed nodes, shifted; u and u + pi/2 in one array
    x0 = np.concatenate([np.linspace(0.0, 0.5 * LENGTH, 300), table[0][:40]])
    out = np.empty((2, len(x0)))
    for shift in (0.0, 1e-3, float(table[0][7] - table[0][3]), 0.4 * LENGTH):
        inverse.pair_into(x0, inverse.cell_position(x0), shift, out)
        u = np.interp(x0 + shift, *table)
        assert np.abs(np.sin(out[0]) - np.sin(u)).max() < 1e-12  # u less whole turns
        assert np.abs(np.cos(out[0]) - np.cos(u)).max() < 1e-12
        assert np.abs(out[1] - out[0] - 0.5 * np.pi).max() < 1e-12
        turns = (u - out[0]) / (2 * np.pi)
        assert np.abs(turns - np.round(turns)).max() < 1e-12
        assert np.abs(out[0]).max() < 1.5 * np.pi  # near 0, where np.sin is cheapest
    # a wrong interval would be off by a table step (pi / 4096 rad)
    assert np.abs(np.interp(x, *table) - np.interp(x + 1e-4, *table)).max() > 1e-5


def test_batched_kernel_matches_the_closed_form_shape_functions(robot):
    """raw_angles' batched kernel against Eq. 11 summed from _shape_functions at the same nodes."""
    from snake_core.gait.rolling import _shape_functions

    gait = RollingVectorGait(robot)
    rng = np.random.default_rng(4)
    for _ in range(50):
        phi_h, wave = rng.uniform(-60.0, 60.0, 2)
        phi_t = phi_h + rng.uniform(-2 * np.pi, 2 * np.pi) * (rng.random() < 0.8)
        cycles = int(rng.integers(-3, 4))
        quad = gait._quadrature(phi_h - phi_t)
        u = gait.helix.phase_at(quad.nodes, wave, gait._arc_table)  # np.interp on the table
        d = phi_t - phi_h
        kappa_a, kappa_b, tau = _shape_functions(gait.helix, u, phi_h + d * quad.lam, d * quad.buffer_slope)
        w_d, w_t, w_l = quad.weights_by_type
        expected = np.bincount(quad.owner, weights=kappa_b * w_d + tau * w_t + kappa_a * w_l, minlength=quad.n_joints)
        expected += cycles * gait._twist_comp
        assert np.abs(gait.raw_angles(phi_h, phi_t, wave, cycles) - expected).max() < 1e-11


@pytest.mark.parametrize("bad", [0, 1, 2])
def test_a_non_finite_command_is_refused_naming_its_entry(robot, bad):
    """check_command: NaN or inf in any entry raises GaitError with the entry's name; the state is untouched."""
    from snake_core.errors import GaitError

    gait = RollingVectorGait(robot)
    for value in (np.nan, np.inf, -np.inf):
        command = [1.0, 2.0, 0.5]
        command[bad] = value
        with pytest.raises(GaitError, match=gait.command_names[bad]):
            gait.step(0.02, command)
    assert gait.state.time == 0.0
    with pytest.raises(GaitError, match="3 values"):
        gait.step(0.02, (1.0, 2.0))
    assert gait.check_command(np.array([1.0, 2.0, 0.5])) == (1.0, 2.0, 0.5)
