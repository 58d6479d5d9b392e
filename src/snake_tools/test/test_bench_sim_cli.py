"""``snake bench sim --json``: the interface contract (keys, goal), not the speed."""

from __future__ import annotations

import json

import pytest

from snake_tools.cli import main


def test_bench_sim_prints_both_realtime_factors_beside_the_goal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sim", "--duration", "0.5", "--repeats", "1", "--follow-trials", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for world in ("flat", "uneven"):
        assert out[f"realtime_factor_{world}"] > 0
        assert out[f"meets_goal_{world}"] == (out[f"realtime_factor_{world}"] >= 20.0)
    assert out["realtime_factor_goal"] == 20.0
    # The gait really was in the loop: a 0.1 m/s translation moved the robot on flat ground.
    assert out["com_distance_m_flat"] > 0.02


def test_bench_sim_refuses_a_bad_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "sim", "--duration", "0"]) == 2
    assert "--duration" in capsys.readouterr().err
