"""The ground friction's interval carries the servo model's spread (``snake_tools.twin.ground``).

The share is propagated by Monte Carlo: checked against a cost quadratic in log mu and linear in
the servo parameters, where the best log mu's shift is known in closed form, and against the
intervals it reads the standard deviations from.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_tools.twin import ground


def _quadratic(a: np.ndarray, b: dict[str, np.ndarray], theta0: dict[str, float]):
    """|r|^2 of r = a x + sum_i b_i (theta_i - theta0_i): the best x moves by -(a.b_i)/(a.a) per unit theta_i."""
    state = {"calls": 0}

    def cost_with(points: list[tuple[float, dict[str, float]]]) -> list[float]:
        state["calls"] += len(points)
        rs = [a * x + sum(b[n] * (values[n] - theta0[n]) for n in values) for x, values in points]
        return [float(r @ r) for r in rs]

    return cost_with, state


def test_the_share_is_the_spread_of_the_closed_form_shift_over_the_draws():
    rng = np.random.default_rng(3)
    a = rng.normal(size=40)
    theta0 = {"servo.dorsal.kp": 40.0, "servo.twist.kv": 0.5, "servo.lateral.latency_s": 0.02}
    b = {n: rng.normal(size=40) for n in theta0}
    std = {"servo.dorsal.kp": 0.05, "servo.twist.kv": 0.01, "servo.lateral.latency_s": 0.001}
    cost_with, state = _quadratic(a, b, theta0)
    draws = 4000
    share = ground._servo_share(0.0, cost_with, theta0, std, draws=draws)
    expected = math.sqrt(sum((float(a @ b[n]) / float(a @ a) * std[n]) ** 2 for n in std))
    # The sample deviation of 4000 draws is within 5 % of the true one (its relative spread: 1.1 %).
    assert share == pytest.approx(expected, rel=0.05)
    assert state["calls"] == draws * len(ground._SHARE_OFFSETS)   # one scan per draw, all values drawn at once
    # Repeatable: the draws are seeded.
    assert ground._servo_share(0.0, cost_with, theta0, std, draws=20) == ground._servo_share(
        0.0, cost_with, theta0, std, draws=20)


def test_the_vertex_of_a_parabola_is_exact_and_an_end_is_kept():
    xs = np.array([-0.3, -0.15, 0.0, 0.15, 0.3])
    assert ground.parabola_vertex(xs, 3.0 * (xs - 0.07) ** 2 + 1.0) == pytest.approx(0.07, abs=1e-12)
    assert ground.parabola_vertex(xs, (xs + 0.5) ** 2) == -0.3


def test_a_best_beyond_the_scan_is_scanned_on_outward_and_one_never_reached_is_unbounded():
    # cost (x - 0.5 - theta)^2: the best beyond the scan's end (0.3) for every draw, reached two steps on.
    theta0 = {"servo.dorsal.kp": 40.0}

    def cost_with(points: list[tuple[float, dict[str, float]]]) -> list[float]:
        return [(x - 0.5 - (values["servo.dorsal.kp"] - 40.0)) ** 2 for x, values in points]

    share = ground._servo_share(0.0, cost_with, theta0, {"servo.dorsal.kp": 0.01}, draws=200)
    assert share == pytest.approx(0.01, rel=0.15)   # the draws' own deviation: every best found exactly
    far = ground._servo_share(-2.0, cost_with, theta0, {"servo.dorsal.kp": 0.01})   # 2.5 away: 4 steps do not reach
    assert far == math.inf


def test_no_deviation_no_share_and_unknown_names_are_skipped():
    cost_with, state = _quadratic(np.ones(5), {"servo.dorsal.kp": np.ones(5)}, {"servo.dorsal.kp": 40.0})
    assert ground._servo_share(0.0, cost_with, {"servo.dorsal.kp": 40.0}, {"servo.dorsal.kp": 0.0}) == 0.0
    assert ground._servo_share(0.0, cost_with, {"servo.dorsal.kp": 40.0}, {"joint.x.kp": 1.0}) == 0.0
    assert state["calls"] == 0


def test_a_cost_blind_to_mu_leaves_an_unbounded_share():
    cost_with, _ = _quadratic(np.zeros(5), {"servo.dorsal.kp": np.ones(5)}, {"servo.dorsal.kp": 40.0})
    assert ground._servo_share(0.0, cost_with, {"servo.dorsal.kp": 40.0}, {"servo.dorsal.kp": 1.0}) == math.inf


def test_standard_deviations_come_from_the_95_percent_intervals_and_unbounded_ones_are_left_out():
    intervals = {"servo.dorsal.kp": (38.04, 41.96), "servo.twist.kv": (0.1, math.inf), "servo.lateral.kp": (5.0, 5.0)}
    std = ground.start_std(intervals, ["servo.dorsal.kp", "servo.twist.kv", "servo.lateral.kp", "servo.x.kv"])
    assert std == {"servo.dorsal.kp": pytest.approx(1.0, rel=1e-4)}


def test_the_recorded_deviations_are_read_back_and_a_bad_one_is_one_line_naming_file_and_field(tmp_path):
    import yaml

    from snake_core.errors import RobotConfigError
    from snake_tools.twin.report import recorded_std

    path = tmp_path / "lab.yaml"
    assert recorded_std(None) == {} and recorded_std(path) == {}
    path.write_text(yaml.safe_dump({"twin": {"provenance": {"on the ground": {"bag": "g"}}}}))
    assert recorded_std(path) == {}   # no lifted fit recorded: the servo model held as exact
    path.write_text(yaml.safe_dump({"twin": {"provenance": {"lifted": {"std": {"servo.dorsal.kp": 0.25}}}}}))
    assert recorded_std(path) == {"servo.dorsal.kp": 0.25}
    for bad in (-1.0, 0.0, float("inf"), "big", True):
        path.write_text(yaml.safe_dump({"twin": {"provenance": {"lifted": {"std": {"servo.dorsal.kp": bad}}}}}))
        with pytest.raises(RobotConfigError) as err:
            recorded_std(path)
        assert str(err.value).startswith(f"{path}: twin.provenance.lifted.std.servo.dorsal.kp: ")
        assert "\n" not in str(err.value)
