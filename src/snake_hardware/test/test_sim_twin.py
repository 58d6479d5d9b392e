"""Simulation core and worlds with real MuJoCo physics (each test a few simulated seconds)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from snake_hardware.sim.twin import SimTwin
from snake_hardware.sim.worlds import load_world, world_from_dict

ROOT = Path(__file__).resolve().parents[3]
WORLDS = ROOT / "config" / "worlds"


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate v by the unit quaternion q = (w, x, y, z) (own implementation)."""
    w, u = q[0], q[1:]
    return v + 2 * w * np.cross(u, v) + 2 * np.cross(u, np.cross(u, v))


def test_position_servos_track_held_targets_on_the_ground() -> None:
    twin = SimTwin("tsnake", "flat")
    rng = np.random.default_rng(7)
    targets = np.zeros(len(twin.joint_names))
    for i, j in enumerate(twin.robot.joints):
        if j.type == "twist":
            targets[i] = rng.uniform(-4.0, 4.0)  # continuous joint: beyond +-pi on purpose
        elif j.type == "lateral":
            targets[i] = rng.uniform(-0.6, 0.6)
        else:
            targets[i] = rng.uniform(-0.15, 0.15)
    twin.set_targets(targets)
    twin.advance(2.5)
    assert twin.time == pytest.approx(2.5)
    # A held joint under the ground's friction load sags by load / kp (the XM430-W350's factory
    # P gain gives kp 18.9 N m/rad: 0.06 rad under about 1.2 N m here); each servo's torque is
    # its spring law kp (target - q), within its torque limit.
    np.testing.assert_allclose(twin.joint_positions(), targets, atol=0.1)
    np.testing.assert_allclose(twin.joint_velocities(), 0.0, atol=0.05)
    kp = twin.model.actuator_gainprm[:, 0]
    np.testing.assert_allclose(twin.joint_efforts(), kp * (targets - twin.joint_positions()), atol=0.02)
    efforts = np.array([j.effort for j in twin.robot.joints])
    assert np.all(np.abs(twin.joint_efforts()) <= efforts + 1e-9)
    # a dict target moves only the named joint
    # a dict target moves only the named joint (the tail joint: it turns a light segment, so
    # ground friction does not load the servo)
    held = twin.joint_positions()
    twin.set_targets({"m6_lateral": targets[17] + 0.3})
    twin.advance(1.0)
    assert twin.joint_positions()[17] == pytest.approx(targets[17] + 0.3, abs=0.02)
    np.testing.assert_allclose(twin.joint_positions()[:17], held[:17], atol=0.05)
    np.testing.assert_allclose(twin.targets[:17], targets[:17])


def test_limited_joint_target_is_clamped_to_its_range() -> None:
    twin = SimTwin("wheeled_snake", "flat")
    upper = twin.robot.joint("j5").upper
    twin.set_targets({"j5": 3.0})
    twin.advance(1.5)
    assert twin.joint_positions()[3] == pytest.approx(upper, abs=0.05)


def test_bad_targets_are_refused() -> None:
    twin = SimTwin("wheeled_snake", None)
    with pytest.raises(KeyError, match="nope"):
        twin.set_targets({"nope": 0.1})
    with pytest.raises(ValueError, match="targets"):
        twin.set_targets([0.0, 0.1])
    with pytest.raises(ValueError, match="j2"):
        twin.set_targets({"j2": float("nan")})


def test_absurd_targets_are_refused_whole_and_the_others_keep_tracking() -> None:
    twin = SimTwin("tsnake", "flat")
    before = twin.targets
    with pytest.raises(ValueError, match="m2_twist"):
        twin.set_targets({"m1_dorsal": 0.4, "m2_twist": 1e12})
    assert np.array_equal(twin.targets, before)       # nothing applied, nothing reaches MuJoCo
    with pytest.raises(ValueError, match="beyond"):
        twin.set_targets(np.full(18, 5e6))
    twin.set_targets({"m1_dorsal": 0.4})
    twin.advance(1.0)
    q = twin.joint_positions()
    assert np.all(np.isfinite(q)) and q[0] == pytest.approx(0.4, abs=0.05)


def push(twin: SimTwin, link: int, direction: np.ndarray, force: float, duration: float) -> np.ndarray:
    """Apply a horizontal force at link's axle point for ``duration`` s; return the axle's displacement."""
    m, d = twin.model, twin.data
    site = f"link{link}_axle"
    body = int(m.site_bodyid[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, site)])
    twin.advance(0.3)  # settle on the wheels
    start = twin.site_position(site)
    for _ in range(round(duration / twin.timestep)):
        d.qfrc_applied[:] = 0.0
        mujoco.mj_applyFT(m, d, force * direction, np.zeros(3), d.site_xpos[mujoco.mj_name2id(
            m, mujoco.mjtObj.mjOBJ_SITE, site)], body, d.qfrc_applied)
        twin.step(1)
    d.qfrc_applied[:] = 0.0
    return twin.site_position(site) - start


