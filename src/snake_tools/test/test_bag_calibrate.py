"""``snake bag calibrate``: 003 Eq. 10 from a recorded session, written per calibration target."""

from __future__ import annotations

import json

import pytest

from snake_core.robot import calibration_path, load_robot
from snake_tools.bag.synthetic import SyntheticSession, write_session
from snake_tools.cli import main


def test_k_and_d_prime_from_a_session_go_to_their_own_target(tmp_path, capsys, config_copy):
    session = SyntheticSession(k=0.043, d_prime=1.21)
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session)
    twin_before = calibration_path("tsnake").read_text()
    code = main(["bag", "calibrate", str(bag), "--robot", "tsnake", "--target", "lab_robot", "--write", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    # translate, turn, turn in place: three runs (the stop excites nothing).
    assert len(out["runs"]) == 3
    assert out["reduction"]["k"] == pytest.approx(session.k, rel=1e-3)
    assert out["reduction"]["d_prime"] == pytest.approx(session.d_prime, rel=1e-3)
    assert out["written"] == str(config_copy / "calibration" / "tsnake" / "lab_robot.yaml")
    # The robot's target loads the new coefficients; the twin's stay as they were.
    lab = load_robot("tsnake", target="lab_robot").gait("reduction")
    assert (lab["k"], lab["d_prime"]) == pytest.approx((session.k, session.d_prime), rel=1e-3)
    assert calibration_path("tsnake").read_text() == twin_before
    assert load_robot("tsnake").gait("reduction")["k"] != pytest.approx(session.k, rel=1e-3)


def test_calibration_needs_mocap_and_gait_state(tmp_path, capsys):
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), SyntheticSession(),
                        rates={"gait_state": 0.0})
    code = main(["bag", "calibrate", str(bag), "--robot", "tsnake", "--target", "x"])
    err = capsys.readouterr().err
    assert code == 2 and "calibration needs /gait_state" in err
    code = main(["bag", "calibrate", str(bag), "--target", "../escape"])
    assert code == 2 and "calibration target" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["/vrpn_mocap/snake_head/pose", "tf:snake_head"])
def test_calibration_from_a_mocap_driver_s_pose_only(tmp_path, capsys, source):
    session = SyntheticSession(k=0.043, d_prime=1.21)
    bag = write_session(tmp_path / "bag", load_robot("tsnake"), session, rates={"ground_truth": 0.0},
                        mocap_topic=source)
    code = main(["bag", "calibrate", str(bag), "--robot", "tsnake", "--target", "lab_robot", "--pose-topic", source,
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["pose_topic"] == source and len(out["runs"]) == 3
    assert (out["reduction"]["k"], out["reduction"]["d_prime"]) == pytest.approx((session.k, session.d_prime),
                                                                                 rel=1e-3)
