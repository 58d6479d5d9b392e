"""The servo registers of the robot description: written at connect and after a reboot, read back, refused to arm on.

dynamixel-sdk (through DynamixelBackend, and the supervisor on top) against our own
emulator over a real pty. The oracle of what must land in the control tables is the raw
robot YAML (and the e-Manual's factory values), not the loader's :class:`ServoRegisters`.
The emulator runs on simulated time where the test drives it; waits are bounded loops on
conditions, never sleeps.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from snake_core.robot import SERVO_REGISTERS, RobotModel, resolve_robot_path, robot_from_dict
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator
from snake_hardware.supervisor import BridgeState, Supervisor, SupervisorConfig

_LATENCY_MS = 30.0    # generous read timeouts: the emulator thread shares this process (and 2 busy cores)
_RETRIES = 5
_REBOOT_WAIT_S = 30.0  # bound on a rebooted servo's return (it boots ~0.4 s of emulator time)
_P_FACTORY, _PWM_FACTORY = 800, 885   # XM430-W350, e-Manual


def _raw() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(resolve_robot_path("tsnake").read_text()))


def _robot(raw: dict[str, Any]) -> RobotModel:
    return robot_from_dict(raw, source=Path("tsnake_registers.yaml"))


def _custom() -> dict[str, Any]:
    """tsnake with its own registers on the lateral joints and on one dorsal joint."""
    raw = _raw()
    raw["joint_types"]["lateral"]["registers"].update(position_p_gain=1200, position_d_gain=40, position_i_gain=3)
    raw["joints"][3]["registers"] = {"pwm_limit": 600, "current_limit": 900, "profile_velocity": 70,
                                     "profile_acceleration": 20}   # m2_dorsal, ID 4
    return raw


@pytest.fixture
def emu() -> Iterator[ServoBusEmulator]:
    with ServoBusEmulator(range(1, 19)) as e:
        yield e


def _backend(robot: RobotModel, emu: ServoBusEmulator) -> DynamixelBackend:
    return DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, retries=_RETRIES,
                                                     watchdog_s=1.0))


def _held(emu: ServoBusEmulator, sid: int) -> dict[str, int]:
    return {key: emu.register(sid, addr, 2) for key, addr in (
        ("position_p_gain", 84), ("position_i_gain", 82), ("position_d_gain", 80), ("pwm_limit", 36),
        ("current_limit", 38))}


def test_the_cores_register_table_is_the_control_tables() -> None:
    """The loader checks ranges without importing snake_hardware: same keys and addresses as the bridge writes."""
    assert {k: v[0] for k, v in SERVO_REGISTERS.items()} == {k: v[0] for k, v in ct.SERVO_REGISTERS.items()}
    assert (ct.POSITION_D_GAIN, ct.POSITION_I_GAIN, ct.POSITION_P_GAIN, ct.PWM_LIMIT, ct.CURRENT_LIMIT) == \
        (80, 82, 84, 36, 38)   # e-Manual, XM430-W350 control table
    assert SERVO_REGISTERS["pwm_limit"][2] == 885


def test_open_writes_every_joints_registers_from_the_yaml(emu: ServoBusEmulator) -> None:
    raw = _custom()
    b = _backend(_robot(raw), emu)
    b.open()
    try:
        assert b.register_mismatches == {}
        for j in raw["joints"]:
            want = {**raw["joint_types"][j["type"]]["registers"], **j.get("registers", {})}
            held = _held(emu, j["servo_id"])
            assert held == {key: want[key] for key in held}, j["name"]
        # Profile registers set in the YAML are written as they are; where 0, derived from the velocity (never 0).
        assert emu.register(4, ct.PROFILE_VELOCITY, 4) == 70 and emu.register(4, ct.PROFILE_ACCELERATION, 4) == 20
        assert emu.register(1, ct.PROFILE_VELOCITY, 4) == b.profile_units(b._robot.joints[0])[0] > 0
        assert b.written_registers()["m2_dorsal"]["pwm_limit"] == 600
    finally:
        b.close()


def test_eeprom_limits_are_written_only_where_the_servo_holds_another_value(emu: ServoBusEmulator) -> None:
    raw = _custom()
    b = _backend(_robot(raw), emu)
    b.open()
    try:
        for sid in range(1, 19):
            changed = sid == 4
            assert emu.eeprom_writes(sid, ct.PWM_LIMIT) == int(changed), sid
            assert emu.eeprom_writes(sid, ct.CURRENT_LIMIT) == int(changed), sid
        b.reconnect()     # configured again: the servos already hold the values
        assert b.register_mismatches == {}
        assert emu.eeprom_writes(4, ct.PWM_LIMIT) == 1 and emu.eeprom_writes(4, ct.CURRENT_LIMIT) == 1
        assert emu.eeprom_writes(1, ct.PWM_LIMIT) == 0
    finally:
        b.close()


def test_a_model_without_current_limit_gets_the_rest(tmp_path: Path) -> None:
    raw = _raw()
    for jtype in raw["joint_types"].values():
        jtype.update(model="XL430-W250", velocity=5.9, effort=1.5)
        jtype["registers"] = {"position_p_gain": 700}
    robot = _robot(raw)
    models = {j.servo_id: "XL430-W250" for j in robot.joints}
    with ServoBusEmulator(models, models=models, link=tmp_path / "ttyDXL") as e:
        assert e.register(1, ct.POSITION_D_GAIN, 2) == 4000   # XL430-W250 factory D gain (e-Manual)
        b = _backend(robot, e)
        b.open()
        try:
            assert b.register_mismatches == {}
            assert "current_limit" not in b.written_registers()["m1_dorsal"]
            assert e.register(1, ct.POSITION_P_GAIN, 2) == 700
            assert e.register(1, ct.POSITION_D_GAIN, 2) == 4000   # the model file's factory value, written
            assert e.eeprom_writes(1, ct.CURRENT_LIMIT) == 0
        finally:
            b.close()


def test_a_write_that_does_not_take_is_named_and_cleared_by_a_reboot(emu: ServoBusEmulator) -> None:
    raw = _custom()
    emu.stick_register(9, ct.POSITION_P_GAIN)   # m3_lateral keeps its factory P gain
    b = _backend(_robot(raw), emu)
    b.open()
    try:
        assert b.register_mismatches == {"m3_lateral": f"ID 9: Position P Gain {_P_FACTORY} (written 1200)"}
        emu.stick_register(9, ct.POSITION_P_GAIN, stuck=False)
        b.reboot(["m3_lateral"])
        deadline = time.monotonic() + _REBOOT_WAIT_S
        while b.rebooting and time.monotonic() < deadline:
            b.read()      # pings the rebooting servo, configures it once it answers
        assert not b.rebooting
        assert b.register_mismatches == {}
        assert _held(emu, 9)["position_p_gain"] == 1200
    finally:
        b.close()


def test_a_reboot_restores_the_factory_gains_and_the_bridge_writes_its_own_again(emu: ServoBusEmulator) -> None:
    b = _backend(_robot(_custom()), emu)
    b.open()
    try:
        b.reboot(["m1_lateral"])
        emu.settle()
        assert emu.register(3, ct.POSITION_P_GAIN, 2) == _P_FACTORY   # RAM back to factory at boot
        deadline = time.monotonic() + _REBOOT_WAIT_S
        while b.rebooting and time.monotonic() < deadline:
            b.read()
        assert not b.rebooting
        assert emu.register(3, ct.POSITION_P_GAIN, 2) == 1200
        assert emu.register(3, ct.POSITION_D_GAIN, 2) == 40
    finally:
        b.close()


def test_the_supervisor_refuses_to_arm_with_the_register_that_did_not_take(tmp_path: Path) -> None:
    robot = _robot(_custom())
    with ServoBusEmulator([j.servo_id for j in robot.joints], sim_time=True) as e:
        e.stick_register(4, ct.PWM_LIMIT)       # m2_dorsal: an EEPROM write acknowledged, not kept
        backend = _backend(robot, e)
        sup = Supervisor(backend, robot.joints, SupervisorConfig(auto_arm=False))
        now = 0.0
        sup.step(now)
        assert sup.state is BridgeState.DISARMED, sup.reason
        out = sup.arm()
        assert not out.accepted
        assert out.message == (f"servo registers did not take on m2_dorsal (ID 4: PWM Limit {_PWM_FACTORY} "
                               "(written 600)): call reboot to write them again")
        assert not any(e.torque_enabled(j.servo_id) for j in robot.joints)
        e.stick_register(4, ct.PWM_LIMIT, stuck=False)
        assert sup.reboot().accepted
        for _ in range(3000):   # until a health poll has seen the servo back (arming waits for it)
            if not backend.rebooting and sup.health and not any(h.rebooting for h in sup.health):
                break
            now += 0.02
            e.advance(0.02)
            sup.step(now)
        assert backend.register_mismatches == {}
        assert e.register(4, ct.PWM_LIMIT, 2) == 600
        out = sup.arm()
        assert out.accepted, out.message
        backend.close()


def test_each_servo_reports_its_own_input_voltage(emu: ServoBusEmulator) -> None:
    b = _backend(_robot(_raw()), emu)
    b.open()
    try:
        emu.set_voltage(11.1, servo_id=7)
        volts = {h.name: h.voltage for h in b.health()}
        assert volts["m3_dorsal"] == pytest.approx(11.1)
        assert volts["m1_dorsal"] == pytest.approx(12.0)     # the X430's recommended supply, the default
    finally:
        b.close()


def test_the_servo_model_files_current_limit_is_the_control_tables() -> None:
    """The loader's greatest Current Limit (the model file's factory value) is the one the servo accepts."""
    from snake_core.servo.model import load_servo_model

    for name, model in ct.MODELS.items():
        assert load_servo_model(name).firmware.factory.current_limit == model.current_limit, name


def test_the_servo_model_files_factory_gains_are_the_control_tables() -> None:
    """The model file's factory P and D gains (what the robot YAML defaults to) are the e-Manual's."""
    from snake_core.servo.model import load_servo_model

    for name, model in ct.MODELS.items():
        factory = load_servo_model(name).firmware.factory
        assert (factory.position_p_gain, factory.position_d_gain) == (model.factory_p_gain, model.factory_d_gain), name


def test_an_xl330_runs_at_5_v_with_its_own_factory_registers(tmp_path: Path) -> None:
    """The 5 V XL330-M288 (e-Manual: model 1200, P gain 400, Current Limit 1,750 mA) on the bridge's path."""
    raw = _raw()
    for jtype in raw["joint_types"].values():
        jtype.update(model="XL330-M288", velocity=10.0, effort=0.5)
        del jtype["registers"]
    robot = _robot(raw)
    assert robot.joints[0].registers.position_p_gain == 400 and robot.joints[0].registers.current_limit == 1750
    models = {j.servo_id: "XL330-M288" for j in robot.joints}
    with ServoBusEmulator(models, models=models, link=tmp_path / "ttyDXL") as e:
        b = _backend(robot, e)
        b.open()
        try:
            assert b.register_mismatches == {}
            assert [h.voltage for h in b.health()] == pytest.approx([5.0] * len(robot.joints))
            assert e.register(1, ct.POSITION_P_GAIN, 2) == 400 and e.eeprom_writes(1, ct.CURRENT_LIMIT) == 0
        finally:
            b.close()


