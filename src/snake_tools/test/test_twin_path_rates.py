"""The head's speed and turn rate per span of constant ``cmd_vel`` (:mod:`snake_tools.twin.path_rates`).

Oracles: a head driven round a circle at a known speed and turn rate; a real rosbag2 bag of the
twin driven by ``cmd_vel``, whose spans are the script's own switching times and whose rates are
those ``snake twin replay`` reports per segment for the same bag; a twin replayed by itself
leaves a zero residual.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.robot import load_robot
from snake_core.twin_params import TwinParams
from snake_tools.twin.data import Recording
from snake_tools.twin.identify import read_recording
from snake_tools.twin.path_rates import SIGMA_SPEED, SIGMA_TURN, path_residual, span_rates
from snake_tools.twin.recording import record_twin_run
from snake_tools.twin.replay import replay
from snake_tools.twin.rollout import simulate_path

_V, _W = 0.05, 0.2   # m/s, rad/s: the circle's speed and turn rate


def _circle(t: np.ndarray, v: float, w: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions and headings of a point moving at speed v and turn rate w from the origin, heading 0."""
    heading = w * t
    xy = np.column_stack([v / w * np.sin(heading), v / w * (1 - np.cos(heading))])
    return xy, heading


def test_a_circle_has_its_speed_as_chord_over_time_and_its_turn_rate() -> None:
    t = np.linspace(0.0, 20.0, 2001)
    xy, heading = _circle(t, _V, _W)
    rates = span_rates(t, xy, heading, ((0.0, 4.0), (4.0, 10.0), (10.0, 25.0)))
    assert rates.shape == (2, 2)   # the span past the poses is left out
    for (a, b), (speed, turn) in zip(((0.0, 4.0), (4.0, 10.0)), rates, strict=False):
        chord = 2 * _V / _W * math.sin(_W * (b - a) / 2)   # the circle's chord over the span
        assert speed == pytest.approx(chord / (b - a), rel=1e-4)
        assert turn == pytest.approx(_W, rel=1e-9)


def test_the_residual_is_the_rate_difference_over_its_scale_and_needs_a_heading() -> None:
    t = np.linspace(0.0, 12.0, 1201)
    xy, heading = _circle(t, _V, _W)
    spans = ((0.0, 6.0), (6.0, 12.0))
    rec = Recording(path=None, t_cmd=t, q_cmd=np.zeros((t.size, 1)), t_state=t, q_state=np.zeros((t.size, 1)),
                    t_pose=t, xy_pose=xy, pose_source="mocap", heading_pose=heading, spans=spans)
    np.testing.assert_array_equal(path_residual(rec, xy, heading), np.zeros(4))
    faster_xy, faster_heading = _circle(t, _V, _W + 0.01)
    r = path_residual(rec, faster_xy, faster_heading).reshape(-1, 2)
    np.testing.assert_allclose(r[:, 1], 0.01 / SIGMA_TURN, rtol=1e-9)
    expected = (span_rates(t, faster_xy, faster_heading, spans)[:, 0] - span_rates(t, xy, heading, spans)[:, 0])
    np.testing.assert_allclose(r[:, 0], expected / SIGMA_SPEED, rtol=1e-12)
    no_heading = Recording(None, t, rec.q_cmd, t, rec.q_state, t, xy, "mocap")
    assert path_residual(no_heading, faster_xy, faster_heading).size == 0


def _drive(t: float) -> tuple[float, float]:
    return (0.08, 0.0) if t < 3.0 else (0.05, 0.15)


def test_a_bag_gives_its_cmd_vel_spans_and_the_rates_replay_reports(tmp_path) -> None:
    robot = load_robot("tsnake")
    bag = record_twin_run(tmp_path / "ground", robot, 6.0, mocap_noise_m=0.001, cmd_vel=_drive, seed=1)
    rec = read_recording(bag, robot)
    assert len(rec.spans) == 2 and rec.spans[1][0] == pytest.approx(rec.spans[0][1])
    assert rec.spans[1][0] - rec.spans[0][0] == pytest.approx(3.0, abs=0.05)   # the script's switch
    assert rec.heading_pose.shape == rec.t_pose.shape
    reported = replay(bag, robot, None)["segments"]
    robot_rates = span_rates(rec.t_pose, rec.xy_pose, rec.heading_pose, rec.spans)
    np.testing.assert_allclose(robot_rates, [[s["robot_speed_mps"], s["robot_turn_rate_radps"]] for s in reported],
                               rtol=1e-9, atol=1e-12)
    assert robot_rates[1, 1] > 0.05   # it turned in the second span
    # The recorded twin, replayed by itself, leaves the motion capture's position noise only (1 mm: under
    # 1 mm/s over 3 s; the heading is recorded without noise); half the ground's friction turns it slower.
    _, xy, heading = simulate_path(rec, robot, TwinParams())
    r = path_residual(rec, xy, heading).reshape(-1, 2) * [SIGMA_SPEED, SIGMA_TURN]
    assert np.abs(r[:, 0]).max() < 0.001 and np.abs(r[:, 1]).max() < 1e-9
    _, xy, heading = simulate_path(rec, robot, TwinParams().with_flat({"contact.ground_friction": 0.4}))
    r = path_residual(rec, xy, heading).reshape(-1, 2) * [SIGMA_SPEED, SIGMA_TURN]
    assert r[1, 1] < -0.01
