"""MJCF generation: the compiled MuJoCo model against values read straight from the YAML files.

The expected values are computed here from the raw YAML (yaml.safe_load, own merging of
joint_types defaults), not through snake_core.robot or the generator's helpers.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from snake_core.errors import RobotConfigError, WorldConfigError
from snake_core.robot import load_robot
from snake_hardware.sim.mjcf import build_mjcf
from snake_hardware.sim.twin import SimTwin
from snake_hardware.sim.worlds import load_world

ROOT = Path(__file__).resolve().parents[3]
ROBOTS = ROOT / "config" / "robots"
WORLDS = ROOT / "config" / "worlds"


def raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def raw_joints(robot_file: Path) -> list[dict]:
    data = raw(robot_file)
    return [{**data["joint_types"][j["type"]], **j} for j in data["joints"]]


def servo_expectation(joint: dict) -> tuple[float, float, float]:
    """kp (N m/rad), kv (N m s/rad) and torque limit (N m) of a raw joint, from its raw servo model file.

    The e-Manual's firmware (duty = (P / div_p) ticks of error / pwm_full, clipped to pwm_limit;
    D / div_d per tick per ms) driving the datasheet's DC motor at its nominal voltage.
    """
    servo = raw(ROOT / "config" / "servos" / f"{joint['model']}.yaml")
    motor, fw = servo["motor"], servo["firmware"]
    regs = {**fw["factory"], **joint.get("registers", {})}
    volts = motor["nominal_voltage"]
    kt = volts / motor["no_load_speed"]
    stall = motor["stall_torque"]  # = kt V / R at rest, full duty
    per_rad = stall / fw["pwm_full"] / (2 * math.pi / 4096)
    kp = per_rad * regs["position_p_gain"] / fw["p_gain_divisor"]
    kv = per_rad * regs["position_d_gain"] / fw["d_gain_divisor"] * 1e-3
    effort = stall * regs["pwm_limit"] / fw["pwm_full"]
    if fw["current_unit_a"] > 0 and regs["current_limit"] > 0:
        effort = min(effort, kt * regs["current_limit"] * fw["current_unit_a"])
    return kp, kv, effort


def compile_model(robot: str, world: str | None = "flat") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(build_mjcf(load_robot(robot), load_world(world) if world else None))


def name(m: mujoco.MjModel, obj: mujoco.mjtObj, i: int) -> str:
    return mujoco.mj_id2name(m, obj, i)


@pytest.mark.parametrize("robot", ["tsnake", "wheeled_snake"])
@pytest.mark.parametrize("world", ["flat", "uneven", "pegs"])
def test_mjcf_compiles_with_one_position_actuator_per_yaml_joint(robot: str, world: str) -> None:
    m = compile_model(robot, world)
    joints = raw_joints(ROBOTS / f"{robot}.yaml")
    assert m.nu == len(joints)
    assert [name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(m.nu)] == [j["name"] for j in joints]
    for i, j in enumerate(joints):
        # each actuator drives the joint of the same name, force limited to its servo's torque at
        # full duty (the shipped robots' YAML effort is that stall torque)
        kp, kv, effort = servo_expectation(j)
        assert name(m, mujoco.mjtObj.mjOBJ_JOINT, m.actuator_trnid[i, 0]) == j["name"]
        assert m.actuator_forcelimited[i]
        np.testing.assert_allclose(m.actuator_forcerange[i], [-effort, effort])
        assert effort == pytest.approx(j["effort"])
        # a position servo: force = kp (ctrl - q) - kv qdot, the gains of its firmware registers
        assert m.actuator_gainprm[i, 0] == pytest.approx(kp, rel=1e-6)
        assert m.actuator_biasprm[i, 1] == -m.actuator_gainprm[i, 0]
        assert m.actuator_biasprm[i, 2] == pytest.approx(-kv, abs=1e-12)


@pytest.mark.parametrize("robot", ["tsnake", "wheeled_snake"])
def test_joint_names_ranges_axes_match_yaml(robot: str) -> None:
    m = compile_model(robot)
    for j in raw_joints(ROBOTS / f"{robot}.yaml"):
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j["name"])
        assert jid >= 0, j["name"]
        assert m.jnt_type[jid] == mujoco.mjtJoint.mjJNT_HINGE
        # all bodies share the head frame at zero angles, so the body-frame axis is the YAML axis
        np.testing.assert_allclose(m.jnt_axis[jid], j["axis"], atol=1e-12)
        aid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, j["name"])
        if j.get("continuous", False):
            assert not m.jnt_limited[jid]
            assert not m.actuator_ctrllimited[aid]
        else:
            assert m.jnt_limited[jid]
            np.testing.assert_allclose(m.jnt_range[jid], [j["lower"], j["upper"]])
            np.testing.assert_allclose(m.actuator_ctrlrange[aid], [j["lower"], j["upper"]])


def test_tsnake_length_joint_positions_and_mass_from_yaml() -> None:
    body = raw(ROBOTS / "tsnake.yaml")["body"]
    n, l0 = body["n_modules"], body["module_length"]
    twin = SimTwin("tsnake", "flat")
    m, d = twin.model, twin.data
    # straight at reset: backbone from head tip to tail tip is n L0
    length = np.linalg.norm(twin.site_position("head_tip") - twin.site_position("tail_tip"))
    assert length == pytest.approx(n * l0, abs=1e-9)
    assert n * l0 == pytest.approx(1.233, abs=1e-12)
    # every joint sits at module * L0 + joint_positions[type] behind the head tip
    order = body["joint_order"]
    for i, j in enumerate(raw_joints(ROBOTS / "tsnake.yaml")):
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j["name"])
        expected = (i // len(order)) * l0 + body["joint_positions"][order.index(j["type"])]
        dist = np.linalg.norm(d.xanchor[jid] - twin.site_position("head_tip"))
        assert dist == pytest.approx(expected, abs=1e-9), j["name"]
    assert twin.total_mass() == pytest.approx(n * body["module_mass"], rel=1e-9)
    # capsules of the module radius
    capsules = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE]
    assert len(capsules) >= 3 * n
    assert all(m.geom_size[g, 0] == pytest.approx(body["radius"]) for g in capsules)


def test_wheeled_snake_links_and_wheels_from_yaml() -> None:
    body = raw(ROBOTS / "wheeled_snake.yaml")["body"]
    twin = SimTwin("wheeled_snake", "flat")
    m, d = twin.model, twin.data
    head = twin.site_position("head_tip")
    front = 0.0  # distance of link i's front joint behind the head tip
    for i in range(body["n_links"]):
        axle = twin.site_position(f"link{i + 1}_axle")
        assert np.linalg.norm(axle - head) == pytest.approx(front + body["wheel_d"][i], abs=1e-9)
        for side in ("left", "right"):
            wid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, f"link{i + 1}_wheel_{side}")
            assert m.jnt_type[wid] == mujoco.mjtJoint.mjJNT_HINGE
            assert wid not in m.actuator_trnid[:, 0]  # passive: no actuator drives a wheel
            gid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"link{i + 1}_wheel_{side}")
            assert m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_CYLINDER
            assert m.geom_size[gid, 0] == pytest.approx(body["wheel_radius"])
            # wheel axle coaxial with the link's lateral direction, wheel centred on the axle point
            np.testing.assert_allclose(d.xanchor[wid][[0, 2]], axle[[0, 2]], atol=1e-9)
        front += body["wheel_d"][i] + body["wheel_l"][i]
    length = np.linalg.norm(twin.site_position("tail_tip") - head)
    assert length == pytest.approx(sum(body["wheel_d"]) + sum(body["wheel_l"]), abs=1e-9)
    assert twin.total_mass() == pytest.approx(body["n_links"] * body["link_mass"], rel=1e-9)
    # resting on its wheels: axle points at wheel_radius above the ground
    assert head[2] == pytest.approx(body["wheel_radius"], abs=0.01)


def test_pegs_are_where_the_file_says() -> None:
    pegs = raw(WORLDS / "pegs.yaml")["obstacles"]["pegs"]
    m = compile_model("tsnake", "pegs")
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    down = np.array([0.0, 0.0, -1.0])
    geomid = np.zeros(1, np.int32)
    for i, (cx, cy) in enumerate(pegs["centres"]):
        gid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, f"peg_{i}")
        assert m.geom_type[gid] == mujoco.mjtGeom.mjGEOM_CYLINDER
        # a ray from above hits the peg's top at its height on the axis...
        dist = mujoco.mj_ray(m, d, np.array([cx, cy, 1.0]), down, None, 1, -1, geomid)
        assert geomid[0] == gid
        assert dist == pytest.approx(1.0 - pegs["height"], abs=1e-9)
        # ...and misses it just outside the stated diameter (hits the ground)
        r = pegs["diameter"] / 2
        for ang in np.linspace(0, 2 * math.pi, 8, endpoint=False):
            p = np.array([cx + 1.05 * r * math.cos(ang), cy + 1.05 * r * math.sin(ang), 1.0])
            dist = mujoco.mj_ray(m, d, p, down, None, 1, -1, geomid)
            assert dist == pytest.approx(1.0, abs=1e-9)
            p[:2] = [cx + 0.95 * r * math.cos(ang), cy + 0.95 * r * math.sin(ang)]
            assert mujoco.mj_ray(m, d, p, down, None, 1, -1, geomid) == pytest.approx(1.0 - pegs["height"], abs=1e-9)


def write(tmp_path: Path, name: str, data: dict) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda w: w["ground"].__setitem__("type", "lava"), "ground.type"),
        (lambda w: w["ground"].__setitem__("height_std", -0.05), "ground.height_std"),
        (lambda w: w["ground"].__setitem__("height_std", 0.15), "ground.height_std"),  # std > range / 2
        (lambda w: w["ground"].__setitem__("seed", "abc"), "ground.seed"),
        (lambda w: w["ground"].__setitem__("size", [8.0]), "ground.size"),
        (lambda w: w["ground"].pop("resolution"), "ground.resolution"),
        (lambda w: w.__setitem__("obstacles", {"pegs": {"diameter": 0.1, "height": 0.2, "friction": 0.5,
                                                        "centres": [[0, 1], [2]]}}), r"obstacles.pegs.centres\[1\]"),
        (lambda w: w.__setitem__("obstacles", {"pegs": {"diameter": 0, "height": 0.2, "friction": 0.5,
                                                        "centres": [[0, 1]]}}), "obstacles.pegs.diameter"),
        (lambda w: w.__setitem__("spawn", {"x": 0, "yaw_jitter": -1}), "spawn.yaw_jitter"),
    ],
)
def test_bad_world_file_names_file_and_field(tmp_path: Path, edit, field: str) -> None:
    data = raw(WORLDS / "uneven.yaml")
    edit(data)
    path = write(tmp_path, "bad_world.yaml", data)
    with pytest.raises(WorldConfigError, match=rf"bad_world\.yaml: {field}"):
        SimTwin("tsnake", path)


def test_bad_robot_file_names_file_and_field(tmp_path: Path) -> None:
    data = raw(ROBOTS / "tsnake.yaml")
    data["body"]["radius"] = -0.028
    path = write(tmp_path, "bad_robot.yaml", data)
    with pytest.raises(RobotConfigError, match=r"bad_robot\.yaml: body\.radius"):
        SimTwin(path, "flat")


def test_missing_world_names_the_world() -> None:
    with pytest.raises(WorldConfigError, match="no_such_world"):
        SimTwin("tsnake", "no_such_world")


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues' formula (own implementation)."""
    a = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


