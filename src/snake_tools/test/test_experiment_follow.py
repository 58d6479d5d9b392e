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

from snake_core.errors import PlanningError
from snake_core.following.follower import FollowerConfig
from snake_tools.cli import main
from snake_tools.experiment import follow
from snake_tools.experiment.task import run_task

_PENETRATION_M = 0.005  # m, contact penetration allowed by the solver's soft constraints


@pytest.mark.parametrize(("robot", "seed"), [("wheeled_snake", 0), ("tsnake", 1)])
def test_closed_loop_in_the_twin_reaches_the_goal_among_real_pegs(robot, seed):
    settings = follow.load_settings()
    t = run_task(follow.FollowTask(robot, seed, "shortest", settings))
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


def test_a_trial_without_a_plan_fails_as_no_plan_with_the_planners_reason() -> None:
    settings = follow.load_settings()
    settings["robots"]["wheeled_snake"]["half_width"] = 1.0  # m: wider than the gap between start and wall
    t = run_task(follow.FollowTask("wheeled_snake", 0, "shortest", settings))
    with pytest.raises(PlanningError) as err:
        follow.make_plan(settings, "wheeled_snake", follow.make_field(settings, "wheeled_snake", 0), "shortest")
    assert (t["success"], t["status"], t["reason"]) == (False, "no_plan", str(err.value))
    assert t["time_to_goal_s"] is None and t["cross_track_m"] is None and "_track" not in t
    summary = follow.summarise([t])
    assert summary["success_rate"] == 0.0 and summary["failures"] == {"0": str(err.value)}


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


def test_follow_results_do_not_depend_on_the_number_of_workers(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Interface contract: --workers 1 and --workers 2 give the same numbers (quick: 2 m to the goal)."""
    import yaml

    from snake_core.config_files import resolve

    settings = yaml.safe_load(resolve("experiment", "follow_experiment").read_text())  # the file, not its merge
    settings["field"]["goal"] = [0.0, 0.0]
    settings["robots"]["wheeled_snake"]["time_limit"] = 30.0
    config = tmp_path / "quick.yaml"
    config.write_text(yaml.safe_dump(settings))
    outs = []
    for workers in ("1", "2"):
        assert main(["experiment", "follow", "--robot", "wheeled_snake", "--trials", "2", "--seed", "5",
                     "--config", str(config), "--no-plots", "--json", "--workers", workers,
                     "--out", str(tmp_path / workers)]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    one, two = outs
    assert (one["workers"], two["workers"]) == (1, 2)
    assert one["success_rate"] == two["success_rate"]
    assert one["time_to_goal_s_mean"] == two["time_to_goal_s_mean"]
    for a, b in zip(one["runs"], two["runs"], strict=True):
        assert (a["seed"], a["pegs"], a["time_to_goal_s"], a["cross_track_m"]) == \
            (b["seed"], b["pegs"], b["time_to_goal_s"], b["cross_track_m"])
    # the trials differ from each other (their own seeds), so equality is not trivial
    assert one["runs"][0]["cross_track_m"] != one["runs"][1]["cross_track_m"]


def test_loop_period_is_what_the_twin_advances() -> None:
    settings = follow.load_settings()
    f = follow.field_for(settings, "wheeled_snake")
    from snake_core.robot import load_robot
    from snake_hardware.sim.twin import SimTwin

    twin = SimTwin(load_robot("wheeled_snake"), follow.make_world(f, np.zeros((0, 2)), "empty"), control_dt=0.02)
    twin.reset()
    dt = follow.loop_period(twin)
    t0 = twin.time
    twin.advance(dt)
    assert twin.time - t0 == pytest.approx(dt, abs=1e-12)
    assert 0 < dt <= 0.05


def test_workers_argument_rejects_zero(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["experiment", "follow", "--workers", "0"])
    except SystemExit as exc:  # argparse reports a bad value itself
        code = exc.code
    assert code == 2
    assert "--workers" in capsys.readouterr().err
