"""``snake gait``: command profiles, per-step phases and twist cycles, and the shape error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snake_core.gait.rolling import RollingParams, RollingVectorGait, body_shape_error
from snake_core.robot import load_robot
from snake_tools.cli import main


def test_profile_drives_the_phases_and_the_output_has_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "profile.csv"
    profile.write_text("t,omega_h,omega_t,omega_c\n0,2,2,1\n1.5,1,-3,0\n3.5,0,0,0\n")
    out = tmp_path / "run.npz"
    assert main(["gait", "--profile", str(profile), "--duration", "4", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    data = np.load(out)
    t = data["t"]
    # independent integral of the piecewise-constant profile (a step at t uses the command at t)
    omega_h = np.where(t < 1.5 - 1e-9, 2.0, np.where(t < 3.5 - 1e-9, 1.0, 0.0))
    omega_t = np.where(t < 1.5 - 1e-9, 2.0, np.where(t < 3.5 - 1e-9, -3.0, 0.0))
    phi_h = np.concatenate([[0.0], np.cumsum(omega_h[1:] * 0.02)])
    phi_t = np.concatenate([[0.0], np.cumsum(omega_t[1:] * 0.02)])
    accumulated = data["phi_h"] - data["phi_t"] + 2 * np.pi * data["twist_cycles"]
    np.testing.assert_allclose(accumulated, phi_h - phi_t, atol=1e-9)
    np.testing.assert_allclose(data["cmd_omega_t"], omega_t)
    assert data["resets"][-1] == summary["phase_resets"] >= 1  # 4 rad/s of difference for 2 s: 8 rad
    assert summary["accumulated_phase_difference"] == pytest.approx(phi_h[-1] - phi_t[-1])
    # the shape error column is the core's function of the recorded joints
    robot = load_robot("tsnake")
    gait = RollingVectorGait(robot, RollingParams.from_robot(robot))
    k = 120
    assert data["shape_error_m"][k] == pytest.approx(body_shape_error(gait, data["q"][k], data["wave_phase"][k]))
    assert summary["shape_error_m_max"] == pytest.approx(np.nanmax(data["shape_error_m"]))


def test_bad_profile_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "bad.csv"
    profile.write_text("t,omega_h,omega_t\n0,1,1\n")
    assert main(["gait", "--profile", str(profile), "--duration", "1"]) == 2
    assert "--profile" in capsys.readouterr().err