def test_a_gain_another_program_writes_is_foreign_at_the_next_health_poll(emu: ServoBusEmulator) -> None:
    b = _backend(_robot(_custom()), emu)
    b.open()
    try:
        b.read()
        assert all(h.foreign == () for h in b.health())
        assert emu.write_register(9, ct.POSITION_P_GAIN, 2, 400) == 0        # m3_lateral, written 1200
        assert emu.write_register(4, ct.PROFILE_VELOCITY, 4, 300) == 0       # m2_dorsal, written 70
        foreign = {h.name: h.foreign for h in b.health() if h.foreign}
        assert foreign == {"m3_lateral": ("Position P Gain 400 (written 1200)",),
                           "m2_dorsal": ("Profile Velocity 300 (written 70)",)}
    finally:
        b.close()


def test_a_read_back_lost_to_a_busy_moment_is_asked_again_not_a_mismatch(emu: ServoBusEmulator) -> None:
    """Answers lost past the one-by-one fallback (three silent servos in a row) are read in the next round."""
    robot = _robot(_raw())
    b = _backend(robot, emu)
    b.open()
    try:
        assert b.register_mismatches == {}
        # Every attempt of the first block's sync read, then the first three one-by-one reads: a stalled moment.
        emu.drop_responses((_RETRIES + 1) * len(robot.joints) + 3)
        b._verify_registers(robot.joints)
        assert b.register_mismatches == {}
    finally:
        b.close()


