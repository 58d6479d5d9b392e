"""``snake twin identify --contact choose``: an on-ground recording chooses the twin's contact model.

The "robot" is the twin with a contact model hidden from the fit, recorded on the ground under the
rolling gait driven by ``cmd_vel`` to a real rosbag2 bag: one with elliptic cones, torsional
friction and a stiff contact (a candidate of :func:`snake_tools.twin.contact.candidates`), one with
the defaults. The first must be chosen and written; the second must keep the defaults: the extra
parameters are not worth their penalty.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from snake_core.robot import load_robot, load_twin_params
from snake_core.twin_params import ContactParams, TwinParams
from snake_tools.cli import main
from snake_tools.twin.contact import STIFF_SOLREF, choose_contact
from snake_tools.twin.identify import read_recording
from snake_tools.twin.recording import record_twin_run
from snake_tools.twin.structure import DECISIVE_BIC

_GROUND_S = 5.0
_HIDDEN = ContactParams(cone="elliptic", torsional_friction=0.02, solref=STIFF_SOLREF)


def _drive(t: float) -> tuple[float, float]:
    return (0.08, 0.0) if t < 4.0 else (0.05, 0.15)


@pytest.fixture(scope="module")
def robot():
    return load_robot("tsnake")


def test_a_recording_chooses_its_hidden_contact_model_and_write_keeps_it(robot, tmp_path, config_copy, capsys):
    bag = record_twin_run(tmp_path / "ground", robot, _GROUND_S, twin_params=TwinParams(contact=_HIDDEN),
                          mocap_noise_m=0.001, cmd_vel=_drive, seed=1)
    # The target holds the head weighed (at its nominal mass, so the twin is the recorded one): --write keeps it.
    head = robot.tsnake_body.module_mass / robot.tsnake_body.module_length * float(robot.joint_arc_positions()[0])
    (config_copy / "calibration" / "tsnake" / "lab.yaml").write_text(f"twin:\n  link:\n    head: {{mass: {head!r}}}\n")
    assert main(["twin", "identify", str(bag), "--robot", "tsnake", "--target", "lab", "--contact", "choose",
                 "--write", "--json", "--report", str(tmp_path / "r.html")]) == 0
    out = json.loads(capsys.readouterr().out)
    contact = out["contact"]
    assert contact["chosen"] == {"cone": "elliptic", "torsional_friction": 0.02, "solref": list(STIFF_SOLREF)}
    default = contact["candidates"][0]   # the start's, the defaults
    assert (default["cone"], default["torsional_friction"], default["parameters"]) == ("pyramidal", 0.0, 1)
    chosen = min(contact["candidates"], key=lambda c: c["bic"])
    assert chosen["parameters"] == 4 and chosen["cost"] < default["cost"]
    _check_margin(contact)
    assert out["residual_rms_after"] < out["residual_rms_before"]   # before: the target's twin, default contact
    # The target holds the chosen model, and the twin built from it is the hidden one's.
    block = yaml.safe_load(Path(out["written"]).read_text())["twin"]["contact"]
    assert {k: block[k] for k in ("cone", "torsional_friction", "solref")} == contact["chosen"]
    params, _ = load_twin_params("tsnake", "lab")
    assert params.contact.cone == "elliptic" and params.contact.solref == STIFF_SOLREF
    assert params.link.keys() == {"head"} and params.link["head"]["mass"] == pytest.approx(head, rel=1e-5)


def test_a_recording_of_the_default_contact_keeps_it(robot, tmp_path):
    bag = record_twin_run(tmp_path / "ground", robot, _GROUND_S, mocap_noise_m=0.001, cmd_vel=_drive, seed=1)
    rec = read_recording(bag, robot)
    chosen, report = choose_contact(rec, robot, TwinParams(), "flat", 0.8)
    assert chosen == ContactParams()
    assert report["chosen"] == {"cone": "pyramidal", "torsional_friction": 0.0, "solref": [0.02, 1.0]}
    assert len(report["candidates"]) == 12 and report["candidates"][0]["parameters"] == 1
    # Scored by the span rates too: the two cmd_vel spans' speed and turn rate; the recorded contact's are
    # the recording's own (the heading recorded exactly), the least of every candidate's.
    assert report["n_path"] == 4
    assert report["windows"] * len(robot.joints) == report["n"] and report["windows"] >= round(_GROUND_S)
    assert report["candidates"][0]["path_cost"] == min(c["path_cost"] for c in report["candidates"])
    _check_margin(report)
    # Without them (a servo model held without its spreads) the tracking statistic alone scores.
    chosen, report = choose_contact(rec, robot, TwinParams(), "flat", 0.8, span_rates=False)
    assert chosen == ContactParams() and report["n_path"] == 0
    assert all(c["path_cost"] == 0.0 for c in report["candidates"])


def _check_margin(report) -> None:
    """The report says by how much the choice won, over which candidate, and whether that decides it."""
    ranked = sorted(report["candidates"], key=lambda c: c["bic"])
    assert report["margin"] == pytest.approx(ranked[1]["bic"] - ranked[0]["bic"])
    assert report["runner_up"] == {k: ranked[1][k] for k in ("cone", "torsional_friction", "solref")}
    assert report["decisive"] == (report["margin"] > DECISIVE_BIC)
    assert report["within_margin"] == sum(c["bic"] - ranked[0]["bic"] <= DECISIVE_BIC for c in ranked[1:])


def test_a_lifted_recording_has_no_contact_to_choose(tmp_path, capsys):
    assert main(["twin", "identify", str(tmp_path / "any"), "--robot", "tsnake", "--lifted",
                 "--contact", "choose"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--contact choose: a lifted recording has no contact" in err[0]
