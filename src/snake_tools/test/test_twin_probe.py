"""Probing an optimum at its intervals' ends (snake_tools.twin.probe), on problems whose answer is known.

The profile path is checked against its definition, solved independently: with variable ``i``
held at a value, the other variables that minimize a linear least-squares cost (``numpy.linalg.lstsq``
on the other columns). The probe is checked to find a lower basin that sits on a path, to keep
the tolerance, and to find nothing on a cost that is the quadratic it assumes.
"""

from __future__ import annotations

import numpy as np
import pytest

from snake_tools.twin.probe import PROBE_WIDTH, interval_ends, lower_at_interval_ends

_ROWS, _VARS = 200, 4


def _problem(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A correlated linear least-squares problem: A, y, the optimum, each variable's white std."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(_ROWS, _VARS))
    a[:, 1] += 0.8 * a[:, 0]          # correlated columns: a path moves the other variables
    a[:, 3] -= 0.5 * a[:, 2]
    y = a @ np.array([1.0, -2.0, 0.5, 3.0]) + rng.normal(size=_ROWS)
    x_hat = np.linalg.lstsq(a, y, rcond=None)[0]
    std = np.sqrt(np.diag(np.linalg.inv(a.T @ a)))
    return a, y, x_hat, std


def _open() -> tuple[np.ndarray, np.ndarray]:
    return np.full(_VARS, -np.inf), np.full(_VARS, np.inf)


@pytest.mark.parametrize("x_scale", [np.ones(_VARS), np.array([1.0, 10.0, 0.1, 3.0])])
def test_each_end_is_the_least_cost_with_its_variable_held_there(x_scale):
    a, y, x_hat, std = _problem()
    ends = interval_ends(a, std, x_hat, x_scale, _open())
    assert ends.shape == (2 * _VARS, _VARS)
    for i in range(_VARS):
        others = [j for j in range(_VARS) if j != i]
        for k, sign in enumerate((-1.0, 1.0)):
            held = x_hat[i] + sign * PROBE_WIDTH * std[i]
            rest = np.linalg.lstsq(a[:, others], y - a[:, i] * held, rcond=None)[0]
            assert ends[2 * i + k, i] == pytest.approx(held)
            np.testing.assert_allclose(ends[2 * i + k, others], rest, rtol=1e-9, atol=1e-9)
            # the white cost rises by width^2 there, as the quadratic says
            r = a @ ends[2 * i + k] - y
            r_hat = a @ x_hat - y
            assert r @ r - r_hat @ r_hat == pytest.approx(PROBE_WIDTH ** 2, rel=1e-6)


def test_the_ends_stay_within_the_bounds():
    a, _, x_hat, std = _problem()
    lo, hi = x_hat - 0.5 * std, x_hat + 0.5 * std
    ends = interval_ends(a, std, x_hat, np.ones(_VARS), (lo, hi))
    assert (ends >= lo - 1e-12).all() and (ends <= hi + 1e-12).all()


def test_on_the_quadratic_it_assumes_no_end_is_lower():
    a, y, x_hat, std = _problem()

    def residuals(points):
        return [a @ p - y for p in points]

    fun = a @ x_hat - y
    assert lower_at_interval_ends(residuals, x_hat, fun, a, std, np.ones(_VARS), _open(), tol=0.0) is None


def test_a_lower_basin_on_a_path_is_found_and_the_tolerance_kept():
    # The quadratic cost, but a tenth of it within a small ball around the raised end of
    # variable 2's path: a basin the optimum's Jacobian does not see.
    a, y, x_hat, std = _problem(1)
    basin = interval_ends(a, std, x_hat, np.ones(_VARS), _open())[5]
    calls = []

    def residuals(points):
        calls.append(len(points))
        return [(a @ p - y) * (np.sqrt(0.1) if np.linalg.norm(p - basin) < 1e-3 else 1.0) for p in points]

    fun = a @ x_hat - y
    cost_hat = float(fun @ fun)
    found = lower_at_interval_ends(residuals, x_hat, fun, a, std, np.ones(_VARS), _open(), tol=1.0)
    assert found is not None
    point, cost = found
    np.testing.assert_allclose(point, basin)
    assert cost == pytest.approx(0.1 * (cost_hat + PROBE_WIDTH ** 2), rel=1e-6)
    assert calls == [2 * _VARS]             # one batch
    gain = cost_hat - cost
    assert lower_at_interval_ends(residuals, x_hat, fun, a, std, np.ones(_VARS), _open(), tol=gain + 1e-6) is None
