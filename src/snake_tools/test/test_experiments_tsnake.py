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
    """003 Fig. 6's distortion without resetting comes from integrating Eq. 11 with a fixed rule."""
    with_reset = run_task(phase_reset.TurningCircleTask(True, 40.0, "flat"))
    fixed_without = run_task(phase_reset.TurningCircleTask(False, 40.0, "flat", integration="fixed"))
    exact_without = run_task(phase_reset.TurningCircleTask(False, 40.0, "flat"))
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


def test_benchmark_trial_on_flat_ground_completes():
    result = run_task(tsnake_benchmark.BenchmarkTask("rolling_vector", "flat", 0, timeout=60.0))
    assert not result["stuck"]
    assert 5.0 < result["turn_s"] < 60.0 and 10.0 < result["translate_s"] < 60.0
