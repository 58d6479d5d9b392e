"""cmd_vel conditioning: validation, limits, deadman."""

from __future__ import annotations

import itertools
import math

import pytest

from snake_core.errors import GaitError
from snake_core.gait.command import TwistConditioner, TwistLimits

LIMITS = TwistLimits(max_linear=0.2, max_angular=1.0, max_linear_accel=0.5, max_angular_accel=2.0, timeout=0.5)


@pytest.mark.parametrize(("v", "w", "field"), [(math.nan, 0.0, "linear.x"), (0.0, math.inf, "angular.z"),
                                               (5.0, 0.0, "linear.x"), (0.0, -50.0, "angular.z")])
def test_bad_commands_are_rejected_and_never_reach_the_output(v, w, field):
    f = TwistConditioner(LIMITS)
    assert f.submit(0.0, 0.1, 0.0) is None
    reason = f.submit(0.01, v, w)
    assert reason is not None and field in reason
    for k in range(100):
        out = f.ramp(0.01 + 0.01 * k, 0.01)
    assert all(math.isfinite(x) for x in out)
    assert abs(out[0]) <= LIMITS.max_linear and abs(out[1]) <= LIMITS.max_angular
    assert f.rejected == 1


def test_clamp_and_acceleration_limit():
    f = TwistConditioner(LIMITS)
    outs = []
    for k in range(1, 60):  # teleop republishes; within 10x the limit: clamped, not rejected
        assert f.submit(0.01 * k, 0.35, -1.5) is None
        outs.append(f.ramp(0.01 * k, 0.01))
    dv = [b[0] - a[0] for a, b in itertools.pairwise(outs)]
    assert max(abs(x) for x in dv) <= LIMITS.max_linear_accel * 0.01 + 1e-12
    assert outs[-1] == pytest.approx((0.2, -1.0))


def test_deadman_ramps_to_zero():
    f = TwistConditioner(LIMITS)
    t = 0.0
    while t < 0.5:
        t += 0.01
        f.submit(t, 0.2, 0.0)
        f.ramp(t, 0.01)
    assert f.output[0] == pytest.approx(0.2)
    outs = []
    while t < 1.5:
        t += 0.01
        outs.append(f.ramp(t, 0.01)[0])
    assert outs[-1] == 0.0 and all(b <= a for a, b in itertools.pairwise(outs))
    assert min(b - a for a, b in itertools.pairwise(outs)) >= -LIMITS.max_linear_accel * 0.01 - 1e-12


def test_limits_must_be_positive():
    with pytest.raises(GaitError, match="timeout"):
        TwistLimits(0.1, 0.1, 0.1, 0.1, timeout=0.0)


def test_target_is_the_clamped_command_and_zero_after_the_deadman():
    f = TwistConditioner(LIMITS)
    assert f.target(0.0) == (0.0, 0.0)  # nothing commanded yet
    assert f.submit(1.0, 0.35, -0.5) is None
    assert f.target(1.0) == (LIMITS.max_linear, -0.5)
    assert f.submit(1.1, 1e3, 0.0) is not None  # rejected: the target stays
    assert f.target(1.1) == (LIMITS.max_linear, -0.5)
    assert f.target(1.0 + LIMITS.timeout + 0.01) == (0.0, 0.0)
    # The output ramps towards the target (the acceleration limit first).
    assert f.ramp(1.2, 0.01) == pytest.approx((LIMITS.max_linear_accel * 0.01, -LIMITS.max_angular_accel * 0.01))
