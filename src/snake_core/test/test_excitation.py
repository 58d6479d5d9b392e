"""The identification motion stays inside the shipped robot's limits and velocities, from the present pose."""

from __future__ import annotations

import numpy as np
import pytest

from snake_core.excitation import PRESETS, ExcitationError, JointBounds, plan_excitation
from snake_core.robot import load_robot

_DT_S = 1e-3  # s, dense sampling for the finite-difference check


def _bounds(robot_name: str = "tsnake") -> tuple[list[str], list[JointBounds]]:
    robot = load_robot(robot_name)
    return ([j.name for j in robot.joints],
            [JointBounds(lower=j.lower, upper=j.upper, velocity=j.velocity) for j in robot.joints])


@pytest.mark.parametrize("signal", ["multisine", "chirp"])
@pytest.mark.parametrize("variant", ["lifted", "ground"])
def test_inside_limits_and_velocities_from_present_pose(signal: str, variant: str) -> None:
    _, bounds = _bounds()
    rng = np.random.default_rng(3)
    # a present pose anywhere in the range, some joints close to a limit
    q0 = [float(np.clip(rng.uniform(-1.5, 1.5), b.lower, b.upper)) for b in bounds]
    plan = plan_excitation(q0, bounds, signal=signal, variant=variant, duration=30.0, seed=1)
    t = np.arange(0.0, plan.duration + _DT_S / 2, _DT_S)
    q = plan.positions(t)
    np.testing.assert_array_equal(q[0], q0)  # starts at the present pose
    np.testing.assert_allclose(q[-1], q0, atol=1e-12)  # and ends there
    lower = np.array([b.lower for b in bounds])
    upper = np.array([b.upper for b in bounds])
    assert np.all(q >= lower) and np.all(q <= upper)
    speed = np.abs(np.diff(q, axis=0)) / _DT_S  # independent of the plan's analytic bound
    vmax = np.array([b.velocity for b in bounds])
    assert np.all(speed.max(axis=0) <= 0.5 * vmax + 1e-6)
    assert np.all(speed.max(axis=0) <= plan.velocity_bound() + 1e-6)
    # it moves: every joint with room to move gets a visible amplitude
    excursion = np.abs(q - np.array(q0)).max(axis=0)
    room = np.minimum(np.array(q0) - lower, upper - np.array(q0))
    moving = room > 0.2
    assert np.all(excursion[moving] > 0.02)


def test_joint_at_its_limit_does_not_move_past_it() -> None:
    _, bounds = _bounds()
    q0 = [b.upper if np.isfinite(b.upper) else 0.0 for b in bounds]
    plan = plan_excitation(q0, bounds, duration=10.0)
    limited = [k for k, b in enumerate(bounds) if np.isfinite(b.upper)]
    assert limited and np.all(plan.amplitude[limited] == 0.0)
    q = plan.positions(np.linspace(0.0, 10.0, 2001))
    assert np.all(q[:, limited] <= np.array([bounds[k].upper for k in limited]))


def test_multisine_covers_the_band_per_variant() -> None:
    _, bounds = _bounds()
    plan = plan_excitation([0.0] * len(bounds), bounds, signal="multisine", variant="lifted", duration=60.0)
    assert plan.frequencies.min() == pytest.approx(PRESETS["lifted"].f_min)
    assert plan.frequencies.max() == pytest.approx(PRESETS["lifted"].f_max)
    # joints are not excited in lock-step (different phases)
    q = plan.positions(np.linspace(10.0, 50.0, 4001))
    corr = np.corrcoef(q.T)
    assert np.all(np.abs(corr[np.triu_indices_from(corr, 1)]) < 0.9)


@pytest.mark.parametrize(("kwargs", "flag"), [
    ({"duration": 1.0}, "--duration"), ({"signal": "square"}, "--signal"), ({"variant": "hanging"}, "--variant"),
    ({"amplitude": -0.1}, "--amplitude"), ({"q0": "outside"}, "present pose")])
def test_bad_requests_name_the_flag(kwargs: dict[str, object], flag: str) -> None:
    _, bounds = _bounds()
    q0 = [0.0] * len(bounds)
    if kwargs.pop("q0", None):
        q0[next(k for k, b in enumerate(bounds) if np.isfinite(b.upper))] = 3.0
    with pytest.raises(ExcitationError, match=flag):
        plan_excitation(q0, bounds, **kwargs)  # type: ignore[arg-type]
