"""The one angle wrap of the core: interval (-pi, pi], its end points, exactness."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.angles import wrap_to_pi


@pytest.mark.parametrize("angle", [math.pi, -math.pi, 3.0 * math.pi, -3.0 * math.pi, 5.0 * math.pi])
def test_both_ends_map_to_plus_pi(angle):
    # Odd multiples of the float pi: the two candidates +pi and -pi are equally far; +pi is the one kept.
    assert wrap_to_pi(angle) == math.pi


def test_just_inside_the_lower_end_stays():
    inside = math.nextafter(-math.pi, 0.0)
    assert wrap_to_pi(inside) == inside
    assert wrap_to_pi(math.nextafter(math.pi, 0.0)) == math.nextafter(math.pi, 0.0)


@pytest.mark.parametrize("angle", [0.0, 1e-12, -0.1, 0.1, 1.0, -3.0, 3.1])
def test_angles_in_the_interval_come_back_unchanged(angle):
    assert wrap_to_pi(angle) == angle


def test_wrap_matches_the_complex_argument_and_differs_by_whole_turns():
    rng = np.random.default_rng(12)
    angles = np.concatenate([rng.uniform(-50.0, 50.0, 2000), rng.uniform(-1e4, 1e4, 200)])
    wrapped = np.array([wrap_to_pi(float(a)) for a in angles])
    assert ((wrapped > -math.pi) & (wrapped <= math.pi)).all()
    # Independent: the argument of exp(i a), numpy's principal value in (-pi, pi].
    np.testing.assert_allclose(wrapped, np.angle(np.exp(1j * angles)), atol=1e-9)
    turns = (angles - wrapped) / (2.0 * math.pi)
    np.testing.assert_allclose(turns, np.round(turns), atol=1e-9)
