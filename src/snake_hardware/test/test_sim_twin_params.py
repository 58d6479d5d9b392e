"""The twin built from twin parameters: the model carries them, latency delays every target."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_core.twin_params import ServoParams, TwinParams
from snake_hardware.sim import mjcf
from snake_hardware.sim.twin import SimTwin


def test_default_parameters_build_todays_model() -> None:
    robot = load_robot("tsnake")
    assert mjcf.build_mjcf(robot, None, twin=TwinParams()) == mjcf.build_mjcf(robot, None)


def test_the_compiled_model_carries_each_parameter_of_each_joint_type() -> None:
    robot = load_robot("tsnake")
    params = TwinParams(servo={"twist": ServoParams(kp=12.5, kv=0.3, damping=0.05, armature=0.02,
                                                   frictionloss=0.04, effort_scale=0.5)},
                        contact=TwinParams().contact.__class__(ground_friction=0.35))
    m = mujoco.MjModel.from_xml_string(mjcf.build_mjcf(robot, None, twin=params))
    default = mujoco.MjModel.from_xml_string(mjcf.build_mjcf(robot, None))
    for j in robot.joints:
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, j.name)
        dof = m.jnt_dofadr[jid]
        if j.type == "twist":
            # MuJoCo's position actuator: gain kp, bias (0, -kp, -kv).
            assert (m.actuator_gainprm[aid, 0], m.actuator_biasprm[aid, 2]) == (12.5, -0.3)
            assert (m.dof_damping[dof], m.dof_armature[dof], m.dof_frictionloss[dof]) == (0.05, 0.02, 0.04)
            assert m.actuator_forcerange[aid, 1] == pytest.approx(0.5 * j.effort)
        else:  # the other types keep the defaults
            assert m.actuator_gainprm[aid, 0] == default.actuator_gainprm[aid, 0]
            assert m.dof_frictionloss[dof] == 0.0
    ground = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, mjcf.GROUND_GEOM)
    assert m.geom_friction[ground, 0] == 0.35


def test_a_latency_delays_the_target_by_whole_physics_steps_and_nothing_else() -> None:
    # Independent check: a target set now on a twin with a latency of d steps moves the
    # joints exactly as the same target set d steps later on a twin without latency.
    latency_steps = 3
    robot = load_robot("tsnake")
    lagging = SimTwin(robot, None, twin_params=TwinParams(
        servo={t: ServoParams(latency_s=latency_steps * 0.004) for t in ("dorsal", "twist", "lateral")}))
    prompt = SimTwin(robot, None)
    assert list(lagging.latency_steps) == [latency_steps] * len(robot.joints)
    target = np.full(len(robot.joints), 0.3)
    lagging.set_targets(target)
    lagging.step(latency_steps + 20)
    prompt.step(latency_steps)
    prompt.set_targets(target)
    prompt.step(20)
    assert np.array_equal(lagging.joint_positions(), prompt.joint_positions())
    assert not np.array_equal(prompt.joint_positions(), np.zeros(len(robot.joints)))  # the target moved them
    assert lagging.time == prompt.time


def test_latency_per_joint_type_and_control_periods_through_advance() -> None:
    robot = load_robot("tsnake")
    delay = {"dorsal": 0, "twist": 2, "lateral": 5}  # physics steps
    params = TwinParams(servo={t: ServoParams(latency_s=d * 0.004) for t, d in delay.items()})
    lagging, prompt = SimTwin(robot, None, twin_params=params), SimTwin(robot, None)
    rng = np.random.default_rng(3)
    commands = [rng.uniform(-0.3, 0.3, len(robot.joints)) for _ in range(6)]
    k = iter(range(10**6))
    history: list[np.ndarray] = []

    def controller(tw: SimTwin) -> np.ndarray:
        command = commands[min(next(k), len(commands) - 1)]
        history.append(command)
        return command

    lagging.advance(6 * lagging.substeps * 0.004, controller)
    # The actuator controls now are, per joint, the command that was current `delay` steps ago.
    steps = 6 * lagging.substeps
    for i, j in enumerate(robot.joints):
        source = (steps - delay[j.type] - 1) // lagging.substeps
        assert lagging.data.ctrl[lagging._act[i]] == history[source][i]
    assert prompt.latency_steps.sum() == 0


def test_a_fractional_latency_blends_old_and_new_target_over_one_step() -> None:
    robot = load_robot("tsnake")
    twin = SimTwin(robot, None, twin_params=TwinParams(
        servo={t: ServoParams(latency_s=2.25 * 0.004) for t in ("dorsal", "twist", "lateral")}))
    assert twin.latency_steps == pytest.approx([2.25] * len(robot.joints))
    twin.set_targets(np.full(len(robot.joints), 0.4))
    ctrl = []
    for _ in range(4):
        twin.step(1)
        ctrl.append(float(twin.data.ctrl[twin._act[0]]))
    # Read after each step: the control that step ran with. Steps 0 and 1 keep the old target
    # (0), step 2 runs with 0.75 new + 0.25 old (the change comes 0.25 of a step late), step 3 on
    # with the new one: a delay of 2.25 steps on average.
    assert ctrl == pytest.approx([0.0, 0.0, 0.75 * 0.4, 0.4])


def test_a_lifted_robot_hangs_from_its_held_head_without_touching_anything() -> None:
    from snake_hardware.sim.mjcf import LIFT_HEIGHT, SimOptions

    robot = load_robot("tsnake")
    twin = SimTwin(robot, "flat", options=SimOptions(lifted=True))
    head0 = twin.head_pose()[0]
    twin.set_targets(np.full(len(robot.joints), 0.3))
    twin.advance(1.0)
    assert np.array_equal(twin.head_pose()[0], head0) and head0[2] > LIFT_HEIGHT
    assert twin.site_position(mjcf.TAIL_TIP_SITE)[2] < head0[2] - 0.5 * robot.length  # hanging down
    assert twin.data.ncon == 0 and twin.model.nq == len(robot.joints)  # no free joint, no contact
