"""003's experiments in the MuJoCo twin: the gait really moves the physical model as the paper says.

Shortened runs of ``snake experiment ...``; each checks a property of the motion, not
just that the command ran.
"""

from __future__ import annotations

import pytest

from snake_tools.experiment import calibrate, motion_modes, phase_reset, tsnake_benchmark
from snake_tools.experiment.task import run_task


@pytest.mark.parametrize("mode", list(motion_modes.MODES))
def test_each_motion_mode_produces_its_motion(mode):
    result = run_task(motion_modes.MotionModeTask(mode, 15.0))
    assert result["matches_mode"], {k: v for k, v in result.items() if k != "_trace"}


def test_turning_circle_is_lost_without_resetting_only_with_the_fixed_quadrature():
    """003 Fig. 6's distortion without resetting comes from integrating Eq. 11 with a fixed rule.

    80 s: one whole turn (6.2-6.4 rad of heading). In 40 s, under half a turn with the servos' factory
    gain, the fixed rule's error had not yet grown past the turn's own wobble (circle residual 0.012 m
    against 0.024 m with resetting; 0.076 m against 0.025 m after the whole turn).
    """
    with_reset = run_task(phase_reset.TurningCircleTask(True, 80.0, "flat"))
    fixed_without = run_task(phase_reset.TurningCircleTask(False, 80.0, "flat", integration="fixed"))
    exact_without = run_task(phase_reset.TurningCircleTask(False, 80.0, "flat"))
    assert with_reset["circle_residual_m"] < 0.5 * fixed_without["circle_residual_m"]
    assert with_reset["centre_drift_m"] < 0.5 * fixed_without["centre_drift_m"]
    # with exact integration the run without resetting keeps its circle as well
    assert exact_without["circle_residual_m"] < 0.5 * fixed_without["circle_residual_m"]
    assert exact_without["centre_drift_m"] < 0.5 * fixed_without["centre_drift_m"]
    assert exact_without["circle_residual_m"] < 2 * with_reset["circle_residual_m"] + 0.01


def test_eq10_signs_hold_in_the_twin():
    """Positive omega_h + omega_t drives forward (head = left wheel); omega_t < omega_h turns clockwise."""
    for command, forward, turning in (((2.0, 2.0, 1.0), True, False), ((2.0, -2.0, 0.0), False, True)):
        v, w = run_task(calibrate.HoldTask("rolling", 12.0, command))
        if forward:
            assert v > 0.05 and abs(w) < 0.2 * v / 0.1
        if turning:
            assert w < -0.1 and abs(v) < 0.03


@pytest.mark.xfail(strict=True, reason=(
    "the twin's servos at the robot YAML's factory Position P Gain 800 (kp 18.9 N m/rad) roll the translation "
    "after the in-place turn at 0.03-0.07 m/s instead of 0.098: 3 m take over 60 s (repeats 0 and 2 of 3; "
    "repeat 1 finishes in 33 s). At P 1600 (kp 37.8) all three finish in 30-32 s, as with the kp 41 the twin "
    "assumed before: the T-Snake's registers need the tuned P gain its gait was developed with"))
def test_benchmark_trial_on_flat_ground_completes():
    result = run_task(tsnake_benchmark.BenchmarkTask("rolling_vector", "flat", 0, timeout=60.0))
    assert not result["stuck"]
    assert 5.0 < result["turn_s"] < 60.0 and 10.0 < result["translate_s"] < 60.0
