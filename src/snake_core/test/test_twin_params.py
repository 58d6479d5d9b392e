"""The twin's physics as data: defaults, the strict ``twin:`` block, flat parameter vectors."""

from __future__ import annotations

import math

import pytest

from snake_core.errors import RobotConfigError
from snake_core.robot import load_robot, load_twin_params
from snake_core.twin_params import ServoParams, TwinParams, parse_twin_block


def test_defaults_are_the_documented_servo_model_of_each_joint() -> None:
    robot = load_robot("tsnake")
    for j in robot.joints:
        m = TwinParams().servo_model(j)
        # Independent of the module: kp = effort / 0.1 rad, back-EMF = effort / no-load speed,
        # kv tops the damping up to critical against a 0.011 kg m^2 armature.
        kp, damping = j.effort / 0.1, j.effort / j.velocity
        assert (m.kp, m.damping, m.armature, m.effort) == (kp, damping, 0.011, j.effort)
        assert math.isclose(m.kv + m.damping, 2.0 * math.sqrt(kp * 0.011)) or m.kv == 0.0
        assert (m.frictionloss, m.latency_s) == (0.0, 0.0)


def test_flat_names_every_parameter_and_with_flat_sets_them_back() -> None:
    robot = load_robot("tsnake")
    flat = TwinParams().flat(robot, world_friction=0.6)
    assert {k.split(".")[1] for k in flat if k.startswith("servo.")} == {"dorsal", "twist", "lateral"}
    assert flat["contact.ground_friction"] == 0.6 and "contact.wheel_friction" not in flat
    changed = {k: v * 1.5 + 0.01 for k, v in flat.items()}
    params = TwinParams().with_flat(changed)
    assert params.flat(robot, world_friction=0.6) == pytest.approx(changed, rel=1e-12)
    twist = next(j for j in robot.joints if j.type == "twist")
    assert params.servo_model(twist).latency_s == pytest.approx(0.01)
    with pytest.raises(KeyError, match=r"servo\.twist\.kq"):
        TwinParams().with_flat({"servo.twist.kq": 1.0})
    wheeled = TwinParams().flat(load_robot("wheeled_snake"))
    assert wheeled["contact.wheel_friction"] == 1.5 and wheeled["contact.ground_friction"] == 0.8


def test_the_block_round_trips_through_yaml_data_with_only_what_differs() -> None:
    params = TwinParams(servo={"twist": ServoParams(kp=30.0, latency_s=0.02)})
    data = params.to_yaml_dict()
    assert data == {"servo": {"twist": {"kp": 30.0, "latency_s": 0.02}}}
    assert parse_twin_block(data, "f.yaml") == params
    assert TwinParams().to_yaml_dict() == {} and TwinParams().is_default()
    assert not params.is_default()


def test_gear_play_is_a_servo_key_like_the_others_and_off_by_default() -> None:
    tsnake = load_robot("tsnake")
    flat = TwinParams().flat(tsnake)
    assert {flat[f"servo.{t}.backlash_rad"] for t in ("dorsal", "twist", "lateral")} == {0.0}
    params = TwinParams().with_flat({"servo.dorsal.backlash_rad": 0.004})
    assert params.servo_of("dorsal").backlash_rad == 0.004 and params.servo_of("twist").backlash_rad == 0.0
    assert params.flat(tsnake)["servo.dorsal.backlash_rad"] == 0.004
    data = params.to_yaml_dict()
    assert data == {"servo": {"dorsal": {"backlash_rad": 0.004}}}
    assert parse_twin_block(data, "f.yaml") == params
    dorsal = next(j for j in tsnake.joints if j.type == "dorsal")
    assert params.servo_model(dorsal).backlash_rad == 0.004
    assert parse_twin_block({"servo": {"dorsal": {"backlash_rad": 0.0}}}, "f.yaml").is_default()


@pytest.mark.parametrize(("block", "field"), [
    ({"servos": {}}, "twin.servos: unknown key"),
    ({"servo": {"twists": {"kp": 1.0}}}, "twin.servo.twists: unknown key"),
    ({"servo": {"twist": {"kpp": 1.0}}}, "twin.servo.twist.kpp: unknown key"),
    ({"servo": {"twist": {"kp": -1.0}}}, "twin.servo.twist.kp: must be a finite number > 0"),
    ({"servo": {"dorsal": {"latency_s": 2.0}}}, "twin.servo.dorsal.latency_s: must be a finite number >= 0 and <= 0.5"),
    ({"servo": {"twist": {"backlash_rad": -0.001}}}, "twin.servo.twist.backlash_rad: must be a finite number >= 0"),
    ({"servo": {"lateral": {"backlash_rad": 0.2}}},
     "twin.servo.lateral.backlash_rad: must be a finite number >= 0 and <= 0.0872665"),
    ({"servo": {"dorsal": {"backlash_rad": "0.1 deg"}}}, "twin.servo.dorsal.backlash_rad: must be a finite number"),
    ({"servo": {"dorsal": {"backlash": 0.001}}}, "twin.servo.dorsal.backlash: unknown key"),
    ({"contact": {"ground_friction": "high"}}, "twin.contact.ground_friction: must be a finite number"),
    ({"contact": {"ground_friction": 0.0}}, "twin.contact.ground_friction: must be a finite number > 0"),
    ([1, 2], "twin: expected a mapping"),
])
def test_a_bad_block_is_one_line_naming_the_file_and_field(block, field) -> None:
    with pytest.raises(RobotConfigError) as err:
        parse_twin_block(block, "cal.yaml")
    assert str(err.value).startswith(f"cal.yaml: {field}") and "\n" not in str(err.value)


def test_a_target_file_gives_its_block_and_a_typo_fails_every_loader(config_copy) -> None:
    cal = config_copy / "calibration" / "tsnake"
    params, path = load_twin_params("tsnake")
    assert params.is_default() and path == cal / "twin.yaml"  # the shipped twin target has no block
    (cal / "lab.yaml").write_text("twin:\n  servo:\n    twist: {kp: 25.0}\n  contact: {ground_friction: 0.4}\n")
    params, path = load_twin_params("tsnake", "lab")
    assert path == cal / "lab.yaml" and params.servo_of("twist").kp == 25.0
    assert params.contact.ground_friction == 0.4 and params.servo_of("dorsal") == ServoParams()
    assert load_twin_params("tsnake", "nowhere") == (TwinParams(), None)
    with pytest.raises(RobotConfigError, match=r"target 'nowhere' of tsnake: no file .* \(targets: lab, twin\)"):
        load_twin_params("tsnake", "nowhere", must_exist=True)
    (cal / "lab.yaml").write_text("twin:\n  servo:\n    twist: {kp: 25.0, armatur: 0.01}\n")
    for load in (lambda: load_twin_params("tsnake", "lab"), lambda: load_robot("tsnake", target="lab")):
        with pytest.raises(RobotConfigError, match=r"lab.yaml: twin.servo.twist.armatur: unknown key .*`armature`"):
            load()
