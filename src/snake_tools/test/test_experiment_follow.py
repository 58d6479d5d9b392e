"""``snake experiment follow``: 001's closed loop in the MuJoCo twin reaches the goal, and the JSON contract.

Each closed-loop test checks the robot's true final position against the goal and that its
track kept out of the pegs, from the twin's own world and the field generator, not from the
command's verdict alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snake_core.follower import FollowerConfig
from snake_tools.cli import main
from snake_tools.experiment import follow

_PENETRATION_M = 0.005  # m, contact penetration allowed by the solver's soft constraints


@pytest.mark.parametrize(("robot", "seed"), [("wheeled_snake", 0), ("tsnake", 1)])
def test_closed_loop_in_the_twin_reaches_the_goal_among_real_pegs(robot, seed):
    settings = follow.load_settings()
    t = follow.trial(robot, seed, "shortest", settings)
    f = follow.field_for(settings, robot)
    pegs = follow.make_field(settings, robot, seed)
    # The pegs are MuJoCo cylinders of the twin's world.
    world = follow.make_world(f, pegs, "check")
    assert world.pegs is not None and len(world.pegs.centres) == t["pegs"] > 0
    np.testing.assert_array_equal(world.pegs.centres, pegs)
    assert t["success"], {k: v for k, v in t.items() if not k.startswith("_")}
    tol = FollowerConfig(**settings["robots"][robot].get("follower", {})).goal_tolerance
    track = t["_track"]
    assert np.linalg.norm(track[-1] - np.asarray(f["goal"])) <= tol + 0.02
    assert np.linalg.norm(track[0] - np.asarray(f["start"])) < 0.02
    # The tracked point never went through a peg (the wheeled snake's is the head's front edge, so it
    # may touch one; MuJoCo's soft contacts allow a few mm of penetration).
    gaps = np.linalg.norm(track[:, None, :] - pegs[None], axis=2).min()
    assert gaps > f["diameter"] / 2 - _PENETRATION_M
    assert 0 < t["time_to_goal_s"] < settings["robots"][robot]["time_limit"]
    assert t["cross_track_m"] < 0.2


def test_follow_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "follow", "--robot", "wheeled_snake", "--trials", "2", "--seed", "3", "--json",
                 "--out", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("success_rate", "time_to_goal_s_mean", "cross_track_m_mean"):
        assert key in out
    assert out["trials"] == len(out["runs"]) == 2
    assert out["success_rate"] == sum(r["success"] for r in out["runs"]) / 2
    times = [r["time_to_goal_s"] for r in out["runs"] if r["success"]]
    if times:
        assert out["time_to_goal_s_mean"] == pytest.approx(np.mean(times))
    assert out["cross_track_m_mean"] == pytest.approx(np.mean([r["cross_track_m"] for r in out["runs"]]))
    assert [r["seed"] for r in out["runs"]] == [3, 4]
    for r in out["runs"]:
        assert Path(r["plot"]).is_file() and Path(r["plot"]).suffix == ".png"
    assert json.loads((tmp_path / "wheeled_snake" / "follow.json").read_text())["success_rate"] == out["success_rate"]


def test_follow_rejects_zero_trials(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "follow", "--trials", "0"]) == 2
    assert "--trials" in capsys.readouterr().err
