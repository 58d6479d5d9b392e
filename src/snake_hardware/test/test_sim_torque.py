"""Torque off in the twin: a limp joint, as a servo with open motor terminals (real MuJoCo)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_core.servo.actuator import position_actuator
from snake_core.servo.model import load_servo_model
from snake_core.twin_params import ServoParams, TwinParams
from snake_hardware.sim import mjcf
from snake_hardware.sim.mjcf import SimOptions
from snake_hardware.sim.twin import SimTwin

_JOINT = "m5_dorsal"  # carries the last one and a half modules: a load well inside the torque limit
_BENT = 0.6           # rad, the target it is held at
_G = 9.81             # m/s^2, MuJoCo's default gravity


def _gravity_torque(robot, joint: str, q: np.ndarray) -> float:
    """Gravity's torque about a joint of the lifted T-Snake bent only by its dorsal joints, N m.

    Independent of MuJoCo: the backbone hangs from the head in one vertical plane (the dorsal
    axes are parallel), each segment tilted from the vertical by the sum of the dorsal angles
    above it, of mass ``module_mass / L0`` per metre with its centre at its middle; the torque
    is g times the mass beyond the joint times its centre's horizontal offset from the joint.
    """
    b = mjcf.backbone_boundaries(robot)
    density = robot.tsnake_body.module_mass / robot.tsnake_body.module_length
    dorsal = np.array([j.type == "dorsal" for j in robot.joints])
    tilt = np.concatenate([[0.0], np.cumsum(np.where(dorsal, q, 0.0))])  # of body k (after joint k - 1), rad
    first = robot.joint_names.index(joint) + 1  # the body right after the joint
    moment, offset = 0.0, 0.0  # kg m; m, horizontal offset of the body's start from the joint
    for k in range(first, len(b) - 1):
        length = b[k + 1] - b[k]
        moment += density * length * (offset + length / 2 * math.sin(tilt[k]))
        offset += length * math.sin(tilt[k])
    return _G * moment


def _held_twin() -> tuple[SimTwin, int]:
    twin = SimTwin("tsnake", None, options=SimOptions(lifted=True))
    i = twin.joint_names.index(_JOINT)
    q0 = np.zeros(len(twin.joint_names))
    q0[i] = _BENT
    twin.reset(targets=q0)
    twin.advance(2.0)
    return twin, i


def test_a_held_joint_sags_by_gravity_over_the_servo_models_kp() -> None:
    """Held against gravity, the servo's spring kp (Eqs. (1)-(2), the factory P gain at 12 V) takes the load.

    The body hanging from the head sways slowly (a lightly damped chain pendulum): both sides are
    averaged over 3 s, over which the swaying's inertial torque averages out.
    """
    twin, i = _held_twin()
    kp = position_actuator(load_servo_model("XM430-W350")).kp
    spring, gravity = [], []
    for _ in range(round(3.0 / twin.timestep)):
        twin.step(1)
        q = twin.joint_positions()
        spring.append(kp * (_BENT - q[i]))
        gravity.append(_gravity_torque(twin.robot, _JOINT, q))
    assert np.mean(spring) == pytest.approx(np.mean(gravity), rel=0.03)
    assert twin.joint_efforts()[i] == pytest.approx(spring[-1], rel=0.01)  # the servo's torque (a step earlier)


def test_torque_off_lets_a_lifted_joint_fall_and_torque_on_holds_it() -> None:
    held, i = _held_twin()
    limp, _ = _held_twin()
    start = limp.joint_positions()[i]
    limp.set_torque(False, [_JOINT])
    assert limp.torque_enabled.tolist() == [n != _JOINT for n in limp.joint_names]
    held_q, limp_q, force = [], [], []
    for _ in range(round(1.0 / limp.timestep)):
        held.step(1)
        limp.step(1)
        held_q.append(held.joint_positions()[i])
        limp_q.append(limp.joint_positions()[i])
        force.append(limp.joint_efforts()[i])
    assert np.abs(np.asarray(held_q) - start).max() < 0.01  # torque on: it stays where it was held
    assert min(limp_q) < 0.1 * start                    # torque off: it swings down through the vertical
    assert np.all(np.asarray(force) == 0.0)             # ... with no actuator force at all
    # torque back on: the goal becomes the present position (no jump back to the old target)
    limp.set_torque(True, [_JOINT])
    now = limp.joint_positions()[i]
    assert limp.targets[i] == now and limp.torque_enabled.all()
    limp.advance(1.0)
    assert abs(limp.joint_velocities()[i]) < 0.05 and abs(limp.joint_positions()[i] - now) < 0.2


def test_torque_off_keeps_armature_friction_and_viscous_damping_and_drops_the_back_emf() -> None:
    robot = load_robot("tsnake")
    params = TwinParams(servo={"dorsal": ServoParams(damping=1.5, frictionloss=0.05)})
    twin = SimTwin(robot, None, twin_params=params, options=SimOptions(lifted=True))
    m = twin.model
    dof = m.jnt_dofadr[[m.joint(n).id for n in twin.joint_names]]
    act = [m.actuator(n).id for n in twin.joint_names]
    before = (m.dof_damping[dof].copy(), m.dof_armature[dof].copy(), m.dof_frictionloss[dof].copy(),
              m.actuator_gainprm[act].copy(), m.actuator_biasprm[act].copy())
    spec = load_servo_model("XM430-W350")
    back_emf = spec.motor.torque_constant ** 2 / spec.motor.resistance
    twin.set_torque(False)
    dorsal = np.array([j.type == "dorsal" for j in robot.joints])
    np.testing.assert_allclose(m.dof_damping[dof][dorsal], 1.5 - back_emf)  # the written damping less the motor's
    np.testing.assert_allclose(m.dof_damping[dof][~dorsal], 0.0)           # the file's viscous friction: 0
    np.testing.assert_array_equal(m.dof_armature[dof], before[1])
    np.testing.assert_array_equal(m.dof_frictionloss[dof], before[2])
    assert not m.actuator_gainprm[act, 0].any() and not m.actuator_biasprm[act, 1:3].any()
    twin.set_torque(True)
    for now, was in zip((m.dof_damping[dof], m.dof_armature[dof], m.dof_frictionloss[dof],
                         m.actuator_gainprm[act], m.actuator_biasprm[act]), before, strict=True):
        np.testing.assert_array_equal(now, was)
    with pytest.raises(KeyError, match="m9_dorsal"):
        twin.set_torque(False, ["m1_dorsal", "m9_dorsal"])
    assert twin.torque_enabled.all()
