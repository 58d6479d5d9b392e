"""The twin built from twin parameters: the model carries them, latency delays every target."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_core.twin_params import ServoParams, TwinParams, parse_twin_block
from snake_hardware.sim import mjcf
from snake_hardware.sim.twin import SimTwin
from snake_hardware.sim.worlds import load_world


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


@pytest.mark.parametrize("robot_name", ["tsnake", "wheeled_snake"])
def test_a_weighed_link_carries_its_mass_and_every_other_link_its_nominal_one(robot_name: str) -> None:
    # Oracle: MuJoCo's compiled masses of the model built without a block; the weighed link's own
    # mass (its subtree less its child links': a wheeled link's wheels are bodies of their own)
    # is the scale's, its inertia scaled with it (the same shape), the others unchanged.
    robot = load_robot(robot_name)
    link = f"{robot.joints[2].name}_link"
    names = [j.name for j in robot.joints]
    default = mujoco.MjModel.from_xml_string(mjcf.build_mjcf(robot, None))
    nominal = float(default.body_subtreemass[mujoco.mj_name2id(default, mujoco.mjtObj.mjOBJ_BODY, link)]
                    - default.body_subtreemass[mujoco.mj_name2id(default, mujoco.mjtObj.mjOBJ_BODY,
                                                                 f"{robot.joints[3].name}_link")])
    params = parse_twin_block({"link": {link: {"mass": 1.25 * nominal}}}, "lab.yaml", names)
    m = mujoco.MjModel.from_xml_string(mjcf.build_mjcf(robot, None, twin=params))
    assert m.nbody == default.nbody
    for b in range(m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
        weighed = name == link or (robot.kind != "tsnake" and m.body_parentid[b] != 0
                                   and mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.body_parentid[b]) == link
                                   and name.startswith("link") and "wheel" in name)
        scale = 1.25 if weighed else 1.0
        assert m.body_mass[b] == pytest.approx(scale * default.body_mass[b], rel=1e-9), name
        np.testing.assert_allclose(m.body_inertia[b], scale * default.body_inertia[b], rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(m.body_ipos[b], default.body_ipos[b], atol=1e-12, err_msg=name)
    assert m.body_subtreemass[0] == pytest.approx(default.body_subtreemass[0] + 0.25 * nominal)


def test_the_default_contact_model_is_mujoco_s_own_and_a_contact_block_reaches_every_contact() -> None:
    # Oracle for the defaults: MuJoCo's own, read from a model that sets nothing.
    bare = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom type="plane" size="1 1 1"/></worldbody></mujoco>')
    robot = load_robot("tsnake")
    default = mujoco.MjModel.from_xml_string(mjcf.build_mjcf(robot, load_world("pegs")))
    assert default.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and set(default.geom_condim) == {3}
    assert np.array_equal(default.geom_solref, np.tile(bare.geom_solref[0], (default.ngeom, 1)))
    assert np.array_equal(default.geom_solimp, np.tile(bare.geom_solimp[0], (default.ngeom, 1)))
    contact = parse_twin_block({"contact": {"cone": "elliptic", "torsional_friction": 0.012, "solref": [0.01, 0.8],
                                            "solimp": [0.8, 0.95, 0.002, 0.5, 2.0]}}, "lab.yaml").contact
    twin = SimTwin(robot, "pegs", twin_params=TwinParams(contact=contact))
    m = twin.model
    assert m.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    touching = m.geom_contype.astype(bool) | m.geom_conaffinity.astype(bool)   # the robot's, the ground, the pegs
    assert set(m.geom_condim[touching]) == {4} and np.all(m.geom_friction[touching, 1] == 0.012)
    assert np.allclose(m.geom_solref[touching], (0.01, 0.8)) and np.allclose(m.geom_solimp[touching, 2], 0.002)
    twin.step(50)   # lying on the ground: every contact has the torsional row
    dims = twin.data.contact.dim[:twin.data.ncon]
    assert twin.data.ncon > 0 and set(dims.tolist()) == {4}


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


def test_a_zero_offset_turns_the_link_not_the_servo_s_angle() -> None:
    """The servo reads and holds ``q``; the link stands where the twin without the offset puts it at ``q - z``.

    The oracle is MuJoCo's kinematics of the twin without an offset. Hanging from its head, the body
    then sags back toward the vertical: the servo's angle moves off its goal by less than ``z``, the
    way gravity pulls the tilted link.
    """
    from snake_hardware.sim.mjcf import SimOptions

    robot = load_robot("tsnake")
    z, joint = 0.01, robot.joints[0]
    q0 = np.linspace(-0.2, 0.2, len(robot.joints))
    shifted = q0.copy()
    shifted[0] -= z
    offset = SimTwin(robot, None, SimOptions(lifted=True),
                     twin_params=TwinParams(joint={joint.name: {"zero_offset_rad": z}}))
    plain = SimTwin(robot, None, SimOptions(lifted=True))
    offset.reset(targets=q0)
    plain.reset(targets=shifted)
    assert np.array_equal(offset.joint_positions(), q0)
    assert np.allclose(offset.site_position(mjcf.TAIL_TIP_SITE), plain.site_position(mjcf.TAIL_TIP_SITE), atol=1e-12)
    assert not np.allclose(plain.site_position(mjcf.TAIL_TIP_SITE), _tail_at(robot, q0), atol=1e-6)
    straight = SimTwin(robot, None, SimOptions(lifted=True),
                       twin_params=TwinParams(joint={joint.name: {"zero_offset_rad": z}}))
    straight.reset()
    straight.advance(2.0)
    sag = straight.joint_positions()[0]
    assert 0.0 < sag < z, sag   # pulled toward the servo angle z, where the link hangs straight


def _tail_at(robot, q: np.ndarray) -> np.ndarray:
    from snake_hardware.sim.mjcf import SimOptions

    twin = SimTwin(robot, None, SimOptions(lifted=True))
    twin.reset(targets=q)
    return twin.site_position(mjcf.TAIL_TIP_SITE)


def _short_rollout(twin: SimTwin) -> np.ndarray:
    """The twin's joint angles over a short excitation (every control period), shape (periods, joints)."""
    rows = []
    for k in range(40):
        twin.set_targets(0.3 * np.sin(0.2 * k + np.arange(len(twin.joint_names))))
        twin.step(twin.substeps)
        rows.append(twin.joint_positions())
    return np.array(rows)


