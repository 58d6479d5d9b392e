"""Endless one-way rotation of extended-position joints, through dynamixel-sdk and the emulator.

The emulator runs on simulated time (30 servo minutes in a few wall seconds, whatever
the CPU load) and models the real limits: Goal Position refused beyond +-256 rev, the
turn count reset by a change to position mode. The joint angle the backend reports is
compared at every cycle with the emulated shaft's physical angle, which is never reset:
an unwind that moved the joint, or a jump in the reported angle, fails the test.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from snake_core.robot import RobotModel, load_robot
from snake_hardware.backend import CommError, JointReading
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel.backend import DynamixelBackend, DynamixelSettings
from snake_hardware.emulator import ServoBusEmulator

_LATENCY_MS = 30.0    # generous read timeouts: the emulator thread shares this process
_TICK_RAD = 2 * math.pi / 4096
_RANGE_TICKS = 1_048_575   # X-series extended-position Goal Position range (e-Manual)


@dataclass
class RollStats:
    """What one run measured."""

    minutes: float
    distance_rad: float          # least distance travelled by one twist joint
    unwinds: int
    max_discontinuity_rad: float  # largest |reported angle - physical angle| at any cycle
    max_goal_ticks: int           # largest |Goal Position| any servo accepted
    refused: int                  # goals the emulated servos refused
    rejected: int                 # goals the backend did not send


def _read(b: DynamixelBackend) -> JointReading:
    """A read, repeated if the in-process emulator thread was starved past every retry (loaded CI)."""
    for _ in range(10):
        try:
            return b.read()
        except CommError:
            continue
    return b.read()


@pytest.fixture
def robot() -> RobotModel:
    return load_robot("tsnake")


@pytest.fixture
def emu(robot: RobotModel) -> Iterator[ServoBusEmulator]:
    e = ServoBusEmulator([j.servo_id for j in robot.joints], sim_time=True).start()
    try:
        yield e
    finally:
        e.stop()


def roll(robot: RobotModel, emu: ServoBusEmulator, minutes: float, rate: float = 2.0,
         dt: float = 1.0) -> RollStats:
    """Turn every twist joint one way (head half +, tail half -) at ``rate`` rad/s, a goal every ``dt`` s.

    The cycle is long (simulated time is cheap, each cycle is not): the range logic does
    not depend on the loop rate, and the emulator's motion model is exact for any step.
    The Bus Watchdog (2 s) stays above the cycle.
    """
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, watchdog_s=2.0,
                                                  retries=5))
    b.open()
    try:
        twist = [(i, j) for i, j in enumerate(robot.joints) if j.continuous]
        signs = {i: (1.0 if k < len(twist) // 2 else -1.0) for k, (i, _) in enumerate(twist)}
        start = _read(b).position.copy()
        b.set_torque(True)
        phys0 = {j.servo_id: emu.physical_position(j.servo_id) for _, j in twist}
        target = start.copy()
        worst = 0.0
        steps = round(minutes * 60.0 / dt)
        for k in range(steps):
            for i, _ in twist:
                target[i] += signs[i] * rate * dt
            b.write_goals({j.name: float(target[i]) for i, j in twist})
            emu.advance(dt)
            r = _read(b)
            for i, j in twist:
                # Independent: the shaft's never-reset angle, 4096 ticks per turn, direction +1, offset 0.
                physical = start[i] + (emu.physical_position(j.servo_id) - phys0[j.servo_id]) * _TICK_RAD
                worst = max(worst, abs(r.position[i] - physical))
            if k % 100 == 0:
                assert not any(h.goal_refused for h in b.health())
        distance = min(abs(_read(b).position[i] - start[i]) for i, _ in twist)
        return RollStats(
            minutes=minutes, distance_rad=distance, unwinds=b.counters.unwinds,
            max_discontinuity_rad=worst,
            max_goal_ticks=max(max((abs(g) for g in emu.goal_log(j.servo_id)), default=0) for _, j in twist),
            refused=sum(emu.refused_goals(j.servo_id) for j in robot.joints) + b.counters.goals_refused,
            rejected=b.counters.goals_rejected)
    finally:
        b.close()


def test_thirty_minutes_one_way_without_refused_goals_or_jumps(robot: RobotModel, emu: ServoBusEmulator) -> None:
    s = roll(robot, emu, minutes=30.0)
    # 2 rad/s for 30 min is 3600 rad = 573 turns: more than twice the +-256 rev goal range.
    assert s.distance_rad > 2 * _RANGE_TICKS * _TICK_RAD
    assert s.refused == 0 and s.rejected == 0
    assert s.max_goal_ticks <= _RANGE_TICKS
    # Each joint unwinds every 128 turns: 4 times in 573 turns, 6 twist joints.
    assert s.unwinds >= 6 * math.floor(s.distance_rad / (2 * math.pi) / 128)
    assert s.max_discontinuity_rad <= 1.5 * _TICK_RAD


def test_without_unwinding_the_servo_refuses_goals_beyond_256_turns(robot: RobotModel,
                                                                    emu: ServoBusEmulator) -> None:
    """The emulator's range is real: the same goals written straight to the register are refused."""
    from dynamixel_sdk import PacketHandler, PortHandler

    port = PortHandler(emu.port)
    assert port.openPort()
    pk = PacketHandler(2.0)
    try:
        assert pk.write1ByteTxRx(port, 2, ct.OPERATING_MODE, ct.MODE_EXTENDED_POSITION)[1] == 0
        assert pk.write1ByteTxRx(port, 2, ct.TORQUE_ENABLE, 1)[1] == 0
        _, err = pk.write4ByteTxRx(port, 2, ct.GOAL_POSITION, _RANGE_TICKS)
        assert err == 0
        _, err = pk.write4ByteTxRx(port, 2, ct.GOAL_POSITION, _RANGE_TICKS + 1)
        assert err == 6  # Data Limit Error
        assert emu.goal_position(2) == _RANGE_TICKS and emu.refused_goals(2) == 1
    finally:
        port.closePort()


