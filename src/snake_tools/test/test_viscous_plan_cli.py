"""``snake simulate-viscous`` and ``snake bench plan``: JSON contracts, agreement with the core, bad flags."""

from __future__ import annotations

import json

import numpy as np
import pytest

from snake_core.following.viscous import ViscousParams, peg_field_for, run_serpenoid
from snake_tools.cli import main


def test_simulate_viscous_json_contract_matches_core(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate-viscous", "--links", "9", "--pegs", "10", "--duration", "5", "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    pegs = peg_field_for(9, 5.0, 10.0, 3, link_length=0.12, diameter=0.06)
    ref = run_serpenoid(9, 5.0, pegs, params=ViscousParams(n_links=9, link_length=0.12))
    assert out["pegs"] == len(pegs)
    assert out["mean_speed"] == pytest.approx(ref.trajectory.mean_speed, rel=1e-9)
    assert np.allclose(out["final_head_pose"], ref.trajectory.head[-1])
    assert len(out["trajectory"]["t"]) == len(out["trajectory"]["head"]) == 11


def test_simulate_viscous_writes_the_trajectory_csv(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "traj.csv"
    assert main(["simulate-viscous", "--links", "5", "--duration", "1", "--csv", str(csv)]) == 0
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert data.shape == (21, 6)


@pytest.mark.parametrize(("flags", "name"), [(["--links", "1"], "--links"), (["--pegs", "-2"], "--pegs"),
                                             (["--duration", "0"], "--duration"), (["--sweep", "a,b"], "--sweep")])
def test_simulate_viscous_bad_flags_exit_2_naming_the_flag(flags, name, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate-viscous", *flags]) == 2
    assert name in capsys.readouterr().err


def test_bench_plan_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "plan", "--json", "--repeats", "1", "--sim-seconds", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("plan_ms_100", "plan_ms_1000", "viscous_realtime_factor"):
        assert isinstance(out[key], float)
        assert out[key] > 0
    assert out["graph_edges_1000"] > out["graph_nodes_1000"] > 1000
