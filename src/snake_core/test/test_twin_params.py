"""The twin's physics as data: defaults, the strict ``twin:`` block, flat parameter vectors."""

from __future__ import annotations

import dataclasses
import math

import pytest

from snake_core.errors import RobotConfigError
from snake_core.robot import ServoRegisters, load_robot, load_twin_params
from snake_core.robot import joint_actuator as robot_joint_actuator
from snake_core.twin_params import ServoParams, TwinParams, parse_twin_block


def test_defaults_are_derived_from_each_joints_servo_model_file() -> None:
    robot = load_robot("tsnake")
    # Independent of the modules: the XM430-W350's datasheet (12 V, 4.1 N m stall, 46 rev/min,
    # 353.5:1, rotor 9e-8 kg m^2) and the e-Manual's P gain conversion (factory P 800, KPP = P / 128
    # PWM units per tick, 885 units = 100 % duty, 4096 ticks per turn).
    kt = 12.0 / (46 * 2 * math.pi / 60)     # N m/A
    res = kt * 12.0 / 4.1                   # ohm
    kp = (kt * 12.0 / res) * (800 / 128) / (2 * math.pi / 4096) / 885
    assert kp == pytest.approx(18.9, abs=0.05)
    for j in robot.joints:
        m = TwinParams().servo_model(j)
        assert m.kp == pytest.approx(kp, rel=1e-3)
        assert m.kv == 0.0                   # factory D gain 0
        assert m.damping == pytest.approx(kt ** 2 / res, rel=1e-3)  # back-EMF, no viscous friction in the file
        assert m.armature == pytest.approx(9e-8 * 353.5 ** 2)
        assert m.effort == pytest.approx(4.1)  # full duty at 12 V; the Current Limit's 8 N m is above it
        assert (m.frictionloss, m.latency_s, m.limp_damping) == (0.0, 0.0, 0.0)


def test_supply_voltage_scales_the_derived_gain_and_torque_but_not_a_written_value() -> None:
    joint = load_robot("tsnake").joints[0]
    nominal, low = TwinParams().servo_model(joint), TwinParams().at_voltage(10.8).servo_model(joint)
    assert low.kp == pytest.approx(nominal.kp * 10.8 / 12.0) and low.effort == pytest.approx(4.1 * 10.8 / 12.0)
    assert low.damping == nominal.damping and low.armature == nominal.armature  # k_t^2 / R: no voltage in it
    written = TwinParams(servo={"dorsal": ServoParams(kp=30.0, damping=1.2)}).at_voltage(10.8)
    m = written.servo_model(joint)
    assert m.kp == 30.0 and m.effort == pytest.approx(low.effort)
    assert m.limp_damping == pytest.approx(1.2 - nominal.damping)  # the written damping less the back-EMF
    assert written.is_default() is False and TwinParams().at_voltage(10.8).is_default()
    assert written.with_flat({"servo.twist.kp": 5.0}).supply_voltage == 10.8


def test_the_registers_the_bridge_writes_set_the_derived_gains() -> None:
    joint = load_robot("tsnake").joints[0]
    factory = TwinParams().servo_model(joint)
    tuned = dataclasses.replace(joint, registers=ServoRegisters(position_p_gain=1600, position_d_gain=40,
                                                                pwm_limit=442, current_limit=1193))
    m = TwinParams().servo_model(tuned)
    assert m.kp == pytest.approx(2 * factory.kp)                    # Eq. (1): P / 128 per tick
    assert m.effort == pytest.approx(4.1 * 442 / 885)               # the PWM Limit clips the duty
    # the D term: P / 128 per tick of error, D / 16 per tick per ms of error rate
    assert m.kv == pytest.approx(factory.kp / 800 * 128 * (40 / 16) * 1e-3)
    assert robot_joint_actuator(tuned).kp == pytest.approx(m.kp)  # the robot loader's view agrees
    low = dataclasses.replace(joint, registers=ServoRegisters(position_p_gain=800, current_limit=400))
    kt = 12.0 / (46 * 2 * math.pi / 60)
    assert TwinParams().servo_model(low).effort == pytest.approx(kt * 400 * 0.00269, rel=1e-5)  # below stall


