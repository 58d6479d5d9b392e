"""The ``following:`` block of the robot YAML: strict schema, shipped values, defaults, and its readers."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import yaml

from snake_core.errors import RobotConfigError
from snake_core.following.follower import FollowerConfig
from snake_core.robot import load_robot, resolve_robot_path, robot_from_dict


def _shipped(name: str) -> dict:
    return yaml.safe_load(resolve_robot_path(name).read_text())


def test_tsnake_presets_are_its_drive_centre_swept_band_and_calibrated_limits():
    p = load_robot("tsnake").following_presets
    robot = load_robot("tsnake")
    assert (p.gait, p.drive) == ("rolling", "cmd_vel")
    assert p.yaw_offset == pytest.approx(math.pi / 2)
    # the drive centre (s_h + s_t) / 2 with s_h = L_h / 2, s_t = (L_t + L) / 2 (003 Sec. III-C.2)
    rolling = robot.gait("rolling")
    s_h, s_t = rolling["head_end"] / 2, (rolling["tail_start"] + robot.length) / 2
    assert p.reference_offset == pytest.approx((s_h + s_t) / 2, abs=0.01)
    # the band the sidewinding body sweeps: half its length plus the helix amplitude
    assert p.half_width == pytest.approx(robot.length / 2 + rolling["k_b"], abs=0.01)
    cfg = p.follower_config()
    assert (cfg.max_linear, cfg.max_angular) == (0.092, 0.18)
    assert cfg.lookahead == FollowerConfig().lookahead  # what it does not set keeps the default


def test_wheeled_snake_presets_track_the_head_with_the_body_width():
    robot = load_robot("wheeled_snake")
    p = robot.following_presets
    assert (p.gait, p.drive, p.reference_offset) == ("serpenoid", "offset", 0.0)
    assert p.half_width == pytest.approx(robot.wheeled_body.width / 2)
    assert p.follower_config() == FollowerConfig()


def test_a_robot_without_the_block_gets_defaults_from_its_body():
    data = _shipped("wheeled_snake")
    del data["following"]
    p = robot_from_dict(data).following_presets
    assert p.half_width == pytest.approx(data["body"]["width"] / 2)
    assert (p.reference_offset, p.yaw_offset, p.gait) == (0.0, pytest.approx(math.pi), "serpenoid")


_CASES = [
    ("unknown key", {"refrence_offset": 0.1}, ("following.refrence_offset", "unknown key",
                                               "did you mean `reference_offset`?")),
    ("follower typo", {"follower": {"kpp": 1.0}}, ("following.follower.kpp", "did you mean `kp`?")),
    ("gait the robot lacks", {"gait": "serpenoid"}, ("following.gait", "not a gait of this robot")),
    ("bad drive", {"drive": "cmd_vell"}, ("following.drive", "did you mean `cmd_vel`?")),
    ("zero half-width", {"half_width": 0.0}, ("following.half_width", "> 0")),
    ("NaN offset", {"reference_offset": math.nan}, ("following.reference_offset", "finite")),
    ("string gain", {"follower": {"kp": "fast"}}, ("following.follower.kp", "finite number")),
    ("bad follower value", {"follower": {"lookahead": -1.0}}, ("following.follower", "lookahead")),
    ("two markers", {"marker_template": [[0.0, 0.0, 0.0], [0.05, 0.0, 0.0]]},
     ("following.marker_template", "need 3 markers")),
    ("collinear markers", {"marker_template": [[0.0, 0.0, 0.04], [0.02, 0.0, 0.04], [0.05, 0.0, 0.04]]},
     ("following.marker_template", "collinear")),
    ("string coordinate", {"marker_template": [[0.0, 0.0, "up"], [0.05, 0.02, 0.0], [0.05, -0.02, 0.0]]},
     ("following.marker_template[0]", "finite number")),
]


@pytest.mark.parametrize(("change", "fragments"), [c[1:] for c in _CASES], ids=[c[0] for c in _CASES])
def test_a_bad_following_block_fails_in_one_line_naming_the_field(tmp_path: Path, change, fragments):
    data = copy.deepcopy(_shipped("tsnake"))
    for key, value in change.items():
        if isinstance(value, dict):
            data["following"][key] = {**data["following"].get(key, {}), **value}
        else:
            data["following"][key] = value
    path = tmp_path / "tsnake.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(RobotConfigError) as err:
        load_robot(path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path))
    for fragment in fragments:
        assert fragment in text


def test_a_missing_key_is_named(tmp_path: Path):
    data = _shipped("tsnake")
    del data["following"]["half_width"]
    with pytest.raises(RobotConfigError, match=r"following\.half_width: missing"):
        robot_from_dict(data, source=tmp_path / "t.yaml")


def test_calibration_keeps_the_presets():
    assert load_robot("tsnake").following == load_robot("tsnake", calibrated=False).following


def test_each_shipped_robot_has_its_own_marker_template_and_stall_settings_are_read():
    tsnake, wheeled = load_robot("tsnake").following_presets, load_robot("wheeled_snake").following_presets
    assert tsnake.marker_template is not None and wheeled.marker_template is not None
    assert tsnake.marker_template != wheeled.marker_template
    assert tsnake.follower_config().stall_time == _shipped("tsnake")["following"]["follower"]["stall_time"]
    data = _shipped("wheeled_snake")
    del data["following"]["marker_template"]
    assert robot_from_dict(data).following_presets.marker_template is None  # optional: the twin's default
