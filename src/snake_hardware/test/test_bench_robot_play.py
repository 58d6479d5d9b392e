"""The bench robot's gear play: a dead zone on each torque reversal that delays the motor's torque and loses none of it.

The oracle is Newton's second law for rotor and joint together: with the joint held, every
N m s the motor makes reaches the joint, the part made while the rotor crossed the play at the
impact on the far flank (the rotor's momentum relative to the joint), none before it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from snake_hardware.dynamixel import control_table as ct
from snake_hardware.emulator.firmware import Firmware, MotorParams, Registers

DT = 0.004
BACKLASH = math.radians(0.4)   # the bench robot's widest drawn play
ROTOR_INERTIA = 0.008          # kg m^2, its lightest drawn rotor (the fastest crossing)


def _firmware(goal_ticks: float, backlash: float = BACKLASH) -> Firmware:
    """One XM430-like servo with a play ``backlash``, torque on, P gain 800/128 PWM per tick, goal ``goal_ticks``."""
    one = np.ones(1)
    motors = MotorParams(stall_torque=4.1 * one, no_load_speed=4.8 * one, torque_constant=1.6 * one,
                         gain_scale=one, backlash=backlash * one, rotor_inertia=ROTOR_INERTIA * one,
                         direction=one, zero=0.0 * one)
    fw = Firmware(motors, DT)
    fw.prepare(Registers(active=one, mode=ct.MODE_POSITION * one, goal=goal_ticks * one, goal_velocity=0.0 * one,
                         kpp=800.0 / 128.0 * one, kpi=0.0 * one, kpd=0.0 * one, kvp=0.0 * one,
                         profile_velocity=math.inf * one, profile_acceleration=math.inf * one,
                         pwm_limit=885.0 * one, current_limit=6.5 * one))
    return fw


def _held_run(fw: Firmware, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The joint held at tick 0, at rest: the motor's torque and the torque passed to the joint, per step."""
    made, passed = [], []
    for _ in range(steps):
        passed.append(float(fw.step(np.zeros(1), np.zeros(1))[0]))
        made.append(float(fw.motor_torque[0]))
    return np.array(made), np.array(passed)


def test_the_play_delays_the_motors_torque_and_loses_none_of_its_impulse() -> None:
    fw = _firmware(goal_ticks=40.0)
    fw.gap[:] = -BACKLASH / 2.0          # the rotor rests on the flank away from the goal
    made, passed = _held_run(fw, 20)
    assert np.all(made > 0.5)            # the motor pushes towards the goal from the first step
    crossing = int(np.argmax(passed != 0.0))
    assert crossing >= 1 and np.all(passed[:crossing] == 0.0)   # a dead zone: nothing passes while the rotor crosses
    assert fw.gap[0] == BACKLASH / 2.0   # ... then it rests on the far flank
    # Newton: the joint received all the motor's impulse, the crossing's at the impact.
    assert math.isclose(passed.sum() * DT, made.sum() * DT, rel_tol=1e-12)
    assert passed[crossing] > made[crossing]   # the impact carries the rotor's momentum
    np.testing.assert_array_equal(passed[crossing + 1:], made[crossing + 1:])   # engaged: the torque itself


def test_a_reversal_crosses_the_play_back_and_again_keeps_the_impulse() -> None:
    fw = _firmware(goal_ticks=40.0)
    fw.gap[:] = -BACKLASH / 2.0
    made_out, passed_out = _held_run(fw, 10)
    fw.prepare(replace(fw.reg, goal=np.array([-40.0])))   # the goal reverses
    made_back, passed_back = _held_run(fw, 10)
    assert passed_back[0] == 0.0 and made_back[0] < 0.0   # the reversal opens the play again
    assert fw.gap[0] == -BACKLASH / 2.0
    assert math.isclose(passed_back.sum(), made_back.sum(), rel_tol=1e-12)
    assert math.isclose(passed_out.sum(), made_out.sum(), rel_tol=1e-12)


def test_without_play_every_torque_passes_at_once() -> None:
    fw = _firmware(goal_ticks=40.0, backlash=0.0)
    made, passed = _held_run(fw, 5)
    np.testing.assert_array_equal(passed, made)