@pytest.mark.parametrize("lifted", [False, True])
def test_no_gear_play_builds_and_runs_todays_twin_bit_for_bit(lifted: bool) -> None:
    robot = load_robot("tsnake")
    options = mjcf.SimOptions(lifted=lifted)
    zero = TwinParams(servo={t: ServoParams(backlash_rad=0.0) for t in ("dorsal", "twist", "lateral")})
    assert mjcf.build_mjcf(robot, None, options, twin=zero) == mjcf.build_mjcf(robot, None, options)
    with_key, without = SimTwin(robot, None, options, twin_params=zero), SimTwin(robot, None, options)
    assert with_key.model.nq == without.model.nq and with_key.joint_play_qpos_addresses[0].size == 0
    q_key, q_without = _short_rollout(with_key), _short_rollout(without)
    assert np.array_equal(q_key, q_without) and np.array_equal(with_key.data.qpos, without.data.qpos)
    assert np.abs(q_without).max() > 0.05  # the rollout moved the joints


def test_gear_play_is_two_hinges_whose_sum_is_the_joint_and_whose_play_stays_within_its_range() -> None:
    robot = load_robot("tsnake")
    play = 0.01  # rad, total
    params = TwinParams(servo={"dorsal": ServoParams(backlash_rad=play)})
    twin = SimTwin(robot, None, mjcf.SimOptions(lifted=True), twin_params=params)
    m = twin.model
    dorsal = [i for i, j in enumerate(robot.joints) if j.type == "dorsal"]
    idx, adr = twin.joint_play_qpos_addresses
    assert idx.tolist() == dorsal
    first = robot.joints[dorsal[0]]
    jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, first.name + mjcf.PLAY_SUFFIX)
    assert m.jnt_limited[jid] and tuple(m.jnt_range[jid]) == pytest.approx((-play / 2, play / 2))
    # The actuator drives the motor-side hinge, named as the joint; the link hangs on the play hinge.
    aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, first.name)
    assert m.actuator_trnid[aid, 0] == mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, first.name)
    assert m.body(f"{first.name}_link").id == m.jnt_bodyid[jid]
    q = _short_rollout(twin)
    motor = twin.data.qpos[twin.joint_qpos_addresses]
    assert np.array_equal(q[-1][dorsal], motor[dorsal] + twin.data.qpos[adr])
    assert not np.array_equal(q[-1][dorsal], motor[dorsal])   # the links did move within their play


