"""Line-of-sight head-angle PD follower (001 Eq. 11): geometry, unicycle loop, branches, stuck, dropout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.angles import wrap_to_pi
from snake_core.following.follower import (
    FollowerConfig,
    FollowerError,
    FollowerStatus,
    PathFollower,
    line_of_sight,
)


@pytest.mark.parametrize("seed", range(6))
def test_line_of_sight_is_the_farthest_circle_crossing_on_the_branch(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
    head = a + 0.4 * (b - a) + rng.normal(0, 0.1, 2)
    radius = 0.3
    hit = line_of_sight(head, a, b, radius)
    s = np.linspace(0, 1, 200001)
    pts = a + s[:, None] * (b - a)
    on_circle = np.abs(np.linalg.norm(pts - head, axis=1) - radius) < 2e-5 * np.linalg.norm(b - a) + 1e-9
    if not on_circle.any():
        assert hit is None
    else:
        far = pts[np.nonzero(on_circle)[0].max()]
        assert hit is not None
        assert np.linalg.norm(hit - far) < 1e-4
        assert np.linalg.norm(hit - head) == pytest.approx(radius)


def _unicycle(follower: PathFollower, pose, t_end: float, dt: float = 0.02, speed_scale: float = 1.0):
    """Kinematic unicycle driven by the follower's cmd_vel outputs."""
    x, y, th = pose
    t = 0.0
    log = []
    out = follower.update(t, (x, y, th))
    while t < t_end and out.status is FollowerStatus.FOLLOWING:
        x += speed_scale * out.linear * math.cos(th) * dt
        y += speed_scale * out.linear * math.sin(th) * dt
        th += speed_scale * out.angular * dt
        t += dt
        out = follower.update(t, (x, y, th))
        log.append((t, x, y, th, out.cross_track))
    return out, np.array(log)


def test_unicycle_converges_onto_a_straight_path():
    fol = PathFollower(FollowerConfig(kp=1.5, kd=0.2, angle_tau=0.0, max_linear=0.2, max_angular=1.0))
    fol.set_path(np.array([[0.0, 0.0], [6.0, 0.0]]))
    out, log = _unicycle(fol, (0.0, 0.8, -0.5), 60.0)
    assert out.status is FollowerStatus.GOAL_REACHED
    late = log[log[:, 1] > 3.0]
    assert np.abs(late[:, 2]).max() < 0.02  # y -> 0 on the second half
    assert np.abs(log[:, 2]).max() < 0.85  # no overshoot beyond the start offset


def test_branch_switching_follows_a_polyline_to_the_goal():
    path = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.5]])
    fol = PathFollower(FollowerConfig(kp=1.5, kd=0.1, angle_tau=0.0, max_angular=1.5))
    fol.set_path(path)
    out, log = _unicycle(fol, (0.0, 0.0, 0.0), 120.0)
    assert out.status is FollowerStatus.GOAL_REACHED
    assert out.branch == len(path) - 2
    assert np.hypot(log[-1, 1] - 0.0, log[-1, 2] - 2.5) <= fol.config.goal_tolerance
    # visits every vertex's neighbourhood in order
    for v in path[1:-1]:
        assert np.hypot(log[:, 1] - v[0], log[:, 2] - v[1]).min() < fol.config.switch_radius + 0.1


def test_delta_theta_sign_and_derivative_damping():
    fol = PathFollower(FollowerConfig(kp=1.0, kd=0.5, derivative_tau=0.0, angle_tau=0.0))
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    out0 = fol.update(0.0, (0.0, -0.3, 0.0))  # path to the left: positive Delta-theta
    assert out0.delta_theta > 0
    assert out0.angular > 0
    assert out0.head_offset < 0  # a left turn needs a negative lateral offset (joint sign convention)
    out1 = fol.update(0.1, (0.0, -0.3, 0.2))  # head turned towards the target: Delta-theta shrinks
    raw = wrap_to_pi(out1.delta_theta - out0.delta_theta) / 0.1
    assert out1.command == pytest.approx(out1.delta_theta + 0.5 * raw)
    assert out1.command < out1.delta_theta


