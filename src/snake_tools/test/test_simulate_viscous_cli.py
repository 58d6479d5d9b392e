"""``snake simulate-viscous``: every model parameter is a flag, echoed with the peg positions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from snake_core.following.viscous import ViscousParams, equal_link_robot, peg_field_for, run_serpenoid
from snake_tools.cli import main


def test_parameters_reach_the_model_and_pegs_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate-viscous", "--links", "6", "--pegs", "3", "--seed", "4", "--duration", "6",
            "--amplitude", "0.45", "--spatial-frequency", "1.0", "--omega", "2.5", "--link-length", "0.1",
            "--kx", "2", "--ky-ratio", "5", "--hump", "20", "--start", "0.1", "-0.05", "0.2", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    pegs = peg_field_for(6, 6.0, 3.0, 4, link_length=0.1, diameter=0.06)
    np.testing.assert_allclose(np.asarray(out["peg_positions"]).reshape(-1, 2), pegs)
    assert out["pegs"] == len(pegs) > 0
    params = ViscousParams(n_links=6, link_length=0.1, kx=2.0, ky_ground=10.0, hump_amplitude=40.0, peg_diameter=0.06)
    ref = run_serpenoid(6, 6.0, pegs, dt=0.05, omega=2.5, params=params, robot=equal_link_robot(6),
                        start=(0.1, -0.05, 0.2), amplitude=0.45, spatial_frequency=1.0)
    assert out["mean_speed"] == pytest.approx(ref.trajectory.mean_speed, rel=1e-12)
    np.testing.assert_allclose(out["final_head_pose"], ref.trajectory.head[-1], atol=1e-12)
    assert out["gait"] == {"amplitude_rad": 0.45, "spatial_frequency_rad": 1.0, "omega_rad_s": 2.5,
                           "head_offset_rad": 0.0}
    assert out["friction"]["ky_ground"] == 10.0 and out["friction"]["hump_amplitude"] == 40.0
    assert out["start_pose"] == [0.1, -0.05, 0.2]
    # the amplitude matters: a smaller wave moves the snake less far
    smaller = list(args)
    smaller[smaller.index("--amplitude") + 1] = "0.2"
    assert main(smaller) == 0
    slower = json.loads(capsys.readouterr().out)
    assert slower["gait"]["amplitude_rad"] == 0.2
    assert slower["mean_speed"] != out["mean_speed"]


def test_bad_amplitude_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["simulate-viscous", "--amplitude", "-1"])
    except SystemExit as exc:  # argparse reports a bad value itself
        code = exc.code
    assert code == 2
    assert "--amplitude" in capsys.readouterr().err
