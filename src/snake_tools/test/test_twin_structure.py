"""``snake twin identify`` chooses the servo model's structure (gear play or none) by BIC, against known truth.

The "robot" is the twin with the benchmark's hidden physics (:func:`snake_tools.bench.twin.hidden_params`),
with and without a gear play on every joint type, recorded lifted under ``snake twin excite``'s multisine to
real rosbag2 bags. With a play the criterion must choose ``backlash`` and never flag a wrong play identified;
without one it must keep ``none``: the extra parameters are not worth their penalty.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from snake_core.excitation import JointBounds, plan_excitation
from snake_core.robot import load_robot
from snake_core.twin_params import TwinParams
from snake_tools.bench.twin import hidden_params
from snake_tools.cli import main
from snake_tools.twin.identify import identify, read_recording
from snake_tools.twin.recording import record_twin_run

_DURATION_S = 8.0
_PLAY_RAD = 0.006          # total play of every joint type, rad (0.34 deg: an X-series gear train's range)
_TYPES = ("dorsal", "twist", "lateral")


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


def _record(root: Path, robot, play: float) -> Path:
    truth = hidden_params(robot)
    if play > 0:
        truth = truth.with_flat({f"servo.{t}.backlash_rad": play for t in _TYPES})
    bounds = [JointBounds(j.lower, j.upper, j.velocity) for j in robot.joints]
    motion = plan_excitation([0.0] * len(robot.joints), bounds, variant="lifted", duration=_DURATION_S)
    return record_twin_run(root, robot, _DURATION_S, twin_params=truth, world=None, lifted=True,
                           controller=lambda tw: motion.positions(np.array([tw.time]))[0])


def _bic(structure: dict, name: str) -> float:
    return next(c["bic"] for c in structure["candidates"] if c["name"] == name)


# Three structures fitted, load_friction's rollouts stepped from Python: 206 s at a load average of 11,
# a generous bound for a loaded machine.
@pytest.mark.timeout(1800)
def test_a_recording_with_gear_play_chooses_backlash_and_finds_the_play(robot, tmp_path, config_copy, capsys):
    bag = _record(tmp_path / "play", robot, _PLAY_RAD)
    assert main(["twin", "identify", str(bag), "--robot", "tsnake", "--lifted", "--json",
                 "--report", str(tmp_path / "r.html")]) == 0
    out = json.loads(capsys.readouterr().out)
    structure = out["structure"]
    assert structure["chosen"] == "backlash" and structure["criterion"] == "BIC"
    assert {c["name"] for c in structure["candidates"]} == {"none", "backlash", "load_friction"}
    none, play = (next(c for c in structure["candidates"] if c["name"] == n) for n in ("none", "backlash"))
    assert play["parameters"] == none["parameters"] + 3 and play["cost"] < none["cost"]
    assert _bic(structure, "backlash") < _bic(structure, "none")
    n = structure["n"]
    assert none["bic"] - none["cost"] / structure["scale"] == pytest.approx(none["parameters"] * math.log(n))
    # With the loop on the output shaft the play shows only where the torque reverses, and the fit may
    # stop in a second minimum near one of its starts (docs/twin_identification.md, "Structure"): then the
    # verdict says so and flags no play. A play flagged identified lies within 50 % of the truth, and
    # its interval holds it.
    for t in _TYPES:
        play = out["parameters"][f"servo.{t}.backlash_rad"]
        if play["identified"]:
            assert play["fitted"] == pytest.approx(_PLAY_RAD, rel=0.5), t
            assert play["interval"][0] <= _PLAY_RAD <= play["interval"][1], t
        else:
            assert play["why"], t
    assert out["adequacy"]["ratio"] < out["adequacy_before"]
    assert "Structure: <b>backlash</b> (least BIC" in (tmp_path / "r.html").read_text()
    for key in ("noise_floor_rad", "adequacy", "starts", "parameters", "not_identified"):  # the contract's keys
        assert key in out, key


@pytest.mark.timeout(1800)
def test_a_recording_without_gear_play_keeps_the_model_without_it(robot, tmp_path):
    rec = read_recording(_record(tmp_path / "none", robot, 0.0), robot)
    fit = identify(rec, robot, TwinParams(), lifted=True, structure="auto")
    assert fit.structure["chosen"] == "none"
    assert _bic(fit.structure, "none") < _bic(fit.structure, "backlash")
    assert not any(n.endswith("backlash_rad") for n in fit.names)
    assert all(fit.params.servo_of(t).backlash_rad == 0.0 for t in _TYPES)   # the twin without play


@pytest.mark.parametrize(("load_cost", "kept"), [(19_990.0, ["backlash", "load_friction"]),
                                                 (19_000.0, ["load_friction"])])
def test_on_a_head_the_structures_more_than_ten_bic_above_the_least_drop_out(load_cost, kept):
    # BIC by hand (Schwarz 1978): |r|^2 / s^2 + k ln n, s^2 from the fullest model that leaves the least
    # (here load_friction, 18 variables). Within 10 of the least a structure stays for the whole recording.
    from snake_tools.twin.structure import DECISIVE_BIC, decisive_on_head

    n = 10_000
    fits = {"none": (15, 30_000.0), "backlash": (18, 20_000.0), "load_friction": (18, load_cost)}
    s2 = load_cost / (n - 18)
    bic = {name: cost / s2 + k * math.log(n) for name, (k, cost) in fits.items()}
    got, report = decisive_on_head(fits, n)
    assert got == kept == [name for name in fits if bic[name] - min(bic.values()) <= DECISIVE_BIC]
    assert report["on"] == "head" and report["kept"] == kept and report["chosen"] == "load_friction"
    assert {c["name"]: c["bic"] for c in report["candidates"]} == pytest.approx(bic)
