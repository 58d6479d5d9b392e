"""The slippage monitor's input check (``joint_positions``), as a pure function: what is never evaluated."""

from __future__ import annotations

import math

import pytest

from snake_ros.slippage_node import MAX_ABS_ANGLE_RAD, JointStateError, joint_positions

JOINTS = ["j1", "j2", "j3"]


def test_a_good_message_gives_the_monitored_angles_by_name_tail_to_head() -> None:
    assert joint_positions(["gripper", "j3", "j1", "j2"], [5.0, 0.3, 0.1, 0.2], JOINTS, 3) == [0.1, 0.2, 0.3]
    assert joint_positions([], [0.1, -0.2, 0.3, 9.0], [], 3) == [0.1, -0.2, 0.3]  # message order, names empty
    # A bound is a bound: the largest accepted magnitude passes.
    assert joint_positions(JOINTS, [MAX_ABS_ANGLE_RAD, -MAX_ABS_ANGLE_RAD, 0.0], JOINTS, 3)[:2] == [
        MAX_ABS_ANGLE_RAD, -MAX_ABS_ANGLE_RAD]


@pytest.mark.parametrize(("names", "positions", "joints", "why"), [
    (["j1", "j2", "j3", "j4"], [0.1, 0.2, 0.3], [], "4 names but 3 positions"),       # message order too
    (["j1", "j2", "j3", "j4"], [0.1, 0.2, 0.3], JOINTS, "4 names but 3 positions"),
    (["j1", "j2"], [0.1, 0.2, 0.3], [], "2 names but 3 positions"),
    (["j1", "j2", "x"], [0.1, 0.2, 0.3], JOINTS, "missing joints ['j3']"),
    ([], [0.1, 0.2], [], "need 3 positions, got 2"),
    (JOINTS, [0.1, math.nan, 0.3], JOINTS, "non-finite angle of j2"),
    (JOINTS, [0.1, 0.2, math.inf], JOINTS, "non-finite angle of j3"),
    (JOINTS, [1e6, 0.2, 0.3], JOINTS, "angle of j1 is 1e+06 rad"),
    ([], [0.1, -1e6, 0.3], [], "angle of position 1 is -1e+06 rad"),
    (JOINTS, [0.1, 0.2, math.nextafter(MAX_ABS_ANGLE_RAD, math.inf)], JOINTS, "beyond"),
])
def test_a_bad_message_is_refused_with_the_reason(names: list[str], positions: list[float], joints: list[str],
                                                   why: str) -> None:
    with pytest.raises(JointStateError) as err:
        joint_positions(names, positions, joints, 3)
    assert why in str(err.value)
    assert "\n" not in str(err.value)