def test_an_edited_servo_model_file_is_read_again(config_copy) -> None:
    joint = load_robot("tsnake").joints[0]
    before = TwinParams().servo_model(joint)
    path = config_copy / "servos" / "XM430-W350.yaml"
    path.write_text(path.read_text().replace("stall_torque: 4.1 ", "stall_torque: 8.2 "))
    after = TwinParams().servo_model(joint)
    assert after.kp == pytest.approx(2 * before.kp)
    kt = 12.0 / 4.8171
    assert after.effort == pytest.approx(kt * 1193 * 0.00269) and after.effort < 8.2  # the Current Limit binds


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


def test_load_dependent_friction_is_a_servo_key_per_type_and_per_joint_and_off_by_default() -> None:
    tsnake = load_robot("tsnake")
    flat = TwinParams().flat(tsnake)
    assert {flat[f"servo.{t}.load_friction"] for t in ("dorsal", "twist", "lateral")} == {0.0}
    first = tsnake.joints[0]
    params = TwinParams().with_flat({"servo.lateral.load_friction": 0.12, f"joint.{first.name}.load_friction": 0.2})
    data = params.to_yaml_dict()
    assert data == {"servo": {"lateral": {"load_friction": 0.12}}, "joint": {first.name: {"load_friction": 0.2}}}
    assert parse_twin_block(data, "f.yaml", tsnake.joint_names) == params
    lateral = next(j for j in tsnake.joints if j.type == "lateral")
    assert params.servo_model(lateral).load_friction == 0.12 and params.servo_model(first).load_friction == 0.2
    assert params.joint_flat(tsnake)[f"joint.{first.name}.load_friction"] == 0.2
    assert parse_twin_block({"servo": {"dorsal": {"load_friction": 0.0}}}, "f.yaml").is_default()


def test_the_contact_model_round_trips_and_its_defaults_are_the_block_without_it() -> None:
    block = {"contact": {"ground_friction": 0.7, "cone": "elliptic", "torsional_friction": 0.01,
                         "solref": [0.01, 0.8], "solimp": [0.8, 0.95, 0.002, 0.5, 2.0]}}
    params = parse_twin_block(block, "f.yaml")
    assert params.contact.cone == "elliptic" and params.contact.solref == (0.01, 0.8)
    assert params.to_yaml_dict() == block and parse_twin_block(params.to_yaml_dict(), "f.yaml") == params
    # What a fit writes over the block (flat values) keeps the contact model.
    refit = params.with_flat({"contact.ground_friction": 0.5})
    assert refit.contact == dataclasses.replace(params.contact, ground_friction=0.5)
    spelled_out = parse_twin_block({"contact": {"cone": "pyramidal", "torsional_friction": 0.0, "solref": [0.02, 1],
                                                "solimp": [0.9, 0.95, 0.001, 0.5, 2]}}, "f.yaml")
    assert spelled_out.is_default() and spelled_out.to_yaml_dict() == {}


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
    ({"servo": {"dorsal": {"load_friction": -0.1}}}, "twin.servo.dorsal.load_friction: must be a finite number >= 0"),
    ({"joint": {"m1_dorsal": {"load_friction": 1.5}}},
     "twin.joint.m1_dorsal.load_friction: must be a finite number >= 0 and <= 1"),
    ({"contact": {"ground_friction": "high"}}, "twin.contact.ground_friction: must be a finite number"),
    ({"contact": {"ground_friction": 0.0}}, "twin.contact.ground_friction: must be a finite number > 0"),
    ({"contact": {"cone": "round"}}, "twin.contact.cone: must be one of pyramidal, elliptic, got 'round'"),
    ({"contact": {"torsional_friction": -0.01}}, "twin.contact.torsional_friction: must be a finite number >= 0"),
    ({"contact": {"torsional_friction": 5.0}},
     "twin.contact.torsional_friction: must be a finite number >= 0 and <= 0.1"),
    ({"contact": {"solref": 0.01}}, "twin.contact.solref: must be a list of 2 numbers, got 0.01"),
    ({"contact": {"solref": [0.01, 0.8, 1.0]}}, "twin.contact.solref: must be a list of 2 numbers"),
    ({"contact": {"solref": [0.0, 1.0]}}, "twin.contact.solref[0]: must be a finite number > 0"),
    ({"contact": {"solref": [0.01, -1.0]}}, "twin.contact.solref[1]: must be a finite number > 0"),
    ({"contact": {"solimp": [0.9, 0.95, 0.001, 0.5]}}, "twin.contact.solimp: must be a list of 5 numbers"),
    ({"contact": {"solimp": [1.0, 0.95, 0.001, 0.5, 2.0]}}, "twin.contact.solimp[0]: must be below 1, got 1.0"),
    ({"contact": {"solimp": [0.9, 0.95, 0.001, 0.5, 0.5]}}, "twin.contact.solimp[4]: must be a finite number >= 1"),
    ({"contact": {"condim": 4}}, "twin.contact.condim: unknown key"),
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


