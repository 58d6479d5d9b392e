"""The per-process cache of robot models, twin physics and worlds that trials share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snake_core.robot import load_robot, load_twin_params, resolve_robot_path
from snake_tools.commands.optimize import GaitTrial, defaults
from snake_tools.experiment import cache
from snake_tools.experiment.task import run_task


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    cache.clear()


def test_a_cached_robot_is_loaded_once_and_is_what_a_fresh_load_gives() -> None:
    robot = cache.robot("tsnake")
    assert cache.robot("tsnake") is robot
    fresh = load_robot("tsnake")
    assert repr(robot) == repr(fresh)  # the calibration overlay applied as load_robot does
    assert cache.twin_params("tsnake") == load_twin_params("tsnake")[0]
    assert cache.world("uneven") is cache.world("uneven")


def test_an_edited_robot_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "tsnake.yaml"
    text = resolve_robot_path("tsnake").read_text()
    assert "tail_start: 0.7485" in text
    path.write_text(text)
    assert cache.robot(path).gait("rolling")["tail_start"] == pytest.approx(0.7485)
    path.write_text(text.replace("tail_start: 0.7485", "tail_start: 0.7400"))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a later version of the file
    assert cache.robot(path).gait("rolling")["tail_start"] == pytest.approx(0.7400)


@pytest.mark.parametrize("world", ["flat", "uneven"])
def test_a_trial_scores_the_same_from_the_cache_as_from_fresh_loads(world: str) -> None:
    trial = GaitTrial("tsnake", world, defaults(load_robot("tsnake")), 2.0)
    first = run_task(trial)  # fills the cache
    assert run_task(trial) == first  # from the cache: nothing carried over from the first run
    cache.clear()
    assert run_task(trial) == first
