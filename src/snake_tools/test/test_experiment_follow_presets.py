"""``snake experiment follow`` steers each robot with the ``following:`` presets of its robot YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from snake_core.config_files import config_dir
from snake_core.errors import ConfigError
from snake_core.robot import load_robot
from snake_tools.experiment.follow import load_settings


def test_the_follow_experiment_reads_the_presets_from_the_robot_yaml(tmp_path: Path):
    settings = load_settings()
    for name in ("wheeled_snake", "tsnake"):
        p = load_robot(name).following_presets
        r = settings["robots"][name]
        assert (r["gait"], r["drive"], r["half_width"]) == (p.gait, p.drive, p.half_width)
        assert (r["yaw_offset"], r["reference_offset"], r["follower"]) == (p.yaw_offset, p.reference_offset,
                                                                           dict(p.follower))
    # a preset repeated in the experiment file is refused, pointing at the robot YAML
    data = yaml.safe_load((config_dir() / "experiments" / "follow_experiment.yaml").read_text())
    data["robots"]["tsnake"]["reference_offset"] = 0.63
    path = tmp_path / "follow.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"robots\.tsnake\.reference_offset: unknown key.*config/robots/tsnake"):
        load_settings(path)
