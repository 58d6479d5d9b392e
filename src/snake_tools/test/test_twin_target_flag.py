"""``--calibration-target`` of ``snake experiment`` / ``snake bench``: the twins built use the target's physics."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest
import yaml

from snake_core.robot import CALIBRATION_TARGET_ENV, load_robot
from snake_core.twin_params import ServoParams, TwinParams
from snake_tools.cli import SnakeArgumentParser, main
from snake_tools.experiment.task import twin_at_spawn
from snake_tools.twin.target import add_calibration_target

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def lab_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cfg = tmp_path / "config"
    shutil.copytree(ROOT / "config", cfg)
    (cfg / "calibration" / "tsnake" / "lab.yaml").write_text(
        yaml.safe_dump({"twin": {"servo": {"twist": {"latency_s": 0.04, "kp": 20.0}}}}))
    monkeypatch.setenv("SNAKE_CONFIG_DIR", str(cfg))
    monkeypatch.delenv(CALIBRATION_TARGET_ENV, raising=False)
    return cfg


def test_the_flag_sets_the_physics_of_the_twins_the_command_builds(lab_config, capsys):
    seen: dict[str, object] = {}

    def run(args: argparse.Namespace) -> int:
        twin = twin_at_spawn(load_robot("tsnake"), "flat")
        seen["params"], seen["env"] = twin.twin_params, os.environ.get(CALIBRATION_TARGET_ENV)
        return 0

    parser = SnakeArgumentParser(prog="snake demo")
    sub = parser.add_subparsers(dest="what")
    sub.add_parser("go").set_defaults(func=run)
    add_calibration_target(parser, sub)
    args = parser.parse_args(["--calibration-target", "lab", "go"])
    assert args.func(args) == 0
    assert seen["params"] == TwinParams(servo={"twist": ServoParams(kp=20.0, latency_s=0.04)})
    assert seen["env"] == "lab"
    assert CALIBRATION_TARGET_ENV not in os.environ  # restored after the run
    assert str(lab_config / "calibration" / "tsnake" / "lab.yaml") in capsys.readouterr().err
    args = parser.parse_args(["go"])  # no flag: the default target, whose file has no twin: block
    assert args.func(args) == 0
    assert seen["params"] == TwinParams()


def test_a_target_without_files_exits_2(lab_config, capsys):
    assert main(["bench", "--calibration-target", "nowhere", "sim"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nowhere" in err


@pytest.mark.parametrize("argv", [
    ["experiment", "calibrate"],
    ["optimize", "gait", "--trials", "1", "--duration", "1"],
    ["bench", "sim"]])
def test_a_misspelt_target_in_the_environment_is_refused_not_run_on_the_defaults(lab_config, monkeypatch, capsys,
                                                                                argv):
    monkeypatch.setenv(CALIBRATION_TARGET_ENV, "labb")   # refused before any twin is built
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "$SNAKE_CALIBRATION_TARGET labb" in err


def test_optimize_gait_names_its_target_in_the_study_and_the_json(lab_config, capsys):
    import json

    base = ["optimize", "gait", "--trials", "1", "--duration", "1", "--json"]
    assert main([*base, "--calibration-target", "lab"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["study"] == "tsnake-flat-speed-lab" and out["calibration_target"] == "lab"
    assert out["twin_params_file"] == str(lab_config / "calibration" / "tsnake" / "lab.yaml")
    assert main(["optimize", "gait", "--calibration-target", "lbb", "--trials", "1"]) == 2
    assert "lbb" in capsys.readouterr().err
