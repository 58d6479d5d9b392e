"""``snake reduction``: Eq. 10 both ways against the equation written out here."""

from __future__ import annotations

import json

import pytest

from snake_core.gait.reduction import ReductionParams
from snake_core.robot import load_robot
from snake_tools.cli import main


@pytest.mark.parametrize(("omega_h", "omega_t"), [(2.0, 1.0), (1.5, -1.5), (0.0, 2.0), (-1.0, -1.0)])
def test_forward_then_inverse_round_trip(omega_h: float, omega_t: float, capsys: pytest.CaptureFixture[str]) -> None:
    p = ReductionParams.from_robot(load_robot("tsnake"))
    assert main(["reduction", "forward", "--omega-h", str(omega_h), "--omega-t", str(omega_t), "--json"]) == 0
    fwd = json.loads(capsys.readouterr().out)
    assert fwd["v"] == pytest.approx(p.k * (omega_h + omega_t) / 2)  # Eq. 10
    assert fwd["omega"] == pytest.approx(p.k * (omega_t - omega_h) / p.d_prime)
    assert main(["reduction", "inverse", "--v", repr(fwd["v"]), "--omega", repr(fwd["omega"]), "--json"]) == 0
    inv = json.loads(capsys.readouterr().out)
    assert (inv["omega_h"], inv["omega_t"]) == (pytest.approx(omega_h), pytest.approx(omega_t))


def test_inverse_saturates_keeping_the_turning_radius(capsys: pytest.CaptureFixture[str]) -> None:
    p = ReductionParams.from_robot(load_robot("tsnake"))
    v, omega = 10 * p.k * p.omega_max, 0.5
    assert main(["reduction", "inverse", "--v", str(v), "--omega", str(omega), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["saturated"]
    cmd = out["command"]
    assert max(abs(cmd["omega_h"]), abs(cmd["omega_t"])) == pytest.approx(p.omega_max)
    assert out["v_achieved"] / out["omega_achieved"] == pytest.approx(v / omega)


def test_bad_number_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["reduction", "forward", "--omega-h", "nan", "--omega-t", "1"])
    except SystemExit as exc:  # argparse reports a bad value itself
        code = exc.code
    assert code == 2
    assert "--omega-h" in capsys.readouterr().err