@pytest.mark.parametrize("load", [0.5, -0.5])
def test_a_load_on_the_link_holds_it_on_the_flank_of_its_play(load: float) -> None:
    """A torque on the link (here a generalised force on the play hinge: it turns the link alone)
    takes it across the play to the flank in its direction, where the play's limit holds it within
    5 % of the half play; the servo's loop reads the output shaft, so the motor side moves back by
    the half play and the joint stays at its target."""
    robot = load_robot("tsnake")
    play = 0.006
    twin = SimTwin(robot, None, mjcf.SimOptions(lifted=True),
                   twin_params=TwinParams(servo={"lateral": ServoParams(backlash_rad=play)}))
    i = next(k for k, j in enumerate(robot.joints) if j.type == "lateral")
    idx, adr = twin.joint_play_qpos_addresses
    dof = twin.model.jnt_dofadr[mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_JOINT,
                                                  robot.joints[i].name + mjcf.PLAY_SUFFIX)]
    twin.data.qfrc_applied[dof] = load
    twin.step(250)
    shaft = twin.data.qpos[adr[idx.tolist().index(i)]]
    assert shaft == pytest.approx(math.copysign(play / 2, load), rel=0.05)
    motor = twin.data.qpos[twin.joint_qpos_addresses[i]]
    assert motor == pytest.approx(-shaft, abs=0.1 * play)   # the motor side makes up for the play
    assert twin.joint_positions()[i] == motor + shaft and abs(motor + shaft) < 0.1 * play   # the servo holds its target


def test_the_loop_of_a_servo_with_play_holds_the_output_shaft_where_the_servo_without_play_holds_it() -> None:
    """Oracle: the same twin without play. Bent and hanging, gravity loads every joint, and the loads
    hold each play at a flank; a loop closed on the output shaft (the X-series' encoder) holds the
    joints where the twin without play holds them, where a loop on the motor side would leave each
    a half play (3 mrad) away. Friction is 0 so that the rest pose does not depend on the path."""
    robot = load_robot("tsnake")
    play = 0.006
    bend = np.zeros(len(robot.joints))
    bend[12:15] = 0.5   # rad: a bend near the tail, the links below it off the vertical

    def rest(backlash: float) -> SimTwin:
        params = TwinParams(servo={t: ServoParams(backlash_rad=backlash, frictionloss=0.0)
                                   for t in ("dorsal", "twist", "lateral")})
        twin = SimTwin(robot, None, mjcf.SimOptions(lifted=True), twin_params=params)
        twin.reset(targets=bend)
        twin.step(6000)   # 24 s: the hanging body's swing has died out
        return twin

    plain, with_play = rest(0.0), rest(play)
    droop = plain.joint_positions() - bend
    assert np.abs(droop).max() > 4 * play   # gravity loads the joints
    _, adr = with_play.joint_play_qpos_addresses
    assert np.sum(np.abs(with_play.data.qpos[adr]) > 0.9 * play / 2) >= 12   # most plays sit on a flank
    assert np.abs(with_play.joint_positions() - plain.joint_positions()).max() < 0.05 * play / 2


