"""Locomotive reduction (003 Eq. 9-10), conical baseline and serpenoid gait."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.errors import GaitError
from snake_core.gait import make_gait
from snake_core.gait.reduction import (
    DifferentialDrive,
    ReductionParams,
    motion_mode,
    rates_from_twist,
    segment_separation,
    twist_from_rates,
)
from snake_core.gait.rolling import RollingVectorGait
from snake_core.robot import load_robot


def test_segment_separation_from_paper_geometry():
    # s_h = L_h / 2 = 0.2715, s_t = (L_t + L) / 2 = (0.7485 + 1.233) / 2 = 0.99075
    assert segment_separation(0.5430, 0.7485, 1.233) == pytest.approx(0.71925)


@pytest.mark.parametrize(("oh", "ot"), [(1.0, 3.0), (2.0, 2.0), (2.0, -2.0), (0.0, 1.5), (-0.7, 0.2)])
def test_eq10_round_trip_and_differential_drive(oh, ot):
    k, d = 0.043, 0.71925
    v, w = twist_from_rates(oh, ot, k, d)
    # Independent: wheels v_l = k omega_h, v_r = k omega_t of a car with track d (Eq. 9).
    vl, vr = k * oh, k * ot
    assert v == pytest.approx((vl + vr) / 2) and w == pytest.approx((vr - vl) / d)
    assert rates_from_twist(v, w, k, d) == pytest.approx((oh, ot))


def test_motion_modes():
    assert motion_mode(2.0, 2.0) == "translating"
    assert motion_mode(2.0, -2.0) == "turning_in_place"
    assert motion_mode(0.0, 1.0) == "head_anchored"
    assert motion_mode(1.0, 3.0) == "turning"
    assert motion_mode(0.0, 0.0) == "stopped"
    assert twist_from_rates(2.0, -2.0, 0.05, 0.7)[0] == 0.0  # in place: R' = 0


def test_saturation_keeps_the_turning_radius():
    mapping = ReductionParams(k=0.05, d_prime=0.7, omega_max=3.0).mapping()
    v, w = 1.0, 0.5  # far beyond omega_max
    oh, ot, oc = mapping.to_command(v, w)
    assert max(abs(oh), abs(ot)) == pytest.approx(3.0)
    v2, w2 = mapping.to_twist((oh, ot, oc))
    assert v2 / w2 == pytest.approx(v / w)
    assert oc == pytest.approx(0.5 * 0.5 * (oh + ot))


def test_bad_reduction_parameters_are_refused():
    with pytest.raises(GaitError, match="d_prime"):
        ReductionParams(k=0.05, d_prime=0.0, omega_max=3.0)


def test_conical_taper_and_twist():
    robot = load_robot("tsnake")
    gait = make_gait("conical", robot)
    q_flat = np.array([gait.step(0.01, (2.0, 0.0)) for _ in range(600)])
    gait.reset()
    q_cone = np.array([gait.step(0.01, (2.0, 0.5)) for _ in range(600)])
    twist = np.array([j.type == "twist" for j in robot.joints])
    assert np.all(q_cone[:, twist] == 0.0)
    amp_flat, amp_cone = np.abs(q_flat).max(axis=0), np.abs(q_cone).max(axis=0)
    ratio = amp_cone[~twist] / amp_flat[~twist]
    x = (2 * robot.joint_arc_positions() / robot.length - 1)[~twist]
    assert np.allclose(ratio, 1 + 0.5 * x, atol=0.02)  # amplitude tapers linearly along the body
    v, w = gait.mapping.to_twist(gait.mapping.to_command(0.03, 0.02))
    assert (v, w) == pytest.approx((0.03, 0.02))


def test_serpenoid_head_offset_travels_along_the_body():
    robot = load_robot("wheeled_snake")
    gait = make_gait("serpenoid", robot, amplitude=0.0)  # isolate the offset
    omega, dt = 2.0, 0.001
    beta = gait.beta
    for _ in range(2000):
        gait.step(dt, (omega, 0.0))
    for _ in range(10):
        q = gait.step(dt, (omega, 0.3))  # head offset switched on at psi0
    assert q[0] == pytest.approx(0.3) and np.allclose(q[1:], 0.0)
    steps_per_joint = round(beta / (omega * dt))
    for i in range(1, len(robot.joints)):
        for _ in range(steps_per_joint):
            q = gait.step(dt, (omega, 0.3))
        assert np.allclose(q[: i + 1], 0.3, atol=1e-9) and np.allclose(q[i + 1:], 0.0, atol=1e-9), i


def test_unknown_gait_and_wrong_robot():
    with pytest.raises(GaitError, match="unknown gait"):
        make_gait("crawl", load_robot("tsnake"))
    with pytest.raises(GaitError, match="tsnake"):
        make_gait("rolling", load_robot("wheeled_snake"))


def test_rolling_gait_built_directly_owns_the_factorys_mapping():
    robot = load_robot("tsnake")
    direct = RollingVectorGait(robot).mapping
    assert isinstance(direct, DifferentialDrive)
    assert direct.params == make_gait("rolling", robot).mapping.params == ReductionParams.from_robot(robot)
    red = robot.gait("reduction")
    assert (direct.params.k, direct.params.omega_max) == (red["k"], red["omega_max"])
    # Reduction options go to the mapping, the others to the gait's parameters.
    tuned = make_gait("rolling", robot, k=0.02, omega_c_ratio=0.0, ramp_time=0.0)
    assert isinstance(tuned, RollingVectorGait) and isinstance(tuned.mapping, DifferentialDrive)
    assert (tuned.mapping.params.k, tuned.mapping.params.omega_c_ratio) == (0.02, 0.0)
    assert tuned.params.ramp_time == 0.0
    assert tuned.mapping.to_command(0.02, 0.0)[:2] == pytest.approx((1.0, 1.0))  # v / k (003 Eq. 10)
