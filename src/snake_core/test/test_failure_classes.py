"""Failure classes of a gait run, on constructed bodies whose answer follows from plain geometry."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.analysis.failure import (
    FAILURE_CLASSES,
    RunSamples,
    classify_run,
    is_stuck,
    lift,
    limit_fraction,
    self_collides,
    self_collision_distance,
)

_R = 0.028  # m, the T-Snake's radius
_N = 11  # backbone points
_SPACING = 0.1  # m between backbone points


def _straight(n: int = _N) -> tuple[np.ndarray, np.ndarray]:
    arc = _SPACING * np.arange(n)
    return np.column_stack([arc, np.zeros(n), np.full(n, _R)]), arc


def _hairpin(gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Two parallel legs ``gap`` apart (centre lines), joined by a straight bar: a U of 0.5 m legs."""
    leg = np.arange(6) * _SPACING
    first = np.column_stack([leg[::-1], np.zeros(6), np.full(6, _R)])
    second = np.column_stack([leg, np.full(6, gap), np.full(6, _R)])
    points = np.concatenate([first, second])
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    return points, arc


def test_a_straight_body_does_not_collide_with_itself() -> None:
    points, arc = _straight()
    # the nearest points more than 4 r apart along a straight line are exactly that far apart in space
    assert self_collision_distance(points, arc, _R) == pytest.approx(4 * _R, abs=0.5 * _R)
    assert not self_collides(points[None], arc, _R)


@pytest.mark.parametrize(("gap", "collides"), [(1.5 * _R, True), (2.5 * _R, False)])
def test_a_hairpin_collides_when_its_legs_are_closer_than_a_diameter(gap: float, collides: bool) -> None:
    points, arc = _hairpin(gap)
    # the two legs are parallel lines gap apart: their closest points, far apart along the body, are gap apart
    assert self_collision_distance(points, arc, _R) == pytest.approx(gap, rel=1e-9)
    assert self_collides(points[None], arc, _R) is collides


def test_a_joint_bent_to_a_right_angle_is_no_collision() -> None:
    """A 90 deg corner: points a and b from it are sqrt(a^2 + b^2) apart, over 2 r once a + b > 4 r."""
    leg = np.arange(6) * _SPACING
    points = np.concatenate([np.column_stack([leg[::-1], np.zeros(6), np.zeros(6)]),
                             np.column_stack([np.zeros(5), leg[1:], np.zeros(5)])])
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
    assert self_collision_distance(points, arc, _R) == pytest.approx(4 * _R / np.sqrt(2), rel=0.1)
    assert not self_collides(points[None], arc, _R)


def test_stuck_means_neither_moved_nor_turned() -> None:
    still = np.zeros((50, 2))
    assert is_stuck(still, np.zeros(50))
    assert not is_stuck(np.column_stack([np.linspace(0, 0.1, 50), np.zeros(50)]), np.zeros(50))
    # turning on the spot is progress for a turn: heading from pi - 0.1 across the wrap to -pi + 0.2 is +0.3 rad
    turning = np.angle(np.exp(1j * np.linspace(np.pi - 0.1, np.pi + 0.2, 50)))
    assert not is_stuck(still, turning)


def test_limit_fraction_counts_the_samples_at_each_limit() -> None:
    q = np.zeros((10, 3))
    q[:3, 0] = 1.5700  # 3 of 10 samples within 0.02 rad of the upper limit 1.5708
    q[:, 1] = -1.0  # never near
    q[:, 2] = 50.0  # a continuous joint: infinite limits
    lower = np.array([-1.5708, -1.5708, -np.inf])
    upper = np.array([1.5708, 1.5708, np.inf])
    assert limit_fraction(q, lower, upper).tolist() == [0.3, 0.0, 0.0]


def test_lift_is_the_lowest_points_rise_above_the_ground_beneath() -> None:
    points, _ = _straight()
    body = np.repeat(points[None], 3, axis=0)
    ground = np.zeros((3, _N))
    body[1, :, 2] += 0.2  # whole body 0.2 m up
    body[2, :, 2] += 0.2  # the same height, but over a 0.2 m step of the ground: resting again
    ground[2] += 0.2
    body[1, 0, 2] = _R  # ... except the head, still on the ground: not lifted
    assert lift(body, ground) == pytest.approx([0.0, 0.0, 0.0])
    body[1, 0, 2] = _R + 0.2
    assert lift(body, ground) == pytest.approx([0.0, 0.2, 0.0])


def _run(**changes: np.ndarray) -> RunSamples:
    points, arc = _straight()
    t = 20
    fields = {
        "com": np.column_stack([np.linspace(0, 0.5, t), np.zeros(t)]), "heading": np.zeros(t),
        "body": np.repeat(points[None], t, axis=0), "arc": arc, "ground": np.zeros((t, _N)),
        "q": np.zeros((t, 2)), "lower": np.full(2, -1.5708), "upper": np.full(2, 1.5708), "radius": _R,
    }
    fields.update(changes)
    return RunSamples(**fields)


def test_classify_run_names_each_class_of_a_constructed_run() -> None:
    t = 20
    assert classify_run(_run()) == []
    assert classify_run(_run(com=np.zeros((t, 2)))) == ["stuck"]
    hairpin, hairpin_arc = _hairpin(_R)
    assert len(hairpin) == _N + 1
    assert classify_run(_run(body=np.repeat(hairpin[None], t, axis=0), arc=hairpin_arc,
                             ground=np.zeros((t, _N + 1)))) == ["self_collision"]
    q = np.zeros((t, 2))
    q[: t // 2, 1] = -1.5708  # half the run at its lower limit: over a quarter
    assert classify_run(_run(q=q)) == ["joint_limit"]
    q[:, 1] = 0.0
    q[:4, 0] = 1.5600  # 4 of 20 samples (0.2) within 0.02 rad of the limit: under a quarter
    assert classify_run(_run(q=q)) == []
    q[:6, 0] = 1.5600  # 6 of 20 (0.3)
    assert classify_run(_run(q=q)) == ["joint_limit"]
    points, _ = _straight()
    body = np.repeat(points[None], t, axis=0)
    body[10, :, 2] += 3 * _R  # one sample with the whole body 3 r up: launched
    assert classify_run(_run(body=body)) == ["airborne"]
    assert classify_run(_run(com=np.zeros((t, 2)), body=body)) == ["stuck", "airborne"]
    assert set(FAILURE_CLASSES) == {"stuck", "self_collision", "joint_limit", "airborne"}