@pytest.mark.parametrize("torque", [0.02, 0.1])
def test_the_dry_friction_of_a_servo_with_play_holds_its_output_shaft(torque: float) -> None:
    """The servo's dry friction is the loaded gear train's: it acts on the output shaft (the tendon over
    both hinges), not on the motor side alone, where a torque on a limp link below it would still
    swing the link across the play. Hanging straight, the twist joints' axes are vertical and
    gravity turns none of them; a torque about the body's axis on the last twist joint's link, with
    every servo limp, passes through every twist joint above it. MuJoCo's dry friction is a soft
    constraint: below it a joint creeps (here 0.36 mrad in 0.2 s without play, 0.72 with it), far
    less than the half play (3 mrad) a free play hinge would open at once."""
    robot = load_robot("tsnake")
    play, friction = 0.006, 0.05
    twin = SimTwin(robot, None, mjcf.SimOptions(lifted=True), twin_params=TwinParams(
        servo={t: ServoParams(backlash_rad=play, frictionloss=friction) for t in ("dorsal", "twist", "lateral")}))
    m = twin.model
    last = max(k for k, j in enumerate(robot.joints) if j.type == "twist")
    name = robot.joints[last].name
    tendon = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_TENDON, name + mjcf.OUTPUT_SUFFIX)
    assert m.tendon_frictionloss[tendon] == pytest.approx(friction)
    assert m.dof_frictionloss[m.jnt_dofadr[m.joint(name).id]] == 0.0   # not on the motor side
    twin.set_torque(False)
    twin.step(10)
    link = m.body(f"{name}_link").id
    twin.data.xfrc_applied[link, 3:] = torque * twin.data.xmat[link].reshape(3, 3) @ np.asarray(robot.joints[last].axis)
    start = twin.joint_positions()[last]
    twin.step(50)
    turned = abs(twin.joint_positions()[last] - start)
    if torque < friction:
        assert turned < 0.25 * play   # held by the friction (but for its creep): the play does not open
    else:
        assert turned > 2 * play      # beyond it the shaft turns, play and all


@pytest.mark.parametrize("lifted", [False, True])
def test_no_load_dependent_friction_runs_todays_twin_bit_for_bit(lifted: bool) -> None:
    robot = load_robot("tsnake")
    options = mjcf.SimOptions(lifted=lifted)
    zero = TwinParams(servo={t: ServoParams(load_friction=0.0) for t in ("dorsal", "twist", "lateral")})
    with_key, without = SimTwin(robot, None, options, twin_params=zero), SimTwin(robot, None, options)
    assert with_key.load_friction is None
    assert np.array_equal(_short_rollout(with_key), _short_rollout(without))
    assert np.array_equal(with_key.data.qpos, without.data.qpos)


def test_load_dependent_friction_is_the_dry_friction_plus_l_times_mujocos_actuator_force_each_step() -> None:
    """Oracle: MuJoCo's own ``actuator_force`` of each step (computed by ``mj_step`` at the state the
    friction was set from, after the clamps of ctrlrange and forcerange) gives ``c + l |tau|``."""
    robot = load_robot("tsnake")
    c, load = 0.03, {"dorsal": 0.1, "twist": 0.0, "lateral": 0.3}
    params = TwinParams(servo={t: ServoParams(frictionloss=c, load_friction=v) for t, v in load.items()})
    twin = SimTwin(robot, None, mjcf.SimOptions(lifted=True), twin_params=params)
    l_joint = np.array([load[j.type] for j in robot.joints])
    dofs = twin.model.jnt_dofadr[[twin.model.joint(n).id for n in robot.joint_names]]
    rng = np.random.default_rng(5)
    saturated = False
    for k in range(40):
        if k % 10 == 0:
            twin.set_targets(rng.uniform(-1.2, 1.2, len(robot.joints)))
        twin.step(1)
        tau = twin.data.actuator_force[twin.load_friction.act]
        saturated |= bool(np.any(np.abs(tau) >= twin.model.actuator_forcerange[twin.load_friction.act, 1]))
        assert np.allclose(twin.model.dof_frictionloss[dofs], c + l_joint * np.abs(tau), rtol=1e-12, atol=1e-15)
    assert saturated   # the force range's clamp was exercised
    twin.set_torque(False)   # limp: no actuator torque, the dry friction falls to c
    twin.step(1)
    assert np.allclose(twin.model.dof_frictionloss[dofs], c)
    plain = SimTwin(robot, None, mjcf.SimOptions(lifted=True),
                    twin_params=TwinParams(servo={t: ServoParams(frictionloss=c) for t in load}))
    assert not np.array_equal(_short_rollout(plain), _short_rollout(SimTwin(robot, None, mjcf.SimOptions(lifted=True),
                                                                             twin_params=params)))
