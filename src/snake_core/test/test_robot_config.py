"""Robot descriptions: the YAMLs load, and bad ones fail naming the field."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import yaml

from snake_core.errors import RobotConfigError
from snake_core.robot import TSnakeBody, WheeledBody, load_robot, robot_from_dict


def test_tsnake_matches_the_paper():
    r = load_robot("tsnake")
    assert len(r.joints) == 18
    assert [j.type for j in r.joints[:3]] == ["dorsal", "twist", "lateral"]
    assert r.length == pytest.approx(6 * 0.2055)
    s = r.joint_arc_positions()
    twist_s = s[[j.type == "twist" for j in r.joints]]
    # Two twist joints on the buffer boundaries L_h, L_t of 003 Sec. IV.
    assert np.isclose(twist_s, 0.5430).any() and np.isclose(twist_s, 0.7485).any()
    assert all(j.continuous and j.operating_mode == "extended_position" for j in r.joints_of_type("twist"))
    assert len({j.servo_id for j in r.joints}) == 18


def test_wheeled_snake_has_non_uniform_links():
    r = load_robot("wheeled_snake")
    assert len(r.joints) == r.wheeled_body.n_links - 1
    assert np.allclose(r.link_lengths, r.wheel_d + r.wheel_l)
    assert len(set(r.wheel_d.tolist())) > 1


@pytest.mark.parametrize(("name", "body_type"), [("tsnake", TSnakeBody), ("wheeled_snake", WheeledBody)])
def test_body_is_a_typed_dataclass_holding_the_yaml_values(name, body_type):
    raw = _data(name)["body"]
    robot = load_robot(name)
    assert type(robot.body) is body_type
    assert {f.name for f in dataclasses.fields(robot.body)} == set(raw)  # every YAML body key, no other
    for key, value in raw.items():
        got = getattr(robot.body, key)
        if isinstance(value, list):
            want = value if isinstance(value[0], str) else pytest.approx(value)
            assert isinstance(got, tuple) and list(got) == want, key
        else:
            assert got == pytest.approx(value), key
    with pytest.raises(dataclasses.FrozenInstanceError):
        robot.body.link_mass = 1.0  # type: ignore[misc, union-attr]


def test_kind_specific_body_accessors_refuse_the_other_kind():
    assert load_robot("tsnake").tsnake_body.module_length == pytest.approx(0.2055)
    with pytest.raises(RobotConfigError, match="body: a tsnake body is needed"):
        _ = load_robot("wheeled_snake").tsnake_body
    with pytest.raises(RobotConfigError, match="body: a planar_wheeled body is needed"):
        _ = load_robot("tsnake").wheeled_body


def _data(name):
    from snake_core.robot import resolve_robot_path

    return yaml.safe_load(resolve_robot_path(name).read_text())


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["joints"][3].update(servo_id=1), r"joints\[3\]\.servo_id: duplicate id 1"),
        (lambda d: d["joints"][5].update(name="m1_dorsal"), r"joints\[5\]\.name: duplicate"),
        (lambda d: d["body"].update(module_length=-0.2), r"body\.module_length"),
        (lambda d: d["joints"][0].update(type="elbow"), r"joints\[0\]\.type"),
        (lambda d: d["joints"][0].update(lower=2.0, upper=1.0), r"joints\[0\]\.lower"),
        (lambda d: d["joints"].pop(), r"joints: 17 joints"),
        (lambda d: d["joints"][1].update(operating_mode="position"), r"joints\[1\]\.operating_mode"),
        (lambda d: d.update(kind="hexapod"), r"kind"),
        (lambda d: d["joints"][2].update(direction=2), r"joints\[2\]\.direction"),
    ],
)
def test_bad_tsnake_fields_are_named(mutate, field):
    data = copy.deepcopy(_data("tsnake"))
    mutate(data)
    with pytest.raises(RobotConfigError, match=field):
        robot_from_dict(data)


def test_bad_wheel_list_is_named():
    data = copy.deepcopy(_data("wheeled_snake"))
    data["body"]["wheel_d"] = data["body"]["wheel_d"][:-1]
    with pytest.raises(RobotConfigError, match=r"body\.wheel_d"):
        robot_from_dict(data)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(RobotConfigError, match="not found"):
        load_robot(tmp_path / "nope.yaml")


def test_calibration_overlays_gait_coefficients(tmp_path):
    from snake_core.robot import apply_calibration

    robot = load_robot("tsnake", calibrated=False)
    path = tmp_path / "tsnake.yaml"
    path.write_text("gaits:\n  reduction: {k: 0.0421, d_prime: 0.9}\n")
    cal = apply_calibration(robot, path)
    assert cal.gait("reduction")["k"] == 0.0421 and cal.gait("reduction")["d_prime"] == 0.9
    assert cal.gait("rolling") == robot.gait("rolling")
    assert apply_calibration(robot, tmp_path / "absent.yaml") is robot


@pytest.mark.parametrize(("text", "field"), [("gaits:\n  hopping: {k: 1}\n", r"gaits\.hopping"),
                                             ("gaits:\n  reduction: {kk: 1}\n", r"gaits\.reduction\.kk"),
                                             ("gaits:\n  reduction: {k: .nan}\n", r"gaits\.reduction\.k")])
def test_bad_calibration_is_named(tmp_path, text, field):
    from snake_core.robot import apply_calibration

    path = tmp_path / "tsnake.yaml"
    path.write_text(text)
    with pytest.raises(RobotConfigError, match=field):
        apply_calibration(load_robot("tsnake", calibrated=False), path)


@pytest.mark.parametrize("name", ["tsnake", "wheeled_snake"])
def test_shipped_registers_are_the_servo_models_factory_registers(name):
    """The documented registers of the shipped robots are the servo files' factory values (and 0 for the rest)."""
    from snake_core.robot import ServoRegisters, resolve_robot_path

    servos = resolve_robot_path(name).parent.parent / "servos"
    for joint in load_robot(name).joints:
        factory = yaml.safe_load((servos / f"{joint.model}.yaml").read_text())["firmware"]["factory"]
        want = {"position_i_gain": 0, "profile_velocity": 0, "profile_acceleration": 0, **factory}
        assert joint.registers.as_dict() == want, joint.name
        assert isinstance(joint.registers, ServoRegisters)
    with pytest.raises(dataclasses.FrozenInstanceError):
        joint.registers.position_p_gain = 1  # type: ignore[misc]


