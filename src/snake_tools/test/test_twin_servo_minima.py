"""The load-friction check of the lifted fit (snake_tools.twin.servo_minima), on a problem whose minima are known.

The problem is :class:`~snake_tools.twin.servo_problem.ServoProblem` itself (its refinement,
stopping rule, Jacobian, types' shares and mix), with its rollouts replaced by a residual
written down: two joint types, one joint each, each with a gain ``u`` and a ``load_friction``
``f``. Each type's cost has its least (zero) at the truth and a second minimum at 1.2 times
the truth's ``f`` that leaves a little more (the quartic below), the gain following ``f`` as a
compensating servo's does; a refinement started in the second minimum stays there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_tools.twin.servo_minima import scaled_load_frictions
from snake_tools.twin.servo_problem import ServoProblem

_TRUE_F = {"twist": 0.10, "lateral": 0.20}
_SECOND = 1.2            # the second minimum's load_friction, times the truth's
_TRUE_U = 2.0
_WALL, _FLOOR = 3.0e4, 5.0   # the quartic's weight, and what keeps the second minimum above the truth


def _type_residual(u: float, f: float, f0: float) -> np.ndarray:
    """Zero at (``_TRUE_U``, ``f0``); a second minimum near f = 1.2 f0, u following f (compensating)."""
    f2 = _SECOND * f0
    return np.array([_WALL * (f - f0) * (f - f2) / f0 ** 2,
                     _FLOOR * (f - f0) / f0,
                     10.0 * (u - _TRUE_U * f / f0)])


def _problem() -> ServoProblem:
    p = object.__new__(ServoProblem)
    p.names = [f"servo.{t}.{field}" for t in ("twist", "lateral") for field in ("kp", "load_friction")]
    p.fields = [n.rsplit(".", 1)[-1] for n in p.names]
    p.free = np.ones(4, dtype=bool)
    p.bounds = (np.array([0.1, 0.0, 0.1, 0.0]), np.array([10.0, 0.5, 10.0, 0.5]))
    p.x_scale = np.array([1.0, 0.05, 1.0, 0.05])
    p.type_of = np.array(["twist", "twist", "lateral", "lateral"])
    p.joint_type = np.array(["twist", "lateral"])
    p.evals = 0
    p.previous = math.inf
    p.unused_last = False
    p._cache = {}
    p._on = (None, np.zeros((3, 2)), np.ones((3, 2)))   # what is rolled out: three samples of two joints

    def residuals(zs: list[np.ndarray]) -> list[np.ndarray]:
        # row k: sample k of each joint, the joints in joint_type's order
        return [np.stack([_type_residual(z[0], z[1], _TRUE_F["twist"]),
                          _type_residual(z[2], z[3], _TRUE_F["lateral"])], axis=1).ravel() for z in zs]

    p.residuals = residuals  # type: ignore[method-assign]
    return p


def _stuck_point() -> np.ndarray:
    """Twist in its second minimum (f 1.2 times the truth's, its gain compensating); lateral at its truth."""
    f2 = _SECOND * _TRUE_F["twist"] * 1.005
    return np.array([_TRUE_U * _SECOND, f2, _TRUE_U, _TRUE_F["lateral"]])


def test_the_problem_has_the_second_minimum_it_is_built_for():
    p = _problem()
    sol = p.refine(_stuck_point())
    assert sol.x[1] == pytest.approx(_SECOND * _TRUE_F["twist"], rel=0.02)
    assert float(sol.fun @ sol.fun) > 0.5 * _FLOOR ** 2 * (_SECOND - 1) ** 2
    # the truth's own start converges to the truth: the second minimum is a second one
    truth = p.refine(np.array([_TRUE_U, _TRUE_F["twist"], _TRUE_U, _TRUE_F["lateral"]]))
    assert float(truth.fun @ truth.fun) == pytest.approx(0.0, abs=1e-9)


def test_a_type_stuck_with_its_load_friction_too_high_is_moved_to_the_truth_and_the_others_kept():
    p = _problem()
    sol = p.refine(_stuck_point())
    lines: list[str] = []
    out = scaled_load_frictions(p, sol, "load_friction", lines.append)
    assert out.x[1] == pytest.approx(_TRUE_F["twist"], rel=1e-3)
    assert out.x[0] == pytest.approx(_TRUE_U, rel=1e-3)
    assert out.x[3] == pytest.approx(_TRUE_F["lateral"], rel=1e-3)
    assert float(out.fun @ out.fun) < 1e-6 < float(sol.fun @ sol.fun)
    assert any("better for twist" in line for line in lines)
    assert not any("lateral" in line for line in lines)


def test_at_the_least_optimum_no_scaled_load_friction_replaces_it():
    p = _problem()
    sol = p.refine(np.array([_TRUE_U, _TRUE_F["twist"], _TRUE_U, _TRUE_F["lateral"]]))
    assert scaled_load_frictions(p, sol, "load_friction", None) is sol