def test_a_joint_s_own_values_override_its_type_s_for_that_joint_alone() -> None:
    tsnake = load_robot("tsnake")
    dorsals = [j for j in tsnake.joints if j.type == "dorsal"]
    params = TwinParams().with_flat({"servo.dorsal.kp": 12.0, f"joint.{dorsals[1].name}.kp": 30.0,
                                     f"joint.{dorsals[1].name}.damping": 0.5})
    assert [params.servo_model(j).kp for j in dorsals[:3]] == [12.0, 30.0, 12.0]
    assert params.servo_model(dorsals[1]).damping == 0.5
    assert params.servo_model(dorsals[0]).damping == TwinParams().servo_model(dorsals[0]).damping
    # flat() keeps the type's values; joint_flat() resolves every joint's own over its type's
    assert params.flat(tsnake)["servo.dorsal.kp"] == 12.0
    own = params.joint_flat(tsnake)
    assert own[f"joint.{dorsals[1].name}.kp"] == 30.0 and own[f"joint.{dorsals[2].name}.kp"] == 12.0
    assert not params.is_default() and TwinParams().with_flat({}).is_default()
    assert params.without_joints().servo_model(dorsals[1]).kp == 12.0
    data = params.to_yaml_dict()
    assert data["joint"] == {dorsals[1].name: {"kp": 30.0, "damping": 0.5}}
    assert parse_twin_block(data, "f.yaml", [j.name for j in tsnake.joints]) == params


@pytest.mark.parametrize(("block", "field"), [
    ({"joint": {"m1_dorsl": {"kp": 1.0}}}, "twin.joint.m1_dorsl: not a joint of the robot; did you mean `m1_dorsal`?"),
    ({"joint": {"m1_dorsal": {"kpp": 1.0}}}, "twin.joint.m1_dorsal.kpp: unknown key of a joint's servo"),
    ({"joint": {"m1_dorsal": {"kp": 0.0}}}, "twin.joint.m1_dorsal.kp: must be a finite number > 0"),
    ({"joint": {"m1_dorsal": {"frictionloss": "much"}}}, "twin.joint.m1_dorsal.frictionloss: must be a finite number"),
    ({"joint": {"m1_dorsal": 3.0}}, "twin.joint.m1_dorsal: expected a mapping"),
    ({"joint": [1]}, "twin.joint: expected a mapping"),
    ({"link": {"m1_dorsal": {"mass": 0.1}}}, "twin.link.m1_dorsal: not a link of the robot; did you mean "
                                             "`m1_dorsal_link`?"),
    ({"link": {"head": {"mass": 0.0}}}, "twin.link.head.mass: must be a finite number > 0"),
    ({"link": {"head": {"mass": 140.0}}}, "twin.link.head.mass: must be a finite number > 0 and <= 100"),
    ({"link": {"head": {"inertia": 0.001}}}, "twin.link.head.inertia: unknown key of a link; valid keys: mass"),
    ({"link": {"head": 0.13}}, "twin.link.head: expected a mapping"),
    ({"joint": {"m1_dorsal": {"zero_offset_rad": 0.2}}}, "twin.joint.m1_dorsal.zero_offset_rad: must be a finite "
                                                         "number >= -0.0872665 and <= 0.0872665"),
    ({"servo": {"dorsal": {"zero_offset_rad": 0.001}}}, "twin.servo.dorsal.zero_offset_rad: unknown key of a servo"),
])
def test_a_bad_joint_block_is_one_line_naming_the_file_and_field(block, field) -> None:
    names = [j.name for j in load_robot("tsnake").joints]
    with pytest.raises(RobotConfigError) as err:
        parse_twin_block(block, "cal.yaml", names)
    assert str(err.value).startswith(f"cal.yaml: {field}") and "\n" not in str(err.value)