def test_turn_count_semantics_follow_the_emanual(emu: ServoBusEmulator) -> None:
    """Mode change to position, torque on in position mode and reboot reset the count; Homing Offset adds."""
    from dynamixel_sdk import PacketHandler, PortHandler

    port = PortHandler(emu.port)
    assert port.openPort()
    pk = PacketHandler(2.0)
    try:
        pk.write1ByteTxRx(port, 2, ct.OPERATING_MODE, ct.MODE_EXTENDED_POSITION)
        pk.write4ByteTxRx(port, 2, ct.PROFILE_VELOCITY, 0)
        pk.write1ByteTxRx(port, 2, ct.TORQUE_ENABLE, 1)
        pk.write4ByteTxRx(port, 2, ct.GOAL_POSITION, 2048 + 10 * 4096 + 100)
        emu.advance(30.0)
        assert emu.present_position(2) == 2048 + 10 * 4096 + 100
        physical = emu.physical_position(2)
        pk.write1ByteTxRx(port, 2, ct.TORQUE_ENABLE, 0)
        assert pk.write4ByteTxRx(port, 2, ct.HOMING_OFFSET, 1000)[1] == 0
        assert pk.read4ByteTxRx(port, 2, ct.PRESENT_POSITION)[0] == 2048 + 10 * 4096 + 1100
        pk.write4ByteTxRx(port, 2, ct.HOMING_OFFSET, 0)
        pk.write1ByteTxRx(port, 2, ct.OPERATING_MODE, ct.MODE_POSITION)   # turn count reset
        assert pk.read4ByteTxRx(port, 2, ct.PRESENT_POSITION)[0] == 2148
        assert emu.physical_position(2) == physical                         # the shaft did not move
        assert pk.write4ByteTxRx(port, 2, ct.HOMING_OFFSET, 1_044_480)[1] == 4  # beyond +-255 rev
        # Reboot resets the count too and keeps EEPROM (mode); the servo is silent while it boots.
        pk.write1ByteTxRx(port, 2, ct.OPERATING_MODE, ct.MODE_EXTENDED_POSITION)
        pk.write1ByteTxRx(port, 2, ct.TORQUE_ENABLE, 1)
        pk.write4ByteTxRx(port, 2, ct.GOAL_POSITION, 2148 + 3 * 4096)
        emu.advance(30.0)
        assert pk.reboot(port, 2)[0] == 0
        assert emu.booting(2)
        assert pk.ping(port, 2)[1] != 0
        emu.advance(0.5)
        assert pk.read4ByteTxRx(port, 2, ct.PRESENT_POSITION)[0] == 2148
        assert pk.read1ByteTxRx(port, 2, ct.OPERATING_MODE)[0] == ct.MODE_EXTENDED_POSITION
    finally:
        port.closePort()


def test_reboot_of_a_wound_twist_joint_keeps_its_angle(robot: RobotModel, emu: ServoBusEmulator) -> None:
    """REBOOT resets the servo's turn count; the reported angle stays where the joint is."""
    b = DynamixelBackend(robot, DynamixelSettings(port=emu.port, latency_ms=_LATENCY_MS, watchdog_s=2.0,
                                                  retries=5))
    b.open()
    try:
        _read(b)
        b.set_torque(True)
        b.write_goals({"m1_twist": 40.0})
        for _ in range(40):   # 20 s, the bus never silent for the watchdog's 2 s
            emu.advance(0.5)
            wound = _read(b).position[1]
        assert wound == pytest.approx(40.0, abs=_TICK_RAD)
        assert emu.present_position(2) > 6 * 4096
        b.reboot(["m1_twist"])
        for _ in range(500):
            emu.advance(0.1)
            r = _read(b)
            if not b.rebooting:
                break
        assert not b.rebooting
        assert 0 <= emu.present_position(2) < 4096             # the servo's count was reset
        assert r.position[1] == pytest.approx(wound, abs=_TICK_RAD)  # the joint angle was not
    finally:
        b.close()


def test_a_servo_found_wound_at_start_up_is_unwound_with_torque_off(robot: RobotModel) -> None:
    ids = [j.servo_id for j in robot.joints]
    wound = 2048 + 200 * 4096 + 1000   # ticks: 200 turns, as a bridge restart without power cycle finds it
    with ServoBusEmulator(ids, positions={5: wound}, sim_time=True) as e:
        b = DynamixelBackend(robot, DynamixelSettings(port=e.port, latency_ms=_LATENCY_MS, retries=5))
        b.open()
        try:
            first = _read(b).position[4]
            assert first == pytest.approx((wound - 2048) * _TICK_RAD, abs=1e-9)
            assert b.counters.unwinds == 1 and 0 <= e.present_position(5) < 4096
            assert not e.torque_enabled(5)
            assert _read(b).position[4] == pytest.approx(first, abs=1e-9)
            assert b.turn_offsets()["m2_twist"] == 200 * 4096
        finally:
            b.close()
