"""The identification's 95 % intervals: spreads that hold for correlated errors, counted coverage, robot-like sensing.

The spreads are checked against an independent oracle: the empirical spread of least-squares
estimates over many draws of a known linear problem with errors correlated in time (an AR(1)
process, as an angle rounded to the same tick over slow samples gives), which the white
covariance underestimates and the correlated one (:func:`correlated_covariance`) holds. The
coverage count is checked against a case counted by hand; the robot-like sensing of a recorded
rosbag2 bag against its documentation (:data:`snake_tools.twin.recording.ROBOT_SENSING`).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from snake_core.control import CONTROL_PERIOD_S
from snake_core.robot import load_robot
from snake_core.twin_params import MAX_LOAD_FRICTION, TwinParams
from snake_tools.bag.series import read_series
from snake_tools.cli import build_parser, main
from snake_tools.twin.coverage import HIDDEN_RANGES, CaseResult, coverage_figures, coverage_table, draw_hidden
from snake_tools.twin.data import Recording
from snake_tools.twin.recording import ROBOT_SENSING, record_twin_run
from snake_tools.twin.replay import _joint_matrix
from snake_tools.twin.rollout import LiftedRollout
from snake_tools.twin.structure import STRUCTURES
from snake_tools.twin.uncertainty import (
    SEGMENT_Z,
    correlated_covariance,
    grid_offsets,
    noise_covariance,
    parameter_std,
    quantization_std,
    segment_stability,
    time_base_std_steps,
)

_SAMPLES, _JOINTS, _VARS = 1000, 3, 2


def _linear_problem(rng: np.random.Generator) -> np.ndarray:
    """A smooth Jacobian (samples x joints, variables): slow sines, as a servo's sensitivities are."""
    t = np.linspace(0.0, 20.0, _SAMPLES)
    cols = [np.sin(2 * np.pi * f * t + p)[:, None] * rng.uniform(0.5, 1.5, _JOINTS)
            for f, p in ((0.13, 0.3), (0.31, 1.1))]
    return np.stack([c.ravel() for c in cols], axis=1)


def _ar1(rng: np.random.Generator, rho: float, size: tuple[int, int]) -> np.ndarray:
    """Errors of unit variance, correlated in time as AR(1) with coefficient ``rho`` (samples, joints)."""
    e = np.empty(size)
    e[0] = rng.normal(size=size[1])
    innov = rng.normal(size=size) * math.sqrt(1 - rho ** 2)
    for k in range(1, size[0]):
        e[k] = rho * e[k - 1] + innov[k]
    return e


def test_correlated_errors_widen_the_spread_to_the_estimates_actual_spread():
    rng = np.random.default_rng(0)
    jac = _linear_problem(rng)
    x_scale = np.ones(_VARS)
    rho, lags = 0.9, 50
    estimates, white, correlated = [], [], []
    for _ in range(200):
        r = _ar1(rng, rho, (_SAMPLES, _JOINTS)).ravel()
        x, *_ = np.linalg.lstsq(jac, r, rcond=None)   # the least-squares estimate (truth 0)
        res = r - jac @ x                              # residual at the optimum
        estimates.append(x)
        white.append(noise_covariance(jac, res, x_scale))
        correlated.append(correlated_covariance(jac, res, x_scale, _SAMPLES, lags))
    actual = np.std(estimates, axis=0)
    # Independent errors of this size would give sqrt((1 - rho) / (1 + rho)) = 0.23 of the actual spread.
    assert np.all(np.median(white, axis=0) < 0.4 * actual)
    assert np.all(np.abs(np.median(correlated, axis=0) / actual - 1.0) < 0.3)
    # Intervals of +-1.96 of the spread: the white ones miss most of the time, the correlated ones cover.
    inside = np.abs(np.array(estimates)) <= 1.96 * np.array(correlated)
    assert inside.mean() > 0.85
    assert (np.abs(np.array(estimates)) <= 1.96 * np.array(white)).mean() < 0.6


def test_white_errors_keep_the_white_spread():
    rng = np.random.default_rng(1)
    jac = _linear_problem(rng)
    r = rng.normal(size=_SAMPLES * _JOINTS)
    res = r - jac @ np.linalg.lstsq(jac, r, rcond=None)[0]
    white = noise_covariance(jac, res, np.ones(_VARS))
    assert np.allclose(correlated_covariance(jac, res, np.ones(_VARS), _SAMPLES, 50), white, rtol=0.5)
    # The spread never falls below the noise model's: a residual far below sigma does not make a parameter certain.
    assert np.array_equal(parameter_std(jac, 1e-3 * res, np.ones(_VARS), _SAMPLES, 50),
                          noise_covariance(jac, 1e-3 * res, np.ones(_VARS)))


