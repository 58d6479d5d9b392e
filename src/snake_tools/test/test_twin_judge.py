"""The verdict on one fitted parameter (:func:`snake_tools.twin.uncertainty.judge`), worked by hand."""

from __future__ import annotations

import math

import pytest

from snake_tools.twin.uncertainty import FRICTION_FLOOR, IDENTIFIABLE_REL_STD, SEGMENT_Z, judge

_STABLE = (True, (0, 0.3))
_STEP = 0.002
_INSIDE = (0.0, -10.0, 10.0)   # a fitted variable in the middle of its search range


def test_a_log_parameter_has_a_relative_spread_and_an_interval_symmetric_in_log() -> None:
    j = judge("kp", 20.0, 0.1, log=True, step_s=_STEP, physical=(0.0, math.inf), search=_INSIDE, stability=_STABLE)
    assert j.rel == 0.1 and j.identified
    assert j.interval == pytest.approx((20.0 * math.exp(-0.196), 20.0 * math.exp(0.196)))
    assert j.reason == f"spread 0.1 (relative std) within {IDENTIFIABLE_REL_STD:g}"


def test_a_latency_is_judged_in_physics_steps_and_its_interval_in_seconds() -> None:
    j = judge("latency_s", 0.02, 1.5, log=False, step_s=_STEP, physical=(0.0, 0.2), search=_INSIDE,
              stability=_STABLE)
    assert j.rel == 1.5 and not j.identified and "physics steps std" in j.reason
    assert j.interval == pytest.approx((0.02 - 1.96 * 1.5 * _STEP, 0.02 + 1.96 * 1.5 * _STEP))


def test_a_friction_near_zero_is_judged_on_the_floor_and_its_interval_clipped_to_the_physical_range() -> None:
    j = judge("frictionloss", 0.001, 0.0007, log=False, step_s=_STEP, physical=(0.0, 1.0), search=_INSIDE,
              stability=_STABLE)
    assert j.rel == pytest.approx(0.0007 / FRICTION_FLOOR) and j.identified   # 0.7 of itself, 0.14 of the floor
    assert j.interval == pytest.approx((0.0, 0.001 + 1.96 * 0.0007))


def test_what_keeps_a_parameter_from_being_identified_is_named_in_order() -> None:
    common = {"log": True, "step_s": _STEP, "physical": (0.0, math.inf)}
    unbounded = judge("kp", 20.0, math.inf, search=_INSIDE, stability=_STABLE, **common)
    assert not unbounded.identified and unbounded.reason.startswith("not excited")
    assert unbounded.interval == (0.0, math.inf)
    bound = judge("kp", 20.0, 0.01, search=(9.995, -10.0, 10.0), stability=_STABLE, **common)
    assert not bound.identified and bound.reason.startswith("on its physical range's bound")
    at_zero = judge("frictionloss", 0.0, 0.0001, log=False, step_s=_STEP, physical=(0.0, 1.0),
                    search=(0.0, 0.0, 1.0), stability=_STABLE)   # 0 is a friction loss, not a bound
    assert at_zero.identified and not at_zero.reason.startswith("on its")
    unstable = judge("kp", 20.0, 0.01, search=_INSIDE, stability=(False, (2, -3.1)), **common)
    assert not unstable.identified
    assert unstable.reason == (f"not stable across held-out segments: segment 3 of 4 puts it -3.1 std from the fit "
                               f"(more than {SEGMENT_Z:g})")


def test_a_log_spread_beyond_the_range_of_exp_is_an_interval_without_an_upper_end() -> None:
    # A fit far from its recording (a bench run recorded on an overloaded host: 53 times the noise
    # floor) left a log spread of hundreds: exp(1.96 std) overflows a float.
    j = judge("kp", 20.0, 400.0, log=True, step_s=_STEP, physical=(0.1, 1000.0), search=_INSIDE, stability=_STABLE)
    assert j.interval == (0.1, math.inf) and not j.identified and j.rel == 400.0
    assert j.reason == f"spread 400 (relative std) above {IDENTIFIABLE_REL_STD:g}"