@pytest.mark.parametrize("robot", ["tsnake", "wheeled_snake"])
def test_mjcf_kinematics_equal_the_urdf_at_random_joint_angles(robot: str) -> None:
    """The MJCF and the URDF (snake_core.urdf) are two views of one YAML: same link poses for the same angles."""
    urdf_gen = pytest.importorskip("snake_core.urdf")  # written in parallel with this module
    model = load_robot(robot)
    urdf = ET.fromstring(urdf_gen.robot_to_urdf(model))
    twin = SimTwin(model, "flat")
    m, d = twin.model, twin.data
    rng = np.random.default_rng(11)
    for _ in range(3):
        q = np.array([rng.uniform(-3, 3) if j.continuous else rng.uniform(j.lower, j.upper) for j in model.joints])
        d.qpos[[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n)] for n in model.joint_names]] = q
        mujoco.mj_kinematics(m, d)
        angles = dict(zip(model.joint_names, q, strict=True))
        # URDF forward kinematics in the head frame
        poses = {"head": (np.zeros(3), np.eye(3))}
        for joint in urdf.findall("joint"):
            if joint.get("type") == "fixed":
                continue
            parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
            origin = np.array([float(v) for v in joint.find("origin").get("xyz").split()])
            axis = np.array([float(v) for v in joint.find("axis").get("xyz").split()])
            p, r = poses[parent]
            poses[child] = (p + r @ origin, r @ rotation(axis, angles[joint.get("name")]))
        head = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "head")
        r_head = d.xmat[head].reshape(3, 3)
        assert len(poses) == len(model.joints) + 1
        for link, (p, r) in poses.items():
            bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, link)
            assert bid >= 0, link
            np.testing.assert_allclose(r_head.T @ (d.xpos[bid] - d.xpos[head]), p, atol=1e-5)
            np.testing.assert_allclose(r_head.T @ d.xmat[bid].reshape(3, 3), r, atol=1e-5)