def test_passive_wheels_resist_sideways_motion_far_more_than_rolling() -> None:
    """Non-holonomic behaviour from physics: the same push rolls a link along its axis, not sideways."""
    twin = SimTwin("wheeled_snake", "flat")
    along = np.array([1.0, 0.0, 0.0])  # the straight snake's axis (spawn yaw 0)
    sideways = np.array([0.0, 1.0, 0.0])
    force = 3.0  # N, about a tenth of the friction limit mu m g of the whole snake
    roll = push(twin, 4, along, force, 0.5)
    twin.reset()
    slide = push(twin, 4, sideways, force, 0.5)
    # along the axis the snake rolls freely: close to F t^2 / (2 m) for the whole mass
    free = force * 0.5**2 / (2 * twin.total_mass())
    assert roll[0] == pytest.approx(free, rel=0.25)
    # sideways the wheels' friction holds it
    assert np.linalg.norm(slide[:2]) < roll[0] / 50
    # and the wheels spun only in the rolling case
    wheel = mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_JOINT, "link4_wheel_left")
    assert abs(twin.data.qpos[twin.model.jnt_qposadr[wheel]]) < 0.05


def test_uneven_terrain_statistics_match_targets_and_reproduce() -> None:
    spec = yaml.safe_load((WORLDS / "uneven.yaml").read_text())
    g = spec["ground"]
    a = load_world(WORLDS / "uneven.yaml").terrain
    b = load_world(WORLDS / "uneven.yaml").terrain
    assert a is not None and b is not None
    h = a.heights
    assert np.ptp(h) == pytest.approx(g["max_height_variation"], rel=1e-9)
    assert np.std(h) == pytest.approx(g["height_std"], rel=1e-3)
    assert h.shape == (round(g["size"][1] / g["resolution"]) + 1, round(g["size"][0] / g["resolution"]) + 1)
    np.testing.assert_array_equal(h, b.heights)
    spec["ground"]["seed"] = g["seed"] + 1
    c = world_from_dict(spec).terrain
    assert c is not None
    assert np.std(c.heights) == pytest.approx(g["height_std"], rel=1e-3)
    assert np.abs(c.heights - h).max() > 0.05
    # smooth, not white noise: neighbouring samples are strongly correlated
    assert np.corrcoef(h[:, :-1].ravel(), h[:, 1:].ravel())[0, 1] > 0.95


def test_mujoco_height_field_is_the_generated_terrain() -> None:
    twin = SimTwin("tsnake", "uneven")
    m, d = twin.model, twin.data
    terrain = twin.world.terrain
    rng = np.random.default_rng(1)
    down = np.array([0.0, 0.0, -1.0])
    geomid = np.zeros(1, np.int32)
    ground = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "ground")
    for x, y in rng.uniform(-3.5, 3.5, size=(40, 2)):
        if abs(y) < 0.1 and -0.1 < x < 1.4:
            continue  # the robot lies there
        dist = mujoco.mj_ray(m, d, np.array([x, y, 2.0]), down, None, 1, -1, geomid)
        assert geomid[0] == ground
        # MuJoCo triangulates each grid cell; bilinear interpolation differs by less than 2 mm here
        assert 2.0 - dist == pytest.approx(float(terrain.height_at(x, y)), abs=2e-3)


def test_robot_spawns_above_uneven_terrain_and_settles_on_it() -> None:
    twin = SimTwin("tsnake", "uneven")
    twin.advance(3.0)  # a straight body rolls off the bump it was dropped on, then rests
    r = twin.robot.tsnake_body.radius
    for site in ("head_tip", "tail_tip"):
        p = twin.site_position(site)
        # resting on the ground: not sunk into it, not floating
        assert p[2] - float(twin.world.ground_height(p[0], p[1])) > r * 0.5
    assert np.linalg.norm(twin.data.qvel[:3]) < 0.05


