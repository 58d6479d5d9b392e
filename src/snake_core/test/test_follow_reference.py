"""Seeded peg fields and the tracked reference point of the mocap closed loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.errors import PlanningError
from snake_core.following.follower import FollowerConfig, FollowerStatus
from snake_core.following.loop import polyline_distance, reference_pose, run_follow_loop
from snake_core.following.planning.fields import PegFieldSpec, peg_field
from snake_core.following.synthetic_mocap import MocapConfig, MocapModel

SPEC = PegFieldSpec(xlim=(-1.5, 1.5), ylim=(-1.0, 1.0), density=3.0, diameter=0.06, gap=0.2)
TEMPLATE = np.array([[0.02, 0.0, 0.0], [0.08, 0.015, 0.0], [0.08, -0.015, 0.0]])


@pytest.mark.parametrize("seed", range(4))
def test_peg_field_is_seeded_separated_and_keeps_out(seed):
    keep = [((-1.2, 0.0), 0.4), ((0.5, 0.3), 0.3)]
    pegs = peg_field(SPEC, np.random.default_rng(seed), keep)
    again = peg_field(SPEC, np.random.default_rng(seed), keep)
    np.testing.assert_array_equal(pegs, again)
    full = peg_field(SPEC, np.random.default_rng(seed))
    assert len(full) == round(SPEC.density * 3.0 * 2.0)
    # The keep-out only removes pegs: the result is exactly the pegs of the full field outside the discs.
    outside = [p for p in full if all(math.dist(p, c) >= r + SPEC.diameter / 2 for c, r in keep)]
    np.testing.assert_array_equal(pegs, np.array(outside).reshape(-1, 2))
    assert (pegs[:, 0] >= -1.5).all() and (pegs[:, 0] <= 1.5).all()
    assert (pegs[:, 1] >= -1.0).all() and (pegs[:, 1] <= 1.0).all()
    d = np.linalg.norm(full[:, None] - full[None], axis=2) + np.eye(len(full)) * 1e9
    assert d.min() >= SPEC.diameter + SPEC.gap - 1e-12


def test_peg_field_rejects_a_bad_spec():
    with pytest.raises(PlanningError, match="diameter"):
        PegFieldSpec(xlim=(0.0, 1.0), ylim=(0.0, 1.0), density=1.0, diameter=0.0, gap=0.0)
    with pytest.raises(PlanningError, match="xlim"):
        PegFieldSpec(xlim=(1.0, 0.0), ylim=(0.0, 1.0), density=1.0, diameter=0.1, gap=0.0)


@pytest.mark.parametrize(("heading", "yaw_offset", "r"),
                         [(0.3, math.pi / 2, 0.5), (-2.0, math.pi, 0.2), (1.0, 0.0, 0.0)])
def test_reference_pose_moves_along_the_head_frame_x_axis(heading, yaw_offset, r):
    yaw = heading - yaw_offset
    rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
    expected = np.array([1.0, 2.0]) + rot @ np.array([r, 0.0])
    x, y, h = reference_pose((1.0, 2.0, heading), yaw_offset, r)
    np.testing.assert_allclose([x, y], expected, atol=1e-12)
    assert h == heading


class _SideHeadUnicycle:
    """A differential drive whose tracked 'head' is its left wheel, head frame x pointing at the right wheel.

    The T-Snake's geometry (003 Eq. 9-10): the head segment is the left wheel, the body axis
    runs to the tail (the right wheel), and the drive moves at +90 deg to that axis.
    """

    def __init__(self, centre, heading, half_track):
        self.pose = np.array([*centre, heading], dtype=float)
        self.half_track = half_track
        self.cmd = np.zeros(2)
        self.t = 0.0

    @property
    def time(self):
        return self.t

    def set_targets(self, targets):
        self.cmd = np.asarray(targets, dtype=float)

    def advance(self, duration):
        v, w = self.cmd
        steps = 10
        for _ in range(steps):
            th = self.pose[2]
            self.pose += duration / steps * np.array([v * math.cos(th), v * math.sin(th), w])
        self.t += duration

    def head_markers(self):
        x, y, th = self.pose
        left = np.array([-math.sin(th), math.cos(th)])
        head = np.array([x, y]) + self.half_track * left
        axis = th - math.pi / 2  # head frame x: towards the right wheel
        c, s = math.cos(axis), math.sin(axis)
        return np.column_stack([head[0] + c * TEMPLATE[:, 0] - s * TEMPLATE[:, 1],
                                head[1] + s * TEMPLATE[:, 0] + c * TEMPLATE[:, 1], TEMPLATE[:, 2]])


class _PassThrough:
    class mapping:
        @staticmethod
        def to_command(v, w):
            return (v, w)

    @staticmethod
    def step(_dt, command):
        return np.asarray(command, dtype=float)


def test_loop_steers_the_drive_centre_when_the_head_is_a_wheel():
    """With reference_offset = half track the drive's centre (not the head) converges onto an L-shaped path."""
    path = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0]])
    plant = _SideHeadUnicycle((0.0, 0.3), 0.0, half_track=0.5)
    cfg = FollowerConfig(kp=1.0, kd=0.1, angle_tau=0.0, max_linear=0.1, max_angular=0.2, slowdown_angle=1.2,
                         stuck_time=20.0)
    res = run_follow_loop(plant, _PassThrough(), path, TEMPLATE, drive="cmd_vel", yaw_offset=math.pi / 2,
                          reference_offset=0.5, dt=0.05, time_limit=200.0, follower=cfg,
                          mocap=MocapModel(MocapConfig(position_noise_m=0.0005, rate_hz=20.0), 1))
    assert res.status is FollowerStatus.GOAL_REACHED
    centre = plant.pose[:2]
    assert np.linalg.norm(centre - path[-1]) <= cfg.goal_tolerance + 0.01
    # The reported track is the drive centre's: it starts 0.3 m off the path, not at the head.
    assert res.head[0, :2] == pytest.approx([0.0, 0.3], abs=0.01)
    assert res.cross_track[0] == pytest.approx(polyline_distance(np.array([0.0, 0.3]), path), abs=0.01)
    assert np.median(res.cross_track[len(res.cross_track) // 2:]) < 0.05


class _WalledUnicycle(_SideHeadUnicycle):
    """A plain unicycle (head at the centre, x forward) that cannot enter the box x in [1, 1.3], y < 0.4 (it slides)."""

    def __init__(self):
        super().__init__((0.0, 0.0), 0.0, half_track=0.0)

    def advance(self, duration):
        before = self.pose.copy()
        super().advance(duration)
        if 1.0 <= self.pose[0] <= 1.3 and self.pose[1] < 0.4:
            self.pose[0] = before[0]

    def head_markers(self):
        x, y, th = self.pose
        c, s = math.cos(th), math.sin(th)
        return np.column_stack([x + c * TEMPLATE[:, 0] - s * TEMPLATE[:, 1],
                                y + s * TEMPLATE[:, 0] + c * TEMPLATE[:, 1], TEMPLATE[:, 2]])


def test_replanning_after_stuck_leaves_the_branch_out_and_reaches_the_goal():
    from snake_core.errors import SnakeCoreError
    from snake_core.following.loop import run_with_replanning

    goal = np.array([3.0, 0.0])
    calls = []

    def plan(start, blocked):
        calls.append((np.array(start), [tuple(map(tuple, b)) for b in blocked]))
        if not blocked:
            return np.array([start, [2.0, 0.0], goal])  # through the wall
        if len(blocked) > 1:
            raise SnakeCoreError("no path")
        return np.array([start, [start[0], 0.8], [2.0, 0.8], goal])  # around it

    plant = _WalledUnicycle()
    cfg = FollowerConfig(kp=1.5, kd=0.1, angle_tau=0.0, max_linear=0.2, max_angular=1.0, stuck_time=3.0)
    res = run_with_replanning(plant, _PassThrough(), plan, np.zeros(2), TEMPLATE, max_replans=2, time_limit=120.0,
                              drive="cmd_vel", dt=0.05, follower=cfg,
                              mocap=MocapModel(MocapConfig(position_noise_m=0.0005, rate_hz=20.0), 2))
    assert res.status is FollowerStatus.GOAL_REACHED
    assert [leg.status for leg in res.legs] == [FollowerStatus.STUCK, FollowerStatus.GOAL_REACHED]
    assert res.blocked[0][0] == pytest.approx([0.0, 0.0]) and res.blocked[0][1] == pytest.approx([2.0, 0.0])
    # The second plan starts where the robot got stuck: at the wall's face.
    assert calls[1][0][0] == pytest.approx(1.0, abs=0.05)
    assert np.linalg.norm(plant.pose[:2] - goal) <= cfg.goal_tolerance + 0.01
    assert len(res.head) == len(res.cross_track) == sum(len(leg.head) for leg in res.legs)


def test_replanning_gives_up_with_the_planners_reason():
    from snake_core.errors import SnakeCoreError
    from snake_core.following.loop import run_with_replanning

    def plan(start, blocked):
        if blocked:
            raise SnakeCoreError("goal: unreachable")
        return np.array([start, [3.0, 0.0]])

    cfg = FollowerConfig(kp=1.5, angle_tau=0.0, max_linear=0.2, max_angular=1.0, stuck_time=3.0)
    res = run_with_replanning(_WalledUnicycle(), _PassThrough(), plan, np.zeros(2), TEMPLATE, time_limit=60.0,
                              drive="cmd_vel", dt=0.05, follower=cfg)
    assert res.status is FollowerStatus.STUCK
    assert "unreachable" in res.error and len(res.legs) == 1
