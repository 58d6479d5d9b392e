"""Each joint type refined on its own joints (snake_tools.twin.by_type) on problems whose optimum is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from snake_tools.twin.by_type import refine_by_type

T = np.linspace(0.0, 5.0, 200)
JOINT_TYPE = np.array(["a", "a", "b", "b"])   # the residual's joints
VAR_TYPE = np.array(["a", "a", "b", "b"])     # the variables' types: a gain (log) and an offset per type
TRUE = np.array([np.log(2.0), 0.3, np.log(0.5), -0.2])
BOUNDS = (np.array([-5.0, -3.0, -5.0, -3.0]), np.array([5.0, 3.0, 5.0, 3.0]))


def joint_angles(z: np.ndarray, rough: float) -> np.ndarray:
    """Samples x joints: each type's joints follow its own gain and offset; ``rough`` couples b's joints to a's gain."""
    q = np.empty((T.size, 4))
    for j, w in enumerate((1.0, 1.7)):
        q[:, j] = np.exp(z[0]) * np.sin(w * T) + z[1] * T
        q[:, 2 + j] = np.exp(z[2]) * np.cos(w * T) + z[3]
    # a rough, small coupling: b's joints move with a's gain in a saw tooth (what a friction set from the
    # load every physics step does to the other types' joints): a local minimum of theirs at every tooth
    teeth = np.exp(z[0]) * 50.0
    q[:, 2:] += rough * (teeth - np.floor(teeth))
    return q


def make_residuals(rough: float, calls: list[int]):
    target = joint_angles(TRUE, rough)

    def residuals(zs):
        calls.append(len(zs))
        return [(joint_angles(np.asarray(z), rough) - target).ravel() for z in zs]

    return residuals


def test_each_type_reaches_its_own_optimum_and_the_jacobian_is_one_batch() -> None:
    calls: list[int] = []
    start = TRUE + np.array([0.4, -0.2, -0.3, 0.25])
    out = refine_by_type(make_residuals(0.0, calls), start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 50)
    assert out == pytest.approx(TRUE, abs=1e-6)
    # one rollout per evaluation, a type's variables' columns in one batch
    assert set(calls) == {1, 2}


def test_a_type_holds_the_others_where_they_were() -> None:
    """Each type starts from the same point: a's result does not move b's start, nor b's a's."""
    start = TRUE + np.array([0.4, -0.2, -0.3, 0.25])
    both = refine_by_type(make_residuals(0.0, []), start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 50)
    only_b = start.copy()
    only_b[:2] = TRUE[:2]
    alone = refine_by_type(make_residuals(0.0, []), only_b, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 50)
    assert both[2:] == pytest.approx(alone[2:], abs=1e-6)


def test_roughness_on_the_other_types_joints_does_not_stop_a_type() -> None:
    """The whole fit, on the sum, stops at a tooth short of a's gain; a's own joints lead to it."""
    rough = 0.5
    start = TRUE + np.array([0.3, 0.0, 0.0, 0.0])
    residuals = make_residuals(rough, [])
    whole = least_squares(lambda z: residuals([z])[0], start, bounds=BOUNDS, method="trf", diff_step=1e-6)
    assert abs(whole.x[0] - TRUE[0]) > 0.05    # what the refinement over every type does here
    out = refine_by_type(residuals, start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 50)
    assert out[:2] == pytest.approx(TRUE[:2], abs=1e-6)
    # b's joints were refined with a where it started; from the types put together, b reaches its own too
    again = refine_by_type(residuals, out, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 50)
    assert again == pytest.approx(TRUE, abs=1e-6)
    total = [float(r @ r) for r in residuals([whole.x, again])]
    assert total[1] < total[0]


def test_a_type_is_run_again_from_where_it_stopped_while_a_run_lowers_its_cost() -> None:
    start = TRUE + np.array([0.4, -0.2, -0.3, 0.25])
    residuals = make_residuals(0.0, [])
    one = refine_by_type(residuals, start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 2, rounds=1)
    assert abs(one[0] - TRUE[0]) > 1e-3   # two evaluations do not reach it
    many = refine_by_type(residuals, start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 2, rounds=50, tol=1e-12)
    assert many == pytest.approx(TRUE, abs=1e-6)
    # a run that lowers the cost by less than tol is the last
    stopped = refine_by_type(residuals, start, VAR_TYPE, JOINT_TYPE, BOUNDS, np.ones(4), 1e-6, 2, rounds=50, tol=1e9)
    assert stopped == pytest.approx(one)