def test_a_target_file_naming_a_joint_the_robot_lacks_fails_every_loader(config_copy) -> None:
    cal = config_copy / "calibration" / "tsnake"
    (cal / "lab.yaml").write_text("twin:\n  joint:\n    m2_twist: {kp: 25.0}\n")
    params, _ = load_twin_params(load_robot("tsnake"), "lab")
    twist = load_robot("tsnake").joints[4]
    assert twist.name == "m2_twist" and params.servo_model(twist).kp == 25.0
    (cal / "lab.yaml").write_text("twin:\n  joint:\n    m9_twist: {kp: 25.0}\n")
    for load in (lambda: load_twin_params(load_robot("tsnake"), "lab"), lambda: load_robot("tsnake", target="lab")):
        with pytest.raises(RobotConfigError, match=r"lab.yaml: twin.joint.m9_twist: not a joint of the robot"):
            load()


def test_weighed_links_set_their_mass_alone_and_round_trip_through_the_block() -> None:
    tsnake = load_robot("tsnake")
    names = [j.name for j in tsnake.joints]
    block = {"link": {"head": {"mass": 0.131}, "m3_twist_link": {"mass": 0.152}}}
    params = parse_twin_block(block, "f.yaml", names)
    assert params.link_mass("head", 0.13) == 0.131 and params.link_mass("m3_twist_link", 0.14) == 0.152
    assert params.link_mass("m4_twist_link", 0.14) == 0.14   # not weighed: the nominal mass
    assert not params.is_default() and params.to_yaml_dict() == block
    assert parse_twin_block(params.to_yaml_dict(), "f.yaml", names) == params
    # a fit's values and a joint's own are written over the block without losing the weighed links
    fitted = params.with_flat({"servo.dorsal.kp": 12.0, "joint.m1_dorsal.kp": 30.0}).without_joints()
    assert fitted.link == params.link


def test_a_zero_offset_is_a_joint_s_own_value_never_its_type_s() -> None:
    tsnake = load_robot("tsnake")
    m1, m2 = tsnake.joints[0], tsnake.joints[3]
    params = TwinParams().with_flat({f"joint.{m1.name}.zero_offset_rad": -0.003})
    assert params.servo_model(m1).zero_offset_rad == -0.003 and params.servo_model(m2).zero_offset_rad == 0.0
    assert params.joint_flat(tsnake)[f"joint.{m1.name}.zero_offset_rad"] == -0.003
    assert not any(k.endswith("zero_offset_rad") for k in params.flat(tsnake))   # no per-type value
    with pytest.raises(KeyError):
        params.with_flat({"servo.dorsal.zero_offset_rad": 0.001})
    data = params.to_yaml_dict()
    assert data["joint"] == {m1.name: {"zero_offset_rad": -0.003}}
    assert parse_twin_block(data, "f.yaml", [j.name for j in tsnake.joints]) == params