def test_linear_speed_scheduled_down_with_heading_error():
    fol = PathFollower(FollowerConfig(max_linear=0.2, slowdown_angle=1.0, angle_tau=0.0))
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    assert fol.update(0.0, (0.0, 0.0, 0.0)).linear == pytest.approx(0.2)
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    assert fol.update(0.0, (0.0, 0.0, 0.5)).linear == pytest.approx(0.1)
    fol.set_path(np.array([[0.0, 0.0], [5.0, 0.0]]))
    assert fol.update(0.0, (0.0, 0.0, 2.0)).linear == 0.0


def test_stuck_when_the_head_does_not_move():
    fol = PathFollower(FollowerConfig(stuck_speed=0.01, stuck_time=2.0))
    fol.set_path(np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]))
    out, _ = _unicycle(fol, (0.0, 0.0, 0.0), 10.0, speed_scale=0.0)
    assert out.status is FollowerStatus.STUCK
    a, b = fol.blocked_branch
    np.testing.assert_allclose(a, [0.0, 0.0])
    np.testing.assert_allclose(b, [1.0, 0.0])
    assert fol.update(11.0, (0.0, 0.0, 0.0)).linear == 0.0


def test_no_pose_stops_the_robot_and_following_resumes():
    fol = PathFollower()
    fol.set_path(np.array([[0.0, 0.0], [1.0, 0.0]]))
    out = fol.update(0.0, None)
    assert out.status is FollowerStatus.NO_POSE
    assert (out.linear, out.angular, out.head_offset) == (0.0, 0.0, 0.0)
    assert fol.update(0.1, (0.0, 0.0, 0.0)).status is FollowerStatus.FOLLOWING


def test_bad_path_and_settings_are_refused():
    with pytest.raises(FollowerError, match="path"):
        PathFollower().set_path(np.array([[0.0, 0.0]]))
    with pytest.raises(FollowerError, match="lookahead"):
        FollowerConfig(lookahead=0.0)


def test_serpenoid_snake_in_the_viscous_model_follows_an_l_shaped_path():
    from snake_core.following.viscous.closed_loop import follow_path

    res = follow_path(np.array([[0.0, 0.0], [2.5, 0.0], [2.5, 1.5]]), time_limit=80.0)
    assert res.status is FollowerStatus.GOAL_REACHED
    assert float(np.mean(res.cross_track)) < 0.15


TEMPLATE = np.array([[0.03, 0.0, 0.04], [-0.03, 0.02, 0.04], [-0.03, -0.02, 0.04]])


def test_mocap_loop_with_noise_dropouts_and_outliers_reaches_the_goal():
    from snake_core.following.loop import run_follow_loop
    from snake_core.following.synthetic_mocap import MocapConfig, MocapModel
    from snake_core.following.viscous.closed_loop import ViscousClosedLoop, ViscousPlant

    loop = ViscousClosedLoop(9)
    state = loop.initial_state(np.array([0.0, 0.0]), 0.0)
    plant = ViscousPlant(state.snake, TEMPLATE)
    path = np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 1.5]])
    config = MocapConfig(position_noise_m=0.001, dropout_probability=0.05, outlier_probability=0.03, rate_hz=20.0)
    res = run_follow_loop(plant, state.gait, path, TEMPLATE, omega=loop.omega, time_limit=80.0,
                          mocap=MocapModel(config, 4))
    assert res.status is FollowerStatus.GOAL_REACHED
    assert res.mocap["rejected_jump"] > 0
    assert res.mocap["rejected_nan"] > 0
    assert float(np.mean(res.cross_track)) < 0.2
    assert np.hypot(*(res.head[-1, :2] - path[-1])) < 0.25