def test_a_value_one_segment_contradicts_is_not_stable():
    rng = np.random.default_rng(2)
    jac = _linear_problem(rng)
    r = 0.3 * rng.normal(size=_SAMPLES * _JOINTS)
    res = r - jac @ np.linalg.lstsq(jac, r, rcond=None)[0]
    assert segment_stability(jac, res, np.ones(_VARS), _SAMPLES, 10).stable.all()
    # The last quarter of the recording pulls the first variable 0.5 away: that segment's own optimum differs.
    shifted = r.reshape(_SAMPLES, _JOINTS).copy()
    shifted[3 * _SAMPLES // 4:] += 0.5 * jac[:, 0].reshape(_SAMPLES, _JOINTS)[3 * _SAMPLES // 4:]
    flat = shifted.ravel()
    res = flat - jac @ np.linalg.lstsq(jac, flat, rcond=None)[0]
    stability = segment_stability(jac, res, np.ones(_VARS), _SAMPLES, 10)
    assert not stability.stable[0]
    segment, z = stability.worst(0)
    assert segment == 3 and abs(z) > SEGMENT_Z


def test_the_spread_from_rounding_to_ticks_is_the_estimates_actual_spread_over_grid_alignments():
    rng = np.random.default_rng(3)
    jac = _linear_problem(rng)
    theta, res = np.array([0.8, -0.5]), 0.05
    errors, predicted = [], []
    for _ in range(100):
        shift = rng.uniform(0.0, res, _JOINTS)             # where the true motion lies on the tick grid
        q = (jac @ theta).reshape(_SAMPLES, _JOINTS) + shift
        y = np.round(q / res) * res                           # the encoder's reading (grid at 0)
        assert np.allclose(grid_offsets(y, res), 0.0, atol=1e-9)
        est = np.linalg.lstsq(jac, (y - shift).ravel(), rcond=None)[0]
        errors.append(est - theta)
        q_fit = (jac @ est).reshape(_SAMPLES, _JOINTS) + shift
        predicted.append(quantization_std(jac, q_fit, np.ones_like(q_fit), res, np.zeros(_JOINTS), np.ones(_VARS)))
    actual = np.sqrt(np.mean(np.square(errors), axis=0))
    assert np.all(np.abs(np.median(predicted, axis=0) / actual - 1.0) < 0.35)
    assert grid_offsets(np.array([[0.1], [0.1 + 2 * res + 1e-4]]), res) is None   # not on a grid


def test_a_latency_is_no_surer_than_the_stamps_time_base():
    # Stamps +-1.5 ms uniform (std 0.87 ms) against the 4 ms physics step: 0.22 steps; exact stamps: none.
    assert time_base_std_steps(0.0015 / math.sqrt(3), 0.004) == pytest.approx(0.2165, rel=1e-3)
    assert time_base_std_steps(0.0, 0.004) == 0.0


def test_coverage_is_counted_per_parameter_as_by_hand():
    def case(kv: tuple[float, float, bool], mu: tuple[float, float, bool]) -> list[CaseResult]:
        return [CaseResult("servo.twist.kv", 0.5, 0.5, kv[0], kv[1], kv[2]),
                CaseResult("contact.ground_friction", 0.8, 0.8, mu[0], mu[1], mu[2])]

    cases = [case((0.4, 0.6, True), (0.7, 0.9, True)),        # both hold the truth
             case((0.51, 0.6, True), (0.8, math.inf, False)),  # kv misses; mu holds (its bound included)
             case((0.45, 0.5, False), (0.1, 0.79, True)),      # kv holds (bound), not flagged; mu misses
             case((0.3, 0.49, True), (0.5, 1.0, True))]        # kv misses; mu holds
    table = coverage_table(cases)
    kv, mu = table["servo.twist.kv"], table["contact.ground_friction"]
    assert (kv["cases"], kv["covered"], kv["identified"], kv["identified_covered"]) == (4, 2, 3, 1)
    assert kv["coverage"] == 0.5 and kv["identified_fraction"] == 0.75
    assert kv["coverage_identified"] == pytest.approx(1 / 3)
    assert kv["median_width"] == pytest.approx(np.median([0.2, 0.09, 0.05, 0.19]))
    assert (mu["covered"], mu["identified"], mu["identified_covered"]) == (3, 3, 2)
    assert mu["coverage_identified"] == pytest.approx(2 / 3)
    assert mu["median_width"] == pytest.approx(np.median([0.2, math.inf, 0.69, 0.5]))
    only_unflagged = coverage_table([[CaseResult("x", 1.0, 1.0, 0.0, 2.0, False)]])["x"]
    assert only_unflagged["coverage_identified"] is None and only_unflagged["coverage"] == 1.0


def test_hidden_physics_are_drawn_within_the_documented_ranges_from_the_seed():
    robot = load_robot("tsnake")
    a = draw_hidden(robot, np.random.default_rng([0, 3]))
    assert a == draw_hidden(robot, np.random.default_rng([0, 3]))
    assert a != draw_hidden(robot, np.random.default_rng([0, 4]))
    assert len(a) == 3 * 5 + 1
    for name, value in a.items():
        lo, hi, _ = HIDDEN_RANGES[name.rsplit(".", 1)[-1]]
        assert lo <= value <= hi, name


def test_the_backlash_structure_draws_a_play_per_type_and_keeps_the_seeds_other_values():
    robot = load_robot("tsnake")
    plain = draw_hidden(robot, np.random.default_rng([0, 3]))
    played = draw_hidden(robot, np.random.default_rng([0, 3]), "backlash")
    plays = {n: v for n, v in played.items() if n.endswith("backlash_rad")}
    assert len(plays) == 3 and {n: v for n, v in played.items() if n not in plays} == plain
    lo, hi, _ = HIDDEN_RANGES["backlash_rad"]
    assert all(lo <= v <= hi for v in plays.values())


def test_the_load_friction_structure_draws_one_per_type_and_keeps_the_seeds_other_values():
    robot = load_robot("tsnake")
    plain = draw_hidden(robot, np.random.default_rng([0, 3]))
    loaded = draw_hidden(robot, np.random.default_rng([0, 3]), "load_friction")
    frictions = {n: v for n, v in loaded.items() if n.endswith("load_friction")}
    assert set(frictions) == {f"servo.{t}.load_friction" for t in ("dorsal", "twist", "lateral")}
    assert {n: v for n, v in loaded.items() if n not in frictions} == plain
    lo, hi, _ = HIDDEN_RANGES["load_friction"]
    assert 0.0 < lo < hi <= MAX_LOAD_FRICTION
    assert all(lo <= v <= hi for v in frictions.values())
    assert len(set(frictions.values())) == 3      # each type its own
    assert draw_hidden(robot, np.random.default_rng([0, 4]), "load_friction") != loaded


def test_robot_sensing_quantizes_jitters_and_drops_as_documented(tmp_path):
    robot = load_robot("tsnake")
    duration = 10.0
    exact = read_series(record_twin_run(tmp_path / "exact", robot, duration, world=None, lifted=True), progress=False)
    sensed = read_series(record_twin_run(tmp_path / "sensed", robot, duration, world=None, lifted=True,
                                         sensing=ROBOT_SENSING), progress=False)
    periods = round(duration / CONTROL_PERIOD_S) + 1
    t_exact = exact.stamped_times("/joint_states")
    assert len(t_exact) == periods
    t = sensed.stamped_times("/joint_states")
    dropped = periods - len(t)
    # 3 % of 501 messages: 15 expected, binomial standard deviation 3.8.
    assert 3 <= dropped <= 30
    # Each kept stamp within +-1.5 ms of its period's time (uniform: std 0.87 ms).
    k = np.round((t - t_exact[0]) / CONTROL_PERIOD_S).astype(int)
    offset = t - t_exact[k]
    assert np.all(np.abs(offset) <= ROBOT_SENSING.stamp_jitter_s + 1e-9)
    assert np.std(offset) == pytest.approx(ROBOT_SENSING.stamp_jitter_s / math.sqrt(3), rel=0.15)
    # The angles are the exact ones at that period, rounded to 4096 ticks per turn.
    tick = 2 * math.pi / ROBOT_SENSING.ticks_per_turn
    names = robot.joint_names
    q_sensed = _joint_matrix(sensed.series["/joint_states"].rows, names, "/joint_states", tmp_path)
    q_exact = _joint_matrix(exact.series["/joint_states"].rows, names, "/joint_states", tmp_path)[k]
    assert np.allclose(q_sensed / tick, np.round(q_sensed / tick), atol=1e-9)
    assert np.allclose(q_sensed, np.round(q_exact / tick) * tick, atol=1e-12)


def _recording(t_state: np.ndarray, joints: int, periods: int = 100) -> Recording:
    """Commands every control period from 0 (two sines per joint), joint states at ``t_state`` (lifted, no pose)."""
    t_cmd = np.arange(periods) * CONTROL_PERIOD_S
    phase = np.arange(joints)[None, :]
    q_cmd = 0.3 * np.sin(2 * math.pi * 0.7 * t_cmd[:, None] + phase) + 0.1 * np.sin(2 * math.pi * 2.3 * t_cmd[:, None])
    q_state = np.zeros((len(t_state), joints))
    return Recording(Path("drawn"), t_cmd, q_cmd, t_state, q_state, np.zeros(0), np.zeros((0, 2)), "none")


def test_the_rollouts_grid_is_the_commands_whatever_the_first_joint_states_stamp():
    # Stamps of a bus read jittered within half a physics step (2 ms): the rollout reads every sample at its
    # true physics step, as with exact stamps, also when the first stamp is a joint state's, 1.2 ms early.
    # Counted from that stamp, samples jittered later than 0.8 ms were read a physics step late, and a fit took
    # that in kv and armature (a drawn hidden twist kv fitted 40 % high with a +-10 % interval).
    robot = load_robot("tsnake")
    exact = _recording(np.arange(100) * CONTROL_PERIOD_S, len(robot.joints))
    jitter = np.random.default_rng(5).uniform(-0.0015, 0.0015, 100)
    jitter[0] = -0.0012
    sensed = replace(exact, t_state=exact.t_state + jitter)
    assert sensed.start == exact.start == 0.0
    assert replace(exact, t_state=exact.t_state - 0.0043).start == pytest.approx(-0.004)  # whole physics steps
    assert replace(exact, t_state=exact.t_state + 0.01).start == 0.0
    q_exact, q_sensed = (LiftedRollout(r, robot).joint_angles([TwinParams()])[0] for r in (exact, sensed))
    assert np.ptp(q_exact, axis=0).min() > 0.05     # the twin moves
    assert np.array_equal(q_sensed, q_exact)


@pytest.mark.parametrize("value", ["0", "-3", "two", "1.5"])
def test_a_bad_coverage_is_one_line_and_exit_2(value, capsys):
    assert main(["bench", "twin", "--coverage", value]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "--coverage: must be an integer >= 1" in err


@pytest.mark.parametrize("structure", STRUCTURES)
def test_every_structure_a_fit_chooses_from_is_a_coverage_structure(structure):
    args = build_parser(["bench"]).parse_args(["bench", "twin", "--coverage", "2", "--coverage-structure", structure])
    assert (args.coverage, args.coverage_structure) == (2, structure)


def test_bench_twin_coverage_reports_every_parameter_of_a_real_fit(capsys):
    assert main(["bench", "twin", "--coverage", "1", "--duration", "6", "--ground-duration", "6", "--seed", "3",
                 "--robot-sensing", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["coverage"]
    assert (out["cases"], out["seed"], out["robot_sensing"], out["lifted_recording_s"]) == (1, 3, True, 6.0)
    names = {f"servo.{t}.{f}" for t in ("dorsal", "twist", "lateral")
             for f in ("kp", "kv", "armature", "frictionloss", "latency_s")} | {"contact.ground_friction"}
    assert set(out["parameters"]) == names
    (case,) = out["detail"]
    hidden = draw_hidden(load_robot("tsnake"), np.random.default_rng([3, 0]))
    for r in case["results"]:
        row = out["parameters"][r["name"]]
        assert r["true"] == pytest.approx(hidden[r["name"]])
        lo, hi = r["interval"]
        assert r["covered"] == (lo <= r["true"] <= (math.inf if hi is None else hi))
        assert row["coverage"] == float(r["covered"]) and row["identified"] == int(r["identified"])
    flagged = [row["coverage_identified"] for row in out["parameters"].values() if row["identified"]]
    assert out["worst_coverage_identified"] == (min(flagged) if flagged else None)
    assert out["meets_goal"] == (bool(flagged) and min(flagged) >= 0.9)


def test_cases_run_by_dask_workers_give_the_table_of_one_case_after_the_other():
    # Each case draws everything from its own arguments: which process runs it, and with how
    # many rollout threads, changes nothing (the rollouts are bit for bit the SimTwin's).
    lines: list[str] = []
    apart = coverage_figures(2, 5, 6.0, 0.0, ROBOT_SENSING, trial_workers=2, progress=lines.append)
    here = coverage_figures(2, 5, 6.0, 0.0, ROBOT_SENSING, trial_workers=1)
    assert (apart["workers"], here["workers"]) == (2, 1)
    assert apart["detail"] == here["detail"] and apart["parameters"] == here["parameters"]
    assert [d["case"] for d in apart["detail"]] == [0, 1]
    hidden = [draw_hidden(load_robot("tsnake"), np.random.default_rng([5, k])) for k in (0, 1)]
    for case, truth in zip(apart["detail"], hidden, strict=True):
        assert {r["name"]: r["true"] for r in case["results"]} == pytest.approx({n: truth[n] for n in
                                                                                 (r["name"] for r in case["results"])})
    assert sorted(line.split(" (")[0] for line in lines) == ["case 1/2", "case 2/2"]


def test_workers_without_coverage_is_one_line_and_exit_2(capsys):
    assert main(["bench", "twin", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--coverage" in err