def test_registers_left_out_are_factory_and_a_joint_overrides_its_types_keys():
    data = copy.deepcopy(_data("tsnake"))
    for jtype in data["joint_types"].values():
        del jtype["registers"]
    data["joint_types"]["lateral"]["registers"] = {"position_p_gain": 1200, "profile_velocity": 50}
    data["joints"][5]["registers"] = {"position_p_gain": 400, "pwm_limit": 600}  # m2_lateral
    robot = robot_from_dict(data)
    factory = {"position_p_gain": 800, "position_i_gain": 0, "position_d_gain": 0, "profile_velocity": 0,
               "profile_acceleration": 0, "pwm_limit": 885, "current_limit": 1193}  # XM430-W350, e-Manual
    assert robot.joint("m1_dorsal").registers.as_dict() == factory
    assert robot.joint("m1_lateral").registers.as_dict() == {**factory, "position_p_gain": 1200,
                                                             "profile_velocity": 50}
    assert robot.joint("m2_lateral").registers.as_dict() == {**factory, "position_p_gain": 400,
                                                             "profile_velocity": 50, "pwm_limit": 600}


def test_joint_actuator_is_the_firmware_loop_at_the_joints_registers():
    """kp and the torque limit from the datasheet by hand (e-Manual KPP = P / 128; BAM's DC motor)."""
    from snake_core.robot import joint_actuator

    data = copy.deepcopy(_data("tsnake"))
    data["joints"][0]["registers"] = {"position_p_gain": 400, "pwm_limit": 442}
    joint = robot_from_dict(data).joints[0]
    volts, stall_12v, speed_12v = 11.0, 4.1, 46 * 2 * np.pi / 60  # XM430-W350 datasheet at 12 V
    kt = 12.0 / speed_12v
    resistance = kt * 12.0 / stall_12v
    stall = kt * volts / resistance
    act = joint_actuator(joint, voltage=volts)
    assert act.kp == pytest.approx(stall * (400 / 128) / (2 * np.pi / 4096) / 885, rel=1e-4)
    assert act.effort == pytest.approx(stall * 442 / 885, rel=1e-4)
    assert joint_actuator(joint).kp == pytest.approx(act.kp * 12.0 / volts)