def test_model_numbers_are_the_ones_robotis_publishes() -> None:
    """The Model Number each servo answers a ping with, as the e-Manual's control tables give it.

    The numbers are written out here (not derived): the XH430-W350 is 1000 and the W210 1010, the
    order opposite to their neighbours', and a swap makes the bridge take one model for the other.
    """
    published = {"XM430-W350": 1020, "XM430-W210": 1030, "XH430-W350": 1000, "XH430-W210": 1010,
                 "XH430-V350": 1040, "XH430-V210": 1050, "XL430-W250": 1060, "XL330-M288": 1200}
    assert {name: model.number for name, model in ct.MODELS.items()} == published


def test_the_servo_model_files_motor_constants_are_the_control_tables() -> None:
    """Supply, stall torque, no-load speed and current unit: the model file and the control table agree."""
    from snake_core.servo.model import load_servo_model

    for name, model in ct.MODELS.items():
        loaded = load_servo_model(name)
        assert loaded.motor.nominal_voltage == model.nominal_voltage, name
        assert loaded.motor.stall_torque == pytest.approx(model.stall_torque), name
        assert loaded.motor.no_load_speed == pytest.approx(model.max_velocity, rel=1e-4), name
        assert loaded.firmware.current_unit_a == pytest.approx(model.current_unit_a), name
