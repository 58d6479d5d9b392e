"""The argument checks the launch files share (``snake_ros.launch_support``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from snake_ros.launch_support import absolute_if_path, choice, package_installed


def test_choice_names_the_argument_and_the_choices():
    assert choice("mode", "fast", ("realtime", "fast")) == "fast"
    with pytest.raises(ValueError, match=r"^mode:='slow': must be one of realtime, fast$"):
        choice("mode", "slow", ("realtime", "fast"))


def test_a_path_becomes_absolute_and_a_name_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_if_path("tsnake") == "tsnake"
    assert absolute_if_path("./my_snake.yaml") == str(tmp_path / "my_snake.yaml")
    assert absolute_if_path("worlds/w.yml") == os.path.join(str(tmp_path), "worlds", "w.yml")


def test_package_installed_reads_the_ament_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    index = tmp_path / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "present_pkg").write_text("")
    (tmp_path / "share" / "present_pkg").mkdir()
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path))
    assert package_installed("present_pkg")
    assert not package_installed("absent_pkg")
