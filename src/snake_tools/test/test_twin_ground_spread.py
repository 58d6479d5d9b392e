"""The ground friction's interval carries the servo model's spread (``snake_tools.twin.ground``).

The share is the delta method's: checked against a residual linear in log mu and in the servo
parameters, where the best log mu's shift is known in closed form, and against the intervals
it reads the standard deviations from.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_tools.twin import ground


def _linear(a: np.ndarray, b: dict[str, np.ndarray], theta0: dict[str, float]):
    """r(x, theta) = a x + sum_i b_i (theta_i - theta0_i): the best x moves by -(a.b_i)/(a.a) per unit theta_i."""
    state = {"calls": 0}

    def residual(x: float) -> np.ndarray:
        return a * x

    def moved(x: float, servo: str, value: float) -> np.ndarray:
        state["calls"] += 1
        return a * x + b[servo] * (value - theta0[servo])

    return residual, moved, state


def test_the_share_is_the_delta_methods_on_a_linear_residual():
    rng = np.random.default_rng(3)
    a = rng.normal(size=40)
    theta0 = {"servo.dorsal.kp": 40.0, "servo.twist.kv": 0.5, "servo.lateral.latency_s": 0.02}
    b = {n: rng.normal(size=40) for n in theta0}
    std = {"servo.dorsal.kp": 0.3, "servo.twist.kv": 0.04, "servo.lateral.latency_s": 0.001}
    residual, moved, state = _linear(a, b, theta0)
    share = ground._servo_share(0.1, residual, moved, theta0, std)
    expected = math.sqrt(sum((float(a @ b[n]) / float(a @ a) * std[n]) ** 2 for n in std))
    assert share == pytest.approx(expected, rel=1e-9)
    assert state["calls"] == len(std)   # one rollout per servo parameter
    # Steps below the floor (the latency's: two physics steps) are scaled back to the deviation: linear in it.
    half = ground._servo_share(0.1, residual, moved, theta0, {"servo.lateral.latency_s": 0.0005})
    assert half == pytest.approx(abs(float(a @ b["servo.lateral.latency_s"])) / float(a @ a) * 0.0005, rel=1e-9)


def test_no_deviation_no_share_and_unknown_names_are_skipped():
    a = np.ones(5)
    residual, moved, state = _linear(a, {"servo.dorsal.kp": np.ones(5)}, {"servo.dorsal.kp": 40.0})
    assert ground._servo_share(0.0, residual, moved, {"servo.dorsal.kp": 40.0}, {"servo.dorsal.kp": 0.0}) == 0.0
    assert ground._servo_share(0.0, residual, moved, {"servo.dorsal.kp": 40.0}, {"joint.x.kp": 1.0}) == 0.0
    assert state["calls"] == 0


def test_a_residual_blind_to_mu_leaves_an_unbounded_share():
    residual, moved, _ = _linear(np.zeros(5), {"servo.dorsal.kp": np.ones(5)}, {"servo.dorsal.kp": 40.0})
    assert ground._servo_share(0.0, residual, moved, {"servo.dorsal.kp": 40.0}, {"servo.dorsal.kp": 1.0}) == math.inf


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