def test_mocap_loop_stops_the_gait_when_the_pose_is_lost():
    from snake_core.following.loop import run_follow_loop
    from snake_core.following.synthetic_mocap import MocapConfig, MocapModel
    from snake_core.following.viscous.closed_loop import ViscousClosedLoop, ViscousPlant

    loop = ViscousClosedLoop(9)
    state = loop.initial_state(np.array([0.0, 0.0]), 0.0)
    plant = ViscousPlant(state.snake, TEMPLATE)
    # Every frame lost: a dropout starts at once (p = 1 - 1e-9) and lasts ~1e7 s on average.
    blind = MocapModel(MocapConfig(position_noise_m=0.0005, dropout_probability=1.0 - 1e-9, dropout_burst_s=1e7,
                                   rate_hz=20.0), 0)
    res = run_follow_loop(plant, state.gait, np.array([[0.0, 0.0], [2.0, 0.0]]), TEMPLATE, omega=loop.omega,
                          time_limit=5.0, mocap=blind)
    assert blind.dropped == blind.captured > 0
    assert res.mocap["accepted"] == 0
    assert np.abs(res.head - res.head[0]).max() < 1e-9  # the wave halted: the snake stays put


class _Unicycle:
    """Differential-drive test plant whose 'joint targets' are (v, omega)."""

    def __init__(self, pose):
        self.pose = np.array(pose, dtype=float)
        self.cmd = np.zeros(2)
        self.t = 0.0

    @property
    def time(self):
        return self.t

    def set_targets(self, targets):
        self.cmd = np.asarray(targets, dtype=float)

    def advance(self, duration):
        v, w = self.cmd
        self.pose += duration * np.array([v * math.cos(self.pose[2]), v * math.sin(self.pose[2]), w])
        self.t += duration

    def head_markers(self):
        c, s = math.cos(self.pose[2]), math.sin(self.pose[2])
        return np.column_stack([self.pose[0] + c * TEMPLATE[:, 0] - s * TEMPLATE[:, 1],
                                self.pose[1] + s * TEMPLATE[:, 0] + c * TEMPLATE[:, 1], TEMPLATE[:, 2]])


class _PassThrough:
    """'Gait' whose native command is the twist itself."""

    class mapping:
        @staticmethod
        def to_command(v, w):
            return (v, w)

    def step(self, dt, command):
        return np.asarray(command, dtype=float)


def test_mocap_loop_cmd_vel_drive_converges_onto_the_path():
    from snake_core.following.loop import run_follow_loop

    plant = _Unicycle((0.0, 0.5, 0.0))
    cfg = FollowerConfig(kp=1.5, kd=0.1, angle_tau=0.0, max_angular=1.0)
    res = run_follow_loop(plant, _PassThrough(), np.array([[0.0, 0.0], [4.0, 0.0]]), TEMPLATE, drive="cmd_vel",
                          dt=0.05, time_limit=60.0, follower=cfg)
    assert res.status is FollowerStatus.GOAL_REACHED
    assert res.cross_track[-20:].max() < 0.03


def test_mocap_loop_feeds_the_filter_what_the_motion_capture_releases():
    from snake_core.following.loop import run_follow_loop
    from snake_core.following.synthetic_mocap import MocapConfig, MocapModel

    latency_periods = 4
    cfg = FollowerConfig(kp=1.5, kd=0.1, angle_tau=0.0, max_angular=1.0)
    model = MocapModel(MocapConfig(position_noise_m=0.0005, latency_s=latency_periods * 0.05, rate_hz=20.0), 3)
    res = run_follow_loop(_Unicycle((0.0, 0.5, 0.0)), _PassThrough(), np.array([[0.0, 0.0], [4.0, 0.0]]), TEMPLATE,
                          drive="cmd_vel", dt=0.05, time_limit=60.0, follower=cfg, mocap=model)
    assert res.status is FollowerStatus.GOAL_REACHED
    # One capture per period; the last `latency_periods` captures are still in the delay line.
    periods = len(res.head)
    assert model.captured == periods and model.pending == latency_periods
    assert sum(res.mocap.values()) == periods - latency_periods


def test_mocap_loop_refuses_a_capture_rate_other_than_the_control_rate():
    from snake_core.errors import SnakeCoreError
    from snake_core.following.loop import run_follow_loop
    from snake_core.following.synthetic_mocap import MocapConfig, MocapModel

    with pytest.raises(SnakeCoreError, match="rate_hz"):
        run_follow_loop(_Unicycle((0.0, 0.0, 0.0)), _PassThrough(), np.array([[0.0, 0.0], [1.0, 0.0]]), TEMPLATE,
                        drive="cmd_vel", dt=0.05, mocap=MocapModel(MocapConfig(rate_hz=100.0), 0))
