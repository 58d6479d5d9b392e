"""``snake bench sim --json``: the interface contract (keys, goal), not the speed."""

from __future__ import annotations

import json

import pytest

from snake_tools.cli import main


def test_bench_sim_prints_both_realtime_factors_beside_the_goal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sim", "--duration", "0.5", "--repeats", "1", "--follow-trials", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for world, goal in (("flat", 100.0), ("uneven", 40.0)):
        assert out[f"realtime_factor_{world}"] > 0
        assert out[f"realtime_factor_goal_{world}"] == goal
        assert out[f"meets_goal_{world}"] == (out[f"realtime_factor_{world}"] >= goal)
        shares = [out[f"{part}_time_share_{world}"] for part in ("gait", "physics", "bookkeeping")]
        assert all(0.0 <= x <= 1.0 for x in shares)
        assert sum(shares) == pytest.approx(1.0)
        assert shares[1] > 0.0 and shares[0] > 0.0
        # The physics alone runs faster than the whole loop, by the inverse of its share (the same
        # clocks; the repeats are timed with and without the warm-up, hence the tolerance).
        ceiling = out[f"physics_realtime_factor_{world}"]
        assert ceiling > out[f"realtime_factor_{world}"]
        assert ceiling == pytest.approx(out[f"realtime_factor_{world}"] / shares[1], rel=0.25)
    # The gait really was in the loop: a 0.1 m/s translation moved the robot on flat ground.
    assert out["com_distance_m_flat"] > 0.02


def test_bench_sim_refuses_a_bad_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sim", "--duration", "0"]) == 2
    assert "--duration" in capsys.readouterr().err


def test_timed_loop_simulates_what_advance_simulates() -> None:
    """The benchmark's timed loop is SimTwin.advance with the gait as controller: same state, bit for bit."""
    import numpy as np

    from snake_core.control import CONTROL_PERIOD_S
    from snake_core.gait import make_gait
    from snake_core.robot import load_robot
    from snake_hardware.sim.twin import SimTwin
    from snake_tools.bench.sim import timed_advance

    robot = load_robot("tsnake")
    twins = [SimTwin(robot, "flat", control_dt=CONTROL_PERIOD_S) for _ in range(2)]
    gaits = [make_gait("rolling", robot) for _ in range(2)]
    command = gaits[0].mapping.to_command(0.1, 0.0)
    twins[0].advance(0.51, lambda _tw: gaits[0].step(CONTROL_PERIOD_S, command))  # not a whole period
    totals: dict[str, float] = {}
    timed_advance(twins[1], 0.51, gaits[1], command, totals)
    assert twins[0].time == twins[1].time
    assert np.array_equal(twins[0].joint_positions(), twins[1].joint_positions())
    assert np.array_equal(twins[0].centre_of_mass(), twins[1].centre_of_mass())
    assert np.abs(twins[0].joint_positions()).max() > 0.01  # the gait moved the joints
    assert totals["gait"] > 0.0 and totals["physics"] > 0.0
