"""Energetics against hand computations: positive power, energy, speed, turn rate, cost of transport."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snake_core.analysis.energetics import (
    absolute_power,
    cost_of_transport,
    displacement,
    energy,
    mean_speed,
    positive_power,
    run_cost_of_transport,
    turn_rate,
)


def test_positive_power_drops_braking_and_absolute_power_counts_it() -> None:
    tau = [[2.0, -1.0, 0.5], [1.0, 1.0, 1.0]]
    qdot = [[3.0, 4.0, -2.0], [0.0, 2.0, -1.0]]
    # by hand: row 1 products 6, -4, -1 -> positive 6, absolute 11; row 2: 0, 2, -1 -> 2, 3
    assert positive_power(tau, qdot).tolist() == [6.0, 2.0]
    assert absolute_power(tau, qdot).tolist() == [11.0, 3.0]


def test_mismatched_shapes_are_an_error() -> None:
    with pytest.raises(ValueError, match="same shape"):
        positive_power([[1.0, 2.0]], [[1.0]])


def test_energy_of_constant_and_linear_power() -> None:
    t = np.linspace(0.0, 2.0, 5)
    assert energy(t, np.full(5, 3.0)) == pytest.approx(6.0)  # 3 W for 2 s
    assert energy(t, 4.0 * t) == pytest.approx(8.0)  # integral of 4t over [0, 2]


def test_speed_and_turn_rate_of_a_hand_made_run() -> None:
    t = np.array([0.0, 1.0, 2.0, 4.0])
    xy = np.array([[1.0, 1.0], [5.0, 0.0], [2.0, 2.0], [4.0, 5.0]])  # net (3, 4): 5 m
    assert displacement(xy) == pytest.approx(5.0)
    assert mean_speed(t, xy) == pytest.approx(1.25)
    yaw = np.array([3.0, -3.0, -2.5, -2.0])  # crosses +-pi: unwrapped end = -2 + 2 pi
    assert turn_rate(t, yaw) == pytest.approx((-2.0 + 2 * math.pi - 3.0) / 4.0)


def test_cost_of_transport_by_hand() -> None:
    assert cost_of_transport(98.0665, 2.0, 5.0) == pytest.approx(1.0)  # E / (m g d) = 98.0665 / (2 * 9.80665 * 5)
    assert cost_of_transport(1.0, 2.0, 0.0) == math.inf
    with pytest.raises(ValueError, match="mass"):
        cost_of_transport(1.0, 0.0, 1.0)
    t = np.array([0.0, 1.0, 2.0])
    tau = np.array([[2.0, -1.0], [2.0, -1.0], [2.0, -1.0]])
    qdot = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])  # 2 W positive (the -1 W braking dropped) for 2 s
    xy = np.array([[0.0, 0.0], [0.5, 0.0], [1.0, 0.0]])
    assert run_cost_of_transport(t, tau, qdot, xy, 1.0) == pytest.approx(4.0 / 9.80665)
