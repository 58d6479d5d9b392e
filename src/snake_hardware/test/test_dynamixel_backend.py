"""dynamixel-sdk (through DynamixelBackend) against our own emulator over a real pty.

Two independent Protocol 2.0 implementations meet here: whatever the backend sends
must land in the emulated control table with the right ticks, and every injected
fault must give the documented behaviour.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dynamixel_sdk import COMM_SUCCESS

from snake_core.robot import RobotModel, load_robot, resolve_robot_path, robot_from_dict
from snake_hardware.backend import (
    CommError,
    DeviceLostError,
    NotReadyError,
    StartupError,
)
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.dynamixel.hardware_errors import HW_OVERLOAD
from snake_hardware.emulator import ServoBusEmulator

_SDK_ATTEMPTS = 5   # requests through dynamixel-sdk's own port before a missing answer fails a test
_LATENCY_MS = 30.0  # generous read timeouts: the emulator thread shares this process (and 2 busy cores)


def _robot_with_offsets() -> RobotModel:
    """tsnake with a zero offset and a reversed direction on the first module."""
    data = yaml.safe_load(resolve_robot_path("tsnake").read_text())
    data["joints"][0].update(zero_offset=0.3, direction=-1)
    data["joints"][1].update(zero_offset=-1.0, direction=-1)
    data["joints"][2].update(zero_offset=-0.2, direction=1)
    return robot_from_dict(data, source=Path("tsnake_offsets.yaml"))


def _ticks(angle: float, offset: float, direction: int) -> int:
    """Independent rad -> ticks: 4096 per revolution, 2048 at servo angle 0."""
    return 2048 + round((direction * angle + offset) * 4096 / (2 * math.pi))


@pytest.fixture
def robot() -> RobotModel:
    return _robot_with_offsets()


@pytest.fixture
def emu(robot: RobotModel, tmp_path: Path) -> Iterator[ServoBusEmulator]:
    e = ServoBusEmulator([j.servo_id for j in robot.joints], link=tmp_path / "ttyDXL").start()
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture
def backend(robot: RobotModel, emu: ServoBusEmulator) -> Iterator[DynamixelBackend]:
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, watchdog_s=1.0))
    b.open()
    try:
        yield b
    finally:
        b.close()


def test_startup_configures_every_servo(robot: RobotModel, emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    for j in robot.joints:
        mode = emu.register(j.servo_id, ct.OPERATING_MODE, 1)
        assert mode == (ct.MODE_EXTENDED_POSITION if j.continuous else ct.MODE_POSITION)
        assert emu.register(j.servo_id, ct.RETURN_DELAY_TIME, 1) == 0
        assert emu.register(j.servo_id, ct.BUS_WATCHDOG, 1) == 50  # 1.0 s in 20 ms units
        assert not emu.torque_enabled(j.servo_id)
        assert emu.register(j.servo_id, ct.HOMING_OFFSET, 4) == 0
        # Profiles from the YAML (never 0 = unlimited): 4.8 rad/s in 0.229 rev/min units, and
        # that speed reached in 50 ms in 214.577 rev/min^2 units.
        vel_units = round(j.velocity / (0.229 * 2 * math.pi / 60))
        assert emu.register(j.servo_id, ct.PROFILE_VELOCITY, 4) == vel_units == 200
        accel = vel_units * 0.229 * 2 * math.pi / 60 / 0.05
        assert emu.register(j.servo_id, ct.PROFILE_ACCELERATION, 4) == math.ceil(accel / (214.577 * 2 * math.pi / 3600))
        if not j.continuous:
            ends = sorted(_ticks(a, j.zero_offset, j.direction) for a in (j.lower, j.upper))
            assert emu.register(j.servo_id, ct.MIN_POSITION_LIMIT, 4) == ends[0]
            assert emu.register(j.servo_id, ct.MAX_POSITION_LIMIT, 4) == ends[1]


def test_goals_arrive_in_ticks_with_offset_and_direction(robot: RobotModel, emu: ServoBusEmulator,
                                                         backend: DynamixelBackend) -> None:
    with pytest.raises(NotReadyError):
        backend.write_goals({"m1_dorsal": 0.1})
    backend.read()
    backend.set_torque(True)
    goals = {"m1_dorsal": 0.25, "m1_twist": 7.5, "m1_lateral": -0.4, "m2_dorsal": 3.0}
    backend.write_goals(goals)
    emu.settle()
    for name, angle in goals.items():
        j = robot.joint(name)
        assert emu.goal_position(j.servo_id) == _ticks(min(angle, j.upper), j.zero_offset, j.direction)
    # Present positions follow the first-order motion and read back in joint angles.
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        r = backend.read()
        if abs(r.position[0] - 0.25) < 2e-3 and abs(r.position[1] - 7.5) < 2e-3:
            break
    assert r.position[0] == pytest.approx(0.25, abs=2e-3)
    assert r.position[1] == pytest.approx(7.5, abs=2e-3)   # continuous twist joint, more than a turn
    assert r.position[3] == pytest.approx(1.5708, abs=2e-3)  # clamped to the YAML limit


def test_a_goal_for_every_joint_arrives_whether_all_or_one_short_of_all_can_be_placed(
        robot: RobotModel, emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    """The usual cycle (every joint, float goals: one pass) and the same with one goal refused (joint by joint)."""
    backend.read()
    backend.set_torque(True)
    names = [j.name for j in robot.joints]
    goals = {n: (-1) ** k * 0.05 * k for k, n in enumerate(names)}
    goals["m1_twist"] = -9.0          # continuous: more than a turn, negative
    goals["m2_dorsal"] = 3.0          # beyond the limit: clamped
    for bad in (None, "m3_lateral"):
        sent = dict(goals, **({bad: math.nan} if bad else {}))
        backend.write_goals(sent)
        emu.settle()
        assert backend.rejected_goals == ({bad: f"goal {math.nan} is not finite"} if bad else {})
        for name, angle in sent.items():
            j = robot.joint(name)
            if name != bad:
                want = _ticks(min(max(angle, j.lower), j.upper), j.zero_offset, j.direction)
                assert emu.goal_position(j.servo_id) == want, name
        goals = {n: g + 0.01 for n, g in goals.items()}


def test_missing_ids_and_wrong_models_fail_startup_with_a_listing(robot: RobotModel, tmp_path: Path) -> None:
    ids = [j.servo_id for j in robot.joints]
    with ServoBusEmulator([i for i in ids if i not in (4, 11)]) as e:
        b = DynamixelBackend(robot, DynamixelSettings(port=e.port, latency_ms=_LATENCY_MS, retries=0))
        with pytest.raises(StartupError, match=r"IDs 4 \(m2_dorsal\), 11 \(m4_twist\)"):
            b.open()
    with ServoBusEmulator(ids, models={7: "XL430-W250"}) as e:
        b = DynamixelBackend(robot, DynamixelSettings(port=e.port, latency_ms=_LATENCY_MS))
        with pytest.raises(StartupError, match=r"ID 7 \(m3_dorsal\) is model 1060"):
            b.open()


def test_crc_errors_and_timeouts_are_retried_and_counted(emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    backend.read()
    emu.corrupt_responses(1)
    backend.read()
    assert backend.counters.crc_errors == 1
    emu.drop_responses(1)
    backend.read()
    assert backend.counters.timeouts >= 1
    assert backend.counters.consecutive_failures == 0
    emu.inject_garbage(40)
    backend.read()
    before = backend.counters.crc_errors + backend.counters.timeouts
    emu.truncate_responses(1)   # bytes lost on the wire: a short answer
    r = backend.read()
    assert backend.counters.crc_errors + backend.counters.timeouts == before + 1
    assert len(r.position) == 18


def test_vanished_servo_fails_reads_and_shows_in_health(robot: RobotModel, emu: ServoBusEmulator,
                                                        backend: DynamixelBackend) -> None:
    emu.vanish(5)
    with pytest.raises(CommError):
        backend.read()
    assert backend.counters.consecutive_failures == 1
    bad = [h for h in backend.health() if not h.ok]
    assert [(h.name, h.hardware_error) for h in bad] == [("m2_twist", -1)]
    emu.restore(5)
    backend.read()
    assert backend.counters.consecutive_failures == 0


def test_hardware_error_reported_and_cleared_by_reboot(emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    backend.read()
    backend.set_torque(True)
    emu.raise_hardware_error(9, HW_OVERLOAD)
    health = {h.name: h for h in backend.health()}
    assert health["m3_lateral"].hardware_error == HW_OVERLOAD
    assert health["m3_lateral"].torque_enabled is False  # Shutdown register turns torque off
    assert backend.describe_hardware_error(health["m3_lateral"].hardware_error) == "overload"
    assert health["m3_dorsal"].ok and health["m3_dorsal"].temperature == pytest.approx(30, abs=2)
    assert health["m3_dorsal"].voltage == pytest.approx(12.0)
    backend.reboot(["m3_lateral"])   # returns at once; the servo boots for ~0.4 s
    assert backend.rebooting == ("m3_lateral",)
    assert emu.register(9, ct.HARDWARE_ERROR_STATUS, 1) == 0
    goal_before = emu.goal_position(9)
    backend.write_goals({"m3_lateral": 0.3, "m3_dorsal": 0.1})
    assert backend.rejected_goals == {"m3_lateral": "rebooting"}
    emu.settle()
    assert emu.goal_position(9) == goal_before
    deadline = time.monotonic() + 20.0
    while backend.rebooting and time.monotonic() < deadline:
        r = backend.read()   # pings the rebooting servo, re-initialises it once it answers
    assert not backend.rebooting
    assert "m3_lateral" not in backend.read().stale
    assert emu.register(9, ct.BUS_WATCHDOG, 1) == 50  # RAM settings written again
    assert not emu.torque_enabled(9)
    assert r.position[8] == pytest.approx(backend.read().position[8], abs=1e-3)


def test_bus_watchdog_stops_a_servo_when_the_bus_goes_silent(robot: RobotModel, emu: ServoBusEmulator,
                                                             tmp_path: Path) -> None:
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, watchdog_s=0.1))
    b.open()
    try:
        b.read()
        b.set_torque(True)
        b.write_goals({"m1_twist": 50.0})     # a long move at the velocity limit
        deadline = time.monotonic() + 60.0
        while emu.register(2, ct.BUS_WATCHDOG, 1) != ct.WATCHDOG_TRIPPED:   # the bus stays silent meanwhile
            assert time.monotonic() < deadline, "the watchdog never tripped"
            emu.settle()
        stopped = emu.present_position(2)
        resumed = emu.now() + 0.2
        while emu.now() < resumed:             # the emulator's servos step on for 0.2 s of its clock
            emu.settle()
        assert emu.present_position(2) == stopped
        assert emu.goal_position(2) == stopped   # the goal became the stop position
        tripped = [h.name for h in b.health() if h.watchdog_tripped]
        assert "m1_twist" in tripped
        assert emu.register(2, ct.BUS_WATCHDOG, 1) == 5  # cleared and re-armed
        with pytest.raises(NotReadyError):
            b.write_goals({"m1_twist": 0.0})
    finally:
        b.close()


def test_unplug_raises_device_lost_and_reconnect_resumes_from_present(emu: ServoBusEmulator,
                                                                      backend: DynamixelBackend) -> None:
    backend.read()
    backend.set_torque(True)
    emu.unplug()
    with pytest.raises(DeviceLostError):
        backend.read()
    with pytest.raises(DeviceLostError):
        backend.reconnect()
    emu.replug()
    backend.reconnect()
    assert backend.counters.reconnects == 1
    assert not any(emu.torque_enabled(i) for i in emu.servos)
    with pytest.raises(NotReadyError):
        backend.write_goals({"m1_dorsal": 0.0})
    r = backend.read()
    assert len(r.position) == 18


def test_an_unplugged_adapter_leaves_no_link_to_a_reused_pty(emu: ServoBusEmulator, tmp_path: Path) -> None:
    """Unplugging removes the link before the pty closes (udev removes a device's node and links), so a
    client retrying the link never opens the pty number the kernel hands to the next program."""
    link = tmp_path / "ttyDXL"
    assert link.is_symlink()
    emu.unplug()
    assert not link.exists() and not link.is_symlink()
    emu.replug()
    assert link.is_symlink() and os.readlink(link) == emu.slave_name
    emu.stop()
    assert not link.is_symlink()


def test_torque_off_reaches_every_servo(emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    backend.read()
    backend.set_torque(True)
    emu.settle()
    assert all(emu.torque_enabled(i) for i in emu.servos)
    backend.set_torque(False)
    emu.settle()
    assert not any(emu.torque_enabled(i) for i in emu.servos)


def test_emulator_refuses_out_of_limit_goals_and_eeprom_writes_under_torque(emu: ServoBusEmulator,
                                                                             backend: DynamixelBackend) -> None:
    from dynamixel_sdk import PacketHandler, PortHandler

    backend.close()
    port = PortHandler(emu.port)
    assert port.openPort()
    pk = PacketHandler(2.0)

    def answered(call: Any) -> int:
        # The SDK's port polls holding the GIL, so the in-process emulator can answer after
        # the SDK's short read timeout on a loaded machine: ask again (the writes repeat
        # harmlessly) until a status packet comes back; returns its error number.
        for _ in range(_SDK_ATTEMPTS):
            comm, err = call()
            if comm == COMM_SUCCESS:
                return int(err)
            port.clearPort()
            emu.settle()
            port.ser.reset_input_buffer()
        raise AssertionError("no status packet")

    lo = emu.register(1, ct.MIN_POSITION_LIMIT, 4)
    assert answered(lambda: pk.write4ByteTxRx(port, 1, ct.GOAL_POSITION, lo - 10)) == 6  # Data Limit Error
    assert answered(lambda: pk.write1ByteTxRx(port, 1, ct.TORQUE_ENABLE, 1)) == 0
    # Access Error: EEPROM locked while torque is on
    assert answered(lambda: pk.write1ByteTxRx(port, 1, ct.OPERATING_MODE, ct.MODE_POSITION)) == 7
    port.closePort()


def test_default_robot_loads_into_backend() -> None:
    b = DynamixelBackend(load_robot("tsnake"))
    assert len(b.joint_names) == 18


def test_slow_answers_time_out_then_recover(emu: ServoBusEmulator, backend: DynamixelBackend) -> None:
    """Answers far slower than the read timeout: never wrong data, every attempt accounted for, then recovery.

    Properties, not counts that depend on the machine's load: how many attempts time out
    and how many see a late answer depends on when the test process runs, so the check is
    that each attempt ended in exactly one of success, timeout or corrupt answer, that the
    first attempt (a 1 s delay against a ~62 ms timeout) timed out, and that whatever came
    back is the servos' true state.
    """
    first = backend.read().position.copy()
    before = backend.counters.as_dict()
    emu.set_delay(1.0)  # far beyond the read timeout of a 21-byte answer (~62 ms)
    try:
        late = backend.read()
    except CommError as err:
        assert "failed after 3 attempts" in str(err)
        late = None
    else:  # a late answer matched the awaited one: it must still be the true state
        assert late.position == pytest.approx(first, abs=1e-3)
    after = backend.counters.as_dict()
    delta = {k: after[k] - before[k] for k in ("transactions", "timeouts", "crc_errors", "failures")}
    assert delta["timeouts"] >= 1
    assert delta["transactions"] == delta["timeouts"] + delta["crc_errors"] + (0 if late is None else 1)
    assert delta["failures"] == (1 if late is None else 0)
    emu.set_delay(0.0)
    emu.settle(timeout=30.0)  # the emulator has sent its late answers (a failure bound, not a pause)
    r = backend.read()        # the next transaction clears what is left on the port
    assert r.position == pytest.approx(first, abs=1e-3)


def test_late_answers_of_another_block_are_not_taken_for_state(emu: ServoBusEmulator,
                                                               backend: DynamixelBackend) -> None:
    first = backend.read().position.copy()
    emu.set_delay(0.1)
    backend.health()  # reads time out; their 7/1/3-byte answers arrive late
    emu.set_delay(0.0)
    for _ in range(20):
        try:
            r = backend.read()
        except CommError:
            continue
        assert r.position == pytest.approx(first, abs=1e-3)
