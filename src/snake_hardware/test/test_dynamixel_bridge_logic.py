"""Pure rules of the bridge: command filtering/clamping, command timeout, backoff, conversions."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snake_core.robot import load_robot
from snake_hardware.command import (
    ABSURD_TARGET_RAD,
    Backoff,
    CommandState,
    CommandTimeout,
    JointTargetFilter,
    RateMeter,
)
from snake_hardware.dynamixel import conversion as cv

_ROBOT = load_robot("tsnake")


def test_filter_matches_by_name_drops_nan_and_unknown_and_clamps() -> None:
    f = JointTargetFilter(_ROBOT.joints)
    cmd = f.filter(["m2_lateral", "ghost", "m1_dorsal", "m1_twist", "m3_dorsal"],
                   [0.2, 1.0, math.nan, 25.0, -9.0])
    assert cmd.targets == {"m2_lateral": 0.2, "m1_twist": 25.0, "m3_dorsal": -1.5708}
    assert cmd.unknown == ["ghost"] and cmd.not_finite == ["m1_dorsal"] and cmd.clamped == ["m3_dorsal"]
    assert cmd.dropped
    with pytest.raises(ValueError, match="2 names but 1 positions"):
        f.filter(["m1_dorsal", "m1_twist"], [0.0])


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=18, max_size=18))
def test_filter_never_leaves_the_envelope(values: list[float]) -> None:
    cmd = JointTargetFilter(_ROBOT.joints).filter(_ROBOT.joint_names, values)
    for name, v in cmd.targets.items():
        j = _ROBOT.joint(name)
        assert math.isfinite(v) and j.lower <= v <= j.upper and abs(v) <= ABSURD_TARGET_RAD


def test_command_timeout_state_machine() -> None:
    t = CommandTimeout(0.5, "hold")
    assert t.poll(0.0) is CommandState.WAITING  # no command yet: never times out
    assert t.poll(100.0) is CommandState.WAITING
    t.on_command(100.0)
    assert t.poll(100.4) is CommandState.ACTIVE and not t.just_timed_out
    assert t.poll(100.6) is CommandState.TIMED_OUT and t.just_timed_out
    assert t.poll(100.7) is CommandState.TIMED_OUT and not t.just_timed_out  # reported once
    t.on_command(101.0)
    assert t.poll(101.1) is CommandState.ACTIVE
    never = CommandTimeout(0.0, "torque_off")
    never.on_command(0.0)
    assert never.poll(1e6) is CommandState.ACTIVE
    with pytest.raises(ValueError, match="reaction"):
        CommandTimeout(1.0, "explode")


def test_backoff_grows_to_its_cap_and_resets() -> None:
    b = Backoff(0.1, 1.0, 2.0)
    assert b.due(0.0)
    delays = [b.failed(0.0) for _ in range(6)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert not b.due(0.5) and b.due(1.0)
    b.reset()
    assert b.due(0.0)


def test_rate_meter() -> None:
    r = RateMeter(alpha=0.5)
    for k in range(50):
        r.tick(k * 0.01)
    assert r.hz == pytest.approx(100.0)


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("offset", [0.0, 0.7, -2.1])
def test_ticks_round_trip_within_half_a_tick(direction: int, offset: float) -> None:
    from dataclasses import replace

    j = replace(_ROBOT.joint("m1_twist"), direction=direction, zero_offset=offset)
    for angle in (-30.0, -1.0, 0.0, 0.123, 12.5):
        ticks = cv.joint_to_ticks(j, angle)
        assert ticks == 2048 + round((direction * angle + offset) * 4096 / (2 * math.pi))
        assert cv.ticks_to_joint(j, ticks) == pytest.approx(angle, abs=math.pi / 4096)


def test_limits_that_do_not_fit_one_turn_are_refused() -> None:
    from dataclasses import replace

    j = replace(_ROBOT.joint("m1_dorsal"), zero_offset=2.5)
    with pytest.raises(ValueError, match=r"outside 0\.\.4095"):
        cv.limit_ticks(j)


def test_effort_current_round_trip() -> None:
    j = _ROBOT.joint("m1_dorsal")
    assert cv.current_to_effort(j, cv.effort_to_current(j, 1.5)) == pytest.approx(1.5, abs=0.01)
