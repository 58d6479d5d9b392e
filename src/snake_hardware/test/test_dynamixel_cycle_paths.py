"""The bridge cycle's shortcuts give what the long way gives: goal ticks per joint, packets byte for byte."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

from snake_core.robot import load_robot
from snake_hardware.dynamixel import control_table as ct
from snake_hardware.dynamixel import conversion as cv
from snake_hardware.dynamixel.port import _PacketHandler

_TICK_RAD = 2.0 * math.pi / ct.TICKS_PER_REV


def _goals(joint: Any, rng: random.Random) -> list[Any]:
    """Goals around and beyond the joint's range, exact half ticks, and what is not a finite number."""
    lo = joint.lower if math.isfinite(joint.lower) else -50.0
    hi = joint.upper if math.isfinite(joint.upper) else 50.0
    out: list[Any] = [joint.lower, joint.upper, 0.0, -0.0, lo - 1e-9, hi + 1e-9, 5e6, -1e308, 1e308,
                      math.nan, math.inf, -math.inf, "0.1", "x", None, [0.1], True, 2]
    out += [rng.uniform(lo - 1.0, hi + 1.0) for _ in range(300)]
    # Servo angles whose unwrapped ticks end in exactly .5: round half to even must agree.
    out += [((k + 0.5) * _TICK_RAD - joint.zero_offset) * joint.direction for k in range(-40, 40)]
    return out


def _robot_table(robot_name: str) -> tuple[Any, list[Any], cv.GoalTable]:
    """A shipped robot, its joints' position limits in ticks (None: extended position), its goal table."""
    robot = load_robot(robot_name)
    limits = [cv.limit_ticks(j) if j.operating_mode == "position" else None for j in robot.joints]
    return robot, limits, cv.GoalTable(robot.joints, limits)


@pytest.mark.parametrize("robot_name", ["tsnake", "wheeled_snake"])
def test_the_goal_table_places_every_goal_as_goal_ticks_does(robot_name: str) -> None:
    """Same ticks where goal_ticks gives some, None exactly where it raises (the caller then asks it why)."""
    robot, limits, table = _robot_table(robot_name)
    rng = random.Random(3)
    placed = refused = 0
    for i, j in enumerate(robot.joints):
        turns = [0] if j.operating_mode == "position" else [0, 4096, -3 * 4096, 250 * 4096]
        for turn in turns:
            for goal in _goals(j, rng):
                try:
                    want: int | None = cv.goal_ticks(j, goal, turn, limits[i])
                except ValueError:
                    want = None
                got = table.ticks(i, goal, turn)
                assert got == want and type(got) is type(want), (j.name, goal, turn)
                placed += want is not None
                refused += want is None
    assert placed > 1000 and refused > 20  # both outcomes exercised


@pytest.mark.parametrize("robot_name", ["tsnake", "wheeled_snake"])
def test_the_every_joint_pass_places_a_goal_vector_as_goal_ticks_does(robot_name: str) -> None:
    """ticks_every: goal_ticks's ticks for every joint, or None exactly when one joint's goal cannot be placed."""
    robot, limits, table = _robot_table(robot_name)
    rng = random.Random(5)
    choices = [_goals(j, rng) for j in robot.joints]
    placed = refused = 0
    for k in range(3000):
        goals = [rng.choice(c) if k % 3 else rng.choice(c[18:]) for c in choices]   # every third: in range
        turns = [0 if j.operating_mode == "position" else rng.choice([0, 4096, -3 * 4096, 250 * 4096])
                 for j in robot.joints]
        try:
            want: list[int] | None = [cv.goal_ticks(j, g, t, lim)
                                      for j, g, t, lim in zip(robot.joints, goals, turns, limits, strict=True)]
        except ValueError:
            want = None
        if want is not None and not all(type(g) is float for g in goals):
            want = None   # placed, but not all floats: left to the joint-by-joint path
        got = table.ticks_every(goals, turns)
        assert got == want, (goals, turns)
        assert got is None or all(type(t) is int for t in got)
        placed += got is not None
        refused += got is None
    assert placed > 300 and refused > 100  # both outcomes exercised


def test_both_operating_modes_are_covered_by_the_shipped_robots() -> None:
    modes = {j.operating_mode for name in ("tsnake", "wheeled_snake") for j in load_robot(name).joints}
    assert modes == {"position", "extended_position"}


def _packet(payload: list[int]) -> list[int]:
    """An instruction packet as the SDK's senders build it (header and CRC filled by txPacket)."""
    length = len(payload) + 3   # instruction + payload + CRC
    return [0, 0, 0, 0, 0xFE, length & 0xFF, length >> 8, 0x83, *payload, 0, 0]


class _Port:
    """What txPacket needs of a port: it records the bytes written."""

    def __init__(self) -> None:
        self.is_using = False
        self.written: list[bytes] = []

    def clearPort(self) -> None:
        pass

    def writePort(self, packet: list[int]) -> int:
        self.written.append(bytes(packet))
        return len(packet)


def test_packets_go_out_exactly_as_the_sdk_sends_them_with_and_without_a_header_pattern() -> None:
    """Stuffing skipped only where it changes nothing: the same bytes leave as from the SDK's own handler."""
    rng = random.Random(7)
    payloads = [[rng.randrange(256) for _ in range(rng.randrange(1, 120))] for _ in range(300)]
    payloads += [[0xFF, 0xFF, 0xFD, 0x01], [1, 0xFF, 0xFF, 0xFD], [0xFF, 0xFD, 0xFD, 0xFF, 0xFF], [0xFD, 0xFD],
                 [0x10, 0xFF, 0xFF, 0xFD, 0xFF, 0xFF, 0xFD, 0x00]]
    ours, sdk = _PacketHandler(), Protocol2PacketHandler()
    stuffed = 0
    for payload in payloads:
        a, b = _Port(), _Port()
        assert ours.txPacket(a, _packet(payload)) == sdk.txPacket(b, _packet(payload))
        assert a.written == b.written
        stuffed += b"\xff\xff\xfd" in bytes(payload)
        p, q = _packet(payload), _packet(payload)
        assert ours.addStuffing(p) == sdk.addStuffing(q) and p == q  # same result, same list left behind
    assert stuffed >= 3  # packets that the SDK does stuff were among them