def test_reset_seed_jitter_is_reproducible_and_markers_ride_on_the_head(tmp_path: Path) -> None:
    spec = yaml.safe_load((WORLDS / "flat.yaml").read_text())
    spec["spawn"].update(xy_jitter=0.1, yaw_jitter=0.5)
    world = world_from_dict(spec)
    twin = SimTwin("tsnake", world)
    twin.reset(seed=4)
    p4, q4 = twin.base_pose()
    twin.reset(seed=5)
    p5, _ = twin.base_pose()
    twin.reset(seed=4)
    np.testing.assert_array_equal(twin.base_pose()[0], p4)
    np.testing.assert_array_equal(twin.base_pose()[1], q4)
    assert np.linalg.norm(p4[:2] - p5[:2]) > 1e-3
    # markers are rigid on the head: local offsets fixed while the body moves and tumbles
    pos, quat = twin.head_pose()
    local = np.array([quat_rotate(quat * [1, -1, -1, -1], mk - pos) for mk in twin.head_markers()])
    twin.set_targets([1.0 if j.type == "twist" else 0.5 for j in twin.robot.joints])
    twin.advance(1.0)
    pos, quat = twin.head_pose()
    np.testing.assert_allclose(twin.base_pose()[0], pos, atol=1e-9)
    np.testing.assert_allclose(np.abs(twin.base_pose()[1] @ quat), 1.0, atol=1e-9)
    expected = np.array([pos + quat_rotate(quat, v) for v in local])
    np.testing.assert_allclose(twin.head_markers(), expected, atol=1e-9)
    # three distinct, non-collinear markers (a rigid body can be fitted to them)
    mk = twin.head_markers()
    assert np.linalg.norm(np.cross(mk[1] - mk[0], mk[2] - mk[0])) > 1e-4
    # accessors return copies
    q = twin.joint_positions()
    q[:] = 99.0
    assert not np.any(twin.joint_positions() == 99.0)


def test_lateral_undulation_propels_the_wheeled_snake_against_the_wave_only_with_wheel_grip() -> None:
    """Serpenoid undulation (001/002) on passive wheels: the body moves opposite to the travelling wave.

    With the wheels' grip removed (friction 0.01) the same joint motion goes less than a fifth as far:
    the propulsion comes from the wheels' sideways constraint in the physics.
    """
    twin = SimTwin("wheeled_snake", "flat")
    phases = 0.8 * np.arange(len(twin.joint_names))  # rad, beta per joint, head to tail

    def run(direction: float) -> np.ndarray:
        twin.reset()
        start = twin.centre_of_mass()
        # phase omega t direction + beta i: direction -1 sends the wave from head to tail
        twin.advance(3.0, lambda tw: 0.6 * np.sin(direction * 3.0 * tw.time + phases))
        return twin.centre_of_mass() - start

    headward = run(-1.0)  # head frame -x is head-first at spawn yaw 0
    tailward = run(+1.0)
    assert headward[0] < -0.3
    assert tailward[0] > 0.3
    names = [mujoco.mj_id2name(twin.model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(twin.model.ngeom)]
    wheels = [g for g, n in enumerate(names) if "wheel" in n]
    assert len(wheels) == 2 * twin.robot.wheeled_body.n_links
    twin.model.geom_friction[wheels, 0] = 0.01
    slippery = run(-1.0)
    assert np.linalg.norm(slippery[:2]) < 0.2 * abs(headward[0])


def test_servo_is_a_stiff_spring_up_to_its_torque_limit_then_gives_way() -> None:
    """External torque on a held joint: deflection tau / kp below the YAML effort, back-driven beyond it."""
    twin = SimTwin("wheeled_snake", "flat")
    m, d = twin.model, twin.data
    joint = twin.robot.joint("j5")
    aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, "j5")
    kp = m.actuator_gainprm[aid, 0]
    dof = m.jnt_dofadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "j5")]
    idx = twin.joint_names.index("j5")

    def hold_against(torque: float) -> float:
        # 6 s: under the factory gain's deflection (0.11 rad at half the effort) the links creep on
        # their wheels for seconds while the tyres' contact forces share the torque and fade away
        twin.reset()
        for _ in range(round(6.0 / twin.timestep)):
            d.qfrc_applied[dof] = torque
            twin.step(1)
        d.qfrc_applied[:] = 0.0
        return float(twin.joint_positions()[idx])

    # the links roll on their wheels, so the applied torque is taken by the servo alone
    half = 0.5 * joint.effort
    assert hold_against(half) == pytest.approx(half / kp, rel=0.1)
    assert twin.joint_efforts()[idx] == pytest.approx(-kp * twin.joint_positions()[idx], rel=1e-3)
    assert hold_against(-half) == pytest.approx(-half / kp, rel=0.1)
    # beyond the torque limit the servo cannot hold: the joint is back-driven far past the
    # deflection a spring of stiffness kp would have (1.5 effort / kp = 0.33 rad at the factory kp)
    assert hold_against(1.5 * joint.effort) > 3 * 1.5 * joint.effort / kp
    assert abs(twin.joint_efforts()[idx]) == pytest.approx(joint.effort)
